//! The tables stages exchange. Each struct is one row; its `#[derive(Row)]`
//! attributes are the documented schema that `otb export` writes beside the data.

use pipeline::table::ColType;
use pipeline::{Column, Row};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One BFCL instance with its original documentation and ground truth.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "instances",
    doc = "one BFCL-Opaque instance (question, original docs, ground truth)"
)]
pub struct InstanceRow {
    /// BFCL id, e.g. `exec_simple_0`.
    pub instance_id: String,
    /// `exec_simple` or `exec_multiple`.
    pub category: String,
    /// Position within the category.
    pub idx: i64,
    /// The user's request.
    pub question: String,
    /// Original function docs (BFCL JSON schema dialect).
    pub functions: Value,
    /// Ground-truth calls as Python call strings.
    pub ground_truth: Value,
    /// Per ground-truth call: `exact_match`, `real_time_match` or `structural_match`.
    pub execution_result_type: Value,
}

/// The documentation an agent sees for one instance at one round.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "docs",
    doc = "the tool documentation shown to the agent, per instance and round"
)]
pub struct DocRow {
    /// BFCL id.
    pub instance_id: String,
    /// `gold`, `names`, `names+desc` or `names+params`.
    pub setting: String,
    /// 0 = opacified docs; k = after k reflection rounds.
    pub round: i64,
    /// Tool definitions as JSON schema (name, description, parameters?).
    pub tools: Value,
    /// `[[real name, shown name], ...]` (grading only; never shown to models).
    pub name_mapping: Value,
    /// The descriptions changed in this round (always true at round 0).
    pub changed: bool,
    /// No further rewrites (ToolObserver convergence).
    pub frozen: bool,
    /// Demonstrations shown to the agent with these docs (Play2Prompt):
    /// `[{"query": .., "function": .., "arguments": {..}}]`, or `null`.
    #[serde(default)]
    pub demos: Value,
}

/// One tool call the agent emitted.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CallRecord {
    /// The name of the function the agent called.
    pub function: String,
    /// Arguments as a JSON object, or `null` when the model's text was not valid JSON.
    pub args: Value,
    /// The raw argument text when it did not parse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// One agent turn on one instance.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "trajectories",
    doc = "one agent turn per instance and round, with its tool calls and token usage"
)]
pub struct TrajectoryRow {
    /// BFCL id.
    pub instance_id: String,
    /// ToolObserver round (0 = base docs).
    pub round: i64,
    /// Agent model spec.
    pub model: String,
    /// The tool calls of the first assistant message (`{function, args, raw?}` each).
    pub calls: Vec<CallRecord>,
    /// Assistant text, if any.
    pub content: Option<String>,
    /// Null, or the class of a model call that failed after retries (rate_limit,
    /// transient, malformed, refusal, ...): the instance is then an error row, not a
    /// model mistake.
    pub error_kind: Option<String>,
    /// Error message of a failed model call.
    pub error: Option<String>,
    /// Prompt tokens.
    pub prompt_tokens: i64,
    /// Completion tokens.
    pub completion_tokens: i64,
    /// Reasoning tokens.
    pub reasoning_tokens: i64,
    /// Wall time of the call.
    pub latency_ms: i64,
    /// Copied from the previous round because this instance's docs did not change.
    pub reused: bool,
}

/// The grade of one instance.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "scores",
    doc = "E/P/A verdict per instance and round, with the execution outputs"
)]
pub struct ScoreRow {
    /// BFCL id.
    pub instance_id: String,
    /// `exec_simple` or `exec_multiple`.
    pub category: String,
    /// ToolObserver round.
    pub round: i64,
    /// Execution accuracy verdict.
    pub e: bool,
    /// Why E failed (or `ok`).
    pub e_reason: String,
    /// Parameter accuracy.
    pub p: f64,
    /// AST accuracy, reference behaviour.
    pub a: f64,
    /// AST accuracy with the hallucination check against the tools shown.
    pub a_corrected: f64,
    /// Per model call: `{"ok": <python value as JSON>, "repr": "..."}` or `{"error": "..."}`.
    pub outputs: Value,
    /// Outcome line the editor is shown (SUCCESS / ERROR / Model output ...).
    pub outcome: String,
    /// Null, or the class of the failed model call.
    pub error_kind: Option<String>,
}

/// One aggregate of the summary: E, P and A of one score table (a setting, method,
/// agent, editor and round), with bootstrap intervals.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "summary",
    doc = "E/P/A per setting and round with bootstrap 95% intervals"
)]
pub struct SummaryRow {
    /// Setting/round label.
    pub label: String,
    /// Documentation setting.
    pub setting: String,
    /// `gold`, `base`, `toolobserver`, `easytool`, `play2prompt` or `draft`.
    pub method: String,
    /// Agent model spec.
    pub agent: String,
    /// Editor model spec (empty: none).
    pub editor: String,
    /// ToolObserver round (0 = base docs).
    pub round: i64,
    /// Instances.
    pub n: i64,
    /// Execution accuracy.
    pub e: f64,
    /// Parameter accuracy.
    pub p: f64,
    /// AST accuracy (reference behaviour).
    pub a: f64,
    /// AST accuracy with the hallucination check.
    pub a_corrected: f64,
    /// E, bootstrap 2.5th percentile.
    pub e_lo: f64,
    /// E, bootstrap 97.5th percentile.
    pub e_hi: f64,
    /// P, 2.5th percentile.
    pub p_lo: f64,
    /// P, 97.5th percentile.
    pub p_hi: f64,
    /// A, 2.5th percentile.
    pub a_lo: f64,
    /// A, 97.5th percentile.
    pub a_hi: f64,
    /// Instances whose model call failed (error rows).
    pub errors: i64,
}

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

/// What the editor did for one instance in one reflection round.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "edits",
    doc = "one editor request per instance and reflection round"
)]
pub struct EditRow {
    /// BFCL id.
    pub instance_id: String,
    /// Reflection round (1..K).
    pub round: i64,
    /// Editor model spec.
    pub model: String,
    /// A request was sent (false: frozen or skipped).
    pub sent: bool,
    /// The editor's reply text.
    pub reply: Option<String>,
    /// Tool names whose description changed.
    pub updated: Vec<String>,
    /// Blocks that needed the lenient parsing rules.
    pub lenient_parses: i64,
    /// Null, or the class of a failed editor call.
    pub error_kind: Option<String>,
    /// Prompt tokens.
    pub prompt_tokens: i64,
    /// Completion tokens.
    pub completion_tokens: i64,
    /// Reasoning tokens.
    pub reasoning_tokens: i64,
}

/// One model call a documentation method (EasyTool, Play2Prompt, DRAFT) made while
/// producing its docs: the per-call rows that `otb table tokens` sums.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "doc_calls",
    doc = "one model call of a documentation method (baselines), with its token usage"
)]
pub struct DocCallRow {
    /// BFCL id.
    pub instance_id: String,
    /// The shown tool name the call was about (empty for tool-set-level calls).
    pub tool: String,
    /// `easytool`, `play2prompt`, `draft` or `tracefree`.
    pub method: String,
    /// The step of the method (`condense`, `play`, `critique`, `explorer`, ...).
    pub step: String,
    /// `exploration` (discovering tool behaviour) or `editing` (writing docs).
    pub phase: String,
    /// `editor` or `agent` (the task model, e.g. Play2Prompt's validation runs).
    pub role: String,
    /// Model spec.
    pub model: String,
    /// Null, or the class of a failed model call (or of an unusable reply:
    /// `malformed-reply`, `description-cut`).
    pub error_kind: Option<String>,
    /// Prompt tokens.
    pub prompt_tokens: i64,
    /// Completion tokens.
    pub completion_tokens: i64,
    /// Reasoning tokens.
    pub reasoning_tokens: i64,
}

/// One tool execution a documentation method made (Play2Prompt tool play, DRAFT
/// exploration): what was called and what came back.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "tool_runs",
    doc = "one tool execution made by a documentation method"
)]
pub struct ToolRunRow {
    /// BFCL id.
    pub instance_id: String,
    /// Shown tool name.
    pub tool: String,
    /// `play2prompt` or `draft`.
    pub method: String,
    /// Step of the method.
    pub step: String,
    /// The arguments as JSON.
    pub arguments: Value,
    /// The call returned without an exception.
    pub ok: bool,
    /// Python `repr` of the result, or the error text.
    pub output: String,
}

/// `[[real name, shown name], ...]` of a docs row (pairs that are not two strings are
/// skipped).
pub fn name_mapping(v: &Value) -> Vec<(String, String)> {
    v.as_array()
        .map(|a| {
            a.iter()
                .filter_map(|p| {
                    Some((
                        p.get(0)?.as_str()?.to_string(),
                        p.get(1)?.as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A column `otb export` adds to every labelled table, after the table's own: one
/// coordinate of the grid cell (`at::Cell`) of the node that wrote the row.
pub struct CellColumn {
    /// Its plain name; see [`cell_column_name`] for the name it takes in a table.
    pub name: &'static str,
    /// Its type (`Str` or `I64`; never null in an export).
    pub ty: ColType,
    /// What it holds.
    pub doc: &'static str,
}

/// The cell's columns, in the order they follow a labelled table's own columns (the
/// four that exports had before the others came, then the others).
pub const CELL_COLUMNS: [CellColumn; 10] = [
    CellColumn {
        name: "node",
        ty: ColType::Str,
        doc: "Cell: the experiment node that wrote the row.",
    },
    CellColumn {
        name: "method",
        ty: ColType::Str,
        doc: "Cell: `gold`, `base`, `toolobserver`, `toolobserver-guard`, `easytool`, `play2prompt`, `draft` or `tracefree`; empty outside the grid.",
    },
    CellColumn {
        name: "agent",
        ty: ColType::Str,
        doc: "Cell: agent model spec of the chain (empty: none).",
    },
    CellColumn {
        name: "editor",
        ty: ColType::Str,
        doc: "Cell: editor model spec of the chain (empty: none).",
    },
    CellColumn {
        name: "env",
        ty: ColType::Str,
        doc: "Cell: the environment's experiment table (`bfcl`, `chess`, `search`, ...).",
    },
    CellColumn {
        name: "setting",
        ty: ColType::Str,
        doc: "Cell: documentation setting (BFCL) or tool set (chess, search).",
    },
    CellColumn {
        name: "round",
        ty: ColType::I64,
        doc: "Cell: documentation round the node plays with, or makes.",
    },
    CellColumn {
        name: "step",
        ty: ColType::Str,
        doc: "Cell: `source`, `play` or `edit`.",
    },
    CellColumn {
        name: "split",
        ty: ColType::Str,
        doc: "Cell: `train` or `test` for an offline play step; empty otherwise.",
    },
    CellColumn {
        name: "seed",
        ty: ColType::I64,
        doc: "Cell: the chain's seed.",
    },
];

/// The name the cell column `plain` takes in a table that has a column named `n`
/// when `own(n)`: its plain name, or, where the table has a column of that name
/// (which keeps it), the name with `cell_` before it -- so a table never has two
/// columns of one name.
pub fn cell_column_name(plain: &str, own: impl Fn(&str) -> bool) -> String {
    let mut name = plain.to_string();
    while own(&name) {
        name.insert_str(0, "cell_");
    }
    name
}

/// An exported table: its name, its schema text, and whether its rows get the grid
/// cell's columns ([`CELL_COLUMNS`]).
pub struct Exported {
    /// The table's name (its file is `<table>.parquet`).
    pub table: &'static str,
    doc: &'static str,
    columns: &'static [Column],
    /// Its rows get the grid cell's columns ([`CELL_COLUMNS`]) after their own.
    pub labelled: bool,
}

impl Exported {
    /// The exported table of row type `R`.
    pub fn of<R: Row>(labelled: bool) -> Exported {
        Exported {
            table: R::TABLE,
            doc: R::DOC,
            columns: R::columns(),
            labelled,
        }
    }

    /// The exported file's column names, in order: the table's own, then, when
    /// labelled, the cell's ([`CELL_COLUMNS`], named by [`cell_column_name`]).
    pub fn column_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.columns.iter().map(|c| c.name.to_string()).collect();
        if self.labelled {
            for c in &CELL_COLUMNS {
                names.push(cell_column_name(c.name, |n| {
                    self.columns.iter().any(|o| o.name == n)
                }));
            }
        }
        names
    }

    /// Appends the table's schema section (Markdown: a heading, what a row is, and
    /// a column table: the table's own columns, then the cell's when labelled, in
    /// the order of the exported file) to `out`.
    pub fn schema(&self, out: &mut String) {
        out.push_str(&format!(
            "## {}.parquet\n\nOne row = {}.\n\n| column | type | meaning |\n|---|---|---|\n",
            self.table, self.doc
        ));
        for c in self.columns {
            // A column's doc is its field's `///` text: a `|` in it (a code span
            // included) would end the Markdown table's cell.
            let doc = c.doc.replace('|', "\\|");
            out.push_str(&format!("| {} | {} | {doc} |\n", c.name, c.ty.name()));
        }
        if self.labelled {
            for c in &CELL_COLUMNS {
                let name = cell_column_name(c.name, |n| self.columns.iter().any(|o| o.name == n));
                let doc = c.doc.replace('|', "\\|");
                out.push_str(&format!("| {name} | {} | {doc} |\n", c.ty.name()));
            }
        }
        out.push('\n');
    }
}
