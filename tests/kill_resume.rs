//! Killing `otb run` midway (SIGKILL) and restarting loses at most the model calls
//! that were in flight: every answered call is in the crash-safe call cache and is not
//! sent again. The model is a local OpenAI-compatible test server on 127.0.0.1.

mod common;

use common::{fixture, otb};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const REPLY: &str = r#"{"id":"t","object":"chat.completion","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"function_1","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#;

/// The test server's shared state.
#[derive(Default)]
struct Server {
    /// Request bodies answered so far, in order.
    log: Mutex<Vec<String>>,
    /// Requests received so far (a request's ticket is its arrival number).
    tickets: AtomicUsize,
    /// Until `open`, requests whose ticket is at least this are held and never answered.
    answer_limit: usize,
    /// Requests being held right now.
    held: AtomicUsize,
    /// Set after the kill: held requests give up (drop the connection without an
    /// answer) and every new request is answered.
    open: AtomicBool,
}

impl Server {
    fn answered(&self) -> Vec<String> {
        self.log.lock().map(|l| l.clone()).unwrap_or_default()
    }
}

fn handle(mut stream: TcpStream, srv: Arc<Server>) {
    let Some(body) = common::read_request(&stream) else {
        return;
    };
    let ticket = srv.tickets.fetch_add(1, Ordering::SeqCst);
    if ticket >= srv.answer_limit && !srv.open.load(Ordering::SeqCst) {
        // In flight forever: the client waits for an answer that never comes.
        srv.held.fetch_add(1, Ordering::SeqCst);
        while !srv.open.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
        srv.held.fetch_sub(1, Ordering::SeqCst);
        return;
    }
    std::thread::sleep(Duration::from_millis(30));
    if common::respond(&mut stream, "200 OK", REPLY) {
        if let Ok(mut l) = srv.log.lock() {
            l.push(String::from_utf8_lossy(&body).into_owned());
        }
    }
}

/// Starts the server; it answers the first `answer_limit` requests and holds the
/// rest open.
fn serve(answer_limit: usize) -> (String, Arc<Server>) {
    let srv = Arc::new(Server {
        answer_limit,
        ..Server::default()
    });
    (common::spawn_server(srv.clone(), handle), srv)
}

fn wait_until(what: &str, child: &mut std::process::Child, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "timed out: {what}"
        );
        assert!(
            child.try_wait().expect("wait").is_none(),
            "otb finished before {what}"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn sigkill_midway_loses_at_most_the_calls_in_flight() {
    // 5 instances x 3 settings = 15 agent calls; the server answers 7 and then holds
    // every further request open, so the process is killed at a known point: 7 calls
    // answered, the next ones in flight.
    let answered_before_kill = 7usize;
    let (url, srv) = serve(answered_before_kill);
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = dir.path().join("exp.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"kill\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\", \"names+desc\", \"names+params\"]\nmethods = [\"base\"]\n[models]\nagent = \"openai:fake\"\n",
            fixture("mini_bfcl.jsonl").display()
        ),
    )
    .expect("write exp");
    let store = dir.path().join("store");
    let concurrency = 2usize;
    let run = || {
        let mut c = otb();
        c.arg("--store")
            .arg(&store)
            .arg("run")
            .arg(&exp)
            .env("OTB_LLM_BASE_URL", &url)
            .env("OTB_LLM_API_KEY", "test")
            .env("OTB_LLM_MAX_CONCURRENCY", concurrency.to_string());
        c
    };
    let mut child = run()
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn otb");
    wait_until("7 answers", &mut child, || {
        srv.answered().len() == answered_before_kill
    });
    wait_until("a held request", &mut child, || {
        srv.held.load(Ordering::SeqCst) >= 1
    });
    // The answered calls are written the moment they complete; give the last one a
    // generous moment before the kill.
    std::thread::sleep(Duration::from_millis(1500));
    let in_flight = srv.held.load(Ordering::SeqCst);
    assert!(
        (1..=concurrency).contains(&in_flight),
        "{in_flight} requests in flight with OTB_LLM_MAX_CONCURRENCY={concurrency}"
    );
    child.kill().expect("kill");
    child.wait().expect("reap");
    srv.open.store(true, Ordering::SeqCst);
    let first = srv.answered();
    assert_eq!(first.len(), answered_before_kill);

    let out = run().output().expect("rerun");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all = srv.answered();
    let second = &all[first.len()..];
    let mut distinct = all.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 15, "every call answered once in the end");
    let repeated = second.iter().filter(|b| first.contains(b)).count();
    assert_eq!(
        repeated, 0,
        "answered calls were sent again after the restart"
    );
    assert_eq!(
        second.len(),
        15 - first.len(),
        "the restart sends only the rest"
    );

    // Finished: a third run is all cache hits and makes no call.
    let before = srv.answered().len();
    let out = run().output().expect("third run");
    assert!(out.status.success());
    assert_eq!(srv.answered().len(), before);
}
