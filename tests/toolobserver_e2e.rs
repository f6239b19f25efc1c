//! ToolObserver online mode end to end with scripted models: the agent learns
//! parameter names only from the executor's error texts, surfaced through the
//! editor's rewritten descriptions. Real stages, store and grader.

mod common;

use common::{Scratch, MODELS};

fn table_csv(s: &Scratch) -> Vec<Vec<String>> {
    let out = s.otb(&[
        "table",
        "table2",
        "--experiment",
        s.exp().to_str().unwrap(),
        "--format",
        "csv",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .skip(1)
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

fn run_e(rows: &[Vec<String>], setting: &str, method: &str) -> f64 {
    rows.iter()
        .find(|r| r[0] == setting && r[2] == method && r[3] == "run")
        .unwrap_or_else(|| panic!("no run row for {setting} {method}: {rows:?}"))[5]
        .parse()
        .unwrap()
}

#[test]
fn execution_accuracy_rises_across_rounds_and_the_loop_converges() {
    let s = Scratch::new("", MODELS);
    let run = s.run();
    let rows = table_csv(&s);
    let base = run_e(&rows, "names", "Base");
    let to = run_e(&rows, "names", "+TO");
    assert_eq!(
        base, 0.0,
        "without names the scripted agent cannot pass arguments"
    );
    assert!(to > base, "E must rise: base {base}, +TO {to}");
    // With parameter names in the schema, the agent succeeds from round 0 on.
    assert!(run_e(&rows, "names+params", "Base") > 0.0);
    // Converged before the round limit (3): the last reflect round froze everything.
    assert!(
        run.ran
            .iter()
            .any(|n| n.starts_with("batch-reflect[names r2")),
        "{:?}",
        run.ran
    );
    assert!(
        !run.ran.iter().any(|n| n.starts_with("explore[names r3")),
        "{:?}",
        run.ran
    );
    // Round 1 re-explored only the instances whose docs changed.
    let dest = s.dir.path().join("export");
    let out = s.otb(&[
        "export",
        s.exp().to_str().unwrap(),
        "--to",
        dest.to_str().unwrap(),
    ]);
    assert!(out.status.success());
}

#[test]
fn changing_the_editor_prompt_reruns_only_reflect_rounds_and_dependents() {
    let s = Scratch::new("", MODELS);
    s.run();
    let prompt = s.dir.path().join("editor.txt");
    let mut text = stages::experiment::DEFAULT_EDITOR.to_string();
    text.push_str("\nBe concise.\n");
    std::fs::write(&prompt, text).unwrap();
    let exp = std::fs::read_to_string(s.exp()).unwrap();
    std::fs::write(
        s.exp(),
        format!("{exp}\n[prompts]\neditor = \"{}\"\n", prompt.display()),
    )
    .unwrap();
    let status = s.status();
    assert!(status.contains("because params.template:"), "{status}");
    let rerun = s.run();
    assert!(!rerun.ran.is_empty());
    for n in &rerun.ran {
        assert!(
            n.starts_with("batch-reflect[")
                || n.contains(" r1")
                || n.contains(" r2")
                || n.contains(" r3")
                || n == "summarize",
            "{n} does not depend on the editor prompt"
        );
    }
    assert!(
        rerun.ran.iter().all(|n| !n.contains(" r0")),
        "{:?}",
        rerun.ran
    );
}

#[test]
fn table5_reports_rounds_to_convergence_and_writes_the_curve() {
    let s = Scratch::new("", MODELS);
    s.run();
    let out_dir = s.dir.path().join("t5");
    let out = s.otb(&[
        "table",
        "table5",
        "--experiment",
        s.exp().to_str().unwrap(),
        "--format",
        "csv",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    let names: Vec<&str> = text
        .lines()
        .find(|l| l.starts_with("names,"))
        .unwrap_or_else(|| panic!("{text}"))
        .split(',')
        .collect();
    // Fixture: every `names` instance makes a call with no arguments in round 0, gets
    // a "missing arguments" error, is rewritten in round 1 and frozen in round 2.
    assert_eq!(names[2], "5");
    assert_eq!(names[3], "2.0000", "{text}");
    assert_eq!(names[4], "5", "all converged before K");
    let curve = std::fs::read_to_string(out_dir.join("rounds.csv")).unwrap();
    assert!(
        curve.lines().any(|l| l.starts_with("names,1,5,")),
        "{curve}"
    );
    let png = std::fs::read(out_dir.join("rounds.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
}
