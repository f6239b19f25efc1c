//! A fleet of OpenAI-compatible servers behind one backend (`OTB_LLM_BASE_URL`
//! naming several): requests spread by requests in flight, a server that goes
//! away is taken out and its requests answered by the others, each call answered
//! once, and the backend's summary line counts the calls per server.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use llm::serve::{bind, serve_listener};
use llm::{
    Backend, ChatRequest, ChatResponse, Message, OpenAiBackend, OpenAiConfig, RetryPolicy, Scripted,
};

/// A server answering "from NAME" after `delay`, counting its calls; it runs on a
/// runtime of its own, so that shutting that runtime down kills it whole (listener
/// and kept-alive connections), as a killed server process.
fn server(
    name: &'static str,
    delay: Duration,
) -> (String, Arc<AtomicUsize>, tokio::runtime::Runtime) {
    let calls = Arc::new(AtomicUsize::new(0));
    let n = calls.clone();
    let b = Scripted::new(move |_| {
        n.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(delay);
        Ok(ChatResponse::text(format!("from {name}")))
    });
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let listener = rt.block_on(bind("127.0.0.1:0".parse().unwrap())).unwrap();
    let addr = listener.local_addr().unwrap();
    rt.spawn(async move {
        let _ = serve_listener(Arc::new(b), listener).await;
    });
    (format!("http://{addr}/v1"), calls, rt)
}

fn ask(i: usize) -> ChatRequest {
    ChatRequest::new("m", vec![Message::user(format!("q{i}"))])
}

#[test]
fn requests_spread_over_the_fleet_and_survive_a_server_going_away() {
    let (a, a_calls, a_rt) = server("a", Duration::from_millis(50));
    let (b, b_calls, b_rt) = server("b", Duration::from_millis(50));
    let client = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    client.block_on(async move {
        let mut cfg = OpenAiConfig::new(format!("{a}, {b}"));
        cfg.retry = RetryPolicy::fast(2);
        cfg.timeout = Duration::from_secs(10);
        cfg.max_concurrency = 4;
        let fleet = Arc::new(OpenAiBackend::new(cfg).unwrap());

        // Both up: eight requests at once go to both servers.
        let reqs: Vec<ChatRequest> = (0..8).map(ask).collect();
        for r in llm::chat_all(&fleet, &reqs).await {
            assert!(r.unwrap().content.unwrap().starts_with("from "));
        }
        let (na, nb) = (
            a_calls.load(Ordering::SeqCst),
            b_calls.load(Ordering::SeqCst),
        );
        assert_eq!(na + nb, 8, "each request answered once");
        assert!(na > 0 && nb > 0, "both servers used: a {na}, b {nb}");

        // Server a is killed (listener and connections): every request is still
        // answered, by b, with no error and no request answered twice.
        a_rt.shutdown_background();
        tokio::time::sleep(Duration::from_millis(100)).await;
        let reqs: Vec<ChatRequest> = (8..20).map(ask).collect();
        for r in llm::chat_all(&fleet, &reqs).await {
            assert_eq!(r.unwrap().content.as_deref(), Some("from b"));
        }
        assert_eq!(
            a_calls.load(Ordering::SeqCst),
            na,
            "a answered nothing more"
        );
        assert_eq!(b_calls.load(Ordering::SeqCst), nb + 12);
        let line = fleet
            .metrics_summary()
            .expect("a fleet says where its calls went");
        assert!(line.starts_with("fleet of 2: "), "{line}");
        assert!(line.contains(&format!("{a} {na} answered, ")), "{line}");
        assert!(
            !line.contains(&format!("{a} {na} answered, 0 failed")),
            "{line}"
        );
        assert!(
            line.contains(&format!("{b} {} answered, 0 failed", nb + 12)),
            "{line}"
        );
        b_rt.shutdown_background();
    });
}

#[test]
fn a_fleet_is_named_by_commas_or_spaces_and_each_url_is_checked() {
    let cfg = OpenAiConfig::new("http://a:1/v1/, http://b:2/v1  http://c:3/v1");
    assert_eq!(
        cfg.endpoints(),
        ["http://a:1/v1", "http://b:2/v1", "http://c:3/v1"]
    );
    let err = OpenAiBackend::new(OpenAiConfig::new("http://a:1/v1,ftp://b/v1"))
        .err()
        .unwrap();
    assert!(err.to_string().contains("ftp://b/v1"), "{err}");
    assert!(OpenAiBackend::new(OpenAiConfig::new(" , ")).is_err());
}
