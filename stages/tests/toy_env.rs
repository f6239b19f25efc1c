//! A toy third environment, written only against the environment seam (no BFCL
//! code): two tools, `tool_a` answers "A" and `tool_b` answers "B"; a question is
//! solved when the agent calls `tool_b`. The agent picks the tool whose description
//! mentions "B"; the editor learns that from what it is shown. It runs through the
//! online loop, the offline loop (batch-reflect + consensus-merge) and a table, and
//! -- as `[toy]`, an environment of the registry: its own code plus one `with` --
//! through `otb`'s code paths: parse, plan, run, status, export and a table.

use pipeline::{Handle, Mode, Row, Session, StageError, Store};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use stages::env::{
    At, Cx, DriveError, Example, Method, Naming, OfflineEnv, OnlineEnv, Output, Play, Recorder,
    RunOutput, Split, SHARED,
};
use stages::experiment::{EnvTable, Environment, Experiment};
use stages::models::{
    Agent, AgentJob, AgentTurn, CallFailure, Editor, EditorReply, ModelSpec, Models, MultiTurn,
};
use stages::offline::{self, AnalysisRow, MergeRow, OfflineCurve};
use stages::online::{self, Curve};
use stages::reading::{self, Along, Block, Cap, Computed, Item, Reading, SftPair};
use stages::rows::Exported;
use stages::rows::{CallRecord, DocRow, EditRow};
use stages::tables::report::TableReport;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(table = "toy_trajectories", doc = "one toy episode")]
struct ToyTrajectory {
    /// Question.
    instance_id: String,
    /// Round.
    round: i64,
    /// Tool called.
    tool: Option<String>,
    /// Tool output.
    answer: Option<String>,
    /// Failed agent call.
    error_kind: Option<String>,
}

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(table = "toy_scores", doc = "one toy verdict")]
struct ToyScore {
    /// Question.
    instance_id: String,
    /// Round.
    round: i64,
    /// `tool_b` was called.
    solved: bool,
}

fn tools(a: &str, b: &str) -> Value {
    json!([
        {"name": "tool_a", "description": a, "parameters": {"type": "object", "properties": {}}},
        {"name": "tool_b", "description": b, "parameters": {"type": "object", "properties": {}}},
    ])
}

fn doc(id: &str) -> DocRow {
    DocRow {
        instance_id: id.into(),
        setting: "toy".into(),
        round: 0,
        tools: tools("", ""),
        name_mapping: json!([]),
        changed: true,
        frozen: false,
        demos: Value::Null,
    }
}

/// Picks the tool whose description mentions "B", else the first one; fails (as an
/// infrastructure error would) on the questions listed in `fail` the first time.
struct PickB {
    fail: Mutex<Vec<String>>,
    calls: AtomicUsize,
}

impl Agent for PickB {
    fn act(&self, job: &AgentJob<'_>) -> AgentTurn {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut f) = self.fail.lock() {
            if let Some(i) = f.iter().position(|q| q == job.question) {
                f.remove(i);
                return AgentTurn {
                    error: Some(CallFailure {
                        kind: "malformed".into(),
                        message: "unparsable tool call".into(),
                        infrastructure: false,
                    }),
                    ..Default::default()
                };
            }
        }
        let pick = job
            .tools
            .iter()
            .find(|t| t["description"].as_str().is_some_and(|d| d.contains('B')))
            .or(job.tools.first());
        AgentTurn {
            calls: pick
                .and_then(|t| t["name"].as_str())
                .map(|n| CallRecord {
                    function: n.into(),
                    args: json!({}),
                    raw: None,
                })
                .into_iter()
                .collect(),
            ..Default::default()
        }
    }
}

impl MultiTurn for PickB {}

/// Online: reads `called tool_a, got A` and documents both tools. Offline: batch
/// analyses propose both tools; the merge reply names only `tool_a`, so `tool_b`
/// falls back to the batches' majority. Fails the first online request if asked.
struct Teacher {
    fail_first: Mutex<bool>,
    prompts: Mutex<Vec<String>>,
}

impl Editor for Teacher {
    fn complete(&self, prompt: &str, _seed: u64) -> EditorReply {
        if let Ok(mut p) = self.prompts.lock() {
            p.push(prompt.to_string());
        }
        if let Ok(mut f) = self.fail_first.lock() {
            if *f {
                *f = false;
                return EditorReply {
                    error: Some(CallFailure {
                        kind: "malformed".into(),
                        message: "unparsable tool call".into(),
                        infrastructure: false,
                    }),
                    ..Default::default()
                };
            }
        }
        let text = if prompt.starts_with("MERGE") {
            "**Tool: tool_a**\nFinal description: Answers A.".to_string()
        } else if prompt.starts_with("BATCH") {
            "**Tool: tool_a**\nUpdated description: Answers A.\n**Tool: tool_b**\nUpdated description: Answers B.".to_string()
        } else if prompt.contains("got A") {
            "FUNCTION: tool_b\nDESCRIPTION: Answers B.".to_string()
        } else {
            String::new()
        };
        EditorReply {
            text: Some(text),
            // `BATCH CUT`: the reply stopped at its token limit.
            cut: prompt.starts_with("BATCH CUT"),
            ..Default::default()
        }
    }
}

struct Toy {
    questions: Vec<String>,
}

impl Toy {
    fn explore_rows<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        at: &At,
        docs: &Handle,
        ids: &'p [String],
    ) -> Result<Handle, DriveError> {
        let models = cx.models;
        let agent_spec = at.agent.clone().expect("a play step has an agent");
        let (seed, round) = (at.seed, at.round);
        cx.stage(
            at,
            "toy-explore",
            1,
            json!({"agent": agent_spec, "ids": ids}),
            &[("docs", docs)],
            move |ctx, _| {
                let rows: Vec<DocRow> = ctx.read("docs")?;
                let agent = models.agent(&agent_spec)?;
                let mut out = Vec::new();
                for id in ids {
                    let d = rows
                        .iter()
                        .find(|d| d.instance_id == *id || d.instance_id == SHARED)
                        .ok_or_else(|| StageError::bug("toy-explore", "no docs"))?;
                    let tools = d.tools.as_array().cloned().unwrap_or_default();
                    let t = agent.act(&AgentJob {
                        system: "",
                        question: id,
                        tools: &tools,
                        seed,
                    });
                    let tool = t.calls.first().map(|c| c.function.clone());
                    out.push(ToyTrajectory {
                        instance_id: id.clone(),
                        round,
                        answer: tool
                            .as_deref()
                            .map(|n| n.trim_start_matches("tool_").to_uppercase()),
                        tool,
                        error_kind: t.error.map(|e| e.kind),
                    });
                }
                ctx.write(&out)?;
                Ok(())
            },
        )
    }

    fn score(&self, cx: &mut Cx<'_, '_>, at: &At, traj: &Handle) -> Result<Handle, DriveError> {
        cx.stage(
            at,
            "toy-evaluate",
            1,
            json!({}),
            &[("trajectories", traj)],
            |ctx, _| {
                let rows: Vec<ToyTrajectory> = ctx.read("trajectories")?;
                let out: Vec<ToyScore> = rows
                    .iter()
                    .map(|t| ToyScore {
                        instance_id: t.instance_id.clone(),
                        round: t.round,
                        solved: t.tool.as_deref() == Some("tool_b"),
                    })
                    .collect();
                ctx.write(&out)?;
                Ok(())
            },
        )
    }
}

impl OnlineEnv for Toy {
    fn explore_eval<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        at: &At,
        docs: &Handle,
        _prev: Option<&Handle>,
    ) -> Result<(Handle, Handle), DriveError> {
        let t = self.explore_rows(cx, at, docs, &self.questions)?;
        let s = self.score(cx, at, &t)?;
        Ok((t, s))
    }

    fn curve_start(&self, _cx: &mut Cx<'_, '_>, _at: &At, _scores: &Handle) {}

    fn examples(
        &self,
        docs: &[DocRow],
        trajectories: &Handle,
        _scores: &Handle,
        _guard: bool,
    ) -> Result<Vec<Example>, DriveError> {
        let t: Vec<ToyTrajectory> = trajectories.read()?;
        Ok(docs
            .iter()
            .map(
                |d| match t.iter().find(|t| t.instance_id == d.instance_id) {
                    _ if d.frozen => Example::Converged,
                    Some(t) if t.error_kind.is_some() => Example::Retry,
                    Some(t) => Example::Show(format!(
                        "called {}, got {}",
                        t.tool.as_deref().unwrap_or("nothing"),
                        t.answer.as_deref().unwrap_or("nothing")
                    )),
                    None => Example::Converged,
                },
            )
            .collect())
    }
}

impl OfflineEnv for Toy {
    fn explore<'p>(&'p self, cx: &mut Cx<'p, '_>, play: &Play<'_>) -> Result<Handle, DriveError> {
        // Train: the first 3 questions; test: the rest.
        let at = play.at;
        let ids = match at.split() {
            Some(Split::Train) => &self.questions[..3],
            _ => &self.questions[3..],
        };
        self.explore_rows(cx, at, play.docs, ids)
    }

    fn serialize(&self, trajectories: &Handle) -> Result<Vec<String>, DriveError> {
        let t: Vec<ToyTrajectory> = trajectories.read()?;
        Ok(t.iter()
            .map(|t| format!("{}: called {:?}", t.instance_id, t.tool))
            .collect())
    }

    fn editor_notes(&self) -> &str {
        "tool_b is the right answer"
    }

    fn evaluate(
        &self,
        cx: &mut Cx<'_, '_>,
        play: &Play<'_>,
        trajectories: &Handle,
    ) -> Result<Handle, DriveError> {
        self.score(cx, play.at, trajectories)
    }
}

/// A table over the toy's score outputs: solved share per node.
struct ToyTable {
    rows: Vec<ToyScore>,
    lines: Vec<(String, f64)>,
}

impl TableReport for ToyTable {
    type Row = ToyScore;
    const NAME: &'static str = "toy";
    fn render(&self, _csv: bool) -> String {
        let mut s = String::from("node,solved\n");
        for (n, v) in &self.lines {
            s.push_str(&format!("{n},{v:.2}\n"));
        }
        s
    }
    fn rows(&self) -> &[ToyScore] {
        &self.rows
    }
}

fn table(out: &RunOutput) -> ToyTable {
    let mut rows = Vec::new();
    let mut lines = Vec::new();
    for o in out.by_stage("toy-evaluate") {
        let r: Vec<ToyScore> = o.entry.read().unwrap();
        let share = r.iter().filter(|s| s.solved).count() as f64 / r.len().max(1) as f64;
        lines.push((o.node.clone(), share));
        rows.extend(r);
    }
    ToyTable { rows, lines }
}

fn spec(s: &str) -> ModelSpec {
    ModelSpec::parse(s).unwrap()
}

/// The toy's scripted agent (failing first on the questions `fail_agent`) and editor
/// (failing its first request if `fail_editor`).
fn scripted(fail_agent: &[&str], fail_editor: bool) -> (Arc<PickB>, Arc<Teacher>) {
    let agent = Arc::new(PickB {
        fail: Mutex::new(fail_agent.iter().map(|s| s.to_string()).collect()),
        calls: AtomicUsize::new(0),
    });
    let editor = Arc::new(Teacher {
        fail_first: Mutex::new(fail_editor),
        prompts: Mutex::new(Vec::new()),
    });
    (agent, editor)
}

fn models(
    dir: &std::path::Path,
    fail_agent: &[&str],
    fail_editor: bool,
) -> (Models, Arc<PickB>, Arc<Teacher>) {
    let (agent, editor) = scripted(fail_agent, fail_editor);
    let m = Models::new(&dir.join("llm"), &dir.join("embed"))
        .with_agent(spec("scripted:toy"), agent.clone())
        .with_editor(spec("scripted:teacher"), editor.clone());
    (m, agent, editor)
}

/// The round-0 docs of the online loop (one row per question).
fn seed_docs(s: &Session<'_>, ids: &[String], shared: bool) -> Handle {
    let rows: Vec<DocRow> = if shared {
        vec![doc(SHARED)]
    } else {
        ids.iter().map(|i| doc(i)).collect()
    };
    s.stage(
        "toy-docs",
        "toy-docs",
        1,
        json!({"shared": shared, "ids": ids}),
        &[],
        |ctx| {
            ctx.write(&rows)?;
            Ok(())
        },
    )
    .unwrap()
}

fn online_run(store: &Store, models: &Models, toy: &Toy, rounds: u32) -> (RunOutput, usize) {
    let s = Session::new(store, Mode::Run, true);
    let docs0 = seed_docs(&s, &toy.questions, false);
    let out = Recorder::default();
    let chain = At {
        agent: Some(spec("scripted:toy")),
        ..At::new(Naming::Online, "toy", "base")
    };
    let mut cx = Cx::new(&s, models, &out);
    let r0 = toy
        .explore_eval(&mut cx, &chain.play(None, 0), &docs0, None)
        .unwrap();
    let curve = Curve {
        template: "{{tools}}\n{{example}}",
        rounds,
        guard: false,
    };
    let at = chain
        .with_method("toolobserver")
        .with_editor(&spec("scripted:teacher"));
    online::toolobserver(toy, &mut cx, &at, curve, &docs0, r0).unwrap();
    let ran = s.executed();
    drop(cx);
    (out.finish(), ran)
}

fn last_docs(out: &RunOutput, stage: &str) -> Vec<DocRow> {
    out.by_stage(stage).last().unwrap().entry.read().unwrap()
}

#[test]
fn toy_environment_runs_the_online_loop_and_a_table() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store"), pipeline::Access::ReadWrite).unwrap();
    let toy = Toy {
        questions: vec!["q1".into(), "q2".into()],
    };
    let (m, agent, _) = models(dir.path(), &[], false);
    let (out, _) = online_run(&store, &m, &toy, 10);
    // r0: tool_a (nothing mentions B); r1: tool_b after the editor's rewrite; r2: the
    // editor proposes nothing new -> every instance frozen -> stop before K.
    let reflects: Vec<_> = out.by_stage("batch-reflect").collect();
    assert_eq!(
        reflects.len(),
        2,
        "{:?}",
        reflects.iter().map(|o| &o.node).collect::<Vec<_>>()
    );
    assert!(last_docs(&out, "batch-reflect").iter().all(|d| d.frozen));
    let t = table(&out);
    assert_eq!(
        t.render(false),
        "node,solved\ntoy-evaluate[toy r0],0.00\ntoy-evaluate[toy r1],1.00\n"
    );
    assert_eq!(t.rows().len(), 4);
    assert_eq!(agent.calls.load(Ordering::SeqCst), 4);
    // A rerun is answered from the store: no stage runs, no model is called.
    let (m2, agent2, editor2) = models(dir.path(), &[], false);
    let (_, ran) = online_run(&store, &m2, &toy, 10);
    assert_eq!(ran, 0);
    assert_eq!(agent2.calls.load(Ordering::SeqCst), 0);
    assert!(editor2.prompts.lock().unwrap().is_empty());
}

#[test]
fn failed_agent_and_editor_calls_keep_instances_live() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store"), pipeline::Access::ReadWrite).unwrap();
    let toy = Toy {
        questions: vec!["q1".into(), "q2".into()],
    };
    // q2's first agent call fails; the editor's first request fails.
    let (m, _, editor) = models(dir.path(), &["q2"], true);
    let (out, _) = online_run(&store, &m, &toy, 10);
    let reflects: Vec<_> = out.by_stage("batch-reflect").collect();
    let r1: Vec<DocRow> = reflects[0].entry.read().unwrap();
    let edits1: Vec<EditRow> = reflects[0].entry.read().unwrap();
    // q1: the editor call failed -> not frozen; q2: the agent call failed -> not sent,
    // not frozen. Before the fix both froze and the loop stopped after round 1.
    assert!(r1.iter().all(|d| !d.frozen && !d.changed), "{r1:?}");
    assert_eq!(edits1.iter().filter(|e| e.sent).count(), 1);
    assert!(
        reflects.len() >= 3,
        "the loop went on while instances were live"
    );
    let last = last_docs(&out, "batch-reflect");
    assert!(last.iter().all(|d| d.frozen));
    let t = table(&out);
    let finals: Vec<f64> = t.lines.iter().map(|(_, v)| *v).collect();
    assert_eq!(finals.last(), Some(&1.0), "{:?}", t.lines);
    assert!(editor.prompts.lock().unwrap().len() >= 3);
}

/// The rows of the first output of `stage`.
fn first_rows<R: Row + serde::de::DeserializeOwned>(out: &RunOutput, stage: &str) -> Vec<R> {
    out.by_stage(stage).next().unwrap().entry.read().unwrap()
}

/// One offline ToolObserver curve of the toy (6 questions: 3 to train on, 3 to test)
/// with `batch_template` and `rounds` rounds: its outputs and how many stages ran.
fn offline_run(store: &Store, m: &Models, batch_template: &str, rounds: u32) -> (RunOutput, usize) {
    let toy = Toy {
        questions: (1..=6).map(|i| format!("q{i}")).collect(),
    };
    let sampling = Default::default();
    let s = Session::new(store, Mode::Run, true);
    let docs0 = seed_docs(&s, &[], true);
    let out = Recorder::default();
    let at = At {
        agent: Some(spec("scripted:toy")),
        editor: Some(spec("scripted:teacher")),
        ..At::new(Naming::Offline, "toy", "toolobserver")
    };
    let mut cx = Cx::new(&s, m, &out);
    let curve = OfflineCurve {
        batch_template,
        merge_template: "MERGE {{notes}}\n{{tools}}\n{{analyses}}",
        rounds,
        batch_size: 2,
        sampling: &sampling,
    };
    offline::toolobserver(&toy, &mut cx, &at, &curve, &docs0).unwrap();
    let ran = s.executed();
    drop(cx);
    (out.finish(), ran)
}

#[test]
fn toy_environment_runs_the_offline_loop() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store"), pipeline::Access::ReadWrite).unwrap();
    let (m, agent, editor) = models(dir.path(), &[], false);
    let run = |m: &Models, batch_template: &str| offline_run(&store, m, batch_template, 2);
    let batch = "BATCH {{notes}}\n{{tools}}\n{{trajectories}}";
    let (out, _) = run(&m, batch);
    // 3 training trajectories in batches of 2: every trajectory exactly once.
    let analyses: Vec<AnalysisRow> = first_rows(&out, "batch-reflect");
    assert_eq!(
        analyses
            .iter()
            .map(|a| a.trajectories.clone())
            .collect::<Vec<_>>(),
        vec![vec![0, 1], vec![2]]
    );
    // The merge omitted tool_b: the batches' majority is used.
    let merge: Vec<MergeRow> = first_rows(&out, "consensus-merge");
    assert_eq!(
        merge
            .iter()
            .map(|m| (m.tool.as_str(), m.source.as_str(), m.description.as_str()))
            .collect::<Vec<_>>(),
        vec![
            ("tool_a", "merge", "Answers A."),
            ("tool_b", "majority", "Answers B.")
        ]
    );
    // Round 2 explored with the merged docs, and the test split solves every question.
    let t = table(&out);
    assert_eq!(t.lines.last().map(|l| l.1), Some(1.0), "{:?}", t.lines);
    let prompts = editor.prompts.lock().unwrap().clone();
    assert_eq!(prompts.iter().filter(|p| p.starts_with("BATCH")).count(), 4);
    assert_eq!(prompts.iter().filter(|p| p.starts_with("MERGE")).count(), 2);
    assert!(prompts[0].contains("tool_b is the right answer"));
    let calls = agent.calls.load(Ordering::SeqCst);
    assert_eq!(calls, 3 + 3 + 3);
    // A changed batch prompt reruns only the batch-reflect rounds; their replies are
    // the same here, so the outputs are byte-identical and nothing downstream reruns
    // (early cutoff): no exploration, no merge, no agent call.
    let (m2, agent2, _) = models(dir.path(), &[], false);
    let (_, ran) = run(&m2, "BATCH v2 {{notes}}\n{{tools}}\n{{trajectories}}");
    assert_eq!(ran, 2);
    assert_eq!(agent2.calls.load(Ordering::SeqCst), 0);
    // And a finished run replays with no model call.
    let (m3, agent3, editor3) = models(dir.path(), &[], false);
    let (_, ran) = run(&m3, batch);
    assert_eq!(ran, 0);
    assert_eq!(agent3.calls.load(Ordering::SeqCst), 0);
    assert!(editor3.prompts.lock().unwrap().is_empty());
}

/// An editor reply cut at its token limit: the description it was writing last
/// (`tool_b`'s) is incomplete, so it is not proposed, and the row says why.
#[test]
fn a_cut_reply_loses_its_last_description() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store"), pipeline::Access::ReadWrite).unwrap();
    let (m, _, _) = models(dir.path(), &[], false);
    let (out, _) = offline_run(
        &store,
        &m,
        "BATCH CUT {{notes}}\n{{tools}}\n{{trajectories}}",
        1,
    );
    let analyses: Vec<AnalysisRow> = first_rows(&out, "batch-reflect");
    for a in &analyses {
        assert_eq!(a.proposals, json!({"tool_a": "Answers A."}));
        assert_eq!(a.error_kind.as_deref(), Some(offline::CUT_REPLY));
    }
    let merge: Vec<MergeRow> = first_rows(&out, "consensus-merge");
    assert_eq!(merge[1].tool, "tool_b");
    assert_eq!(merge[1].source, "unchanged");
}

/// The toy with a grading node of its own over each training play (`toy-grade`, one
/// verdict per trajectory), as search grades with its judge.
struct GradedToy(Toy);

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(table = "toy_grades", doc = "one toy grade")]
struct ToyGrade {
    /// Question.
    instance_id: String,
    /// The grade as the editor reads it.
    text: String,
}

impl OfflineEnv for GradedToy {
    fn explore<'p>(&'p self, cx: &mut Cx<'p, '_>, play: &Play<'_>) -> Result<Handle, DriveError> {
        self.0.explore(cx, play)
    }

    fn serialize(&self, trajectories: &Handle) -> Result<Vec<String>, DriveError> {
        self.0.serialize(trajectories)
    }

    fn grade<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        play: &Play<'_>,
        trajectories: &Handle,
    ) -> Result<Option<Handle>, DriveError> {
        let h = cx.stage(
            play.at,
            "toy-grade",
            1,
            json!({"grader": "tool_b"}),
            &[("trajectories", trajectories)],
            |ctx, _| {
                let rows: Vec<ToyTrajectory> = ctx.read("trajectories")?;
                let out: Vec<ToyGrade> = rows
                    .iter()
                    .map(|t| ToyGrade {
                        instance_id: t.instance_id.clone(),
                        text: format!(
                            "{}: graded {}",
                            t.instance_id,
                            if t.tool.as_deref() == Some("tool_b") {
                                "right"
                            } else {
                                "wrong"
                            }
                        ),
                    })
                    .collect();
                ctx.write(&out)?;
                Ok(())
            },
        )?;
        Ok(Some(h))
    }

    fn serialize_graded(&self, graded: &Handle) -> Result<Vec<String>, DriveError> {
        let g: Vec<ToyGrade> = graded.read()?;
        Ok(g.into_iter().map(|g| g.text).collect())
    }

    fn editor_notes(&self) -> &str {
        self.0.editor_notes()
    }

    fn evaluate<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        play: &Play<'_>,
        trajectories: &Handle,
    ) -> Result<Handle, DriveError> {
        self.0.evaluate(cx, play, trajectories)
    }
}

/// An environment that grades its training plays (`OfflineEnv::grade`, as search's
/// judge does): the grading is a node of its own at the training play's cell, with
/// its own key, and batch-reflect's input is that node, read through
/// `serialize_graded` (the editor sees the grades, not the bare trajectories).
#[test]
fn a_grading_node_is_what_batch_reflect_reads() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store"), pipeline::Access::ReadWrite).unwrap();
    let (m, _, editor) = models(dir.path(), &[], false);
    let toy = GradedToy(Toy {
        questions: (1..=6).map(|i| format!("q{i}")).collect(),
    });
    let sampling = Default::default();
    let s = Session::new(&store, Mode::Run, true);
    let docs0 = seed_docs(&s, &[], true);
    let rec = Recorder::default();
    let at = At {
        agent: Some(spec("scripted:toy")),
        editor: Some(spec("scripted:teacher")),
        ..At::new(Naming::Offline, "toy", "toolobserver")
    };
    let mut cx = Cx::new(&s, &m, &rec);
    let curve = OfflineCurve {
        batch_template: "BATCH {{notes}}\n{{tools}}\n{{trajectories}}",
        merge_template: "MERGE {{notes}}\n{{tools}}\n{{analyses}}",
        rounds: 2,
        batch_size: 2,
        sampling: &sampling,
    };
    offline::toolobserver(&toy, &mut cx, &at, &curve, &docs0).unwrap();
    drop(cx);
    let out = rec.finish();
    let train =
        |o: &&Output, round: i64| o.cell.split() == Some(Split::Train) && o.cell.round == round;
    // One grading node per training play (rounds 0 and 1), none on the test split.
    assert_eq!(out.by_stage("toy-grade").count(), 2);
    assert!(out
        .by_stage("toy-grade")
        .all(|o| o.cell.split() == Some(Split::Train)));
    for round in 0..2 {
        let explore = out
            .by_stage("toy-explore")
            .find(|o| train(o, round))
            .expect("a training play");
        let grade = out
            .by_stage("toy-grade")
            .find(|o| train(o, round))
            .expect("its grading node");
        assert_eq!(grade.cell, explore.cell);
        assert_ne!(grade.entry.manifest.key, explore.entry.manifest.key);
        assert_eq!(
            grade.entry.manifest.components.inputs["trajectories"],
            explore.entry.manifest.output_digest
        );
        let reflect = out
            .by_stage("batch-reflect")
            .find(|o| o.cell.round == round + 1)
            .expect("the round's batch-reflect");
        assert_eq!(
            reflect.entry.manifest.components.inputs["trajectories"],
            grade.entry.manifest.output_digest
        );
    }
    // The editor read the grades (serialize_graded), not the trajectories.
    let prompts = editor.prompts.lock().unwrap().clone();
    let batches: Vec<&String> = prompts.iter().filter(|p| p.starts_with("BATCH")).collect();
    assert_eq!(batches.len(), 4);
    assert!(
        batches.iter().all(|p| p.contains(": graded ")),
        "{batches:?}"
    );
    assert!(
        batches.iter().all(|p| !p.contains(": called ")),
        "{batches:?}"
    );
}

/// `otb status` before an offline curve has started: its first agent turns would run,
/// and every later node of its K rounds and of the test split is listed, each once,
/// waiting for the node before it (offline curves run all K rounds).
#[test]
fn status_lists_every_later_node_of_an_offline_curve() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store"), pipeline::Access::ReadWrite).unwrap();
    let toy = Toy {
        questions: (1..=6).map(|i| format!("q{i}")).collect(),
    };
    let (m, _, _) = models(dir.path(), &[], false);
    let docs0 = seed_docs(&Session::new(&store, Mode::Run, true), &[], true);
    let s = Session::new(&store, Mode::Status, true);
    let out = Recorder::default();
    let at = At {
        agent: Some(spec("scripted:toy")),
        editor: Some(spec("scripted:teacher")),
        ..At::new(Naming::Offline, "toy", "toolobserver")
    };
    let sampling = Default::default();
    let curve = OfflineCurve {
        batch_template: "BATCH {{notes}}\n{{tools}}\n{{trajectories}}",
        merge_template: "MERGE {{notes}}\n{{tools}}\n{{analyses}}",
        rounds: 2,
        batch_size: 2,
        sampling: &sampling,
    };
    let mut cx = Cx::new(&s, &m, &out);
    let (traj, scores) = offline::toolobserver(&toy, &mut cx, &at, &curve, &docs0).unwrap();
    assert!(traj.entry().is_none() && scores.entry().is_none());
    let nodes = |blocked: bool| -> Vec<String> {
        s.reports()
            .iter()
            .filter(|r| matches!(r.state, pipeline::NodeState::Blocked { .. }) == blocked)
            .map(|r| r.node.clone())
            .collect()
    };
    assert_eq!(nodes(false), ["toy-explore[toy toolobserver train r0]"]);
    // Each waits for the node before it: its edges are the curve's.
    let inputs: Vec<Vec<(String, String)>> = s.reports().into_iter().map(|r| r.inputs).collect();
    assert_eq!(
        inputs[1],
        [
            ("docs".to_string(), "toy-docs".to_string()),
            (
                "trajectories".to_string(),
                "toy-explore[toy toolobserver train r0]".to_string()
            )
        ]
    );
    assert_eq!(
        nodes(true),
        [
            "batch-reflect[toy r1]",
            "consensus-merge[toy r1]",
            "toy-explore[toy toolobserver train r1]",
            "batch-reflect[toy r2]",
            "consensus-merge[toy r2]",
            "toy-explore[toy toolobserver test]",
            "toy-evaluate[toy toolobserver test]",
        ]
    );
}

/// The toy as an environment of the registry: `[toy] mode = "online" | "offline"`,
/// `rounds = K`, with its own scripted agent (`scripted:toy`) and editor
/// (`scripted:teacher`).
struct ToyEnvironment;

/// A checked `[toy]` table.
#[derive(Debug)]
struct ToyConfig {
    online: bool,
    rounds: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToy {
    mode: Option<String>,
    rounds: Option<u32>,
}

impl Environment for ToyEnvironment {
    fn table(&self) -> &'static str {
        "toy"
    }

    fn parse(
        &self,
        table: toml::Value,
        _resolve: &dyn Fn(&str) -> std::path::PathBuf,
    ) -> Result<Box<dyn EnvTable>, String> {
        let raw: RawToy = table
            .try_into()
            .map_err(|e| stages::experiment::table_error("toy", &e))?;
        let online = match raw.mode.as_deref() {
            None | Some("online") => true,
            Some("offline") => false,
            Some(m) => return Err(format!("toy.mode = `{m}` (valid: online, offline)")),
        };
        Ok(Box::new(ToyConfig {
            online,
            rounds: raw.rounds.unwrap_or(2),
        }))
    }

    fn exported(&self) -> Vec<Exported> {
        vec![
            Exported::of::<ToyTrajectory>(true),
            Exported::of::<ToyScore>(true),
        ]
    }

    fn scripted_agents(&self) -> &'static [&'static str] {
        &["toy"]
    }

    fn scripted_editors(&self) -> &'static [&'static str] {
        &["teacher"]
    }

    fn reader(&self) -> &dyn stages::experiment::Reader {
        &ToyReader
    }
}

/// Reading: the report's items and the SFT export, in the toy's own code.
struct ToyReader;

impl stages::experiment::Reader for ToyReader {
    fn holds_items(&self, stage: &str) -> bool {
        stage == "toy-evaluate"
    }

    /// A verdict per question, with the call it made and the docs it read.
    fn items(
        &self,
        out: &Computed<'_>,
        along: &dyn Along,
        cap: &mut Cap,
    ) -> Result<Reading, pipeline::StoreError> {
        let scores: Vec<ToyScore> = out.entry.read()?;
        let traj: Vec<ToyTrajectory> =
            reading::rows(along.upstream(out.node, ToyTrajectory::TABLE, None))?;
        let docs: Vec<DocRow> =
            reading::rows(along.upstream(out.node, DocRow::TABLE, Some("docs")))?;
        let items = scores
            .iter()
            .map(|s| {
                let t = traj.iter().find(|t| t.instance_id == s.instance_id);
                let tool = t.and_then(|t| t.tool.clone()).unwrap_or("nothing".into());
                let error = t.and_then(|t| t.error_kind.clone());
                let score = if s.solved { 1.0 } else { 0.0 };
                let mut detail = vec![Block::Kv {
                    t: "Toy episode".into(),
                    v: vec![
                        ("tool".into(), tool.clone()),
                        (
                            "answer".into(),
                            t.and_then(|t| t.answer.clone()).unwrap_or_default(),
                        ),
                    ],
                }];
                if let Some(d) = docs
                    .iter()
                    .find(|d| d.instance_id == s.instance_id || d.instance_id == SHARED)
                {
                    detail.push(Block::Code {
                        t: "Documentation the agent saw".into(),
                        v: cap.text(&reading::docs_text(&d.tools)),
                    });
                }
                Item {
                    cell: 0,
                    id: s.instance_id.clone(),
                    verdict: reading::verdict(score, &error),
                    score,
                    error,
                    summary: cap.text(&format!("toy: called {tool}")),
                    detail,
                }
            })
            .collect();
        Ok(Reading {
            items,
            ..Reading::default()
        })
    }

    fn role_of(&self, stage: &str) -> Option<&'static str> {
        (stage == "toy-explore").then_some("agent")
    }

    fn sft_tool_sets(&self, run: &RunOutput) -> Vec<String> {
        if run.by_stage("toy-evaluate").next().is_some() {
            vec!["toy".into()]
        } else {
            Vec::new()
        }
    }

    /// Online: a pair per tool the editor changed for a question that went from
    /// unsolved (Base, round 0) to solved (ToolObserver's last round).
    fn sft_pairs(&self, run: &RunOutput, _exp: &Experiment) -> Result<Vec<SftPair>, StageError> {
        let evals = || run.by_stage("toy-evaluate").filter(|o| o.cell.env == "toy");
        let before = evals().find(|o| o.cell.is(Method::Base) && o.cell.round == 0);
        let after = evals()
            .filter(|o| o.cell.is(Method::ToolObserver))
            .max_by_key(|o| o.cell.round);
        let docs = run
            .by_stage("batch-reflect")
            .filter(|o| o.cell.env == "toy")
            .max_by_key(|o| o.cell.round);
        let (Some(before), Some(after), Some(docs)) = (before, after, docs) else {
            return Ok(Vec::new());
        };
        let solved = |o: &Output| -> Result<Vec<String>, StageError> {
            let rows: Vec<ToyScore> = o.entry.read()?;
            Ok(rows
                .into_iter()
                .filter(|s| s.solved)
                .map(|s| s.instance_id)
                .collect())
        };
        let (was, is) = (solved(before)?, solved(after)?);
        let original = tools("", "");
        let original = original.as_array().cloned().unwrap_or_default();
        let finals: Vec<DocRow> = docs.entry.read()?;
        let mut out = Vec::new();
        for d in finals
            .iter()
            .filter(|d| is.contains(&d.instance_id) && !was.contains(&d.instance_id))
        {
            let now = d.tools.as_array().cloned().unwrap_or_default();
            // The round-0 play as the editor read it.
            let trace = vec![format!("{}: tool_b was not called", d.instance_id)];
            for (b, a) in reading::changed(&original, &now) {
                let name = a["name"].as_str().unwrap_or("").to_string();
                out.push(SftPair {
                    environment: "toy".into(),
                    setting: docs.cell.setting.clone(),
                    tool_set: "toy".into(),
                    held_out: false,
                    agent: docs.cell.agent.clone(),
                    editor: docs.cell.editor.clone(),
                    method: docs.cell.method_name().into(),
                    instance_id: d.instance_id.clone(),
                    round: docs.cell.round,
                    selected_on: reading::SELECTED_ON_INSTANCE.into(),
                    interface: b.to_string(),
                    traces: reading::traces_of(&trace, &name),
                    target: a["description"].as_str().unwrap_or("").into(),
                    tool: name,
                    score_before: 0.0,
                    score_after: 1.0,
                });
            }
        }
        Ok(out)
    }
}

impl EnvTable for ToyConfig {
    fn table(&self) -> &'static str {
        "toy"
    }

    fn uses_editor(&self) -> bool {
        true
    }

    fn plays_offline(&self) -> bool {
        !self.online
    }

    fn drive<'p>(&'p self, exp: &'p Experiment, cx: &mut Cx<'p, '_>) -> Result<(), DriveError> {
        let (agent, editor) = scripted(&[], false);
        cx.models.register_agent(spec("scripted:toy"), agent);
        cx.models.register_editor(spec("scripted:teacher"), editor);
        let toy = Toy {
            questions: (1..=6).map(|i| format!("q{i}")).collect(),
        };
        let shared = !self.online;
        let rows: Vec<DocRow> = if shared {
            vec![doc(SHARED)]
        } else {
            toy.questions.iter().map(|i| doc(i)).collect()
        };
        let docs0 = cx.stage_named(
            "toy-docs",
            "toy-docs",
            1,
            json!({"shared": shared, "ids": if shared { vec![] } else { toy.questions.clone() }}),
            &[],
            move |ctx, _| {
                ctx.write(&rows)?;
                Ok(())
            },
        )?;
        let naming = if self.online {
            Naming::Online
        } else {
            Naming::Offline
        };
        let chain = At {
            agent: exp.agents.first().cloned(),
            ..At::new(naming, "toy", "base")
        };
        let editor = exp
            .editors
            .first()
            .cloned()
            .ok_or_else(|| DriveError::from(StageError::bug("toy", "no editor")))?;
        let at = chain.with_method("toolobserver").with_editor(&editor);
        let sampling = Default::default();
        // The environment's nodes in one plan (in a run they go on concurrently as
        // their inputs are computed).
        cx.scope(|cx| {
            if self.online {
                let r0 = toy.explore_eval(cx, &chain.play(None, 0), &docs0, None)?;
                let curve = Curve {
                    template: "{{tools}}\n{{example}}",
                    rounds: self.rounds,
                    guard: false,
                };
                online::toolobserver(&toy, cx, &at, curve, &docs0, r0)
            } else {
                let curve = OfflineCurve {
                    batch_template: "BATCH {{notes}}\n{{tools}}\n{{trajectories}}",
                    merge_template: "MERGE {{notes}}\n{{tools}}\n{{analyses}}",
                    rounds: self.rounds,
                    batch_size: 2,
                    sampling: &sampling,
                };
                offline::toolobserver(&toy, cx, &at, &curve, &docs0).map(|_| ())
            }
        })
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

/// `toy.toml` in `dir`: a `[toy]` experiment in `mode` (`online`, `offline`), two
/// rounds, with the scripted agent and editor.
fn toy_file(dir: &std::path::Path, mode: &str) -> std::path::PathBuf {
    let path = dir.join("toy.toml");
    let models = "[models]\nagent = \"scripted:toy\"\neditor = \"scripted:teacher\"\n";
    let text = format!("[toy]\nmode = \"{mode}\"\nrounds = 2\n{models}");
    std::fs::write(&path, text).unwrap();
    path
}

/// `[toy]` in an experiment file, through the code `otb` runs: the registry reads
/// it, `otb plan` lists its nodes before anything ran, `otb run` computes what was
/// planned, `otb status` finds everything fresh, `otb export` writes its tables with
/// their schema, and its table is written as every table is.
#[test]
fn the_toy_goes_through_the_registry_and_otbs_code_paths() {
    let registry = Arc::new(stages::driver::builtin().with(ToyEnvironment));
    for mode in ["online", "offline"] {
        let dir = tempfile::tempdir().unwrap();
        let path = toy_file(dir.path(), mode);
        // The built-in registry does not know `[toy]`; this one does.
        let err = stages::driver::load(&path).unwrap_err().to_string();
        assert!(err.contains("unknown table or key `toy`"), "{err}");
        let exp = Experiment::load(&registry, &path).unwrap();
        stages::driver::preflight(&exp).unwrap();
        let store = Store::open(&dir.path().join("store"), pipeline::Access::ReadWrite).unwrap();

        let plan = stages::plan::plan(&exp, &store).unwrap();
        assert_eq!(plan.nodes[0].node, "toy-docs");
        assert_eq!(plan.nodes[0].state, "would-run");
        let certain: Vec<&str> = plan
            .nodes
            .iter()
            .filter(|n| n.state != "planned")
            .map(|n| n.node.as_str())
            .collect();
        assert!(certain.len() >= 4, "{}", plan.text());

        let s = Session::new(&store, Mode::Run, true);
        let out = stages::driver::drive(&exp, &s).unwrap();
        let reports = s.reports();
        let ran: Vec<&str> = reports
            .iter()
            .filter(|r| r.state == pipeline::NodeState::Ran)
            .map(|r| r.node.as_str())
            .collect();
        for n in &certain {
            assert!(ran.contains(n), "{mode}: {n} was planned, not run: {ran:?}");
        }

        let located = stages::driver::locate(&exp, &store).unwrap();
        let status = stages::tables::report::status_text(&located);
        assert!(
            status.contains(" fresh, 0 would run, 0 missing behind them"),
            "{status}"
        );
        assert_eq!(located.run.outputs.len(), out.outputs.len());

        let to = dir.path().join("export");
        let files = stages::tables::export::export_experiment(&store, &exp, &to).unwrap();
        assert!(
            files
                .iter()
                .any(|f| f.ends_with("toy_trajectories.parquet")),
            "{files:?}"
        );
        let schema = std::fs::read_to_string(to.join("SCHEMA.md")).unwrap();
        assert!(
            schema.contains("## toy_scores.parquet\n\nOne row = one toy verdict."),
            "{schema}"
        );

        let t = table(&located.run);
        assert_eq!(
            t.lines.last().map(|l| l.1),
            Some(1.0),
            "{mode}: {:?}",
            t.lines
        );
        let written = t.write(&dir.path().join("tables")).unwrap();
        assert_eq!(written.len(), 3, "{written:?}");
    }
}

/// A report cell as the toy's report test compares it: environment, method, round,
/// split, items, mean score.
type ReportCell<'a> = (&'a str, &'a str, i64, &'a str, usize, Option<f64>);

/// The toy reads its own rows for the report and the SFT export (its `Environment`
/// implementation, nothing in `report/` or `tables/`): `otb report` shows its cells
/// and items (and renders them into the page), and `otb export --sft` writes its
/// pairs.
#[test]
fn the_toy_gets_a_report_section_and_an_sft_export_from_its_own_reader() {
    let registry = Arc::new(stages::driver::builtin().with(ToyEnvironment));
    for mode in ["online", "offline"] {
        let dir = tempfile::tempdir().unwrap();
        let path = toy_file(dir.path(), mode);
        let exp = Experiment::load(&registry, &path).unwrap();
        let store = Store::open(&dir.path().join("store"), pipeline::Access::ReadWrite).unwrap();
        stages::driver::drive(&exp, &Session::new(&store, Mode::Run, true)).unwrap();

        // The report: a cell per `toy-evaluate` node, its items read by the toy.
        let opts = stages::report::Options::default();
        let mut r = stages::report::of_experiment(&store, &exp, None, &opts).unwrap();
        let cells: Vec<ReportCell<'_>> = r
            .cells
            .iter()
            .map(|c| {
                (
                    c.env,
                    c.method.as_str(),
                    c.round,
                    c.split.as_str(),
                    c.n,
                    c.mean,
                )
            })
            .collect();
        let want: Vec<ReportCell<'_>> = if mode == "online" {
            // r0 calls tool_a (nothing mentions B); r1 has the editor's tool_b.
            vec![
                ("toy", "base", 0, "", 6, Some(0.0)),
                ("toy", "toolobserver", 1, "", 6, Some(1.0)),
            ]
        } else {
            // The test split (3 questions) after the last round.
            vec![("toy", "toolobserver", 2, "test", 3, Some(1.0))]
        };
        assert_eq!(cells, want, "{mode}");
        let last = r.cells.last().unwrap().id;
        let items: Vec<&stages::reading::Item> =
            r.items.iter().filter(|i| i.cell == last).collect();
        assert!(
            items
                .iter()
                .all(|i| i.verdict == "right" && i.summary == "toy: called tool_b"),
            "{mode}: {items:?}"
        );
        // The docs the agent saw, found along the plan's edges.
        let docs = items[0].detail.iter().find_map(|b| match b {
            Block::Code { t, v } if t == "Documentation the agent saw" => Some(v.as_str()),
            _ => None,
        });
        assert!(
            docs.is_some_and(|d| d.contains("tool_b\n  Answers B.")),
            "{mode}: {:?}",
            items[0].detail
        );
        let written = stages::report::write(&mut r, &dir.path().join("report"), &opts).unwrap();
        let page = std::fs::read_to_string(&written[0]).unwrap();
        assert!(
            page.contains("toy: called tool_b"),
            "{mode}: the items are on the page"
        );

        // The SFT export: online, the six questions that tool_b's new description
        // solved; offline, the toy reads no pair.
        let located = stages::driver::locate(&exp, &store).unwrap();
        let to = dir.path().join("sft");
        stages::tables::sft::write(&located.run, &exp, &to, &Default::default()).unwrap();
        let pairs: Vec<SftPair> = pipeline::table::read_rows(&to.join("pairs.parquet")).unwrap();
        let holdout = std::fs::read_to_string(to.join("holdout.json")).unwrap();
        assert!(holdout.contains("\"toy\""), "{mode}: {holdout}");
        if mode == "online" {
            assert_eq!(pairs.len(), 6, "{pairs:#?}");
            assert!(pairs.iter().all(|p| p.environment == "toy"
                && p.tool == "tool_b"
                && p.target == "Answers B."
                && p.traces.contains("tool_b was not called")));
        } else {
            assert!(pairs.is_empty(), "{pairs:#?}");
        }
    }
}
