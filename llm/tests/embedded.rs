//! The embedded backend answers a tool-call request with a valid call to an
//! offered tool (SmolLM2-135M). Needs the model file: run
//! `cargo run -p llm --example fetch_model -- smollm2-135m` once (or set
//! OTB_EMBEDDED_MODEL); the test is skipped with a message otherwise.

#![cfg(feature = "embedded")]

use llm::models::{cached_model, default_cache_dir};
use llm::{
    Backend, ChatRequest, EmbeddedBackend, EmbeddedConfig, Message, Sampling, ToolChoice, ToolDef,
};
use serde_json::json;

fn model() -> Option<std::path::PathBuf> {
    match cached_model("smollm2-135m", &default_cache_dir()) {
        Ok(Some(p)) => Some(p),
        other => {
            eprintln!(
                "SKIPPED: SmolLM2 model not available ({other:?}); run `cargo run -p llm --example fetch_model -- smollm2-135m`"
            );
            None
        }
    }
}

fn tools() -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: "get_weather".into(),
            description: Some("Current weather for a city.".into()),
            parameters: Some(json!({
                "type": "object",
                "properties": {"city": {"type": "string"}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
                "required": ["city"]
            })),
        },
        ToolDef {
            name: "lookup".into(),
            description: Some("Opaque tool without a schema.".into()),
            parameters: None,
        },
    ]
}

#[tokio::test]
async fn embedded_tool_call_is_valid() {
    let Some(path) = model() else { return };
    let b = EmbeddedBackend::load(EmbeddedConfig::new(path)).unwrap();
    for choice in [ToolChoice::Required, ToolChoice::Named("lookup".into())] {
        let mut req = ChatRequest::new(
            "smollm2-135m",
            vec![
                Message::system("You are a helpful assistant."),
                Message::user("What is the weather in Paris?"),
            ],
        );
        req.tools = tools();
        req.tool_choice = choice.clone();
        req.sampling = Sampling::Standard {
            temperature: None,
            top_p: None,
            max_tokens: Some(96),
        };
        let r = b.chat(&req).await.unwrap();
        eprintln!(
            "{choice:?}: {:?} {:?} {:?}",
            r.tool_calls, r.content, r.usage
        );
        assert!(!r.tool_calls.is_empty(), "{choice:?}: no call in {r:?}");
        for (i, c) in r.tool_calls.iter().enumerate() {
            assert!(
                ["get_weather", "lookup"].contains(&c.name.as_str()),
                "{r:?}"
            );
            // The tiny model sometimes starts an extra call that the token limit cuts
            // off: that one is kept and flagged (arguments None), never dropped, and it
            // can only be the last call of a reply that stopped on length.
            let Some(args) = c.arguments.as_ref() else {
                assert!(
                    i > 0
                        && i + 1 == r.tool_calls.len()
                        && r.finish_reason.as_deref() == Some("length"),
                    "arguments not JSON: {r:?}"
                );
                continue;
            };
            assert!(args.is_object(), "{r:?}");
            if c.name == "get_weather" {
                assert!(args["city"].is_string(), "{r:?}");
            }
        }
        if let ToolChoice::Named(n) = &choice {
            assert_eq!(&r.tool_calls[0].name, n);
        }
        assert!(r.usage.prompt > 0 && r.usage.completion > 0);
    }
}

/// The embedded model behind `serve`, reached through the `openai` backend:
/// the OpenAI client tested against a real (local) model server.
#[tokio::test]
async fn openai_backend_against_served_embedded_model() {
    let Some(path) = model() else { return };
    let b = std::sync::Arc::new(EmbeddedBackend::load(EmbeddedConfig::new(path)).unwrap());
    let listener = llm::serve::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(llm::serve::serve_listener(b, listener));
    let client =
        llm::OpenAiBackend::new(llm::OpenAiConfig::new(format!("http://{addr}/v1"))).unwrap();
    let mut req = ChatRequest::new("smollm2-135m", vec![Message::user("Weather in Rome?")]);
    req.tools = tools();
    req.tool_choice = ToolChoice::Named("get_weather".into());
    req.sampling = Sampling::Standard {
        temperature: None,
        top_p: None,
        max_tokens: Some(64),
    };
    let r = client.chat(&req).await.unwrap();
    assert_eq!(r.tool_calls.len(), 1, "{r:?}");
    assert_eq!(r.tool_calls[0].name, "get_weather");
    assert!(
        r.tool_calls[0]
            .arguments
            .as_ref()
            .is_some_and(|a| a["city"].is_string()),
        "{r:?}"
    );
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
    assert!(r.usage.completion > 0);
}
