//! The models a stage talks to, behind two small traits: [`Agent`] (uses tools) and
//! [`Editor`] (rewrites documentation), plus the one grammar of model specs
//! ([`ModelSpec`]) and the [`Models`] registry that the driver owns.
//!
//! | spec | what | built by |
//! |---|---|---|
//! | `scripted:<name>` | deterministic models for tests (no model) | [`scripted`] |
//! | `embedded:<name>` | in-process llama.cpp on the CPU (feature `embedded`) | [`llm`] |
//! | `openai:<model>` | any OpenAI-compatible endpoint | [`llm`] |
//! | `replay:<model>` | answers only from the call cache | [`llm`] |
//!
//! Models are created on first use (so `otb status` never loads one) and shared by
//! every stage of a drive: agent and editor often name the same model, and the call
//! cache directory is locked by whoever opens it.

pub mod cache_sync;
pub mod cache_views;
pub mod embed;
pub mod llm;
pub mod scripted;

use crate::rows::CallRecord;
use crate::{Failure, InputError};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use ::llm::{ModelKind, ModelSpec};

/// Model calls asked so far in this process through the call cache (every model but
/// the scripted ones), and how many the cache answered: `412 model calls (300 from
/// the cache)`, for a run's heartbeat line; empty before the first.
pub fn calls_line() -> String {
    match ::llm::cache::calls_so_far() {
        (0, _) => String::new(),
        (calls, cached) => format!("{calls} model calls ({cached} from the cache)"),
    }
}

/// What a model is used as; scripted names differ per role.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// Uses tools (explores, plays, answers).
    Agent,
    /// Rewrites documentation.
    Editor,
    /// `otb serve`: any model-backed spec.
    Serve,
    /// Named but not used by any method: the grammar and embedded names are checked.
    Unused,
}

/// Parse `spec` ([`ModelSpec::parse`]: the grammar) and check that it can be used in
/// `role`: scripted names exist for the role, embedded names are known models. Loads
/// nothing.
pub fn parse_for(spec: &str, role: Role) -> Result<ModelSpec, InputError> {
    parse_for_with(spec, role, &[])
}

/// [`parse_for`], where the scripted names `extra` (an environment's own scripted
/// agents or editors, for `role`) are valid too.
pub fn parse_for_with(spec: &str, role: Role, extra: &[&str]) -> Result<ModelSpec, InputError> {
    let m = ModelSpec::parse(spec).map_err(|e| InputError(e.0))?;
    match m.kind {
        ModelKind::Scripted if role == Role::Unused => {}
        ModelKind::Scripted => {
            let shipped = match role {
                Role::Agent => scripted::AGENTS,
                Role::Editor => scripted::EDITORS,
                Role::Serve => scripted::SERVED,
                Role::Unused => &[],
            };
            let mut valid = shipped.to_vec();
            if matches!(role, Role::Agent | Role::Editor) {
                valid.extend(extra);
            }
            if !valid.contains(&m.name.as_str()) {
                let list = valid
                    .iter()
                    .map(|n| format!("scripted:{n}"))
                    .collect::<Vec<_>>();
                let what = match role {
                    Role::Agent => "agent",
                    Role::Editor => "editor",
                    Role::Serve | Role::Unused => "served model",
                };
                return Err(InputError(format!(
                    "unknown scripted {what} `{m}` (valid: {})",
                    list.join(", ")
                )));
            }
        }
        ModelKind::Embedded => {
            ::llm::models::spec(&m.name).map_err(|e| InputError(format!("model `{m}`: {e}")))?;
        }
        ModelKind::OpenAi | ModelKind::Replay => {}
    }
    Ok(m)
}

/// How an agent's turns sample, from an experiment's `[models]` fields. A field left
/// `None` keeps the model's default (greedy for a standard model, medium reasoning
/// effort for a reasoning model), so the requests, their cache keys and the stage keys
/// are those of a run without the field. A temperature reaches standard models (the
/// embedded ones and `openai:` models that are not reasoning models); a reasoning
/// effort reaches `openai:` reasoning models only and every other backend ignores it.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct TurnSampling {
    /// Sampling temperature (0 or below: greedy); `None`: the model's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f64>,
    /// Reasoning effort of `openai:` reasoning models; `None`: the model's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reasoning_effort: Option<String>,
    /// Nucleus (top-p) sampling of a standard model; `None`: the model's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub top_p: Option<f64>,
}

impl TurnSampling {
    /// Nothing set: every model samples as it does by default.
    pub fn is_default(&self) -> bool {
        *self == TurnSampling::default()
    }

    /// `temperature 1, reasoning effort minimal`, or `model default`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(t) = self.temperature {
            parts.push(if t <= 0.0 {
                "greedy".to_string()
            } else {
                format!("temperature {t}")
            });
        }
        if let Some(e) = &self.reasoning_effort {
            parts.push(format!("reasoning effort {e}"));
        }
        if parts.is_empty() {
            "model default".into()
        } else {
            parts.join(", ")
        }
    }
}

/// An agent's sampling on each split: exploration (the training split, where the
/// paper samples) and test play.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SplitSampling {
    /// Sampling of exploration turns (the training split).
    pub explore: TurnSampling,
    /// Sampling of test play.
    pub test: TurnSampling,
}

/// Token usage and latency of one model call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Reasoning tokens (counted inside the completion tokens by OpenAI).
    pub reasoning_tokens: u64,
    /// Wall time of the call, in milliseconds.
    pub latency_ms: u64,
    /// The reply came from the call cache (counted as a cached call).
    pub cached: bool,
}

impl CallUsage {
    /// Sum another call's usage into this one (saturating).
    pub fn add(&mut self, u: &CallUsage) {
        self.prompt_tokens = self.prompt_tokens.saturating_add(u.prompt_tokens);
        self.completion_tokens = self.completion_tokens.saturating_add(u.completion_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(u.reasoning_tokens);
        self.latency_ms = self.latency_ms.saturating_add(u.latency_ms);
    }

    /// Add this call to a stage's accounting.
    pub fn record(&self, into: &mut pipeline::Usage, failed: bool) {
        into.calls += 1;
        into.cached_calls += self.cached as u64;
        into.prompt_tokens += self.prompt_tokens;
        into.completion_tokens += self.completion_tokens;
        into.reasoning_tokens += self.reasoning_tokens;
        into.errors += failed as u64;
    }
}

/// A failed model call, classified.
#[derive(Clone, Debug, PartialEq)]
pub struct CallFailure {
    /// The failure's class (`rate_limit`, `transient`, `malformed`, `refusal`, ...).
    pub kind: String,
    /// The error message.
    pub message: String,
    /// The failure is the infrastructure's (auth, network or rate limit after retries,
    /// local I/O), not the model's answer: the stage fails and publishes nothing, so a
    /// rerun asks again. Answer failures (malformed call, refusal, context overflow,
    /// content filter) are stored as rows.
    pub infrastructure: bool,
}

/// The stage error for the first infrastructure failure among `failures`, if any:
/// one line naming the stage, how many calls failed, the first error, and that the
/// completed calls are kept for the rerun.
pub fn infrastructure_error<'a>(
    stage: &str,
    failures: impl IntoIterator<Item = &'a CallFailure>,
) -> Option<pipeline::StageError> {
    let infra: Vec<&CallFailure> = failures.into_iter().filter(|f| f.infrastructure).collect();
    let first = infra.first()?;
    Some(pipeline::StageError::infra(
        stage,
        format!(
            "{} model call(s) failed for a reason outside the model's answer (first: {}: {}); \
             nothing was published, completed calls are kept in the call cache: fix the \
             cause and run the same command again",
            infra.len(),
            first.kind,
            first.message
        ),
    ))
}

/// The editor's replies to `asked` prompts of `stage`, checked: the first
/// infrastructure failure among them is the stage's error ([`infrastructure_error`]),
/// and fewer replies than prompts is a bug.
pub fn check_replies(
    stage: &str,
    replies: &[EditorReply],
    asked: usize,
) -> Result<(), pipeline::StageError> {
    if let Some(e) = infrastructure_error(stage, replies.iter().filter_map(|r| r.error.as_ref())) {
        return Err(e);
    }
    if replies.len() != asked {
        return Err(pipeline::StageError::bug(
            stage,
            "editor returned fewer replies than asked",
        ));
    }
    Ok(())
}

/// The first assistant message of an agent turn.
#[derive(Clone, Debug, Default)]
pub struct AgentTurn {
    /// The tool calls of the message.
    pub calls: Vec<CallRecord>,
    /// The message's text, if any.
    pub content: Option<String>,
    /// Token usage and latency of the call.
    pub usage: CallUsage,
    /// Set when the model call failed.
    pub error: Option<CallFailure>,
}

/// One agent turn to take: system prompt, user question, the tools as shown.
#[derive(Clone, Copy, Debug)]
pub struct AgentJob<'a> {
    /// The system prompt.
    pub system: &'a str,
    /// The user's question.
    pub question: &'a str,
    /// The tool definitions as shown to the agent.
    pub tools: &'a [Value],
    /// Sampling seed of the call.
    pub seed: u64,
}

/// Uses tools: one turn per instance.
pub trait Agent: Send + Sync {
    /// Takes one turn: the first assistant message for `job`.
    fn act(&self, job: &AgentJob<'_>) -> AgentTurn;

    /// Take many turns; model-backed agents override this to run them concurrently.
    /// `done` is called once per finished turn (progress).
    fn act_all(&self, jobs: &[AgentJob<'_>], done: &(dyn Fn() + Sync)) -> Vec<AgentTurn> {
        jobs.iter()
            .map(|j| {
                let t = self.act(j);
                done();
                t
            })
            .collect()
    }
}

/// An opened editor's spec and the reply room it was opened with
/// ([`Models::editor_with_room`]).
type EditorKey = (ModelSpec, Option<u32>);

/// The editor's reply to one prompt.
#[derive(Clone, Debug, Default)]
pub struct EditorReply {
    /// The reply's text (`None` when the call failed).
    pub text: Option<String>,
    /// Token usage and latency of the call.
    pub usage: CallUsage,
    /// Set when the model call failed.
    pub error: Option<CallFailure>,
    /// The reply stopped at its token limit (finish reason `length`): its end is
    /// missing, so what it was writing last is incomplete.
    pub cut: bool,
}

/// Rewrites documentation: prompt text in, reply text out.
pub trait Editor: Send + Sync {
    /// Answers one prompt, sampling with `seed`.
    fn complete(&self, prompt: &str, seed: u64) -> EditorReply;

    /// Answer many prompts; model-backed editors override this to run them concurrently.
    fn complete_all(
        &self,
        prompts: &[String],
        seed: u64,
        done: &(dyn Fn() + Sync),
    ) -> Vec<EditorReply> {
        prompts
            .iter()
            .map(|p| {
                let r = self.complete(p, seed);
                done();
                r
            })
            .collect()
    }

    /// [`Editor::complete_all`] for requests that open with the system message
    /// `system`: a model-backed editor sends it as a message of its own before each
    /// prompt; by default (scripted editors) it is written before each prompt, one
    /// text.
    fn complete_all_with_system(
        &self,
        system: &str,
        prompts: &[String],
        seed: u64,
        done: &(dyn Fn() + Sync),
    ) -> Vec<EditorReply> {
        let joined: Vec<String> = prompts
            .iter()
            .map(|p| format!("{}\n\n{p}", system.trim_end()))
            .collect();
        self.complete_all(&joined, seed, done)
    }
}
/// One step of a multi-turn episode as the agent saw it: the calls it made and,
/// for each, the text the tool returned.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Step {
    /// The tool calls the agent made.
    pub calls: Vec<CallRecord>,
    /// The text of the agent's message, if any.
    pub content: Option<String>,
    /// Per call, the text the tool returned.
    pub results: Vec<String>,
}

/// A multi-turn request: the conversation so far (earlier steps with their tool
/// results) and whether the agent must now answer without tools.
#[derive(Clone, Copy, Debug)]
pub struct Conversation<'a> {
    /// The system prompt.
    pub system: &'a str,
    /// The user's question.
    pub question: &'a str,
    /// The tool definitions as shown to the agent.
    pub tools: &'a [Value],
    /// The earlier steps of the episode, with their tool results.
    pub steps: &'a [Step],
    /// The turn budget is spent: the agent must give its final answer (no tools).
    pub final_answer: bool,
    /// This turn must call a tool (the first turn, when the environment asks for it:
    /// a small model otherwise tends to answer from memory without searching).
    pub require_tool: bool,
    /// Sampling seed of the call.
    pub seed: u64,
    /// `Some(false)`: one tool call per turn is wanted (sent to endpoints as
    /// `parallel_tool_calls`); `None`: nothing said.
    pub parallel_tool_calls: Option<bool>,
}

/// Multi-turn tool use (search): each turn sees the earlier calls and their results.
/// The default implementation asks [`Agent::act`] with the latest results appended to
/// the question, which is what scripted agents need; model-backed agents send the real
/// message history (assistant tool calls, tool results).
pub trait MultiTurn: Agent {
    /// Takes the next turn of the conversation `conv`.
    fn converse(&self, conv: &Conversation<'_>) -> AgentTurn {
        let mut question = conv.question.to_string();
        for s in conv.steps {
            for r in &s.results {
                question.push_str("\n\nTool result: ");
                question.push_str(r);
            }
        }
        if conv.final_answer {
            question.push_str("\n\nGive your final answer now.");
            let mut t = self.act(&AgentJob {
                system: conv.system,
                question: &question,
                tools: &[],
                seed: conv.seed,
            });
            t.calls.clear();
            return t;
        }
        self.act(&AgentJob {
            system: conv.system,
            question: &question,
            tools: conv.tools,
            seed: conv.seed,
        })
    }
}

/// A finished multi-turn episode.
#[derive(Clone, Debug, Default)]
pub struct Episode {
    /// The steps in which the agent called tools, with the tools' results.
    pub steps: Vec<Step>,
    /// The final answer's text (the last turn without a tool call).
    pub answer: Option<String>,
    /// Token usage and latency, summed over the episode's calls.
    pub usage: CallUsage,
    /// Every model call of the episode, as a stage accounts for it (calls, cached
    /// calls, tokens, errors).
    pub accounting: pipeline::Usage,
    /// The failure that ended the episode, if a model call failed.
    pub error: Option<CallFailure>,
    /// True when the turn budget ran out and the answer was forced.
    pub forced: bool,
}

/// How a multi-turn episode runs.
#[derive(Clone, Copy, Debug, Default)]
pub struct EpisodeRules {
    /// Tool turns before the forced final answer.
    pub max_turns: usize,
    /// The first turn must call a tool.
    pub first_call_required: bool,
    /// ReAct: the agent is asked for one call per turn and only the first call of a
    /// turn is executed and kept in the history; otherwise every call is.
    pub one_call_per_turn: bool,
}

impl EpisodeRules {
    /// An environment table's `first_call` key (`table` names it in the error):
    /// `"auto"` (the default: the model chooses) or `"required"` (the first turn must
    /// call a tool), as [`EpisodeRules::first_call_required`].
    pub fn first_call(value: Option<&str>, table: &str) -> Result<bool, String> {
        match value.unwrap_or("auto") {
            "auto" => Ok(false),
            "required" => Ok(true),
            other => Err(format!(
                "{table}.first_call = `{other}` (valid: auto, required)"
            )),
        }
    }
}

/// Run one multi-turn episode: the agent calls tools (`run_tool` executes one call
/// and returns its text), results are fed back, at most `rules.max_turns` turns, then
/// a forced final answer. A failed model call ends the episode with its error.
pub fn run_episode(
    agent: &dyn MultiTurn,
    system: &str,
    question: &str,
    tools: &[Value],
    rules: EpisodeRules,
    seed: u64,
    run_tool: &mut dyn FnMut(&CallRecord) -> String,
) -> Episode {
    let EpisodeRules {
        max_turns,
        first_call_required,
        one_call_per_turn,
    } = rules;
    let mut ep = Episode::default();
    for turn in 0..=max_turns {
        let final_answer = turn == max_turns;
        let t = agent.converse(&Conversation {
            system,
            question,
            tools,
            steps: &ep.steps,
            final_answer,
            require_tool: first_call_required && turn == 0 && !final_answer,
            seed,
            parallel_tool_calls: one_call_per_turn.then_some(false),
        });
        ep.usage.add(&t.usage);
        t.usage.record(&mut ep.accounting, t.error.is_some());
        if t.error.is_some() {
            ep.error = t.error;
            return ep;
        }
        if t.calls.is_empty() || final_answer {
            ep.answer = t.content;
            ep.forced = final_answer;
            return ep;
        }
        let mut calls = t.calls;
        if one_call_per_turn {
            calls.truncate(1);
        }
        let results = calls.iter().map(&mut *run_tool).collect();
        ep.steps.push(Step {
            calls,
            content: t.content,
            results,
        });
    }
    ep
}

/// The models of one drive, created on first use and shared by every stage.
/// Owned by the driver (no process-wide state): two drives in one process (tests)
/// each have their own.
pub struct Models {
    cache_dir: PathBuf,
    embed_cache: PathBuf,
    llm: llm::Shared,
    agents: Mutex<HashMap<ModelSpec, Arc<dyn MultiTurn>>>,
    /// Model-backed agents with a sampling other than the model's default.
    sampled: Mutex<HashMap<(ModelSpec, String), Arc<dyn MultiTurn>>>,
    /// Editors with their own sampling ([`Models::editor_sampled`]).
    sampled_editors: Mutex<HashMap<(ModelSpec, String), Arc<dyn Editor>>>,
    /// Editors opened so far, by spec and the room their replies were given.
    editors: Mutex<HashMap<EditorKey, Arc<dyn Editor>>>,
    /// Editors given by [`Models::with_editor`]: whatever room is asked for.
    given_editors: Mutex<HashMap<ModelSpec, Arc<dyn Editor>>>,
    embedders: Mutex<HashMap<String, Arc<dyn embed::Embed>>>,
}

impl Models {
    /// Each loaded model backend's account of its time so far (embedded models:
    /// tokens, throughput, batch occupancy), by model spec.
    pub fn metrics_summaries(&self) -> Vec<(String, String)> {
        self.llm.metrics_summaries()
    }

    /// Models whose calls are cached in `<store>/cache/llm` and embeddings in
    /// `<store>/cache/embed`; a store shared by cooperating workers has its call
    /// cache locked per write.
    pub fn for_store(store: &pipeline::Store) -> Models {
        let mut m = Models::new(
            &store.root().join("cache").join("llm"),
            &store.root().join("cache").join("embed"),
        );
        m.llm.per_write = store.access() == pipeline::Access::Shared;
        m
    }

    /// The call cache of this drive's models (opened on first use, then shared).
    pub fn call_cache(&self) -> Result<std::sync::Arc<::llm::CallCache>, Failure> {
        self.llm.cache(&self.cache_dir)
    }

    /// `openai:` models reach `endpoints` (an experiment's `[models] endpoints`)
    /// unless `OTB_LLM_BASE_URL` names the servers.
    pub fn with_endpoints(mut self, endpoints: &[String]) -> Models {
        self.llm.endpoints = endpoints.to_vec();
        self
    }

    /// Models whose calls are cached in `cache_dir` and embeddings in `embed_cache`.
    pub fn new(cache_dir: &Path, embed_cache: &Path) -> Models {
        Models {
            cache_dir: cache_dir.to_path_buf(),
            embed_cache: embed_cache.to_path_buf(),
            llm: llm::Shared::default(),
            agents: Mutex::new(HashMap::new()),
            sampled: Mutex::new(HashMap::new()),
            sampled_editors: Mutex::new(HashMap::new()),
            editors: Mutex::new(HashMap::new()),
            given_editors: Mutex::new(HashMap::new()),
            embedders: Mutex::new(HashMap::new()),
        }
    }

    /// Use `agent` wherever `spec` is named (tests, embedding applications).
    pub fn with_agent(self, spec: ModelSpec, agent: Arc<dyn MultiTurn>) -> Models {
        self.register_agent(spec, agent);
        self
    }

    /// Register `agent` for `spec` during a drive (an environment's scripted agents that
    /// need its data, e.g. the search oracle needs the questions' domains).
    pub fn register_agent(&self, spec: ModelSpec, agent: Arc<dyn MultiTurn>) {
        if let Ok(mut m) = self.agents.lock() {
            m.insert(spec, agent);
        }
    }

    /// Use `editor` wherever `spec` is named, from now on (an environment's scripted
    /// editor, registered by its drive).
    pub fn register_editor(&self, spec: ModelSpec, editor: Arc<dyn Editor>) {
        if let Ok(mut m) = self.given_editors.lock() {
            m.insert(spec, editor);
        }
    }

    /// Use `editor` wherever `spec` is named (tests, embedding applications).
    pub fn with_editor(self, spec: ModelSpec, editor: Arc<dyn Editor>) -> Models {
        self.register_editor(spec, editor);
        self
    }

    /// The directory of the model call cache.
    pub fn cache_dir(&self) -> &Path {
        &self.cache_dir
    }

    /// The agent `spec` names, opened on first use and shared afterwards (with the
    /// model's default sampling).
    pub fn agent(&self, spec: &ModelSpec) -> Result<Arc<dyn MultiTurn>, Failure> {
        let mut map = self
            .agents
            .lock()
            .map_err(|_| Failure::bug("model registry poisoned"))?;
        if let Some(a) = map.get(spec) {
            return Ok(a.clone());
        }
        let a: Arc<dyn MultiTurn> = match spec.kind {
            ModelKind::Scripted => Arc::from(scripted::agent(&spec.name).ok_or_else(|| {
                Failure::user(format!(
                    "scripted agent `{spec}` is not available here (it belongs to an environment this experiment does not use)"
                ))
            })?),
            _ => Arc::new(llm::LlmAgent::open(&self.llm, spec, &self.cache_dir)?),
        };
        map.insert(spec.clone(), a.clone());
        Ok(a)
    }

    /// The agent `spec` names, sampling as `sampling` says. Scripted agents do not
    /// sample: they are the same agent whatever `sampling` is.
    pub fn agent_sampled(
        &self,
        spec: &ModelSpec,
        sampling: &TurnSampling,
    ) -> Result<Arc<dyn MultiTurn>, Failure> {
        if sampling.is_default() || spec.kind == ModelKind::Scripted {
            return self.agent(spec);
        }
        let key = (
            spec.clone(),
            serde_json::to_string(sampling).unwrap_or_default(),
        );
        let mut map = self
            .sampled
            .lock()
            .map_err(|_| Failure::bug("model registry poisoned"))?;
        if let Some(a) = map.get(&key) {
            return Ok(a.clone());
        }
        let a: Arc<dyn MultiTurn> = Arc::new(llm::LlmAgent::open_sampled(
            &self.llm,
            spec,
            &self.cache_dir,
            sampling,
        )?);
        map.insert(key, a.clone());
        Ok(a)
    }

    /// The editor `spec` names, opened on first use and shared afterwards.
    pub fn editor(&self, spec: &ModelSpec) -> Result<Arc<dyn Editor>, Failure> {
        self.editor_limited(spec, None)
    }

    /// The editor `spec`, sampling as `sampling` says, with room for `max_tokens`
    /// tokens per reply (see [`Models::editor_with_room`]; a scripted editor, or a
    /// registered one, ignores both): e.g. Trace-Free+'s generator.
    pub fn editor_sampled(
        &self,
        spec: &ModelSpec,
        sampling: &TurnSampling,
        max_tokens: u32,
        repetition_penalty: Option<f64>,
    ) -> Result<Arc<dyn Editor>, Failure> {
        let given = self
            .given_editors
            .lock()
            .map_err(|_| Failure::bug("model registry poisoned"))?
            .contains_key(spec);
        if given || spec.kind == ModelKind::Scripted {
            return self.editor(spec);
        }
        let key = (
            spec.clone(),
            format!(
                "{} {max_tokens} {repetition_penalty:?}",
                serde_json::to_string(sampling).unwrap_or_default()
            ),
        );
        let mut map = self
            .sampled_editors
            .lock()
            .map_err(|_| Failure::bug("model registry poisoned"))?;
        if let Some(e) = map.get(&key) {
            return Ok(e.clone());
        }
        let e: Arc<dyn Editor> = Arc::new(
            llm::LlmEditor::open_sampled(&self.llm, spec, &self.cache_dir, sampling)?
                .with_room(Some(max_tokens))
                .with_repetition_penalty(repetition_penalty),
        );
        map.insert(key, e.clone());
        Ok(e)
    }

    /// The editor `spec` with room for `max_tokens` tokens per reply where its model
    /// has the model's default limit (a standard model's 512; a reasoning model keeps
    /// its larger budget): for replies that rewrite every tool of a tool set at once.
    pub fn editor_with_room(
        &self,
        spec: &ModelSpec,
        max_tokens: u32,
    ) -> Result<Arc<dyn Editor>, Failure> {
        self.editor_limited(spec, Some(max_tokens))
    }

    fn editor_limited(
        &self,
        spec: &ModelSpec,
        room: Option<u32>,
    ) -> Result<Arc<dyn Editor>, Failure> {
        if let Some(e) = self
            .given_editors
            .lock()
            .map_err(|_| Failure::bug("model registry poisoned"))?
            .get(spec)
        {
            return Ok(e.clone());
        }
        let mut map = self
            .editors
            .lock()
            .map_err(|_| Failure::bug("model registry poisoned"))?;
        if let Some(e) = map.get(&(spec.clone(), room)) {
            return Ok(e.clone());
        }
        let e: Arc<dyn Editor> = match spec.kind {
            ModelKind::Scripted => Arc::from(scripted::editor(&spec.name).ok_or_else(|| {
                Failure::user(format!(
                    "unknown scripted editor `{spec}` (valid: scripted:errors, scripted:silent)"
                ))
            })?),
            _ => Arc::new(llm::LlmEditor::open(&self.llm, spec, &self.cache_dir)?.with_room(room)),
        };
        map.insert((spec.clone(), room), e.clone());
        Ok(e)
    }

    /// The sentence embedder named `name` (`minilm`, `bag-of-words`).
    pub fn embedder(&self, name: &str) -> Result<Arc<dyn embed::Embed>, Failure> {
        let mut map = self
            .embedders
            .lock()
            .map_err(|_| Failure::bug("model registry poisoned"))?;
        if let Some(e) = map.get(name) {
            return Ok(e.clone());
        }
        let e: Arc<dyn embed::Embed> = Arc::from(embed::make_embedder(name, &self.embed_cache)?);
        map.insert(name.to_string(), e.clone());
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_call_is_auto_by_default_and_a_bad_value_names_its_table() {
        assert_eq!(EpisodeRules::first_call(None, "search"), Ok(false));
        assert_eq!(EpisodeRules::first_call(Some("auto"), "mcp"), Ok(false));
        assert_eq!(EpisodeRules::first_call(Some("required"), "mcp"), Ok(true));
        assert_eq!(
            EpisodeRules::first_call(Some("always"), "search"),
            Err("search.first_call = `always` (valid: auto, required)".into())
        );
    }

    #[test]
    fn specs_parse_once_and_print_as_written() {
        for s in [
            "scripted:schema",
            "embedded:qwen2.5-coder-1.5b",
            "openai:gpt-5",
            "replay:x",
        ] {
            let m = ModelSpec::parse(s).unwrap();
            assert_eq!(m.to_string(), s);
            // Key material: an embedded spec also names the backend's revision.
            let key = match m.kind {
                ::llm::ModelKind::Embedded => {
                    format!(
                        "{s} (embedded backend revision {})",
                        ::llm::EMBEDDED_REVISION
                    )
                }
                _ => s.to_string(),
            };
            assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{key}\""));
        }
        assert_eq!(ModelSpec::parse("openai:gpt-5").unwrap().tag(), "gpt-5");
        for bad in ["gpt-5", "openai:", "cloud:x", ":x", "openai: x"] {
            let e = ModelSpec::parse(bad).unwrap_err().0;
            assert!(e.contains("expected `scripted:<name>`"), "{bad}: {e}");
        }
    }

    #[test]
    fn scripted_names_are_checked_per_role() {
        assert!(parse_for("scripted:schema", Role::Agent).is_ok());
        let e = parse_for("scripted:schema", Role::Editor).unwrap_err().0;
        assert_eq!(
            e,
            "unknown scripted editor `scripted:schema` (valid: scripted:errors, scripted:silent, scripted:observer, scripted:judge)"
        );
        assert!(parse_for("embedded:no-such-model", Role::Agent).is_err());
        // `otb serve` serves `scripted:echo` and no agent or editor; nothing else
        // uses the echo.
        assert!(parse_for("scripted:echo", Role::Serve).is_ok());
        let e = parse_for("scripted:schema", Role::Serve).unwrap_err().0;
        assert_eq!(
            e,
            "unknown scripted served model `scripted:schema` (valid: scripted:echo)"
        );
        assert!(parse_for("scripted:echo", Role::Agent).is_err());
        assert!(parse_for("scripted:echo", Role::Editor).is_err());
    }

    #[test]
    fn an_episode_feeds_results_back_and_forces_an_answer() {
        struct Counter;
        impl Agent for Counter {
            fn act(&self, job: &AgentJob<'_>) -> AgentTurn {
                let seen = job.question.matches("Tool result").count();
                AgentTurn {
                    calls: if job.tools.is_empty() {
                        vec![]
                    } else {
                        vec![CallRecord {
                            function: "t".into(),
                            args: serde_json::json!({"n": seen}),
                            raw: None,
                        }]
                    },
                    content: Some(format!("saw {seen}")),
                    usage: CallUsage {
                        prompt_tokens: 1,
                        ..Default::default()
                    },
                    error: None,
                }
            }
        }
        impl MultiTurn for Counter {}
        let tools = vec![serde_json::json!({"name": "t"})];
        let mut ran = 0;
        let rules = |max_turns, one_call_per_turn| EpisodeRules {
            max_turns,
            first_call_required: false,
            one_call_per_turn,
        };
        let ep = run_episode(&Counter, "", "q", &tools, rules(3, false), 0, &mut |c| {
            ran += 1;
            format!("r{}", c.args["n"])
        });
        assert_eq!(ran, 3);
        assert_eq!(ep.steps.len(), 3);
        assert_eq!(ep.steps[2].results, vec!["r2".to_string()]);
        assert!(ep.forced);
        assert_eq!(ep.answer.as_deref(), Some("saw 3"));
        assert_eq!(ep.usage.prompt_tokens, 4);
    }

    /// An agent that calls two tools in every turn until it has seen two results.
    struct TwoCalls(Mutex<Vec<Option<bool>>>);
    impl Agent for TwoCalls {
        fn act(&self, _: &AgentJob<'_>) -> AgentTurn {
            AgentTurn::default()
        }
    }
    impl MultiTurn for TwoCalls {
        fn converse(&self, conv: &Conversation<'_>) -> AgentTurn {
            if let Ok(mut v) = self.0.lock() {
                v.push(conv.parallel_tool_calls);
            }
            let seen: usize = conv.steps.iter().map(|s| s.results.len()).sum();
            let call = |f: &str| CallRecord {
                function: f.into(),
                args: serde_json::json!({}),
                raw: None,
            };
            AgentTurn {
                calls: if seen >= 2 || conv.final_answer {
                    vec![]
                } else {
                    vec![call("a"), call("b")]
                },
                content: Some(format!("seen {seen}")),
                ..Default::default()
            }
        }
    }

    #[test]
    fn one_call_per_turn_executes_only_the_first_call() {
        let tools = vec![
            serde_json::json!({"name": "a"}),
            serde_json::json!({"name": "b"}),
        ];
        let agent = TwoCalls(Mutex::new(Vec::new()));
        let mut ran = Vec::new();
        let rules = |one_call_per_turn| EpisodeRules {
            max_turns: 5,
            first_call_required: false,
            one_call_per_turn,
        };
        let ep = run_episode(&agent, "", "q", &tools, rules(true), 0, &mut |c| {
            ran.push(c.function.clone());
            "r".into()
        });
        assert_eq!(ran, ["a", "a"], "the second call of a turn is not executed");
        assert!(ep
            .steps
            .iter()
            .all(|s| s.calls.len() == 1 && s.results.len() == 1));
        assert_eq!(ep.answer.as_deref(), Some("seen 2"));
        assert!(agent.0.lock().unwrap().iter().all(|p| *p == Some(false)));
        // The switch restores every call of a turn, and nothing is asked of the agent.
        let agent = TwoCalls(Mutex::new(Vec::new()));
        let mut ran = Vec::new();
        run_episode(&agent, "", "q", &tools, rules(false), 0, &mut |c| {
            ran.push(c.function.clone());
            "r".into()
        });
        assert_eq!(ran, ["a", "b"]);
        assert!(agent.0.lock().unwrap().iter().all(Option::is_none));
    }
}
