//! The tables stages exchange. Each struct is one row; `columns()` is the documented
//! schema that `otb export` writes beside the data.

use pipeline::{col, ColType::*, Column, Row};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One BFCL instance with its original documentation and ground truth.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct InstanceRow {
    pub instance_id: String,
    pub category: String,
    pub idx: i64,
    pub question: String,
    pub functions: Value,
    pub ground_truth: Value,
    pub execution_result_type: Value,
}

impl Row for InstanceRow {
    const TABLE: &'static str = "instances";
    const DOC: &'static str = "one BFCL-Opaque instance (question, original docs, ground truth)";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("instance_id", Str, "BFCL id, e.g. exec_simple_0"),
            col("category", Str, "exec_simple or exec_multiple"),
            col("idx", I64, "position within the category"),
            col("question", Str, "the user's request"),
            col(
                "functions",
                Json,
                "original function docs (BFCL JSON schema dialect)",
            ),
            col(
                "ground_truth",
                Json,
                "ground-truth calls as Python call strings",
            ),
            col(
                "execution_result_type",
                Json,
                "per ground-truth call: exact_match / real_time_match / structural_match",
            ),
        ];
        C
    }
}

/// The documentation an agent sees for one instance at one round.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DocRow {
    pub instance_id: String,
    pub setting: String,
    pub round: i64,
    pub tools: Value,
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

impl Row for DocRow {
    const TABLE: &'static str = "docs";
    const DOC: &'static str = "the tool documentation shown to the agent, per instance and round";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("instance_id", Str, "BFCL id"),
            col("setting", Str, "gold, names, names+desc or names+params"),
            col(
                "round",
                I64,
                "0 = opacified docs; k = after k reflection rounds",
            ),
            col(
                "tools",
                Json,
                "tool definitions as JSON schema (name, description, parameters?)",
            ),
            col(
                "name_mapping",
                Json,
                "[[real name, shown name], ...] (grading only; never shown to models)",
            ),
            col("changed", Bool, "documentation changed in this round"),
            col("frozen", Bool, "instance converged: no more rewrites"),
            col(
                "demos",
                Json,
                "demonstrations put in the agent prompt (Play2Prompt), or null",
            ),
        ];
        C
    }
}

/// One tool call the agent emitted.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CallRecord {
    pub function: String,
    /// Arguments as a JSON object, or `null` when the model's text was not valid JSON.
    pub args: Value,
    /// The raw argument text when it did not parse.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw: Option<String>,
}

/// One agent turn on one instance.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct TrajectoryRow {
    pub instance_id: String,
    pub round: i64,
    pub model: String,
    pub calls: Vec<CallRecord>,
    pub content: Option<String>,
    /// Set when the model call failed after retries (rate_limit, transient, malformed,
    /// refusal, ...): the instance is then an error row, not a model mistake.
    pub error_kind: Option<String>,
    pub error: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub reasoning_tokens: i64,
    pub latency_ms: i64,
    /// Copied from the previous round because this instance's docs did not change.
    pub reused: bool,
}

impl Row for TrajectoryRow {
    const TABLE: &'static str = "trajectories";
    const DOC: &'static str =
        "one agent turn per instance and round, with its tool calls and token usage";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("instance_id", Str, "BFCL id"),
            col("round", I64, "ToolObserver round (0 = base docs)"),
            col("model", Str, "agent model spec"),
            col(
                "calls",
                Json,
                "[{function, args, raw?}] tool calls of the first assistant message",
            ),
            col("content", Str, "assistant text, if any"),
            col(
                "error_kind",
                Str,
                "null, or the class of a failed model call",
            ),
            col("error", Str, "error message of a failed model call"),
            col("prompt_tokens", I64, "prompt tokens"),
            col("completion_tokens", I64, "completion tokens"),
            col("reasoning_tokens", I64, "reasoning tokens"),
            col("latency_ms", I64, "wall time of the call"),
            col(
                "reused",
                Bool,
                "copied from the previous round (docs unchanged)",
            ),
        ];
        C
    }
}

/// The grade of one instance.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ScoreRow {
    pub instance_id: String,
    pub category: String,
    pub round: i64,
    pub e: bool,
    pub e_reason: String,
    pub p: f64,
    pub a: f64,
    pub a_corrected: f64,
    /// Per model call: `{"ok": <python value as JSON>, "repr": "..."}` or `{"error": "..."}`.
    pub outputs: Value,
    /// Outcome line the editor is shown (SUCCESS / ERROR / Model output ...).
    pub outcome: String,
    pub error_kind: Option<String>,
}

impl Row for ScoreRow {
    const TABLE: &'static str = "scores";
    const DOC: &'static str = "E/P/A verdict per instance and round, with the execution outputs";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("instance_id", Str, "BFCL id"),
            col("category", Str, "exec_simple or exec_multiple"),
            col("round", I64, "ToolObserver round"),
            col("e", Bool, "execution accuracy verdict"),
            col("e_reason", Str, "why E failed (or ok)"),
            col("p", F64, "parameter accuracy"),
            col("a", F64, "AST accuracy, reference behaviour"),
            col(
                "a_corrected",
                F64,
                "AST accuracy with the hallucination check against the tools shown",
            ),
            col("outputs", Json, "per call: {ok, repr} or {error}"),
            col("outcome", Str, "the outcome text shown to the editor"),
            col(
                "error_kind",
                Str,
                "null, or the class of the failed model call",
            ),
        ];
        C
    }
}

/// What the editor did for one instance in one reflection round.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EditRow {
    pub instance_id: String,
    pub round: i64,
    pub model: String,
    pub sent: bool,
    pub reply: Option<String>,
    pub updated: Vec<String>,
    pub lenient_parses: i64,
    pub error_kind: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub reasoning_tokens: i64,
}

impl Row for EditRow {
    const TABLE: &'static str = "edits";
    const DOC: &'static str = "one editor request per instance and reflection round";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("instance_id", Str, "BFCL id"),
            col("round", I64, "reflection round (1..K)"),
            col("model", Str, "editor model spec"),
            col(
                "sent",
                Bool,
                "a request was sent (false: frozen or skipped)",
            ),
            col("reply", Str, "the editor's reply text"),
            col("updated", Json, "tool names whose description changed"),
            col(
                "lenient_parses",
                I64,
                "blocks that needed the lenient parsing rules",
            ),
            col(
                "error_kind",
                Str,
                "null, or the class of a failed editor call",
            ),
            col("prompt_tokens", I64, "prompt tokens"),
            col("completion_tokens", I64, "completion tokens"),
            col("reasoning_tokens", I64, "reasoning tokens"),
        ];
        C
    }
}

/// One model call a documentation method (EasyTool, Play2Prompt, DRAFT) made while
/// producing its docs: the per-call rows that `otb table tokens` sums.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct DocCallRow {
    pub instance_id: String,
    /// The shown tool name the call was about (empty for tool-set-level calls).
    pub tool: String,
    pub method: String,
    /// The step of the method (`condense`, `play`, `critique`, `explorer`, ...).
    pub step: String,
    /// `exploration` (discovering tool behaviour) or `editing` (writing docs).
    pub phase: String,
    /// `editor` or `agent` (the task model, e.g. Play2Prompt's validation runs).
    pub role: String,
    pub model: String,
    pub error_kind: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub reasoning_tokens: i64,
}

impl Row for DocCallRow {
    const TABLE: &'static str = "doc_calls";
    const DOC: &'static str =
        "one model call of a documentation method (baselines), with its token usage";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("instance_id", Str, "BFCL id"),
            col("tool", Str, "shown tool name (empty: whole tool set)"),
            col("method", Str, "easytool, play2prompt or draft"),
            col("step", Str, "step of the method that made the call"),
            col("phase", Str, "exploration or editing"),
            col("role", Str, "editor or agent (task model)"),
            col("model", Str, "model spec"),
            col(
                "error_kind",
                Str,
                "null, or the class of a failed model call",
            ),
            col("prompt_tokens", I64, "prompt tokens"),
            col("completion_tokens", I64, "completion tokens"),
            col("reasoning_tokens", I64, "reasoning tokens"),
        ];
        C
    }
}

/// One tool execution a documentation method made (Play2Prompt tool play, DRAFT
/// exploration): what was called and what came back.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ToolRunRow {
    pub instance_id: String,
    pub tool: String,
    pub method: String,
    pub step: String,
    pub arguments: Value,
    pub ok: bool,
    /// Python `repr` of the result, or the error text.
    pub output: String,
}

impl Row for ToolRunRow {
    const TABLE: &'static str = "tool_runs";
    const DOC: &'static str = "one tool execution made by a documentation method";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("instance_id", Str, "BFCL id"),
            col("tool", Str, "shown tool name"),
            col("method", Str, "play2prompt or draft"),
            col("step", Str, "step of the method"),
            col("arguments", Json, "the arguments as JSON"),
            col("ok", Bool, "the call returned without an exception"),
            col(
                "output",
                Str,
                "Python repr of the result, or the error text",
            ),
        ];
        C
    }
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
    pub table: &'static str,
    doc: &'static str,
    columns: &'static [Column],
    pub labelled: bool,
}

impl Exported {
    pub fn of<R: Row>(labelled: bool) -> Exported {
        Exported {
            table: R::TABLE,
            doc: R::DOC,
            columns: R::columns(),
            labelled,
        }
    }

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
