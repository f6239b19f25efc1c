//! The search environment's stored rows.

use datasets::search::questions::DocRef;
use pipeline::Row;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One question of a split.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "search_questions",
    doc = "one search question of the train or test split"
)]
pub struct QuestionRow {
    /// `train` or `test`.
    pub split: String,
    /// Question identifier.
    pub question_id: String,
    /// `substitute (...)` or the BrowseComp-Plus label: where the question comes from.
    pub source: String,
    /// The question.
    pub question: String,
    /// Gold answer.
    pub answer: String,
    /// Other accepted answers.
    pub aliases: Vec<String>,
    /// Evidence documents, the answer's first.
    pub evidence_docids: Vec<String>,
    /// Hops: 1 or 2 (generated questions); 0 when unknown.
    pub hops: i64,
    /// Domain of the answer's document.
    pub domain: String,
    /// BrowseComp-Plus: the documents supporting the answer (`[{docid, url}]`; empty
    /// otherwise).
    pub evidence_docs: Vec<DocRef>,
    /// BrowseComp-Plus: the documents containing the answer (`[{docid, url}]`).
    pub gold_docs: Vec<DocRef>,
}

/// One multi-turn episode.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "search_episodes",
    doc = "one multi-turn search episode (a question)"
)]
pub struct EpisodeRow {
    /// The question (its `question_id`).
    pub question_id: String,
    /// `train` or `test`.
    pub split: String,
    /// Documentation round the agent used.
    pub round: i64,
    /// Agent model spec.
    pub model: String,
    /// Per turn, its calls, content and tool results: `[{"calls": [...], "content": ...,
    /// "results": [...]}]`.
    pub steps: Value,
    /// Final answer text.
    pub answer: Option<String>,
    /// The turn budget ran out and the answer was forced.
    pub forced: bool,
    /// Judged correct (normalised exact match with answer or alias).
    pub correct: bool,
    /// Best token F1 against the answer and aliases.
    pub f1: f64,
    /// Tool calls made.
    pub tool_calls: i64,
    /// The episode as the editor reads it.
    pub editor_text: String,
    /// Class of a failed model call, or null.
    pub error_kind: Option<String>,
    /// Agent prompt tokens.
    pub prompt_tokens: i64,
    /// Agent completion tokens.
    pub completion_tokens: i64,
    /// Agent reasoning tokens.
    pub reasoning_tokens: i64,
}

/// Accuracy of one set of test episodes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "search_scores",
    doc = "judged accuracy (bootstrap 95% interval) and tool calls per question"
)]
pub struct SearchScoreRow {
    /// Test questions.
    pub questions: i64,
    /// Judged accuracy: the LLM judge's when one is configured, else exact match.
    pub accuracy: f64,
    /// Share correct by normalised exact match against the answer and its aliases.
    pub exact_accuracy: f64,
    /// What judged `accuracy`: `exact match` or the judge's model spec.
    pub judge: String,
    /// Questions the LLM judge gave no verdict on (its reply had none, or the call
    /// failed as the model's fault): not counted correct, and counted here apart
    /// from those judged incorrect. 0 without a judge.
    pub unjudged: i64,
    /// Bootstrap 2.5th percentile (1000 resamples, seed 0).
    pub ci95_lo: f64,
    /// Bootstrap 97.5th percentile.
    pub ci95_hi: f64,
    /// Mean token F1.
    pub mean_f1: f64,
    /// Mean tool calls per question.
    pub tool_calls_per_question: f64,
    /// Data source.
    pub source: String,
}

/// One LLM judge verdict on a test episode's final answer.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "search_judgements",
    doc = "one LLM judge verdict on an episode's final answer"
)]
pub struct JudgeRow {
    /// The question (its `question_id`).
    pub question_id: String,
    /// `train` (what the editor is told) or `test` (what accuracy counts).
    pub split: String,
    /// Judge model spec.
    pub model: String,
    /// Judged correct; null when the call failed or the reply had no `correct: yes|no`
    /// line.
    pub verdict: Option<bool>,
    /// The judge's reply.
    pub reply: Option<String>,
    /// Failed call class, or `no_verdict` for a reply without one.
    pub error_kind: Option<String>,
    /// Prompt tokens.
    pub prompt_tokens: i64,
    /// Completion tokens.
    pub completion_tokens: i64,
    /// A training episode as the editor reads it, with this verdict as its outcome
    /// (no verdict reads as not judged); null for test episodes.
    pub editor_text: Option<String>,
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
