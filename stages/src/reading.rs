//! What an environment reads back from the store, for `otb report` and `otb export
//! --sft`: the types its readers produce and the help they get, below every
//! environment so that each one reads its own rows ([`crate::experiment::Environment`]'s
//! `items`, `role_of`, `intervals`, `sft_pairs`) and the report and the export only
//! render what they are given.
//!
//! - the report's items: [`Item`] (one graded item of a cell, opened as [`Block`]s),
//!   every text a model wrote capped by a [`Cap`]; an environment reads a computed
//!   node ([`Computed`]) and the outputs along the plan's edges ([`Along`]) into a
//!   [`Reading`];
//! - the report's interval charts: [`Interval`];
//! - the SFT export: [`SftPair`], the tools whose description changed
//!   ([`changed`]) and their recorded calls ([`traces_of`]).

use crate::at::Cell;
use crate::baselines::{tool_description, tool_name, tracefree};
use crate::rows::DocRow;
use pipeline::{Entry, Row, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Caps every text embedded in a report and counts what it cut.
pub struct Cap {
    /// Bytes kept of one text.
    pub limit: usize,
    /// Texts cut.
    pub texts: usize,
    /// Bytes cut in all.
    pub bytes: usize,
}

impl Cap {
    /// A cap of `limit` bytes per text.
    pub fn new(limit: usize) -> Cap {
        Cap {
            limit,
            texts: 0,
            bytes: 0,
        }
    }

    /// `s`, or its first `limit` bytes (at a character boundary) and a note of how
    /// much was cut.
    pub fn text(&mut self, s: &str) -> String {
        if s.len() <= self.limit {
            return s.to_string();
        }
        let mut end = self.limit;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        self.texts += 1;
        self.bytes += s.len() - end;
        format!(
            "{}\n[... cut by the report: {} more bytes; the store has the whole text]",
            &s[..end],
            s.len() - end
        )
    }

    /// A JSON value as indented text, capped.
    pub fn json(&mut self, v: &Value) -> String {
        let s = serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string());
        self.text(&s)
    }
}

/// One graded item of a cell.
#[derive(Clone, Debug, Serialize)]
pub struct Item {
    /// The cell's id.
    pub cell: usize,
    /// The item id (BFCL instance, chess game, search question): what a paired
    /// comparison matches on.
    pub id: String,
    /// `right`, `wrong`, `draw` or `error`.
    pub verdict: &'static str,
    /// The item's score in \[0, 1\] (E, the game's score, judged correct).
    pub score: f64,
    /// The class of a failed model call, if any.
    pub error: Option<String>,
    /// One line: what happened (tools called, the result).
    pub summary: String,
    /// The item opened: blocks in order.
    pub detail: Vec<Block>,
}

/// A part of an opened item. The page's script renders each kind; every string goes
/// into the page as text, never as markup.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "k")]
pub enum Block {
    /// A paragraph of prose (a question, a reply).
    Text {
        /// Heading.
        t: String,
        /// The text.
        v: String,
    },
    /// Preformatted text (documentation, JSON, tool output).
    Code {
        /// Heading.
        t: String,
        /// The text.
        v: String,
    },
    /// Name / value pairs.
    Kv {
        /// Heading.
        t: String,
        /// The pairs.
        v: Vec<(String, String)>,
    },
    /// A table.
    Table {
        /// Heading.
        t: String,
        /// Column names.
        head: Vec<String>,
        /// Rows of cells.
        rows: Vec<Vec<String>>,
    },
    /// A chess game: the position before each ply (FEN) with a label, stepped
    /// through on a board.
    Board {
        /// Heading.
        t: String,
        /// FEN before each ply, then the final position.
        fens: Vec<String>,
        /// A caption per FEN.
        labels: Vec<String>,
    },
}

/// A computed node whose items an environment reads.
#[derive(Clone, Copy, Debug)]
pub struct Computed<'a> {
    /// Node name (what [`Along`] follows the plan's edges from).
    pub node: &'a str,
    /// Stage.
    pub stage: &'a str,
    /// Grid coordinates.
    pub cell: &'a Cell,
    /// The stored output.
    pub entry: &'a Entry,
}

/// The computed outputs around a node, along the plan's edges.
pub trait Along {
    /// The nearest computed output among `node`'s inputs (breadth first: its own
    /// inputs in order, then theirs) that holds `table`, preferring an input read
    /// under the name `prefer`.
    fn upstream(&self, node: &str, table: &str, prefer: Option<&str>) -> Option<&Entry>;

    /// A computed node that reads `node` and holds `table` (the evaluation of a
    /// chess exploration, the judge of a search episode set).
    fn downstream(&self, node: &str, table: &str) -> Option<&Entry>;
}

/// What an environment read of one computed cell.
#[derive(Clone, Debug, Default)]
pub struct Reading {
    /// The cell's items, in order (their `cell` is set by the report).
    pub items: Vec<Item>,
    /// Mean parameter and AST accuracy of the items (BFCL: the curves' P and A).
    pub p_a: Option<(f64, f64)>,
    /// The documentation the agent saw, when one text serves every item of the cell.
    pub docs: Option<String>,
}

/// One bar of an interval chart (chess Elo, search accuracy): the report draws one
/// chart per `title`, a bar per computed node.
#[derive(Clone, Debug, PartialEq)]
pub struct Interval {
    /// The chart's title.
    pub title: &'static str,
    /// The unit of its axis.
    pub unit: &'static str,
    /// Point value.
    pub value: f64,
    /// Lower end.
    pub lo: f64,
    /// Upper end.
    pub hi: f64,
}

/// The rows of type `R` in `entry` (none without an entry).
pub fn rows<R: Row>(entry: Option<&Entry>) -> Result<Vec<R>, StoreError> {
    match entry {
        Some(e) => e.read(),
        None => Ok(Vec::new()),
    }
}

/// An item's verdict from its score and failed call: `right`, `wrong`, `draw` or
/// `error`.
pub fn verdict(score: f64, error: &Option<String>) -> &'static str {
    if error.is_some() && score < 1.0 {
        "error"
    } else if score >= 1.0 {
        "right"
    } else if score > 0.0 {
        "draw"
    } else {
        "wrong"
    }
}

/// How a multi-turn episode ended (search, MCP), as its report item's "Answer" block
/// shows it.
pub struct EpisodeEnd<'a> {
    /// The agent's final answer.
    pub answer: Option<&'a str>,
    /// Normalised exact match against the expected answer.
    pub correct: bool,
    /// Token F1 against it.
    pub f1: f64,
    /// Tool calls made.
    pub tool_calls: i64,
    /// Of them, those that failed (where the environment counts them).
    pub failed_calls: Option<i64>,
    /// Prompt, completion and reasoning tokens.
    pub tokens: (i64, i64, i64),
    /// The turn budget ran out and the answer was asked for.
    pub forced: bool,
    /// The episode's error class, if any.
    pub error: Option<&'a str>,
}

/// The "Answer" block of an episode's report item.
pub fn answer_block(cap: &mut Cap, e: &EpisodeEnd<'_>) -> Block {
    let mut kv = vec![
        (
            "final answer".into(),
            cap.text(e.answer.unwrap_or("(none)")),
        ),
        (
            "exact match".into(),
            if e.correct { "yes" } else { "no" }.into(),
        ),
        ("token F1".into(), format!("{:.2}", e.f1)),
        ("tool calls".into(), e.tool_calls.to_string()),
    ];
    if let Some(failed) = e.failed_calls {
        kv.push(("failed calls".into(), failed.to_string()));
    }
    let (p, c, r) = e.tokens;
    kv.push(("tokens".into(), tokens(p, c, r)));
    if e.forced {
        kv.push((
            "forced".into(),
            "the turn budget ran out; the answer was asked for".into(),
        ));
    }
    if let Some(k) = e.error {
        kv.push(("error".into(), k.to_string()));
    }
    Block::Kv {
        t: "Answer".into(),
        v: kv,
    }
}

/// A model call's tokens in words.
pub fn tokens(p: i64, c: i64, r: i64) -> String {
    if r > 0 {
        format!("{p} prompt, {c} completion ({r} reasoning)")
    } else {
        format!("{p} prompt, {c} completion")
    }
}

/// The tools of a documentation row as the agent read them: each tool's name and
/// description, then its parameters as JSON.
pub fn docs_text(tools: &Value) -> String {
    let mut out = String::new();
    for t in tools.as_array().into_iter().flatten() {
        let name = t.get("name").and_then(Value::as_str).unwrap_or("?");
        let desc = t.get("description").and_then(Value::as_str).unwrap_or("");
        out.push_str(&format!("{name}\n  {}\n", desc.replace('\n', "\n  ")));
        if let Some(p) = t.get("parameters") {
            let params = serde_json::to_string(p).unwrap_or_default();
            out.push_str(&format!("  parameters: {params}\n"));
        }
        out.push('\n');
    }
    out
}

/// The documentation one offline cell's agent saw (its tool set's shared docs, read
/// under the input name `docs`), capped; `None` when no such input is computed.
pub fn shared_docs(
    along: &dyn Along,
    node: &str,
    cap: &mut Cap,
) -> Result<Option<String>, StoreError> {
    let docs: Vec<DocRow> = rows(along.upstream(node, DocRow::TABLE, Some("docs")))?;
    Ok(docs.first().map(|d| {
        let mut text = docs_text(&d.tools);
        if !d.demos.is_null() {
            text.push_str(&format!(
                "demonstrations: {}\n",
                serde_json::to_string_pretty(&d.demos).unwrap_or_default()
            ));
        }
        cap.text(&text)
    }))
}

/// Recorded calls per tool in a trace-based example.
pub const TRACES: u32 = 3;
/// `pairs.selected_on` of an offline pair: scored on the training split.
pub const SELECTED_ON_TRAIN: &str = "train";
/// `pairs.selected_on` of an online pair: scored on the instance itself (no split).
pub const SELECTED_ON_INSTANCE: &str = "instance";

/// `h_i` of a pair: up to [`TRACES`] of `texts` (recorded turns or episodes as the
/// editor read them) that name the tool, numbered, each bounded as the stage bounds
/// a trace ([`tracefree::text_traces`]); empty when none does.
pub fn traces_of(texts: &[String], name: &str) -> String {
    tracefree::text_traces(texts, name, TRACES)
}

/// The tools whose description changed from `before` to `after`, with both tools.
pub fn changed<'a>(before: &'a [Value], after: &'a [Value]) -> Vec<(&'a Value, &'a Value)> {
    after
        .iter()
        .filter_map(|a| {
            let b = before.iter().find(|b| tool_name(b) == tool_name(a))?;
            (tool_description(a).trim() != tool_description(b).trim()
                && !tool_description(a).trim().is_empty())
            .then_some((b, a))
        })
        .collect()
}

/// One improved tool: what ToolObserver started from and ended with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Row)]
#[row(
    table = "sft_pairs",
    doc = "one tool whose ToolObserver description made the agent better (`otb export --sft`)"
)]
pub struct SftPair {
    /// `bfcl`, `chess` or `search`.
    pub environment: String,
    /// The setting (BFCL) or tool set.
    pub setting: String,
    /// The tool set's identifier ([`crate::experiment::tool_set_id`]: `bfcl`, `chess:<set>`, `search:<set>`),
    /// as `holdout.json` and `[baselines.tracefree] trained_on` name it.
    pub tool_set: String,
    /// Whether `--holdout` kept the pair out of the training examples (in no stage
    /// file).
    pub held_out: bool,
    /// The agent model of the curve.
    pub agent: String,
    /// The editor model of the curve.
    pub editor: String,
    /// `toolobserver` or `toolobserver-guard`.
    pub method: String,
    /// The BFCL instance, or `*` (an offline tool set's shared docs).
    pub instance_id: String,
    /// The tool's shown name.
    pub tool: String,
    /// The documentation round of the target (BFCL: the last; chess, search: the best
    /// training round).
    pub round: i64,
    /// What the scores were measured on: `train` ([`SELECTED_ON_TRAIN`]; chess, search:
    /// the training split) or `instance` ([`SELECTED_ON_INSTANCE`]; BFCL: the instance).
    pub selected_on: String,
    /// The tool before ToolObserver: its definition as JSON (name, parameters,
    /// description).
    pub interface: String,
    /// `h_i`: the recorded calls that name the tool, numbered, as a trace-based request
    /// shows them (empty when none).
    pub traces: String,
    /// The selected description of the tool: ToolObserver's of round `round` (the
    /// target).
    pub target: String,
    /// The score before (BFCL: the instance's Base E, 0 or 1; chess: best-tool % of
    /// the training calls; search: training accuracy).
    pub score_before: f64,
    /// The score after, on the same scale and split.
    pub score_after: f64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cap_cuts_at_a_character_boundary_and_counts() {
        let mut c = Cap::new(5);
        assert_eq!(c.text("abc"), "abc");
        let s = c.text("abcdé fgh");
        assert!(
            s.starts_with("abcd\n[... cut by the report: 6 more bytes"),
            "{s}"
        );
        assert_eq!((c.texts, c.bytes), (1, 6));
    }

    #[test]
    fn docs_text_lists_each_tool() {
        let t = serde_json::json!([{"name": "f1", "description": "Adds.", "parameters": {"type": "object"}}]);
        assert_eq!(
            docs_text(&t),
            "f1\n  Adds.\n  parameters: {\"type\":\"object\"}\n\n"
        );
    }
}
