//! Snapshots of what a person reads: `otb status` before and after a run, Table 2 as
//! CSV, and the one-line errors of bad input. Timings and temporary paths are
//! replaced by fixed tokens first. Update with `INSTA_UPDATE=always cargo test --test
//! snapshots` and review the diff of `tests/snapshots/`.

mod common;

use common::{Scratch, MODELS};

/// Replace what differs between runs: the scratch directory, and durations such as
/// `12ms`, `1.5s`, `0.0 s`.
fn normalise(text: &str, s: &Scratch) -> String {
    let dir = s.dir.path().display().to_string();
    let text = text.replace(&dir, "[DIR]");
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let words: Vec<String> = line
            .split(' ')
            .map(|w| {
                let digits = w.trim_start_matches(|c: char| c.is_ascii_digit() || c == '.');
                let is_num = digits.len() < w.len();
                if is_num && matches!(digits, "ms" | "s" | "s," | "ms," | "s)" | "ms)") {
                    format!("[T]{}", digits.trim_start_matches(['m', 's']))
                } else {
                    w.to_string()
                }
            })
            .collect();
        out.push_str(&words.join(" "));
        out.push('\n');
    }
    out
}

#[test]
fn status_before_and_after_a_run() {
    let s = Scratch::new("", MODELS);
    insta::assert_snapshot!("status_empty", normalise(&s.status(), &s));
    s.run();
    insta::assert_snapshot!("status_done", normalise(&s.status(), &s));
}

#[test]
fn table2_of_a_scripted_run() {
    let s = Scratch::new("", MODELS);
    s.run();
    let exp = s.exp();
    let out = s.otb(&[
        "table",
        "table2",
        "--format",
        "csv",
        "--experiment",
        exp.to_str().unwrap(),
    ]);
    insta::assert_snapshot!("table2_csv", common::stdout_ok(&out));
    let out = s.otb(&["table", "table2", "--experiment", exp.to_str().unwrap()]);
    insta::assert_snapshot!("table2_md", normalise(&common::stdout_ok(&out), &s));
}

#[test]
fn error_lines_of_bad_input() {
    let s = Scratch::new("", MODELS);
    let mut lines = Vec::new();
    for (name, text) in [
        ("unknown setting", "[bfcl]\nsettings = [\"nmaes\"]\n"),
        ("malformed toml", "[bfcl]\nsettings = [\"names\"\n"),
        ("no environment", "name = \"x\"\n"),
        (
            "unknown scripted agent",
            "[bfcl]\n[models]\nagent = \"scripted:nope\"\n",
        ),
        ("bad model grammar", "[bfcl]\n[models]\nagent = \"gpt-5\"\n"),
        ("bad outcome", "[bfcl]\noutcome = \"gold\"\n"),
    ] {
        let p = s.dir.path().join("bad.toml");
        std::fs::write(&p, text).unwrap();
        let out = s.otb(&["run", p.to_str().unwrap()]);
        let line = common::one_error_line(&out);
        lines.push(format!("{name}: {}", line.trim_end()));
    }
    assert!(!s.store().exists(), "bad input touched the store");
    insta::assert_snapshot!("error_lines", normalise(&lines.join("\n"), &s));
}
