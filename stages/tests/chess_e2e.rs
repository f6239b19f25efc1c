//! Chess through the real stages and the real engine (Debian's `stockfish`), with
//! scripted agents: an oracle that always picks the optimal tool scores 100%
//! best-tool and a higher bootstrap Elo than a uniformly random agent, which scores
//! about 1/n. Skips (saying so) when no engine is installed.

mod common;

use pipeline::{Mode, Session, Store};
use serde_json::json;
use stages::chess::rows::EloRow;
use stages::experiment::Experiment;
use std::path::Path;

fn engine() -> bool {
    match datasets::chess::engine::find_engine(None) {
        Ok(_) => true,
        Err(e) => {
            testkit::skip("engine", format_args!("no chess engine ({e})"));
            false
        }
    }
}

fn positions(dir: &Path) -> (String, String) {
    let rows = [
        (
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -",
            "opening",
            "p1",
        ),
        (
            "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ -",
            "middlegame",
            "p2",
        ),
        ("8/5pk1/6p1/8/3R4/6P1/5PK1/2r5 w - -", "late_endgame", "p3"),
        ("r4rk1/pp3ppp/8/8/8/8/PP3PPP/R4RK1 w - -", "endgame", "p4"),
    ];
    let line = |(fen, phase, id): (&str, &str, &str)| {
        json!({"fen": fen, "phase": phase, "evaluation": "equal", "cp": 0.0, "mate": null, "depth": 12, "test_id": id}).to_string()
    };
    let train = dir.join("train.jsonl");
    let test = dir.join("test.jsonl");
    std::fs::write(&train, format!("{}\n", line(rows[0]))).unwrap();
    std::fs::write(
        &test,
        rows[1..]
            .iter()
            .map(|r| line(*r))
            .collect::<Vec<_>>()
            .join("\n")
            + "\n",
    )
    .unwrap();
    (train.display().to_string(), test.display().to_string())
}

/// Write an experiment on the test's positions (`[chess]` = the common lines, then
/// `chess`; `models` = the `[models]` lines), load it, check it and open its store.
fn setup(dir: &Path, chess: &str, models: &str) -> (std::path::PathBuf, Experiment, Store) {
    std::fs::create_dir_all(dir).unwrap();
    let (train, test) = positions(dir);
    let exp_path = dir.join("exp.toml");
    std::fs::write(
        &exp_path,
        format!(
            "name = \"chess\"\n[chess]\ntrain_file = \"{train}\"\ntest_file = \"{test}\"\nopponents = [1350]\nmovetime_ms = 10\nopponent_ratings = \"nominal\"\nconcurrency = 2\n{chess}[models]\n{models}"
        ),
    )
    .unwrap();
    let exp = stages::driver::load(&exp_path).unwrap();
    stages::driver::preflight(&exp).unwrap();
    let store = Store::open(&dir.join("store"), pipeline::Access::ReadWrite).unwrap();
    (exp_path, exp, store)
}

fn run(dir: &Path, agent: &str, tool_set: &str) -> EloRow {
    let (_, exp, store) = setup(
        dir,
        &format!("tool_sets = [\"{tool_set}\"]\nmethods = [\"base\"]\nmax_plies = 60\n"),
        &format!("agent = \"{agent}\"\n"),
    );
    let s = Session::new(&store, Mode::Run, true);
    let out = stages::driver::drive(&exp, &s).unwrap();
    let e = out
        .by_stage(stages::chess::ELO_STAGE)
        .next()
        .expect("a bootstrap-elo output");
    let row = e.entry.read::<EloRow>().unwrap().remove(0);
    // A rerun replays from the store: no stage runs, no engine is started.
    let s2 = Session::new(&store, Mode::Run, true);
    stages::driver::drive(&exp, &s2).unwrap();
    assert_eq!(s2.executed(), 0);
    row
}

#[test]
fn oracle_and_random_agents_on_the_real_engine() {
    if !engine() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let oracle = run(
        &d.path().join("o"),
        "scripted:chess-oracle",
        "phase_specialists",
    );
    let random = run(&d.path().join("r"), "scripted:random", "phase_specialists");
    assert_eq!(oracle.best_tool_pct, 100.0, "{oracle:?}");
    assert!(oracle.tool_calls > 0);
    // Uniform over 4 tools: 25% expected; a generous binomial interval.
    let n = random.tool_calls as f64;
    let sd = (n * 0.25 * 0.75).sqrt();
    let hits = random.best_tool_pct / 100.0 * n;
    assert!(
        (hits - 0.25 * n).abs() <= 3.5 * sd,
        "random agent: {hits} of {n} optimal"
    );
    assert!(
        oracle.mean > random.mean,
        "oracle Elo {} vs random {}",
        oracle.mean,
        random.mean
    );
    let gradient = run(
        &d.path().join("g"),
        "scripted:chess-oracle",
        "strength_gradient",
    );
    assert_eq!(gradient.best_tool_pct, 100.0);
}

/// EasyTool and Play2Prompt produce chess docs through the shared baseline stages:
/// Play2Prompt's tool play runs the tools on training positions (the runner's text
/// shows the move and the engine's evaluation), both methods' docs are played on the
/// test split, and Table 3 shows a run row for each.
#[test]
fn baselines_play_the_chess_tools_and_reach_table3() {
    if !engine() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let (exp_path, exp, store) = setup(
        dir,
        "tool_sets = [\"phase_specialists\"]\nmethods = [\"easytool\", \"play2prompt\"]\nmax_plies = 20\n",
        "agent = \"scripted:chess-oracle\"\neditor = \"scripted:errors\"\n",
    );
    let s = Session::new(&store, Mode::Run, true);
    let out = stages::driver::drive(&exp, &s).unwrap();
    let p2p = out
        .by_stage("play2prompt")
        .next()
        .expect("a play2prompt output");
    let runs = p2p.entry.read::<stages::rows::ToolRunRow>().unwrap();
    assert!(!runs.is_empty(), "Play2Prompt played no tool");
    for r in &runs {
        assert!(r.ok, "{r:?}");
        assert!(
            r.output.contains("the tool played") && r.output.contains("White's view"),
            "{}",
            r.output
        );
    }
    assert!(out.by_stage("easytool").next().is_some());
    let evaluated: Vec<&str> = out
        .by_stage(stages::chess::EVALUATE_STAGE)
        .map(|o| o.cell.method_name())
        .collect();
    assert_eq!(evaluated, ["easytool", "play2prompt"]);
    // The games' stage accounts for each agent call: one per agent ply.
    for o in out.by_stage(stages::chess::EXPLORE_STAGE) {
        let games: Vec<stages::chess::rows::GameRow> = o.entry.read().unwrap();
        let agent_plies: usize = games
            .iter()
            .map(|g| {
                g.plies
                    .as_array()
                    .unwrap()
                    .iter()
                    .filter(|p| p["side"] == g.agent_side.as_str())
                    .count()
            })
            .sum();
        let reports = s.reports();
        let usage = &reports.iter().find(|r| r.node == o.node).unwrap().usage;
        assert!(agent_plies > games.len(), "{agent_plies}");
        assert_eq!(usage.calls, agent_plies as u64, "{}: {usage:?}", o.node);
    }
    let t3 = stages::tables::table3::build(&exp, &stages::driver::locate(&exp, &store).unwrap())
        .unwrap();
    for m in ["easytool", "play2prompt"] {
        assert!(
            t3.rows.iter().any(|r| r.source == "run" && r.method == m),
            "no Table 3 run row for {m}"
        );
    }
    // `otb export` carries the chess tables, labelled by method.
    let dest = dir.join("export");
    let files = stages::tables::export::export_experiment(&store, &exp, &dest).unwrap();
    for t in [
        "chess_games",
        "chess_elo",
        "chess_positions",
        "docs",
        "tool_runs",
    ] {
        assert!(
            files.iter().any(|f| f.ends_with(format!("{t}.parquet"))),
            "{t} not exported: {files:?}"
        );
    }
    let schema = std::fs::read_to_string(dest.join("SCHEMA.md")).unwrap();
    assert!(schema.contains("## chess_games.parquet") && !schema.contains("no schema registered"));
    // A rerun replays from the store.
    let s2 = Session::new(&store, Mode::Run, true);
    stages::driver::drive(&exp, &s2).unwrap();
    assert_eq!(s2.executed(), 0);
    // Another Elo start reruns only the two bootstrap-elo stages: the games and the
    // call checks are reused.
    let text = std::fs::read_to_string(&exp_path).unwrap();
    std::fs::write(
        &exp_path,
        text.replace("concurrency = 2\n", "concurrency = 2\nelo_start = 1200\n"),
    )
    .unwrap();
    let exp2 = stages::driver::load(&exp_path).unwrap();
    let s3 = Session::new(&store, Mode::Run, true);
    let out3 = stages::driver::drive(&exp2, &s3).unwrap();
    assert_eq!(s3.executed(), 2);
    let reports3 = s3.reports();
    let ran: Vec<&str> = reports3
        .iter()
        .filter(|r| r.state != pipeline::NodeState::Fresh)
        .map(|r| r.node.as_str())
        .collect();
    assert!(
        ran.iter().all(|n| n.starts_with("bootstrap-elo[")),
        "{ran:?}"
    );
    // 1200 lies outside the opponents' ratings (one opponent, 1350): the start is
    // their midpoint, as the spec says.
    let elo = out3
        .by_stage(stages::chess::ELO_STAGE)
        .next()
        .unwrap()
        .entry
        .read::<EloRow>()
        .unwrap();
    assert_eq!(elo[0].start, 1350.0);
}

/// Calibration games have their own length (`calibration_plies`): the test games' cut
/// (`max_plies`; the default `table3.toml` plays 30 plies, after which nearly every
/// engine-vs-engine game is a draw) neither shortens them nor reruns them.
#[test]
fn calibration_keeps_its_own_game_length() {
    if !engine() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (exp_path, _, store) = setup(
        d.path(),
        "methods = []\ncalibration_games = 2\ncalibration_plies = 24\n",
        "agent = \"scripted:random\"\n",
    );
    let measured = std::fs::read_to_string(&exp_path).unwrap().replace(
        "opponent_ratings = \"nominal\"",
        "opponent_ratings = \"measured\"",
    );
    std::fs::write(&exp_path, &measured).unwrap();
    let drive = |text: &str| {
        std::fs::write(&exp_path, text).unwrap();
        let exp = stages::driver::load(&exp_path).unwrap();
        let s = Session::new(&store, Mode::Run, true);
        let out = stages::driver::drive(&exp, &s).unwrap();
        let games: Vec<usize> = out
            .by_stage(stages::chess::CALIBRATE_STAGE)
            .flat_map(|e| {
                e.entry
                    .read::<stages::chess::rows::CalibrationRow>()
                    .unwrap()
            })
            .map(|r| r.games as usize)
            .collect();
        (s.executed(), games)
    };
    let (ran, games) = drive(&measured);
    assert!(ran >= 1, "calibrate did not run");
    // Three anchors x 2 games for the one opponent.
    assert_eq!(games, vec![6]);
    let shorter_tests = measured.replace("concurrency = 2\n", "concurrency = 2\nmax_plies = 10\n");
    assert_eq!(drive(&shorter_tests).0, 0, "max_plies reran calibrate");
    let longer_calibration =
        shorter_tests.replace("calibration_plies = 24", "calibration_plies = 30");
    assert_eq!(
        drive(&longer_calibration).0,
        1,
        "calibration_plies is in calibrate's key"
    );
    // calibrate_tools also rates each tool of the tool sets as a whole-game player.
    let tools = longer_calibration.replace(
        "calibration_plies = 30",
        "calibration_plies = 30\ncalibrate_tools = true\ntool_sets = [\"phase_specialists\"]",
    );
    std::fs::write(&exp_path, &tools).unwrap();
    let exp = stages::driver::load(&exp_path).unwrap();
    let s = Session::new(&store, Mode::Run, true);
    let out = stages::driver::drive(&exp, &s).unwrap();
    let rows: Vec<stages::chess::rows::ToolCalibrationRow> = out
        .by_stage(stages::chess::CALIBRATE_STAGE)
        .next()
        .unwrap()
        .entry
        .read()
        .unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r.tool.as_str()).collect();
    assert_eq!(names.len(), 4, "{names:?}");
    assert!(
        names.iter().all(|n| n.ends_with("_specialist")),
        "{names:?}"
    );
    assert!(rows
        .iter()
        .all(|r| r.games == 6 && r.wins + r.draws + r.losses == 6));
}

use stages::env::hidden_structure_words as forbidden_words;

/// A scripted agent that records everything it is sent and calls the tools in turn.
#[derive(Default)]
struct RecordingAgent {
    sent: std::sync::Mutex<Vec<String>>,
}

impl stages::models::Agent for RecordingAgent {
    fn act(&self, job: &stages::models::AgentJob<'_>) -> stages::models::AgentTurn {
        let mut sent = self.sent.lock().unwrap();
        sent.push(job.system.to_string());
        sent.push(job.question.to_string());
        sent.push(serde_json::to_string(job.tools).unwrap());
        let name = job.tools[(sent.len() / 3) % job.tools.len()]["name"]
            .as_str()
            .unwrap()
            .to_string();
        stages::models::AgentTurn {
            calls: vec![stages::rows::CallRecord {
                function: name,
                args: json!({}),
                raw: None,
            }],
            ..Default::default()
        }
    }
}

impl stages::models::MultiTurn for RecordingAgent {}

/// A scripted editor that records its prompts and describes `function_1` only.
#[derive(Default)]
struct RecordingEditor {
    sent: std::sync::Mutex<Vec<String>>,
}

impl stages::models::Editor for RecordingEditor {
    fn complete(&self, prompt: &str, _seed: u64) -> stages::models::EditorReply {
        self.sent.lock().unwrap().push(prompt.to_string());
        stages::models::EditorReply {
            text: Some(
                "**Tool: function_1**\nUpdated description: Suggests a move.\nFinal description: Suggests a move.\n"
                    .into(),
            ),
            usage: Default::default(),
            error: None,
            cut: false,
        }
    }
}

/// A scripted Base + ToolObserver run: every prompt, turn and tool list the agent
/// gets and every prompt the editor gets (notes, serialized trajectories) names no
/// game phase, topic, domain, collection or part; and the 10-ply exploration cut
/// reaches the editor as a partial game with its final evaluation, not as a draw.
#[test]
fn a_chess_run_sends_no_hidden_structure_and_cut_games_are_partial() {
    if !engine() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (_, exp, store) = setup(
        d.path(),
        "tool_sets = [\"phase_specialists\"]\nmethods = [\"base\", \"toolobserver\"]\nrounds = 1\nmax_plies = 12\n",
        "agent = \"scripted:random\"\neditor = \"scripted:silent\"\n",
    );
    let agent = std::sync::Arc::new(RecordingAgent::default());
    let editor = std::sync::Arc::new(RecordingEditor::default());
    let spec = |name: &str| stages::models::ModelSpec {
        kind: stages::models::ModelKind::Scripted,
        name: name.into(),
    };
    let models = stages::models::Models::for_store(&store)
        .with_agent(spec("random"), agent.clone())
        .with_editor(spec("silent"), editor.clone());
    let s = Session::new(&store, Mode::Run, true);
    let out = stages::env::Recorder::default();
    let mut cx = stages::env::Cx::new(&s, &models, &out);
    stages::chess::drive(&exp, exp.chess().unwrap(), &mut cx).unwrap();
    drop(cx);
    let agent_sent = agent.sent.lock().unwrap().clone();
    let editor_sent = editor.sent.lock().unwrap().clone();
    assert!(!agent_sent.is_empty() && !editor_sent.is_empty());
    for text in agent_sent.iter().chain(&editor_sent) {
        let found = forbidden_words(text);
        assert!(found.is_empty(), "{found:?} in:\n{text}");
    }
    // The batch prompt carries the trajectories: partial games, never a draw.
    let batch = editor_sent
        .iter()
        .find(|p| p.contains("Trajectory 1:"))
        .expect("a batch prompt");
    assert!(
        batch.contains("a partial game, stopped after 10 plies"),
        "{batch}"
    );
    assert!(!batch.contains("1/2-1/2"), "{batch}");
    let train: Vec<stages::chess::rows::GameRow> = out
        .finish()
        .by_stage(stages::chess::EXPLORE_STAGE)
        .flat_map(|o| o.entry.read::<stages::chess::rows::GameRow>().unwrap())
        .filter(|g| g.split == "train")
        .collect();
    assert_eq!(train.len(), 2, "one training position, both sides");
    // The opponent plays at a limited strength (seeded weakening), so a game can end
    // on the board by the cut (this grid's agent is mated on ply 10, the cut's ply).
    // Such a game is scored as played; every other one is cut at 10 plies and is
    // partial. The batch prompt above already needed at least one cut game.
    for g in &train {
        let plies = g.plies.as_array().map_or(0, Vec::len);
        if g.end_reason == "cut" {
            assert_eq!(
                (g.score, g.result.as_str(), plies),
                (None, "*", 10),
                "{g:?}"
            );
        } else {
            assert!(plies <= 10, "a game that went past the cut: {g:?}");
            assert!(g.score.is_some() && g.result != "*", "{g:?}");
        }
        assert!(g.final_eval.is_some());
    }
}

/// Trace-Free+ on chess: the generator's descriptions are the docs the agent plays
/// with, the column reaches Table 3; trace-based, the generator reads each tool's
/// own single calls on training positions (tool play: no proposal, a chess tool
/// takes no parameters), never a game.
#[test]
fn tracefree_reaches_the_games_and_table3() {
    if !engine() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (_, exp, store) = setup(
        d.path(),
        "tool_sets = [\"phase_specialists\"]\nmethods = [\"base\", \"tracefree\"]\nmax_plies = 20\n[baselines.tracefree]\ntraces = 2\n",
        "agent = \"scripted:chess-oracle\"\neditor = \"scripted:errors\"\n",
    );
    let s = Session::new(&store, Mode::Run, true);
    let out = stages::driver::drive(&exp, &s).unwrap();
    let (tf, tools) = common::tracefree_tools(&out);
    let calls: Vec<stages::rows::DocCallRow> = tf.entry.read().unwrap();
    assert_eq!(calls.len(), tools.len(), "one request per tool");
    let runs: Vec<stages::rows::ToolRunRow> = tf.entry.read().unwrap();
    assert_eq!(runs.len(), 2 * tools.len(), "two single calls per tool");
    assert!(runs
        .iter()
        .all(|r| r.step == "play" && r.output.contains("the tool played")));
    let reports = s.reports();
    let input_of = |node_part: &str, input: &str| -> String {
        let r = reports
            .iter()
            .find(|r| r.node.contains(node_part))
            .unwrap_or_else(|| panic!("no {node_part}"));
        r.inputs
            .iter()
            .find(|(n, _)| n == input)
            .map(|(_, up)| up.clone())
            .unwrap_or_default()
    };
    // The test games play the generated docs; the generator read the training games.
    assert!(input_of("tracefree test", "docs").starts_with("tracefree["));
    assert!(input_of("tracefree[", "trajectories").is_empty());
    let t3 = stages::tables::table3::build(&exp, &stages::driver::locate(&exp, &store).unwrap())
        .unwrap();
    use stages::tables::report::TableReport;
    let text = t3.render(false);
    assert!(text.contains("+TF-prompt traces"), "{text}");
    assert!(t3
        .rows
        .iter()
        .any(|r| r.source == "run" && r.method == "tracefree"));
}

/// `--sft` pairs of a chess run, selected on the training split only: when the
/// best-tool % of the round-1 training games (docs of round 1) rose over round 0's
/// (the original docs), one pair per tool whose round-1 description the editor
/// changed, its traces from the training games only (the test positions' FENs never
/// appear); the test games' scores play no part.
#[test]
fn sft_pairs_of_chess_come_from_training_games_only() {
    if !engine() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (_, exp, store) = setup(
        d.path(),
        "tool_sets = [\"phase_specialists\"]\nmethods = [\"base\", \"toolobserver\"]\nmax_plies = 12\nrounds = 2\n",
        "agent = \"scripted:random\"\neditor = \"scripted:errors\"\n",
    );
    let s = Session::new(&store, Mode::Run, true);
    let out = stages::driver::drive(&exp, &s).unwrap();
    let pairs = stages::tables::sft::pairs(&out, &exp).unwrap();
    // Best-tool % of the training games of round r, counted here from their plies.
    let train = |r: i64| -> f64 {
        use datasets::chess::tools::{Docs, ToolFamily, ToolSet};
        let tools = ToolSet::new(ToolFamily::PhaseSpecialists);
        let o = common::train_play(&out, stages::chess::EXPLORE_STAGE, r);
        let (mut calls, mut best) = (0, 0);
        for g in o.entry.read::<stages::chess::rows::GameRow>().unwrap() {
            for p in g.plies.as_array().unwrap() {
                let Some(tool) = p["tool"].as_str() else {
                    continue;
                };
                let pos =
                    datasets::chess::rules::parse_fen(p["fen_before"].as_str().unwrap()).unwrap();
                calls += 1;
                best += usize::from(
                    tools
                        .name(tools.optimal_tool(&pos), Docs::Opaque)
                        .as_deref()
                        == Some(tool.trim()),
                );
            }
        }
        100.0 * best as f64 / calls.max(1) as f64
    };
    let docs = |stage: &str, method: &str| -> Vec<serde_json::Value> {
        let o = out
            .by_stage(stage)
            .filter(|o| o.cell.method_name() == method)
            .last()
            .unwrap();
        let rows: Vec<stages::rows::DocRow> = o.entry.read().unwrap();
        rows[0].tools.as_array().unwrap().clone()
    };
    let round1 = |stage: &str| -> Vec<serde_json::Value> {
        let o = out
            .by_stage(stage)
            .find(|o| o.cell.is(stages::env::Method::ToolObserver) && o.cell.round == 1)
            .unwrap();
        let rows: Vec<stages::rows::DocRow> = o.entry.read().unwrap();
        rows[0].tools.as_array().unwrap().clone()
    };
    let (before, after) = (docs("chess-docs", "base"), round1("consensus-merge"));
    let changed = after
        .iter()
        .filter(|t| {
            let b = before.iter().find(|b| b["name"] == t["name"]).unwrap();
            t["description"] != b["description"]
                && !t["description"].as_str().unwrap_or("").trim().is_empty()
        })
        .count();
    common::assert_round_1_pairs(&pairs, changed, (train(0), train(1)));
    let (_, test) = positions(d.path());
    let test_fens: Vec<String> = std::fs::read_to_string(test)
        .unwrap()
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["fen"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    for p in &pairs {
        assert_eq!(p.environment, "chess");
        for fen in &test_fens {
            assert!(
                !p.traces.contains(fen.as_str()),
                "a test position in {p:#?}"
            );
        }
    }
}
