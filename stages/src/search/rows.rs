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
    #[row(doc = "train or test")]
    pub split: String,
    /// Question identifier.
    #[row(doc = "identifier")]
    pub question_id: String,
    /// `substitute (...)` or the BrowseComp-Plus label: where the question comes from.
    #[row(doc = "data source (substitute corpus or BrowseComp-Plus)")]
    pub source: String,
    /// The question.
    #[row(doc = "the question")]
    pub question: String,
    /// Gold answer.
    #[row(doc = "gold answer")]
    pub answer: String,
    /// Other accepted answers.
    #[row(doc = "other accepted answers")]
    pub aliases: Vec<String>,
    /// Evidence documents, the answer's first.
    #[row(doc = "evidence documents, the answer's first")]
    pub evidence_docids: Vec<String>,
    /// Hops: 1 or 2 (generated questions); 0 when unknown.
    #[row(doc = "1 or 2 (generated); 0 unknown")]
    pub hops: i64,
    /// Domain of the answer's document.
    #[row(doc = "domain of the answer's document")]
    pub domain: String,
    /// BrowseComp-Plus: the documents supporting the answer (`[{docid, url}]`).
    #[row(doc = "BrowseComp-Plus evidence documents [{docid, url}] (empty otherwise)")]
    pub evidence_docs: Vec<DocRef>,
    /// BrowseComp-Plus: the documents containing the answer (`[{docid, url}]`).
    #[row(doc = "BrowseComp-Plus documents containing the answer [{docid, url}]")]
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
    #[row(doc = "question")]
    pub question_id: String,
    /// `train` or `test`.
    #[row(doc = "train or test")]
    pub split: String,
    /// Documentation round the agent used.
    #[row(doc = "documentation round the agent used")]
    pub round: i64,
    /// Agent model spec.
    #[row(doc = "agent model spec")]
    pub model: String,
    /// `[{"calls": [...], "content": ..., "results": [...]}]`.
    #[row(doc = "per turn: calls, content, tool results")]
    pub steps: Value,
    /// Final answer text.
    #[row(doc = "final answer text")]
    pub answer: Option<String>,
    /// The turn budget ran out and the answer was forced.
    #[row(doc = "the turn budget ran out and the answer was forced")]
    pub forced: bool,
    /// Judged correct (normalised exact match with answer or alias).
    #[row(doc = "judged correct (normalised exact match with answer or alias)")]
    pub correct: bool,
    /// Best token F1 against the answer and aliases.
    #[row(doc = "best token F1 against the answer and aliases")]
    pub f1: f64,
    /// Tool calls made.
    #[row(doc = "tool calls made")]
    pub tool_calls: i64,
    /// The episode as the editor reads it.
    #[row(doc = "the episode as the editor reads it")]
    pub editor_text: String,
    /// Class of a failed model call, or null.
    #[row(doc = "class of a failed model call, or null")]
    pub error_kind: Option<String>,
    /// Agent prompt tokens.
    #[row(doc = "agent prompt tokens")]
    pub prompt_tokens: i64,
    /// Agent completion tokens.
    #[row(doc = "agent completion tokens")]
    pub completion_tokens: i64,
    /// Agent reasoning tokens.
    #[row(doc = "agent reasoning tokens")]
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
    #[row(doc = "test questions")]
    pub questions: i64,
    /// Judged accuracy: the LLM judge's when one is configured, else exact match.
    #[row(doc = "share judged correct (by the LLM judge when configured)")]
    pub accuracy: f64,
    /// Normalised exact match against the answer and its aliases.
    #[row(doc = "share correct by normalised exact match")]
    pub exact_accuracy: f64,
    /// What judged `accuracy`: `exact match` or the judge's model spec.
    #[row(doc = "`exact match` or the judge's model spec")]
    pub judge: String,
    /// Questions the LLM judge gave no verdict on (its reply had none, or the call
    /// failed as the model's fault): not counted correct, and counted here apart
    /// from those judged incorrect. 0 without a judge.
    #[row(doc = "questions the judge gave no verdict on (not counted correct; 0 without a judge)")]
    pub unjudged: i64,
    /// Bootstrap 2.5th percentile (1000 resamples, seed 0).
    #[row(doc = "bootstrap 2.5th percentile (1000 resamples, seed 0)")]
    pub ci95_lo: f64,
    /// Bootstrap 97.5th percentile.
    #[row(doc = "bootstrap 97.5th percentile")]
    pub ci95_hi: f64,
    /// Mean token F1.
    #[row(doc = "mean token F1")]
    pub mean_f1: f64,
    /// Mean tool calls per question.
    #[row(doc = "mean tool calls per question")]
    pub tool_calls_per_question: f64,
    /// Data source.
    #[row(doc = "data source")]
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
    #[row(doc = "question")]
    pub question_id: String,
    /// `train` (what the editor is told) or `test` (what accuracy counts).
    #[row(doc = "train or test")]
    pub split: String,
    /// Judge model spec.
    #[row(doc = "judge model spec")]
    pub model: String,
    /// `None`: the call failed or the reply had no `correct: yes|no` line.
    #[row(doc = "judged correct (null: no verdict)")]
    pub verdict: Option<bool>,
    /// The judge's reply.
    #[row(doc = "the judge's reply")]
    pub reply: Option<String>,
    /// Failed call class, or `no_verdict` for a reply without one.
    #[row(doc = "failed call class, or `no_verdict` for a reply without one")]
    pub error_kind: Option<String>,
    /// Prompt tokens.
    #[row(doc = "prompt tokens")]
    pub prompt_tokens: i64,
    /// Completion tokens.
    #[row(doc = "completion tokens")]
    pub completion_tokens: i64,
    /// A training episode as the editor reads it, with this verdict as its outcome
    /// (no verdict reads as not judged); `None` for test episodes.
    #[row(doc = "train: the episode as the editor reads it, judged by this verdict")]
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
