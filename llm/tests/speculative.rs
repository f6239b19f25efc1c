//! Speculative decoding changes no greedy answer: Qwen2.5-Coder-0.5B drafting
//! for Qwen2.5-Coder-1.5B gives the same tool calls and text as the 1.5B
//! alone, for requests decoded together (tool calls under the grammar and a
//! plain-text answer), and the draft's proposals are both kept and rejected
//! along the way, so both paths of the check ran. Needs both model files
//! (fetched from their pinned wheels on first use); skipped with a message
//! otherwise.
//!
//! The one allowance is float rounding, as for requests decoded together
//! (`tests/embedded.rs`): the proposals are checked several rows to a decode,
//! and llama.cpp's CPU kernels round such a row unlike a lone one, so at a
//! near-tie a greedy choice can flip (seen with 2 threads on a 128-token code
//! answer; not with the 1 thread `make test` uses, here). So an answer that
//! ended by itself must be equal, and one cut at its token limit may differ
//! only after a common prefix of at least a quarter of it (a wrongly kept
//! proposal changes a tool call at once).

#![cfg(feature = "embedded")]

mod answer;

use answer::answer_of;

use std::sync::Arc;

use llm::models::default_cache_dir;
use llm::{ChatRequest, EmbeddedBackend, EmbeddedConfig, Message, Sampling, ToolDef};
use serde_json::json;

fn fetch(name: &str) -> Option<std::path::PathBuf> {
    match llm::fetch_model(name, &default_cache_dir()) {
        Ok(p) => Some(p),
        Err(e) => {
            testkit::skip("model", format_args!("{name} is not available ({e})"));
            None
        }
    }
}

fn requests() -> Vec<ChatRequest> {
    let city = json!({"type": "string", "description": "City name"});
    let tools = vec![
        ToolDef {
            name: "get_weather".into(),
            description: Some("Current weather and a forecast of up to 7 days for a city.".into()),
            parameters: Some(json!({"type": "object",
                "properties": {"city": city, "days": {"type": "integer"},
                               "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["city"]})),
        },
        ToolDef {
            name: "get_sun_times".into(),
            description: Some("Sunrise and sunset times for a city on a date (YYYY-MM-DD).".into()),
            parameters: Some(json!({"type": "object",
                "properties": {"city": city, "date": {"type": "string"}},
                "required": ["city"]})),
        },
    ];
    let greedy = |max: u32| Sampling::Standard {
        temperature: Some(0.0),
        top_p: None,
        max_tokens: Some(max),
    };
    let mut out = Vec::new();
    for q in [
        "What is the weather in Paris for the next 3 days, in celsius?",
        "When does the sun set in Oslo on 2026-06-21?",
        "Is it going to rain in London this weekend? Use fahrenheit.",
    ] {
        let mut r = ChatRequest::new(
            "qwen2.5-coder-1.5b",
            vec![
                Message::system("Solve the user's task by calling one of the tools."),
                Message::user(q),
            ],
        );
        r.tools = tools.clone();
        r.sampling = greedy(64);
        out.push(r);
    }
    let mut code = ChatRequest::new(
        "qwen2.5-coder-1.5b",
        vec![Message::user(
            "Write a Python function that returns the n-th Fibonacci number, with a docstring.",
        )],
    );
    code.sampling = greedy(64);
    out.push(code);
    out
}

async fn answers(b: Arc<EmbeddedBackend>) -> Vec<String> {
    llm::chat_all(&b, &requests())
        .await
        .into_iter()
        .map(|r| answer_of(&r.expect("request failed")))
        .collect()
}

#[tokio::test]
async fn speculative_decoding_changes_no_greedy_answer() {
    let (Some(target), Some(draft)) = (fetch("qwen2.5-coder-1.5b"), fetch("qwen2.5-coder-0.5b"))
    else {
        return;
    };
    let plain = Arc::new(EmbeddedBackend::load(EmbeddedConfig::new(&target)).unwrap());
    let expected = answers(plain.clone()).await;
    assert_eq!(plain.metrics().drafted, 0);
    drop(plain);

    let mut cfg = EmbeddedConfig::new(&target);
    cfg.draft_model = Some(draft);
    cfg.draft_tokens = 4;
    let spec = Arc::new(EmbeddedBackend::load(cfg).unwrap());
    let got = answers(spec.clone()).await;
    let m = spec.metrics();
    for (g, e) in got.iter().zip(&expected) {
        eprintln!("without: {e}\n   with: {g}");
        if g == e {
            continue;
        }
        let cut = |a: &str| a.ends_with("Some(\"length\")");
        assert!(cut(g) && cut(e), "an answer that ended by itself differs");
        let common = g.chars().zip(e.chars()).take_while(|(a, b)| a == b).count();
        let shorter = g.chars().count().min(e.chars().count());
        assert!(
            4 * common >= shorter,
            "differs after {common} of {shorter} characters"
        );
    }
    assert!(
        expected[..3].iter().all(|a| a.contains('(')),
        "{expected:?}"
    );
    assert!(m.accepted > 0, "no proposal kept: {}", m.summary());
    assert!(
        m.accepted < m.drafted,
        "no proposal rejected: {}",
        m.summary()
    );
}

#[tokio::test]
async fn a_draft_model_of_another_vocabulary_is_refused_at_load() {
    let (Some(target), Some(draft)) = (fetch("qwen2.5-coder-0.5b"), fetch("smollm2-135m")) else {
        return;
    };
    let mut cfg = EmbeddedConfig::new(&target);
    cfg.draft_model = Some(draft);
    let err = EmbeddedBackend::load(cfg)
        .err()
        .expect("a foreign draft model loaded");
    assert!(
        err.message
            .contains("does not share the model's vocabulary"),
        "{}",
        err.message
    );
}
