//! `otb export --sft`: ToolObserver's runs as Trace-Free+ training data. On the
//! scripted mini grid (the scripted editor learns parameter names from errors, which
//! turns wrong instances right), the pairs are exactly the tools this test counts
//! itself from the stored outputs; the chat-format JSONL parses with Python's `json`
//! and the Parquet files with pyarrow; the default curriculum is 2 stages, 10% then
//! 90% trace-free, and its written shares are exact; `holdout.json` lists the tool
//! sets trained on and held out; an unfinished run and a bad `--holdout` are refused;
//! an experiment whose `[baselines.tracefree] trained_on` overlaps a tool set it
//! scores Trace-Free+ on is refused before anything is written. (Chess and search
//! selection on the training split: `stages::tables::sft` unit tests.)

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
    let run = stages::driver::locate(&exp, &store).unwrap().run;
    let mut count = 0;
    for setting in ["names", "names+params"] {
        let rows = |stage: &str, method: &str, last: bool| {
            let mut outs: Vec<_> = run
                .by_stage(stage)
                .filter(|o| o.cell.setting == setting && o.cell.method_name() == method)
                .collect();
            outs.sort_by_key(|o| o.cell.round);
            let o = if last { outs.last() } else { outs.first() };
            o.map(|o| o.entry.clone())
        };
        let Some(reflect) = rows("batch-reflect", "toolobserver", true) else {
            continue;
        };
        let finals: Vec<DocRow> = reflect.read().unwrap();
        let opaque = common::opaque_docs(&run, setting);
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
        "stage2.jsonl",
        "holdout.json",
        "curriculum.json",
        "SCHEMA.md",
    ] {
        assert!(listed.contains(f), "{listed}");
    }
    // The paper's best schedule by default: 2 stages.
    assert!(!listed.contains("stage3.jsonl"), "{listed}");
    let json = |dir: &std::path::Path, f: &str| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(dir.join(f)).unwrap()).unwrap()
    };
    let holdout = json(&sft, "holdout.json");
    assert_eq!(
        holdout["tool_sets"],
        serde_json::json!(["bfcl"]),
        "{holdout}"
    );
    assert_eq!(
        holdout["trained_on"],
        serde_json::json!(["bfcl"]),
        "{holdout}"
    );
    assert_eq!(holdout["held_out"], serde_json::json!([]), "{holdout}");
    let pairs: Vec<stages::tables::sft::SftPair> =
        pipeline::table::read_rows(&sft.join("pairs.parquet")).unwrap();
    let expected = improved_tools(&s);
    assert!(expected > 0, "the scripted editor improves some instance");
    assert_eq!(pairs.len(), expected, "{pairs:#?}");
    assert!(pairs.iter().all(|p| p.environment == "bfcl"
        && p.tool_set == "bfcl"
        && !p.held_out
        && p.selected_on == "instance"
        && p.target.contains("Parameters: ")
        && p.score_before == 0.0
        && p.score_after == 1.0));
    // Trace-based examples show the instance's round-0 turn.
    assert!(
        pairs.iter().any(|p| p.traces.contains("missing")),
        "{pairs:#?}"
    );

    // A fixed number of samples per stage: the written shares are exact.
    let sft10 = s.dir.path().join("sft10");
    let mut args10 = args.to_vec();
    args10[3] = sft10.to_str().unwrap();
    args10.extend(["--samples", "10", "--seed", "3"]);
    stdout_ok(&s.otb(&args10));
    assert_eq!(stage_counts(&sft10, 1), (10, 9), "10% trace-free");
    assert_eq!(stage_counts(&sft10, 2), (10, 1), "90% trace-free");
    let cur = json(&sft10, "curriculum.json");
    assert_eq!(cur["stages"][0]["trace_free"], 1, "{cur}");
    assert_eq!(cur["stages"][1]["trace_free"], 9, "{cur}");
    // Default: one sample per pair in each stage, round(10%) of them trace-free.
    let n = pairs.len();
    let free1 = (n as f64 * 0.1).round() as usize;
    assert_eq!(stage_counts(&sft, 1), (n, n - free1));
    assert_eq!(
        stage_counts(&sft, 2),
        (n, n - (n as f64 * 0.9).round() as usize)
    );

    // --holdout bfcl: every pair is held out, no stage file has an example, and
    // holdout.json says so.
    let held = s.dir.path().join("held");
    let mut held_args = args.to_vec();
    held_args[3] = held.to_str().unwrap();
    held_args.extend(["--holdout", "bfcl"]);
    stdout_ok(&s.otb(&held_args));
    let h = json(&held, "holdout.json");
    assert_eq!(h["held_out"], serde_json::json!(["bfcl"]), "{h}");
    assert_eq!(h["trained_on"], serde_json::json!([]), "{h}");
    let held_pairs: Vec<stages::tables::sft::SftPair> =
        pipeline::table::read_rows(&held.join("pairs.parquet")).unwrap();
    assert!(held_pairs.len() == n && held_pairs.iter().all(|p| p.held_out));
    assert_eq!(stage_counts(&held, 1), (0, 0));
    // A tool set the run does not have: refused, nothing written.
    let bad = s.dir.path().join("bad");
    let mut bad_args = args.to_vec();
    bad_args[3] = bad.to_str().unwrap();
    bad_args.extend(["--holdout", "chess"]);
    let err = one_error_line(&s.otb(&bad_args));
    assert!(err.contains("--holdout `chess`"), "{err}");
    assert!(!bad.exists());

    let Some(py) = python() else {
        return;
    };
    let script = r#"
import json, sys, pyarrow.parquet as pq
d = sys.argv[1]
counts = []
for k in (1, 2):
    n = based = 0
    for line in open(f"{d}/stage{k}.jsonl"):
        e = json.loads(line)
        assert [m["role"] for m in e["messages"]] == ["system", "user", "assistant"], e
        assert json.loads(e["messages"][2]["content"])["description"]
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
    let v: serde_json::Value = serde_json::from_str(&stdout_ok(&out)).unwrap();
    let n = pairs.len() as u64;
    assert_eq!(v["pairs"], n);
    assert_eq!(v["examples"], 2 * n);
    // The curriculum: n samples per stage, 10% then 90% trace-free.
    let stages = v["stages"].as_array().unwrap();
    let based: Vec<u64> = stages.iter().map(|s| s[1].as_u64().unwrap()).collect();
    assert!(stages.iter().all(|s| s[0] == n));
    assert_eq!(
        based,
        [n - free1 as u64, n - (n as f64 * 0.9).round() as u64]
    );
}

/// Examples and trace-based examples in `stage<k>.jsonl` of `dir`.
fn stage_counts(dir: &std::path::Path, k: usize) -> (usize, usize) {
    let text = std::fs::read_to_string(dir.join(format!("stage{k}.jsonl"))).unwrap();
    let lines: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let based = lines.iter().filter(|e| e["form"] == "trace-based").count();
    // A trace-based request shows the pair's recorded calls; a trace-free one does
    // not; a pair without any is only written trace-free.
    let pairs: Vec<stages::tables::sft::SftPair> =
        pipeline::table::read_rows(&dir.join("pairs.parquet")).unwrap();
    for e in &lines {
        let roles: Vec<&str> = e["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["role"].as_str().unwrap())
            .collect();
        assert_eq!(roles, ["system", "user", "assistant"]);
        let prompt = e["messages"][1]["content"].as_str().unwrap();
        let p = pairs
            .iter()
            .find(|p| {
                p.instance_id == e["instance_id"]
                    && p.tool == e["tool"]
                    && p.setting == e["setting"]
            })
            .unwrap();
        let shows = !p.traces.is_empty() && prompt.contains(&p.traces);
        assert_eq!(e["form"] == "trace-based", shows, "{prompt}");
    }
    (lines.len(), based)
}

/// A generator trained on a tool set is not scored on it: `[baselines.tracefree]
/// trained_on` naming a tool set the experiment scores Trace-Free+ on is refused
/// with one line and exit 2 before the store is touched; naming another is fine.
#[test]
fn a_generator_is_not_scored_on_the_tool_sets_it_was_trained_on() {
    let s = Scratch::new("", common::MODELS);
    let write = |trained_on: &str| {
        std::fs::write(
            s.exp(),
            format!(
                "name = \"tf\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\"]\nmethods = [\"base\", \"tracefree\"]\n[baselines.tracefree]\ntrained_on = [{trained_on}]\n[models]\n{}\n",
                fixture("mini_bfcl.jsonl").display(),
                common::MODELS
            ),
        )
        .unwrap();
    };
    let exp = s.exp();
    write("\"chess:phase_specialists\", \"bfcl\"");
    let err = one_error_line(&s.otb(&["run", exp.to_str().unwrap()]));
    assert!(err.contains("trained_on lists `bfcl`"), "{err}");
    assert!(!s.store().exists(), "nothing written");
    let err = one_error_line(&s.otb(&["plan", exp.to_str().unwrap()]));
    assert!(err.contains("trained_on"), "{err}");
    write("\"chess:phase_specialists\"");
    stdout_ok(&s.otb(&["plan", exp.to_str().unwrap()]));
}

/// On an offline (search) run the export names the tool set `search:<set>`: a
/// holdout by environment or by tool set resolves to it, one the run lacks is
/// refused. (Which chess and search pairs are selected, on training play only: the
/// `stages::tables::sft` unit tests, whose scores a scripted run cannot steer.)
#[test]
fn an_offline_run_names_its_tool_sets() {
    let s = Scratch::new("", common::MODELS);
    std::fs::write(
        s.exp(),
        "name = \"search\"\n[search]\ntool_sets = [\"domains\"]\nmethods = [\"base\", \"toolobserver\"]\ntrain_questions = 2\ntest_questions = 2\nmax_turns = 2\nrounds = 2\nbatch_size = 2\n[models]\nagent = \"scripted:search-oracle\"\neditor = \"scripted:observer\"\n",
    )
    .unwrap();
    s.run();
    let exp = s.exp();
    for (holdout, held) in [
        ("search", "search:domains"),
        ("search:domains", "search:domains"),
        ("domains", "search:domains"),
    ] {
        let out = s.dir.path().join(holdout.replace(':', "_"));
        stdout_ok(&s.otb(&[
            "export",
            exp.to_str().unwrap(),
            "--sft",
            out.to_str().unwrap(),
            "--holdout",
            holdout,
        ]));
        let h: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("holdout.json")).unwrap())
                .unwrap();
        assert_eq!(h["tool_sets"], serde_json::json!(["search:domains"]), "{h}");
        assert_eq!(h["held_out"], serde_json::json!([held]), "{h}");
        assert_eq!(h["trained_on"], serde_json::json!([]), "{h}");
    }
    let out = s.dir.path().join("bad");
    let err = one_error_line(&s.otb(&[
        "export",
        exp.to_str().unwrap(),
        "--sft",
        out.to_str().unwrap(),
        "--holdout",
        "bfcl",
    ]));
    assert!(err.contains("its tool sets: search:domains"), "{err}");
    assert!(!out.exists());
}
