//! `serve` exposes a backend as an OpenAI-compatible endpoint; the `openai`
//! backend talks to it like to any server.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use llm::serve::{bind, serve_listener, serve_listener_with, ServeConfig};
use llm::CallCache;
use llm::{
    Backend, ChatRequest, ChatResponse, ErrorKind, LlmError, Message, OpenAiBackend, OpenAiConfig,
    RetryPolicy, Scripted, ToolCall, ToolChoice, ToolDef,
};
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

async fn served(b: Scripted) -> OpenAiBackend {
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_listener(Arc::new(b), listener));
    client(addr)
}

fn client(addr: std::net::SocketAddr) -> OpenAiBackend {
    let mut cfg = OpenAiConfig::new(format!("http://{addr}/v1"));
    cfg.retry = RetryPolicy::fast(2);
    cfg.timeout = Duration::from_secs(10);
    OpenAiBackend::new(cfg).unwrap()
}

/// Serves a scripted backend that answers "hi" and counts its calls.
async fn served_with(cfg: ServeConfig) -> (OpenAiBackend, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let n = calls.clone();
    let b = Scripted::new(move |_| {
        n.fetch_add(1, Ordering::SeqCst);
        Ok(ChatResponse::text("hi"))
    });
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(serve_listener_with(Arc::new(b), listener, cfg));
    (client(addr), calls)
}

fn ask(q: &str) -> ChatRequest {
    ChatRequest::new("m", vec![Message::user(q)])
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clients_time_out_and_excess_connections_wait() {
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = ServeConfig {
        max_connections: 2,
        io_timeout: Duration::from_millis(400),
        cache_dir: None,
        model: None,
    };
    let b = Scripted::new(|_| Ok(ChatResponse::text("hi")));
    tokio::spawn(serve_listener_with(Arc::new(b), listener, cfg));
    // Two clients that connect and send nothing take both slots.
    let idle = [
        TcpStream::connect(addr).await.unwrap(),
        TcpStream::connect(addr).await.unwrap(),
    ];
    tokio::time::sleep(Duration::from_millis(100)).await;
    // A third waits until the read timeout frees a slot, then is answered.
    let t = Instant::now();
    let r = client(addr).chat(&ask("x")).await.unwrap();
    assert_eq!(r.content.as_deref(), Some("hi"));
    let waited = t.elapsed();
    assert!(
        waited >= Duration::from_millis(250) && waited < Duration::from_secs(5),
        "waited {waited:?}"
    );
    // The idle ones were told why and closed.
    for mut s in idle {
        let mut got = Vec::new();
        tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut got))
            .await
            .expect("an idle connection must be closed by the read timeout")
            .unwrap();
        let got = String::from_utf8_lossy(&got);
        assert!(got.starts_with("HTTP/1.1 408 "), "{got}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caching_server_takes_the_lock_per_write() {
    let dir = common::tempdir("serve-cache");
    let cfg = ServeConfig {
        cache_dir: Some(dir.clone()),
        ..ServeConfig::default()
    };
    let (client, calls) = served_with(cfg).await;
    assert_eq!(
        client.chat(&ask("a")).await.unwrap().content.as_deref(),
        Some("hi")
    );
    client.chat(&ask("a")).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the second is a hit");
    // The server is up, yet another writer can open the directory...
    let other = CallCache::open(&dir).unwrap();
    assert_eq!(other.len(), 1);
    assert_eq!(other.entries().unwrap()[0].stage.as_deref(), Some("serve"));
    // ...and while it holds it, hits are still answered (reads take no lock).
    client.chat(&ask("a")).await.unwrap();
    drop(other);
    client.chat(&ask("b")).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(CallCache::open(&dir).unwrap().len(), 2);
}

/// Sends one raw HTTP request and returns the whole response (the server closes the
/// connection after each reply).
async fn raw(addr: std::net::SocketAddr, head: &str, body: &str) -> String {
    use tokio::io::AsyncWriteExt;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{head}\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    out
}

/// `stream: true` is answered with server-sent events: the text, each tool call, the
/// finish reason and (asked for) the usage, then `[DONE]`; never an empty success.
/// `GET /v1/models` lists the served model by the name it was given.
#[tokio::test]
async fn streamed_replies_are_events_and_models_lists_the_served_name() {
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let b = Scripted::new(|_| {
        let mut r = ChatResponse::calls(vec![ToolCall::new("c1", "add", "{\"a\":1}")]);
        r.content = Some("thinking aloud".into());
        Ok(r)
    });
    let cfg = ServeConfig {
        model: Some("qwen2.5-coder-1.5b".into()),
        ..ServeConfig::default()
    };
    tokio::spawn(serve_listener_with(Arc::new(b), listener, cfg));

    let models = raw(addr, "GET /v1/models HTTP/1.1", "").await;
    assert!(models.contains("\"id\":\"qwen2.5-coder-1.5b\""), "{models}");

    let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                      "stream": true, "stream_options": {"include_usage": true}});
    let out = raw(
        addr,
        "POST /v1/chat/completions HTTP/1.1",
        &body.to_string(),
    )
    .await;
    let (head, events) = out.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("text/event-stream"), "{head}");
    let data: Vec<&str> = events
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .collect();
    assert_eq!(data.last(), Some(&"[DONE]"), "{events}");
    let chunks: Vec<serde_json::Value> = data[..data.len() - 1]
        .iter()
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    let text: String = chunks
        .iter()
        .filter_map(|c| {
            c.pointer("/choices/0/delta/content")
                .and_then(|v| v.as_str())
        })
        .collect();
    assert_eq!(text, "thinking aloud");
    let call = chunks
        .iter()
        .find_map(|c| c.pointer("/choices/0/delta/tool_calls/0"))
        .unwrap();
    assert_eq!(call["function"]["name"], "add");
    assert_eq!(call["function"]["arguments"], "{\"a\":1}");
    assert!(chunks
        .iter()
        .any(|c| c.pointer("/choices/0/finish_reason") == Some(&json!("tool_calls"))));
    assert!(chunks.iter().any(|c| c.get("usage").is_some()));
    for c in &chunks {
        assert_eq!(c["object"], "chat.completion.chunk");
    }
}
