//! The MCP environment's stored rows.

use pipeline::Row;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One server as it was met: its identity and its tools.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "mcp_servers",
    doc = "one MCP server: its identity (command, serverInfo, working folder digest) and its tools as listed"
)]
pub struct ServerRow {
    /// The server's name in the experiment.
    pub server: String,
    /// Its identity (`{name, command, url, server_info, workdir_digest}`).
    pub identity: Value,
    /// Its tools as `tools/list` gave them (`[{name, description, inputSchema}]`).
    pub tools: Value,
}

/// One task of a split.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "mcp_tasks",
    doc = "one MCP task (a user request) of the train or test split"
)]
pub struct TaskRow {
    /// `train` or `test`.
    pub split: String,
    /// The task's id.
    pub task_id: String,
    /// The server whose tools serve it.
    pub server: String,
    /// The user's request.
    pub question: String,
    /// The expected answer (empty when the task has none).
    pub answer: String,
    /// Other accepted answers.
    pub answers: Vec<String>,
    /// A rubric for an LLM judge, if the task has one (not used by exact match).
    pub judge: Option<String>,
    /// The task's kind, for reports.
    pub kind: Option<String>,
}

/// One multi-turn episode on a task.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "mcp_episodes",
    doc = "one multi-turn episode on an MCP task, with every tool call"
)]
pub struct EpisodeRow {
    /// The task (its `task_id`).
    pub task_id: String,
    /// `train` or `test`.
    pub split: String,
    /// Documentation round the agent used.
    pub round: i64,
    /// Agent model spec.
    pub model: String,
    /// Per turn, its calls, content and tool results: `[{"calls": [...], "content":
    /// ..., "results": [...]}]`.
    pub steps: Value,
    /// Every tool call: `[{"tool", "server_tool", "arguments", "result", "is_error"}]`
    /// (`tool`: the name the agent called; `server_tool`: the server's tool it
    /// means, null for a name no tool has).
    pub calls: Value,
    /// Final answer text.
    pub answer: Option<String>,
    /// The turn budget ran out and the answer was forced.
    pub forced: bool,
    /// Normalised exact match with the answer or one of its aliases.
    pub correct: bool,
    /// Best token F1 against the answer and its aliases.
    pub f1: f64,
    /// Tool calls made.
    pub tool_calls: i64,
    /// Tool calls the server answered as failed (or that named no tool).
    pub tool_errors: i64,
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

/// One episode of an MCP task as the LLM judge saw it (`mcp-judge`).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "mcp_judgements",
    doc = "one episode of an MCP task and the LLM judge's verdict on its final answer against the task's rubric"
)]
pub struct McpJudgeRow {
    /// The task (its `task_id`).
    pub task_id: String,
    /// `train` (what the editor is told) or `test` (what accuracy counts).
    pub split: String,
    /// Judge model spec.
    pub model: String,
    /// The task has a rubric, so the judge was asked (otherwise the row carries only
    /// the episode as the editor reads it, graded by exact match).
    pub rubric: bool,
    /// Judged correct; null when the judge was not asked, its call failed or its
    /// reply gave no verdict (not judged).
    pub verdict: Option<bool>,
    /// The judge's reason (its `Reason:` line), at most 500 characters.
    pub reason: Option<String>,
    /// The judge's reply, at most 2,000 characters.
    pub reply: Option<String>,
    /// Failed call class, or `no_verdict` for a reply without one.
    pub error_kind: Option<String>,
    /// Prompt tokens.
    pub prompt_tokens: i64,
    /// Completion tokens.
    pub completion_tokens: i64,
    /// A training episode as the editor reads it, with the verdict as its outcome
    /// (no verdict reads as not judged); null for test episodes.
    pub editor_text: Option<String>,
}

/// Accuracy of one set of test episodes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "mcp_scores",
    doc = "exact-match accuracy on MCP tasks (bootstrap 95% interval), F1 and tool calls per task"
)]
pub struct McpScoreRow {
    /// Test tasks.
    pub tasks: i64,
    /// Share correct by normalised exact match against the answer and its aliases, or
    /// by the LLM judge's verdict where the task has a rubric; tasks with neither
    /// count in no mean.
    pub accuracy: f64,
    /// Bootstrap 2.5th percentile (1000 resamples, seed 0).
    pub ci95_lo: f64,
    /// Bootstrap 97.5th percentile.
    pub ci95_hi: f64,
    /// Mean token F1.
    pub mean_f1: f64,
    /// Mean tool calls per task.
    pub tool_calls_per_task: f64,
    /// Mean failed tool calls per task.
    pub tool_errors_per_task: f64,
}

/// The MCP tables `otb export` writes (servers and tasks are per experiment:
/// unlabelled).
pub fn exported() -> Vec<crate::rows::Exported> {
    use crate::rows::Exported;
    vec![
        Exported::of::<ServerRow>(false),
        Exported::of::<TaskRow>(false),
        Exported::of::<EpisodeRow>(true),
        Exported::of::<McpJudgeRow>(true),
        Exported::of::<McpScoreRow>(true),
    ]
}
