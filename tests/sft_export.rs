//! `otb export --sft`: ToolObserver's runs as Trace-Free+ training data. On the
//! scripted mini grid (the scripted editor learns parameter names from errors, which
//! turns wrong instances right), the pairs are exactly the tools this test counts
//! itself from the stored outputs; the chat-format JSONL parses with Python's `json`
//! and the Parquet files with pyarrow; an unfinished run is refused.

mod common;

use common::{fixture, one_error_line, stdout_ok, Scratch};
use stages::rows::{DocRow, ScoreRow};
use std::collections::BTreeMap;

/// Improved tools counted from the run's outputs: per curve, each instance whose Base
/// round-0 E was false and whose last ToolObserver round's E is true, the tools whose
/// description differs from the opacified one.
fn improved_tools(s: &Scratch) -> usize {
    let exp = stages::driver::load(&s.exp()).unwrap();
    let store = pipeline::Store::open(&s.store(), pipeline::Access::ReadOnly).unwrap();
    let (run, _) = stages::driver::locate(&exp, &store).unwrap();
    let mut count = 0;
    for setting in ["names", "names+params"] {
        let rows = |stage: &str, method: &str, last: bool| {
            let mut outs: Vec<_> = run
                .by_stage(stage)
                .filter(|o| o.setting == setting && o.method == method)
                .collect();
            outs.sort_by_key(|o| o.round);
            let o = if last { outs.last() } else { outs.first() };
            o.map(|o| o.entry.clone())
        };
        let Some(reflect) = rows("batch-reflect", "toolobserver", true) else {
            continue;
        };
        let finals: Vec<DocRow> = reflect.read().unwrap();
        let opaque: Vec<DocRow> = run
            .by_stage("opacify")
            .find(|o| o.setting == setting)
            .unwrap()
            .entry
            .read()
            .unwrap();
        let before: Vec<ScoreRow> = rows("evaluate", "base", false).unwrap().read().unwrap();
        // A curve whose first reflection froze every instance has no later round.
        let Some(after) = rows("evaluate", "toolobserver", true) else {
            continue;
        };
        let after: Vec<ScoreRow> = after.read().unwrap();
        let e: BTreeMap<&str, (bool, bool)> = before
            .iter()
            .map(|b| {
                let a = after
                    .iter()
                    .find(|a| a.instance_id == b.instance_id)
                    .unwrap();
                (b.instance_id.as_str(), (b.e, a.e))
            })
            .collect();
        for d in &finals {
            if e.get(d.instance_id.as_str()) != Some(&(false, true)) {
                continue;
            }
            let o = opaque
                .iter()
                .find(|o| o.instance_id == d.instance_id)
                .unwrap();
            let desc =
                |t: &serde_json::Value| t["description"].as_str().unwrap_or("").trim().to_string();
            for t in d.tools.as_array().unwrap() {
                let was = o
                    .tools
                    .as_array()
                    .unwrap()
                    .iter()
                    .find(|x| x["name"] == t["name"])
                    .unwrap();
                if desc(t) != desc(was) && !desc(t).is_empty() {
                    count += 1;
                }
            }
        }
    }
    count
}

/// The Python with pyarrow: `OTB_PYTHON`, else `python3`; `None` (saying so, or
/// failing when required) when it has no pyarrow.
fn python() -> Option<String> {
    let py = std::env::var("OTB_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = std::process::Command::new(&py)
        .args(["-c", "import pyarrow.parquet"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        testkit::skip("pyarrow", "no Python with pyarrow (set OTB_PYTHON)");
        return None;
    }
    Some(py)
}

#[test]
fn sft_pairs_are_the_improved_tools_and_python_reads_them() {
    let s = Scratch::new("", common::MODELS);
    std::fs::write(
        s.exp(),
        format!(
            "name = \"mini\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\", \"names+params\"]\nmethods = [\"base\", \"toolobserver\"]\nrounds = 3\n[models]\n{}\n",
            fixture("mini_bfcl.jsonl").display(),
            common::MODELS
        ),
    )
    .unwrap();
    let sft = s.dir.path().join("sft");
    let exp = s.exp();
    let args = [
        "export",
        exp.to_str().unwrap(),
        "--sft",
        sft.to_str().unwrap(),
    ];
    // Before the run: refused, nothing written.
    let err = one_error_line(&s.otb(&args));
    assert!(err.contains("is not complete"), "{err}");
    assert!(!sft.exists());

    s.run();
    let listed = stdout_ok(&s.otb(&args));
    for f in [
        "pairs.parquet",
        "examples.parquet",
        "stage1.jsonl",
        "stage3.jsonl",
        "SCHEMA.md",
    ] {
        assert!(listed.contains(f), "{listed}");
    }
    let pairs: Vec<stages::tables::sft::SftPair> =
        pipeline::table::read_rows(&sft.join("pairs.parquet")).unwrap();
    let expected = improved_tools(&s);
    assert!(expected > 0, "the scripted editor improves some instance");
    assert_eq!(pairs.len(), expected, "{pairs:#?}");
    assert!(pairs.iter().all(|p| p.environment == "bfcl"
        && p.target.contains("Parameters: ")
        && p.score_before == 0.0
        && p.score_after == 1.0));
    // Trace-based examples show the instance's round-0 turn.
    assert!(
        pairs.iter().any(|p| p.traces.contains("missing")),
        "{pairs:#?}"
    );

    let Some(py) = python() else {
        return;
    };
    let script = r#"
import json, sys, pyarrow.parquet as pq
d = sys.argv[1]
counts = []
for k in (1, 2, 3):
    n = based = 0
    for line in open(f"{d}/stage{k}.jsonl"):
        e = json.loads(line)
        assert [m["role"] for m in e["messages"]] == ["user", "assistant"], e
        assert json.loads(e["messages"][1]["content"])["description"]
        n += 1
        based += e["form"] == "trace-based"
    counts.append((n, based))
pairs = pq.read_table(f"{d}/pairs.parquet")
examples = pq.read_table(f"{d}/examples.parquet")
print(json.dumps({"pairs": pairs.num_rows, "examples": examples.num_rows, "stages": counts}))
"#;
    let out = std::process::Command::new(py)
        .args(["-c", script, sft.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let n = pairs.len() as u64;
    assert_eq!(v["pairs"], n);
    assert_eq!(v["examples"], 3 * n);
    // The curriculum: every pair once per stage; the trace-based share falls to none.
    let stages = v["stages"].as_array().unwrap();
    let based: Vec<u64> = stages.iter().map(|s| s[1].as_u64().unwrap()).collect();
    assert!(stages.iter().all(|s| s[0] == n));
    assert!(
        based[0] >= based[1] && based[1] >= based[2] && based[2] == 0,
        "{based:?}"
    );
    assert!(based[0] > 0);
}
