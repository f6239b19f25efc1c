//! Renderers: tables, plots and exports read from the store. Each locates an
//! experiment's results the same way ([`crate::driver::locate`]: the driver in status
//! mode), so a renderer never recomputes a stage.

pub mod export;
pub mod fidelity;
pub mod mcp;
pub mod plot;
pub mod report;
pub mod sft;
pub mod table2;
pub mod table3;
pub mod table4;
pub mod table5;
pub mod table7;
pub mod tokens;

use crate::experiment::Experiment;

/// A rendered table or why it is not: `(name, Markdown)`.
pub type Rendered = (&'static str, Result<String, String>);

/// The tables of environment `env` (an experiment table's name) that `otb report`
/// shows for `exp`, in order, rendered as `otb table` renders them; `released`: the
/// authors' released runs for Table 2's `released` rows. An environment with no
/// table here has none.
pub fn of_environment(
    env: &str,
    store: &pipeline::Store,
    exp: &Experiment,
    located: &crate::driver::Located,
    released: Option<&std::path::Path>,
) -> Vec<Rendered> {
    use report::TableReport;
    let md = |t: Result<String, pipeline::StageError>| t.map_err(|e| e.to_string());
    match env {
        "bfcl" => {
            let t2 = crate::bfcl::make_executor(None)
                .map_err(|e| e.to_string())
                .and_then(|exec| {
                    table2::build(store, Some((exp, located)), released, &exec, None)
                        .map_err(|e| e.to_string())
                })
                .map(|t| t.render(false));
            vec![
                ("Table 2 (BFCL-Opaque)", t2),
                (
                    "Table 5 (rounds to convergence)",
                    md(table5::build(exp, located).map(|t| t.render(false))),
                ),
                (
                    "Tokens per method",
                    md(tokens::build(exp, located).map(|t| t.render(false))),
                ),
            ]
        }
        "chess" => vec![(
            "Table 3 (chess)",
            md(table3::build(exp, located).map(|t| t.render(false))),
        )],
        "search" => vec![(
            "Table 4 (search)",
            md(table4::build(exp, located).map(|t| t.render(false))),
        )],
        "mcp" => vec![(
            "MCP servers (exact match)",
            md(mcp::build(exp, located).map(|t| t.render(false))),
        )],
        _ => Vec::new(),
    }
}

/// The note an environment table ends with about the run: nothing in the store yet
/// (`found` = 0 run cells: run it first), or how many stages are still to compute
/// (finished cells are shown).
pub fn progress_note(
    exp: &Experiment,
    what: &str,
    found: usize,
    reports: &[pipeline::NodeReport],
) -> Option<String> {
    let pending = crate::metrics::status::not_fresh(reports);
    if found == 0 {
        Some(format!(
            "{}: no {what} results in the store yet (run `otb run {}`)",
            exp.name,
            exp.path.display()
        ))
    } else if pending > 0 {
        Some(format!(
            "{}: {pending} stages not computed yet; finished cells are shown",
            exp.name
        ))
    } else {
        None
    }
}

/// The Trace-Free+ column's label for `exp` ([`TraceFreeBudget::label`]: `+TF` only
/// for a generator marked as fine-tuned, else `+TF-prompt`; ` traces` when
/// trace-based); when a row of `rows` has that method, a note says what the column
/// is and names its generator ([`tracefree_note`]).
///
/// [`TraceFreeBudget::label`]: crate::baselines::budget::TraceFreeBudget::label
pub fn tracefree_label<R>(
    exp: &Experiment,
    rows: &[R],
    method: impl Fn(&R) -> &String,
    notes: &mut Vec<String>,
) -> String {
    let label = exp.baselines.tracefree.label();
    if rows.iter().any(|r| method(r) == "tracefree") {
        notes.push(tracefree_note(exp, "tables"));
    }
    label
}

/// What the Trace-Free+ column of `exp` is, in one line under a table (`tables`:
/// `table` or `tables`, as the note's last words say): its label, whether it is the
/// paper's Trace-Free+ (a generator marked as fine-tuned) or a prompting baseline in
/// its request shape, trace-free or trace-based, and the generator it ran with.
pub fn tracefree_note(exp: &Experiment, tables: &str) -> String {
    let t = &exp.baselines.tracefree;
    let label = t.label();
    let generator = match &t.generator {
        Some(g) => g.clone(),
        None => {
            let editors: Vec<String> = exp.editors.iter().map(ToString::to_string).collect();
            format!("the editor ({})", editors.join(", "))
        }
    };
    let what = match t.traces {
        0 => "trace-free: each tool's interface alone".to_string(),
        k => format!("trace-based: each tool's interface and a summary of {k} of its single calls in tool play"),
    };
    if t.is_tuned() {
        format!("{label} = Trace-Free+ ({what}; fine-tuned generator {generator}), a method beyond the paper's {tables}")
    } else {
        format!("{label} = a prompting baseline in Trace-Free+'s request shape ({what}; generator {generator}, not a fine-tuned Trace-Free+ generator), a method beyond the paper's {tables}")
    }
}

/// An environment table as text: the title, one grid of methods (rows keyed by tool
/// set, model and source), then the notes.
pub fn method_table<R>(
    title: &str,
    rows: &[R],
    key: &dyn Fn(&R) -> report::GridKey,
    cell: &dyn Fn(&R) -> String,
    notes: &[String],
    tracefree_label: &str,
) -> String {
    let mut out = format!("{title}\n\n");
    out.push_str(&report::method_grid_with(rows, key, cell, tracefree_label));
    for n in notes {
        out.push_str(&format!("\nNote: {n}\n"));
    }
    out
}
