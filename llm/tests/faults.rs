//! The `openai` backend against a local server that injects faults. Each
//! fault must end as the documented outcome, and nothing from a failed call
//! may be cached.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{completion, start, tool_completion, Reply};
use llm::{
    Backend, CachedClient, CallCache, ChatRequest, ErrorKind, Message, OpenAiBackend, OpenAiConfig,
    Replay, RetryPolicy,
};
use serde_json::json;

fn backend(base_url: &str, attempts: u32) -> OpenAiBackend {
    let mut cfg = OpenAiConfig::new(base_url);
    cfg.retry = RetryPolicy::fast(attempts);
    cfg.timeout = Duration::from_secs(5);
    OpenAiBackend::new(cfg).unwrap()
}

/// A client with a fresh cache; the cache's directory goes when the guard is dropped.
fn cached(b: OpenAiBackend, tag: &str) -> (CachedClient, tempfile::TempDir) {
    let dir = common::tempdir(tag);
    let cache = CallCache::open(&dir).unwrap();
    (CachedClient::new(Arc::new(b), Arc::new(cache)), dir)
}

fn req(q: &str) -> ChatRequest {
    ChatRequest::new("m", vec![Message::user(q)])
}

#[tokio::test]
async fn rate_limit_honours_retry_after_then_succeeds() {
    let srv = start(|i, _| match i {
        0 => Reply::json(429, json!({"error": {"type": "rate_limit_error"}}))
            .header("Retry-After", "1"),
        _ => Reply::json(200, completion("ok")),
    })
    .await;
    let (c, _dir) = cached(backend(&srv.base_url, 3), "ratelimit");
    let t = Instant::now();
    let r = c.chat(&req("a")).await.unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(950),
        "Retry-After ignored: {:?}",
        t.elapsed()
    );
    assert_eq!(r.content.as_deref(), Some("ok"));
    assert_eq!(r.usage.reasoning, 1);
    assert_eq!(srv.count(), 2);
}

#[tokio::test]
async fn server_error_is_retried_and_success_is_cached() {
    let srv = start(|i, _| match i {
        0 => Reply::raw(500, "oops"),
        _ => Reply::json(200, completion("fine")),
    })
    .await;
    let (c, _dir) = cached(backend(&srv.base_url, 3), "5xx");
    assert_eq!(
        c.chat(&req("a")).await.unwrap().content.as_deref(),
        Some("fine")
    );
    assert_eq!(srv.count(), 2);
    // Hit: no further request reaches the server.
    assert_eq!(
        c.chat(&req("a")).await.unwrap().content.as_deref(),
        Some("fine")
    );
    assert_eq!(srv.count(), 2);
    let s = c.stats();
    assert_eq!((s.hits, s.misses, s.errors), (1, 1, 0));
    assert_eq!(s.usage.prompt, 22);
}

#[tokio::test]
async fn error_object_in_200_is_classified() {
    // A typed error object: classified by its type, not retried when fatal.
    let srv = start(|_, _| {
        Reply::json(
            200,
            json!({"error": {"type": "invalid_request_error", "message": "bad"}}),
        )
    })
    .await;
    let (c, _dir) = cached(backend(&srv.base_url, 3), "err200");
    let e = c.chat(&req("a")).await.unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::Fatal, 1));
    assert!(c.cache().is_empty());

    // An untyped one: the server failed; retried as transient until attempts run out.
    let srv = start(|_, _| Reply::json(200, json!({"error": {"message": "upstream died"}}))).await;
    let (c, _dir) = cached(backend(&srv.base_url, 3), "err200b");
    let e = c.chat(&req("a")).await.unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::Transient, 3));
    assert_eq!(srv.count(), 3);
    assert!(c.cache().is_empty());
}

#[tokio::test]
async fn truncated_json_is_malformed_and_not_cached() {
    let srv = start(|_, _| {
        let full = completion("cut").to_string();
        Reply::raw(200, full[..full.len() / 2].to_owned())
    })
    .await;
    let (c, _dir) = cached(backend(&srv.base_url, 3), "trunc");
    let e = c.chat(&req("a")).await.unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::Malformed, 1));
    assert!(c.cache().is_empty());
    // Not cached: asking again reaches the server again.
    let _ = c.chat(&req("a")).await.unwrap_err();
    assert_eq!(srv.count(), 2);
    assert_eq!(c.stats().errors, 2);
}

#[tokio::test]
async fn slow_response_times_out_after_retries() {
    let srv =
        start(|_, _| Reply::json(200, completion("late")).delayed(Duration::from_secs(3))).await;
    let mut cfg = OpenAiConfig::new(&srv.base_url);
    cfg.retry = RetryPolicy::fast(2);
    cfg.timeout = Duration::from_millis(300);
    let (c, _dir) = cached(OpenAiBackend::new(cfg).unwrap(), "slow");
    let t = Instant::now();
    let e = c.chat(&req("a")).await.unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::Timeout, 2));
    assert!(t.elapsed() < Duration::from_secs(3));
    assert!(c.cache().is_empty());
}

#[tokio::test]
async fn non_json_tool_arguments_are_kept_and_flagged() {
    let srv = start(|_, _| Reply::json(200, tool_completion("lookup", "{query: 'oslo'"))).await;
    let (c, _dir) = cached(backend(&srv.base_url, 3), "badargs");
    let r = c.chat(&req("a")).await.unwrap();
    assert_eq!(r.tool_calls.len(), 1);
    assert_eq!(r.tool_calls[0].name, "lookup");
    assert_eq!(r.tool_calls[0].arguments_raw, "{query: 'oslo'");
    assert!(r.tool_calls[0].arguments_malformed());
    // It is a response, so it is cached, flag included.
    let rows = c.cache().entries().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].n_malformed_arguments, 1);
}

#[tokio::test]
async fn auth_failure_is_infrastructure_without_retry() {
    // 401 with a generic type: the status decides (auth), not the type.
    let srv = start(|_, _| {
        Reply::json(
            401,
            json!({"error": {"type": "invalid_request_error", "message": "Incorrect API key"}}),
        )
    })
    .await;
    let (c, _dir) = cached(backend(&srv.base_url, 5), "auth");
    let e = c.chat(&req("a")).await.unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::Auth, 1));
    assert!(e.is_infrastructure() && !e.belongs_to_answer());
    assert_eq!(srv.count(), 1);
    assert!(c.cache().is_empty());
    // 403 with a permission type: auth as well.
    let srv = start(|_, _| Reply::json(403, json!({"error": {"type": "permission_error"}}))).await;
    let e = backend(&srv.base_url, 5).chat(&req("a")).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Auth);
    assert!(e.is_infrastructure());
}

#[tokio::test]
async fn context_length_400_belongs_to_the_answer() {
    // OpenAI's shape: a generic type, the specific code.
    let srv = start(|_, _| {
        Reply::json(
            400,
            json!({"error": {"type": "invalid_request_error", "code": "context_length_exceeded",
                             "param": "messages", "message": "too long"}}),
        )
    })
    .await;
    let (c, _dir) = cached(backend(&srv.base_url, 5), "ctx");
    let e = c.chat(&req("a")).await.unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::ContextOverflow, 1));
    assert!(e.belongs_to_answer() && !e.is_infrastructure());
    assert!(c.cache().is_empty(), "errors are never cached");
    // llama.cpp server's shape: the type names it, the code is numeric.
    let srv = start(|_, _| {
        Reply::json(
            400,
            json!({"error": {"code": 400, "type": "exceed_context_size_error",
                             "message": "the request exceeds the available context size"}}),
        )
    })
    .await;
    let e = backend(&srv.base_url, 5).chat(&req("a")).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::ContextOverflow);
    // A plain 400 without such a code is a bad request: infrastructure.
    let srv =
        start(|_, _| Reply::json(400, json!({"error": {"type": "invalid_request_error"}}))).await;
    let e = backend(&srv.base_url, 5).chat(&req("a")).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::Fatal);
    assert!(e.is_infrastructure());
}

#[tokio::test]
async fn endless_503_is_infrastructure_after_retries() {
    let srv = start(|_, _| Reply::raw(503, "upstream unavailable")).await;
    let (c, _dir) = cached(backend(&srv.base_url, 4), "503");
    let e = c.chat(&req("a")).await.unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::Transient, 4));
    assert_eq!(srv.count(), 4);
    assert!(e.is_infrastructure() && !e.belongs_to_answer());
    assert!(c.cache().is_empty());
}

#[tokio::test]
async fn content_filter_and_refusal_are_told_apart() {
    let srv = start(|i, _| {
        let msg = if i == 0 {
            json!({"role": "assistant", "content": null})
        } else {
            json!({"role": "assistant", "content": null, "refusal": "I can't help with that."})
        };
        Reply::json(
            200,
            json!({"choices": [{"index": 0, "message": msg,
                   "finish_reason": if i == 0 { "content_filter" } else { "stop" }}]}),
        )
    })
    .await;
    let b = backend(&srv.base_url, 3);
    let e = b.chat(&req("a")).await.unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::ContentFilter, 1));
    assert!(e.belongs_to_answer());
    let e = b.chat(&req("b")).await.unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::Refusal, 1));
    assert!(e.belongs_to_answer());
}

#[tokio::test]
async fn quota_429_is_fatal_by_its_type() {
    let srv =
        start(|_, _| Reply::json(429, json!({"error": {"type": "insufficient_quota"}}))).await;
    let e = backend(&srv.base_url, 5).chat(&req("a")).await.unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::Fatal, 1));
}

#[tokio::test]
async fn connection_refused_is_transient() {
    // Bind then drop a listener to get a port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let e = backend(&format!("http://127.0.0.1:{port}/v1"), 2)
        .chat(&req("a"))
        .await
        .unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::Transient, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_is_bounded_per_endpoint() {
    let srv =
        start(|_, _| Reply::json(200, completion("x")).delayed(Duration::from_millis(50))).await;
    let mut cfg = OpenAiConfig::new(&srv.base_url);
    cfg.max_concurrency = 3;
    let b = Arc::new(OpenAiBackend::new(cfg).unwrap());
    let mut tasks = Vec::new();
    for i in 0..12 {
        let b = b.clone();
        tasks.push(tokio::spawn(
            async move { b.chat(&req(&i.to_string())).await },
        ));
    }
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(srv.count(), 12);
    let peak = srv.peak_in_flight.load(std::sync::atomic::Ordering::SeqCst);
    assert!((1..=3).contains(&peak), "peak {peak}");
}

#[tokio::test]
async fn request_body_carries_tools_and_sampling() {
    let srv = start(|_, body| {
        let ok = body["tools"][0]["function"]["name"] == "f"
            && body["tool_choice"] == "required"
            && body["seed"] == 3
            && body.get("temperature").is_none()
            && body["max_completion_tokens"] == 9;
        if ok {
            Reply::json(200, completion("ok"))
        } else {
            Reply::json(400, json!({"error": {"message": body.to_string()}}))
        }
    })
    .await;
    let mut r = req("a");
    r.tools = vec![llm::ToolDef {
        name: "f".into(),
        description: None,
        parameters: Some(json!({"type": "object"})),
    }];
    r.tool_choice = llm::ToolChoice::Required;
    r.seed = Some(3);
    r.sampling = llm::Sampling::Reasoning {
        reasoning_effort: Some("low".into()),
        max_completion_tokens: Some(9),
    };
    backend(&srv.base_url, 1).chat(&r).await.unwrap();
}

#[tokio::test]
async fn replay_answers_hits_and_names_misses() {
    let srv = start(|_, _| Reply::json(200, completion("stored"))).await;
    let (c, _dir) = cached(backend(&srv.base_url, 1), "replay");
    c.for_stage("explore").chat(&req("a")).await.unwrap();
    let replay = Replay::new(c.cache().clone(), "explore");
    assert_eq!(
        replay.chat(&req("a")).await.unwrap().content.as_deref(),
        Some("stored")
    );
    let e = replay.chat(&req("b")).await.unwrap_err();
    assert_eq!(e.kind, ErrorKind::CacheMiss);
    assert!(
        e.message.contains(&llm::request_key(&req("b"))),
        "{}",
        e.message
    );
    assert!(e.message.contains("stage explore"), "{}", e.message);
    assert_eq!(srv.count(), 1);
    assert_eq!(
        c.cache().entries().unwrap()[0].stage.as_deref(),
        Some("explore")
    );
}

fn nested(depth: usize) -> String {
    "[".repeat(depth) + &"]".repeat(depth)
}

#[tokio::test]
async fn one_depth_limit_for_tool_call_arguments() {
    use llm::types::MAX_JSON_DEPTH;
    let srv = start(|_, body| {
        let d: usize = body["messages"][0]["content"]
            .as_str()
            .and_then(|s| s.parse().ok())
            .unwrap_or(0);
        Reply::json(200, tool_completion("f", &nested(d)))
    })
    .await;
    let (c, _dir) = cached(backend(&srv.base_url, 3), "depth");
    for d in [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH] {
        let r = c.chat(&req(&d.to_string())).await.unwrap();
        assert!(!r.tool_calls[0].arguments_malformed());
    }
    // Deeper: the call fails as the answer's `malformed`, whether serde
    // could parse it (127) or not (200); nothing is cached.
    for d in [MAX_JSON_DEPTH + 1, 127, 200] {
        let e = c.chat(&req(&d.to_string())).await.unwrap_err();
        assert_eq!((e.kind, e.attempts), (ErrorKind::Malformed, 1), "{e}");
        assert!(e.belongs_to_answer());
        assert!(e.message.contains(&format!("{d} levels deep")), "{e}");
    }
    assert_eq!(c.cache().len(), 2);
    // What was cached reads back after a reopen.
    let dir = c.cache().path().parent().unwrap().to_path_buf();
    drop(c);
    let cache = CallCache::open(&dir).unwrap();
    assert!(cache.open_report().is_clean(), "{}", cache.open_report());
    let rows = cache.entries().unwrap();
    assert_eq!(rows.len(), 2);
    assert!(rows.iter().all(|r| r.n_malformed_arguments == 0));
}

#[tokio::test]
async fn an_oversized_reply_is_malformed() {
    let big = "x".repeat(llm::types::MAX_REPLY_BYTES + 1);
    let srv = start(move |_, _| Reply::json(200, completion(&big))).await;
    let (c, _dir) = cached(backend(&srv.base_url, 3), "big");
    let e = c.chat(&req("a")).await.unwrap_err();
    assert_eq!((e.kind, e.attempts), (ErrorKind::Malformed, 1));
    assert!(e.message.contains("larger than the limit"), "{e}");
    assert!(c.cache().is_empty());
}
