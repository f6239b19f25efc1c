//! Tool sets against the reference configs (skipped when `../shared` is
//! absent), and tools, episodes and matches against a real engine (skipped
//! when no engine binary is found).

use std::path::PathBuf;

use datasets::chess::engine::{find_engine, BlockingPool, EngineConfig};
use datasets::chess::game::{editor_text, run_episode, AgentChoice, EpisodeConfig, Game};
use datasets::chess::matches::play_match;
use datasets::chess::rules::{self, EndReason, Side};
use datasets::chess::strength::Strength;
use datasets::chess::tools::{Docs, ToolFamily, ToolSet};
use serde_json::Value;

fn reference_dir() -> Option<PathBuf> {
    let dir =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/otb/chess/tool_configs");
    if dir.is_dir() {
        Some(dir)
    } else {
        testkit::skip(
            "shared",
            format_args!("reference tool configs not found at {}", dir.display()),
        );
        None
    }
}

fn read(dir: &std::path::Path, name: &str) -> Value {
    let text = std::fs::read_to_string(dir.join(name)).unwrap();
    serde_json::from_str(&text).unwrap()
}

#[test]
fn tool_sets_match_the_reference_configs_in_names_counts_and_shape() {
    let Some(dir) = reference_dir() else { return };
    for (family, stem) in [
        (ToolFamily::PhaseSpecialists, "all_specialists"),
        (ToolFamily::StrengthGradient, "elo_tools"),
    ] {
        let set = ToolSet::new(family);
        for (docs, suffix) in [(Docs::Gold, "accurate"), (Docs::Opaque, "obfuscated")] {
            let reference = read(&dir, &format!("{stem}_{suffix}.json"));
            let ref_tools = reference["tools"].as_array().unwrap();
            let ours = set.function_defs(docs);
            assert_eq!(ours.len(), ref_tools.len(), "{stem}_{suffix}");
            for (a, b) in ours.iter().zip(ref_tools) {
                assert_eq!(a["name"], b["name"], "{stem}_{suffix}");
                assert_eq!(a["parameters"], b["parameters"], "{stem}_{suffix}");
                assert_ne!(a["description"], b["description"], "own wording");
            }
            if docs == Docs::Opaque {
                // The mapping function_i -> gold name is the reference's.
                let mapping = reference["function_mapping"].as_object().unwrap();
                for (i, gold) in set.names(Docs::Gold).iter().enumerate() {
                    assert_eq!(mapping[&format!("function_{}", i + 1)], gold.as_str());
                }
                let descriptions: std::collections::BTreeSet<String> = ours
                    .iter()
                    .map(|t| t["description"].as_str().unwrap().to_owned())
                    .collect();
                assert_eq!(descriptions.len(), 1);
            }
        }
    }
}

fn pool() -> Option<BlockingPool> {
    if let Err(e) = find_engine(None) {
        testkit::skip("engine", format_args!("{e}"));
        return None;
    }
    let cfg = EngineConfig {
        processes: 2,
        ..EngineConfig::default()
    };
    Some(BlockingPool::new(cfg).unwrap())
}

const START: &str = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";

#[test]
fn tools_play_legal_moves_and_off_phase_moves_are_seeded() {
    let Some(p) = pool() else { return };
    let set = ToolSet::with_movetime(ToolFamily::PhaseSpecialists, 30);
    let pos = rules::parse_fen(START).unwrap();
    for i in 0..set.len() {
        let mv = set.execute(i, &pos, 11, &p).unwrap();
        rules::parse_san(&pos, &mv.san).unwrap();
        assert_eq!(mv.random, i != 0, "tool {i}");
    }
    let a = set.execute(3, &pos, 99, &p).unwrap();
    let b = set.execute(3, &pos, 99, &p).unwrap();
    assert_eq!(a, b);
    let grad = ToolSet::with_movetime(ToolFamily::StrengthGradient, 30);
    for i in 0..grad.len() {
        let mv = grad.execute(i, &pos, 5, &p).unwrap();
        rules::parse_san(&pos, &mv.san).unwrap();
    }
    assert!(set.execute(7, &pos, 1, &p).is_err());
}

#[test]
fn exploration_episode_records_evaluations_and_tools() {
    let Some(p) = pool() else { return };
    let set = ToolSet::with_movetime(ToolFamily::StrengthGradient, 20);
    let mut cfg = EpisodeConfig::exploration(Side::Black, 20);
    cfg.eval_depth = Some(6);
    let mut calls = 0;
    let record = run_episode(&p, &set, Docs::Opaque, START, &cfg, 3, &mut |g: &Game| {
        calls += 1;
        assert_eq!(g.turn(), Side::Black);
        AgentChoice::Tool {
            name: "function_3".into(),
        }
    })
    .unwrap();
    assert_eq!(record.plies.len(), 10);
    assert_eq!(calls, 5);
    assert_eq!(record.agent_plies().count(), 5);
    assert!(record.plies.iter().all(|ply| ply.eval_after.is_some()));
    assert!(record.start_eval.is_some());
    // The 10-ply cut is a partial game, not a draw.
    assert_eq!((record.ending, record.cut_after), (None, Some(10)));
    let text = editor_text(&record, Side::Black, 20);
    assert!(
        text.contains("Ply 2: ") && text.contains("by function_3"),
        "{text}"
    );
    assert!(
        text.contains("Result: none (a partial game, stopped after 10 plies")
            && !text.contains("1/2-1/2"),
        "{text}"
    );

    // No call loses at once; an unknown tool is a failed call.
    let cfg = EpisodeConfig::test(Side::White, Strength::nominal(1800, 20));
    let lost = run_episode(&p, &set, Docs::Opaque, START, &cfg, 3, &mut |_: &Game| {
        AgentChoice::NoCall
    })
    .unwrap();
    let end = lost.ending.unwrap();
    assert_eq!(
        (end.winner, end.reason),
        (Some(Side::Black), EndReason::NoToolCall)
    );
    let failed = run_episode(&p, &set, Docs::Gold, START, &cfg, 3, &mut |_: &Game| {
        AgentChoice::Tool {
            name: "function_1".into(),
        }
    })
    .unwrap();
    assert_eq!(failed.ending.unwrap().reason, EndReason::FailedToolCall);
}

#[test]
fn a_seeded_match_reports_wins_draws_losses() {
    let Some(p) = pool() else { return };
    let strong = Strength::full(datasets::chess::engine::Limit::Depth(3));
    let result = play_match(&p, &strong, &Strength::random(), 2, 7, &[], 60).unwrap();
    assert_eq!(result.games.len(), 2);
    assert_eq!(result.wdl.games(), 2);
    assert_eq!(result.games[0].player_side, Side::White);
    assert_eq!(result.games[1].player_side, Side::Black);
    // Depth 3 against random moves should not lose.
    assert_eq!(result.wdl.losses, 0, "{result:?}");
}
