//! `otb table mcp`: the MCP environment's results -- per server (tool set) x method x
//! agent x editor, exact-match accuracy on the test tasks with its bootstrap interval,
//! mean token F1, tool calls and failed calls per task. The paper has no such table:
//! these are this run's numbers only.

use crate::driver::Located;
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
    let rows = scores
        .iter()
        .map(|Framed { cell, row: r, .. }| McpTableRow {
            tool_set: cell.setting.clone(),
            method: match cell.method_name() {
                "tracefree" => exp.baselines.tracefree.label(),
                m => m.to_string(),
            },
            agent: cell.agent.clone(),
            editor: cell.editor.clone(),
            accuracy_pct: 100.0 * r.accuracy,
            ci95_lo_pct: 100.0 * r.ci95_lo,
            ci95_hi_pct: 100.0 * r.ci95_hi,
            mean_f1: r.mean_f1,
            tasks: r.tasks,
            calls_per_task: r.tool_calls_per_task,
            failed_per_task: r.tool_errors_per_task,
        })
        .collect::<Vec<_>>();
    let notes = crate::tables::progress_note(exp, "MCP", rows.len(), &located.reports)
        .into_iter()
        .collect();
    Ok(McpTable { rows, notes })
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
