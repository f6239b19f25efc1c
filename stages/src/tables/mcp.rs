//! `otb table mcp`: the MCP environment's results -- per server (tool set) x method x
//! agent x editor, exact-match accuracy on the test tasks with its bootstrap interval,
//! mean token F1, tool calls and failed calls per task. The paper has no such table:
//! these are this run's numbers only. With `toolobserver = "online"` the
//! `toolobserver` row is its curve's last evaluated round (round 0 is shared by the
//! editors: an editor's result when its curve ended there), and a note lists each
//! curve's rounds.

use crate::driver::Located;
use crate::env::Cell;
use crate::experiment::Experiment;
use crate::mcp::McpScoreRow;
use crate::metrics::{Frame, Framed};
use crate::tables::report::{csv_row, md_row, TableReport};
use pipeline::{Row, StageError};
use serde::{Deserialize, Serialize};

/// One cell of the MCP table.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "mcp_table",
    doc = "one cell of the MCP table: a server x method x agent x editor on the test tasks"
)]
pub struct McpTableRow {
    /// The server and documentation setting (the cell's setting).
    pub tool_set: String,
    /// `gold`, `base`, `toolobserver`, a baseline or `ext:NAME`.
    pub method: String,
    /// Agent model spec.
    pub agent: String,
    /// Editor model spec (empty for Gold and Base).
    pub editor: String,
    /// Exact-match accuracy, %.
    pub accuracy_pct: f64,
    /// Bootstrap 2.5th percentile, %.
    pub ci95_lo_pct: f64,
    /// Bootstrap 97.5th percentile, %.
    pub ci95_hi_pct: f64,
    /// Mean token F1.
    pub mean_f1: f64,
    /// Test tasks.
    pub tasks: i64,
    /// Tool calls per task.
    pub calls_per_task: f64,
    /// Failed tool calls per task.
    pub failed_per_task: f64,
}

/// The MCP table and the notes printed under it.
pub struct McpTable {
    /// One row per test evaluation of the run.
    pub rows: Vec<McpTableRow>,
    /// Notes about the run (progress).
    pub notes: Vec<String>,
}

/// Builds the MCP table from the run's evaluate nodes.
pub fn build(exp: &Experiment, located: &Located) -> Result<McpTable, StageError> {
    let scores = Frame::<McpScoreRow>::of_stage(&located.run, crate::mcp::EVALUATE_STAGE)?.firsts();
    let framed: Vec<&Framed<'_, McpScoreRow>> = scores.iter().collect();
    let cells: Vec<&Cell> = framed.iter().map(|f| f.cell).collect();
    let editors: Vec<String> = exp.editors.iter().map(ToString::to_string).collect();
    let curves = online_curves(&cells, &editors);
    let rows = shown(&cells, &curves)
        .into_iter()
        .map(|(i, editor)| (framed[i], editor))
        .map(|(Framed { cell, row: r, .. }, editor)| McpTableRow {
            tool_set: cell.setting.clone(),
            method: match cell.method_name() {
                "tracefree" => exp.baselines.tracefree.label(),
                m => m.to_string(),
            },
            agent: cell.agent.clone(),
            editor,
            accuracy_pct: 100.0 * r.accuracy,
            ci95_lo_pct: 100.0 * r.ci95_lo,
            ci95_hi_pct: 100.0 * r.ci95_hi,
            mean_f1: r.mean_f1,
            tasks: r.tasks,
            calls_per_task: r.tool_calls_per_task,
            failed_per_task: r.tool_errors_per_task,
        })
        .collect::<Vec<_>>();
    let mut notes: Vec<String> = curves
        .iter()
        .map(|((set, agent, editor), rounds)| {
            let points: Vec<String> = rounds
                .iter()
                .map(|(k, i)| format!("r{k} {:.1}%", 100.0 * framed[*i].row.accuracy))
                .collect();
            format!(
                "toolobserver online on {set} (agent {agent}, editor {editor}): {} -- learned on each test task itself (test-time learning, as the paper's online mode)",
                points.join(" -> ")
            )
        })
        .collect();
    notes.extend(crate::tables::progress_note(
        exp,
        "MCP",
        rows.len(),
        &located.reports,
    ));
    Ok(McpTable { rows, notes })
}

/// One online ToolObserver curve: (tool set, agent, editor) and its evaluated rounds
/// `(round, index into the cells)`, in round order.
type Curve = ((String, String, String), Vec<(i64, usize)>);

/// The online ToolObserver curves among `cells` (evaluations, in drive order): round
/// 0 (no editor: shared by the editors) starts the curve of each of `editors`.
fn online_curves(cells: &[&Cell], editors: &[String]) -> Vec<Curve> {
    let mut out: Vec<Curve> = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        if !crate::mcp::online::is_online(c) {
            continue;
        }
        let of: Vec<String> = if c.editor.is_empty() {
            editors.to_vec()
        } else {
            vec![c.editor.clone()]
        };
        for e in of {
            let key = (c.setting.clone(), c.agent.clone(), e);
            match out.iter_mut().find(|(k, _)| *k == key) {
                Some((_, v)) => v.push((c.round, i)),
                None => out.push((key, vec![(c.round, i)])),
            }
        }
    }
    for (_, v) in &mut out {
        v.sort_by_key(|(k, _)| *k);
    }
    out
}

/// The rows the table shows, in drive order: `(index into the cells, editor shown)`
/// -- every evaluation outside an online curve as it is, and each online curve's
/// last evaluated round (at that round's place).
fn shown(cells: &[&Cell], curves: &[Curve]) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        if !crate::mcp::online::is_online(c) {
            out.push((i, c.editor.clone()));
            continue;
        }
        for ((_, _, editor), rounds) in curves {
            if rounds.last().is_some_and(|(_, last)| *last == i) {
                out.push((i, editor.clone()));
            }
        }
    }
    out
}

const HEADER: [&str; 10] = [
    "Tool set",
    "Method",
    "Agent",
    "Editor",
    "Accuracy %",
    "95% interval",
    "F1",
    "Tasks",
    "Calls / task",
    "Failed / task",
];

impl TableReport for McpTable {
    type Row = McpTableRow;
    const NAME: &'static str = "mcp";

    fn render(&self, csv: bool) -> String {
        let head = &HEADER;
        let mut out = String::new();
        if csv {
            let h: Vec<&dyn std::fmt::Display> = head.iter().map(|h| h as _).collect();
            out.push_str(&csv_row(&h));
        } else {
            out.push_str("MCP servers -- exact-match accuracy % on the test tasks (this run)\n\n");
            let h: Vec<&dyn std::fmt::Display> = head.iter().map(|h| h as _).collect();
            out.push_str(&md_row(&h));
            out.push_str(&format!("|{}\n", "---|".repeat(head.len())));
        }
        for r in &self.rows {
            let (acc, lo, hi, f1) = (
                format!("{:.1}", r.accuracy_pct),
                format!("{:.1}", r.ci95_lo_pct),
                format!("{:.1}", r.ci95_hi_pct),
                format!("{:.2}", r.mean_f1),
            );
            let interval = format!("[{lo}, {hi}]");
            let (calls, failed) = (
                format!("{:.2}", r.calls_per_task),
                format!("{:.2}", r.failed_per_task),
            );
            let cells: [&dyn std::fmt::Display; 10] = [
                &r.tool_set,
                &r.method,
                &r.agent,
                &r.editor,
                &acc,
                &interval,
                &f1,
                &r.tasks,
                &calls,
                &failed,
            ];
            out.push_str(&if csv { csv_row(&cells) } else { md_row(&cells) });
        }
        if !csv {
            for n in &self.notes {
                out.push_str(&format!("\nNote: {n}\n"));
            }
        }
        out
    }

    fn rows(&self) -> &[McpTableRow] {
        &self.rows
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::{Method, Split, Step};

    fn cell(method: Method, editor: &str, round: i64, split: Option<Split>) -> Cell {
        Cell {
            env: "mcp",
            setting: "git:names".into(),
            method: Some(method),
            agent: "a".into(),
            editor: editor.into(),
            round,
            step: Step::Play { split },
            ..Cell::default()
        }
    }

    /// An online curve shows its last evaluated round; round 0 (no editor) stands for
    /// an editor whose curve ended there; offline cells are shown as they are.
    #[test]
    fn the_online_curve_shows_its_last_round() {
        let cells = [
            cell(Method::Base, "", 0, Some(Split::Test)),
            cell(Method::ToolObserver, "", 0, None),
            cell(Method::ToolObserver, "e", 1, None),
            cell(Method::ToolObserver, "e", 2, None),
            cell(Method::ToolObserver, "f", 2, Some(Split::Test)),
        ];
        let refs: Vec<&Cell> = cells.iter().collect();
        let editors = ["e".to_string(), "g".to_string()];
        let curves = online_curves(&refs, &editors);
        assert_eq!(curves.len(), 2);
        assert_eq!(curves[0].0 .2, "e");
        assert_eq!(curves[0].1, [(0, 1), (1, 2), (2, 3)]);
        assert_eq!(curves[1].0 .2, "g");
        assert_eq!(curves[1].1, [(0, 1)]);
        assert_eq!(
            shown(&refs, &curves),
            [
                (0, String::new()),
                (1, "g".to_string()),
                (3, "e".to_string()),
                (4, "f".to_string())
            ]
        );
        // Without online cells, every row as it is.
        let offline: Vec<&Cell> = [&cells[0], &cells[4]].into();
        let none = online_curves(&offline, &editors);
        assert!(none.is_empty());
        assert_eq!(shown(&offline, &none).len(), 2);
    }
}
