//! Chess bad input through `otb run`: an unknown tool set, a missing engine binary and
//! a positions file that is not positions -- each one error line, exit 2, and no stage
//! result in the store.

mod common;

use common::{one_error_line, otb};

fn run(dir: &std::path::Path, chess: &str, env: &[(&str, &str)]) -> std::process::Output {
    let exp = dir.join("exp.toml");
    std::fs::write(
        &exp,
        format!("name = \"c\"\n[chess]\n{chess}\n[models]\nagent = \"scripted:random\"\n"),
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
        eprintln!("skipping the positions-file case: no chess engine");
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
    // Nothing was published.
    assert!(
        !d.path().join("store").join("chess-positions").exists()
            || std::fs::read_dir(d.path().join("store").join("chess-positions"))
                .unwrap()
                .count()
                == 0
    );
}
