//! The UCI engine pool against a real engine (Debian's `stockfish`). Every
//! test skips, saying so, when no engine binary is found.

use datasets::chess::engine::{
    find_engine, BlockingPool, EngineConfig, EngineError, EngineStrength, Limit,
};
use datasets::chess::rules;

fn pool(processes: usize) -> Option<BlockingPool> {
    match find_engine(None) {
        Ok(_) => {}
        Err(e) => {
            testkit::skip("engine", format_args!("{e}"));
            return None;
        }
    }
    let cfg = EngineConfig {
        processes,
        ..EngineConfig::default()
    };
    match BlockingPool::new(cfg) {
        Ok(p) => Some(p),
        Err(e) => panic!("engine found but the pool failed: {e}"),
    }
}

const MATE_IN_ONE: &str = "6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1";
const START: &str = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1";

#[test]
fn finds_mate_and_scores_it_from_whites_view() {
    let Some(p) = pool(1) else { return };
    let mv = p
        .best_move(MATE_IN_ONE, Limit::Depth(6), EngineStrength::default())
        .unwrap();
    assert_eq!(mv.as_deref(), Some("a1a8"));
    let e = p.evaluate(MATE_IN_ONE, 6).unwrap();
    assert_eq!((e.mate, e.white_cp), (Some(1), 31999));
    // The same position with Black to move after the mate: Black is mated.
    let e = p.evaluate("R5k1/5ppp/8/8/8/8/8/6K1 b - - 1 1", 6).unwrap();
    assert_eq!(e.white_cp, 32000);
    // Black mates in one: negative from White's view.
    let e = p.evaluate("r5k1/8/8/8/8/8/5PPP/6K1 b - - 0 1", 6).unwrap();
    assert_eq!((e.mate, e.white_cp), (Some(-1), -31999));
}

#[test]
fn depth_search_is_deterministic_and_pooled() {
    let Some(p) = pool(2) else { return };
    let fens: Vec<String> = vec![
        START.into(),
        "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq - 2 3".into(),
        START.into(),
        "8/7p/2R3r1/3kp3/5p1P/5P2/7K/8 w - -".into(),
    ];
    let a = p.evaluate_many(&fens, 8);
    let b = p.evaluate_many(&fens, 8);
    let a: Vec<_> = a.into_iter().map(Result::unwrap).collect();
    let b: Vec<_> = b.into_iter().map(Result::unwrap).collect();
    assert_eq!(a, b);
    assert_eq!(a[0], a[2]);
    assert!(a[0].white_cp.abs() < 100, "{:?}", a[0]);
    assert_eq!(p.pool().searches(), 8);
}

#[test]
fn limited_strength_and_movetime_give_legal_moves() {
    let Some(p) = pool(1) else { return };
    let pos = rules::parse_fen(START).unwrap();
    let strength = EngineStrength {
        uci_elo: Some(1350),
        skill_level: None,
    };
    let mv = p
        .best_move(START, Limit::MovetimeMs(50), strength)
        .unwrap()
        .unwrap();
    rules::parse_uci(&pos, &mv).unwrap();
    let mv = p
        .best_move(START, Limit::MovetimeMs(30), EngineStrength::default())
        .unwrap()
        .unwrap();
    rules::parse_uci(&pos, &mv).unwrap();
    // Below the engine's floor: a clear error, and the process stays usable.
    let low = EngineStrength {
        uci_elo: Some(1000),
        skill_level: None,
    };
    let err = p.best_move(START, Limit::MovetimeMs(30), low).unwrap_err();
    assert!(matches!(err, EngineError::Unsupported { .. }), "{err}");
    assert!(p.evaluate(START, 4).is_ok());
    // A bad FEN is an error before any engine sees it.
    assert!(p.evaluate("8/8/8 w - -", 4).is_err());
}

#[test]
fn a_killed_engine_is_restarted_and_the_search_retried() {
    let Some(p) = pool(1) else { return };
    p.evaluate(START, 4).unwrap();
    let pids = p.pool().idle_pids();
    assert_eq!(pids.len(), 1);
    let status = std::process::Command::new("kill")
        .args(["-9", &pids[0].to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    std::thread::sleep(std::time::Duration::from_millis(100));
    let e = p.evaluate(MATE_IN_ONE, 6).unwrap();
    assert_eq!(e.white_cp, 31999);
    assert_eq!(p.pool().restarts(), 1);
    assert_ne!(p.pool().idle_pids(), pids);
}

#[test]
fn the_pool_runs_searches_concurrently() {
    let Some(p) = pool(2) else { return };
    let reqs: Vec<datasets::chess::engine::SearchRequest> = (0..4)
        .map(|_| datasets::chess::engine::SearchRequest {
            fen: START.into(),
            limit: Limit::MovetimeMs(300),
            strength: EngineStrength::default(),
            multipv: 1,
        })
        .collect();
    // Start both processes first (start-up is not what is measured).
    let warm: Vec<String> = vec![START.into(), START.into()];
    assert!(p.evaluate_many(&warm, 2).iter().all(Result::is_ok));
    assert_eq!(p.pool().idle_pids().len(), 2);
    let t = std::time::Instant::now();
    let out = p.search_many(reqs);
    let s = t.elapsed().as_secs_f64();
    assert!(out.iter().all(Result::is_ok));
    // Four 0.3 s searches on two processes: about 0.6 s, not 1.2 s.
    assert!(s < 1.1, "{s} s");
}
