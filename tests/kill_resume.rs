//! Killing `otb run` midway (SIGKILL) and restarting loses at most the model calls
//! that were in flight: every answered call is in the crash-safe call cache and is not
//! sent again. The model is a local OpenAI-compatible test server on 127.0.0.1.

mod common;

use common::{fixture, otb};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Request bodies answered so far, in order.
type Log = Arc<Mutex<Vec<String>>>;

const REPLY: &str = r#"{"id":"t","object":"chat.completion","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"function_1","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#;

fn handle(mut stream: TcpStream, log: Log, delay: Duration) {
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let l = line.trim_end().to_ascii_lowercase();
        if l.is_empty() {
            break;
        }
        if let Some(v) = l.strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    std::thread::sleep(delay);
    let resp = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{REPLY}",
        REPLY.len()
    );
    if stream.write_all(resp.as_bytes()).is_ok() && stream.flush().is_ok() {
        if let Ok(mut l) = log.lock() {
            l.push(String::from_utf8_lossy(&body).into_owned());
        }
    }
}

fn serve(delay: Duration) -> (String, Log) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    let log: Log = Arc::default();
    let l2 = log.clone();
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let log = l2.clone();
            std::thread::spawn(move || handle(s, log, delay));
        }
    });
    (url, log)
}

#[test]
fn sigkill_midway_loses_at_most_the_calls_in_flight() {
    let (url, log) = serve(Duration::from_millis(150));
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
    // 5 instances x 3 settings = 15 agent calls; kill after 7 answers.
    let mut child = run()
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn otb");
    let start = Instant::now();
    while log.lock().map(|l| l.len()).unwrap_or(0) < 7 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "server saw too few calls"
        );
        assert!(
            child.try_wait().expect("wait").is_none(),
            "otb finished too early"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    child.kill().expect("kill");
    child.wait().expect("reap");
    let first: Vec<String> = log.lock().expect("log").clone();

    let out = run().output().expect("rerun");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let all: Vec<String> = log.lock().expect("log").clone();
    let second = &all[first.len()..];
    let mut distinct = all.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 15, "every call answered once in the end");
    let repeated = second.iter().filter(|b| first.contains(b)).count();
    assert!(
        repeated <= concurrency,
        "{repeated} answered calls were sent again (at most {concurrency} can be in flight)"
    );
    assert!(second.len() <= 15 - first.len() + concurrency);

    // Finished: a third run is all cache hits and makes no call.
    let before = log.lock().expect("log").len();
    let out = run().output().expect("third run");
    assert!(out.status.success());
    assert_eq!(log.lock().expect("log").len(), before);
}
