//! Chess bad input through `otb run`: an unknown tool set, a missing engine binary and
//! a positions file that is not positions -- each one error line, exit 2, and no stage
//! result in the store; odd FENs in a positions file are repaired or skipped, each
//! counted in one warning line.

mod common;

use common::{one_error_line, otb};

fn run(dir: &std::path::Path, chess: &str, env: &[(&str, &str)]) -> std::process::Output {
    let exp = dir.join("exp.toml");
    std::fs::write(
        &exp,
        format!("name = \"c\"\n[chess]\n{chess}\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:silent\"\n"),
    )
    .unwrap();
    let mut c = otb();
    c.arg("--store").arg(dir.join("store")).arg("run").arg(&exp);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

#[test]
fn chess_bad_input_is_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    let err = one_error_line(&run(d.path(), "tool_sets = [\"queens\"]", &[]));
    assert!(err.contains("unknown tool set `queens`"), "{err}");
    assert!(!d.path().join("store").exists());

    let err = one_error_line(&run(
        d.path(),
        "methods = []",
        &[("OTB_CHESS_ENGINE", "/nonexistent/stockfish")],
    ));
    assert!(err.contains("chess engine"), "{err}");
    assert!(!d.path().join("store").exists());

    if datasets::chess::engine::find_engine(None).is_err() {
        testkit::skip("engine", "no chess engine");
        return;
    }
    std::fs::write(d.path().join("train.jsonl"), "{\"fen\": 42}\n").unwrap();
    std::fs::write(d.path().join("test.jsonl"), "not json\n").unwrap();
    let err = one_error_line(&run(
        d.path(),
        "methods = []\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponent_ratings = \"nominal\"",
        &[],
    ));
    assert!(err.contains("chess positions"), "{err}");
    // No training position while a method learns from them: one clear line, exit 2.
    let fen = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -";
    std::fs::write(d.path().join("train.jsonl"), "").unwrap();
    std::fs::write(
        d.path().join("test.jsonl"),
        format!("{{\"fen\": \"{fen}\", \"phase\": \"opening\", \"evaluation\": \"equal\", \"cp\": 0.0, \"mate\": null, \"depth\": 12, \"test_id\": \"t\"}}\n"),
    )
    .unwrap();
    let err = one_error_line(&run(
        d.path(),
        "methods = [\"toolobserver\"]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponent_ratings = \"nominal\"",
        &[],
    ));
    assert!(err.contains("no training positions"), "{err}");
    // Nothing was published.
    assert!(
        !d.path().join("store").join("chess-positions").exists()
            || std::fs::read_dir(d.path().join("store").join("chess-positions"))
                .unwrap()
                .count()
                == 0
    );
}

/// Killing a chess run mid-game loses only the games in flight: finished games are
/// journaled as they end, the rerun resumes them (and says how many), and the journal
/// is gone once the stage is published.
#[test]
fn killing_a_chess_run_loses_only_the_games_in_flight() {
    if datasets::chess::engine::find_engine(None).is_err() {
        testkit::skip("engine", "no chess engine");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let fens = [
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -",
        "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ -",
        "r4rk1/pp3ppp/8/8/8/8/PP3PPP/R4RK1 w - -",
        "8/5pk1/6p1/8/3R4/6P1/5PK1/2r5 w - -",
        "rnbqkb1r/pppp1ppp/5n2/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq -",
        "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq -",
    ];
    let line = |i: usize, fen: &str| {
        format!("{{\"fen\": \"{fen}\", \"phase\": \"opening\", \"evaluation\": \"equal\", \"cp\": 0.0, \"mate\": null, \"depth\": 12, \"test_id\": \"p{i}\"}}")
    };
    std::fs::write(d.path().join("train.jsonl"), line(0, fens[0]) + "\n").unwrap();
    let test: Vec<String> = fens.iter().enumerate().map(|(i, f)| line(i, f)).collect();
    std::fs::write(d.path().join("test.jsonl"), test.join("\n") + "\n").unwrap();
    let exp = d.path().join("exp.toml");
    std::fs::write(
        &exp,
        "name = \"k\"\n[chess]\ntool_sets = [\"strength_gradient\"]\nmethods = [\"base\"]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\ntest_positions = 6\nopponents = [1350]\nmirror = true\nmovetime_ms = 20\nmax_plies = 40\nopponent_ratings = \"nominal\"\nconcurrency = 1\n[models]\nagent = \"scripted:random\"\n",
    )
    .unwrap();
    let store = d.path().join("store");
    let run = || {
        let mut c = otb();
        c.arg("--store").arg(&store).arg("run").arg(&exp);
        c
    };
    let journaled = || -> usize {
        std::fs::read_dir(store.join("cache").join("journal"))
            .map(|r| {
                r.filter_map(Result::ok)
                    .filter_map(|e| std::fs::read_dir(e.path()).ok())
                    .flat_map(|r| r.filter_map(Result::ok))
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".item"))
                    .count()
            })
            .unwrap_or(0)
    };
    let mut child = run()
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let start = std::time::Instant::now();
    while journaled() < 3 {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before 3 of 12 games were journaled"
        );
        assert!(start.elapsed().as_secs() < 120, "timed out");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let kept = journaled();
    assert!((3..12).contains(&kept), "{kept} games journaled");
    // The rerun resumes every journaled game and plays the rest.
    let out = run().output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(&format!("resumed {kept} of 12 games from the journal")),
        "{stderr}"
    );
    assert_eq!(journaled(), 0, "the journal outlived the published stage");
    // And a third run has nothing to do.
    let out = run().arg("--quiet").output().unwrap();
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("0 ran"));
}

/// A user's positions file with castling rights the board contradicts (as in the
/// paper's files) and a position that cannot be one (the paper's 15 white queens):
/// the first is repaired and kept, the second skipped, each counted in one warning
/// line; the run succeeds.
#[test]
fn odd_fens_are_repaired_or_skipped_and_counted() {
    if datasets::chess::engine::find_engine(None).is_err() {
        testkit::skip("engine", "no chess engine");
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let line = |id: &str, fen: &str| {
        format!("{{\"fen\": \"{fen}\", \"phase\": \"middlegame\", \"evaluation\": \"equal\", \"cp\": 0.0, \"mate\": null, \"depth\": 12, \"test_id\": \"{id}\"}}\n")
    };
    std::fs::write(
        d.path().join("train.jsonl"),
        line("a", "r4rk1/pp3ppp/8/8/8/8/PP3PPP/R4RK1 w KQkq -"),
    )
    .unwrap();
    std::fs::write(
        d.path().join("test.jsonl"),
        line(
            "b",
            "r1b1kbnr/1pq3pp/8/2BpN3/5B2/R1BNQ2R/QQQ1QQQQ/RQQQKQQR w KQkq -",
        ) + &line("c", "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -"),
    )
    .unwrap();
    let out = run(
        d.path(),
        "methods = []\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponent_ratings = \"nominal\"",
        &[],
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains(
            "chess-positions: 1 repaired: 1 castling rights the board contradicts dropped"
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("chess-positions: 1 skipped: 1 too many pieces"),
        "{stderr}"
    );
}
