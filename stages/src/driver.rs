//! The experiment driver: expands an [`Experiment`] into stage calls on a
//! [`Session`]. The same code plans (`otb status`) and runs (`otb run`); in status
//! mode a node whose inputs are not computed yet is reported as blocked and its
//! dependents are not visited.

use crate::agents::{make_agent, make_editor, Agent, Editor};
use crate::baselines::{
    self, draft, easytool, play2prompt, Embed, ToolOutput, ToolRunner, Toolbox,
};
use crate::experiment::{Experiment, BASELINES};
use crate::rows::{DocRow, InstanceRow, ScoreRow, TrajectoryRow};
use crate::summarize::SummaryInput;
use crate::{batch_reflect, bfcl, bfcl_data, evaluate, explore, opacify, summarize};
use datasets::bfcl::executor::Executor;
use pipeline::{Entry, Session, StageError};
use serde_json::json;
use std::cell::OnceCell;
use std::collections::HashMap;

/// Errors of a drive: a stage failed, or the experiment names something unusable.
#[derive(Debug, thiserror::Error)]
pub enum DriveError {
    #[error(transparent)]
    Stage(#[from] StageError),
    #[error(transparent)]
    Input(#[from] crate::InputError),
}

impl From<pipeline::StoreError> for DriveError {
    fn from(e: pipeline::StoreError) -> Self {
        DriveError::Stage(e.into())
    }
}

/// One stage output of the experiment, labelled for export and tables.
#[derive(Clone, Debug)]
pub struct Output {
    pub node: String,
    pub stage: &'static str,
    pub setting: String,
    pub method: String,
    /// Agent model spec (empty for agent-free stages such as `bfcl-data`).
    pub agent: String,
    /// Editor model spec (empty where no editor is involved).
    pub editor: String,
    pub round: i64,
    pub entry: Entry,
}

/// Where an output sits in the grid (setting x method x agent x editor x round).
#[derive(Clone, Debug, Default)]
pub struct Label {
    pub setting: String,
    pub method: String,
    pub agent: String,
    pub editor: String,
    pub round: i64,
}

/// What a drive produced (only the nodes that exist in the store).
#[derive(Default, Debug)]
pub struct RunOutput {
    pub outputs: Vec<Output>,
}

impl RunOutput {
    pub fn by_stage<'a>(&'a self, stage: &'a str) -> impl Iterator<Item = &'a Output> + 'a {
        self.outputs.iter().filter(move |o| o.stage == stage)
    }
}

/// Models are created on first use, so `otb status` never loads a model.
struct Models<'e> {
    exp: &'e Experiment,
    cache_dir: std::path::PathBuf,
    embed_cache: std::path::PathBuf,
    agents: Vec<OnceCell<Box<dyn Agent>>>,
    editors: Vec<OnceCell<Box<dyn Editor>>>,
    embedder: OnceCell<Box<dyn Embed>>,
}

impl Models<'_> {
    fn agent(&self, i: usize) -> Result<&dyn Agent, StageError> {
        let cell = self
            .agents
            .get(i)
            .ok_or_else(|| StageError::failed(explore::STAGE, "agent unavailable"))?;
        if cell.get().is_none() {
            let a = make_agent(&self.exp.agents[i], &self.cache_dir)
                .map_err(|e| StageError::failed(explore::STAGE, e.0))?;
            let _ = cell.set(a);
        }
        cell.get()
            .map(|b| b.as_ref())
            .ok_or_else(|| StageError::failed(explore::STAGE, "agent unavailable"))
    }

    fn editor(&self, i: usize) -> Result<&dyn Editor, StageError> {
        let cell = self
            .editors
            .get(i)
            .ok_or_else(|| StageError::failed(batch_reflect::STAGE, "editor unavailable"))?;
        if cell.get().is_none() {
            let e = make_editor(&self.exp.editors[i], &self.cache_dir)
                .map_err(|e| StageError::failed(batch_reflect::STAGE, e.0))?;
            let _ = cell.set(e);
        }
        cell.get()
            .map(|b| b.as_ref())
            .ok_or_else(|| StageError::failed(batch_reflect::STAGE, "editor unavailable"))
    }

    fn embedder(&self) -> Result<&dyn Embed, StageError> {
        if self.embedder.get().is_none() {
            let e = crate::fidelity::make_embedder(
                &self.exp.baselines.draft.embedder,
                &self.embed_cache,
            )
            .map_err(|e| StageError::failed(draft::STAGE, e.0))?;
            let _ = self.embedder.set(e);
        }
        self.embedder
            .get()
            .map(|b| b.as_ref())
            .ok_or_else(|| StageError::failed(draft::STAGE, "embedder unavailable"))
    }
}

/// Check that the models an experiment names exist, without loading them.
fn check_models(exp: &Experiment) -> Result<(), crate::InputError> {
    for a in &exp.agents {
        crate::llm_models::check_spec(a)?;
    }
    let needs_editor = exp
        .bfcl
        .methods
        .iter()
        .any(|m| m == "toolobserver" || BASELINES.contains(&m.as_str()));
    if needs_editor {
        for e in &exp.editors {
            crate::llm_models::check_spec(e)?;
        }
    }
    Ok(())
}

/// A short, node-name friendly tag for a model spec (`openai:gpt-5` -> `gpt-5`).
fn model_tag(spec: &str) -> &str {
    spec.split_once(':').map(|(_, m)| m).unwrap_or(spec)
}

/// What is fixed for the whole drive.
struct Drive<'a> {
    exp: &'a Experiment,
    models: Models<'a>,
    executor: OnceCell<Executor>,
    data: Entry,
    instances: Vec<InstanceRow>,
    questions: HashMap<String, String>,
    eval_params: serde_json::Value,
    out: RunOutput,
    summary: Vec<SummaryInput>,
}

/// Where one chain of the grid sits: seed, agent, and the node-name suffix.
#[derive(Clone)]
struct Cell {
    seed: u64,
    agent: usize,
    sfx: String,
}

impl<'a> Drive<'a> {
    fn executor(&self) -> Result<&Executor, StageError> {
        if self.executor.get().is_none() {
            let b = &self.exp.bfcl;
            let e = bfcl::make_executor(b.recorded.as_deref().filter(|_| b.backend == "recorded"))
                .map_err(|e| StageError::failed(evaluate::STAGE, e.to_string()))?;
            let _ = self.executor.set(e);
        }
        self.executor
            .get()
            .ok_or_else(|| StageError::failed(evaluate::STAGE, "executor unavailable"))
    }

    fn push(&mut self, node: &str, stage: &'static str, label: &Label, e: &Entry) {
        push(&mut self.out, node, stage, label, e);
    }

    /// `explore` then `evaluate` of one documentation set; `None` when blocked.
    fn explore_eval(
        &mut self,
        s: &mut Session<'_>,
        cell: &Cell,
        tag: &str,
        label: &Label,
        docs: &Entry,
        prev: Option<&Entry>,
    ) -> Result<Option<(Entry, Entry)>, DriveError> {
        let exp = self.exp;
        let round = label.round;
        let agent_spec = &exp.agents[cell.agent];
        let docs_rows: Vec<DocRow> = docs.read()?;
        let prev_rows: Option<Vec<TrajectoryRow>> = prev.map(|e| e.read()).transpose()?;
        let mut inputs = vec![("instances", Some(&self.data)), ("docs", Some(docs))];
        if let Some(p) = prev {
            inputs.push(("previous", Some(p)));
        }
        let node = format!("explore[{tag}]");
        let params = json!({
            "agent": agent_spec,
            "system_prompt": exp.agent_system_prompt,
            "seed": cell.seed,
            "tool_choice": "required",
            "round": round,
        });
        let models = &self.models;
        let instances = &self.instances;
        let traj = s.stage(
            &node,
            explore::STAGE,
            explore::VERSION,
            params,
            &inputs,
            |ctx| {
                let params = explore::ExploreParams {
                    model: agent_spec,
                    system: &exp.agent_system_prompt,
                    seed: cell.seed,
                };
                explore::run(
                    ctx,
                    models.agent(cell.agent)?,
                    &params,
                    instances,
                    &docs_rows,
                    prev_rows.as_deref(),
                )
            },
        )?;
        let Some(traj) = traj else { return Ok(None) };
        self.push(&node, explore::STAGE, label, &traj);
        let traj_rows: Vec<TrajectoryRow> = traj.read()?;
        let node = format!("evaluate[{tag}]");
        let this = &*self;
        let scores = s.stage(
            &node,
            evaluate::STAGE,
            evaluate::VERSION,
            this.eval_params.clone(),
            &[
                ("instances", Some(&this.data)),
                ("docs", Some(docs)),
                ("trajectories", Some(&traj)),
            ],
            |ctx| {
                evaluate::run(
                    ctx,
                    this.executor()?,
                    round,
                    &this.instances,
                    &docs_rows,
                    &traj_rows,
                )
            },
        )?;
        let Some(scores) = scores else {
            return Ok(None);
        };
        self.push(&node, evaluate::STAGE, label, &scores);
        self.summary.push(SummaryInput {
            label: format!("{tag}/{}", label.method),
            setting: label.setting.clone(),
            method: label.method.clone(),
            agent: label.agent.clone(),
            editor: label.editor.clone(),
            round,
            entry: scores.clone(),
        });
        Ok(Some((traj, scores)))
    }

    /// ToolObserver rounds 1..K after the round-0 (Base) chain, with editor `ei`.
    /// `guard`: instances whose outcome was `SUCCESS` are not sent to the editor
    /// (method `toolobserver-guard`, node names end in ` guard`).
    #[allow(clippy::too_many_arguments)]
    fn toolobserver(
        &mut self,
        s: &mut Session<'_>,
        cell: &Cell,
        setting: &str,
        ei: usize,
        etag: &str,
        guard: bool,
        docs0: &Entry,
        r0: (Entry, Entry),
    ) -> Result<(), DriveError> {
        let exp = self.exp;
        let b = &exp.bfcl;
        let editor_spec = &exp.editors[ei];
        let method = if guard {
            "toolobserver-guard"
        } else {
            "toolobserver"
        };
        let etag = &format!("{etag}{}", if guard { " guard" } else { "" });
        let label = |round: i64| Label {
            setting: setting.to_string(),
            method: method.into(),
            agent: exp.agents[cell.agent].clone(),
            editor: editor_spec.clone(),
            round,
        };
        // Round 0 of the curve is the Base chain.
        let (mut traj, mut scores) = r0;
        self.summary.push(SummaryInput {
            label: format!("{setting} r0{}{etag}/{method}", cell.sfx),
            setting: setting.to_string(),
            method: method.into(),
            agent: exp.agents[cell.agent].clone(),
            editor: editor_spec.clone(),
            round: 0,
            entry: scores.clone(),
        });
        let mut docs = docs0.clone();
        let mut round = 0i64;
        while round < b.rounds as i64 {
            round += 1;
            let docs_rows: Vec<DocRow> = docs.read()?;
            let traj_rows: Vec<TrajectoryRow> = traj.read()?;
            let score_rows: Vec<ScoreRow> = scores.read()?;
            let node = format!("batch-reflect[{setting} r{round}{}{etag}]", cell.sfx);
            let models = &self.models;
            let questions = &self.questions;
            let reflect = s.stage(
                &node,
                batch_reflect::STAGE,
                batch_reflect::VERSION,
                json!({
                    "editor": editor_spec,
                    "template": exp.editor_prompt,
                    "round": round,
                    "seed": cell.seed,
                    "skip_success": guard,
                }),
                &[
                    ("docs", Some(&docs)),
                    ("trajectories", Some(&traj)),
                    ("scores", Some(&scores)),
                ],
                |ctx| {
                    let params = batch_reflect::ReflectParams {
                        model: editor_spec,
                        template: &exp.editor_prompt,
                        round,
                        seed: cell.seed,
                        skip_success: guard,
                    };
                    let inputs = batch_reflect::RoundInputs {
                        questions,
                        docs: &docs_rows,
                        trajectories: &traj_rows,
                        scores: &score_rows,
                    };
                    batch_reflect::run(ctx, models.editor(ei)?, &params, &inputs)
                },
            )?;
            let Some(reflect) = reflect else { break };
            self.push(&node, batch_reflect::STAGE, &label(round), &reflect);
            let new_docs: Vec<DocRow> = reflect.read()?;
            if new_docs.iter().all(|d| !d.changed) {
                break; // every instance frozen: round k would repeat round k-1
            }
            let tag = format!("{setting} r{round}{}{etag}", cell.sfx);
            let Some((t, sc)) =
                self.explore_eval(s, cell, &tag, &label(round), &reflect, Some(&traj))?
            else {
                break;
            };
            docs = reflect;
            traj = t;
            scores = sc;
        }
        Ok(())
    }

    /// One baseline method's docs for `setting`, then explore + evaluate them.
    #[allow(clippy::too_many_arguments)]
    fn baseline(
        &mut self,
        s: &mut Session<'_>,
        cell: &Cell,
        setting: &str,
        method: &str,
        ei: usize,
        etag: &str,
        docs0: &Entry,
    ) -> Result<(), DriveError> {
        let exp = self.exp;
        let bl = &exp.baselines;
        let editor_spec = &exp.editors[ei];
        let agent_spec = &exp.agents[cell.agent];
        let (stage, version, mut params): (&'static str, u32, serde_json::Value) = match method {
            "easytool" => (
                easytool::STAGE,
                easytool::VERSION,
                json!({"templates": [easytool::CONDENSE, easytool::GUIDELINES]}),
            ),
            "play2prompt" => (
                play2prompt::STAGE,
                play2prompt::VERSION,
                json!({
                    "templates": play2prompt::TEMPLATES,
                    "budget": bl.play2prompt,
                    // The task model validates candidate descriptions.
                    "agent": agent_spec,
                    "system_prompt": exp.agent_system_prompt,
                }),
            ),
            _ => (
                draft::STAGE,
                draft::VERSION,
                json!({"templates": draft::TEMPLATES, "budget": bl.draft}),
            ),
        };
        if let Some(o) = params.as_object_mut() {
            o.insert("editor".into(), json!(editor_spec));
            o.insert("seed".into(), json!(cell.seed));
            if method != "easytool" {
                o.insert("executor".into(), self.eval_params.clone());
            }
        }
        // EasyTool and DRAFT do not depend on the agent: their node names leave it out
        // (the docs are computed once per editor and shared by every agent's chain).
        let sfx = if method == "play2prompt" {
            cell.sfx.clone()
        } else {
            seed_sfx(exp, cell.seed)
        };
        let node = format!("{method}[{setting}{sfx}{etag}]");
        let docs_rows: Vec<DocRow> = docs0.read()?;
        let this = &*self;
        let docs = s.stage(
            &node,
            stage,
            version,
            params,
            &[("instances", Some(&this.data)), ("docs", Some(docs0))],
            |ctx| {
                let needs_agent = method == "play2prompt";
                let tb = Toolbox {
                    editor: this.models.editor(ei)?,
                    editor_model: editor_spec,
                    agent: if needs_agent {
                        Some(this.models.agent(cell.agent)?)
                    } else {
                        None
                    },
                    agent_model: agent_spec,
                    agent_system: &exp.agent_system_prompt,
                    runner: if method == "easytool" {
                        &NoTools
                    } else {
                        this.executor()?
                    },
                    embed: if method == "draft" {
                        Some(this.models.embedder()?)
                    } else {
                        None
                    },
                    seed: cell.seed,
                };
                let inst = &this.instances;
                match method {
                    "easytool" => baselines::run_stage(
                        ctx,
                        &tb,
                        easytool::STAGE,
                        bl.concurrency,
                        inst,
                        &docs_rows,
                        easytool::produce,
                    ),
                    "play2prompt" => baselines::run_stage(
                        ctx,
                        &tb,
                        play2prompt::STAGE,
                        bl.concurrency,
                        inst,
                        &docs_rows,
                        |w| play2prompt::produce(w, &bl.play2prompt),
                    ),
                    _ => baselines::run_stage(
                        ctx,
                        &tb,
                        draft::STAGE,
                        bl.concurrency,
                        inst,
                        &docs_rows,
                        |w| draft::produce(w, &bl.draft),
                    ),
                }
            },
        )?;
        let Some(docs) = docs else { return Ok(()) };
        let label = Label {
            setting: setting.to_string(),
            method: method.to_string(),
            agent: agent_spec.clone(),
            editor: editor_spec.clone(),
            round: 0,
        };
        self.push(&node, stage, &label, &docs);
        let tag = format!("{setting} {method} r0{}{etag}", cell.sfx);
        self.explore_eval(s, cell, &tag, &label, &docs, None)?;
        Ok(())
    }
}

/// EasyTool's runner: it never executes a tool (a call would be a bug).
struct NoTools;

impl ToolRunner for NoTools {
    fn run(
        &self,
        _real: &str,
        shown: &str,
        _args: &serde_json::Map<String, serde_json::Value>,
    ) -> ToolOutput {
        ToolOutput {
            ok: false,
            text: format!("RuntimeError: {shown}: this method does not execute tools"),
        }
    }
}

fn seed_sfx(exp: &Experiment, seed: u64) -> String {
    if exp.bfcl.seeds.len() > 1 {
        format!(" s{seed}")
    } else {
        String::new()
    }
}

pub fn drive(exp: &Experiment, s: &mut Session<'_>) -> Result<RunOutput, DriveError> {
    check_models(exp)?;
    let b = &exp.bfcl;
    let root = s.store().root().to_path_buf();
    let cache = root.join("cache").join("bfcl");
    let data = s.stage(
        "bfcl-data",
        bfcl_data::STAGE,
        bfcl_data::VERSION,
        bfcl_data::params(&b.data, b.subset)?,
        &[],
        |ctx| bfcl_data::run(ctx, &b.data, b.subset, &cache),
    )?;
    let mut out = RunOutput::default();
    let Some(data) = data else {
        return Ok(out);
    };
    push(
        &mut out,
        "bfcl-data",
        bfcl_data::STAGE,
        &Label::default(),
        &data,
    );
    let instances: Vec<InstanceRow> = data.read()?;
    let questions: HashMap<String, String> = instances
        .iter()
        .map(|i| (i.instance_id.clone(), i.question.clone()))
        .collect();
    let eval_params = json!({
        "backend": b.backend,
        "recorded": match (&b.recorded, b.backend.as_str()) {
            (Some(p), "recorded") => json!(pipeline::Digest::of_file(p).map(|d| d.0).unwrap_or_default()),
            _ => json!(null),
        },
    });
    let mut d = Drive {
        exp,
        models: Models {
            exp,
            cache_dir: root.join("cache").join("llm"),
            embed_cache: root.join("cache").join("embed"),
            agents: exp.agents.iter().map(|_| OnceCell::new()).collect(),
            editors: exp.editors.iter().map(|_| OnceCell::new()).collect(),
            embedder: OnceCell::new(),
        },
        executor: OnceCell::new(),
        data,
        instances,
        questions,
        eval_params,
        out,
        summary: Vec::new(),
    };
    let has = |m: &str| b.methods.iter().any(|x| x == m);
    let mut settings: Vec<&str> = Vec::new();
    if has("gold") {
        settings.push("gold");
    }
    settings.extend(b.settings.iter().map(String::as_str));
    let baselines: Vec<&str> = BASELINES.iter().copied().filter(|m| has(m)).collect();
    let etag = |ei: usize| {
        if exp.editors.len() > 1 {
            format!(" e={}", model_tag(&exp.editors[ei]))
        } else {
            String::new()
        }
    };
    for &seed in &b.seeds {
        for (ai, agent_spec) in exp.agents.iter().enumerate() {
            let mut sfx = seed_sfx(exp, seed);
            if exp.agents.len() > 1 {
                sfx.push_str(&format!(" a={}", model_tag(agent_spec)));
            }
            let cell = Cell {
                seed,
                agent: ai,
                sfx,
            };
            for &setting in &settings {
                let node = format!("opacify[{setting}]");
                let docs0 = s.stage(
                    &node,
                    opacify::STAGE,
                    opacify::VERSION,
                    json!({"setting": setting}),
                    &[("instances", Some(&d.data))],
                    |ctx| opacify::run(ctx, setting, &d.instances),
                )?;
                let Some(docs0) = docs0 else { continue };
                let base_label = |method: &str| Label {
                    setting: setting.to_string(),
                    method: method.to_string(),
                    agent: agent_spec.clone(),
                    editor: String::new(),
                    round: 0,
                };
                let opacified = Label {
                    agent: String::new(),
                    ..base_label("base")
                };
                d.push(&node, opacify::STAGE, &opacified, &docs0);
                let tag = format!("{setting} r0{}", cell.sfx);
                if setting == "gold" {
                    d.explore_eval(s, &cell, &tag, &base_label("gold"), &docs0, None)?;
                    continue;
                }
                if has("base") || has("toolobserver") {
                    let r0 = d.explore_eval(s, &cell, &tag, &base_label("base"), &docs0, None)?;
                    if let (true, Some(r0)) = (has("toolobserver"), r0) {
                        // With the guard enabled both variants run (the paper's first).
                        let guards: &[bool] = if b.reflect_skip_success {
                            &[false, true]
                        } else {
                            &[false]
                        };
                        for ei in 0..exp.editors.len() {
                            for &guard in guards {
                                d.toolobserver(
                                    s,
                                    &cell,
                                    setting,
                                    ei,
                                    &etag(ei),
                                    guard,
                                    &docs0,
                                    r0.clone(),
                                )?;
                            }
                        }
                    }
                }
                for &m in &baselines {
                    for ei in 0..exp.editors.len() {
                        d.baseline(s, &cell, setting, m, ei, &etag(ei), &docs0)?;
                    }
                }
            }
        }
    }
    let mut out = std::mem::take(&mut d.out);
    if !d.summary.is_empty() {
        let inputs: Vec<(&str, Option<&Entry>)> = d
            .summary
            .iter()
            .map(|i| (i.label.as_str(), Some(&i.entry)))
            .collect();
        let labels: Vec<&str> = d.summary.iter().map(|i| i.label.as_str()).collect();
        let summary_inputs = &d.summary;
        let summary = s.stage(
            "summarize",
            summarize::STAGE,
            summarize::VERSION,
            json!({"bootstrap": summarize::BOOTSTRAP, "inputs": labels}),
            &inputs,
            |ctx| summarize::run(ctx, summary_inputs),
        )?;
        if let Some(summary) = summary {
            push(
                &mut out,
                "summarize",
                summarize::STAGE,
                &Label::default(),
                &summary,
            );
        }
    }
    Ok(out)
}

fn push(out: &mut RunOutput, node: &str, stage: &'static str, label: &Label, e: &Entry) {
    if out.outputs.iter().any(|o| {
        o.node == node && o.stage == stage && o.agent == label.agent && o.editor == label.editor
    }) {
        return; // a node shared by several chains (opacify, agent-free baselines)
    }
    out.outputs.push(Output {
        node: node.to_string(),
        stage,
        setting: label.setting.clone(),
        method: label.method.clone(),
        agent: label.agent.clone(),
        editor: label.editor.clone(),
        round: label.round,
        entry: e.clone(),
    });
}
