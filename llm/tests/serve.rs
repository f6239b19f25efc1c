//! `serve` exposes a backend as an OpenAI-compatible endpoint; the `openai`
//! backend talks to it like to any server.

use std::sync::Arc;

use llm::serve::{bind, serve_listener};
use llm::{
    Backend, ChatRequest, ChatResponse, ErrorKind, LlmError, Message, OpenAiBackend, OpenAiConfig,
    RetryPolicy, Scripted, ToolCall, ToolChoice, ToolDef,
};
use serde_json::json;

async fn served(b: Scripted) -> OpenAiBackend {
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_listener(Arc::new(b), listener));
    let mut cfg = OpenAiConfig::new(format!("http://{addr}/v1"));
    cfg.retry = RetryPolicy::fast(2);
    OpenAiBackend::new(cfg).unwrap()
}

#[tokio::test]
async fn tool_call_round_trip() {
    let client = served(Scripted::new(|r| {
        // The server sees the same request the client sent.
        assert_eq!(r.tool_choice, ToolChoice::Named("add".into()));
        assert_eq!(r.messages.len(), 2);
        let mut resp = ChatResponse::calls(vec![ToolCall::new(
            "c1",
            &r.tools[0].name,
            r#"{"a": 1, "b": 2}"#,
        )]);
        resp.usage.prompt = 7;
        Ok(resp)
    }))
    .await;
    let mut req = ChatRequest::new("m", vec![Message::system("s"), Message::user("1+2?")]);
    req.tools = vec![ToolDef {
        name: "add".into(),
        description: Some("adds".into()),
        parameters: Some(json!({"type": "object", "properties": {"a": {"type": "integer"}}})),
    }];
    req.tool_choice = ToolChoice::Named("add".into());
    let r = client.chat(&req).await.unwrap();
    assert_eq!(r.tool_calls[0].name, "add");
    assert_eq!(r.tool_calls[0].arguments, Some(json!({"a": 1, "b": 2})));
    assert_eq!(r.usage.prompt, 7);
    assert_eq!(r.finish_reason.as_deref(), Some("tool_calls"));
}

#[tokio::test]
async fn backend_errors_keep_their_kind_across_the_wire() {
    let client = served(Scripted::new(|_| {
        Err(LlmError::new(ErrorKind::RateLimit, "slow down"))
    }))
    .await;
    let e = client
        .chat(&ChatRequest::new("m", vec![Message::user("x")]))
        .await
        .unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::RateLimit, 2));
    // Every kind comes back as itself, so the answer/infrastructure split
    // holds through `serve` too.
    let client = served(Scripted::new(|r| {
        let name = r.messages[0].content.clone().unwrap_or_default();
        let kind = ErrorKind::ALL
            .into_iter()
            .find(|k| k.as_str() == name)
            .unwrap_or(ErrorKind::Fatal);
        Err(LlmError::new(kind, format!("failed as {name}")))
    }))
    .await;
    for kind in ErrorKind::ALL {
        let e = client
            .chat(&ChatRequest::new("m", vec![Message::user(kind.as_str())]))
            .await
            .unwrap_err();
        assert_eq!(e.kind, kind, "{e}");
        let want_attempts = if kind.is_retryable() { 2 } else { 1 };
        assert_eq!(e.attempts, want_attempts, "{e}");
    }
}
