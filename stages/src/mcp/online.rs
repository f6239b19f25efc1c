//! ToolObserver's online mode on an MCP tool set (`[mcp] toolobserver = "online"`):
//! each test task gets a docs row of its own (the tool set's docs in the cell's
//! setting), and round after round the agent plays the task with them and the editor
//! rewrites them from that one episode -- the paper's online mode ([`crate::online`],
//! written once against [`OnlineEnv`]), here on a server's tools. This is test-time
//! learning: the editor reads the test task's own episode and its grade (exact match
//! against the task's answer), so the scores say how far documentation learned on
//! the task itself gets the agent, not how well learned documentation transfers to
//! new tasks (that is the offline mode's question).
//!
//! ```text
//! mcp-task-docs[<set>] (one row per test task)
//!   -> mcp-explore[<set> r0] -> mcp-evaluate[<set> r0]            (per agent)
//!   -> batch-reflect[<set> r1] -> mcp-explore[<set> r1] -> ...     (per agent x editor)
//! ```
//!
//! A task whose docs did not change since the round before reuses that round's
//! episode (no server call, no agent call); the curve ends when every task's docs
//! are frozen or after `rounds` rounds, and its last evaluated round is the
//! `toolobserver` cell's result (`otb table mcp`).

use super::explore::{EpisodeSpec, Job};
use super::rows::{EpisodeRow, TaskRow};
use super::{Mcp, EXPLORE_STAGE, EXPLORE_VERSION};
use crate::env::{At, Cx, DriveError, Example, Naming, OnlineEnv, Play, Shown, Split};
use crate::models::{ModelSpec, TurnSampling};
use crate::offline::GridSpec;
use crate::online::Curve;
use crate::rows::DocRow;
use pipeline::{Handle, StageError};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::HashMap;

/// Stage `mcp-task-docs[<set>]`: the docs row of every test task (round 0 of the
/// online curves).
pub const TASK_DOCS_STAGE: &str = "mcp-task-docs";
/// The task-docs stage's version.
pub const TASK_DOCS_VERSION: u32 = 1;

/// One tool set (a server in one documentation setting) in online mode: the
/// environment, how the agent samples on the test tasks, and whether the docs name
/// the server's tools.
pub(crate) struct McpOnline<'a> {
    env: &'a Mcp<'a>,
    sampling: &'a TurnSampling,
    gold_names: bool,
}

impl<'a> McpOnline<'a> {
    /// The tool set `env` in online mode, its agent sampling as the test split's.
    pub(crate) fn new(env: &'a Mcp<'a>, spec: &'a GridSpec<'a>) -> McpOnline<'a> {
        let docs = env.tools.docs(env.setting, env.m.seed);
        McpOnline {
            env,
            sampling: &spec.protocol.sampling.test,
            gold_names: env.tools.names_gold(&docs),
        }
    }
}

/// `mcp-explore`'s params in online mode (the stage key): what the offline stage's
/// hold, each test task played with its own docs row.
#[derive(Serialize)]
struct OnlineExploreParams<'a> {
    agent: ModelSpec,
    /// The system prompt (a docs row's demonstrations would extend it; none here).
    system: &'a str,
    final_answer: &'static str,
    seed: u64,
    split: Split,
    max_turns: usize,
    tool_set: &'a str,
    /// The server's identity (`mcp-server`'s row).
    server: &'a Value,
    round: i64,
    gold_names: bool,
    /// `first_call = "required"`: the first turn must call a tool; in the key only
    /// then (an experiment without it keeps its keys).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    first_call_required: bool,
    /// Which docs row a task is played with: its own.
    docs: &'static str,
    #[serde(skip_serializing_if = "TurnSampling::is_default")]
    sampling: TurnSampling,
}

/// The docs row of every test task of `tasks`: the tool set's docs `tools`, unchanged.
pub fn task_docs(tasks: &[TaskRow], setting: &str, tools: &Value) -> Vec<DocRow> {
    tasks
        .iter()
        .filter(|t| t.split == Split::Test.as_str())
        .map(|t| DocRow {
            instance_id: t.task_id.clone(),
            setting: setting.to_string(),
            round: 0,
            tools: tools.clone(),
            name_mapping: Value::Null,
            changed: true,
            frozen: false,
            demos: Value::Null,
        })
        .collect()
}

/// What the editor is shown for the docs row `d`, given its task's episode `e` of
/// the round: nothing for a frozen row, a missing episode or one without a tool call
/// (nothing observed about the tools), or -- with the success guard -- a correct
/// one; a retry when the agent's call failed before any tool call; else the episode
/// as the editor reads it, its grade included.
pub fn example_for(d: &DocRow, e: Option<&EpisodeRow>, guard: bool) -> Example {
    match e {
        _ if d.frozen => Example::Converged,
        None => Example::Converged,
        Some(e) if e.tool_calls == 0 && e.error_kind.is_some() => Example::Retry,
        Some(e) if e.tool_calls == 0 => Example::Converged,
        Some(e) if guard && e.correct => Example::Converged,
        Some(e) => Example::Show(e.editor_text.clone()),
    }
}

/// The rows of a round's explore stage, in `docs`' order: a task whose docs did not
/// change copies its `previous` row (unless its agent call failed), with this
/// round; the others are in `played`, in order.
fn merge_rows(
    docs: &[DocRow],
    previous: &HashMap<&str, &EpisodeRow>,
    mut played: impl Iterator<Item = EpisodeRow>,
) -> Result<Vec<EpisodeRow>, StageError> {
    let mut rows = Vec::with_capacity(docs.len());
    for d in docs {
        match reused(d, previous) {
            Some(p) => {
                let mut row = p.clone();
                row.round = d.round;
                rows.push(row);
            }
            None => rows.push(played.next().ok_or_else(|| {
                StageError::bug(EXPLORE_STAGE, "fewer episodes played than asked")
            })?),
        }
    }
    Ok(rows)
}

/// The previous round's episode that the docs row `d` reuses: its docs did not
/// change and that episode's agent call did not fail.
fn reused<'e>(d: &DocRow, previous: &HashMap<&str, &'e EpisodeRow>) -> Option<&'e EpisodeRow> {
    previous
        .get(d.instance_id.as_str())
        .copied()
        .filter(|p| !d.changed && p.error_kind.is_none())
}

impl OnlineEnv for McpOnline<'_> {
    fn explore_eval<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        at: &At,
        docs: &Handle,
        prev: Option<&Handle>,
    ) -> Result<(Handle, Handle), DriveError> {
        let env = self.env;
        let params = OnlineExploreParams {
            agent: at.agent_for(EXPLORE_STAGE)?.clone(),
            system: &env.system,
            final_answer: crate::models::llm::FINAL_ANSWER,
            seed: at.seed,
            split: Split::Test,
            max_turns: env.m.max_turns,
            tool_set: &env.set,
            server: env.identity,
            round: at.round,
            gold_names: self.gold_names,
            first_call_required: env.m.first_call_required,
            docs: "per task",
            sampling: self.sampling.clone(),
        };
        let mut inputs = vec![
            ("tasks", &env.tasks.handle),
            ("server", env.server_out),
            ("docs", docs),
        ];
        if let Some(p) = prev {
            inputs.push(("previous", p));
        }
        let has_prev = prev.is_some();
        let models = cx.models;
        let traj = cx.stage(
            at,
            EXPLORE_STAGE,
            EXPLORE_VERSION,
            params,
            &inputs,
            move |ctx, p| {
                let docs_rows: Vec<DocRow> = ctx.read("docs")?;
                let prev_rows: Vec<EpisodeRow> = if has_prev {
                    ctx.read("previous")?
                } else {
                    Vec::new()
                };
                let previous: HashMap<&str, &EpisodeRow> =
                    prev_rows.iter().map(|e| (e.task_id.as_str(), e)).collect();
                let tasks: HashMap<&str, &TaskRow> = env
                    .tasks
                    .get(Split::Test)?
                    .iter()
                    .map(|t| (t.task_id.as_str(), t))
                    .collect();
                let mut shown: Vec<(&TaskRow, String, Vec<Value>)> = Vec::new();
                for d in docs_rows.iter().filter(|d| reused(d, &previous).is_none()) {
                    let task = tasks.get(d.instance_id.as_str()).ok_or_else(|| {
                        StageError::bug(
                            EXPLORE_STAGE,
                            format!("docs for unknown test task {}", d.instance_id),
                        )
                    })?;
                    shown.push((
                        *task,
                        crate::baselines::with_demos(p.system, &d.demos),
                        crate::baselines::tools_of(d),
                    ));
                }
                let jobs: Vec<Job<'_>> = shown
                    .iter()
                    .map(|(task, system, tools)| Job {
                        task,
                        system,
                        tools,
                    })
                    .collect();
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
                // Every task reused: no agent opened, no server started.
                let played = if jobs.is_empty() {
                    Vec::new()
                } else {
                    let agent = models.agent_sampled(&p.agent, &p.sampling)?;
                    env.play_episodes(ctx, agent.as_ref(), &spec, &jobs)?
                };
                let rows = merge_rows(&docs_rows, &previous, played.into_iter())?;
                ctx.write(&rows)?;
                Ok(())
            },
        )?;
        let play = Play {
            at,
            sampling: self.sampling,
            docs,
        };
        let scores = env.evaluate_node(cx, &play, &traj)?;
        Ok((traj, scores))
    }

    /// MCP has no summary stage: `otb table mcp` reads the evaluations themselves.
    fn curve_start(&self, _cx: &mut Cx<'_, '_>, _at: &At, _scores: &Handle) {}

    fn examples(
        &self,
        docs: &[DocRow],
        trajectories: &Handle,
        _scores: &Handle,
        guard: bool,
    ) -> Result<Vec<Example>, DriveError> {
        let eps: Vec<EpisodeRow> = trajectories.read()?;
        let by_task: HashMap<&str, &EpisodeRow> =
            eps.iter().map(|e| (e.task_id.as_str(), e)).collect();
        Ok(docs
            .iter()
            .map(|d| example_for(d, by_task.get(d.instance_id.as_str()).copied(), guard))
            .collect())
    }

    fn example_params(&self) -> Value {
        json!({"example": "mcp episode"})
    }
}

/// The online ToolObserver curves of one tool set: its task docs
/// (`mcp-task-docs[<set>]`), then per agent round 0 (the test tasks with the opaque
/// docs, shared by the editors) and per editor the curve (`rounds` rounds, the
/// success guard off as BFCL's default, the experiment's online editor prompt).
pub(crate) fn drive<'p>(
    o: &'p McpOnline<'p>,
    cx: &mut Cx<'p, '_>,
    spec: &GridSpec<'_>,
    template: &'p str,
) -> Result<(), DriveError> {
    let env = o.env;
    let cell = At {
        seed: spec.seed,
        shown: Shown {
            seed: false,
            agent: spec.agents.len() > 1,
            editor: spec.editors.len() > 1,
        },
        ..At::new(Naming::Online, &env.set, "toolobserver")
    };
    let tools = Value::Array(env.tools.docs(env.setting, env.m.seed));
    let set = env.set.clone();
    let docs0 = cx.stage(
        &cell,
        TASK_DOCS_STAGE,
        TASK_DOCS_VERSION,
        json!({"tool_set": env.set, "docs": "opaque", "per": "test task", "tools": tools}),
        &[("tasks", &env.tasks.handle)],
        move |ctx, _| {
            let tasks: Vec<TaskRow> = ctx.read("tasks")?;
            ctx.write(&task_docs(&tasks, &set, &tools))?;
            Ok(())
        },
    )?;
    let curve = Curve {
        template,
        rounds: spec.rounds,
        guard: false,
    };
    for agent in spec.agents {
        let chain = At {
            agent: Some(agent.clone()),
            ..cell.clone()
        };
        let r0 = o.explore_eval(cx, &chain.play(None, 0), &docs0, None)?;
        for editor in spec.editors {
            let at = chain.with_editor(editor);
            crate::online::toolobserver(o, cx, &at, curve, &docs0, r0.clone())?;
        }
    }
    Ok(())
}

/// Whether `cell` is a play step of an online ToolObserver curve of an `[mcp]` table
/// (on no split: the offline mode's plays are on the training or test split).
pub fn is_online(cell: &crate::env::Cell) -> bool {
    cell.is_toolobserver() && matches!(cell.step, crate::env::Step::Play { split: None })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::config::ToolObserverMode;

    fn episode(id: &str, correct: bool, calls: i64, error: Option<&str>) -> EpisodeRow {
        EpisodeRow {
            task_id: id.into(),
            split: "test".into(),
            round: 0,
            model: "scripted:mcp-reader".into(),
            steps: json!([]),
            calls: json!([]),
            answer: Some("x".into()),
            forced: false,
            correct,
            f1: if correct { 1.0 } else { 0.0 },
            tool_calls: calls,
            tool_errors: 0,
            editor_text: format!("Request: {id}\nOutcome: {correct}"),
            error_kind: error.map(str::to_string),
            prompt_tokens: 1,
            completion_tokens: 1,
            reasoning_tokens: 0,
        }
    }

    fn task(id: &str, split: &str) -> TaskRow {
        TaskRow {
            split: split.into(),
            task_id: id.into(),
            server: "s".into(),
            question: format!("q {id}"),
            answer: "a".into(),
            answers: vec![],
            judge: None,
            kind: None,
        }
    }

    #[test]
    fn each_test_task_gets_its_own_docs_row() {
        let tools = json!([{"name": "tool_1", "description": ""}]);
        let rows = task_docs(
            &[task("a", "train"), task("b", "test"), task("c", "test")],
            "git:names",
            &tools,
        );
        let ids: Vec<&str> = rows.iter().map(|d| d.instance_id.as_str()).collect();
        assert_eq!(ids, ["b", "c"], "training tasks get no row");
        assert!(rows
            .iter()
            .all(|d| d.tools == tools && d.changed && !d.frozen && d.round == 0));
        assert_eq!(rows[0].setting, "git:names");
    }

    #[test]
    fn the_editor_sees_the_tasks_own_episode_unless_there_is_nothing_to_learn() {
        let d = task_docs(&[task("a", "test")], "s", &json!([])).remove(0);
        let wrong = episode("a", false, 1, None);
        assert_eq!(
            example_for(&d, Some(&wrong), false),
            Example::Show(wrong.editor_text.clone())
        );
        let right = episode("a", true, 1, None);
        assert!(matches!(
            example_for(&d, Some(&right), false),
            Example::Show(_)
        ));
        assert_eq!(example_for(&d, Some(&right), true), Example::Converged);
        assert_eq!(
            example_for(&d, Some(&episode("a", false, 0, Some("timeout"))), false),
            Example::Retry
        );
        assert_eq!(
            example_for(&d, Some(&episode("a", false, 0, None)), false),
            Example::Converged
        );
        assert_eq!(example_for(&d, None, false), Example::Converged);
        let frozen = DocRow { frozen: true, ..d };
        assert_eq!(
            example_for(&frozen, Some(&wrong), false),
            Example::Converged
        );
    }

    #[test]
    fn unchanged_docs_reuse_the_previous_episode_unless_its_call_failed() {
        let mut docs = task_docs(
            &[task("a", "test"), task("b", "test"), task("c", "test")],
            "s",
            &json!([]),
        );
        for d in &mut docs {
            d.round = 2;
        }
        docs[0].changed = false; // reused
        docs[2].changed = false; // its call failed: played again
        let prev = [
            episode("a", true, 1, None),
            episode("b", false, 1, None),
            episode("c", false, 0, Some("rate_limit")),
        ];
        let previous: HashMap<&str, &EpisodeRow> =
            prev.iter().map(|e| (e.task_id.as_str(), e)).collect();
        assert!(reused(&docs[0], &previous).is_some());
        assert!(reused(&docs[1], &previous).is_none());
        assert!(reused(&docs[2], &previous).is_none());
        let played = vec![episode("b", true, 2, None), episode("c", true, 1, None)];
        let rows = merge_rows(&docs, &previous, played.into_iter()).unwrap();
        let got: Vec<(&str, i64, bool)> = rows
            .iter()
            .map(|r| (r.task_id.as_str(), r.round, r.correct))
            .collect();
        assert_eq!(got, [("a", 2, true), ("b", 0, true), ("c", 0, true)]);
        // Too few played rows is a bug, said as one.
        assert!(merge_rows(&docs, &previous, std::iter::empty()).is_err());
    }

    /// `scripted:mcp-observer` asked about one episode (the online editor prompt):
    /// after an incorrect one it describes each tool that answered by the fields its
    /// output showed; after a correct one it changes nothing.
    #[test]
    fn the_scripted_observer_learns_from_one_wrong_episode() {
        use crate::models::Editor;
        let template = include_str!("../../../prompts/editor_online.txt");
        let calls = [
            super::super::explore::McpCall {
                tool: "tool_2".into(),
                server_tool: Some("price_of".into()),
                arguments: json!({"item": "apple"}),
                result: "Item: apple\nPrice: 3 EUR".into(),
                is_error: false,
            },
            super::super::explore::McpCall {
                tool: "tool_1".into(),
                server_tool: None,
                arguments: json!({}),
                result: "Error: Bad: x".into(),
                is_error: true,
            },
        ];
        let ask = |correct: bool| {
            let example =
                super::super::explore::editor_text("How many 'apple'?", &calls, None, correct);
            let prompt = template
                .replace(
                    "{{tools}}",
                    "Name: tool_1\nDescription: No description provided",
                )
                .replace("{{example}}", &example);
            super::super::scripted::Observer
                .complete(&prompt, 0)
                .text
                .unwrap_or_default()
        };
        let reply = ask(false);
        assert_eq!(
            crate::batch_reflect::parse_reply(&reply).blocks,
            [("tool_2".to_string(), "Returns Item, Price.".to_string())],
            "{reply}"
        );
        assert_eq!(ask(true), "");
    }

    fn parse(body: &str) -> Result<crate::mcp::McpExperiment, String> {
        let raw: crate::mcp::RawMcp = toml::from_str(&format!(
            "tasks = \"t.jsonl\"\n{body}\n[servers.git]\ncommand = [\"srv\"]\n"
        ))
        .map_err(|e| e.to_string())?;
        crate::mcp::McpExperiment::from_raw(raw, &|p| std::path::PathBuf::from(p))
    }

    #[test]
    fn the_mode_is_offline_unless_asked() {
        assert_eq!(parse("").unwrap().toolobserver, ToolObserverMode::Offline);
        assert_eq!(
            parse("toolobserver = \"offline\"").unwrap().toolobserver,
            ToolObserverMode::Offline
        );
        let m = parse("toolobserver = \"online\"").unwrap();
        assert_eq!(m.toolobserver, ToolObserverMode::Online);
        assert_eq!(m.toolobserver.as_str(), "online");
        let e = parse("toolobserver = \"both\"").unwrap_err();
        assert!(e.contains("valid: offline, online"), "{e}");
        let e = parse("toolobserver = \"online\"\nmethods = [\"gold\"]").unwrap_err();
        assert!(e.contains("no toolobserver"), "{e}");
    }
}
