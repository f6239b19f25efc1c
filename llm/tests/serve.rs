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
    // The idle ones were closed (a connection that never sent a request head gets no
    // response: hyper closes it).
    for mut s in idle {
        let mut got = Vec::new();
        let closed = tokio::time::timeout(Duration::from_secs(2), s.read_to_end(&mut got))
            .await
            .expect("an idle connection must be closed by the read timeout");
        let got = String::from_utf8_lossy(&got);
        assert!(
            closed.is_err() || got.is_empty() || got.starts_with("HTTP/1.1 408 "),
            "{got}"
        );
    }
}

/// Clients that keep their connections busy, request after request, cannot shut
/// out one that waits for a slot: while it waits, each reply closes its connection
/// (`Connection: close`), so the waiting client is answered next.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_kept_alive_connections_make_way_for_a_waiting_one() {
    use tokio::io::AsyncWriteExt;
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = ServeConfig {
        max_connections: 1,
        io_timeout: Duration::from_secs(10),
        ..ServeConfig::default()
    };
    let b = Scripted::new(|_| Ok(ChatResponse::text("hi")));
    tokio::spawn(serve_listener_with(Arc::new(b), listener, cfg));
    let body = chat_body("x");
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    // One client keeps the only slot busy for 3 s, reconnecting when told to close.
    let busy = tokio::spawn(async move {
        let mut s = TcpStream::connect(addr).await.unwrap();
        let until = Instant::now() + Duration::from_secs(3);
        let (mut answered, mut closed) = (0, 0);
        while Instant::now() < until {
            s.write_all(req.as_bytes()).await.unwrap();
            let (head, _) = read_response(&mut s).await;
            answered += 1;
            if head.to_ascii_lowercase().contains("connection: close") {
                closed += 1;
                s = TcpStream::connect(addr).await.unwrap();
            }
        }
        (answered, closed)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Another is answered while the first is still busy.
    let t = Instant::now();
    let r = client(addr).chat(&ask("y")).await.unwrap();
    assert_eq!(r.content.as_deref(), Some("hi"));
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "waited {:?}",
        t.elapsed()
    );
    let (answered, closed) = busy.await.unwrap();
    assert!(
        closed >= 1 && answered > closed,
        "{answered} answered, {closed} closed"
    );
}

/// Reads one response from a kept-alive connection: (head, body by Content-Length).
async fn read_response(s: &mut TcpStream) -> (String, String) {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(
            s.read(&mut byte).await.unwrap(),
            1,
            "connection closed early"
        );
        buf.push(byte[0]);
    }
    let head = String::from_utf8(buf).unwrap();
    let len: usize = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())?
        })
        .expect("content-length");
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).await.unwrap();
    (head, String::from_utf8(body).unwrap())
}

fn chat_body(q: &str) -> String {
    json!({"model": "m", "messages": [{"role": "user", "content": q}]}).to_string()
}

/// Real clients keep connections open and may send chunked bodies: two requests on
/// one connection are both answered, a chunked body is read whole; a body over the
/// limit is 413 and one that does not arrive in time 408, each an OpenAI-style error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn keep_alive_chunked_bodies_and_body_bounds() {
    use tokio::io::AsyncWriteExt;
    let listener = bind("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cfg = ServeConfig {
        io_timeout: Duration::from_millis(500),
        ..ServeConfig::default()
    };
    let b = Scripted::new(|r| {
        let q = r.messages[0].content.clone().unwrap_or_default();
        Ok(ChatResponse::text(format!("you said {q}")))
    });
    tokio::spawn(serve_listener_with(Arc::new(b), listener, cfg));

    // Keep-alive: two requests, one connection.
    let mut s = TcpStream::connect(addr).await.unwrap();
    for q in ["one", "two"] {
        let body = chat_body(q);
        let req = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        s.write_all(req.as_bytes()).await.unwrap();
        let (head, body) = read_response(&mut s).await;
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        assert!(body.contains(&format!("you said {q}")), "{body}");
    }

    // A chunked body, in two chunks.
    let body = chat_body("chunks");
    let (a, b2) = body.split_at(body.len() / 2);
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b2}\r\n0\r\n\r\n",
        a.len(),
        b2.len()
    );
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).await.unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("you said chunks"), "{out}");

    // Over the limit: 413 before the body is read.
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        llm::serve::MAX_BODY + 1
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let (head, body) = read_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 413"), "{head}");
    assert!(body.contains("\"error\""), "{body}");

    // A body that stops arriving: 408 after the I/O timeout.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(
        b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"model\"",
    )
    .await
    .unwrap();
    let t = Instant::now();
    let (head, body) = read_response(&mut s).await;
    assert!(head.starts_with("HTTP/1.1 408"), "{head}");
    assert!(body.contains("\"error\""), "{body}");
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_caching_server_takes_the_lock_per_write() {
    let dir = common::tempdir("serve-cache");
    let cfg = ServeConfig {
        cache_dir: Some(dir.path().to_path_buf()),
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

/// Sends one raw HTTP request (asking the server to close the connection after it)
/// and returns the whole response.
async fn raw(addr: std::net::SocketAddr, head: &str, body: &str) -> String {
    use tokio::io::AsyncWriteExt;
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!(
        "{head}\r\nHost: x\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{body}",
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
