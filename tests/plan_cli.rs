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
    for f in files {
        let out = otb()
            .arg("--store")
            .arg(store.path().join("none"))
            .arg("plan")
            .arg(&f)
            .output()
            .unwrap();
        let text = stdout_ok(&out);
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
