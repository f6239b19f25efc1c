//! `otb export EXP.toml --sft DIR`: a finished run's ToolObserver descriptions as
//! Trace-Free+ training data (`baselines.md`). One pair per tool whose description
//! ToolObserver changed where the change made the agent better:
//!
//! - BFCL (online, per instance): the instance's final-round score `E` is right where
//!   its Base round-0 score was wrong; the pair's traces are that instance's round-0
//!   turn as the editor saw it (question, calls, outcome).
//! - chess and search (offline, one tool set): the curve's test score (best-tool %,
//!   judged accuracy) is higher than Base's; the traces are the agent's round-0 play of
//!   the **training** split as the editor read it (test-split play never appears).
//!
//! Input = the tool as it was documented before ToolObserver (name, parameters,
//! opaque description), plus for trace-based examples up to [`TRACES`] of its
//! recorded calls; target = ToolObserver's last description. The examples are
//! requests of the Trace-Free+ generator's own template
//! (`prompts/tracefree_generate.txt`) with `{"description": ...}` answers, in a
//! curriculum of [`STAGES`] stages whose trace-based share falls from all to none.

use crate::baselines::tracefree::{trace_section, GENERATE};
use crate::baselines::{fill, tool_description, tool_name, tools_of};
use crate::batch_reflect::render_tool;
use crate::driver::{Output, RunOutput};
use crate::rows::{DocRow, InstanceRow, ScoreRow, TrajectoryRow};
use pipeline::{Row, StageError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

/// Recorded calls per tool in a trace-based example.
pub const TRACES: u32 = 3;
/// Curriculum stages: stage `s` of `STAGES` shows traces in `(STAGES - s) / (STAGES - 1)`
/// of its examples (all in the first, none in the last).
pub const STAGES: usize = 3;

fn fail(e: impl std::fmt::Display) -> StageError {
    StageError::infra("export", e.to_string())
}

/// One improved tool: what ToolObserver started from and ended with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Row)]
#[row(
    table = "sft_pairs",
    doc = "one tool whose ToolObserver description made the agent better (`otb export --sft`)"
)]
pub struct SftPair {
    /// `bfcl`, `chess` or `search`.
    #[row(doc = "bfcl, chess or search")]
    pub environment: String,
    /// The setting or tool set.
    #[row(doc = "setting (BFCL) or tool set")]
    pub setting: String,
    /// The agent model of the curve.
    #[row(doc = "agent model")]
    pub agent: String,
    /// The editor model of the curve.
    #[row(doc = "editor model")]
    pub editor: String,
    /// `toolobserver` or `toolobserver-guard`.
    #[row(doc = "toolobserver or toolobserver-guard")]
    pub method: String,
    /// The BFCL instance, or `*` (an offline tool set's shared docs).
    #[row(doc = "BFCL instance id, or * for an offline tool set")]
    pub instance_id: String,
    /// The tool's shown name.
    #[row(doc = "tool name as shown to the agent")]
    pub tool: String,
    /// The tool before ToolObserver, as the generator's template shows it.
    #[row(doc = "the tool before ToolObserver (name, parameters, description)")]
    pub interface: String,
    /// The recorded calls that name the tool (numbered; empty when none).
    #[row(doc = "recorded calls naming the tool, as shown to the generator (may be empty)")]
    pub traces: String,
    /// ToolObserver's last description of the tool.
    #[row(doc = "ToolObserver's last description (the target)")]
    pub target: String,
    /// The score before (BFCL: the instance's Base E, 0 or 1; chess: best-tool %;
    /// search: accuracy).
    #[row(
        doc = "score with the original docs (BFCL: instance E 0/1; chess best-tool %; search accuracy)"
    )]
    pub score_before: f64,
    /// The score after, on the same scale.
    #[row(doc = "score with ToolObserver's docs, same scale")]
    pub score_after: f64,
}

/// One training example of the curriculum.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Row)]
#[row(
    table = "sft_examples",
    doc = "one Trace-Free+ training example (`otb export --sft`), in curriculum order"
)]
pub struct SftExample {
    /// The curriculum stage (1 = mostly trace-based .. last = trace-free).
    #[row(doc = "curriculum stage, 1..3 (trace-based share 100%, 50%, 0%)")]
    pub stage: i64,
    /// `trace-based` or `trace-free`.
    #[row(doc = "trace-based or trace-free")]
    pub form: String,
    /// The pair's environment.
    #[row(doc = "bfcl, chess or search")]
    pub environment: String,
    /// The pair's setting or tool set.
    #[row(doc = "setting or tool set")]
    pub setting: String,
    /// The pair's instance.
    #[row(doc = "instance id, or *")]
    pub instance_id: String,
    /// The pair's tool.
    #[row(doc = "tool name")]
    pub tool: String,
    /// The generator's request.
    #[row(doc = "the generator request (the user message)")]
    pub prompt: String,
    /// The answer to learn: `{"description": ...}`.
    #[row(doc = "the answer to learn, {\"description\": ...} (the assistant message)")]
    pub completion: String,
}

/// The pairs of `run`: every improved tool of every ToolObserver curve.
pub fn pairs(run: &RunOutput) -> Result<Vec<SftPair>, StageError> {
    let mut out = Vec::new();
    online_pairs(run, &mut out)?;
    for (env, stage) in [("chess", "chess-docs"), ("search", "search-docs")] {
        offline_pairs(run, env, stage, &mut out)?;
    }
    Ok(out)
}

/// The last output of `stage` (highest round) among `outputs` matching `keep`.
fn last<'a>(
    run: &'a RunOutput,
    stage: &'a str,
    keep: impl Fn(&Output) -> bool,
) -> Option<&'a Output> {
    run.by_stage(stage)
        .filter(|o| keep(o))
        .max_by_key(|o| o.round)
}

/// The tools whose description changed from `before` to `after`, with both tools.
fn changed<'a>(before: &'a [Value], after: &'a [Value]) -> Vec<(&'a Value, &'a Value)> {
    after
        .iter()
        .filter_map(|a| {
            let b = before.iter().find(|b| tool_name(b) == tool_name(a))?;
            (tool_description(a).trim() != tool_description(b).trim()
                && !tool_description(a).trim().is_empty())
            .then_some((b, a))
        })
        .collect()
}

fn online_pairs(run: &RunOutput, out: &mut Vec<SftPair>) -> Result<(), StageError> {
    let Some(data) = run.by_stage("bfcl-data").next() else {
        return Ok(());
    };
    let instances: Vec<InstanceRow> = data.entry.read()?;
    let questions: HashMap<&str, &str> = instances
        .iter()
        .map(|i| (i.instance_id.as_str(), i.question.as_str()))
        .collect();
    // Each curve: (setting, agent, editor, method).
    let mut curves: Vec<(&str, &str, &str, &str)> = run
        .by_stage("batch-reflect")
        .filter(|o| o.method.starts_with("toolobserver"))
        .map(|o| {
            (
                o.setting.as_str(),
                o.agent.as_str(),
                o.editor.as_str(),
                o.method.as_str(),
            )
        })
        .collect();
    curves.sort_unstable();
    curves.dedup();
    for (setting, agent, editor, method) in curves {
        let same = |o: &Output, m: &str| o.setting == setting && o.agent == agent && o.method == m;
        let Some(opaque) = run.by_stage("opacify").find(|o| o.setting == setting) else {
            continue;
        };
        let (Some(docs), Some(after), Some(before), Some(traj0)) = (
            last(run, "batch-reflect", |o| {
                same(o, method) && o.editor == editor
            }),
            last(run, "evaluate", |o| same(o, method) && o.editor == editor),
            run.by_stage("evaluate")
                .find(|o| same(o, "base") && o.round == 0),
            run.by_stage("explore")
                .find(|o| same(o, "base") && o.round == 0),
        ) else {
            continue;
        };
        let original: Vec<DocRow> = opaque.entry.read()?;
        let finals: Vec<DocRow> = docs.entry.read()?;
        let scores_after: Vec<ScoreRow> = after.entry.read()?;
        let scores_before: Vec<ScoreRow> = before.entry.read()?;
        let trajectories: Vec<TrajectoryRow> = traj0.entry.read()?;
        let e_of =
            |rows: &[ScoreRow], id: &str| rows.iter().find(|s| s.instance_id == id).map(|s| s.e);
        for d in &finals {
            let id = d.instance_id.as_str();
            if !(e_of(&scores_before, id) == Some(false) && e_of(&scores_after, id) == Some(true)) {
                continue;
            }
            let Some(o) = original.iter().find(|o| o.instance_id == id) else {
                continue;
            };
            // The instance's round-0 turn as the editor saw it.
            let trace = trajectories
                .iter()
                .find(|t| t.instance_id == id)
                .map(|t| {
                    let score = scores_before.iter().find(|s| s.instance_id == id);
                    crate::bfcl::env::render_example(
                        questions.get(id).copied().unwrap_or(""),
                        t,
                        score,
                        crate::bfcl::config::Outcome::Grader,
                    )
                })
                .into_iter()
                .collect::<Vec<_>>();
            let (before_tools, after_tools) = (tools_of(o), tools_of(d));
            for (b, a) in changed(&before_tools, &after_tools) {
                out.push(SftPair {
                    environment: "bfcl".into(),
                    setting: setting.into(),
                    agent: agent.into(),
                    editor: editor.into(),
                    method: method.into(),
                    instance_id: id.into(),
                    tool: tool_name(a).into(),
                    interface: render_tool(b),
                    traces: trace_section(&trace, tool_name(a), TRACES),
                    target: tool_description(a).trim().into(),
                    score_before: 0.0,
                    score_after: 1.0,
                });
            }
        }
    }
    Ok(())
}

/// An offline environment's score of a test evaluation: chess best-tool %, search
/// accuracy.
fn offline_score(env: &str, o: &Output) -> Result<Option<f64>, StageError> {
    Ok(match env {
        "chess" => o
            .entry
            .read::<crate::chess::rows::BestToolRow>()?
            .first()
            .map(|r| r.best_tool_pct),
        _ => o
            .entry
            .read::<crate::search::SearchScoreRow>()?
            .first()
            .map(|r| r.accuracy),
    })
}

/// The texts the editor read of a training play (the judge's rows when a judge saw
/// the episodes).
fn editor_texts(env: &str, o: &Output) -> Result<Vec<String>, StageError> {
    Ok(match env {
        "chess" => o
            .entry
            .read::<crate::chess::rows::GameRow>()?
            .into_iter()
            .map(|g| g.editor_text)
            .collect(),
        _ => o
            .entry
            .read::<crate::search::EpisodeRow>()?
            .into_iter()
            .map(|e| e.editor_text)
            .collect(),
    })
}

fn offline_pairs(
    run: &RunOutput,
    env: &str,
    docs_stage: &str,
    out: &mut Vec<SftPair>,
) -> Result<(), StageError> {
    let (explore, evaluate, merge) = match env {
        "chess" => ("chess-explore", "chess-evaluate", "consensus-merge"),
        _ => ("search-explore", "search-evaluate", "consensus-merge"),
    };
    for opaque in run.by_stage(docs_stage).filter(|o| o.method == "base") {
        let set = opaque.setting.as_str();
        let mut curves: Vec<(&str, &str)> = run
            .by_stage(merge)
            .filter(|o| o.setting == set && o.method == "toolobserver")
            .map(|o| (o.agent.as_str(), o.editor.as_str()))
            .collect();
        curves.sort_unstable();
        curves.dedup();
        for (agent, editor) in curves {
            let cell = |o: &Output, m: &str| o.setting == set && o.agent == agent && o.method == m;
            let test = |o: &Output| o.node.contains(" test");
            let (Some(docs), Some(after), Some(before)) = (
                last(run, merge, |o| {
                    cell(o, "toolobserver") && o.editor == editor
                }),
                run.by_stage(evaluate)
                    .find(|o| cell(o, "toolobserver") && o.editor == editor && test(o)),
                run.by_stage(evaluate).find(|o| cell(o, "base") && test(o)),
            ) else {
                continue;
            };
            let (Some(after), Some(before)) =
                (offline_score(env, after)?, offline_score(env, before)?)
            else {
                continue;
            };
            if after <= before {
                continue;
            }
            // The training split's round-0 play only: no test episode is shown.
            let texts = match run.by_stage(explore).find(|o| {
                cell(o, "toolobserver")
                    && o.editor == editor
                    && o.round == 0
                    && o.node.contains(" train r0")
            }) {
                Some(t) => editor_texts(env, t)?,
                None => Vec::new(),
            };
            let original: Vec<DocRow> = opaque.entry.read()?;
            let finals: Vec<DocRow> = docs.entry.read()?;
            let (Some(o), Some(d)) = (original.first(), finals.first()) else {
                continue;
            };
            let (before_tools, after_tools) = (tools_of(o), tools_of(d));
            for (b, a) in changed(&before_tools, &after_tools) {
                out.push(SftPair {
                    environment: env.into(),
                    setting: set.into(),
                    agent: agent.into(),
                    editor: editor.into(),
                    method: "toolobserver".into(),
                    instance_id: crate::env::SHARED.into(),
                    tool: tool_name(a).into(),
                    interface: render_tool(b),
                    traces: trace_section(&texts, tool_name(a), TRACES),
                    target: tool_description(a).trim().into(),
                    score_before: before,
                    score_after: after,
                });
            }
        }
    }
    Ok(())
}

/// The curriculum: every pair once per stage; in stage `s` (1-based) a pair with
/// traces is trace-based when its index is below the stage's trace-based share of
/// the pairs (all in stage 1, none in the last), else trace-free.
pub fn curriculum(pairs: &[SftPair]) -> Vec<SftExample> {
    let mut out = Vec::new();
    for stage in 1..=STAGES {
        let share = (STAGES - stage) as f64 / (STAGES - 1) as f64;
        let based = (pairs.len() as f64 * share).round() as usize;
        for (i, p) in pairs.iter().enumerate() {
            let traced = i < based && !p.traces.is_empty();
            let prompt = fill(
                GENERATE,
                &[
                    ("tool", &p.interface),
                    ("traces", if traced { &p.traces } else { "" }),
                ],
            );
            out.push(SftExample {
                stage: stage as i64,
                form: if traced { "trace-based" } else { "trace-free" }.into(),
                environment: p.environment.clone(),
                setting: p.setting.clone(),
                instance_id: p.instance_id.clone(),
                tool: p.tool.clone(),
                prompt,
                completion: json!({ "description": p.target }).to_string(),
            });
        }
    }
    out
}

/// What `--sft` writes into `dest`: `pairs.parquet`, `examples.parquet`,
/// `stage<k>.jsonl` (chat format: `{"messages": [user, assistant], ...metadata}`) and
/// `SCHEMA.md`; the files written.
pub fn write(run: &RunOutput, dest: &Path) -> Result<Vec<PathBuf>, StageError> {
    std::fs::create_dir_all(dest).map_err(|e| fail(format!("{}: {e}", dest.display())))?;
    let pairs = pairs(run)?;
    let examples = curriculum(&pairs);
    let mut written = Vec::new();
    let p = dest.join("pairs.parquet");
    pipeline::table::write_rows(&pairs, &p).map_err(fail)?;
    written.push(p);
    let p = dest.join("examples.parquet");
    pipeline::table::write_rows(&examples, &p).map_err(fail)?;
    written.push(p);
    for stage in 1..=STAGES as i64 {
        let mut text = String::new();
        for e in examples.iter().filter(|e| e.stage == stage) {
            let line = json!({
                "messages": [
                    {"role": "user", "content": e.prompt},
                    {"role": "assistant", "content": e.completion},
                ],
                "stage": e.stage,
                "form": e.form,
                "environment": e.environment,
                "setting": e.setting,
                "instance_id": e.instance_id,
                "tool": e.tool,
            });
            text.push_str(&line.to_string());
            text.push('\n');
        }
        let p = dest.join(format!("stage{stage}.jsonl"));
        std::fs::write(&p, text).map_err(|e| fail(format!("{}: {e}", p.display())))?;
        written.push(p);
    }
    let mut schema = String::from(
        "# Trace-Free+ training data\n\nWritten by `otb export EXP.toml --sft DIR` from a finished run: one pair per tool whose ToolObserver description made the agent better (BFCL: the instance went from wrong to right; chess, search: the tool set's test score rose), and its examples in a curriculum of 3 stages whose trace-based share falls from 100% to 50% to 0%. Traces come from round-0 play with the original docs (BFCL: the instance's turn; chess, search: the training split only, never a test episode; their one tool set serves both splits). BFCL has no train/test split: online ToolObserver learns on the instances it is scored on, so hold instances out yourself (by `instance_id`) before training a generator you will score on BFCL. `stage<k>.jsonl`: one chat example per line, `messages` = [user = the generator request of `prompts/tracefree_generate.txt`, assistant = `{\"description\": ...}`], with the example's metadata beside it.\n\n",
    );
    crate::rows::Exported::of::<SftPair>(false).schema(&mut schema);
    crate::rows::Exported::of::<SftExample>(false).schema(&mut schema);
    let p = dest.join("SCHEMA.md");
    std::fs::write(&p, schema).map_err(|e| fail(format!("{}: {e}", p.display())))?;
    written.push(p);
    Ok(written)
}
