//! BFCL-Opaque behind the environment seam: [`Bfcl`] implements [`OnlineEnv`]
//! (single-turn `explore`, `evaluate` with the Python-semantics executor, the
//! observed example the editor sees), and [`drive`] expands the `[bfcl]` grid
//! (settings x methods x agents x editors x seeds) into stage calls.

use crate::baselines::{self, ToolOutput, ToolRunner};
use crate::batch_reflect::render_call;
use crate::bfcl::config::{BfclExperiment, Outcome};
use crate::bfcl::summarize::{self, SummaryInput};
use crate::env::{At, Cx, DriveError, Example, Method, Naming, OnlineEnv, Shown};
use crate::experiment::{Experiment, BASELINES};
use crate::once::BuildOnce;
use crate::online::{self, Curve};
use crate::rows::{DocRow, InstanceRow, ScoreRow, TrajectoryRow};
use crate::{bfcl, bfcl::data as bfcl_data, bfcl::evaluate, bfcl::explore, bfcl::opacify};
use datasets::bfcl::executor::Executor;
use pipeline::{Handle, StageError};
use serde_json::json;
use std::collections::HashMap;

/// The observed example: question, calls, outcome (never the ground truth).
/// With [`Outcome::Execution`] the grader's verdict is not shown: a call judged
/// correct reads `Model output: <outputs>` like any other.
pub fn render_example(
    question: &str,
    traj: &TrajectoryRow,
    score: Option<&ScoreRow>,
    outcome: Outcome,
) -> String {
    let calls = if traj.calls.is_empty() {
        "(no calls)".to_string()
    } else {
        traj.calls
            .iter()
            .map(|c| render_call(&c.function, &c.args, c.raw.as_deref()))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let shown = match score {
        None => "ERROR: No execution results available".to_string(),
        Some(s) => match (outcome, s.outcome.strip_prefix("SUCCESS: ")) {
            (Outcome::Execution, Some(values)) => format!("Model output: {values}"),
            _ => s.outcome.clone(),
        },
    };
    format!("User question: {question}\nCalls made:\n{calls}\nOutcome: {shown}")
}

/// What is fixed for one BFCL drive.
pub struct Bfcl<'a> {
    exp: &'a Experiment,
    b: &'a BfclExperiment,
    executor: BuildOnce<Executor>,
    data: Handle,
    /// `bfcl-data`'s rows, read once, by the first stage that must be computed.
    instances: BuildOnce<Vec<InstanceRow>>,
    eval_params: serde_json::Value,
}

impl Bfcl<'_> {
    /// The ToolObserver curve's protocol (`guard`: the success guard).
    fn curve(&self, guard: bool) -> Curve<'_> {
        Curve {
            template: &self.exp.editor_prompt,
            rounds: self.b.rounds,
            guard,
        }
    }

    fn instances(&self) -> Result<&[InstanceRow], StageError> {
        self.instances
            .get_or_try_build(|| self.data.read())
            .map(Vec::as_slice)
    }

    fn executor(&self) -> Result<&Executor, StageError> {
        let b = self.b;
        self.executor.get_or_try_build(|| {
            bfcl::make_executor(b.recorded.as_deref().filter(|_| b.backend == "recorded"))
                .map_err(|e| StageError::infra(evaluate::STAGE, e.to_string()))
        })
    }
}

impl OnlineEnv for Bfcl<'_> {
    fn explore_eval<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        at: &At,
        docs: &Handle,
        prev: Option<&Handle>,
    ) -> Result<(Handle, Handle), DriveError> {
        let exp = self.exp;
        let round = at.round;
        let agent_spec = at.agent_for(explore::STAGE)?;
        // Inputs are read only by a node that must be computed (a fresh node, and
        // every node in status mode, reads nothing but its manifest).
        let mut inputs = vec![("instances", &self.data), ("docs", docs)];
        if let Some(p) = prev {
            inputs.push(("previous", p));
        }
        let params = explore::ExploreParams {
            agent: agent_spec.clone(),
            system_prompt: &exp.agent_system_prompt,
            seed: at.seed,
            tool_choice: "required",
            round,
        };
        let models = cx.models;
        let has_prev = prev.is_some();
        let traj = cx.stage(
            at,
            explore::STAGE,
            explore::VERSION,
            params,
            &inputs,
            move |ctx, params| {
                let docs_rows: Vec<DocRow> = ctx.read("docs")?;
                let prev_rows: Option<Vec<TrajectoryRow>> =
                    has_prev.then(|| ctx.read("previous")).transpose()?;
                let agent = models.agent(&params.agent)?;
                explore::run(
                    ctx,
                    agent.as_ref(),
                    params,
                    self.instances()?,
                    &docs_rows,
                    prev_rows.as_deref(),
                )
            },
        )?;
        let scores = cx.stage(
            at,
            evaluate::STAGE,
            evaluate::VERSION,
            &self.eval_params,
            &[
                ("instances", &self.data),
                ("docs", docs),
                ("trajectories", &traj),
            ],
            move |ctx, _| {
                let docs_rows: Vec<DocRow> = ctx.read("docs")?;
                let traj_rows: Vec<TrajectoryRow> = ctx.read("trajectories")?;
                evaluate::run(
                    ctx,
                    self.executor()?,
                    round,
                    self.instances()?,
                    &docs_rows,
                    &traj_rows,
                )
            },
        )?;
        self.curve_start(cx, at, &scores);
        Ok((traj, scores))
    }

    fn example_params(&self) -> serde_json::Value {
        match self.b.outcome {
            // The default adds nothing to the key (stores made before the switch stay valid).
            Outcome::Grader => serde_json::Value::Null,
            Outcome::Execution => json!({"outcome": "execution"}),
        }
    }

    /// Every `evaluate` output goes to the drive's curve, in drive order: the
    /// `summarize` stage's inputs.
    fn curve_start(&self, cx: &mut Cx<'_, '_>, at: &At, scores: &Handle) {
        cx.curve(format!("{}/{}", at.tag(), at.method), at, scores);
    }

    fn examples(
        &self,
        docs: &[DocRow],
        trajectories: &Handle,
        scores: &Handle,
        guard: bool,
    ) -> Result<Vec<Example>, DriveError> {
        let questions: HashMap<&str, &str> = self
            .instances()?
            .iter()
            .map(|i| (i.instance_id.as_str(), i.question.as_str()))
            .collect();
        let traj_rows: Vec<TrajectoryRow> = trajectories.read()?;
        let score_rows: Vec<ScoreRow> = scores.read()?;
        let traj: HashMap<&str, &TrajectoryRow> = traj_rows
            .iter()
            .map(|t| (t.instance_id.as_str(), t))
            .collect();
        let score: HashMap<&str, &ScoreRow> = score_rows
            .iter()
            .map(|s| (s.instance_id.as_str(), s))
            .collect();
        Ok(docs
            .iter()
            .map(|d| {
                let id = d.instance_id.as_str();
                let question = questions.get(id).copied().unwrap_or("");
                example_for(
                    d,
                    traj.get(id).copied(),
                    score.get(id).copied(),
                    guard,
                    question,
                    self.b.outcome,
                )
            })
            .collect())
    }
}

/// What the editor sees for one instance: nothing for a frozen row, a row whose
/// agent made no call, or (with the guard) a success; a retry when the call to the
/// agent failed (nothing was observed: that is not convergence); else the example.
pub fn example_for(
    d: &DocRow,
    t: Option<&TrajectoryRow>,
    s: Option<&ScoreRow>,
    guard: bool,
    question: &str,
    outcome: Outcome,
) -> Example {
    match t {
        _ if d.frozen => Example::Converged,
        None => Example::Converged,
        Some(t) if t.calls.is_empty() && t.error_kind.is_some() => Example::Retry,
        Some(t) if t.calls.is_empty() => Example::Converged,
        Some(_) if guard && s.is_some_and(|s| s.e) => Example::Converged,
        Some(t) => Example::Show(render_example(question, t, s, outcome)),
    }
}

impl ToolRunner for Executor {
    fn run(
        &self,
        real_name: &str,
        shown_name: &str,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> ToolOutput {
        match self.execute_json(real_name, shown_name, args) {
            // What a model sees of a tool's output is bounded.
            Ok(v) => ToolOutput {
                ok: true,
                text: datasets::bfcl::executor::bounded_output(&v.repr()),
            },
            Err(e) => ToolOutput {
                ok: false,
                text: datasets::bfcl::executor::bounded_output(&e.text()),
            },
        }
    }
}

impl<'a> Bfcl<'a> {
    /// One baseline method's docs for the cell `at` (its method and editor set), then
    /// explore + evaluate them.
    fn baseline<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        at: &At,
        m: Method,
        docs0: &Handle,
    ) -> Result<(), DriveError> {
        let exp = self.exp;
        let bl = &exp.baselines;
        // The paper's +P2P cells on these two settings cover the 50 exec_multiple
        // instances only (n = 50 in Table 2).
        let only_multiple = m == Method::Play2Prompt
            && bl.play2prompt.instances == "paper"
            && matches!(at.setting.as_str(), "names" | "names+desc");
        // EasyTool and DRAFT do not depend on the agent: their node names leave it out
        // (the docs are computed once per editor and shared by every agent's chain).
        let run = baselines::BaselineStage {
            method: m,
            params: baselines::BaselineParams::new(
                m,
                bl,
                at,
                &exp.agent_system_prompt,
                &self.eval_params,
            )?,
            budgets: bl,
            instances: Box::new(move || self.instances().map(std::borrow::Cow::Borrowed)),
            docs: Box::new(move |ctx| {
                let mut docs_rows: Vec<DocRow> = ctx.read("docs")?;
                if only_multiple {
                    let multiple: std::collections::HashSet<&str> = self
                        .instances()?
                        .iter()
                        .filter(|i| i.category == "exec_multiple")
                        .map(|i| i.instance_id.as_str())
                        .collect();
                    docs_rows.retain(|d| multiple.contains(d.instance_id.as_str()));
                }
                Ok(docs_rows)
            }),
            // Trace-Free+'s tool play (trace-based) executes each tool with arguments
            // its editor proposes from the tool's docs alone: the instance's question
            // and gold answer never reach it.
            runner: Box::new(move || Ok(Box::new(self.executor()?) as Box<dyn ToolRunner + 'p>)),
            // No training split: an external method's `play` is unsupported here.
            player: Box::new(|| Ok(None)),
        };
        let inputs = vec![("instances", &self.data), ("docs", docs0)];
        let docs = baselines::stage(cx, at, run, &inputs)?;
        self.explore_eval(cx, &at.play(None, 0), &docs, None)?;
        Ok(())
    }

    fn has(&self, m: &str) -> bool {
        self.b.methods.iter().any(|x| x.as_str() == m)
    }

    /// One setting of one chain (`chain`: its agent and seed): its opacified docs,
    /// then gold, or Base round 0 followed by the ToolObserver curves and the
    /// baselines (independent of each other: in a run they go on concurrently).
    fn setting<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        chain: &At,
        setting: &'p str,
    ) -> Result<(), DriveError> {
        let (exp, b) = (self.exp, self.b);
        let base = At {
            setting: setting.to_string(),
            ..chain.with_method("base")
        };
        let opacified = At {
            agent: None,
            ..base.clone()
        };
        let docs0 = cx.stage(
            &opacified,
            opacify::STAGE,
            opacify::VERSION,
            OpacifyParams { setting },
            &[("instances", &self.data)],
            move |ctx, _| opacify::run(ctx, setting, self.instances()?),
        )?;
        if setting == "gold" {
            self.explore_eval(cx, &base.with_method("gold").play(None, 0), &docs0, None)?;
            return Ok(());
        }
        // Base round 0: Base itself and the start of every ToolObserver curve.
        if self.has("base") || self.has("toolobserver") {
            let r0 = self.explore_eval(cx, &base.play(None, 0), &docs0, None)?;
            if self.has("toolobserver") {
                // With the guard enabled both variants run (the paper's first).
                let guards: &[bool] = if b.reflect_skip_success {
                    &[false, true]
                } else {
                    &[false]
                };
                for editor in &exp.editors {
                    for &guard in guards {
                        let method = if guard {
                            "toolobserver-guard"
                        } else {
                            "toolobserver"
                        };
                        let at = base.with_method(method).with_editor(editor);
                        online::toolobserver(self, cx, &at, self.curve(guard), &docs0, r0.clone())?;
                    }
                }
            }
        }
        let external = b
            .methods
            .iter()
            .copied()
            .filter(|m| m.external_name().is_some());
        for m in BASELINES
            .iter()
            .filter_map(|m| Method::parse(m))
            .chain(external)
        {
            if !b.methods.contains(&m) {
                continue;
            }
            for editor in &exp.editors {
                let at = base.with_method(m.as_str()).with_editor(editor);
                self.baseline(cx, &at, m, &docs0)?;
            }
        }
        Ok(())
    }
}

/// What executes calls, as every stage that executes them is keyed: the backend
/// and, for `recorded`, the frozen responses' sha256.
#[derive(serde::Serialize)]
struct ExecutorKey<'a> {
    backend: &'a str,
    recorded: Option<String>,
}

/// `opacify`'s params.
#[derive(serde::Serialize)]
struct OpacifyParams<'a> {
    setting: &'a str,
}

/// `summarize`'s params: the bootstrap settings and the labels of its inputs.
#[derive(serde::Serialize)]
struct SummarizeParams<B: serde::Serialize> {
    bootstrap: B,
    inputs: Vec<String>,
    /// Each input's place in the grid as its rows name it (setting, method, agent,
    /// editor, round): the rows carry it, so the key must (two agents whose
    /// evaluations came out byte for byte the same got one summary, labelled with
    /// the first one's agent).
    grid: Vec<[String; 5]>,
}

/// Expand the `[bfcl]` grid into stage calls.
pub fn drive<'p>(
    exp: &'p Experiment,
    b: &'p BfclExperiment,
    cx: &mut Cx<'p, '_>,
) -> Result<(), DriveError> {
    let root = cx.session.store().root().to_path_buf();
    let cache = root.join("cache").join("bfcl");
    let data = cx.stage_named(
        "bfcl-data",
        bfcl_data::STAGE,
        bfcl_data::VERSION,
        bfcl_data::params(&b.data, b.subset)?,
        &[],
        move |ctx, _| bfcl_data::run(ctx, &b.data, b.subset, &cache),
    )?;
    cx.push("bfcl-data", bfcl_data::STAGE, &data);
    let eval_params = serde_json::to_value(ExecutorKey {
        backend: &b.backend,
        // The frozen responses' digest is part of every executing stage's key: a file
        // that cannot be read fails here (preflight parsed it; it changed since), never
        // an empty digest in a key.
        recorded: match (&b.recorded, b.backend.as_str()) {
            (Some(p), "recorded") => {
                Some(pipeline::Digest::of_file(p).map(|d| d.0).map_err(|e| {
                    StageError::user(
                        evaluate::STAGE,
                        format!("bfcl.recorded {}: {e}", p.display()),
                    )
                })?)
            }
            _ => None,
        },
    })
    .map_err(|e| StageError::bug("evaluate", e))?;
    let env = Bfcl {
        exp,
        b,
        executor: BuildOnce::default(),
        data,
        instances: BuildOnce::default(),
        eval_params,
    };
    let has = |m: &str| b.methods.iter().any(|x| x.as_str() == m);
    let mut settings: Vec<&str> = Vec::new();
    if has("gold") {
        settings.push("gold");
    }
    settings.extend(b.settings.iter().map(|s| s.as_str()));
    let curve_from = cx.mark();
    let shown = Shown {
        seed: b.seeds.len() > 1,
        agent: exp.agents.len() > 1,
        editor: exp.editors.len() > 1,
    };
    // Every chain's nodes go to one plan: independent ones run concurrently.
    cx.scope(|cx| {
        for &seed in &b.seeds {
            for agent_spec in &exp.agents {
                let chain = At {
                    naming: Naming::Online,
                    agent: Some(agent_spec.clone()),
                    seed,
                    shown,
                    ..At::default()
                };
                for &setting in &settings {
                    env.setting(cx, &chain, setting)?;
                }
            }
        }
        Ok(())
    })?;
    let curve = cx.out.curve_since(&curve_from);
    let summary = SummaryInput::from_curve(&curve);
    if !summary.is_empty() {
        let inputs: Vec<(&str, &Handle)> = summary
            .iter()
            .map(|i| (i.label.as_str(), &i.entry))
            .collect();
        let labels: Vec<String> = summary.iter().map(|i| i.label.clone()).collect();
        let out = cx.stage_named(
            "summarize",
            summarize::STAGE,
            summarize::VERSION,
            SummarizeParams {
                bootstrap: summarize::BOOTSTRAP,
                inputs: labels,
                grid: summary.iter().map(SummaryInput::grid).collect(),
            },
            &inputs,
            {
                let summary = summary.clone();
                move |ctx, _| summarize::run(ctx, &summary)
            },
        )?;
        cx.push("summarize", summarize::STAGE, &out);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rows::CallRecord;

    fn doc() -> DocRow {
        DocRow {
            instance_id: "i".into(),
            setting: "names".into(),
            round: 0,
            tools: json!([]),
            name_mapping: json!([]),
            changed: true,
            frozen: false,
            demos: serde_json::Value::Null,
        }
    }

    fn traj(calls: usize, error: Option<&str>) -> TrajectoryRow {
        TrajectoryRow {
            instance_id: "i".into(),
            round: 0,
            model: "m".into(),
            calls: (0..calls)
                .map(|_| CallRecord {
                    function: "function_1".into(),
                    args: json!({}),
                    raw: None,
                })
                .collect(),
            content: None,
            error_kind: error.map(str::to_string),
            error: error.map(str::to_string),
            prompt_tokens: 0,
            completion_tokens: 0,
            reasoning_tokens: 0,
            latency_ms: 0,
            reused: false,
        }
    }

    #[test]
    fn a_failed_agent_call_is_retried_not_frozen() {
        let d = doc();
        assert_eq!(
            example_for(
                &d,
                Some(&traj(0, Some("transient"))),
                None,
                false,
                "q",
                Outcome::Grader
            ),
            Example::Retry
        );
        assert_eq!(
            example_for(&d, Some(&traj(0, None)), None, false, "q", Outcome::Grader),
            Example::Converged
        );
        assert!(matches!(
            example_for(&d, Some(&traj(1, None)), None, false, "q", Outcome::Grader),
            Example::Show(t) if t.contains("function_1()")
        ));
        let frozen = DocRow {
            frozen: true,
            ..doc()
        };
        assert_eq!(
            example_for(
                &frozen,
                Some(&traj(0, Some("transient"))),
                None,
                false,
                "q",
                Outcome::Grader
            ),
            Example::Converged
        );
    }

    #[test]
    fn the_execution_outcome_hides_the_verdict() {
        let score = ScoreRow {
            instance_id: "i".into(),
            category: "exec_simple".into(),
            round: 0,
            e: true,
            e_reason: String::new(),
            p: 1.0,
            a: 1.0,
            a_corrected: 1.0,
            outputs: json!([]),
            outcome: "SUCCESS: 4.4".into(),
            error_kind: None,
        };
        let t = traj(1, None);
        let g = render_example("q", &t, Some(&score), Outcome::Grader);
        assert!(g.ends_with("Outcome: SUCCESS: 4.4"), "{g}");
        let x = render_example("q", &t, Some(&score), Outcome::Execution);
        assert!(x.ends_with("Outcome: Model output: 4.4"), "{x}");
        let err = ScoreRow {
            outcome: "ERROR: TypeError: x".into(),
            ..score
        };
        let x = render_example("q", &t, Some(&err), Outcome::Execution);
        assert!(x.ends_with("Outcome: ERROR: TypeError: x"), "{x}");
    }
}
