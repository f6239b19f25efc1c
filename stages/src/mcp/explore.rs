//! Stage `mcp-explore`: one multi-turn episode per task of a split with the tools of
//! one server, each call a real call to the server (on a fresh episode of its own
//! with `fresh = "episode"`); each row carries every call and the episode as the
//! editor reads it.

use super::rows::{EpisodeRow, TaskRow};
use super::Mcp;
use crate::baselines::shared_docs;
use crate::env::{At, Cx, DriveError, Play, Split};
use crate::models::{infrastructure_error, run_episode, CallFailure, ModelSpec, MultiTurn};
use crate::rows::{CallRecord, DocRow};
use datasets::search::judge;
use pipeline::{Handle, StageCtx, StageError, Usage};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Mutex;

/// The stage name.
pub const EXPLORE_STAGE: &str = "mcp-explore";
/// The stage version.
pub const EXPLORE_VERSION: u32 = 1;

/// The most characters of one text (a request, arguments, a result, an answer) in
/// the editor's view of an episode.
pub const EDITOR_FIELD_CHARS: usize = 2000;
/// The most bytes of one episode as the editor reads it.
pub const EDITOR_TEXT_BYTES: usize = 8 << 10;

/// `mcp-explore`'s params: the stage key and what the run reads.
#[derive(Serialize)]
pub(crate) struct ExploreParams<'a> {
    agent: ModelSpec,
    /// The system prompt before any demonstrations (those come with the docs input).
    system: &'a str,
    final_answer: &'static str,
    /// The chain's seed (the agent's requests, the opaque names' order).
    seed: u64,
    split: Split,
    max_turns: usize,
    tool_set: &'a str,
    /// The server's identity (`mcp-server`'s row).
    server: &'a Value,
    round: i64,
    /// The docs name the server's tools (as-is docs, and what was learned from
    /// them); otherwise the opaque `tool_k`.
    gold_names: bool,
    /// `first_call = "required"`: the first turn must call a tool; in the key only
    /// then (an experiment without it keeps its keys).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    first_call_required: bool,
    /// How the agent samples on this split; in the key only when it is not the
    /// model's default.
    #[serde(skip_serializing_if = "crate::models::TurnSampling::is_default")]
    sampling: crate::models::TurnSampling,
}

/// At most `n` characters of `s`, marked when cut.
pub(super) fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        None => s.to_string(),
        Some((i, _)) => format!("{}... [cut]", &s[..i]),
    }
}

/// One call of an episode as stored.
#[derive(Clone, Debug, Serialize, serde::Deserialize, PartialEq)]
pub struct McpCall {
    /// The name the agent called.
    pub tool: String,
    /// The server's tool it means (none for a name no tool has).
    pub server_tool: Option<String>,
    /// The arguments as the agent gave them.
    pub arguments: Value,
    /// What came back (the server's text, or the error).
    pub result: String,
    /// The call failed.
    pub is_error: bool,
}

/// An episode's outcome as the editor reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Correct (by exact match, or the judge's verdict).
    Correct,
    /// Incorrect.
    Incorrect,
    /// The judge gave no verdict (its call failed, or its reply had none).
    NotJudged,
}

impl Outcome {
    /// The judge's verdict as an outcome (none: not judged).
    pub fn of(verdict: Option<bool>) -> Outcome {
        match verdict {
            Some(true) => Outcome::Correct,
            Some(false) => Outcome::Incorrect,
            None => Outcome::NotJudged,
        }
    }

    /// How the editor reads it.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Correct => "correct",
            Outcome::Incorrect => "incorrect",
            Outcome::NotJudged => "not judged",
        }
    }
}

impl From<bool> for Outcome {
    fn from(correct: bool) -> Outcome {
        if correct {
            Outcome::Correct
        } else {
            Outcome::Incorrect
        }
    }
}

/// The episode as the editor reads it: the request, each call (tool, arguments,
/// what came back), the final answer and its outcome (exact match, or the judge's
/// verdict: `mcp-judge`); every field bounded, the whole at most
/// [`EDITOR_TEXT_BYTES`].
pub fn editor_text(
    question: &str,
    calls: &[McpCall],
    answer: Option<&str>,
    outcome: impl Into<Outcome>,
) -> String {
    let mut out = format!("Request: {}\n", clip(question, EDITOR_FIELD_CHARS));
    for (i, c) in calls.iter().enumerate() {
        out.push_str(&format!(
            "Call {}: {}\nArguments: {}\n{}: {}\n",
            i + 1,
            clip(&c.tool, 200),
            clip(&c.arguments.to_string(), EDITOR_FIELD_CHARS),
            if c.is_error { "Error" } else { "Output" },
            clip(&c.result, EDITOR_FIELD_CHARS),
        ));
    }
    if calls.is_empty() {
        out.push_str("(no tool call)\n");
    }
    out.push_str(&format!(
        "Final answer: {}\nOutcome: {}",
        clip(answer.unwrap_or("(none)"), EDITOR_FIELD_CHARS),
        outcome.into().as_str()
    ));
    if out.len() > EDITOR_TEXT_BYTES {
        let mut cut = EDITOR_TEXT_BYTES;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        out.truncate(cut);
        out.push_str("\n... [episode cut]");
    }
    out
}

impl Mcp<'_> {
    /// The episodes of the play step `play`; the key names the docs' text, so it is
    /// computed once they are.
    pub(super) fn explore_node<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        play: &Play<'_>,
    ) -> Result<Handle, DriveError> {
        let inputs = [
            ("tasks", &self.tasks.handle),
            ("server", self.server_out),
            ("docs", play.docs),
        ];
        crate::offline::multi_turn::explore_node(
            self,
            cx,
            play,
            (EXPLORE_STAGE, EXPLORE_VERSION),
            &inputs,
        )
    }

    /// One call the agent made, executed on the episode `ep`: a name no tool has and
    /// arguments that are not an object are answered without the server; a server
    /// that failed for good sets `failed` (the stage then fails, naming it).
    fn call(
        &self,
        ep: &super::host::HostEpisode<'_>,
        c: &CallRecord,
        gold_names: bool,
        seed: u64,
        failed: &mut Option<String>,
    ) -> McpCall {
        let real = self.tools.real_name(&c.function, gold_names, seed);
        let (result, is_error) = match (&real, &c.args, &c.raw) {
            _ if failed.is_some() => ("Error: the server failed".to_string(), true),
            (None, ..) => (
                format!("Error: there is no tool `{}`", clip(&c.function, 100)),
                true,
            ),
            (Some(_), Value::Null, Some(_)) => {
                ("Error: the arguments are not valid JSON".to_string(), true)
            }
            (Some(r), a @ (Value::Object(_) | Value::Null), _) => {
                let args = if a.is_null() { json!({}) } else { a.clone() };
                match ep.call(r, &args) {
                    Ok(x) => (x.text, x.is_error),
                    Err(e) => {
                        *failed = Some(e);
                        ("Error: the server failed".to_string(), true)
                    }
                }
            }
            (Some(_), ..) => (
                "Error: the arguments must be a JSON object".to_string(),
                true,
            ),
        };
        McpCall {
            tool: c.function.clone(),
            server_tool: real,
            arguments: c.args.clone(),
            result: datasets::bfcl::executor::bounded_output(&result),
            is_error,
        }
    }
}

/// The row of task `t` played in `e` with `calls`, graded by exact match against
/// the answer and its aliases. (A task with a rubric is judged by `mcp-judge`, whose
/// verdict replaces this grade in accuracy and in the editor's view; the rows here
/// are those of before the judge, so exploration's keys do not change.)
fn episode_row(
    t: &TaskRow,
    split: Split,
    round: i64,
    model: &str,
    e: &crate::models::Episode,
    calls: Vec<McpCall>,
) -> EpisodeRow {
    let answer = e.answer.clone().unwrap_or_default();
    let g = judge::grade(&answer, &t.answer, &t.answers);
    let steps: Vec<Value> = e
        .steps
        .iter()
        .map(|s| json!({"calls": s.calls, "content": s.content, "results": s.results}))
        .collect();
    let editor = editor_text(&t.question, &calls, e.answer.as_deref(), g.exact);
    EpisodeRow {
        task_id: t.task_id.clone(),
        split: split.as_str().into(),
        round,
        model: model.to_string(),
        steps: Value::Array(steps),
        tool_calls: calls.len() as i64,
        tool_errors: calls.iter().filter(|c| c.is_error).count() as i64,
        calls: serde_json::to_value(&calls).unwrap_or(Value::Null),
        answer: e.answer.clone(),
        forced: e.forced,
        correct: g.exact,
        f1: g.f1,
        editor_text: editor,
        error_kind: e.error.as_ref().map(|e| e.kind.clone()),
        prompt_tokens: e.usage.prompt_tokens as i64,
        completion_tokens: e.usage.completion_tokens as i64,
        reasoning_tokens: e.usage.reasoning_tokens as i64,
    }
}

impl crate::offline::multi_turn::MultiTurnExplore for Mcp<'_> {
    type Params<'a>
        = ExploreParams<'a>
    where
        Self: 'a;

    /// The agent's params on the docs `docs_rows` at the play step `at`, with the
    /// tools and system prompt it plays.
    fn params(
        &self,
        at: &At,
        sampling: &crate::models::TurnSampling,
        docs_rows: &[DocRow],
    ) -> Result<(ExploreParams<'_>, Vec<Value>, String), StageError> {
        let (split, agent) = (at.split_for(EXPLORE_STAGE)?, at.agent_for(EXPLORE_STAGE)?);
        let (tools, system) = shared_docs(docs_rows, &self.system);
        let params = ExploreParams {
            agent: agent.clone(),
            system: &self.system,
            final_answer: crate::models::llm::FINAL_ANSWER,
            seed: at.seed,
            split,
            max_turns: self.m.max_turns,
            tool_set: &self.set,
            server: self.identity,
            round: at.round,
            gold_names: self.tools.names_gold(&tools),
            first_call_required: self.m.first_call_required,
            sampling: sampling.clone(),
        };
        Ok((params, tools, system))
    }

    fn agent<'a>(p: &'a ExploreParams<'_>) -> (&'a ModelSpec, &'a crate::models::TurnSampling) {
        (&p.agent, &p.sampling)
    }

    fn play(
        &self,
        ctx: &mut StageCtx<'_>,
        agent: &dyn MultiTurn,
        p: &ExploreParams<'_>,
        (system, tools): (&str, &[Value]),
    ) -> Result<(), StageError> {
        let tasks = self.tasks.get(p.split)?;
        let model = p.agent.to_string();
        let spec = EpisodeSpec {
            split: p.split,
            round: p.round,
            seed: p.seed,
            max_turns: p.max_turns,
            first_call_required: p.first_call_required,
            gold_names: p.gold_names,
            model: &model,
        };
        let jobs: Vec<Job<'_>> = tasks
            .iter()
            .map(|task| Job {
                task,
                system,
                tools,
            })
            .collect();
        // No task in this split: nothing to play, no server started.
        let rows = self.play_episodes(ctx, agent, &spec, &jobs)?;
        ctx.write(&rows)?;
        Ok(())
    }
}

/// What an explore stage's params fix for each of its episodes.
pub(super) struct EpisodeSpec<'a> {
    /// The split played (stored on each row).
    pub split: Split,
    /// The documentation round played (stored on each row).
    pub round: i64,
    /// The seed of the agent's requests and of the opaque names' order.
    pub seed: u64,
    /// Tool turns before the forced final answer.
    pub max_turns: usize,
    /// The first turn must call a tool (`first_call = "required"`).
    pub first_call_required: bool,
    /// The docs name the server's tools (else the opaque `tool_k`).
    pub gold_names: bool,
    /// The agent's spec as rows name it.
    pub model: &'a str,
}

/// One episode to play: a task, with the system prompt and tools the agent is given
/// (the shared docs' in `mcp-explore`; the task's own docs in ToolObserver's online
/// mode, [`super::online`]).
pub(super) struct Job<'a> {
    /// The task.
    pub task: &'a TaskRow,
    /// The agent's system prompt.
    pub system: &'a str,
    /// The tools as the agent is shown them.
    pub tools: &'a [Value],
}

impl Mcp<'_> {
    /// Plays `jobs` (up to `concurrency` at once, each on a fresh episode of the
    /// server, started by the first job), each graded as [`episode_row`] grades: the
    /// rows in `jobs`' order, the agent's usage added to `ctx`. A server that failed
    /// for good, or an agent whose calls failed for infrastructure reasons, fails
    /// the stage. No job: no server started.
    pub(super) fn play_episodes(
        &self,
        ctx: &mut StageCtx<'_>,
        agent: &dyn MultiTurn,
        p: &EpisodeSpec<'_>,
        jobs: &[Job<'_>],
    ) -> Result<Vec<EpisodeRow>, StageError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        let host = self.server.host(EXPLORE_STAGE)?;
        let pb = ctx.progress(jobs.len() as u64);
        let infra: Mutex<Vec<CallFailure>> = Mutex::new(Vec::new());
        let accounting: Mutex<Usage> = Mutex::new(Usage::default());
        let results = crate::env::parallel_map(
            jobs,
            self.m.concurrency,
            &|| pb.inc(1),
            &|job: &Job<'_>| -> Result<EpisodeRow, StageError> {
                let t = job.task;
                let ep = host.episode(EXPLORE_STAGE)?;
                let mut calls: Vec<McpCall> = Vec::new();
                let mut failed: Option<String> = None;
                let mut run_tool = |c: &CallRecord| -> String {
                    let call = self.call(&ep, c, p.gold_names, p.seed, &mut failed);
                    let text = call.result.clone();
                    calls.push(call);
                    text
                };
                let e = run_episode(
                    agent,
                    job.system,
                    &t.question,
                    job.tools,
                    crate::models::EpisodeRules {
                        max_turns: p.max_turns,
                        first_call_required: p.first_call_required,
                        one_call_per_turn: true,
                    },
                    p.seed,
                    &mut run_tool,
                );
                // The episode's processes stop and its copies go now.
                drop(ep);
                if let Some(f) = failed {
                    return Err(StageError::infra(EXPLORE_STAGE, f));
                }
                if let Some(err) = e.error.as_ref().filter(|e| e.infrastructure) {
                    if let Ok(mut v) = infra.lock() {
                        v.push(err.clone());
                    }
                }
                if let Ok(mut a) = accounting.lock() {
                    a.add(&e.accounting);
                }
                Ok(episode_row(t, p.split, p.round, p.model, &e, calls))
            },
        );
        pb.finish_and_clear();
        if let Some(e) =
            infrastructure_error(EXPLORE_STAGE, &infra.into_inner().unwrap_or_default())
        {
            return Err(e);
        }
        let rows = results
            .into_iter()
            .map(|r| r.ok_or_else(|| StageError::bug(EXPLORE_STAGE, "a worker thread panicked"))?)
            .collect::<Result<Vec<_>, _>>()?;
        ctx.add_usage(&accounting.into_inner().unwrap_or_default());
        Ok(rows)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_editor_reads_each_call_bounded() {
        let calls = vec![
            McpCall {
                tool: "tool_2".into(),
                server_tool: Some("git_log".into()),
                arguments: json!({"repo_path": "/workspace"}),
                result: "Commit history:\nMessage: x".into(),
                is_error: false,
            },
            McpCall {
                tool: "tool_9".into(),
                server_tool: None,
                arguments: json!({}),
                result: "y".repeat(50_000),
                is_error: true,
            },
        ];
        let t = editor_text("What is the Message?", &calls, Some("x"), true);
        assert!(
            t.starts_with("Request: What is the Message?\nCall 1: tool_2\n"),
            "{t}"
        );
        assert!(t.contains("Arguments: {\"repo_path\":\"/workspace\"}"));
        assert!(t.contains("Call 2: tool_9\nArguments: {}\nError: yyy"));
        assert!(t.ends_with("Final answer: x\nOutcome: correct"), "{t}");
        assert!(t.len() < EDITOR_TEXT_BYTES, "{}", t.len());
        let long = editor_text(&"q".repeat(100_000), &calls, None, false);
        assert!(long.len() <= EDITOR_TEXT_BYTES + 40);
        assert!(editor_text("q", &[], None, false).contains("(no tool call)"));
        // The judge's verdicts read as outcomes too; no verdict is "not judged".
        assert!(editor_text("q", &[], None, Outcome::of(None)).ends_with("Outcome: not judged"));
        assert!(editor_text("q", &[], None, Outcome::of(Some(true))).ends_with("Outcome: correct"));
    }
}
