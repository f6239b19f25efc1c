//! What `otb report` and `otb export --sft` read of BFCL's rows: an `evaluate`
//! node's verdicts as the report's items (with the trajectory, the documentation
//! and the question upstream of it), and the SFT pairs of its online ToolObserver
//! curves.

use crate::baselines::{tool_description, tool_name, tools_of};
use crate::env::{Output, RunOutput};
use crate::experiment::{tool_set_id, Experiment};
use crate::reading::{
    changed, docs_text, rows, tokens, traces_of, verdict, Along, Block, Cap, Computed, Item,
    Reading, SftPair, SELECTED_ON_INSTANCE,
};
use crate::rows::{DocRow, InstanceRow, ScoreRow, TrajectoryRow};
use pipeline::{Row, StageError, StoreError};
use serde_json::Value;
use std::collections::HashMap;

/// The last output of `stage` (highest round) among `outputs` matching `keep`.
fn last<'a>(
    run: &'a RunOutput,
    stage: &'a str,
    keep: impl Fn(&Output) -> bool,
) -> Option<&'a Output> {
    run.by_stage(stage)
        .filter(|o| keep(o))
        .max_by_key(|o| o.cell.round)
}

/// How bfcl reads its own rows for `otb report` and `otb export --sft`.
pub struct BfclReader;

impl crate::experiment::Reader for BfclReader {
    fn role_of(&self, stage: &str) -> Option<&'static str> {
        (stage == super::explore::STAGE).then_some("agent")
    }

    fn is_gold_docs(&self, _setting: &str, stage: &str, out: &crate::at::Cell) -> bool {
        out.setting == "gold" && stage == super::opacify::STAGE
    }

    /// Whether `stage`'s nodes hold the report's items: the evaluation's verdicts.
    fn holds_items(&self, stage: &str) -> bool {
        stage == crate::bfcl::evaluate::STAGE
    }

    /// The report's items of `out`, a computed node of [`holds_items`](crate::experiment::Reader::holds_items)'s stage.
    fn items(
        &self,
        out: &Computed<'_>,
        along: &dyn Along,
        cap: &mut Cap,
    ) -> Result<Reading, StoreError> {
        let scores: Vec<ScoreRow> = out.entry.read()?;
        let mut p_a = None;
        if !scores.is_empty() {
            let n = scores.len() as f64;
            p_a = Some((
                scores.iter().map(|s| s.p).sum::<f64>() / n,
                scores.iter().map(|s| s.a).sum::<f64>() / n,
            ));
        }
        let traj: Vec<TrajectoryRow> = rows(along.upstream(out.node, TrajectoryRow::TABLE, None))?;
        let docs: Vec<DocRow> = rows(along.upstream(out.node, DocRow::TABLE, Some("docs")))?;
        let inst: Vec<InstanceRow> = rows(along.upstream(out.node, InstanceRow::TABLE, None))?;
        let traj: HashMap<&str, &TrajectoryRow> =
            traj.iter().map(|t| (t.instance_id.as_str(), t)).collect();
        let docs: HashMap<&str, &DocRow> =
            docs.iter().map(|d| (d.instance_id.as_str(), d)).collect();
        let inst: HashMap<&str, &InstanceRow> =
            inst.iter().map(|i| (i.instance_id.as_str(), i)).collect();
        let mut items = Vec::with_capacity(scores.len());
        for s in &scores {
            let id = s.instance_id.as_str();
            let mut detail = Vec::new();
            if let Some(i) = inst.get(id) {
                detail.push(Block::Text {
                    t: "Question".into(),
                    v: cap.text(&i.question),
                });
            }
            if let Some(d) = docs.get(id) {
                detail.push(Block::Code {
                    t: format!("Documentation the agent saw (round {})", d.round),
                    v: cap.text(&docs_text(&d.tools)),
                });
                if !d.demos.is_null() {
                    detail.push(Block::Code {
                        t: "Demonstrations in the prompt".into(),
                        v: cap.json(&d.demos),
                    });
                }
            }
            let mut summary = String::new();
            let error = s.error_kind.clone();
            if let Some(t) = traj.get(id) {
                let rows: Vec<Vec<String>> = t
                    .calls
                    .iter()
                    .map(|c| {
                        vec![
                            cap.text(&c.function),
                            cap.text(&serde_json::to_string(&c.args).unwrap_or_default()),
                        ]
                    })
                    .collect();
                summary = t
                    .calls
                    .iter()
                    .map(|c| c.function.as_str())
                    .collect::<Vec<_>>()
                    .join(", ");
                detail.push(Block::Table {
                    t: format!("Tool calls ({})", t.calls.len()),
                    head: vec!["function".into(), "arguments".into()],
                    rows,
                });
                if let Some(c) = t.content.as_deref().filter(|c| !c.is_empty()) {
                    detail.push(Block::Text {
                        t: "Reply text".into(),
                        v: cap.text(c),
                    });
                }
                let mut kv = vec![
                    ("model".into(), t.model.clone()),
                    (
                        "tokens".into(),
                        tokens(t.prompt_tokens, t.completion_tokens, t.reasoning_tokens),
                    ),
                    ("latency".into(), format!("{} ms", t.latency_ms)),
                ];
                if let Some(k) = &t.error_kind {
                    kv.push(("error".into(), k.clone()));
                    kv.push((
                        "error text".into(),
                        cap.text(t.error.as_deref().unwrap_or("")),
                    ));
                }
                if t.reused {
                    kv.push((
                        "reused".into(),
                        "copied from the previous round (documentation unchanged)".into(),
                    ));
                }
                detail.push(Block::Kv {
                    t: "Model call".into(),
                    v: kv,
                });
            }
            let outputs: Vec<Vec<String>> = s
                .outputs
                .as_array()
                .into_iter()
                .flatten()
                .map(|v| {
                    let ok = v.get("repr").and_then(Value::as_str);
                    let err = v.get("error").and_then(Value::as_str);
                    match (ok, err) {
                        (Some(r), _) => vec!["ok".into(), cap.text(r)],
                        (None, Some(e)) => vec!["error".into(), cap.text(e)],
                        _ => vec!["".into(), cap.text(&v.to_string())],
                    }
                })
                .collect();
            if !outputs.is_empty() {
                detail.push(Block::Table {
                    t: "Execution".into(),
                    head: vec!["".into(), "result".into()],
                    rows: outputs,
                });
            }
            detail.push(Block::Kv {
                t: "Verdict".into(),
                v: vec![
                    ("E".into(), if s.e { "right" } else { "wrong" }.into()),
                    ("reason".into(), cap.text(&s.e_reason)),
                    ("P".into(), format!("{:.2}", s.p)),
                    ("A".into(), format!("{:.2}", s.a)),
                    ("A (corrected)".into(), format!("{:.2}", s.a_corrected)),
                ],
            });
            if let Some(i) = inst.get(id) {
                detail.push(Block::Code {
                    t: "Ground truth".into(),
                    v: cap.json(&i.ground_truth),
                });
            }
            let score = if s.e { 1.0 } else { 0.0 };
            if summary.is_empty() {
                summary = error.clone().unwrap_or_else(|| "no call".into());
            }
            items.push(Item {
                cell: 0,
                id: id.to_string(),
                verdict: verdict(score, &error),
                score,
                error,
                summary: cap.text(&format!("{summary} — {}", s.e_reason)),
                detail,
            });
        }
        Ok(Reading {
            items,
            p_a,
            docs: None,
        })
    }

    /// The tool sets of `run` for `otb export --sft`: `bfcl` once it has its data.
    fn sft_tool_sets(&self, run: &RunOutput) -> Vec<String> {
        if run.by_stage(crate::bfcl::data::STAGE).next().is_some() {
            vec![tool_set_id("bfcl", "")]
        } else {
            Vec::new()
        }
    }

    /// The SFT pairs of `run`'s online ToolObserver curves. One pair per tool whose
    /// description changed where the instance's final-round score `E` is right and its
    /// Base round-0 score was wrong; the pair's traces are that instance's round-0 turn
    /// as the editor saw it (question, calls, and the outcome `[bfcl] outcome` shows).
    /// BFCL has no split: its pairs are selected on the instances they are scored on.
    fn sft_pairs(&self, run: &RunOutput, exp: &Experiment) -> Result<Vec<SftPair>, StageError> {
        let outcome = exp
            .bfcl()
            .map_or(crate::bfcl::config::Outcome::Grader, |b| b.outcome);
        let mut out = Vec::new();
        let Some(data) = run.by_stage(crate::bfcl::data::STAGE).next() else {
            return Ok(out);
        };
        let instances: Vec<InstanceRow> = data.entry.read()?;
        let questions: HashMap<&str, &str> = instances
            .iter()
            .map(|i| (i.instance_id.as_str(), i.question.as_str()))
            .collect();
        // Each curve: (setting, agent, editor, method).
        let mut curves: Vec<(&str, &str, &str, &str)> = run
            .by_stage("batch-reflect")
            .filter(|o| o.cell.is_toolobserver())
            .map(|o| {
                (
                    o.cell.setting.as_str(),
                    o.cell.agent.as_str(),
                    o.cell.editor.as_str(),
                    o.cell.method_name(),
                )
            })
            .collect();
        curves.sort_unstable();
        curves.dedup();
        for (setting, agent, editor, method) in curves {
            let same = |o: &Output, m: &str| {
                o.cell.setting == setting && o.cell.agent == agent && o.cell.method_name() == m
            };
            let Some(opaque) = run.by_stage("opacify").find(|o| o.cell.setting == setting) else {
                continue;
            };
            let (Some(docs), Some(after), Some(before), Some(traj0)) = (
                last(run, "batch-reflect", |o| {
                    same(o, method) && o.cell.editor == editor
                }),
                last(run, "evaluate", |o| {
                    same(o, method) && o.cell.editor == editor
                }),
                run.by_stage("evaluate")
                    .find(|o| same(o, "base") && o.cell.round == 0),
                run.by_stage("explore")
                    .find(|o| same(o, "base") && o.cell.round == 0),
            ) else {
                continue;
            };
            let original: Vec<DocRow> = opaque.entry.read()?;
            let finals: Vec<DocRow> = docs.entry.read()?;
            let scores_after: Vec<ScoreRow> = after.entry.read()?;
            let scores_before: Vec<ScoreRow> = before.entry.read()?;
            let trajectories: Vec<TrajectoryRow> = traj0.entry.read()?;
            let e_of = |rows: &[ScoreRow], id: &str| {
                rows.iter().find(|s| s.instance_id == id).map(|s| s.e)
            };
            for d in &finals {
                let id = d.instance_id.as_str();
                if !(e_of(&scores_before, id) == Some(false)
                    && e_of(&scores_after, id) == Some(true))
                {
                    continue;
                }
                let Some(o) = original.iter().find(|o| o.instance_id == id) else {
                    continue;
                };
                // The instance's round-0 turn as the editor saw it (`[bfcl] outcome`).
                let trace = trajectories
                    .iter()
                    .find(|t| t.instance_id == id)
                    .map(|t| {
                        let score = scores_before.iter().find(|s| s.instance_id == id);
                        crate::bfcl::env::render_example(
                            questions.get(id).copied().unwrap_or(""),
                            t,
                            score,
                            outcome,
                        )
                    })
                    .into_iter()
                    .collect::<Vec<_>>();
                let (before_tools, after_tools) = (tools_of(o), tools_of(d));
                for (b, a) in changed(&before_tools, &after_tools) {
                    out.push(SftPair {
                        environment: "bfcl".into(),
                        setting: setting.into(),
                        tool_set: tool_set_id("bfcl", setting),
                        held_out: false,
                        agent: agent.into(),
                        editor: editor.into(),
                        method: method.into(),
                        instance_id: id.into(),
                        tool: tool_name(a).into(),
                        round: docs.cell.round,
                        selected_on: SELECTED_ON_INSTANCE.into(),
                        interface: b.to_string(),
                        traces: traces_of(&trace, tool_name(a)),
                        target: tool_description(a).trim().into(),
                        score_before: 0.0,
                        score_after: 1.0,
                    });
                }
            }
        }
        Ok(out)
    }
}
