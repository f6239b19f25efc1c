//! The search environment's stored rows.

use datasets::search::questions::DocRef;
use pipeline::{col, ColType::*, Column, Row};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One question of a split.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct QuestionRow {
    pub split: String,
    pub question_id: String,
    /// `substitute (...)` or the BrowseComp-Plus label: where the question comes from.
    pub source: String,
    pub question: String,
    pub answer: String,
    pub aliases: Vec<String>,
    pub evidence_docids: Vec<String>,
    pub hops: i64,
    pub domain: String,
    /// BrowseComp-Plus: the documents supporting the answer (`[{docid, url}]`).
    pub evidence_docs: Vec<DocRef>,
    /// BrowseComp-Plus: the documents containing the answer (`[{docid, url}]`).
    pub gold_docs: Vec<DocRef>,
}

impl Row for QuestionRow {
    const TABLE: &'static str = "search_questions";
    const DOC: &'static str = "one search question of the train or test split";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("split", Str, "train or test"),
            col("question_id", Str, "identifier"),
            col(
                "source",
                Str,
                "data source (substitute corpus or BrowseComp-Plus)",
            ),
            col("question", Str, "the question"),
            col("answer", Str, "gold answer"),
            col("aliases", Json, "other accepted answers"),
            col(
                "evidence_docids",
                Json,
                "evidence documents, the answer's first",
            ),
            col("hops", I64, "1 or 2 (generated); 0 unknown"),
            col("domain", Str, "domain of the answer's document"),
            col(
                "evidence_docs",
                Json,
                "BrowseComp-Plus evidence documents [{docid, url}] (empty otherwise)",
            ),
            col(
                "gold_docs",
                Json,
                "BrowseComp-Plus documents containing the answer [{docid, url}]",
            ),
        ];
        C
    }
}

/// One multi-turn episode.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EpisodeRow {
    pub question_id: String,
    pub split: String,
    pub round: i64,
    pub model: String,
    /// `[{"calls": [...], "content": ..., "results": [...]}]`.
    pub steps: Value,
    pub answer: Option<String>,
    pub forced: bool,
    pub correct: bool,
    pub f1: f64,
    pub tool_calls: i64,
    pub editor_text: String,
    pub error_kind: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub reasoning_tokens: i64,
}

impl Row for EpisodeRow {
    const TABLE: &'static str = "search_episodes";
    const DOC: &'static str = "one multi-turn search episode (a question)";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("question_id", Str, "question"),
            col("split", Str, "train or test"),
            col("round", I64, "documentation round the agent used"),
            col("model", Str, "agent model spec"),
            col("steps", Json, "per turn: calls, content, tool results"),
            col("answer", Str, "final answer text"),
            col(
                "forced",
                Bool,
                "the turn budget ran out and the answer was forced",
            ),
            col(
                "correct",
                Bool,
                "judged correct (normalised exact match with answer or alias)",
            ),
            col("f1", F64, "best token F1 against the answer and aliases"),
            col("tool_calls", I64, "tool calls made"),
            col("editor_text", Str, "the episode as the editor reads it"),
            col("error_kind", Str, "class of a failed model call, or null"),
            col("prompt_tokens", I64, "agent prompt tokens"),
            col("completion_tokens", I64, "agent completion tokens"),
            col("reasoning_tokens", I64, "agent reasoning tokens"),
        ];
        C
    }
}

/// Accuracy of one set of test episodes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct SearchScoreRow {
    pub questions: i64,
    /// Judged accuracy: the LLM judge's when one is configured, else exact match.
    pub accuracy: f64,
    /// Normalised exact match against the answer and its aliases.
    pub exact_accuracy: f64,
    /// What judged `accuracy`: `exact match` or the judge's model spec.
    pub judge: String,
    pub ci95_lo: f64,
    pub ci95_hi: f64,
    pub mean_f1: f64,
    pub tool_calls_per_question: f64,
    pub source: String,
}

impl Row for SearchScoreRow {
    const TABLE: &'static str = "search_scores";
    const DOC: &'static str =
        "judged accuracy (bootstrap 95% interval) and tool calls per question";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("questions", I64, "test questions"),
            col(
                "accuracy",
                F64,
                "share judged correct (by the LLM judge when configured)",
            ),
            col(
                "exact_accuracy",
                F64,
                "share correct by normalised exact match",
            ),
            col("judge", Str, "`exact match` or the judge's model spec"),
            col(
                "ci95_lo",
                F64,
                "bootstrap 2.5th percentile (1000 resamples, seed 0)",
            ),
            col("ci95_hi", F64, "bootstrap 97.5th percentile"),
            col("mean_f1", F64, "mean token F1"),
            col(
                "tool_calls_per_question",
                F64,
                "mean tool calls per question",
            ),
            col("source", Str, "data source"),
        ];
        C
    }
}

/// One LLM judge verdict on a test episode's final answer.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct JudgeRow {
    pub question_id: String,
    /// `train` (what the editor is told) or `test` (what accuracy counts).
    pub split: String,
    pub model: String,
    /// `None`: the call failed or the reply had no `correct: yes|no` line.
    pub verdict: Option<bool>,
    pub reply: Option<String>,
    pub error_kind: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// A training episode as the editor reads it, with this verdict as its outcome
    /// (no verdict reads as incorrect); `None` for test episodes.
    pub editor_text: Option<String>,
}

impl Row for JudgeRow {
    const TABLE: &'static str = "search_judgements";
    const DOC: &'static str = "one LLM judge verdict on an episode's final answer";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("question_id", Str, "question"),
            col("split", Str, "train or test"),
            col("model", Str, "judge model spec"),
            col("verdict", Bool, "judged correct (null: no verdict)"),
            col("reply", Str, "the judge's reply"),
            col(
                "error_kind",
                Str,
                "failed call class, or `no_verdict` for a reply without one",
            ),
            col("prompt_tokens", I64, "prompt tokens"),
            col("completion_tokens", I64, "completion tokens"),
            col(
                "editor_text",
                Str,
                "train: the episode as the editor reads it, judged by this verdict",
            ),
        ];
        C
    }
}

/// The search tables `otb export` writes (questions are per experiment: unlabelled).
pub fn exported() -> Vec<crate::rows::Exported> {
    use crate::rows::Exported;
    vec![
        Exported::of::<QuestionRow>(false),
        Exported::of::<EpisodeRow>(true),
        Exported::of::<JudgeRow>(true),
        Exported::of::<SearchScoreRow>(true),
    ]
}
