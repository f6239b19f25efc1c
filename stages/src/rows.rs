//! The tables stages exchange. Each struct is one row; its `#[derive(Row)]`
//! attributes are the documented schema that `otb export` writes beside the data.

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
    #[row(doc = "BFCL id, e.g. exec_simple_0")]
    pub instance_id: String,
    /// `exec_simple` or `exec_multiple`.
    #[row(doc = "exec_simple or exec_multiple")]
    pub category: String,
    /// Position within the category.
    #[row(doc = "position within the category")]
    pub idx: i64,
    /// The user's request.
    #[row(doc = "the user's request")]
    pub question: String,
    /// Original function docs (BFCL JSON schema dialect).
    #[row(doc = "original function docs (BFCL JSON schema dialect)")]
    pub functions: Value,
    /// Ground-truth calls as Python call strings.
    #[row(doc = "ground-truth calls as Python call strings")]
    pub ground_truth: Value,
    /// Per ground-truth call: `exact_match`, `real_time_match` or `structural_match`.
    #[row(doc = "per ground-truth call: exact_match / real_time_match / structural_match")]
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
    #[row(doc = "BFCL id")]
    pub instance_id: String,
    /// `gold`, `names`, `names+desc` or `names+params`.
    #[row(doc = "gold, names, names+desc or names+params")]
    pub setting: String,
    /// 0 = opacified docs; k = after k reflection rounds.
    #[row(doc = "0 = opacified docs; k = after k reflection rounds")]
    pub round: i64,
    /// Tool definitions as JSON schema (name, description, parameters?).
    #[row(doc = "tool definitions as JSON schema (name, description, parameters?)")]
    pub tools: Value,
    /// `[[real name, shown name], ...]` (grading only; never shown to models).
    #[row(doc = "[[real name, shown name], ...] (grading only; never shown to models)")]
    pub name_mapping: Value,
    /// The descriptions changed in this round (always true at round 0).
    #[row(doc = "documentation changed in this round")]
    pub changed: bool,
    /// No further rewrites (ToolObserver convergence).
    #[row(doc = "instance converged: no more rewrites")]
    pub frozen: bool,
    /// Demonstrations shown to the agent with these docs (Play2Prompt):
    /// `[{"query": .., "function": .., "arguments": {..}}]`, or `null`.
    #[serde(default)]
    #[row(doc = "demonstrations put in the agent prompt (Play2Prompt), or null")]
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
    #[row(doc = "BFCL id")]
    pub instance_id: String,
    /// ToolObserver round (0 = base docs).
    #[row(doc = "ToolObserver round (0 = base docs)")]
    pub round: i64,
    /// Agent model spec.
    #[row(doc = "agent model spec")]
    pub model: String,
    /// The tool calls of the first assistant message (`{function, args, raw?}` each).
    #[row(doc = "[{function, args, raw?}] tool calls of the first assistant message")]
    pub calls: Vec<CallRecord>,
    /// Assistant text, if any.
    #[row(doc = "assistant text, if any")]
    pub content: Option<String>,
    /// Set when the model call failed after retries (rate_limit, transient, malformed,
    /// refusal, ...): the instance is then an error row, not a model mistake.
    #[row(doc = "null, or the class of a failed model call")]
    pub error_kind: Option<String>,
    /// Error message of a failed model call.
    #[row(doc = "error message of a failed model call")]
    pub error: Option<String>,
    /// Prompt tokens.
    #[row(doc = "prompt tokens")]
    pub prompt_tokens: i64,
    /// Completion tokens.
    #[row(doc = "completion tokens")]
    pub completion_tokens: i64,
    /// Reasoning tokens.
    #[row(doc = "reasoning tokens")]
    pub reasoning_tokens: i64,
    /// Wall time of the call.
    #[row(doc = "wall time of the call")]
    pub latency_ms: i64,
    /// Copied from the previous round because this instance's docs did not change.
    #[row(doc = "copied from the previous round (docs unchanged)")]
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
    #[row(doc = "BFCL id")]
    pub instance_id: String,
    /// `exec_simple` or `exec_multiple`.
    #[row(doc = "exec_simple or exec_multiple")]
    pub category: String,
    /// ToolObserver round.
    #[row(doc = "ToolObserver round")]
    pub round: i64,
    /// Execution accuracy verdict.
    #[row(doc = "execution accuracy verdict")]
    pub e: bool,
    /// Why E failed (or `ok`).
    #[row(doc = "why E failed (or ok)")]
    pub e_reason: String,
    /// Parameter accuracy.
    #[row(doc = "parameter accuracy")]
    pub p: f64,
    /// AST accuracy, reference behaviour.
    #[row(doc = "AST accuracy, reference behaviour")]
    pub a: f64,
    /// AST accuracy with the hallucination check against the tools shown.
    #[row(doc = "AST accuracy with the hallucination check against the tools shown")]
    pub a_corrected: f64,
    /// Per model call: `{"ok": <python value as JSON>, "repr": "..."}` or `{"error": "..."}`.
    #[row(doc = "per call: {ok, repr} or {error}")]
    pub outputs: Value,
    /// Outcome line the editor is shown (SUCCESS / ERROR / Model output ...).
    #[row(doc = "the outcome text shown to the editor")]
    pub outcome: String,
    /// `None`, or the class of the failed model call.
    #[row(doc = "null, or the class of the failed model call")]
    pub error_kind: Option<String>,
}

/// What the editor did for one instance in one reflection round.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "edits",
    doc = "one editor request per instance and reflection round"
)]
pub struct EditRow {
    /// BFCL id.
    #[row(doc = "BFCL id")]
    pub instance_id: String,
    /// Reflection round (1..K).
    #[row(doc = "reflection round (1..K)")]
    pub round: i64,
    /// Editor model spec.
    #[row(doc = "editor model spec")]
    pub model: String,
    /// A request was sent (false: frozen or skipped).
    #[row(doc = "a request was sent (false: frozen or skipped)")]
    pub sent: bool,
    /// The editor's reply text.
    #[row(doc = "the editor's reply text")]
    pub reply: Option<String>,
    /// Tool names whose description changed.
    #[row(doc = "tool names whose description changed")]
    pub updated: Vec<String>,
    /// Blocks that needed the lenient parsing rules.
    #[row(doc = "blocks that needed the lenient parsing rules")]
    pub lenient_parses: i64,
    /// `None`, or the class of a failed editor call.
    #[row(doc = "null, or the class of a failed editor call")]
    pub error_kind: Option<String>,
    /// Prompt tokens.
    #[row(doc = "prompt tokens")]
    pub prompt_tokens: i64,
    /// Completion tokens.
    #[row(doc = "completion tokens")]
    pub completion_tokens: i64,
    /// Reasoning tokens.
    #[row(doc = "reasoning tokens")]
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
    #[row(doc = "BFCL id")]
    pub instance_id: String,
    /// The shown tool name the call was about (empty for tool-set-level calls).
    #[row(doc = "shown tool name (empty: whole tool set)")]
    pub tool: String,
    /// `easytool`, `play2prompt`, `draft` or `tracefree`.
    #[row(doc = "easytool, play2prompt, draft or tracefree")]
    pub method: String,
    /// The step of the method (`condense`, `play`, `critique`, `explorer`, ...).
    #[row(doc = "step of the method that made the call")]
    pub step: String,
    /// `exploration` (discovering tool behaviour) or `editing` (writing docs).
    #[row(doc = "exploration or editing")]
    pub phase: String,
    /// `editor` or `agent` (the task model, e.g. Play2Prompt's validation runs).
    #[row(doc = "editor or agent (task model)")]
    pub role: String,
    /// Model spec.
    #[row(doc = "model spec")]
    pub model: String,
    /// `None`, or the class of a failed model call (or of an unusable reply:
    /// `malformed-reply`, `description-cut`).
    #[row(doc = "null, or the class of a failed model call or unusable reply")]
    pub error_kind: Option<String>,
    /// Prompt tokens.
    #[row(doc = "prompt tokens")]
    pub prompt_tokens: i64,
    /// Completion tokens.
    #[row(doc = "completion tokens")]
    pub completion_tokens: i64,
    /// Reasoning tokens.
    #[row(doc = "reasoning tokens")]
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
    #[row(doc = "BFCL id")]
    pub instance_id: String,
    /// Shown tool name.
    #[row(doc = "shown tool name")]
    pub tool: String,
    /// `play2prompt` or `draft`.
    #[row(doc = "play2prompt or draft")]
    pub method: String,
    /// Step of the method.
    #[row(doc = "step of the method")]
    pub step: String,
    /// The arguments as JSON.
    #[row(doc = "the arguments as JSON")]
    pub arguments: Value,
    /// The call returned without an exception.
    #[row(doc = "the call returned without an exception")]
    pub ok: bool,
    /// Python `repr` of the result, or the error text.
    #[row(doc = "Python repr of the result, or the error text")]
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

/// An exported table: its name, its schema text, and whether its rows get the chain's
/// labels (node, method, agent, editor).
pub struct Exported {
    /// The table's name (its file is `<table>.parquet`).
    pub table: &'static str,
    doc: &'static str,
    columns: &'static [Column],
    /// Its rows get the chain's label columns (node, method, agent, editor).
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

    /// Appends the table's schema section (Markdown: a heading, what a row is, and
    /// a column table, label columns first when labelled) to `out`.
    pub fn schema(&self, out: &mut String) {
        out.push_str(&format!(
            "## {}.parquet\n\nOne row = {}.\n\n| column | type | meaning |\n|---|---|---|\n",
            self.table, self.doc
        ));
        if self.labelled {
            for (n, t, d) in [
                (
                    "node",
                    "string",
                    "the experiment node that produced the row",
                ),
                (
                    "method",
                    "string",
                    "gold, base, toolobserver, easytool, play2prompt or draft",
                ),
                ("agent", "string", "agent model spec of the chain"),
                (
                    "editor",
                    "string",
                    "editor model spec of the chain (empty: none)",
                ),
            ] {
                out.push_str(&format!("| {n} | {t} | {d} |\n"));
            }
        }
        for c in self.columns {
            out.push_str(&format!("| {} | {} | {} |\n", c.name, c.ty.name(), c.doc));
        }
        out.push('\n');
    }
}
