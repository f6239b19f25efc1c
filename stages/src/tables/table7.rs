//! `otb table table7`: the editor ablation -- ToolObserver's final E per agent (rows)
//! and editor (columns), from an experiment with `models.agents` / `models.editors`
//! lists. A cell is the instance-weighted mean over the experiment's settings of E at
//! the last round of each setting's chain.

use crate::bfcl::summarize::SummaryRow;
use crate::driver::Located;
use crate::experiment::Experiment;
use pipeline::{Row, StageError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One cell of Table 7: ToolObserver's final E for one agent and editor.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "table7",
    doc = "ToolObserver's final E for one agent x editor pair"
)]
pub struct EditorCell {
    /// Agent model.
    pub agent: String,
    /// Editor model.
    pub editor: String,
    /// Instances (summed over settings).
    pub n: i64,
    /// Execution accuracy at the last round, instance-weighted.
    pub e: f64,
    /// Settings that have results.
    pub settings: i64,
}

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

/// The cells from summary rows (pure; tested below).
pub fn cells(rows: &[SummaryRow]) -> Vec<EditorCell> {
    // (agent, editor, setting) -> last round's row
    let mut last: BTreeMap<(&str, &str, &str), &SummaryRow> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.method == "toolobserver") {
        let k = (r.agent.as_str(), r.editor.as_str(), r.setting.as_str());
        if last.get(&k).is_none_or(|p| p.round < r.round) {
            last.insert(k, r);
        }
    }
    let mut acc: BTreeMap<(&str, &str), (f64, i64, i64)> = BTreeMap::new();
    for ((a, e, _), r) in last {
        let c = acc.entry((a, e)).or_default();
        c.0 += r.e * r.n as f64;
        c.1 += r.n;
        c.2 += 1;
    }
    acc.into_iter()
        .map(|((a, e), (sum, n, settings))| EditorCell {
            agent: a.to_string(),
            editor: e.to_string(),
            n,
            e: if n > 0 { sum / n as f64 } else { 0.0 },
            settings,
        })
        .collect()
}

/// Builds Table 7 from the experiment's `summarize` output in `store`.
pub fn build(exp: &Experiment, located: &Located) -> Result<Table7, StageError> {
    let (out, _) = (&located.run, &located.reports);
    let rows: Vec<SummaryRow> = match out.by_stage(crate::bfcl::summarize::STAGE).next() {
        Some(s) => s.entry.read()?,
        None => Vec::new(),
    };
    let mut notes = Vec::new();
    let cells = cells(&rows);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn row(agent: &str, editor: &str, setting: &str, round: i64, n: i64, e: f64) -> SummaryRow {
        SummaryRow {
            label: String::new(),
            setting: setting.into(),
            method: "toolobserver".into(),
            agent: agent.into(),
            editor: editor.into(),
            round,
            n,
            e,
            p: 0.0,
            a: 0.0,
            a_corrected: 0.0,
            e_lo: 0.0,
            e_hi: 0.0,
            p_lo: 0.0,
            p_hi: 0.0,
            a_lo: 0.0,
            a_hi: 0.0,
            errors: 0,
        }
    }

    #[test]
    fn last_round_per_setting_weighted_by_instances() {
        let rows = vec![
            row("A", "X", "names", 0, 10, 0.0),
            row("A", "X", "names", 2, 10, 0.5),
            row("A", "X", "names+desc", 1, 30, 1.0),
            row("A", "Y", "names", 1, 10, 0.2),
        ];
        let c = cells(&rows);
        assert_eq!(c.len(), 2);
        assert_eq!((c[0].agent.as_str(), c[0].editor.as_str()), ("A", "X"));
        assert!((c[0].e - (0.5 * 10.0 + 30.0) / 40.0).abs() < 1e-12);
        assert_eq!((c[0].n, c[0].settings), (40, 2));
        assert!((c[1].e - 0.2).abs() < 1e-12);
    }
}
