//! Agents and editors backed by the `llm` crate: `openai:<model>` (any
//! OpenAI-compatible endpoint, configured by `OTB_LLM_BASE_URL` and
//! `OTB_LLM_API_KEY`/`OPENAI_API_KEY`), `embedded:<name>` (the in-process model,
//! feature `embedded`), and `replay:<model>` (answers only from the call cache).
//!
//! Every call goes through the crash-safe call cache in `<store>/cache/llm`, so a
//! rerun makes no model calls and a killed run loses only the calls in flight. A call
//! that fails after the backend's retries becomes a turn with `error` set (its
//! `error_kind` is stored in the row), never a silent zero.

use super::{
    Agent, AgentJob, AgentTurn, CallFailure, CallUsage, Conversation, Editor, EditorReply,
    ModelSpec, MultiTurn,
};
use crate::rows::CallRecord;
use crate::Failure;
use llm::{
    Backend, CachedClient, CallCache, ChatRequest, ChatResponse, LlmError, Message, Sampling,
    ToolChoice, ToolDef,
};
use serde_json::Value;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

type BackendRef = (Arc<dyn Backend>, String);

/// One call cache per directory and one backend per spec for a drive: the agent and
/// the editor often name the same model, and the cache directory is locked by
/// whoever opens it, so both must share. Owned by [`super::Models`].
#[derive(Default)]
pub struct Shared {
    inner: Mutex<SharedInner>,
    /// Open call caches taking their lock per write (cooperating workers share them).
    pub per_write: bool,
    /// The experiment's `[models] endpoints`, for `openai:` models when
    /// `OTB_LLM_BASE_URL` is unset.
    pub endpoints: Vec<String>,
}

#[derive(Default)]
struct SharedInner {
    caches: HashMap<PathBuf, Arc<CallCache>>,
    backends: HashMap<String, BackendRef>,
}

impl Shared {
    /// Each loaded backend's one-line account of its time (see
    /// [`llm::Backend::metrics_summary`]), by model spec.
    pub fn metrics_summaries(&self) -> Vec<(String, String)> {
        let Ok(s) = self.inner.lock() else {
            return Vec::new();
        };
        let mut out: Vec<(String, String)> = s
            .backends
            .iter()
            .filter_map(|(k, (b, _))| b.metrics_summary().map(|m| (k.clone(), m)))
            .collect();
        out.sort();
        out
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, SharedInner>, Failure> {
        self.inner
            .lock()
            .map_err(|_| Failure::bug("model registry poisoned"))
    }

    pub(crate) fn cache(&self, dir: &Path) -> Result<Arc<CallCache>, Failure> {
        let mut s = self.lock()?;
        if let Some(c) = s.caches.get(dir) {
            return Ok(c.clone());
        }
        let opened = if self.per_write {
            CallCache::open_per_write(dir)
        } else {
            CallCache::open(dir)
        };
        let c = Arc::new(
            opened.map_err(|e| Failure::infra(format!("call cache {}: {e}", dir.display())))?,
        );
        s.caches.insert(dir.to_path_buf(), c.clone());
        Ok(c)
    }

    fn backend(&self, spec: &ModelSpec, cache: &Arc<CallCache>) -> Result<BackendRef, Failure> {
        let key = spec.to_string();
        let mut s = self.lock()?;
        if let Some(b) = s.backends.get(&key) {
            return Ok(b.clone());
        }
        let b = backend_for(spec, cache, &self.endpoints)?;
        s.backends.insert(key, b.clone());
        Ok(b)
    }
}

/// Reasoning models (the paper's GPT-5 family, o-series) take reasoning effort and
/// `max_completion_tokens`, and no temperature.
fn sampling_for(model: &str) -> Sampling {
    let m = model.to_ascii_lowercase();
    if m.starts_with("gpt-5") || m.starts_with("o1") || m.starts_with("o3") || m.starts_with("o4") {
        Sampling::Reasoning {
            reasoning_effort: Some("medium".into()),
            max_completion_tokens: Some(8192),
        }
    } else {
        Sampling::Standard {
            temperature: Some(0.0),
            top_p: None,
            max_tokens: Some(512),
        }
    }
}

/// A model behind the call cache, with a runtime to drive it from synchronous stages.
pub struct LlmModel {
    client: CachedClient,
    model: String,
    sampling: Sampling,
    /// Sent with standard sampling only (see [`ChatRequest::repetition_penalty`]).
    repetition_penalty: Option<f64>,
    rt: tokio::runtime::Runtime,
}

fn backend_for(
    spec: &ModelSpec,
    cache: &Arc<CallCache>,
    endpoints: &[String],
) -> Result<(Arc<dyn Backend>, String), Failure> {
    llm::open_backend_with(spec, cache, endpoints).map_err(|e| Failure {
        class: match e.fault {
            llm::Fault::User => crate::error::ErrorClass::User,
            llm::Fault::Infrastructure => crate::error::ErrorClass::Infrastructure,
            llm::Fault::Bug => crate::error::ErrorClass::Bug,
        },
        message: e.message,
    })
}

impl LlmModel {
    /// Opens the model `spec` names with its default sampling, its calls cached in
    /// `cache_dir` and recorded as made by stage `stage`; the backend and the cache are
    /// shared through `shared`.
    pub fn open(
        shared: &Shared,
        spec: &ModelSpec,
        cache_dir: &Path,
        stage: &str,
    ) -> Result<LlmModel, Failure> {
        let cache = shared.cache(cache_dir)?;
        let (backend, model) = shared.backend(spec, &cache)?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .map_err(|e| Failure::infra(format!("starting the async runtime: {e}")))?;
        Ok(LlmModel {
            client: CachedClient::new(backend, cache).for_stage(stage),
            sampling: sampling_for(&model),
            repetition_penalty: None,
            model,
            rt,
        })
    }

    /// [`LlmModel::open`], sampling as `s` says where the model's kind of sampling has
    /// those fields (a temperature and top-p for a standard model, a reasoning effort
    /// for a reasoning model).
    pub fn open_sampled(
        shared: &Shared,
        spec: &ModelSpec,
        cache_dir: &Path,
        stage: &str,
        s: &super::TurnSampling,
    ) -> Result<LlmModel, Failure> {
        let mut m = LlmModel::open(shared, spec, cache_dir, stage)?;
        m.sampling = with_overrides(m.sampling, s);
        Ok(m)
    }

    /// Send all requests concurrently (the backend bounds concurrency), as one
    /// [request group](llm::group) (a backend that queues shares its slots
    /// between groups, so one call of a chain does not wait behind all of a wide
    /// batch); results in request order.
    fn chat_all(
        &self,
        reqs: Vec<ChatRequest>,
        done: &(dyn Fn() + Sync),
    ) -> Vec<Result<ChatResponse, LlmError>> {
        let n = reqs.len();
        self.rt.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            let group = llm::group::new_group();
            for (i, req) in reqs.into_iter().enumerate() {
                let client = self.client.clone();
                set.spawn(llm::group::in_group(group, async move {
                    (i, client.chat(&req).await)
                }));
            }
            let mut out: Vec<Option<Result<ChatResponse, LlmError>>> =
                (0..n).map(|_| None).collect();
            while let Some(joined) = set.join_next().await {
                match joined {
                    Ok((i, r)) => out[i] = Some(r),
                    Err(e) => {
                        // A panicked task: record it against no particular slot; the
                        // empty slots below become errors.
                        eprintln!("otb: warning: a model call task failed: {e}");
                    }
                }
                done();
            }
            out.into_iter()
                .map(|r| {
                    r.unwrap_or_else(|| {
                        Err(LlmError::new(
                            llm::ErrorKind::Fatal,
                            "model call task failed",
                        ))
                    })
                })
                .collect()
        })
    }
}

fn usage_of(r: &ChatResponse) -> CallUsage {
    CallUsage {
        prompt_tokens: r.usage.prompt,
        completion_tokens: r.usage.completion,
        reasoning_tokens: r.usage.reasoning,
        latency_ms: r.latency_ms,
        cached: false,
    }
}

fn failure(e: &LlmError) -> CallFailure {
    CallFailure {
        kind: e.kind.as_str().to_string(),
        message: e.to_string(),
        infrastructure: e.is_infrastructure(),
    }
}

fn tool_def(v: &Value) -> ToolDef {
    ToolDef {
        name: v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string(),
        description: v
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string),
        parameters: v.get("parameters").cloned(),
    }
}

/// A model-backed [`Agent`]: tool calls through the model's chat API.
pub struct LlmAgent(LlmModel);

impl LlmAgent {
    fn request(&self, job: &AgentJob<'_>) -> ChatRequest {
        let mut req = ChatRequest::new(
            self.0.model.clone(),
            vec![Message::system(job.system), Message::user(job.question)],
        );
        req.tools = job.tools.iter().map(tool_def).collect();
        req.tool_choice = ToolChoice::Required;
        req.sampling = self.0.sampling.clone();
        req.seed = Some(job.seed);
        req
    }
}

fn turn_of(r: Result<ChatResponse, LlmError>) -> AgentTurn {
    match r {
        Ok(resp) => AgentTurn {
            calls: resp
                .tool_calls
                .iter()
                .map(|c| CallRecord {
                    function: c.name.clone(),
                    args: c.arguments.clone().unwrap_or(Value::Null),
                    raw: if c.arguments.is_some() {
                        None
                    } else {
                        Some(c.arguments_raw.clone())
                    },
                })
                .collect(),
            content: resp.content.clone(),
            usage: usage_of(&resp),
            error: None,
        },
        Err(e) => AgentTurn {
            error: Some(failure(&e)),
            ..Default::default()
        },
    }
}

impl Agent for LlmAgent {
    fn act(&self, job: &AgentJob<'_>) -> AgentTurn {
        self.act_all(std::slice::from_ref(job), &|| {})
            .pop()
            .unwrap_or_default()
    }

    fn act_all(&self, jobs: &[AgentJob<'_>], done: &(dyn Fn() + Sync)) -> Vec<AgentTurn> {
        let reqs = jobs.iter().map(|j| self.request(j)).collect();
        self.0
            .chat_all(reqs, done)
            .into_iter()
            .map(turn_of)
            .collect()
    }
}

/// The last user message of a multi-turn episode whose tool budget is spent.
pub const FINAL_ANSWER: &str = include_str!("../../../prompts/agent_final_answer.txt");

/// Multi-turn: the real message history -- the assistant's tool calls with their
/// ids, then one tool message per call with its result; the forced final turn sends
/// no tools and asks for the answer.
/// The request of one multi-turn step: the message history, and the tools with the
/// turn's tool choice (none on the forced final turn; required where the environment
/// asks for a first call).
fn conversation_request(model: String, conv: &Conversation<'_>) -> ChatRequest {
    let mut messages = vec![Message::system(conv.system), Message::user(conv.question)];
    for (i, step) in conv.steps.iter().enumerate() {
        let calls: Vec<llm::ToolCall> = step
            .calls
            .iter()
            .enumerate()
            .map(|(j, c)| {
                let raw = c
                    .raw
                    .clone()
                    .unwrap_or_else(|| serde_json::to_string(&c.args).unwrap_or_default());
                llm::ToolCall::new(format!("call_{i}_{j}"), c.function.clone(), raw)
            })
            .collect();
        messages.push(Message::assistant_tool_calls(step.content.clone(), calls));
        for (j, r) in step.results.iter().enumerate() {
            messages.push(Message::tool_result(format!("call_{i}_{j}"), r.clone()));
        }
    }
    let mut req = ChatRequest::new(model, messages);
    if conv.final_answer {
        req.messages.push(Message::user(FINAL_ANSWER.trim_end()));
        req.tool_choice = ToolChoice::None;
    } else {
        req.tools = conv.tools.iter().map(tool_def).collect();
        req.parallel_tool_calls = conv.parallel_tool_calls;
        req.tool_choice = if conv.require_tool {
            ToolChoice::Required
        } else {
            ToolChoice::Auto
        };
    }
    req
}

impl MultiTurn for LlmAgent {
    fn converse(&self, conv: &Conversation<'_>) -> AgentTurn {
        let mut req = conversation_request(self.0.model.clone(), conv);
        req.sampling = self.0.sampling.clone();
        req.seed = Some(conv.seed);
        let offered = (req.tool_choice != ToolChoice::None).then(|| req.tools.clone());
        let mut turn = self
            .0
            .chat_all(vec![req], &|| {})
            .pop()
            .map(turn_of)
            .unwrap_or_default();
        // When the call is the model's choice, a small model sometimes writes it as
        // text instead of in the call format: it is the call it meant.
        if let (true, Some(tools)) = (turn.calls.is_empty(), &offered) {
            if let Some(calls) = turn
                .content
                .as_deref()
                .and_then(|t| calls_in_text(t, tools))
            {
                turn.calls = calls;
                turn.content = None;
            }
        }
        turn
    }
}

/// The calls in a reply whose whole text is one or more calls of offered tools,
/// written as JSON objects `{"name": ..., "arguments": {...}}` (optionally in one
/// code fence) instead of in the call format; `None` for any other text (an answer).
pub fn calls_in_text(text: &str, tools: &[ToolDef]) -> Option<Vec<CallRecord>> {
    /// Most calls taken from one reply (as the embedded grammar allows).
    const MAX_CALLS: usize = 4;
    let mut body = text.trim();
    if let Some(inner) = body.strip_prefix("```") {
        let inner = inner.strip_prefix("json").unwrap_or(inner);
        body = inner.strip_suffix("```")?.trim();
    }
    if !body.starts_with('{') {
        return None;
    }
    let mut calls = Vec::new();
    for value in serde_json::Deserializer::from_str(body).into_iter::<Value>() {
        let Ok(Value::Object(obj)) = value else {
            return None;
        };
        if obj.len() != 2 || calls.len() == MAX_CALLS {
            return None;
        }
        let name = obj.get("name")?.as_str()?;
        if !tools.iter().any(|t| t.name == name) {
            return None;
        }
        let args = match obj.get("arguments")? {
            Value::String(s) => serde_json::from_str::<Value>(s).ok()?,
            v => v.clone(),
        };
        if !args.is_object() {
            return None;
        }
        calls.push(CallRecord {
            function: name.to_string(),
            args,
            raw: None,
        });
    }
    (!calls.is_empty()).then_some(calls)
}

/// A model-backed [`Editor`]: one chat request per prompt, no tools.
pub struct LlmEditor(LlmModel);

impl LlmEditor {
    /// One chat request per prompt (after the system message `system`, when given).
    fn ask_all(
        &self,
        system: Option<&str>,
        prompts: &[String],
        seed: u64,
        done: &(dyn Fn() + Sync),
    ) -> Vec<EditorReply> {
        let reqs = prompts
            .iter()
            .map(|p| {
                let mut messages = Vec::with_capacity(2);
                if let Some(s) = system {
                    messages.push(Message::system(s));
                }
                messages.push(Message::user(p.clone()));
                let mut req = ChatRequest::new(self.0.model.clone(), messages);
                req.tool_choice = ToolChoice::None;
                req.sampling = self.0.sampling.clone();
                // A reasoning model is sent none (its API takes no sampling fields).
                if matches!(req.sampling, Sampling::Standard { .. }) {
                    req.repetition_penalty = self.0.repetition_penalty;
                }
                req.seed = Some(seed);
                req
            })
            .collect();
        self.0
            .chat_all(reqs, done)
            .into_iter()
            .map(reply_of)
            .collect()
    }

    /// With `penalty` (`Some(p)`, p != 1), a standard model's requests carry the
    /// repetition penalty `p`; a reasoning model's never do.
    pub fn with_repetition_penalty(mut self, penalty: Option<f64>) -> Self {
        self.0.repetition_penalty = penalty.filter(|p| *p != 1.0);
        self
    }
}

fn reply_of(r: Result<ChatResponse, LlmError>) -> EditorReply {
    match r {
        Ok(resp) => EditorReply {
            text: Some(resp.content.clone().unwrap_or_default()),
            usage: usage_of(&resp),
            error: None,
            cut: resp.finish_reason.as_deref() == Some("length"),
        },
        Err(e) => EditorReply {
            error: Some(failure(&e)),
            ..Default::default()
        },
    }
}

impl Editor for LlmEditor {
    fn complete(&self, prompt: &str, seed: u64) -> EditorReply {
        self.complete_all(&[prompt.to_string()], seed, &|| {})
            .pop()
            .unwrap_or_default()
    }

    fn complete_all(
        &self,
        prompts: &[String],
        seed: u64,
        done: &(dyn Fn() + Sync),
    ) -> Vec<EditorReply> {
        self.ask_all(None, prompts, seed, done)
    }

    fn complete_all_with_system(
        &self,
        system: &str,
        prompts: &[String],
        seed: u64,
        done: &(dyn Fn() + Sync),
    ) -> Vec<EditorReply> {
        self.ask_all(Some(system), prompts, seed, done)
    }
}

impl LlmAgent {
    /// The agent `spec` names, with the model's default sampling.
    pub fn open(shared: &Shared, spec: &ModelSpec, cache_dir: &Path) -> Result<Self, Failure> {
        Ok(LlmAgent(LlmModel::open(
            shared, spec, cache_dir, "explore",
        )?))
    }

    /// An agent whose turns sample as `s` says (its fields override the model's
    /// default sampling where that kind of sampling has them: a temperature for a
    /// standard model, a reasoning effort for a reasoning model).
    pub fn open_sampled(
        shared: &Shared,
        spec: &ModelSpec,
        cache_dir: &Path,
        s: &super::TurnSampling,
    ) -> Result<Self, Failure> {
        Ok(LlmAgent(LlmModel::open_sampled(
            shared, spec, cache_dir, "explore", s,
        )?))
    }
}

/// `base` with the fields `s` sets.
fn with_overrides(base: Sampling, s: &super::TurnSampling) -> Sampling {
    match base {
        Sampling::Standard {
            temperature,
            top_p,
            max_tokens,
        } => Sampling::Standard {
            temperature: s.temperature.or(temperature),
            top_p: s.top_p.or(top_p),
            max_tokens,
        },
        Sampling::Reasoning {
            reasoning_effort,
            max_completion_tokens,
        } => Sampling::Reasoning {
            reasoning_effort: s.reasoning_effort.clone().or(reasoning_effort),
            max_completion_tokens,
        },
    }
}

impl LlmEditor {
    /// The editor `spec` names, with the model's default sampling.
    pub fn open(shared: &Shared, spec: &ModelSpec, cache_dir: &Path) -> Result<Self, Failure> {
        Ok(LlmEditor(LlmModel::open(
            shared,
            spec,
            cache_dir,
            "batch-reflect",
        )?))
    }

    /// The editor `spec` names, sampling as `s` says where its kind of model has that
    /// kind of sampling (see [`LlmAgent::open_sampled`]).
    pub fn open_sampled(
        shared: &Shared,
        spec: &ModelSpec,
        cache_dir: &Path,
        s: &super::TurnSampling,
    ) -> Result<Self, Failure> {
        Ok(LlmEditor(LlmModel::open_sampled(
            shared,
            spec,
            cache_dir,
            "batch-reflect",
            s,
        )?))
    }

    /// With `room` (`Some(n)`), a standard model may write up to `n` tokens per reply
    /// instead of its default 512; a reasoning model keeps its own budget.
    pub fn with_room(mut self, room: Option<u32>) -> Self {
        self.0.sampling = with_room(self.0.sampling, room);
        self
    }
}

/// `sampling` with room for `room` tokens per reply (see [`LlmEditor::with_room`]).
fn with_room(sampling: Sampling, room: Option<u32>) -> Sampling {
    match (sampling, room) {
        (
            Sampling::Standard {
                temperature,
                top_p,
                max_tokens,
            },
            Some(n),
        ) => Sampling::Standard {
            temperature,
            top_p,
            max_tokens: Some(max_tokens.map_or(n, |m| m.max(n))),
        },
        (s, _) => s,
    }
}

/// `otb serve`: expose a model spec (`embedded:<name>`, `openai:<model>`,
/// `replay:<model>`, or `scripted:echo`, a reply without a model) as an
/// OpenAI-compatible endpoint at `addr` until killed.
/// Requests through it are not cached here (the client caches).
pub fn serve_blocking(
    spec: &ModelSpec,
    addr: std::net::SocketAddr,
    cache_dir: &Path,
) -> Result<(), Failure> {
    if !addr.ip().is_loopback() {
        eprintln!("otb: warning: serving on non-loopback address {addr}");
    }
    // The cache is locked per write only (replay reads it; nothing else here writes),
    // so a run can use the same store while this serves.
    let cache = Arc::new(
        CallCache::open_per_write(cache_dir)
            .map_err(|e| Failure::infra(format!("call cache {}: {e}", cache_dir.display())))?,
    );
    let (backend, model) = match spec.kind {
        // `scripted:echo`: no model, the server alone (checked by `parse_for`).
        llm::ModelKind::Scripted => {
            let backend = crate::models::scripted::served(&spec.name).ok_or_else(|| {
                Failure::user(format!(
                    "model `{spec}`: not a scripted model that can be served"
                ))
            })?;
            (backend, spec.name.clone())
        }
        _ => backend_for(spec, &cache, &[])?,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::infra(format!("starting the async runtime: {e}")))?;
    // The one error that ends serving is the address (in use, not allowed): the
    // user's to change. It is bound before anything is announced, so a port in use
    // prints the error alone.
    let listener = rt
        .block_on(llm::serve::bind(addr))
        .map_err(|e| Failure::user(e.to_string()))?;
    let bound = listener.local_addr().unwrap_or(addr);
    eprintln!("otb: serving {model} ({spec}) at http://{bound}/v1/chat/completions");
    let cfg = llm::ServeConfig {
        model: Some(model.clone()),
        ..llm::ServeConfig::default()
    };
    rt.block_on(llm::serve::serve_listener_with(backend, listener, cfg))
        .map_err(|e| Failure::user(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sampling_overrides_apply_where_the_kind_has_the_field() {
        let t = crate::models::TurnSampling {
            temperature: Some(0.7),
            reasoning_effort: Some("minimal".into()),
            top_p: Some(0.9),
        };
        assert_eq!(
            with_overrides(sampling_for("qwen2.5-coder-1.5b"), &t),
            Sampling::Standard {
                temperature: Some(0.7),
                top_p: Some(0.9),
                max_tokens: Some(512)
            }
        );
        assert_eq!(
            with_overrides(sampling_for("gpt-5"), &t),
            Sampling::Reasoning {
                reasoning_effort: Some("minimal".into()),
                max_completion_tokens: Some(8192)
            }
        );
        // Nothing set: the model's default, so cache keys do not change.
        let none = crate::models::TurnSampling::default();
        assert_eq!(
            with_overrides(sampling_for("gpt-5"), &none),
            sampling_for("gpt-5")
        );
        assert_eq!(
            with_overrides(sampling_for("qwen"), &none),
            sampling_for("qwen")
        );
    }
    use serde_json::json;

    #[test]
    fn room_raises_a_standard_models_limit_only() {
        assert_eq!(
            with_room(sampling_for("qwen2.5-coder-1.5b"), Some(4096)),
            Sampling::Standard {
                temperature: Some(0.0),
                top_p: None,
                max_tokens: Some(4096)
            }
        );
        assert_eq!(
            with_room(sampling_for("gpt-5"), Some(4096)),
            sampling_for("gpt-5")
        );
        assert_eq!(with_room(sampling_for("qwen"), None), sampling_for("qwen"));
    }

    #[test]
    fn the_first_turn_can_require_a_tool_call() {
        let tools = [
            json!({"name": "tool_1", "description": "", "parameters": {"type": "object", "properties": {}}}),
        ];
        let conv = |require_tool: bool, final_answer: bool| Conversation {
            system: "s",
            question: "q",
            tools: &tools,
            steps: &[],
            final_answer,
            require_tool,
            seed: 0,
            parallel_tool_calls: None,
        };
        let req = conversation_request("m".into(), &conv(true, false));
        assert_eq!(req.tool_choice, ToolChoice::Required);
        assert_eq!(req.tools.len(), 1);
        let req = conversation_request("m".into(), &conv(false, false));
        assert_eq!(req.tool_choice, ToolChoice::Auto);
        let req = conversation_request("m".into(), &conv(false, true));
        assert_eq!(req.tool_choice, ToolChoice::None);
        assert!(req.tools.is_empty());
        assert_eq!(req.parallel_tool_calls, None);
        // One call per turn is asked of the endpoint on turns that offer tools.
        let one = Conversation {
            parallel_tool_calls: Some(false),
            ..conv(false, false)
        };
        let req = conversation_request("m".into(), &one);
        assert_eq!(req.parallel_tool_calls, Some(false));
        assert_eq!(
            llm::wire::request_body(&req)["parallel_tool_calls"],
            json!(false)
        );
    }

    #[test]
    fn a_call_written_as_text_is_that_call_and_nothing_else_is() {
        let tools: Vec<ToolDef> = ["search_history", "search_people"]
            .iter()
            .map(|n| tool_def(&json!({ "name": n })))
            .collect();
        let one = |t: &str| calls_in_text(t, &tools);
        // As the embedded model writes it when the choice is its own.
        let c = one(r#"{"name":"search_history","arguments":{"query":"Congo capital"}}"#).unwrap();
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].function, "search_history");
        assert_eq!(c[0].args, json!({"query": "Congo capital"}));
        // In a fence, with arguments as a JSON string; two in a row.
        let fenced = "```json\n{\"name\": \"search_people\", \"arguments\": \"{\\\"query\\\": \\\"Twain\\\"}\"}\n```";
        assert_eq!(one(fenced).unwrap()[0].args, json!({"query": "Twain"}));
        let two = "{\"name\": \"search_people\", \"arguments\": {}}\n{\"name\": \"search_history\", \"arguments\": {\"query\": \"x\"}}";
        assert_eq!(one(two).unwrap().len(), 2);
        // Answers stay answers: prose, a tool that is not offered, other keys,
        // arguments that are not an object, trailing prose, broken JSON, a fence
        // around prose, too many calls.
        for answer in [
            "Mark Twain",
            r#"The answer is {"name": "search_people"}"#,
            r#"{"name":"search_all","arguments":{}}"#,
            r#"{"name":"search_people","arguments":{},"note":"x"}"#,
            r#"{"name":"search_people","arguments":[1]}"#,
            r#"{"name":"search_people","arguments":{}} so it is Twain"#,
            r#"{"name":"search_people","arguments":{"query":"#,
            r#"{"answer": "Twain", "confidence": 1}"#,
            "```\nTwain\n```",
        ] {
            assert_eq!(one(answer), None, "{answer}");
        }
        let five = [r#"{"name":"search_people","arguments":{}}"#; 5].join("\n");
        assert_eq!(one(&five), None);
    }
}
