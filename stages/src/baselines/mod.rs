//! The baseline documentation methods (`../shared/spec/baselines.md`): EasyTool,
//! Play2Prompt and DRAFT. Each is a stage that turns an instance's opacified docs into
//! a new documentation set; `explore` + `evaluate` then score it exactly like Base and
//! +TO, so the methods differ only in the docs they produce.
//!
//! Every stage writes three tables: `docs` (the new documentation, one row per
//! instance), `doc_calls` (one row per model call with its tokens: what
//! `otb table tokens` sums) and `tool_runs` (every tool execution the method made).
//!
//! Model output is parsed as JSON ([`extract_json`]) and never evaluated as code; a
//! reply that does not parse is a failed step of the method, not a failed stage.

pub mod budget;
pub mod draft;
pub mod easytool;
pub mod external;
pub mod play2prompt;
pub mod tracefree;

use crate::env::{Cx, DriveError, Method};
use crate::models::Agent;
use crate::models::{AgentJob, AgentTurn, CallUsage, Editor, ModelSpec};
use crate::rows::{DocCallRow, DocRow, InstanceRow, ToolRunRow};
use budget::{Baselines, DraftBudget, Play2PromptBudget, TraceFreeBudget};
use datasets::bfcl::pyvalue::PyValue;
use pipeline::{Handle, StageCtx, StageError, Usage};
use serde_json::{Map, Value};
use std::collections::HashMap;

pub use crate::env::{ToolOutput, ToolRunner};

pub use crate::models::embed::{BagOfWords, Embed};

/// Cosine of two vectors (0 when either is zero), as `textsim` computes it.
pub use textsim::cosine_f64 as cosine;

/// Fill `{{name}}` placeholders of a prompt template.
pub fn fill(template: &str, vars: &[(&str, &str)]) -> String {
    let mut out = template.to_string();
    for (k, v) in vars {
        out = out.replace(&format!("{{{{{k}}}}}"), v);
    }
    out
}

/// The first JSON object in a model reply (code fences and prose around it are
/// ignored). Never evaluates anything.
pub fn extract_json(text: &str) -> Option<Map<String, Value>> {
    for (i, _) in text.match_indices('{') {
        let mut it = serde_json::Deserializer::from_str(&text[i..]).into_iter::<Value>();
        if let Some(Ok(Value::Object(m))) = it.next() {
            // Whatever a model writes is bounded before it is stored: one depth limit
            // for model output (the llm crate's).
            if depth(&Value::Object(m.clone())) > llm::MAX_JSON_DEPTH {
                return None;
            }
            return Some(m);
        }
    }
    None
}

fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(m) => 1 + m.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

/// Python `==` of two JSON argument values (so `5 == 5.0`).
pub fn args_equal(a: &Value, b: &Value) -> bool {
    PyValue::from_json(a).py_eq(&PyValue::from_json(b))
}

/// The models, executor and embedder a baseline works with.
pub struct Toolbox<'a> {
    /// The editor model that writes the documentation.
    pub editor: &'a dyn Editor,
    /// The editor's model spec, as recorded in `doc_calls`.
    pub editor_model: &'a str,
    /// The task model (Play2Prompt's validation runs).
    pub agent: Option<&'a dyn Agent>,
    /// The task model's spec, as recorded in `doc_calls` (empty without one).
    pub agent_model: &'a str,
    /// The task model's system prompt.
    pub agent_system: &'a str,
    /// Executes the method's tool calls.
    pub runner: &'a dyn ToolRunner,
    /// The sentence embedder (DRAFT).
    pub embed: Option<&'a dyn Embed>,
    /// Seed of the model calls (a retried editor prompt adds its attempt number).
    pub seed: u64,
}

/// One instance's work: records every model call and tool execution.
pub struct Work<'a> {
    /// The models, executor and embedder of the stage.
    pub tb: &'a Toolbox<'a>,
    /// The method's name (`easytool`, `play2prompt` or `draft`), as recorded in the rows.
    pub method: &'static str,
    /// The instance worked on.
    pub instance: &'a InstanceRow,
    /// The instance's starting documentation.
    pub docs: &'a DocRow,
    calls: Vec<DocCallRow>,
    runs: Vec<ToolRunRow>,
    usage: Usage,
    /// Infrastructure failures (the stage fails instead of publishing them).
    infra: Vec<crate::models::CallFailure>,
}

/// `exploration` or `editing` (see [`DocCallRow::phase`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Phase {
    /// Discovering tool behaviour.
    Exploration,
    /// Writing documentation.
    Editing,
}

impl Phase {
    fn as_str(self) -> &'static str {
        match self {
            Phase::Exploration => "exploration",
            Phase::Editing => "editing",
        }
    }
}

impl<'a> Work<'a> {
    /// A fresh record of `method`'s work on `instance`, starting from `docs`.
    pub fn new(
        tb: &'a Toolbox<'a>,
        method: &'static str,
        instance: &'a InstanceRow,
        docs: &'a DocRow,
    ) -> Self {
        Work {
            tb,
            method,
            instance,
            docs,
            calls: Vec::new(),
            runs: Vec::new(),
            usage: Usage::default(),
            infra: Vec::new(),
        }
    }

    /// An empty record of the same method's work on the same instance, for part of
    /// the work run on another thread; [`Work::absorb`] takes its record back.
    pub fn fork(&self) -> Work<'a> {
        Work::new(self.tb, self.method, self.instance, self.docs)
    }

    /// Append what `part` (a [`Work::fork`]) recorded: its calls, tool runs, usage
    /// and infrastructure failures, after this record's own.
    pub fn absorb(&mut self, part: Work<'_>) {
        self.calls.extend(part.calls);
        self.runs.extend(part.runs);
        self.usage.add(&part.usage);
        self.infra.extend(part.infra);
    }

    fn record(
        &mut self,
        tool: &str,
        step: &str,
        phase: Phase,
        role: &str,
        u: &CallUsage,
        err: Option<&str>,
    ) {
        u.record(&mut self.usage, err.is_some());
        self.calls.push(DocCallRow {
            instance_id: self.instance.instance_id.clone(),
            tool: tool.to_string(),
            method: self.method.to_string(),
            step: step.to_string(),
            phase: phase.as_str().to_string(),
            role: role.to_string(),
            model: if role == "agent" {
                self.tb.agent_model.to_string()
            } else {
                self.tb.editor_model.to_string()
            },
            error_kind: err.map(str::to_string),
            prompt_tokens: u.prompt_tokens as i64,
            completion_tokens: u.completion_tokens as i64,
            reasoning_tokens: u.reasoning_tokens as i64,
        });
    }

    /// Mark the reply of recorded call `index` ([`Asked::call`]) as unusable (`kind`:
    /// e.g. a reply without the JSON asked for), so that it is counted like a failed
    /// call's row.
    pub fn mark_call(&mut self, index: usize, kind: &str) {
        if let Some(c) = self.calls.get_mut(index) {
            c.error_kind.get_or_insert_with(|| kind.to_string());
        }
    }

    /// [`Work::ask`] for several prompts at once (`(tool, prompt)` each, one step,
    /// phase and attempt), sent together so that a model-backed editor answers them
    /// concurrently; answers in order, each recorded as `ask` records it.
    pub fn ask_all(
        &mut self,
        step: &str,
        phase: Phase,
        asks: &[(&str, &str)],
        attempt: u64,
    ) -> Vec<Asked> {
        self.ask_all_with_system(None, step, phase, asks, attempt)
    }

    /// [`Work::ask_all`], each request opening with the system message `system` when
    /// one is given ([`Editor::complete_all_with_system`]).
    pub fn ask_all_with_system(
        &mut self,
        system: Option<&str>,
        step: &str,
        phase: Phase,
        asks: &[(&str, &str)],
        attempt: u64,
    ) -> Vec<Asked> {
        let prompts: Vec<String> = asks.iter().map(|(_, p)| p.to_string()).collect();
        let seed = self.tb.seed.wrapping_add(attempt);
        let replies = match system {
            Some(s) => self
                .tb
                .editor
                .complete_all_with_system(s, &prompts, seed, &|| {}),
            None => self.tb.editor.complete_all(&prompts, seed, &|| {}),
        };
        asks.iter()
            .zip(replies)
            .map(|((tool, _), r)| {
                let err = r.error.as_ref().map(|e| e.kind.clone());
                let call = self.calls.len();
                self.record(tool, step, phase, "editor", &r.usage, err.as_deref());
                if let Some(f) = r.error.as_ref().filter(|f| f.infrastructure) {
                    self.infra.push(f.clone());
                }
                let text = match r.error {
                    Some(_) => None,
                    None => r.text,
                };
                Asked { call, text }
            })
            .collect()
    }

    /// Ask the editor model; `None` when the call failed (recorded with its class).
    /// `attempt` varies the seed so a retried prompt is a new request.
    pub fn ask(
        &mut self,
        tool: &str,
        step: &str,
        phase: Phase,
        prompt: &str,
        attempt: u64,
    ) -> Option<String> {
        self.ask_all(step, phase, &[(tool, prompt)], attempt)
            .pop()
            .and_then(|a| a.text)
    }

    /// Run the task model on `question` with `tools` (recorded as exploration).
    pub fn act(
        &mut self,
        tool: &str,
        step: &str,
        question: &str,
        tools: &[Value],
    ) -> Option<AgentTurn> {
        let agent = self.tb.agent?;
        let turn = agent.act(&AgentJob {
            system: self.tb.agent_system,
            question,
            tools,
            seed: self.tb.seed,
        });
        let err = turn.error.as_ref().map(|e| e.kind.clone());
        self.record(
            tool,
            step,
            Phase::Exploration,
            "agent",
            &turn.usage,
            err.as_deref(),
        );
        if let Some(f) = turn.error.as_ref().filter(|f| f.infrastructure) {
            self.infra.push(f.clone());
        }
        Some(turn)
    }

    /// Record an agent turn taken elsewhere (an external method's `play`) as
    /// exploration under `step`, with its usage and failure.
    pub fn record_agent(
        &mut self,
        step: &str,
        usage: &CallUsage,
        error: Option<crate::models::CallFailure>,
    ) {
        let kind = error.as_ref().map(|e| e.kind.clone());
        self.record(
            "",
            step,
            Phase::Exploration,
            "agent",
            usage,
            kind.as_deref(),
        );
        if let Some(f) = error.filter(|f| f.infrastructure) {
            self.infra.push(f);
        }
    }

    /// Execute `shown(**args)` through the instance's name mapping.
    pub fn execute(&mut self, tool: &str, step: &str, args: &Map<String, Value>) -> ToolOutput {
        let mapping = crate::rows::name_mapping(&self.docs.name_mapping);
        let real = mapping
            .iter()
            .find(|(_, shown)| shown == tool)
            .map(|(r, _)| r.as_str())
            .unwrap_or(tool);
        let out = self.tb.runner.run(real, tool, args);
        self.runs.push(ToolRunRow {
            instance_id: self.instance.instance_id.clone(),
            tool: tool.to_string(),
            method: self.method.to_string(),
            step: step.to_string(),
            arguments: Value::Object(args.clone()),
            ok: out.ok,
            output: out.text.clone(),
        });
        out
    }

    /// Embed texts (DRAFT); `None` without an embedder or on failure.
    pub fn embed(&self, texts: &[&str]) -> Option<Vec<Vec<f32>>> {
        self.tb.embed?.embed(texts).ok()
    }
}

/// The system prompt with an instance's demonstrations appended (unchanged without).
pub fn with_demos(system: &str, demos: &Value) -> String {
    let Some(list) = demos.as_array().filter(|l| !l.is_empty()) else {
        return system.to_string();
    };
    let mut out = format!("{}\n\nExamples of correct tool use:", system.trim_end());
    for d in list {
        out.push_str(&format!(
            "\nRequest: {}\nCall: {}",
            d.get("query").and_then(Value::as_str).unwrap_or(""),
            crate::batch_reflect::render_call(
                d.get("function").and_then(Value::as_str).unwrap_or(""),
                d.get("arguments").unwrap_or(&Value::Null),
                None,
            )
        ));
    }
    out
}

/// An offline environment's shared documentation row as the agent sees it: the
/// tools, and `system` with the row's demonstrations (Play2Prompt) appended.
pub fn shared_docs(docs: &[DocRow], system: &str) -> (Vec<Value>, String) {
    let shared = docs.iter().find(|d| d.instance_id == crate::env::SHARED);
    let tools = shared.map(tools_of).unwrap_or_default();
    (
        tools,
        with_demos(system, shared.map_or(&Value::Null, |d| &d.demos)),
    )
}

/// The tools of a doc row as a vector.
pub fn tools_of(d: &DocRow) -> Vec<Value> {
    d.tools.as_array().cloned().unwrap_or_default()
}

/// A tool definition's name; empty when absent or not a string.
pub fn tool_name(t: &Value) -> &str {
    t.get("name").and_then(Value::as_str).unwrap_or("")
}

/// A string field of a model's JSON reply, trimmed; empty when absent or not a string.
pub fn str_field(m: &Map<String, Value>, k: &str) -> String {
    m.get(k)
        .and_then(Value::as_str)
        .unwrap_or("")
        .trim()
        .to_string()
}

/// A tool definition's description; empty when absent or not a string.
pub fn tool_description(t: &Value) -> &str {
    t.get("description").and_then(Value::as_str).unwrap_or("")
}

/// Replaces a tool's description (a tool that is not a JSON object is left alone).
pub fn set_description(tool: &mut Value, desc: &str) {
    if let Some(o) = tool.as_object_mut() {
        o.insert("description".into(), Value::String(desc.to_string()));
    }
}

/// A copy of `tools` with `name`'s description replaced.
pub fn with_description(tools: &[Value], name: &str, desc: &str) -> Vec<Value> {
    tools
        .iter()
        .map(|t| {
            let mut t = t.clone();
            if tool_name(&t) == name {
                set_description(&mut t, desc);
            }
            t
        })
        .collect()
}

/// One answer of [`Work::ask_all`].
pub struct Asked {
    /// The index of its recorded call (for [`Work::mark_call`]).
    pub call: usize,
    /// The reply's text; `None` when the call failed (recorded with its class).
    pub text: Option<String>,
}

/// What a method produced for one instance.
pub struct Produced {
    /// The instance's new tool definitions.
    pub tools: Vec<Value>,
    /// Demonstrations for the agent prompt (Play2Prompt), or `null`.
    pub demos: Value,
}

impl Produced {
    /// New tool definitions and no demonstrations (every method but Play2Prompt).
    pub fn docs(tools: Vec<Value>) -> Produced {
        Produced {
            tools,
            demos: Value::Null,
        }
    }
}

/// Run `method` over every instance (`concurrency` at a time) and write the stage's
/// three tables. `per_instance` must not panic on model output.
pub fn run_stage<F>(
    ctx: &mut StageCtx<'_>,
    tb: &Toolbox<'_>,
    method: &'static str,
    concurrency: usize,
    instances: &[InstanceRow],
    docs: &[DocRow],
    per_instance: F,
) -> Result<(), StageError>
where
    F: Fn(&mut Work<'_>) -> Produced + Sync,
{
    try_run_stage(ctx, tb, method, concurrency, instances, docs, |w| {
        Ok(per_instance(w))
    })
}

/// [`run_stage`] for a method that can fail the stage on an item (an external
/// method that broke its protocol): the first error in the items' order is returned
/// and nothing is written.
pub fn try_run_stage<F>(
    ctx: &mut StageCtx<'_>,
    tb: &Toolbox<'_>,
    method: &'static str,
    concurrency: usize,
    instances: &[InstanceRow],
    docs: &[DocRow],
    per_instance: F,
) -> Result<(), StageError>
where
    F: Fn(&mut Work<'_>) -> Result<Produced, StageError> + Sync,
{
    let by_id: HashMap<&str, &InstanceRow> = instances
        .iter()
        .map(|i| (i.instance_id.as_str(), i))
        .collect();
    let mut jobs = Vec::with_capacity(docs.len());
    for d in docs {
        let inst = by_id.get(d.instance_id.as_str()).ok_or_else(|| {
            StageError::bug(
                method,
                format!("docs for unknown instance {}", d.instance_id),
            )
        })?;
        jobs.push((*inst, d));
    }
    let pb = ctx.progress(jobs.len() as u64);
    // Once an item has failed the stage, the items not started yet are skipped
    // (`Ok(None)`).
    let failed = std::sync::atomic::AtomicBool::new(false);
    let results = crate::env::parallel_map(&jobs, concurrency, &|| pb.inc(1), &|&(inst, d)| {
        if failed.load(std::sync::atomic::Ordering::SeqCst) {
            return Ok(None);
        }
        let mut w = Work::new(tb, method, inst, d);
        let p = match per_instance(&mut w) {
            Ok(p) => p,
            Err(e) => {
                failed.store(true, std::sync::atomic::Ordering::SeqCst);
                return Err(e);
            }
        };
        let mut row = d.clone();
        row.changed = Value::Array(p.tools.clone()) != d.tools || !p.demos.is_null();
        row.tools = Value::Array(p.tools);
        row.demos = p.demos;
        row.round = 0;
        row.frozen = true;
        Ok(Some((row, w.calls, w.runs, w.usage, w.infra)))
    });
    pb.finish_and_clear();
    let mut rows = Vec::new();
    let mut calls = Vec::new();
    let mut runs = Vec::new();
    let mut usage = Usage::default();
    let mut infra = Vec::new();
    let mut skipped = false;
    for r in results {
        let Some((row, c, t, u, f)) =
            r.ok_or_else(|| StageError::bug(method, "a worker thread panicked"))??
        else {
            skipped = true;
            continue;
        };
        infra.extend(f);
        rows.push(row);
        calls.extend(c);
        runs.extend(t);
        usage.add(&u);
    }
    if let Some(e) = crate::models::infrastructure_error(method, &infra) {
        return Err(e);
    }
    if skipped {
        // Only after a failure, which the loop above returned: unreachable.
        return Err(StageError::bug(
            method,
            "items were skipped without a failure",
        ));
    }
    ctx.add_usage(&usage);
    ctx.write(&rows)?;
    ctx.write(&calls)?;
    ctx.write(&runs)?;
    Ok(())
}

/// A method's budget as it enters the stage key.
#[derive(serde::Serialize)]
#[serde(untagged)]
pub enum Budget<'a> {
    /// Play2Prompt's search budget.
    Play2Prompt(&'a Play2PromptBudget),
    /// DRAFT's exploration rules.
    Draft(&'a DraftBudget),
    /// Trace-Free+'s generator request.
    TraceFree(&'a TraceFreeBudget),
    /// An external method: its command, files' digests, params and budget.
    External(&'a external::ExternalMethod),
}

/// A baseline stage's parameters: one struct, serialised as the stage key's params
/// and read by the run (so the key cannot miss what the run uses).
#[derive(serde::Serialize)]
pub struct BaselineParams<'a> {
    /// The method's prompt templates.
    pub templates: &'a [&'static str],
    /// The method's budget (Play2Prompt and DRAFT).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub budget: Option<Budget<'a>>,
    /// The task model (Play2Prompt validates candidate descriptions with it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent: Option<ModelSpec>,
    /// The task model's system prompt (Play2Prompt).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<&'a str>,
    /// The editor model.
    pub editor: ModelSpec,
    /// Seed of the method's model calls.
    pub seed: u64,
    /// What executes the method's tool calls (the environment's key for it); absent
    /// for methods that execute nothing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub executor: Option<Value>,
    /// The environment's table, for an external method (its `task` message names
    /// it); absent for the built-in methods, whose keys it would change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub environment: Option<&'static str>,
    /// What an external method's `play` plays on (the environment's key for its
    /// training play); absent elsewhere.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub play: Option<Value>,
}

impl<'a> BaselineParams<'a> {
    /// The params of `method` (a baseline) at the grid cell `at` (its agent, editor
    /// and seed) with these settings; a bug when the cell has no agent or editor.
    pub fn new(
        method: Method,
        budgets: &'a Baselines,
        at: &crate::env::At,
        system_prompt: &'a str,
        executor: &Value,
    ) -> Result<Self, StageError> {
        let stage = stage_of(method).0;
        let (agent, editor) = (at.agent_for(stage)?, at.editor_for(stage)?);
        let seed = at.seed;
        if let Some(name) = method.external_name() {
            let m = budgets.external.get(name).ok_or_else(|| {
                StageError::user(
                    stage,
                    format!(
                        "method ext:{name} has no [methods.{name}] table in the experiment file"
                    ),
                )
            })?;
            return Ok(BaselineParams {
                templates: &[],
                budget: Some(Budget::External(m)),
                // `play` runs the cell's agent with the environment's system prompt.
                agent: Some(agent.clone()),
                system_prompt: Some(system_prompt),
                editor: editor.clone(),
                seed,
                executor: Some(executor.clone()),
                environment: None,
                play: None,
            });
        }
        let (templates, budget): (&'a [&'static str], _) = match method {
            Method::Play2Prompt => (
                play2prompt::TEMPLATES,
                Some(Budget::Play2Prompt(&budgets.play2prompt)),
            ),
            Method::Draft => (draft::TEMPLATES, Some(Budget::Draft(&budgets.draft))),
            Method::TraceFree => (
                &tracefree::templates(budgets.tracefree.paper)[..],
                Some(Budget::TraceFree(&budgets.tracefree)),
            ),
            _ => (&easytool::TEMPLATES, None),
        };
        let p2p = method == Method::Play2Prompt;
        Ok(BaselineParams {
            templates,
            budget,
            agent: p2p.then(|| agent.clone()),
            system_prompt: p2p.then_some(system_prompt),
            editor: editor.clone(),
            seed,
            // Trace-Free+ executes tools only in its tool play (trace-based).
            executor: match method {
                Method::EasyTool => None,
                Method::TraceFree if budgets.tracefree.traces == 0 => None,
                _ => Some(executor.clone()),
            },
            environment: None,
            play: None,
        })
    }

    /// These params with `key`, what the environment's training play plays on, for
    /// an external method (the built-in methods' keys are left as they are).
    pub fn with_play(mut self, key: Value) -> Self {
        if matches!(self.budget, Some(Budget::External(_))) && !key.is_null() {
            self.play = Some(key);
        }
        self
    }

    /// These params in environment `env` (an external method's `task` message names
    /// it, so its key holds it); the built-in methods' keys are left as they are.
    pub fn in_environment(mut self, env: &'static str) -> Self {
        if matches!(self.budget, Some(Budget::External(_))) {
            self.environment = Some(env);
        }
        self
    }
}

/// The stage name and version of a baseline method.
pub fn stage_of(method: Method) -> (&'static str, u32) {
    match method {
        Method::Play2Prompt => (play2prompt::STAGE, play2prompt::VERSION),
        Method::Draft => (draft::STAGE, draft::VERSION),
        Method::TraceFree => (tracefree::STAGE, tracefree::VERSION),
        Method::External(_) => (external::STAGE, external::VERSION),
        _ => (easytool::STAGE, easytool::VERSION),
    }
}

/// The instances a baseline stage works on: read when it must be computed.
pub type Instances<'p> =
    Box<dyn FnOnce() -> Result<std::borrow::Cow<'p, [InstanceRow]>, StageError> + Send + 'p>;

/// The documentation rows a baseline stage starts from, read from its inputs when it
/// must be computed.
pub type StartDocs<'p> =
    Box<dyn FnOnce(&StageCtx<'_>) -> Result<Vec<DocRow>, StageError> + Send + 'p>;

/// The environment's tool executor, built when a stage that executes tools runs.
pub type Runner<'p> = Box<dyn FnOnce() -> Result<Box<dyn ToolRunner + 'p>, StageError> + Send + 'p>;

/// The environment's training play (an external method's `play`), built when an
/// external method's stage runs.
pub type Player<'p> = Box<
    dyn FnOnce() -> Result<Option<Box<dyn external::TrainingPlay + 'p>>, StageError> + Send + 'p,
>;

/// One baseline stage of any environment: what it runs on and how it is keyed.
pub struct BaselineStage<'p> {
    /// The baseline method.
    pub method: Method,
    /// The stage's parameters (its key).
    pub params: BaselineParams<'p>,
    /// The baselines' settings: concurrency, and the budgets the method runs with.
    pub budgets: &'p Baselines,
    /// The instances the method works on.
    pub instances: Instances<'p>,
    /// The documentation rows the method starts from.
    pub docs: StartDocs<'p>,
    /// The environment's tool executor (called only when the method executes tools:
    /// Play2Prompt, DRAFT, and Trace-Free+'s tool play when it is trace-based).
    pub runner: Runner<'p>,
    /// The environment's training play for an external method's `play` (built only
    /// when an external method's stage runs; `None`: the environment has none).
    pub player: Player<'p>,
}

/// Run (or reuse) a baseline stage at the grid cell `at` (recorded there): the
/// documentation `s.method` produces from its inputs (`inputs`: the key's input
/// entries besides the params -- instances, docs, positions...).
pub fn stage<'p>(
    cx: &mut Cx<'p, '_>,
    at: &crate::env::At,
    s: BaselineStage<'p>,
    inputs: &[pipeline::Input<'_>],
) -> Result<Handle, DriveError> {
    let (name, version) = stage_of(s.method);
    let models = cx.models;
    // An external method's stderr is kept beside the store's caches, per node.
    let log_dir = cx
        .session
        .store()
        .root()
        .join("cache")
        .join("methods")
        .join(&pipeline::digest::Digest::of_bytes(at.node(name).as_bytes()).0[..16]);
    let setting = at.setting.clone();
    let BaselineStage {
        method,
        params,
        budgets,
        instances,
        docs,
        runner,
        player,
    } = s;
    // An external method's task names its environment (so its key holds it).
    let params = params.in_environment(cx.env());
    cx.stage(at, name, version, params, inputs, move |ctx, p| {
        // Trace-Free+ asks its generator (default: the editor), sampled as configured.
        let generator = match method {
            Method::TraceFree => Some(budgets.tracefree.generator_spec(&p.editor)?),
            _ => None,
        };
        let ed = match &generator {
            Some(g) => models.editor_sampled(
                g,
                &budgets.tracefree.sampling(),
                budgets.tracefree.max_tokens,
                budgets.tracefree.repetition_penalty_for(g),
            )?,
            None => models.editor(&p.editor)?,
        };
        let agent = match &p.agent {
            Some(a) => Some(models.agent(a)?),
            None => None,
        };
        let embed = if method == Method::Draft {
            Some(models.embedder(&budgets.draft.embedder)?)
        } else {
            None
        };
        let runner: Box<dyn ToolRunner + 'p> = if p.executor.is_some() {
            runner()?
        } else {
            Box::new(crate::env::NoToolPlay("this method does not execute tools"))
        };
        let editor_model = generator.as_ref().unwrap_or(&p.editor).to_string();
        let agent_model = p
            .agent
            .as_ref()
            .map(ToString::to_string)
            .unwrap_or_default();
        let tb = Toolbox {
            editor: ed.as_ref(),
            editor_model: &editor_model,
            agent: agent.as_ref().map(|a| a.as_ref() as &dyn Agent),
            agent_model: &agent_model,
            agent_system: p.system_prompt.unwrap_or(""),
            runner: runner.as_ref(),
            embed: embed.as_deref(),
            seed: p.seed,
        };
        let n = budgets.concurrency;
        let docs = docs(ctx)?;
        let instances = instances()?;
        match method {
            Method::Play2Prompt => run_stage(ctx, &tb, name, n, &instances, &docs, |w| {
                play2prompt::produce(w, &budgets.play2prompt)
            }),
            Method::Draft => run_stage(ctx, &tb, name, n, &instances, &docs, |w| {
                draft::produce(w, &budgets.draft)
            }),
            Method::TraceFree => {
                // Trace-based: the cell's editor proposes the tool-play calls (as
                // Play2Prompt's play), whatever model generates the descriptions.
                let player = if budgets.tracefree.traces > 0 {
                    Some(models.editor(&p.editor)?)
                } else {
                    None
                };
                let player_model = p.editor.to_string();
                let player_tb = player.as_ref().map(|e| Toolbox {
                    editor: e.as_ref(),
                    editor_model: &player_model,
                    agent: None,
                    agent_model: "",
                    agent_system: "",
                    runner: runner.as_ref(),
                    embed: None,
                    seed: p.seed,
                });
                run_stage(ctx, &tb, name, n, &instances, &docs, |w| {
                    tracefree::produce(w, &budgets.tracefree, player_tb.as_ref())
                })
            }
            Method::External(label) => {
                let (Some(Budget::External(m)), Some(env)) = (&p.budget, p.environment) else {
                    return Err(StageError::bug(
                        name,
                        format!("{label} has no configuration or no environment"),
                    ));
                };
                let editor = p.editor.to_string();
                let player = player()?;
                let task = external::TaskCx {
                    player: player.as_deref(),
                    agent: agent.as_deref(),
                    environment: env,
                    setting: &setting,
                    seed: p.seed,
                    editor: &editor,
                    log_dir: &log_dir,
                };
                try_run_stage(ctx, &tb, label, n, &instances, &docs, |w| {
                    external::produce(w, m, &task)
                })
            }
            _ => run_stage(ctx, &tb, name, n, &instances, &docs, easytool::produce),
        }
    })
}

#[cfg(test)]
pub(crate) mod testing {
    //! Fakes for the baselines' control-flow tests.
    use super::*;
    use crate::models::EditorReply;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::Mutex;

    /// An editor answering with `f(prompt)`; counts calls; 10 prompt tokens each.
    pub struct FnEditor<F: Fn(&str) -> String + Send + Sync>(pub F, pub AtomicU64);

    impl<F: Fn(&str) -> String + Send + Sync> FnEditor<F> {
        pub fn new(f: F) -> Self {
            FnEditor(f, AtomicU64::new(0))
        }
        pub fn calls(&self) -> u64 {
            self.1.load(Ordering::SeqCst)
        }
    }

    impl<F: Fn(&str) -> String + Send + Sync> Editor for FnEditor<F> {
        fn complete(&self, prompt: &str, _seed: u64) -> EditorReply {
            self.1.fetch_add(1, Ordering::SeqCst);
            EditorReply {
                text: Some((self.0)(prompt)),
                usage: CallUsage {
                    prompt_tokens: 10,
                    completion_tokens: 2,
                    ..Default::default()
                },
                error: None,
                cut: false,
            }
        }
    }

    /// A runner answering with `f(args)`; records every call.
    pub struct FnRunner<F: Fn(&Map<String, Value>) -> ToolOutput + Sync>(
        pub F,
        pub Mutex<Vec<Map<String, Value>>>,
    );

    impl<F: Fn(&Map<String, Value>) -> ToolOutput + Sync> FnRunner<F> {
        pub fn new(f: F) -> Self {
            FnRunner(f, Mutex::new(Vec::new()))
        }
        pub fn count(&self) -> usize {
            self.1.lock().map(|v| v.len()).unwrap_or(0)
        }
    }

    impl<F: Fn(&Map<String, Value>) -> ToolOutput + Sync> ToolRunner for FnRunner<F> {
        fn run(&self, _real: &str, _shown: &str, args: &Map<String, Value>) -> ToolOutput {
            if let Ok(mut v) = self.1.lock() {
                v.push(args.clone());
            }
            (self.0)(args)
        }
    }

    pub fn instance() -> (InstanceRow, DocRow) {
        let inst = InstanceRow {
            instance_id: "exec_simple_0".into(),
            category: "exec_simple".into(),
            idx: 0,
            question: "What is the gcd of 12 and 18?".into(),
            functions: serde_json::json!([]),
            ground_truth: serde_json::json!(["math_gcd(a=12, b=18)"]),
            execution_result_type: serde_json::json!(["exact_match"]),
        };
        let doc = DocRow {
            instance_id: "exec_simple_0".into(),
            setting: "names".into(),
            round: 0,
            tools: serde_json::json!([{"name": "function_1", "description": ""}]),
            name_mapping: serde_json::json!([["math_gcd", "function_1"]]),
            changed: true,
            frozen: false,
            demos: Value::Null,
        };
        (inst, doc)
    }

    pub fn toolbox<'a>(editor: &'a dyn Editor, runner: &'a dyn ToolRunner) -> Toolbox<'a> {
        Toolbox {
            editor,
            editor_model: "scripted:test",
            agent: None,
            agent_model: "scripted:test",
            agent_system: "",
            runner,
            embed: Some(&BagOfWords),
            seed: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn json_is_extracted_from_prose_and_fences() {
        let m = extract_json("Sure!\n```json\n{\"a\": {\"b\": 1}}\n```\nDone {not json}").unwrap();
        assert_eq!(Value::Object(m), json!({"a": {"b": 1}}));
        assert!(extract_json("no object here").is_none());
        assert!(extract_json("{broken").is_none());
        let m = extract_json("{x} then {\"k\": [1, 2]}").unwrap();
        assert_eq!(Value::Object(m), json!({"k": [1, 2]}));
    }

    #[test]
    fn deep_json_from_a_model_is_refused() {
        let deep = format!("{}1{}", "{\"a\":".repeat(70), "}".repeat(70));
        assert!(extract_json(&deep).is_none());
        let ok = format!("{}1{}", "{\"a\":".repeat(10), "}".repeat(10));
        assert!(extract_json(&ok).is_some());
    }

    /// Trace-Free+'s key holds what its stage runs with: both templates' text, the
    /// budget (traces, generator, sampling, room), the editor and the seed; no tool
    /// executor (it executes nothing). A changed template or budget field reruns it.
    #[test]
    fn tracefree_key_holds_its_templates_and_budget() {
        let at = crate::env::At {
            agent: Some(
                crate::models::parse_for("scripted:schema", crate::models::Role::Agent).unwrap(),
            ),
            editor: Some(
                crate::models::parse_for("scripted:errors", crate::models::Role::Editor).unwrap(),
            ),
            ..crate::env::At::new(crate::env::Naming::Online, "names", "tracefree")
        };
        let budgets = Baselines {
            concurrency: 1,
            play2prompt: Default::default(),
            draft: Default::default(),
            tracefree: Default::default(),
            external: Default::default(),
        };
        let key = |b: &Baselines| {
            let p =
                BaselineParams::new(Method::TraceFree, b, &at, "", &json!({"exec": 1})).unwrap();
            serde_json::to_value(&p).unwrap()
        };
        let k = key(&budgets);
        assert_eq!(k["templates"], json!(tracefree::TRACEFREE_TEMPLATES));
        assert!(k.get("executor").is_none(), "{k}");
        assert_eq!(k["budget"]["max_tokens"], 1024);
        assert_eq!(k["budget"]["repetition_penalty"], 1.1);
        let mut traced = budgets.clone();
        traced.tracefree.traces = 2;
        let kt = key(&traced);
        assert_ne!(kt, k);
        // Trace-based, it plays the tools: what executes them is in its key.
        assert_eq!(kt["executor"], json!({"exec": 1}));
        // The paper's layout: other templates, another key.
        let mut paper = budgets.clone();
        paper.tracefree.paper = true;
        let kp = key(&paper);
        assert_eq!(kp["templates"], json!(tracefree::PAPER_TEMPLATES));
        assert_ne!(kp, k);
        // Marking the generator as tuned changes the label, not the docs: same key.
        let mut tuned = budgets.clone();
        tuned.tracefree.generator_tuned = true;
        assert_eq!(key(&tuned), k);
    }

    #[test]
    fn python_equality_of_arguments() {
        assert!(args_equal(&json!({"a": 5}), &json!({"a": 5.0})));
        assert!(!args_equal(&json!({"a": 5}), &json!({"a": "5"})));
    }

    #[test]
    fn bag_of_words_cosine() {
        let v = BagOfWords
            .embed(&[
                "the gcd of two numbers",
                "two numbers, the gcd of",
                "weather in paris",
            ])
            .unwrap();
        assert!((cosine(&v[0], &v[1]) - 1.0).abs() < 1e-6);
        assert!(cosine(&v[0], &v[2]) < 0.5);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
    }

    #[test]
    fn fill_replaces_every_placeholder() {
        assert_eq!(
            fill("{{a}}-{{b}}-{{a}}", &[("a", "1"), ("b", "2")]),
            "1-2-1"
        );
    }
}
