//! `otb table tokens`: what each method spent, summed from the per-call rows in the
//! store (`toolobserver.md`, "Token accounting"), per setting x method x agent x editor
//! ([`crate::metrics::tokens`] sums them; this file formats the table). The columns' definitions are in that module's documentation.

use crate::driver::Located;
use crate::experiment::Experiment;
use crate::metrics::tokens::TokenStages;
use pipeline::StageError;

pub use crate::metrics::tokens::TokenRow;

/// The token table and the notes printed under it.
pub struct Tokens {
    /// One row per setting, method, agent and editor.
    pub rows: Vec<TokenRow>,
    /// Notes about the run (no results yet).
    pub notes: Vec<String>,
}

/// Builds the token table from the experiment's outputs in `store`.
pub fn build(exp: &Experiment, located: &Located) -> Result<Tokens, StageError> {
    let (out, _) = (&located.run, &located.reports);
    // The built-in baselines' stages and the external methods' (`ext:<name>`): every
    // stage whose `doc_calls` rows are a method's own spending.
    let doc_stages: Vec<&str> = crate::experiment::BASELINES
        .iter()
        .copied()
        .chain([crate::baselines::external::STAGE])
        .collect();
    let rows = crate::metrics::tokens::per_method(
        out,
        &TokenStages {
            explore: crate::bfcl::explore::STAGE,
            reflect: crate::batch_reflect::STAGE,
            baselines: &doc_stages,
        },
    )?;
    let mut notes = Vec::new();
    if rows.is_empty() {
        notes.push(format!(
            "{}: no results in the store yet (run `otb run {}`)",
            exp.name,
            exp.path.display()
        ));
    }
    Ok(Tokens { rows, notes })
}

/// The header line of the table's CSV form.
pub const CSV_HEADER: &str =
    "setting,method,agent,editor,calls,exploration,editing,evaluation,reasoning,docs,ratio";

use crate::tables::report::{csv_row, md_row};

impl crate::tables::report::TableReport for Tokens {
    type Row = TokenRow;
    const NAME: &'static str = "tokens";

    fn rows(&self) -> &[TokenRow] {
        &self.rows
    }

    fn render(&self, csv: bool) -> String {
        let mut out = String::new();
        if csv {
            out.push_str(CSV_HEADER);
            out.push('\n');
            for r in &self.rows {
                out.push_str(&csv_row(&cells(r, &ratio(r), true)));
            }
            return out;
        }
        out.push_str("Tokens per method (prompt + completion), summed from the per-call rows in the store.\n");
        out.push_str("docs = exploration + editing; ratio = docs / ToolObserver's docs (paper: P2P 3.5-7.5x).\n\n");
        out.push_str("| Setting | Method | Agent | Editor | Calls | Exploration | Editing | Evaluation | Docs | Ratio |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for r in &self.rows {
            out.push_str(&md_row(&cells(r, &ratio(r), false)));
        }
        crate::tables::report::end_with_notes(out, &self.notes)
    }
}

/// A row's ratio to ToolObserver as printed (empty where there is none).
fn ratio(r: &TokenRow) -> String {
    r.ratio.map(|x| format!("{x:.2}")).unwrap_or_default()
}

/// A row's printed cells, `ratio` its printed ratio; the CSV also has the reasoning
/// tokens.
fn cells<'r>(
    r: &'r TokenRow,
    ratio: &'r dyn std::fmt::Display,
    csv: bool,
) -> Vec<&'r dyn std::fmt::Display> {
    let mut c: Vec<&dyn std::fmt::Display> = vec![
        &r.setting,
        &r.method,
        &r.agent,
        &r.editor,
        &r.calls,
        &r.exploration,
        &r.editing,
        &r.evaluation,
    ];
    if csv {
        c.push(&r.reasoning);
    }
    c.push(&r.docs);
    c.push(ratio);
    c
}
