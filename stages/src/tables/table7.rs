//! `otb table table7`: the editor ablation -- ToolObserver's final E per agent (rows)
//! and editor (columns), from an experiment with `models.agents` / `models.editors`
//! lists. A cell is the instance-weighted mean over the experiment's settings of E at
//! the last round of each setting's chain.

use crate::bfcl::summarize::SummaryRow;
use crate::driver::Located;
use crate::experiment::Experiment;
use crate::metrics::accuracy;
use pipeline::StageError;

pub use crate::rows::EditorCell;

/// Table 7 (editor ablation): agents as rows, editors as columns, and the notes
/// printed under it.
pub struct Table7 {
    /// The experiment's agent model specs (the rows).
    pub agents: Vec<String>,
    /// The experiment's editor model specs (the columns).
    pub editors: Vec<String>,
    /// One cell per agent and editor pair with results.
    pub cells: Vec<EditorCell>,
    /// Notes about the run (no ToolObserver results yet).
    pub notes: Vec<String>,
}

/// Builds Table 7 from the experiment's `summarize` output in `store`.
pub fn build(exp: &Experiment, located: &Located) -> Result<Table7, StageError> {
    let (out, _) = (&located.run, &located.reports);
    let rows: Vec<SummaryRow> = match out.by_stage(crate::bfcl::summarize::STAGE).next() {
        Some(s) => s.entry.read()?,
        None => Vec::new(),
    };
    let mut notes = Vec::new();
    let cells = accuracy::editor_finals(&rows);
    if cells.is_empty() {
        notes.push(format!(
            "{}: no ToolObserver results in the store yet (methods must include toolobserver; run `otb run {}`)",
            exp.name,
            exp.path.display()
        ));
    }
    Ok(Table7 {
        agents: exp.agents.iter().map(ToString::to_string).collect(),
        editors: exp.editors.iter().map(ToString::to_string).collect(),
        cells,
        notes,
    })
}

impl crate::tables::report::TableReport for Table7 {
    type Row = EditorCell;
    const NAME: &'static str = "table7";

    fn rows(&self) -> &[EditorCell] {
        &self.cells
    }

    fn render(&self, csv: bool) -> String {
        let mut out = String::new();
        if csv {
            out.push_str("agent,editor,n,E,settings\n");
            for c in &self.cells {
                out.push_str(&format!(
                    "{},{},{},{:.4},{}\n",
                    c.agent, c.editor, c.n, c.e, c.settings
                ));
            }
            return out;
        }
        out.push_str(
            "Table 7 -- editor ablation: ToolObserver's final E (rows = agent, columns = editor)\n",
        );
        out.push_str("(paper: GPT-5 agent .64 / .62 / .60 with GPT-5 / GPT-5-mini / o3 editors; GPT-5-mini agent .62 / .54 / .48)\n\n");
        out.push_str(&format!(
            "| Agent \\ Editor | {} |\n|---|{}\n",
            self.editors.join(" | "),
            "---|".repeat(self.editors.len())
        ));
        for a in &self.agents {
            let vals: Vec<String> = self
                .editors
                .iter()
                .map(|e| {
                    self.cells
                        .iter()
                        .find(|c| &c.agent == a && &c.editor == e)
                        .map(|c| format!("{:.2}", c.e))
                        .unwrap_or_default()
                })
                .collect();
            out.push_str(&format!("| {a} | {} |\n", vals.join(" | ")));
        }
        crate::tables::report::end_with_notes(out, &self.notes)
    }
}
