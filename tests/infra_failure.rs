//! A model call that fails for an infrastructure reason (here: 401 from the endpoint)
//! is not a result: the stage fails, nothing is published, the completed calls stay
//! in the call cache, and once the cause is fixed the same command makes exactly the
//! failed calls (and those not made yet) and ends with the table an uninterrupted run
//! gives. The model is a local OpenAI-compatible test server on 127.0.0.1.

mod common;

use common::{fixture, otb, otb_run, stdout_ok};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

const REPLY: &str = r#"{"id":"t","object":"chat.completion","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"function_1","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#;
const DENIED: &str = r#"{"error":{"message":"invalid api key","type":"invalid_request_error","code":"invalid_api_key"}}"#;

#[derive(Default)]
struct Server {
    /// Every request body received, with whether it was answered (true) or denied.
    log: Mutex<Vec<(String, bool)>>,
    tickets: AtomicUsize,
    /// Requests with these arrival numbers get 401 until `fixed`.
    deny: Vec<usize>,
    fixed: AtomicBool,
}

fn handle(mut stream: TcpStream, srv: Arc<Server>) {
    let Some(body) = common::read_request(&stream) else {
        return;
    };
    let ticket = srv.tickets.fetch_add(1, Ordering::SeqCst);
    let denied = !srv.fixed.load(Ordering::SeqCst) && srv.deny.contains(&ticket);
    let (status, text) = if denied {
        ("401 Unauthorized", DENIED)
    } else {
        ("200 OK", REPLY)
    };
    if common::respond(&mut stream, status, text) {
        if let Ok(mut l) = srv.log.lock() {
            l.push((String::from_utf8_lossy(&body).into_owned(), !denied));
        }
    }
}

fn serve(deny: Vec<usize>) -> (String, Arc<Server>) {
    let srv = Arc::new(Server {
        deny,
        ..Server::default()
    });
    (common::spawn_server(srv.clone(), handle), srv)
}

fn experiment(dir: &std::path::Path) -> std::path::PathBuf {
    let exp = dir.join("exp.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"infra\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\", \"names+params\"]\nmethods = [\"base\"]\n[models]\nagent = \"openai:fake\"\n",
            fixture("mini_bfcl.jsonl").display()
        ),
    )
    .expect("write exp");
    exp
}

/// `otb run`; `concurrent`: the two settings' chains run at the same time (the
/// default), else one after another (so which calls are denied is known).
fn run_with(
    store: &std::path::Path,
    exp: &std::path::Path,
    url: &str,
    concurrent: bool,
) -> std::process::Output {
    otb_run(store, exp)
        .env("OTB_CONCURRENT_CHAINS", if concurrent { "1" } else { "0" })
        .env("OTB_LLM_BASE_URL", url)
        .env("OTB_LLM_API_KEY", "test")
        .env("OTB_LLM_MAX_CONCURRENCY", "1")
        .output()
        .expect("run otb")
}

fn run(store: &std::path::Path, exp: &std::path::Path, url: &str) -> std::process::Output {
    run_with(store, exp, url, false)
}

#[test]
fn an_auth_failure_fails_the_stage_and_the_rerun_makes_only_the_missing_calls() {
    // The first explore stage has 5 agent calls (one per instance); calls 3-5 get 401.
    let (url, srv) = serve(vec![2, 3, 4]);
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = experiment(dir.path());
    let store = dir.path().join("store");
    let out = run(&store, &exp, &url);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let last = stderr.lines().last().unwrap_or("");
    assert!(last.starts_with("otb: error: "), "{stderr}");
    assert!(last.contains("auth"), "{stderr}");
    assert!(last.contains("run the same command again"), "{stderr}");
    let first: Vec<(String, bool)> = srv.log.lock().unwrap().clone();
    assert_eq!(first.len(), 5, "the stage's calls were all made once");
    let denied: Vec<&String> = first.iter().filter(|(_, ok)| !ok).map(|(b, _)| b).collect();
    assert_eq!(denied.len(), 3);
    // Nothing was published for the failed stage.
    assert!(
        !store.join("explore").is_dir()
            || std::fs::read_dir(store.join("explore")).unwrap().count() == 0,
        "a failed stage left an entry"
    );

    srv.fixed.store(true, Ordering::SeqCst);
    let out = run(&store, &exp, &url);
    stdout_ok(&out);
    let all: Vec<(String, bool)> = srv.log.lock().unwrap().clone();
    let second: Vec<&String> = all[first.len()..].iter().map(|(b, _)| b).collect();
    // The first stage's rerun sends exactly the three denied calls...
    let mut resent: Vec<&String> = second[..3].to_vec();
    resent.sort();
    let mut want = denied.clone();
    want.sort();
    assert_eq!(resent, want);
    // ...and never a call that had been answered.
    assert!(second
        .iter()
        .all(|b| !first.iter().any(|(f, ok)| *ok && f == *b)));
    // Then the second setting's 5 calls; 5 + 3 in all.
    assert_eq!(second.len(), 8);

    // The final table equals an uninterrupted run's.
    same_table_as_an_uninterrupted_run(dir.path(), &store, &exp);
}

#[test]
fn a_store_seeded_from_an_exported_cache_replays_without_a_model() {
    let (url, srv) = serve(vec![]);
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = experiment(dir.path());
    let a = dir.path().join("a");
    stdout_ok(&run(&a, &exp, &url));
    let made = srv.log.lock().unwrap().len();
    assert_eq!(made, 10);
    let file = dir.path().join("calls.parquet");
    // `otb --store STORE cache VERB..FILE`.
    let cache = |store: &std::path::Path, verb: &[&str], file: &std::path::Path| {
        otb()
            .arg("--store")
            .arg(store)
            .arg("cache")
            .args(verb)
            .arg(file)
            .output()
            .expect("otb cache")
    };
    let out = cache(&a, &["export", "--to"], &file);
    assert!(stdout_ok(&out).contains("wrote 10 calls"));
    let b = dir.path().join("b");
    let out = cache(&b, &["import"], &file);
    assert!(stdout_ok(&out).starts_with("imported 10 calls"));
    // Importing again adds nothing.
    let out = cache(&b, &["import"], &file);
    assert!(stdout_ok(&out).contains("(10 already there, 0 refused"));
    stdout_ok(&run(&b, &exp, &url));
    assert_eq!(
        srv.log.lock().unwrap().len(),
        made,
        "the seeded store made no call"
    );
    assert_eq!(common::run_table2(&a, &exp), common::run_table2(&b, &exp));
    // A file that is not an export is one error line, exit 2.
    let junk = dir.path().join("junk.parquet");
    std::fs::write(&junk, b"not parquet").unwrap();
    let out = cache(&b, &["import"], &junk);
    common::one_error_line(&out);
}

#[test]
fn with_concurrent_chains_a_rerun_resends_only_the_failed_calls() {
    // Both settings' explore stages send their 5 calls at once; whichever arrive
    // 3rd to 5th get 401.
    let (url, srv) = serve(vec![2, 3, 4]);
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = experiment(dir.path());
    let store = dir.path().join("store");
    let out = run_with(&store, &exp, &url, true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.lines().last().unwrap_or("").contains("auth"),
        "{stderr}"
    );
    let first: Vec<(String, bool)> = srv.log.lock().unwrap().clone();
    let denied: Vec<&String> = first.iter().filter(|(_, ok)| !ok).map(|(b, _)| b).collect();
    assert_eq!(denied.len(), 3, "{first:?}");

    srv.fixed.store(true, Ordering::SeqCst);
    stdout_ok(&run_with(&store, &exp, &url, true));
    let all: Vec<(String, bool)> = srv.log.lock().unwrap().clone();
    let second: Vec<&String> = all[first.len()..].iter().map(|(b, _)| b).collect();
    // Never a call that had been answered; every denied one again.
    assert!(second
        .iter()
        .all(|b| !first.iter().any(|(f, ok)| *ok && f == *b)));
    assert!(denied.iter().all(|d| second.contains(d)));
    // Ten distinct calls answered in all, each once.
    let answered = first.iter().filter(|(_, ok)| *ok).count() + second.len();
    assert_eq!(answered, 10, "{all:?}");

    // The final table equals an uninterrupted run's, with the chains one after another.
    same_table_as_an_uninterrupted_run(dir.path(), &store, &exp);
}

/// Table 2 of `store` is not empty and is that of an uninterrupted run of `exp` (the
/// chains one after another) on a fresh store under `dir`.
fn same_table_as_an_uninterrupted_run(
    dir: &std::path::Path,
    store: &std::path::Path,
    exp: &std::path::Path,
) {
    let (url, _srv) = serve(vec![]);
    let fresh = dir.join("store2");
    stdout_ok(&run(&fresh, exp, &url));
    let table = common::run_table2(store, exp);
    assert_eq!(table, common::run_table2(&fresh, exp));
    assert!(!table.is_empty());
}

/// Two `otb run`s of one experiment at the same time on one store pay for each model
/// call once: the store lock makes the second wait, and it then finds every stage
/// computed. (The endpoint counts the requests: those of one run, not two.)
#[test]
fn two_runs_at_once_on_one_store_make_each_call_once() {
    let d = tempfile::tempdir().unwrap();
    let exp = experiment(d.path());
    // What one run asks, on a store of its own.
    let (url, srv) = serve(Vec::new());
    assert!(run(&d.path().join("alone"), &exp, &url).status.success());
    let alone = srv.log.lock().unwrap().len();
    assert!(alone >= 10, "{alone} requests");

    let (url, srv) = serve(Vec::new());
    let store = d.path().join("shared");
    let spawn = || {
        otb_run(&store, &exp)
            .env("OTB_LLM_BASE_URL", &url)
            .env("OTB_LLM_API_KEY", "test")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    let (a, b) = (spawn(), spawn());
    let outs: Vec<_> = [a, b]
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    for o in &outs {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    let ran: Vec<String> = outs.iter().map(stdout_ok).collect();
    assert!(
        ran.iter().any(|s| s.contains(" 0 ran,")),
        "one of the runs computes nothing: {ran:?}"
    );
    assert_eq!(srv.log.lock().unwrap().len(), alone, "{ran:?}");
}

fn slow_handle(mut stream: TcpStream, _: Arc<()>) {
    if common::read_request(&stream).is_none() {
        return;
    }
    std::thread::sleep(std::time::Duration::from_millis(150));
    common::respond(&mut stream, "200 OK", REPLY);
}

/// Without a terminal (a batch job's log), `otb run` prints a heartbeat line at an
/// interval: what is being computed and how far, what is done, the model calls so
/// far; `--quiet` prints none; a bad interval is bad input before the store exists.
#[test]
fn a_run_without_a_terminal_prints_heartbeat_lines() {
    let url = common::spawn_server(Arc::new(()), slow_handle);
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = experiment(dir.path());
    let store = dir.path().join("store");
    let run = |quiet: bool, every: &str, store: &std::path::Path| {
        let mut c = otb_run(store, &exp);
        if quiet {
            c.arg("--quiet");
        }
        c.env("OTB_LLM_BASE_URL", &url)
            .env("OTB_LLM_API_KEY", "test")
            .env("OTB_LLM_MAX_CONCURRENCY", "1")
            .env("OTB_HEARTBEAT_S", every)
            .output()
            .expect("run otb")
    };
    let bad = run(false, "soon", &store);
    let err = common::one_error_line(&bad);
    assert!(err.contains("OTB_HEARTBEAT_S"), "{err}");
    assert!(!store.exists(), "nothing written before the error");

    let out = run(false, "0.1", &store);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let beats: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("otb: ") && l.contains(" infra: "))
        .collect();
    assert!(beats.len() >= 3, "heartbeat lines: {stderr}");
    assert!(
        beats
            .iter()
            .any(|l| l.contains("computing: explore[") && l.contains("/5")),
        "{beats:#?}"
    );
    assert!(
        beats.iter().any(|l| l.contains("model calls")),
        "{beats:#?}"
    );

    let quiet_store = dir.path().join("quiet");
    let out = run(true, "0.1", &quiet_store);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains(" infra: "), "{stderr}");
}

/// A server of a fleet: answers like `handle`'s fixed reply, counting; after
/// `dies_after` answers it drops every connection unanswered (a killed server).
#[derive(Default)]
struct FleetServer {
    answered: AtomicUsize,
    dies_after: usize,
}

fn fleet_handle(mut stream: TcpStream, srv: Arc<FleetServer>) {
    if srv.answered.load(Ordering::SeqCst) >= srv.dies_after {
        return; // the connection is dropped: refused/reset for the client
    }
    if common::read_request(&stream).is_none() {
        return;
    }
    // The answer is counted before it is sent: counted after, the client could read it
    // and open its next connection before the count rose, and a server killed after
    // `dies_after` answers would answer once more.
    let claimed = srv
        .answered
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < srv.dies_after).then_some(n + 1)
        })
        .is_ok();
    if claimed && !common::respond(&mut stream, "200 OK", REPLY) {
        srv.answered.fetch_sub(1, Ordering::SeqCst);
    }
}

fn fleet_server(dies_after: usize) -> Arc<FleetServer> {
    Arc::new(FleetServer {
        dies_after,
        ..FleetServer::default()
    })
}

/// The reference for the fleet tests: the experiment run against one server. Returns
/// the scratch folder, the experiment, the store and the number of calls it made.
fn reference_run() -> (
    tempfile::TempDir,
    std::path::PathBuf,
    std::path::PathBuf,
    usize,
) {
    let dir = tempfile::tempdir().expect("tempdir");
    let exp = experiment(dir.path());
    let (url, srv) = serve(vec![]);
    let one = dir.path().join("one");
    assert!(run_with(&one, &exp, &url, true).status.success());
    let total = srv.log.lock().unwrap().len();
    (dir, exp, one, total)
}

fn cached_calls(store: &std::path::Path) -> String {
    stdout_ok(
        &otb()
            .arg("--store")
            .arg(store)
            .args(["cache", "stats"])
            .output()
            .expect("cache stats"),
    )
    .lines()
    .next()
    .unwrap_or("")
    .rsplit(": ")
    .next()
    .unwrap_or("")
    .to_string()
}

/// Two servers behind `OTB_LLM_BASE_URL`, one killed mid-run: the run completes on
/// the other, every call is answered once (no call lost, none paid twice), the cache
/// holds what a run on one server holds, and the end-of-run line counts the calls
/// per server.
#[test]
fn a_fleet_member_killed_mid_run_leaves_the_run_to_the_others() {
    let (dir, exp, one, total) = reference_run();
    assert!(total > 4);
    let (a, b) = (fleet_server(3), fleet_server(usize::MAX));
    let urls = format!(
        "{},{}",
        common::spawn_server(a.clone(), fleet_handle),
        common::spawn_server(b.clone(), fleet_handle)
    );
    let two = dir.path().join("two");
    let out = otb_run(&two, &exp)
        .env("OTB_LLM_BASE_URL", &urls)
        .env("OTB_LLM_API_KEY", "test")
        .env("OTB_LLM_MAX_CONCURRENCY", "1")
        .output()
        .expect("run otb");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (na, nb) = (
        a.answered.load(Ordering::SeqCst),
        b.answered.load(Ordering::SeqCst),
    );
    assert_eq!(na, 3, "a answered until it was killed");
    assert_eq!(na + nb, total, "every call answered once");
    assert_eq!(cached_calls(&two), cached_calls(&one));
    assert!(stderr.contains("fleet of 2: "), "{stderr}");
    assert_eq!(
        common::run_table2(&two, &exp),
        common::run_table2(&one, &exp)
    );
}

/// The fleet given in the experiment file (`[models] endpoints`) instead of
/// `OTB_LLM_BASE_URL`: both servers answer, the run equals a run on one server, the
/// end-of-run line counts the fleet; a URL that is not one is a one-line error before
/// anything is written; and the variable, when set, wins over the file.
#[test]
fn a_fleet_named_in_the_experiment_file_shares_the_calls() {
    let (dir, exp, one, total) = reference_run();
    let (a, b) = (fleet_server(usize::MAX), fleet_server(usize::MAX));
    let (ua, ub) = (
        common::spawn_server(a.clone(), fleet_handle),
        common::spawn_server(b.clone(), fleet_handle),
    );
    let with_endpoints = |list: &str| {
        let text = std::fs::read_to_string(&exp).expect("read exp");
        let p = dir.path().join(format!("fleet{}.toml", list.len()));
        std::fs::write(&p, format!("{text}endpoints = [{list}]\n")).expect("write");
        p
    };
    let run = |exp: &std::path::Path, store: &std::path::Path, base: Option<&str>| {
        let mut c = otb_run(store, exp);
        c.env_remove("OTB_LLM_BASE_URL")
            .env("OTB_LLM_API_KEY", "test")
            .env("OTB_LLM_MAX_CONCURRENCY", "1");
        if let Some(b) = base {
            c.env("OTB_LLM_BASE_URL", b);
        }
        c.output().expect("run otb")
    };

    let bad = with_endpoints("\"ftp://example\"");
    let out = run(&bad, &dir.path().join("bad"), None);
    let err = common::one_error_line(&out);
    assert!(
        err.contains("models.endpoints") && err.contains("ftp://example"),
        "{err}"
    );
    assert!(
        !dir.path().join("bad").exists(),
        "nothing written before the error"
    );

    let fleet = with_endpoints(&format!("\"{ua}\", \"{ub}\""));
    let two = dir.path().join("two");
    let out = run(&fleet, &two, None);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let (na, nb) = (
        a.answered.load(Ordering::SeqCst),
        b.answered.load(Ordering::SeqCst),
    );
    assert!(na > 0 && nb > 0, "both servers answered: {na} and {nb}");
    assert_eq!(na + nb, total, "every call answered once");
    assert!(stderr.contains("fleet of 2: "), "{stderr}");
    assert_eq!(
        common::run_table2(&two, &fleet),
        common::run_table2(&one, &exp)
    );

    // OTB_LLM_BASE_URL wins: the file's fleet gets nothing.
    let (url3, srv3) = serve(vec![]);
    let three = dir.path().join("three");
    let out = run(&fleet, &three, Some(&url3));
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(srv3.log.lock().unwrap().len(), total);
    assert_eq!(
        a.answered.load(Ordering::SeqCst) + b.answered.load(Ordering::SeqCst),
        total
    );
}

/// Two agents whose evaluations come out byte for byte the same (`replay:fake`
/// answers with the calls `openai:fake` made) each get their own summary rows: the
/// summary's key holds each input's grid position (it once held only the labels, so
/// the second agent found the first one's summary and its table row was missing).
#[test]
fn a_second_agent_with_the_same_answers_gets_its_own_summary() {
    let (dir, exp, one, _) = reference_run();
    let text = std::fs::read_to_string(&exp).expect("read exp");
    let replay = dir.path().join("replay.toml");
    std::fs::write(&replay, text.replace("openai:fake", "replay:fake")).expect("write");
    let out = otb_run(&one, &replay).output().expect("run otb");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let replayed = common::run_table2(&one, &replay);
    assert!(replayed.contains("replay:fake"), "{replayed}");
    assert_eq!(
        replayed,
        common::run_table2(&one, &exp).replace("openai:fake", "replay:fake")
    );
}
