//! End-to-end tests of the stage engine through `otb run` / `status` / `export` / `gc`
//! on the mini fixture with scripted models (issue: foundation).

mod common;

use common::{one_error_line, Scratch, MODELS};
use serde::{Deserialize, Serialize};

/// A row of the exported `scores.parquet`: some of the score's columns and the labels.
#[derive(Debug, Serialize, Deserialize, pipeline::Row)]
#[row(table = "scores", doc = "exported scores")]
struct LabelledScore {
    /// Instance.
    instance_id: String,
    /// E.
    e: bool,
    /// Node.
    node: String,
    /// Method.
    method: String,
    /// Agent.
    agent: String,
}

/// The instance count of an exported summary row.
#[derive(Debug, Serialize, Deserialize, pipeline::Row)]
#[row(table = "summary", doc = "exported summary")]
struct SummaryCount {
    /// Instances.
    n: i64,
}
use std::time::{Duration, Instant};

#[test]
fn second_run_of_unchanged_experiment_executes_nothing() {
    let s = Scratch::new("", MODELS);
    let first = s.run();
    assert!(
        first.executed() > 5,
        "first run should compute the DAG: {}",
        first.stdout
    );
    assert_eq!(first.executed(), first.total);
    let second = s.run();
    assert_eq!(second.executed(), 0, "{}", second.stderr);
    assert_eq!(second.total, first.total);
    let status = s.status();
    assert!(
        !status
            .lines()
            .any(|l| l.starts_with("would run") || l.starts_with("missing")),
        "{status}"
    );
    // Each fresh stage shows the time it took when computed, and the total per stage.
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("fresh") && l.contains("bfcl-data") && l.ends_with(" s)")),
        "{status}"
    );
    let spent = status
        .lines()
        .find(|l| l.starts_with("time the fresh stages took to compute: "))
        .unwrap_or_else(|| panic!("no compute-time line in {status}"));
    assert!(
        spent.contains("explore ") && spent.contains("evaluate "),
        "{spent}"
    );
}

#[test]
fn changing_one_param_reruns_that_stage_and_dependents_and_status_names_it() {
    let s = Scratch::new("", MODELS);
    s.run();
    s.write_exp(
        "",
        "agent = \"scripted:empty\"\neditor = \"scripted:errors\"",
    );
    let status = s.status();
    assert!(
        status.contains("because params.agent: \"scripted:schema\" -> \"scripted:empty\""),
        "{status}"
    );
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("fresh") && l.contains("bfcl-data")),
        "{status}"
    );
    let rerun = s.run();
    assert!(rerun.executed() > 0);
    for node in &rerun.ran {
        assert!(
            !node.starts_with("bfcl-data") && !node.starts_with("opacify"),
            "{node} does not depend on the agent but ran"
        );
    }
    assert!(
        rerun.ran.iter().any(|n| n.starts_with("explore[names r0")),
        "{:?}",
        rerun.ran
    );
    assert!(
        rerun.ran.iter().any(|n| n.starts_with("evaluate[names r0")),
        "{:?}",
        rerun.ran
    );
}

#[test]
fn early_cutoff_keeps_downstream_fresh_when_output_is_identical() {
    let s = Scratch::new("", MODELS);
    s.run();
    // The scripted agent ignores the system prompt: explore reruns, produces the same
    // bytes, and nothing downstream of it runs.
    let prompt = s.dir.path().join("prompt.txt");
    std::fs::write(&prompt, "Always call a tool.\n").unwrap();
    let text = std::fs::read_to_string(s.exp()).unwrap();
    std::fs::write(
        s.exp(),
        format!(
            "{text}\n[prompts]\nagent_system = \"{}\"\n",
            prompt.display()
        ),
    )
    .unwrap();
    let status = s.status();
    assert!(status.contains("because params.system_prompt:"), "{status}");
    let rerun = s.run();
    assert!(!rerun.ran.is_empty());
    for node in &rerun.ran {
        assert!(
            node.starts_with("explore["),
            "only explore should rerun, got {node}"
        );
    }
}

#[test]
fn sigkill_during_publish_leaves_no_partial_entry_and_rerun_completes() {
    let s = Scratch::new("", MODELS);
    let mut child = common::otb()
        .arg("--store")
        .arg(s.store())
        .args(["run", "--quiet"])
        .arg(s.exp())
        .env("OTB_FAULT_PAUSE", "publish")
        .spawn()
        .expect("spawn otb");
    let marker = s.store().join("tmp").join("PAUSED");
    let start = Instant::now();
    while !marker.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "otb never reached the publish pause"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().expect("SIGKILL");
    child.wait().expect("reap");
    // The staging dir exists (with its manifest) but nothing is published.
    let staged: Vec<_> = std::fs::read_dir(s.store().join("tmp"))
        .unwrap()
        .flatten()
        .collect();
    assert!(
        staged.iter().any(|e| e.path().is_dir()),
        "expected a staging dir after the kill"
    );
    for stage in std::fs::read_dir(s.store()).unwrap().flatten() {
        let name = stage.file_name().to_string_lossy().into_owned();
        if ["tmp", "slots", "quarantine", "cache"].contains(&name.as_str())
            || !stage.path().is_dir()
        {
            continue;
        }
        for entry in std::fs::read_dir(stage.path()).unwrap().flatten() {
            assert!(
                entry.path().join("manifest.json").exists(),
                "partial entry {}",
                entry.path().display()
            );
        }
    }
    assert!(s.status().lines().any(|l| l.starts_with("would run")));
    let rerun = s.run();
    assert_eq!(
        rerun.executed(),
        rerun.total,
        "nothing was published before the kill"
    );
    let left: Vec<_> = std::fs::read_dir(s.store().join("tmp"))
        .unwrap()
        .flatten()
        .collect();
    assert!(
        left.is_empty(),
        "staging leftovers were not cleaned: {left:?}"
    );
    assert_eq!(s.run().executed(), 0);
}

fn entry_dirs(store: &std::path::Path, stage: &str) -> Vec<std::path::PathBuf> {
    std::fs::read_dir(store.join(stage))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect()
}

#[test]
fn truncated_parquet_is_quarantined_and_recomputed() {
    let s = Scratch::new("", MODELS);
    s.run();
    let dir = entry_dirs(&s.store(), "opacify")
        .into_iter()
        .next()
        .unwrap();
    let table = dir.join("docs.parquet");
    let bytes = std::fs::read(&table).unwrap();
    std::fs::write(&table, &bytes[..bytes.len() / 2]).unwrap();
    let status = s.status();
    assert!(
        status.contains("because stored output is corrupt"),
        "{status}"
    );
    let rerun = s.run();
    assert!(
        rerun.stderr.contains("failed verification"),
        "{}",
        rerun.stderr
    );
    assert_eq!(
        rerun
            .ran
            .iter()
            .filter(|n| n.starts_with("opacify"))
            .count(),
        1,
        "{:?}",
        rerun.ran
    );
    // Recomputed bytes are identical, so nothing downstream reruns (early cutoff).
    assert_eq!(rerun.executed(), 1, "{:?}", rerun.ran);
    assert_eq!(std::fs::read(&table).unwrap(), bytes);
    assert_eq!(
        std::fs::read_dir(s.store().join("quarantine"))
            .unwrap()
            .count(),
        1
    );
}

#[test]
fn manifest_digest_mismatch_is_detected_and_recomputed() {
    let s = Scratch::new("", MODELS);
    s.run();
    let dir = entry_dirs(&s.store(), "bfcl-data")
        .into_iter()
        .next()
        .unwrap();
    let mpath = dir.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    m["outputs"]["instances"]["digest"] = serde_json::json!("0".repeat(64));
    std::fs::write(&mpath, serde_json::to_vec_pretty(&m).unwrap()).unwrap();
    let rerun = s.run();
    assert!(
        rerun.stderr.contains("failed verification"),
        "{}",
        rerun.stderr
    );
    assert_eq!(rerun.ran, vec!["bfcl-data".to_string()]);
}

#[test]
fn bad_input_exits_2_with_one_line_and_leaves_store_untouched() {
    let s = Scratch::new("", MODELS);
    let cases: Vec<(String, &str)> = vec![
        ("[bfcl]\nsettings = [\"names\"\n".into(), "malformed TOML"),
        (
            "[bfcl]\nsettings = [\"anonymous\"]\n".into(),
            "unknown setting `anonymous`",
        ),
        (
            "[bfcl]\nbackend = \"live\"\n".into(),
            "backend = \"live\" is not available in experiments",
        ),
        (
            "[bfcl]\nbackend = \"cloud\"\n".into(),
            "unknown backend `cloud`",
        ),
        (
            "[bfcl]\ndata = \"/nonexistent/x.jsonl\"\n".into(),
            "does not exist",
        ),
        (
            "[bfcl]\n[models]\nagent = \"gpt-5\"\n".into(),
            "models.agent",
        ),
    ];
    for (text, needle) in cases {
        std::fs::write(s.exp(), text).unwrap();
        let out = s.otb(&["run", s.exp().to_str().unwrap()]);
        let err = one_error_line(&out);
        assert!(err.contains(needle), "{needle:?} not in {err}");
        assert!(!s.store().exists(), "store was created for bad input");
    }
    // An unwritable store: a path below a regular file.
    s.write_exp("", MODELS);
    let file = s.dir.path().join("afile");
    std::fs::write(&file, "x").unwrap();
    let out = common::otb()
        .arg("--store")
        .arg(file.join("store"))
        .args(["run", s.exp().to_str().unwrap()])
        .output()
        .unwrap();
    let err = one_error_line(&out);
    assert!(err.contains("not writable"), "{err}");
}

#[test]
fn export_writes_documented_flat_tables_and_gc_removes_only_unreferenced() {
    let s = Scratch::new("", MODELS);
    s.run();
    let dest = s.export();
    for t in [
        "instances",
        "docs",
        "trajectories",
        "scores",
        "edits",
        "summary",
    ] {
        assert!(dest.join(format!("{t}.parquet")).exists(), "{t} missing");
    }
    let schema = std::fs::read_to_string(dest.join("SCHEMA.md")).unwrap();
    assert!(schema.contains("| e_reason | string |"), "{schema}");
    // The stacked scores: every evaluate table's rows once, each labelled with its
    // node and method; each node has as many rows as the summary counts instances.
    let scores: Vec<LabelledScore> =
        pipeline::table::read_rows(&dest.join("scores.parquet")).unwrap();
    let counts: std::collections::BTreeSet<i64> =
        pipeline::table::read_rows::<SummaryCount>(&dest.join("summary.parquet"))
            .unwrap()
            .iter()
            .map(|r| r.n)
            .collect();
    let mut per_node = std::collections::BTreeMap::<&str, i64>::new();
    for r in &scores {
        *per_node.entry(r.node.as_str()).or_default() += 1;
    }
    assert!(per_node.len() >= 4, "{per_node:?}");
    let n = *counts.iter().next().unwrap();
    assert!(
        counts.len() == 1 && per_node.values().all(|c| *c == n),
        "{per_node:?} vs {counts:?}"
    );
    assert!(
        scores.iter().all(|r| r.node.starts_with("evaluate")),
        "{scores:?}"
    );
    for m in ["gold", "base", "toolobserver"] {
        assert!(scores.iter().any(|r| r.method == m), "no {m} rows");
    }
    assert!(scores
        .iter()
        .all(|r| !r.instance_id.is_empty() && r.agent.starts_with("scripted:")));

    // Make an unreferenced entry by changing the agent, then gc keeping the new experiment.
    s.write_exp(
        "",
        "agent = \"scripted:empty\"\neditor = \"scripted:errors\"",
    );
    s.run();
    let out = s.otb(&["gc", "--keep", s.exp().to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("removed ") && text.contains("explore"),
        "{text}"
    );
    assert_eq!(
        s.run().executed(),
        0,
        "gc removed something the experiment uses"
    );
    let out = s.otb(&["gc", "--keep", s.exp().to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("removed 0 entries"));
}

#[test]
fn malformed_data_or_recorded_files_are_bad_input_before_the_store_is_touched() {
    let s = Scratch::new("", MODELS);
    let bad = s.dir.path().join("bad.jsonl");
    std::fs::write(&bad, "{\"id\": \"exec_simple_0\", \"question\": \n").unwrap();
    let text = std::fs::read_to_string(s.exp()).unwrap();
    let data_line = text
        .lines()
        .find(|l| l.starts_with("data = "))
        .unwrap()
        .to_string();
    std::fs::write(
        s.exp(),
        text.replace(&data_line, &format!("data = \"{}\"", bad.display())),
    )
    .unwrap();
    let err = common::one_error_line(&s.otb(&["run", s.exp().to_str().unwrap()]));
    assert!(err.contains("bfcl.data"), "{err}");
    assert!(!s.store().exists(), "store was created for bad input");

    let s = Scratch::new("", MODELS);
    let rec = s.dir.path().join("recorded.json");
    std::fs::write(&rec, "[not json").unwrap();
    let text = std::fs::read_to_string(s.exp()).unwrap().replace(
        "rounds = 3\n",
        &format!(
            "rounds = 3\nbackend = \"recorded\"\nrecorded = \"{}\"\n",
            rec.display()
        ),
    );
    std::fs::write(s.exp(), text).unwrap();
    let err = common::one_error_line(&s.otb(&["run", s.exp().to_str().unwrap()]));
    assert!(err.contains("bfcl.recorded"), "{err}");
    assert!(!s.store().exists(), "store was created for bad input");
}
