//! Measures the embedded backend: grammar cost and KV prefix reuse.
//!
//! `cargo run --release -p llm --features embedded --example embedded_bench -- [MODEL.gguf] [N]`
//! (default model: the cached smollm2-135m).

use std::time::Instant;

use llm::{
    Backend, ChatRequest, EmbeddedBackend, EmbeddedConfig, Message, Sampling, ToolChoice, ToolDef,
};
use serde_json::json;

fn request(i: usize) -> ChatRequest {
    let mut req = ChatRequest::new(
        "bench",
        vec![
            Message::system("You are a helpful assistant that uses tools."),
            Message::user(format!("What is the weather in city number {i}?")),
        ],
    );
    req.tools = vec![
        ToolDef {
            name: "get_weather".into(),
            description: Some("Current weather for a city.".into()),
            parameters: Some(json!({"type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"},
                               "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["city"]})),
        },
        ToolDef {
            name: "lookup".into(),
            description: Some("Opaque tool.".into()),
            parameters: None,
        },
    ];
    req.tool_choice = ToolChoice::Required;
    req.sampling = Sampling::Standard {
        temperature: None,
        top_p: None,
        max_tokens: Some(96),
    };
    req
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            llm::models::cached_model("smollm2-135m", &llm::models::default_cache_dir())
                .ok()
                .flatten()
                .expect("no model: pass a path or run the fetch_model example")
        });
    let n: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(5);
    for (label, grammar, check_first, reuse) in [
        ("grammar(check-first)+reuse", true, true, true),
        ("grammar(full-vocab)+reuse", true, false, true),
        ("grammar(check-first), no reuse", true, true, false),
        ("no grammar + reuse", false, true, true),
    ] {
        let mut cfg = EmbeddedConfig::new(&path);
        cfg.use_grammar = grammar;
        cfg.grammar_check_first = check_first;
        cfg.reuse_prefix = reuse;
        let t = Instant::now();
        let b = EmbeddedBackend::load(cfg).expect("load");
        let load_ms = t.elapsed().as_millis();
        let (mut ms, mut prompt, mut gen, mut valid) = (0u128, 0u64, 0u64, 0usize);
        for i in 0..n {
            let t = Instant::now();
            let r = b.chat(&request(i)).await.expect("chat");
            ms += t.elapsed().as_millis();
            prompt = prompt.saturating_add(r.usage.prompt);
            gen = gen.saturating_add(r.usage.completion);
            if i == 0 {
                println!(
                    "  sample answer: calls {:?} content {:?}",
                    r.tool_calls
                        .iter()
                        .map(|c| (&c.name, &c.arguments_raw))
                        .collect::<Vec<_>>(),
                    r.content
                );
            }
            valid += usize::from(r.tool_calls.first().is_some_and(|c| c.arguments.is_some()));
        }
        println!(
            "{label:31} load {load_ms:5} ms | {n} calls: {:6.0} ms/call, {prompt} prompt + {gen} generated tokens, {:.1} generated tok/s incl. prompt, valid calls {valid}/{n}",
            ms as f64 / n as f64,
            gen as f64 / (ms as f64 / 1000.0)
        );
    }
}
