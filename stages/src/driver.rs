//! The experiment driver: expands an [`Experiment`] into stage calls on a
//! [`Session`]. The same code plans (`otb status`) and runs (`otb run`); in status
//! mode a node whose inputs are not computed yet is reported as blocked and its
//! dependents are not visited.

use crate::agents::{make_agent, make_editor, Agent, Editor};
use crate::experiment::Experiment;
use crate::rows::{DocRow, InstanceRow, ScoreRow, TrajectoryRow};
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
    pub round: i64,
    pub entry: Entry,
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
    agent: OnceCell<Box<dyn Agent>>,
    editor: OnceCell<Box<dyn Editor>>,
}

impl Models<'_> {
    fn agent(&self) -> Result<&dyn Agent, StageError> {
        if self.agent.get().is_none() {
            let a = make_agent(&self.exp.agent, &self.cache_dir)
                .map_err(|e| StageError::failed(explore::STAGE, e.0))?;
            let _ = self.agent.set(a);
        }
        self.agent
            .get()
            .map(|b| b.as_ref())
            .ok_or_else(|| StageError::failed(explore::STAGE, "agent unavailable"))
    }

    fn editor(&self) -> Result<&dyn Editor, StageError> {
        if self.editor.get().is_none() {
            let e = make_editor(&self.exp.editor, &self.cache_dir)
                .map_err(|e| StageError::failed(batch_reflect::STAGE, e.0))?;
            let _ = self.editor.set(e);
        }
        self.editor
            .get()
            .map(|b| b.as_ref())
            .ok_or_else(|| StageError::failed(batch_reflect::STAGE, "editor unavailable"))
    }
}

/// Check that the models an experiment names exist, without loading them.
fn check_models(exp: &Experiment) -> Result<(), crate::InputError> {
    crate::llm_models::check_spec(&exp.agent)?;
    if exp.bfcl.methods.iter().any(|m| m == "toolobserver") {
        crate::llm_models::check_spec(&exp.editor)?;
    }
    Ok(())
}

pub fn drive(exp: &Experiment, s: &mut Session<'_>) -> Result<RunOutput, DriveError> {
    check_models(exp)?;
    let b = &exp.bfcl;
    let models = Models {
        exp,
        cache_dir: s.store().root().join("cache").join("llm"),
        agent: OnceCell::new(),
        editor: OnceCell::new(),
    };
    let exec_cell: OnceCell<Executor> = OnceCell::new();
    let executor = || -> Result<&Executor, StageError> {
        if exec_cell.get().is_none() {
            let e = bfcl::make_executor(b.recorded.as_deref().filter(|_| b.backend == "recorded"))
                .map_err(|e| StageError::failed(evaluate::STAGE, e.to_string()))?;
            let _ = exec_cell.set(e);
        }
        exec_cell
            .get()
            .ok_or_else(|| StageError::failed(evaluate::STAGE, "executor unavailable"))
    };
    let mut out = RunOutput::default();
    let cache = s.store().root().join("cache").join("bfcl");
    let data = s.stage(
        "bfcl-data",
        bfcl_data::STAGE,
        bfcl_data::VERSION,
        bfcl_data::params(&b.data, b.subset)?,
        &[],
        |ctx| bfcl_data::run(ctx, &b.data, b.subset, &cache),
    )?;
    let Some(data) = data else {
        return Ok(out);
    };
    push(&mut out, "bfcl-data", bfcl_data::STAGE, "", "", 0, &data);
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

    let mut chains: Vec<(String, String)> = Vec::new();
    if b.methods.iter().any(|m| m == "gold") {
        chains.push(("gold".into(), "gold".into()));
    }
    for setting in &b.settings {
        if b.methods.iter().any(|m| m == "base" || m == "toolobserver") {
            chains.push((setting.clone(), "base".into()));
        }
    }
    let multi_seed = b.seeds.len() > 1;
    let mut summary_inputs: Vec<(String, Entry)> = Vec::new();
    for &seed in &b.seeds {
        let sfx = if multi_seed {
            format!(" s{seed}")
        } else {
            String::new()
        };
        for (setting, method) in &chains {
            let node = |stage: &str, round: i64| format!("{stage}[{setting} r{round}{sfx}]");
            let docs0 = s.stage(
                &format!("opacify[{setting}]"),
                opacify::STAGE,
                opacify::VERSION,
                json!({"setting": setting}),
                &[("instances", Some(&data))],
                |ctx| opacify::run(ctx, setting, &instances),
            )?;
            let Some(docs0) = docs0 else { continue };
            push(
                &mut out,
                &format!("opacify[{setting}]"),
                opacify::STAGE,
                setting,
                method,
                0,
                &docs0,
            );
            let explore_params = |round: i64| {
                json!({
                    "agent": exp.agent,
                    "system_prompt": exp.agent_system_prompt,
                    "seed": seed,
                    "tool_choice": "required",
                    "round": round,
                })
            };
            let mut docs = docs0;
            let mut prev_traj: Option<Entry> = None;
            let mut round = 0i64;
            loop {
                let docs_rows: Vec<DocRow> = docs.read()?;
                let prev_rows: Option<Vec<TrajectoryRow>> =
                    prev_traj.as_ref().map(|e| e.read()).transpose()?;
                let mut inputs = vec![("instances", Some(&data)), ("docs", Some(&docs))];
                if let Some(p) = &prev_traj {
                    inputs.push(("previous", Some(p)));
                }
                let traj = s.stage(
                    &node("explore", round),
                    explore::STAGE,
                    explore::VERSION,
                    explore_params(round),
                    &inputs,
                    |ctx| {
                        let params = explore::ExploreParams {
                            model: &exp.agent,
                            system: &exp.agent_system_prompt,
                            seed,
                        };
                        explore::run(
                            ctx,
                            models.agent()?,
                            &params,
                            &instances,
                            &docs_rows,
                            prev_rows.as_deref(),
                        )
                    },
                )?;
                let Some(traj) = traj else { break };
                let method_label = if round == 0 {
                    method.clone()
                } else {
                    "toolobserver".to_string()
                };
                push(
                    &mut out,
                    &node("explore", round),
                    explore::STAGE,
                    setting,
                    &method_label,
                    round,
                    &traj,
                );
                let traj_rows: Vec<TrajectoryRow> = traj.read()?;
                let scores = s.stage(
                    &node("evaluate", round),
                    evaluate::STAGE,
                    evaluate::VERSION,
                    eval_params.clone(),
                    &[
                        ("instances", Some(&data)),
                        ("docs", Some(&docs)),
                        ("trajectories", Some(&traj)),
                    ],
                    |ctx| {
                        evaluate::run(ctx, executor()?, round, &instances, &docs_rows, &traj_rows)
                    },
                )?;
                let Some(scores) = scores else { break };
                push(
                    &mut out,
                    &node("evaluate", round),
                    evaluate::STAGE,
                    setting,
                    &method_label,
                    round,
                    &scores,
                );
                summary_inputs.push((format!("{setting}/r{round}{sfx}"), scores.clone()));
                let to = setting != "gold" && b.methods.iter().any(|m| m == "toolobserver");
                if !to || round >= b.rounds as i64 {
                    break;
                }
                round += 1;
                let score_rows: Vec<ScoreRow> = scores.read()?;
                let reflect = s.stage(
                    &node("batch-reflect", round),
                    batch_reflect::STAGE,
                    batch_reflect::VERSION,
                    json!({
                        "editor": exp.editor,
                        "template": exp.editor_prompt,
                        "round": round,
                        "seed": seed,
                        "skip_success": b.reflect_skip_success,
                    }),
                    &[
                        ("docs", Some(&docs)),
                        ("trajectories", Some(&traj)),
                        ("scores", Some(&scores)),
                    ],
                    |ctx| {
                        let params = batch_reflect::ReflectParams {
                            model: &exp.editor,
                            template: &exp.editor_prompt,
                            round,
                            seed,
                            skip_success: b.reflect_skip_success,
                        };
                        let inputs = batch_reflect::RoundInputs {
                            questions: &questions,
                            docs: &docs_rows,
                            trajectories: &traj_rows,
                            scores: &score_rows,
                        };
                        batch_reflect::run(ctx, models.editor()?, &params, &inputs)
                    },
                )?;
                let Some(reflect) = reflect else { break };
                push(
                    &mut out,
                    &node("batch-reflect", round),
                    batch_reflect::STAGE,
                    setting,
                    "toolobserver",
                    round,
                    &reflect,
                );
                let new_docs: Vec<DocRow> = reflect.read()?;
                if new_docs.iter().all(|d| !d.changed) {
                    break; // every instance frozen: round k would repeat round k-1
                }
                docs = reflect;
                prev_traj = Some(traj);
            }
        }
    }
    let inputs: Vec<(&str, Option<&Entry>)> = summary_inputs
        .iter()
        .map(|(n, e)| (n.as_str(), Some(e)))
        .collect();
    if !inputs.is_empty() {
        let labels: Vec<&str> = summary_inputs.iter().map(|(n, _)| n.as_str()).collect();
        let summary = s.stage(
            "summarize",
            summarize::STAGE,
            summarize::VERSION,
            json!({"bootstrap": summarize::BOOTSTRAP, "inputs": labels}),
            &inputs,
            |ctx| summarize::run(ctx, &summary_inputs),
        )?;
        if let Some(summary) = summary {
            push(&mut out, "summarize", summarize::STAGE, "", "", 0, &summary);
        }
    }
    Ok(out)
}

fn push(
    out: &mut RunOutput,
    node: &str,
    stage: &'static str,
    setting: &str,
    method: &str,
    round: i64,
    e: &Entry,
) {
    out.outputs.push(Output {
        node: node.to_string(),
        stage,
        setting: setting.to_string(),
        method: method.to_string(),
        round,
        entry: e.clone(),
    });
}
