//! `otb plan`: the experiment's DAG as a value, printed before anything runs (text,
//! JSON, Graphviz), read from the store and never written to it.

mod common;

use common::{otb, stdout_ok, Scratch, MODELS};
use std::collections::BTreeSet;

fn plan_json(s: &Scratch) -> serde_json::Value {
    let out = s.otb(&["plan", s.exp().to_str().unwrap(), "--format", "json"]);
    serde_json::from_str(&stdout_ok(&out)).expect("plan JSON")
}

fn nodes_in(plan: &serde_json::Value, pred: &dyn Fn(&str) -> bool) -> BTreeSet<String> {
    plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| pred(n["state"].as_str().unwrap()))
        .map(|n| n["node"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn the_plan_of_an_empty_store_is_what_the_run_computes() {
    let s = Scratch::new("", MODELS);
    let before = plan_json(&s);
    assert!(!s.store().exists(), "plan wrote the store");
    let nodes = before["nodes"].as_array().unwrap();
    // Every node is listed, each once, with edges to nodes of the plan.
    let names: BTreeSet<&str> = nodes.iter().map(|n| n["node"].as_str().unwrap()).collect();
    assert_eq!(names.len(), nodes.len(), "a node listed twice");
    for n in nodes {
        for i in n["inputs"].as_array().unwrap() {
            assert!(names.contains(i["node"].as_str().unwrap()), "{n}");
        }
    }
    // Only nodes without inputs can be keyed before anything ran.
    for n in nodes {
        let keyed = !n["key"].is_null();
        assert_eq!(keyed, n["inputs"].as_array().unwrap().is_empty(), "{n}");
    }
    // Each node of the grid says which cell it belongs to.
    let cell = |name: &str| -> serde_json::Value {
        nodes
            .iter()
            .find(|n| n["node"] == name)
            .unwrap_or_else(|| panic!("no {name}"))["cell"]
            .clone()
    };
    assert!(cell("bfcl-data").is_null());
    let c = cell("evaluate[names r1]");
    assert_eq!(
        (&c["setting"], &c["method"], &c["round"], &c["agent"]),
        (
            &serde_json::json!("names"),
            &serde_json::json!("toolobserver"),
            &serde_json::json!(1),
            &serde_json::json!("scripted:schema")
        ),
        "{c}"
    );
    let certain = nodes_in(&before, &|s| s != "planned");
    let planned = nodes_in(&before, &|s| s == "planned");
    assert!(certain.contains("summarize"), "{certain:?}");
    assert!(
        planned
            .iter()
            .any(|n| n.starts_with("batch-reflect[") && n.contains("r2")),
        "online curve rounds after round 1 are planned: {planned:?}"
    );

    let run = s.run();
    let ran: BTreeSet<String> = run.ran.iter().cloned().collect();
    // Everything certain ran; what else ran was planned; nothing outside the plan ran.
    assert!(certain.is_subset(&ran), "{:?}", certain.difference(&ran));
    assert!(
        ran.is_subset(&(&certain | &planned)),
        "{:?}",
        ran.difference(&certain)
    );

    let after = plan_json(&s);
    assert_eq!(nodes_in(&after, &|s| s != "fresh"), BTreeSet::new());
    assert_eq!(nodes_in(&after, &|_| true), ran);
}

#[test]
fn the_dot_format_renders_with_graphviz() {
    let s = Scratch::new("", MODELS);
    let out = s.otb(&["plan", s.exp().to_str().unwrap(), "--format", "dot"]);
    let dot = stdout_ok(&out);
    let n_nodes = plan_json(&s)["nodes"].as_array().unwrap().len();
    let svg = match std::process::Command::new("dot")
        .arg("-Tsvg")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
    {
        Ok(mut child) => {
            use std::io::Write;
            child
                .stdin
                .take()
                .unwrap()
                .write_all(dot.as_bytes())
                .unwrap();
            let out = child.wait_with_output().unwrap();
            assert!(
                out.status.success(),
                "dot failed: {}\n{dot}",
                String::from_utf8_lossy(&out.stderr)
            );
            String::from_utf8(out.stdout).unwrap()
        }
        Err(e) => return testkit::skip("graphviz", format!("Graphviz `dot`: {e}")),
    };
    assert_eq!(svg.matches("class=\"node\"").count(), n_nodes, "{svg}");
    assert!(svg.matches("class=\"edge\"").count() >= n_nodes - 1);
    assert!(svg.contains("summarize"));
}

#[test]
fn every_shipped_experiment_has_a_plan() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let store = tempfile::tempdir().unwrap();
    let mut files: Vec<_> = std::fs::read_dir(root.join("experiments"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "{files:?}");
    // The MCP experiments read generated fixtures (ignored by git: a fresh clone has
    // none), so each is planned from a copy beside fixtures written for it here.
    let fixtures = tempfile::tempdir().unwrap();
    let made = otb()
        .args(["mcp", "fixtures", "--out"])
        .arg(fixtures.path().join("mcp-fixtures"))
        .output()
        .unwrap();
    stdout_ok(&made);
    for f in files {
        let f = if f
            .file_stem()
            .is_some_and(|s| s.to_string_lossy().starts_with("mcp"))
        {
            let copy = fixtures.path().join(f.file_name().unwrap());
            std::fs::copy(&f, &copy).unwrap();
            copy
        } else {
            f
        };
        let out = otb()
            .env("OTB_CALIBRATE", "0")
            .arg("--store")
            .arg(store.path().join("none"))
            .arg("plan")
            .arg(&f)
            .output()
            .unwrap();
        let text = stdout_ok(&out);
        // Its bill: calls and tokens of every shipped grid, before anything ran.
        let bill = text
            .lines()
            .find(|l| l.starts_with("bill: "))
            .unwrap_or_else(|| panic!("{}: no bill in {text}", f.display()));
        // The engines' calibration calls no model; an MCP grid is counted once its
        // servers have run (their tools come from them), which the bill says.
        let mcp = f
            .file_stem()
            .is_some_and(|s| s.to_string_lossy().starts_with("mcp"));
        let no_model = mcp || f.file_stem().is_some_and(|s| s == "calibration");
        if mcp {
            assert!(
                text.contains(
                    "the grid of an MCP server is planned and billed once its server node has run"
                ),
                "{}: {text}",
                f.display()
            );
        }
        assert_eq!(
            bill.contains(" 0 model calls, 0 prompt + 0 completion tokens"),
            no_model,
            "{}: {bill}",
            f.display()
        );
        let first = text.lines().next().unwrap_or_default();
        assert!(first.starts_with("plan of "), "{}: {text}", f.display());
        let n: usize = first
            .rsplit(": ")
            .next()
            .and_then(|t| t.strip_suffix(" nodes"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{first}"));
        assert!(n > 1, "{}: {text}", f.display());
        assert!(!store.path().join("none").exists());
    }
    // Without its fixtures, an MCP experiment is one line saying how to make them.
    let bare = tempfile::tempdir().unwrap();
    let toml = bare.path().join("mcp.toml");
    std::fs::copy(root.join("experiments/mcp.toml"), &toml).unwrap();
    let out = otb()
        .arg("--store")
        .arg(store.path().join("none"))
        .arg("plan")
        .arg(&toml)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("no such folder") && err.contains("otb mcp fixtures --out"),
        "{err}"
    );
    assert!(!store.path().join("none").exists());
}

/// A node whose key waits for its input's content (search's exploration: whether the
/// docs name the gold tools) is still placed in its grid cell.
#[test]
fn a_node_keyed_by_its_inputs_content_has_its_cell() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let store = tempfile::tempdir().unwrap();
    let out = otb()
        .arg("--store")
        .arg(store.path().join("none"))
        .args(["plan", "--format", "json"])
        .arg(root.join("experiments/table4.toml"))
        .output()
        .unwrap();
    let plan: serde_json::Value = serde_json::from_str(&stdout_ok(&out)).unwrap();
    let explores: Vec<&serde_json::Value> = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|n| n["stage"] == "search-explore")
        .collect();
    assert!(!explores.is_empty(), "{plan}");
    for n in explores {
        assert_eq!(n["state"], "waits", "{n}");
        assert_eq!(n["cell"]["setting"], "domains", "{n}");
    }
}

/// Each published entry's node and model calls, read from its manifest.
fn calls_by_node(store: &std::path::Path) -> std::collections::BTreeMap<String, u64> {
    let mut out = std::collections::BTreeMap::new();
    for stage in std::fs::read_dir(store).unwrap() {
        let stage = stage.unwrap().path();
        let Ok(keys) = std::fs::read_dir(&stage) else {
            continue;
        };
        for key in keys {
            let m = key.unwrap().path().join("manifest.json");
            let Ok(text) = std::fs::read_to_string(&m) else {
                continue;
            };
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            out.insert(
                v["node"].as_str().unwrap().to_string(),
                v["usage"]["calls"].as_u64().unwrap(),
            );
        }
    }
    out
}

/// The bill's calls on the scripted grid (5 instances, two opaque settings, K = 3):
/// every explore of round 0 asks the agent once per instance (exact); round 1's
/// reflect at most once per instance; the rounds after it are planned. The run
/// then makes exactly the exact counts and at most the bounds, and no model call
/// outside the bill.
#[test]
fn the_bill_counts_the_calls_the_run_makes() {
    let s = Scratch::new("", MODELS);
    let plan = plan_json(&s);
    let bill = &plan["bill"];
    let lines = bill["lines"].as_array().unwrap();
    let by_node: std::collections::BTreeMap<&str, &serde_json::Value> = lines
        .iter()
        .map(|l| (l["node"].as_str().unwrap(), l))
        .collect();
    assert_eq!(by_node.len(), lines.len(), "one model per node here");
    let calls = |n: &str| {
        let l = by_node
            .get(n)
            .unwrap_or_else(|| panic!("{n} not billed: {bill}"));
        (
            l["calls"].as_u64().unwrap(),
            l["exact"].as_bool().unwrap(),
            l["planned"].as_bool().unwrap(),
        )
    };
    for n in [
        "explore[gold r0]",
        "explore[names r0]",
        "explore[names+params r0]",
    ] {
        assert_eq!(calls(n), (5, true, false), "{n}");
    }
    for n in ["batch-reflect[names r1]", "batch-reflect[names+params r1]"] {
        assert_eq!(calls(n), (5, false, false), "{n}");
    }
    for n in [
        "explore[names r1]",
        "batch-reflect[names r2]",
        "explore[names+params r3]",
    ] {
        assert_eq!(calls(n), (5, false, true), "{n}");
    }
    // No model, no line: data, opacify, evaluate, summarize.
    assert!(!by_node.contains_key("evaluate[names r0]"));
    let t = &bill["totals"];
    assert_eq!(t["calls"], 25, "{t}");
    assert_eq!(t["exact_calls"], 15, "{t}");
    assert_eq!(t["planned_calls"], 50, "{t}");
    // Scripted models take no model time; no price file, no dollars.
    assert_eq!(t["hours"], 0.0, "{t}");
    assert!(t["dollars"].is_null(), "{t}");
    for l in lines {
        assert_eq!(l["time_from"], "scripted", "{l}");
        assert_eq!(l["tokens_from"], "modelled", "{l}");
        assert!(l["prompt_tokens"].as_u64().unwrap() > 0, "{l}");
    }
    let text = stdout_ok(&s.otb(&["plan", s.exp().to_str().unwrap()]));
    assert!(
        text.contains("\nbill: 29 stages to run, 25 model calls (15 exact, the rest at most), "),
        "{text}"
    );
    assert!(text.contains("bill: up to 50 more calls"), "{text}");

    let run = s.run();
    assert!(
        run.stdout
            .starts_with("bill: 29 stages to run, 25 model calls"),
        "the run starts with its bill: {}",
        run.stdout
    );
    let made = calls_by_node(&s.store());
    for (node, &n) in &made {
        match by_node.get(node.as_str()) {
            Some(l) if l["exact"] == true => assert_eq!(Some(n), l["calls"].as_u64(), "{node}"),
            Some(l) => assert!(n <= l["calls"].as_u64().unwrap(), "{node}: {n} > {l}"),
            None => assert_eq!(n, 0, "{node} made calls outside the bill"),
        }
    }
    for (node, l) in &by_node {
        assert!(
            made.contains_key(*node) || l["planned"] == true,
            "{node} was billed for certain but did not run"
        );
    }
    // The run recorded its bill; a quiet run prints none.
    assert!(s.store().join("cache/estimates/mini.json").is_file());
    let quiet = s.otb(&["run", "--quiet", s.exp().to_str().unwrap()]);
    assert!(!stdout_ok(&quiet).contains("bill:"));
    let after = plan_json(&s);
    assert_eq!(after["bill"]["totals"]["calls"], 0, "nothing left to run");
    // `otb report` puts the recorded bill beside what the nodes cost.
    let out = stdout_ok(&s.otb(&[
        "report",
        s.exp().to_str().unwrap(),
        "--to",
        s.dir.path().join("rep").to_str().unwrap(),
    ]));
    let made_explore: u64 = made
        .iter()
        .filter(|(n, _)| n.starts_with("explore["))
        .map(|(_, c)| c)
        .sum();
    assert!(
        out.contains(&format!(
            "explore scripted:schema: calls {made_explore} estimated, {made_explore} made"
        )),
        "{out}"
    );
    let page = std::fs::read_to_string(s.dir.path().join("rep/report.html")).unwrap();
    assert!(
        page.contains("Estimate beside actual"),
        "the page's cost section"
    );
    // A changed grid (2 instances per category) is estimated from the tokens this
    // store measured for the same stages and models.
    s.write_exp("subset = 2", MODELS);
    let changed = plan_json(&s);
    let explores: Vec<&serde_json::Value> = changed["bill"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["stage"] == "explore" && l["planned"] == false)
        .collect();
    assert_eq!(explores.len(), 3);
    for l in explores {
        assert_eq!(l["tokens_from"], "measured", "{l}");
        assert_eq!(l["calls"], 4, "{l}");
    }
}

/// Dollars for an `openai:` copy of the grid from a price file: the plan calls no
/// model (no endpoint is set), and the dollars are the lines' tokens at the prices.
#[test]
fn an_openai_grid_is_priced_from_a_price_file() {
    let s = Scratch::new(
        "",
        "agent = \"openai:gpt-5-mini\"\neditor = \"openai:gpt-5\"",
    );
    let prices = s.dir.path().join("prices.toml");
    std::fs::write(
        &prices,
        "[prices.\"openai:gpt-5\"]\ninput = 1.25\noutput = 10.0\n[prices.\"openai:gpt-5-mini\"]\ninput = 0.25\noutput = 2.0\n",
    )
    .unwrap();
    let out = s.otb(&[
        "plan",
        s.exp().to_str().unwrap(),
        "--format",
        "json",
        "--prices",
        prices.to_str().unwrap(),
    ]);
    let plan: serde_json::Value = serde_json::from_str(&stdout_ok(&out)).unwrap();
    assert!(!s.store().exists(), "plan wrote the store");
    let bill = &plan["bill"];
    let mut want = 0.0;
    for l in bill["lines"].as_array().unwrap() {
        let (i, o) = match l["model"].as_str().unwrap() {
            "openai:gpt-5" => (1.25, 10.0),
            "openai:gpt-5-mini" => (0.25, 2.0),
            m => panic!("unexpected model {m}"),
        };
        let d = (l["prompt_tokens"].as_f64().unwrap() * i
            + l["completion_tokens"].as_f64().unwrap() * o)
            / 1e6;
        assert!((l["dollars"].as_f64().unwrap() - d).abs() < 1e-12, "{l}");
        if l["planned"] == false {
            want += d;
        }
        // An endpoint nothing has measured: its time is unknown, not zero.
        assert!(l["seconds"].is_null(), "{l}");
    }
    let got = bill["totals"]["dollars"].as_f64().unwrap();
    assert!(want > 0.0 && (got - want).abs() < 1e-9, "{got} vs {want}");
    assert_eq!(bill["totals"]["calls"], 25);
    let text = stdout_ok(&s.otb(&[
        "plan",
        s.exp().to_str().unwrap(),
        "--prices",
        prices.to_str().unwrap(),
    ]));
    assert!(text.contains(&format!(", ${want:.2}\n")), "{text}");
    // Without prices: no dollars.
    assert!(plan_json(&s)["bill"]["totals"]["dollars"].is_null());
}

/// The baselines' bills on the scripted grid: EasyTool's two passes per instance and
/// every explore of round 0 exact, Play2Prompt (its editor and the agent), DRAFT and
/// Trace-Free+ bounded by their budgets per tool; the run stays within them.
#[test]
fn the_baselines_calls_stay_within_their_bill() {
    let s = Scratch::new("", MODELS);
    std::fs::write(
        s.exp(),
        format!(
            "name = \"minib\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\", \"names+params\"]\nmethods = [\"base\", \"easytool\", \"play2prompt\", \"draft\", \"tracefree\"]\n[models]\n{MODELS}\n[baselines.draft]\nembedder = \"bag-of-words\"\n",
            common::fixture("mini_bfcl.jsonl").display()
        ),
    )
    .unwrap();
    let plan = plan_json(&s);
    // Per node: (calls, exact, the most there can be).
    let mut billed: std::collections::BTreeMap<String, (u64, bool, u64)> = Default::default();
    for l in plan["bill"]["lines"].as_array().unwrap() {
        let e = billed
            .entry(l["node"].as_str().unwrap().to_string())
            .or_insert((0, true, 0));
        let calls = l["calls"].as_u64().unwrap();
        e.0 += calls;
        e.1 &= l["exact"].as_bool().unwrap();
        e.2 += l["bound"].as_u64().unwrap_or(calls);
    }
    // 5 instances with 8 tools; Play2Prompt on `names` covers the 2 exec_multiple
    // instances (5 tools) only, as the paper's cells. Play2Prompt, DRAFT and
    // Trace-Free+ are billed as their first tries working, their budgets the bound.
    assert_eq!(billed["easytool[names]"], (10, true, 10));
    assert_eq!(billed["explore[names play2prompt r0]"], (2, true, 2));
    assert_eq!(
        billed["play2prompt[names]"],
        (5 * (8 + 2), false, 5 * (12 + 2))
    );
    assert_eq!(
        billed["play2prompt[names+params]"],
        (8 * (8 + 2), false, 8 * (12 + 2))
    );
    assert_eq!(billed["draft[names]"], (8 * 15, false, 8 * 30));
    assert_eq!(billed["tracefree[names]"], (8, false, 8 * 2));
    let text = stdout_ok(&s.otb(&["plan", s.exp().to_str().unwrap()]));
    assert!(text.contains(" expected; at most "), "{text}");
    s.run();
    let made = calls_by_node(&s.store());
    for (node, (calls, exact, bound)) in &billed {
        let n = made[node];
        if *exact {
            assert_eq!(n, *calls, "{node}");
        } else {
            assert!(n <= *bound, "{node}: {n} calls, billed at most {bound}");
        }
    }
    for (node, n) in &made {
        assert!(
            *n == 0 || billed.contains_key(node),
            "{node}: {n} calls unbilled"
        );
    }
}
