//! Snapshots of what a person reads: `otb status` before and after a run, `otb plan`, the BFCL
//! tables (2, 5, 6, 7, tokens) as CSV, the export's SCHEMA.md, `otb cache stats`, and
//! the one-line errors of bad input (Table 4 is snapshotted in `search_cli.rs`; chess
//! tables hold engine moves, which a time budget makes nondeterministic). Timings and temporary paths are
//! replaced by fixed tokens first. Update with `INSTA_UPDATE=always cargo test --test
//! snapshots` and review the diff of `tests/snapshots/`.

mod common;

use common::{Scratch, MODELS};

/// Replace what differs between runs and machines: the scratch directory, stage keys
/// (they hash the fixture's absolute path), and durations such as `(0.1 s)`, `12ms`.
fn normalise(text: &str, s: &Scratch) -> String {
    let dir = s.dir.path().display().to_string();
    let text = text.replace(&dir, "[DIR]");
    let mut out = String::with_capacity(text.len());
    for line in text.lines() {
        let words: Vec<&str> = line.split(' ').collect();
        let mut fixed: Vec<String> = Vec::with_capacity(words.len());
        for (i, w) in words.iter().enumerate() {
            let next = words.get(i + 1).copied().unwrap_or("");
            let unit_next = ["s", "s)", "s,", "ms", "ms)", "ms,"].contains(&next);
            let num = w.trim_start_matches('(');
            let is_key = w.len() == 12 && w.chars().all(|c| c.is_ascii_hexdigit());
            if unit_next && !num.is_empty() && num.parse::<f64>().is_ok() {
                fixed.push(format!("{}[T]", &w[..w.len() - num.len()]));
            } else if is_key {
                fixed.push("[KEY]".into());
            } else {
                fixed.push(w.to_string());
            }
        }
        out.push_str(&fixed.join(" "));
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

/// `otb plan` of the scripted BFCL grid before anything ran.
#[test]
fn plan_before_a_run() {
    let s = Scratch::new("", MODELS);
    let out = s.otb(&["plan", s.exp().to_str().unwrap()]);
    insta::assert_snapshot!("plan_empty", normalise(&common::stdout_ok(&out), &s));
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

#[test]
fn table2_of_a_half_finished_run_shows_finished_cells_and_marks_the_rest() {
    let s = Scratch::new("", MODELS);
    // Run only the `names` setting; the experiment asks for names+params too.
    let full = std::fs::read_to_string(s.exp()).unwrap();
    std::fs::write(
        s.exp(),
        full.replace(
            "settings = [\"names\", \"names+params\"]",
            "settings = [\"names\"]",
        ),
    )
    .unwrap();
    s.run();
    std::fs::write(s.exp(), &full).unwrap();
    let exp = s.exp();
    let out = s.otb(&["table", "table2", "--experiment", exp.to_str().unwrap()]);
    let text = common::stdout_ok(&out);
    assert!(text.contains("| not started | not started |"), "{text}");
    assert!(text.contains(".80/.80/.88 (n=5)"), "{text}");
    insta::assert_snapshot!("table2_half_finished", normalise(&text, &s));

    // A stage being computed (its staging directory exists, as while `otb run` is
    // at it) makes its cell `in progress`: names+params' opacify, staged by hand.
    let status = s.status();
    let short = status
        .lines()
        .find(|l| l.starts_with("would run") && l.ends_with("opacify[names+params]"))
        .and_then(|l| l.split_whitespace().nth(2))
        .unwrap_or_else(|| panic!("{status}"));
    std::fs::create_dir_all(s.store().join("tmp").join(format!("opacify-{short}-1-1"))).unwrap();
    let out = s.otb(&["table", "table2", "--experiment", exp.to_str().unwrap()]);
    let text = common::stdout_ok(&out);
    assert!(text.contains("| in progress | not started |"), "{text}");
    // `otb status` says so, and not that the stage never ran.
    let status = s.status();
    let at = status
        .find("opacify[names+params]")
        .unwrap_or_else(|| panic!("{status}"));
    let reasons: Vec<&str> = status[at..]
        .lines()
        .skip(1)
        .take_while(|l| l.trim_start().starts_with("because"))
        .collect();
    assert_eq!(
        reasons,
        ["             because in progress: being computed now, or stopped part-way (what it finished is kept)"],
        "{status}"
    );
}

#[test]
fn table2_marks_a_chain_that_is_part_done_as_in_progress() {
    let s = Scratch::new("", MODELS);
    // One ToolObserver round run; the experiment asks for three.
    let full = std::fs::read_to_string(s.exp()).unwrap();
    std::fs::write(s.exp(), full.replace("rounds = 3", "rounds = 1")).unwrap();
    s.run();
    std::fs::write(s.exp(), &full).unwrap();
    let exp = s.exp();
    let out = s.otb(&["table", "table2", "--experiment", exp.to_str().unwrap()]);
    let text = common::stdout_ok(&out);
    let run_rows: Vec<&str> = text.lines().filter(|l| l.contains("| run |")).collect();
    assert!(!run_rows.is_empty(), "{text}");
    for row in &run_rows {
        let cols: Vec<&str> = row.split('|').map(str::trim).collect();
        // Gold and Base are finished.
        assert!(
            !cols[4].contains("progress") && !cols[5].contains("progress"),
            "{row}"
        );
    }
    // On `names` ToolObserver had not converged after round 1: its cell shows round
    // 1 and says it is not final.
    let names = run_rows
        .iter()
        .find(|l| l.contains("Names Only"))
        .unwrap_or_else(|| panic!("{text}"));
    let cols: Vec<&str> = names.split('|').map(str::trim).collect();
    assert!(cols[6].ends_with("(in progress)"), "{names}");
    // `otb status` counts the rounds it cannot list yet (round 2's agent turns and
    // grading wait for its editor round, round 3 for round 2) into what is left.
    let status = s.status();
    assert!(
        status.contains(
            "not shown: up to 5 stages of later rounds (1 batch-reflect, 2 evaluate, 2 explore)"
        ),
        "{status}"
    );
    // What is listed still to run: round 2's editor round, and the summary waiting
    // for the curve's last round.
    assert!(
        status.contains("estimated time for the 2 stages still to run"),
        "{status}"
    );
    assert!(
        status.contains("missing    ------------  summarize (waits: input `names r2/toolobserver` is not computed yet)"),
        "{status}"
    );
}

/// The other renderers of a BFCL run, on a scripted grid of two agents and two
/// editors: Table 5 (rounds to convergence), Table 6 (fidelity, bag-of-words
/// embedder), Table 7 (editor ablation), the token table, the export's SCHEMA.md and
/// `otb cache stats`.
#[test]
fn bfcl_renderers_of_a_scripted_grid() {
    let s = Scratch::new(
        "",
        "agents = [\"scripted:schema\", \"scripted:empty\"]\neditors = [\"scripted:errors\", \"scripted:silent\"]\n[baselines.draft]\nembedder = \"bag-of-words\"",
    );
    s.run();
    let exp = s.exp();
    let exp = exp.to_str().unwrap();
    for table in ["table5", "table6", "table7", "tokens"] {
        let out = s.otb(&["table", table, "--format", "csv", "--experiment", exp]);
        insta::assert_snapshot!(
            format!("{table}_csv"),
            normalise(&common::stdout_ok(&out), &s)
        );
    }
    let to = s.dir.path().join("export");
    let out = s.otb(&["export", exp, "--to", to.to_str().unwrap()]);
    common::stdout_ok(&out);
    let schema = std::fs::read_to_string(to.join("SCHEMA.md")).unwrap();
    insta::assert_snapshot!("export_schema", normalise(&schema, &s));
    let out = s.otb(&["cache", "stats"]);
    insta::assert_snapshot!("cache_stats", normalise(&common::stdout_ok(&out), &s));
}
