//! Chess bad input through `otb run`: an unknown tool set, a missing engine binary and
//! a positions file that is not positions (a garbage line, an id twice, no test
//! position) -- each one error line, exit 2, and no stage result in the store (a
//! positions file: no store at all); odd FENs in a positions file are repaired or
//! skipped, each counted in one warning line, a long one quoted in part. An engine that
//! dies is restarted or one error line, never a SIGPIPE; a closed stdout ends otb
//! quietly.

mod common;

use common::{chess_engine, one_error_line, otb, staging};

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

    let Some(_) = chess_engine() else { return };
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
    let Some(_) = chess_engine() else { return };
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
    let exp = common::exp_file(
        d.path(),
        "name = \"k\"\n[chess]\ntool_sets = [\"strength_gradient\"]\nmethods = [\"base\"]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\ntest_positions = 6\nopponents = [1350]\nmirror = true\nmovetime_ms = 20\nmax_plies = 40\nopponent_ratings = \"nominal\"\nconcurrency = 1\n[models]\nagent = \"scripted:random\"\n",
    );
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
    let Some(_) = chess_engine() else { return };
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

/// `[chess]` keys over the files `train.jsonl` and `test.jsonl` of the test's folder,
/// played with `engine` (a path relative to that folder).
fn files_table(engine: &str) -> String {
    format!(
        "tool_sets = [\"strength_gradient\"]\nmethods = [\"base\"]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponents = [1350]\nmovetime_ms = 20\nmax_plies = 2\nopponent_ratings = \"nominal\"\nconcurrency = 1\nengine = \"{engine}\""
    )
}

/// A positions row (`test_id` = `id`) of the start position or `fen`.
fn position_line(id: &str, fen: Option<&str>) -> String {
    let fen = fen.unwrap_or("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -");
    format!("{{\"fen\": \"{fen}\", \"phase\": \"opening\", \"evaluation\": \"equal\", \"cp\": 0.0, \"mate\": null, \"depth\": 12, \"test_id\": \"{id}\"}}\n")
}

/// An executable shell script `name` in `dir` (a fake UCI engine).
fn script(dir: &std::path::Path, name: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A chess engine that exits at once, or one that answers a search and dies (its
/// input closed first, so the next write to it fails at once): a write to the dead
/// engine's pipe is an error the engine code handles (the process restarted, or the
/// stage failed with one line), never a SIGPIPE that kills otb and leaves a staging
/// folder behind.
#[test]
fn a_dead_engine_is_restarted_or_one_error_line_never_a_signal() {
    use std::os::unix::process::ExitStatusExt;
    let d = tempfile::tempdir().unwrap();
    script(d.path(), "exits.sh", "#!/bin/sh\nexit 0\n");
    script(
        d.path(),
        "one_search.sh",
        "#!/bin/sh\nmove=e2e4\nwhile read -r line; do\n  case \"$line\" in\n    uci) echo uciok ;;\n    isready) echo readyok ;;\n    \"position fen \"*\" b \"*) move=e7e5 ;;\n    go*) exec 0<&-; echo \"info depth 1 score cp 0\"; echo \"bestmove $move\"; exit 0 ;;\n  esac\ndone\n",
    );
    std::fs::write(d.path().join("train.jsonl"), position_line("a", None)).unwrap();
    std::fs::write(d.path().join("test.jsonl"), position_line("b", None)).unwrap();
    let store = d.path().join("store");

    // Dead from the start: the stage fails with one line naming the engine.
    let out = run(d.path(), &files_table("./exits.sh"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), None, "killed by a signal: {stderr}");
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with("otb: error: ") && last.contains("exits.sh"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(staging(&store), Vec::<String>::new());

    // Dead after each search: every search after the first finds it dead, restarts it
    // and goes on; the 2-ply game ends and the run succeeds.
    std::fs::remove_dir_all(&store).unwrap();
    let out = run(d.path(), &files_table("./one_search.sh"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), None, "killed by a signal: {stderr}");
    assert!(out.status.success(), "{stderr}");
    assert_eq!(staging(&store), Vec::<String>::new());
}

/// otb's stdout is a pipe whose reader is gone (`otb plan ... | head -1` after head
/// exited): otb ends quietly (exit 0, nothing on stderr), as other Unix tools do.
#[test]
fn a_closed_stdout_ends_otb_quietly() {
    use std::os::fd::{FromRawFd, OwnedFd};
    let d = tempfile::tempdir().unwrap();
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just created and are owned here alone.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    let exp = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/scripted.toml");
    let out = otb()
        .arg("--store")
        .arg(d.path().join("store"))
        .arg("plan")
        .arg(exp)
        .stdout(std::process::Stdio::from(write))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{:?}: {stderr}", out.status);
    assert_eq!(stderr, "");
}

/// Two rows of one `test_id` share a game's journal entry (a resumed run then differs
/// from an uninterrupted one): refused with the id and both lines, before the store is
/// touched.
#[test]
fn duplicate_position_ids_are_refused_before_the_store_is_touched() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("train.jsonl"), position_line("a", None)).unwrap();
    let fen = "r1bqkbnr/pppp1ppp/2n5/4p3/4P3/5N2/PPPP1PPP/RNBQKB1R w KQkq -";
    std::fs::write(
        d.path().join("test.jsonl"),
        position_line("p0", None)
            + &position_line("p1", Some(fen))
            + &position_line("p0", Some(fen)),
    )
    .unwrap();
    let err = one_error_line(&run(d.path(), &files_table("/usr/games/stockfish"), &[]));
    assert!(
        err.contains("test.jsonl:3") && err.contains("\"p0\"") && err.contains("line 1"),
        "{err}"
    );
    assert!(!d.path().join("store").exists());
}

/// A line that is not a position (in the test file, or in a training file no method
/// learns from) is refused with its file and line before the store is touched, as
/// BFCL's data files are; so is a test file with no position (0 games: a Table 3 of
/// nothing).
#[test]
fn positions_files_are_checked_whole_before_the_store_is_touched() {
    let d = tempfile::tempdir().unwrap();
    let engine = files_table("/usr/games/stockfish");
    for (train, test, expect) in [
        (
            position_line("a", None),
            position_line("b", None) + "not json\n",
            "test.jsonl:2",
        ),
        (
            "{\"fen\": 42}\n".to_string(),
            position_line("b", None),
            "train.jsonl:1",
        ),
        (position_line("a", None), String::new(), "no test positions"),
        (
            position_line("a", None),
            "\n\n".to_string(),
            "no test positions",
        ),
    ] {
        std::fs::write(d.path().join("train.jsonl"), &train).unwrap();
        std::fs::write(d.path().join("test.jsonl"), &test).unwrap();
        let err = one_error_line(&run(d.path(), &engine, &[]));
        assert!(err.contains(expect), "{expect}: {err}");
        assert!(!d.path().join("store").exists(), "{expect}: {err}");
    }
}

/// A 5 MB value in a positions file is never echoed whole: an error line or a skip
/// warning quotes about 200 characters of it, and says how long it was.
#[test]
fn an_oversized_fen_is_quoted_in_part() {
    let d = tempfile::tempdir().unwrap();
    script(d.path(), "exits.sh", "#!/bin/sh\nexit 0\n");
    let huge = "r".repeat(5_000_000);
    std::fs::write(d.path().join("train.jsonl"), position_line("a", None)).unwrap();
    // Not a row (a string where the depth goes): the error line.
    std::fs::write(
        d.path().join("test.jsonl"),
        format!("{{\"fen\": \"x\", \"phase\": \"opening\", \"evaluation\": \"equal\", \"cp\": 0.0, \"mate\": null, \"depth\": \"{huge}\", \"test_id\": \"b\"}}\n"),
    )
    .unwrap();
    let err = one_error_line(&run(d.path(), &files_table("./exits.sh"), &[]));
    assert!(err.len() < 1000, "an error line of {} bytes", err.len());
    assert!(err.contains("test.jsonl:1"), "{err}");
    assert!(err.contains(" characters, "), "{err}");
    // A row whose FEN cannot be a position: skipped, the warning quotes part of it.
    std::fs::write(
        d.path().join("test.jsonl"),
        position_line("b", Some(&huge)) + &position_line("c", None),
    )
    .unwrap();
    let out = run(d.path(), &files_table("./exits.sh"), &[]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.len() < 4000, "stderr of {} bytes", stderr.len());
    let warning = stderr
        .lines()
        .find(|l| l.contains("skipped"))
        .unwrap_or_else(|| panic!("no skip warning: {stderr}"));
    assert!(warning.contains("[5000000 characters, "), "{warning}");
}

/// A chess experiment whose baselines ask the editor checks the editor as an editor
/// before anything runs (it did only with ToolObserver among the methods).
#[test]
fn baselines_alone_check_the_editor_before_the_store() {
    let d = tempfile::tempdir().unwrap();
    let exp = common::exp_file(
        d.path(),
        "name = \"c\"\n[chess]\nmethods = [\"easytool\"]\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:random\"\n",
    );
    let out = otb()
        .arg("--store")
        .arg(d.path().join("store"))
        .arg("run")
        .arg(&exp)
        .output()
        .unwrap();
    let err = one_error_line(&out);
    assert!(err.contains("scripted editor"), "{err}");
    assert!(!d.path().join("store").exists());
}
