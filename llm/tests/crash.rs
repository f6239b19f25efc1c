//! Crash safety of the call cache: a client process that is SIGKILLed after
//! N of M completed calls loses none of them; on restart only M-N calls reach
//! the server.
//!
//! The parent test starts a local server and re-runs this test binary as a
//! child (`crash_child`), which makes the calls through a `CachedClient` and
//! kills itself with SIGKILL right after the N-th call completed.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::Command;
use std::sync::Arc;

use llm::{
    CachedClient, CallCache, ChatRequest, Message, OpenAiBackend, OpenAiConfig, RetryPolicy,
};

const M: usize = 8;
const N: usize = 3;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_client_resumes_without_repeating_completed_calls() {
    let srv =
        common::start(|i, _| common::Reply::json(200, common::completion(&format!("answer {i}"))))
            .await;
    let dir = common::tempdir("crash");
    let run = |abort_after: Option<usize>| {
        let mut cmd = Command::new(std::env::current_exe().unwrap());
        cmd.args(["crash_child", "--exact", "--nocapture", "--test-threads=1"])
            .env("OTB_CRASH_CHILD", "1")
            .env("OTB_CRASH_URL", &srv.base_url)
            .env("OTB_CRASH_DIR", dir.path());
        if let Some(n) = abort_after {
            cmd.env("OTB_CRASH_ABORT_AFTER", n.to_string());
        }
        cmd
    };
    let mut first = run(Some(N));
    let out = tokio::task::spawn_blocking(move || first.output())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out.status.signal(),
        Some(9),
        "child should die by SIGKILL, got {:?}",
        out.status
    );
    assert_eq!(srv.count(), N);

    let mut second = run(None);
    let out = tokio::task::spawn_blocking(move || second.output())
        .await
        .unwrap()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(
        srv.count() - N,
        M - N,
        "restart must only make the missing calls"
    );

    let cache = CallCache::open(&dir).unwrap();
    assert_eq!(cache.len(), M);
    assert_eq!(cache.open_report().truncated_bytes, 0);
}

/// The child half; does nothing unless started by the test above.
#[tokio::test]
async fn crash_child() {
    if std::env::var_os("OTB_CRASH_CHILD").is_none() {
        return;
    }
    let url = std::env::var("OTB_CRASH_URL").unwrap();
    let dir = std::env::var("OTB_CRASH_DIR").unwrap();
    let abort_after: Option<usize> = std::env::var("OTB_CRASH_ABORT_AFTER")
        .ok()
        .and_then(|v| v.parse().ok());
    let mut cfg = OpenAiConfig::new(url);
    cfg.retry = RetryPolicy::fast(2);
    let client = CachedClient::new(
        Arc::new(OpenAiBackend::new(cfg).unwrap()),
        Arc::new(CallCache::open(dir).unwrap()),
    );
    for i in 0..M {
        let req = ChatRequest::new("m", vec![Message::user(format!("question {i}"))]);
        client.chat(&req).await.unwrap();
        if abort_after == Some(i + 1) {
            let pid = std::process::id().to_string();
            let _ = Command::new("kill").args(["-KILL", &pid]).status();
            // Only reached if `kill` is unavailable.
            std::process::abort();
        }
    }
}
