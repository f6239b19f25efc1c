//! `otb released score`: the authors' released BFCL runs rescored by this project's
//! grader, one row per run directory and ToolObserver version.

use datasets::bfcl::executor::Executor;
use datasets::bfcl::released::{score_tree, ReleasedError, ScoreRow};
use std::path::Path;

/// Rescores every released run under `root` with `exec` (`expected`: the reference
/// `tool_configs/` directory, see [`score_tree`]).
pub fn score(
    root: &Path,
    exec: &Executor,
    expected: Option<&Path>,
) -> Result<Vec<ScoreRow>, ReleasedError> {
    score_tree(root, exec, expected)
}

/// CSV (`method,config,gen_hypers,version,E,P,A,n`) or a Markdown table; a last line
/// (CSV: to stderr by the caller's choice) counts disagreements with the released
/// per-instance verdicts.
pub fn render(rows: &[ScoreRow], csv: bool) -> String {
    let mut out = String::new();
    if csv {
        out.push_str(CSV_HEADER);
        for r in rows {
            out.push_str(&csv_line(
                &r.method,
                &r.config,
                &r.gen_hypers,
                r.version,
                [r.e, r.p, r.a],
                r.n,
            ));
        }
    } else {
        out.push_str("| method | config | gen_hypers | version | E | P | A | A (corrected) | n | disagreements |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for r in rows {
            out.push_str(&format!(
                "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {:.3} | {} | {} |\n",
                r.method,
                r.config,
                r.gen_hypers,
                r.version,
                r.e,
                r.p,
                r.a,
                r.a_corrected,
                r.n,
                r.disagreements_with_released_scored
            ));
        }
    }
    out
}

/// Header of the per-run CSV that `otb released score` and `otb import` print.
pub const CSV_HEADER: &str = "method,config,gen_hypers,version,E,P,A,n\n";

/// One line of that CSV.
pub fn csv_line(
    method: &str,
    config: &str,
    gen_hypers: &str,
    version: u32,
    epa: [f64; 3],
    n: usize,
) -> String {
    format!(
        "{},{},{},{version},{:.4},{:.4},{:.4},{n}\n",
        csv_field(method),
        csv_field(config),
        csv_field(gen_hypers),
        epa[0],
        epa[1],
        epa[2]
    )
}

/// Total instances whose verdict differs from the released `scored` files.
pub fn disagreements(rows: &[ScoreRow]) -> usize {
    rows.iter()
        .map(|r| r.disagreements_with_released_scored)
        .sum()
}

/// Quote a CSV field when needed (config names contain brackets and colons, no commas,
/// but be safe).
pub fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
