//! Client-overhead benchmark of the `openai` backend (run by `make bench`).
//!
//! `cargo run --release -p llm --example bench_client -- [SECONDS_PER_RUN] [CONCURRENCY...]`
//! (defaults: 2 s per run, concurrency 1 64 256).
//!
//! A raw HTTP/1.1 server in this process (127.0.0.1, keep-alive, no parsing
//! beyond the head) answers every POST with the same canned chat completion
//! holding one tool call. Against it, at each concurrency, for a fixed time:
//!
//! - `raw reqwest`: a bare loop of `reqwest::Client::post(..).body(bytes)` +
//!   reading the body: the floor, what any Rust HTTP client pays;
//! - `openai client`: [`llm::OpenAiBackend::chat`]: request rendering
//!   (`wire`), the retry loop, the per-endpoint semaphore (sized to the
//!   concurrency, so it bounds nothing), response parsing into a
//!   `ChatResponse` with a parsed tool call;
//! - `+ call cache (miss)`: the same behind a [`llm::CachedClient`] whose
//!   every call is a miss (distinct requests), so each call also computes the
//!   request key and appends + `fdatasync`s a record before returning. The
//!   cache directory is `OTB_BENCH_CACHE_DIR` (default: the system temp
//!   directory), so the fsync cost is that disk's.
//!
//! Prints calls/s, p50 and p99 latency, and the ratios to the floor.

use std::sync::Arc;
use std::time::{Duration, Instant};

use llm::{
    Backend, CachedClient, CallCache, ChatRequest, Message, OpenAiBackend, OpenAiConfig, Sampling,
    ToolChoice, ToolDef,
};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The canned answer's body: a chat completion with one tool call.
fn canned_body() -> String {
    json!({
        "id": "chatcmpl-bench", "object": "chat.completion", "created": 0, "model": "bench-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "call_0", "type": "function",
                "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"celsius\"}"}}]},
            "finish_reason": "tool_calls"}],
        "usage": {"prompt_tokens": 312, "completion_tokens": 21, "total_tokens": 333}
    })
    .to_string()
}

/// The whole HTTP response.
fn canned_response() -> Vec<u8> {
    let body = canned_body();
    let mut out = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body.as_bytes());
    out
}

/// One connection: answer every request with `reply` until the peer closes.
async fn serve_conn(mut s: TcpStream, reply: Arc<Vec<u8>>) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let mut buf: Vec<u8> = Vec::with_capacity(16 << 10);
    let mut chunk = vec![0u8; 16 << 10];
    loop {
        // Read a head, then Content-Length bytes of body.
        let head_end = loop {
            if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break p + 4;
            }
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        };
        let head = String::from_utf8_lossy(&buf[..head_end]);
        let len = head
            .split("\r\n")
            .filter_map(|l| l.split_once(':'))
            .find(|(k, _)| k.trim().eq_ignore_ascii_case("content-length"))
            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
            .unwrap_or(0);
        while buf.len() < head_end + len {
            let n = s.read(&mut chunk).await?;
            if n == 0 {
                return Ok(());
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        buf.drain(..head_end + len);
        s.write_all(&reply).await?;
    }
}

async fn start_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("local addr");
    let reply = Arc::new(canned_response());
    tokio::spawn(async move {
        while let Ok((s, _)) = listener.accept().await {
            tokio::spawn(serve_conn(s, reply.clone()));
        }
    });
    format!("http://{addr}/v1")
}

/// A BFCL-sized request: system prompt, user turn, three tools with schemas.
fn request(i: u64) -> ChatRequest {
    let mut req = ChatRequest::new(
        "bench-model",
        vec![
            Message::system(
                "You are an agent that answers by calling tools. Use the tools' documentation; \
                 when it is missing, explore the tools with small calls first.",
            ),
            Message::user(format!(
                "Request {i}: what is the weather in Paris, in celsius, for the next 3 days?"
            )),
        ],
    );
    let tool = |name: &str, desc: &str| ToolDef {
        name: name.into(),
        description: Some(desc.into()),
        parameters: Some(json!({"type": "object",
            "properties": {"city": {"type": "string", "description": "City name"},
                           "days": {"type": "integer", "description": "Forecast days"},
                           "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
            "required": ["city"]})),
    };
    req.tools = vec![
        tool("get_weather", "Current weather and forecast for a city."),
        tool("get_air_quality", "Air quality index for a city."),
        tool("get_sunrise", "Sunrise and sunset times for a city."),
    ];
    req.tool_choice = ToolChoice::Auto;
    req.sampling = Sampling::Standard {
        temperature: Some(0.0),
        top_p: None,
        max_tokens: Some(256),
    };
    req.seed = Some(7);
    req
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Raw,
    Client,
    Cached,
}

impl Mode {
    fn key(self) -> &'static str {
        match self {
            Mode::Raw => "raw",
            Mode::Client => "client",
            Mode::Cached => "cached",
        }
    }
    fn label(self) -> &'static str {
        match self {
            Mode::Raw => "raw reqwest (floor)",
            Mode::Client => "openai client",
            Mode::Cached => "+ call cache (miss)",
        }
    }
}

struct RunResult {
    calls: usize,
    secs: f64,
    p50: Duration,
    p99: Duration,
}

impl RunResult {
    fn rate(&self) -> f64 {
        self.calls as f64 / self.secs
    }
}

/// Runs `conc` loops of `call` for `warm` + `dur`; latencies of calls that
/// start after the warm-up count.
async fn run<F, Fut>(conc: usize, warm: Duration, dur: Duration, call: F) -> RunResult
where
    F: Fn(u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let call = Arc::new(call);
    let t0 = Instant::now();
    let measure_from = t0 + warm;
    let end = measure_from + dur;
    let mut tasks = Vec::with_capacity(conc);
    for w in 0..conc {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = (w as u64) << 32;
            loop {
                let s = Instant::now();
                if s >= end {
                    break;
                }
                call(i).await;
                i += 1;
                if s >= measure_from {
                    lat.push(s.elapsed());
                }
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.expect("bench task"));
    }
    let secs = (Instant::now() - measure_from).as_secs_f64();
    all.sort();
    let pct = |p: f64| {
        all.get(((all.len() as f64 * p) as usize).min(all.len().saturating_sub(1)))
            .copied()
            .unwrap_or_default()
    };
    RunResult {
        calls: all.len(),
        secs,
        p50: pct(0.50),
        p99: pct(0.99),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    let mut concs: Vec<usize> = args.filter_map(|s| s.parse().ok()).collect();
    if concs.is_empty() {
        concs = vec![1, 64, 256];
    }
    // OTB_BENCH_MODES=raw,client,cached picks the paths (for profiling one).
    let modes: Vec<String> = std::env::var("OTB_BENCH_MODES")
        .unwrap_or_else(|_| "raw,client,cached".into())
        .split(',')
        .map(|m| m.trim().to_owned())
        .collect();
    let dur = Duration::from_secs_f64(secs);
    let warm = Duration::from_millis(300);
    let base = start_server().await;
    let url = format!("{base}/chat/completions");
    // Leaked once: a `&'static str` body is sent without copying.
    let raw_body: &'static str = Box::leak(
        llm::wire::request_body(&request(0))
            .to_string()
            .into_boxed_str(),
    );
    let cache_root = std::env::var_os("OTB_BENCH_CACHE_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);

    println!(
        "client overhead: in-process 127.0.0.1 server, canned tool-call completion ({} B), request body {} B, {} s per run after {} ms warm-up, {} tokio workers",
        canned_response().len(),
        raw_body.len(),
        secs,
        warm.as_millis(),
        std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
    );
    // CPU per call of the client's own work, one thread, no I/O.
    let micro = |f: &dyn Fn()| {
        let n = 20_000;
        let t = Instant::now();
        for _ in 0..n {
            f();
        }
        t.elapsed().as_secs_f64() * 1e6 / n as f64
    };
    let tmpl = request(0);
    let reply_body = canned_body();
    let render = micro(&|| {
        let v = llm::wire::request_body(&tmpl);
        assert!(!serde_json::to_vec(&v).unwrap_or_default().is_empty());
    });
    let parse = micro(&|| {
        assert!(llm::wire::parse_response_body(&reply_body).is_ok());
    });
    let key = micro(&|| {
        assert_eq!(llm::request_key(&tmpl).len(), 64);
    });
    println!(
        "client CPU per call (one thread): render + serialise request {render:.1} µs, parse response {parse:.1} µs; call cache key (canonical JSON + sha256) {key:.1} µs"
    );
    println!(
        "| path | concurrency | calls | calls/s | p50 ms | p99 ms | calls/s vs floor | p50 vs floor |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    for &conc in &concs {
        let mut floor: Option<(f64, Duration)> = None;
        for mode in [Mode::Raw, Mode::Client, Mode::Cached] {
            if !modes.iter().any(|m| m == mode.key()) {
                continue;
            }
            let r = match mode {
                Mode::Raw => {
                    let http = reqwest::Client::new();
                    let url = url.clone();
                    run(conc, warm, dur, move |_| {
                        let req = http
                            .post(&url)
                            .header("content-type", "application/json")
                            .body(raw_body);
                        async move {
                            let resp = req.send().await.expect("raw send");
                            let b = resp.bytes().await.expect("raw body");
                            assert!(!b.is_empty());
                        }
                    })
                    .await
                }
                Mode::Client | Mode::Cached => {
                    let mut cfg = OpenAiConfig::new(&base);
                    cfg.max_concurrency = conc;
                    let backend: Arc<dyn Backend> =
                        Arc::new(OpenAiBackend::new(cfg).expect("client"));
                    let (client, dir): (Arc<dyn Backend>, Option<std::path::PathBuf>) =
                        if mode == Mode::Cached {
                            let dir = cache_root
                                .join(format!("otb-bench-client-{}-{conc}", std::process::id()));
                            let _ = std::fs::remove_dir_all(&dir);
                            let cache = Arc::new(CallCache::open(&dir).expect("cache"));
                            (Arc::new(CachedClient::new(backend, cache)), Some(dir))
                        } else {
                            (backend, None)
                        };
                    // Built once: the client's cost, not the caller's, is measured.
                    // Cache misses need distinct requests: a clone with its own
                    // user turn (a few µs, next to the fsync's milliseconds).
                    let template = Arc::new(request(0));
                    let distinct = mode == Mode::Cached;
                    let r = run(conc, warm, dur, move |i| {
                        let client = client.clone();
                        let req = if distinct {
                            let mut r = (*template).clone();
                            r.messages[1] =
                                Message::user(format!("Request {i}: weather in Paris?"));
                            Arc::new(r)
                        } else {
                            template.clone()
                        };
                        async move {
                            let resp = client.chat(&req).await.expect("chat");
                            assert_eq!(resp.tool_calls.len(), 1);
                        }
                    })
                    .await;
                    if let Some(d) = dir {
                        let _ = std::fs::remove_dir_all(d);
                    }
                    r
                }
            };
            let (f_rate, f_p50) = *floor.get_or_insert((r.rate(), r.p50));
            println!(
                "| {} | {conc} | {} | {:.0} | {:.3} | {:.3} | {:.2} | {:.2} |",
                mode.label(),
                r.calls,
                r.rate(),
                ms(r.p50),
                ms(r.p99),
                r.rate() / f_rate,
                ms(r.p50) / ms(f_p50).max(1e-9),
            );
        }
    }
}
