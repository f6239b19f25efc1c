//! `mcp::servers`: MCP servers as an environment's tools.
//!
//! - The hostile stdio server of `tests/fixtures/hostile_mcp.py` (standard library
//!   Python): a server that hangs, speaks garbage, exits or floods is restarted
//!   once and then one error naming it; unknown tools and servers are the model's
//!   mistakes (`is_error`); episodes start only the servers they call, on several
//!   threads at once, and leave nothing behind.
//! - The real PyPI `mcp-server-git` (`OTB_MCP_SERVER_GIT`, its command) on a small
//!   repository made here: its 12 tools, `git_log` through the alias, episodes
//!   that commit without touching each other or the original, identities that
//!   follow the working folder, and `fresh = "run"` sharing state.
//!
//! Without `python3` or the server they skip, saying so, unless `OTB_REQUIRE` names
//! `mcp`.

use mcp::bounds::Limits;
use mcp::servers::{Fresh, ServerSpec, Servers};
use mcp::Error;
use serde_json::json;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn hostile() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/hostile_mcp.py")
        .to_string_lossy()
        .into_owned()
}

/// `python3` runs, or the test skips (the resource `mcp`).
fn python3() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "pass"])
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        testkit::skip("mcp", "no python3 for the test-made MCP servers");
    }
    ok
}

/// The hostile server in `mode` as server `name`.
fn hostile_spec(name: &str, mode: &str) -> ServerSpec {
    ServerSpec::new(name, vec!["python3".into(), hostile(), mode.into()])
}

fn quick() -> Limits {
    Limits {
        connect: Duration::from_secs(20),
        call: Duration::from_secs(2),
        ..Limits::default()
    }
}

/// The folders left under `scratch`.
fn left(scratch: &Path) -> Vec<PathBuf> {
    match std::fs::read_dir(scratch) {
        // The servers' stderr logs (`logs/`) are kept on purpose; copies are not.
        Ok(rd) => rd
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| !p.ends_with("logs"))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn a_failing_server_is_restarted_once_then_one_error_naming_it() {
    if !python3() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let limits = Limits {
        message_bytes: 1 << 20,
        ..quick()
    };
    for (mode, says) in [
        ("never-call", "did not answer `tools/call` within 2 s"),
        ("garbage", "not an MCP message"),
        ("exit", "exited"),
        ("huge", "more than 1048576 bytes"),
    ] {
        let servers =
            Servers::open(vec![hostile_spec("h", mode)], dir.path(), limits).expect("open");
        let ep = servers.episode().expect("episode");
        let t = std::time::Instant::now();
        let e = ep
            .call("h", "echo", &json!({"text": "hi"}))
            .expect_err(mode);
        let line = e.to_string();
        assert!(
            matches!(e, Error::Server { ref server, .. } if server == "h"),
            "{mode}: {line}"
        );
        assert!(
            line.starts_with("MCP server `h` ") && line.contains(says) && !line.contains('\n'),
            "{mode}: {line}"
        );
        // Two tries, each within the limit: no hang.
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "{mode}: {:?}",
            t.elapsed()
        );
        drop(ep);
        drop(servers);
    }
    assert!(left(dir.path()).is_empty(), "{:?}", left(dir.path()));

    // A server that does not start is an error naming it, from `open`.
    let e = Servers::open(
        vec![hostile_spec("late", "never-init")],
        dir.path(),
        quick_connect(),
    )
    .err()
    .expect("never-init");
    assert!(e.to_string().starts_with("MCP server `late` "), "{e}");
    let e = Servers::open(
        vec![ServerSpec::new(
            "nothing",
            vec!["/nonexistent/otb-mcp-server".into()],
        )],
        dir.path(),
        quick(),
    )
    .err()
    .expect("no such program");
    assert!(e.to_string().contains("`nothing` cannot start it"), "{e}");
    assert!(left(dir.path()).is_empty(), "{:?}", left(dir.path()));
}

#[test]
fn a_server_that_fails_once_is_restarted_and_the_call_retried() {
    if !python3() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let starts = dir.path().join("starts");
    // The first two starts (by `open`, then by the episode) exit at their first
    // tool call; the third behaves.
    let script = format!(
        "touch '{s}'; n=$(wc -l < '{s}'); echo x >> '{s}'; \
         if [ \"$n\" -ge 2 ]; then exec python3 '{h}' echo; else exec python3 '{h}' exit; fi",
        s = starts.display(),
        h = hostile()
    );
    let spec = ServerSpec::new("flaky", vec!["sh".into(), "-c".into(), script]);
    let servers = Servers::open(vec![spec], &dir.path().join("scratch"), quick()).expect("open");
    let ep = servers.episode().expect("episode");
    let r = ep
        .call("flaky", "echo", &json!({"text": "hi"}))
        .expect("retried on a restarted server");
    assert_eq!(r.text, "hi");
    let n = std::fs::read_to_string(&starts)
        .expect("starts")
        .lines()
        .count();
    assert_eq!(n, 3, "open, the episode's start, one restart");
}

fn quick_connect() -> Limits {
    Limits {
        connect: Duration::from_secs(2),
        ..quick()
    }
}

#[test]
fn episodes_start_what_they_call_on_many_threads_and_leave_nothing() {
    if !python3() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let work = dir.path().join("work");
    std::fs::create_dir(&work).expect("mkdir");
    std::fs::write(work.join("a.txt"), "a").expect("write");
    let scratch = dir.path().join("scratch");
    let mut a = hostile_spec("a", "echo");
    a.workdir = Some(work.clone());
    let mut b = hostile_spec("b", "echo");
    b.workdir = Some(work.clone());
    let servers = Servers::open(vec![a, b], &scratch, quick()).expect("open");
    let ids = servers.identities();
    assert_eq!(ids.len(), 2);
    assert_eq!(ids[0].server_info.as_deref(), Some("hostile-echo 0"));
    assert_eq!(ids[0].workdir_digest, ids[1].workdir_digest);
    assert!(ids[0]
        .workdir_digest
        .as_ref()
        .is_some_and(|d| d.len() == 64));
    let names: Vec<String> = servers
        .tools("a")
        .expect("tools")
        .into_iter()
        .map(|t| t.name)
        .collect();
    assert_eq!(names, ["echo"]);
    assert!(servers.tools("zz").is_err());

    let ep = servers.episode().expect("episode");
    assert!(ep.workdir("a").is_none(), "nothing starts before a call");
    let r = ep
        .call("a", "echo", &json!({"text": "/workspace/a.txt"}))
        .expect("call");
    assert_eq!(r.text, "/workspace/a.txt");
    assert!(!r.is_error);
    let copy = ep.workdir("a").expect("a started");
    assert!(copy.starts_with(&scratch) && copy.join("a.txt").is_file());
    assert!(
        ep.workdir("b").is_none(),
        "b was not called, so not started"
    );
    // The model's mistakes are results, not failures.
    for (server, tool, args, says) in [
        (
            "a",
            "nope",
            json!({}),
            "unknown tool `nope` on MCP server `a`",
        ),
        ("zz", "echo", json!({}), "no MCP server `zz`"),
        ("a", "echo", json!([1]), "must be a JSON object"),
    ] {
        let r = ep.call(server, tool, &args).expect("a result");
        assert!(r.is_error && r.text.contains(says), "{}", r.text);
    }
    drop(ep);
    assert!(!copy.exists(), "the episode's copy is deleted with it");

    // Several episodes on several threads at once (`Servers` is `Sync`).
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|k| {
                let servers = &servers;
                scope.spawn(move || {
                    let ep = servers.episode().expect("episode");
                    let server = if k % 2 == 0 { "a" } else { "b" };
                    let r = ep
                        .call(server, "echo", &json!({"text": format!("n{k}")}))
                        .expect("call");
                    assert_eq!(r.text, format!("n{k}"));
                })
            })
            .collect();
        for h in handles {
            h.join().expect("thread");
        }
    });
    drop(servers);
    assert!(left(&scratch).is_empty(), "{:?}", left(&scratch));
    assert!(work.join("a.txt").is_file(), "the original is untouched");
}

/// The command of `mcp-server-git`, or the test skips.
fn git_server() -> Option<Vec<String>> {
    let server = std::env::var("OTB_MCP_SERVER_GIT").unwrap_or_else(|_| "mcp-server-git".into());
    let server: Vec<String> = server.split_whitespace().map(str::to_string).collect();
    let runs = server.first().is_some_and(|s| {
        Command::new(s)
            .args(&server[1..])
            .arg("--help")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    let git = Command::new("git")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !runs || !git {
        testkit::skip(
            "mcp",
            format!(
                "no mcp-server-git ({}; set OTB_MCP_SERVER_GIT) or no git",
                server.join(" ")
            ),
        );
        return None;
    }
    Some(server)
}

/// Run git in `dir` with a fixed author, committer and date.
fn git(dir: &Path, args: &[&str], date: &str) -> String {
    let out = Command::new("git")
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .current_dir(dir)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "Ada Lovelace")
        .env("GIT_AUTHOR_EMAIL", "ada@example.org")
        .env("GIT_COMMITTER_NAME", "Ada Lovelace")
        .env("GIT_COMMITTER_EMAIL", "ada@example.org")
        .env("GIT_AUTHOR_DATE", date)
        .env("GIT_COMMITTER_DATE", date)
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A repository with two commits.
fn repo(dir: &Path) -> PathBuf {
    let r = dir.join("repo");
    std::fs::create_dir(&r).expect("mkdir");
    let d1 = "2020-01-01T00:00:00Z";
    git(&r, &["init", "-q", "-b", "main"], d1);
    std::fs::write(r.join("a.txt"), "hello\n").expect("write");
    git(&r, &["add", "a.txt"], d1);
    git(&r, &["commit", "-q", "-m", "first commit"], d1);
    std::fs::write(r.join("b.txt"), "world\n").expect("write");
    git(&r, &["add", "b.txt"], "2020-01-02T00:00:00Z");
    git(
        &r,
        &["commit", "-q", "-m", "second commit adds b"],
        "2020-01-02T00:00:00Z",
    );
    r
}

fn git_spec(server: &[String], repo: &Path, fresh: Fresh) -> ServerSpec {
    let mut command = server.to_vec();
    command.extend(["--repository".into(), "{workdir}".into()]);
    let mut s = ServerSpec::new("git", command);
    s.workdir = Some(repo.to_path_buf());
    s.fresh = fresh;
    for k in ["AUTHOR", "COMMITTER"] {
        s.env.insert(format!("GIT_{k}_NAME"), "Agent".into());
        s.env
            .insert(format!("GIT_{k}_EMAIL"), "agent@example.org".into());
    }
    s
}

fn limits() -> Limits {
    Limits {
        connect: Duration::from_secs(60),
        call: Duration::from_secs(60),
        ..Limits::default()
    }
}

#[test]
fn git_episodes_work_on_private_copies_behind_the_alias() {
    let Some(server) = git_server() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = repo(dir.path());
    let scratch = dir.path().join("scratch");
    let open = || {
        Servers::open(
            vec![git_spec(&server, &repo, Fresh::Episode)],
            &scratch,
            limits(),
        )
        .expect("open mcp-server-git")
    };
    let servers = open();
    let names: BTreeSet<String> = servers
        .tools("git")
        .expect("tools")
        .into_iter()
        .map(|t| t.name)
        .collect();
    let expected: BTreeSet<String> = [
        "git_status",
        "git_diff_unstaged",
        "git_diff_staged",
        "git_diff",
        "git_commit",
        "git_add",
        "git_reset",
        "git_log",
        "git_create_branch",
        "git_checkout",
        "git_show",
        "git_branch",
    ]
    .map(String::from)
    .into();
    assert_eq!(names, expected);
    let id = servers.identities().remove(0);
    assert!(id.server_info.is_some(), "{id:?}");
    assert_eq!(id.command[id.command.len() - 1], "{workdir}");

    let real = |s: &str| {
        let scratch = scratch.to_string_lossy();
        let repo = repo.to_string_lossy();
        !s.contains(scratch.as_ref()) && !s.contains(repo.as_ref())
    };
    let log = |ep: &mcp::servers::Episode<'_>| {
        let r = ep
            .call("git", "git_log", &json!({"repo_path": "/workspace"}))
            .expect("git_log");
        assert!(!r.is_error, "{}", r.text);
        assert!(real(&r.text), "a real path shows: {}", r.text);
        r.text
    };

    let ep = servers.episode().expect("episode");
    let text = log(&ep);
    assert!(
        text.contains("first commit") && text.contains("second commit adds b"),
        "{text}"
    );
    // The episode commits a new file in its copy.
    let copy = ep.workdir("git").expect("started");
    std::fs::write(copy.join("c.txt"), "new\n").expect("write");
    let r = ep
        .call(
            "git",
            "git_add",
            &json!({"repo_path": "/workspace", "files": ["c.txt"]}),
        )
        .expect("git_add");
    assert!(!r.is_error, "{}", r.text);
    let r = ep
        .call(
            "git",
            "git_commit",
            &json!({"repo_path": "/workspace", "message": "third commit by the agent"}),
        )
        .expect("git_commit");
    assert!(!r.is_error && real(&r.text), "{}", r.text);
    assert!(log(&ep).contains("third commit by the agent"));
    // A tool's failure is a result, with no real path in it.
    let r = ep
        .call(
            "git",
            "git_log",
            &json!({"repo_path": "/workspace/no-such-folder"}),
        )
        .expect("a result");
    assert!(r.is_error && real(&r.text), "{}", r.text);
    drop(ep);
    assert!(!copy.exists());

    // The next episode, and the original, never saw it.
    let ep = servers.episode().expect("episode");
    let text = log(&ep);
    assert!(
        text.contains("second commit adds b") && !text.contains("third commit"),
        "{text}"
    );
    drop(ep);
    assert_eq!(
        git(&repo, &["log", "--format=%s"], "2020-01-03T00:00:00Z"),
        "second commit adds b\nfirst commit\n"
    );
    assert!(!repo.join("c.txt").exists());
    drop(servers);

    // The identity follows the working folder.
    let again = open();
    assert_eq!(
        again.identities()[0],
        id,
        "the same folder, the same identity"
    );
    drop(again);
    std::fs::write(repo.join("a.txt"), "changed\n").expect("write");
    let changed = open();
    assert_ne!(changed.identities()[0].workdir_digest, id.workdir_digest);
    drop(changed);
    assert!(left(&scratch).is_empty(), "{:?}", left(&scratch));
}

#[test]
fn git_with_fresh_run_shares_one_copy() {
    let Some(server) = git_server() else { return };
    let dir = tempfile::tempdir().expect("tempdir");
    let repo = repo(dir.path());
    let scratch = dir.path().join("scratch");
    let servers = Servers::open(
        vec![git_spec(&server, &repo, Fresh::Run)],
        &scratch,
        limits(),
    )
    .expect("open");
    let ep = servers.episode().expect("episode");
    let r = ep
        .call(
            "git",
            "git_create_branch",
            &json!({"repo_path": "/workspace", "branch_name": "feature-x"}),
        )
        .expect("git_create_branch");
    assert!(!r.is_error, "{}", r.text);
    let copy = ep.workdir("git").expect("the shared copy");
    drop(ep);
    assert!(copy.exists(), "the shared copy stays for the run");
    let ep = servers.episode().expect("episode");
    let r = ep
        .call(
            "git",
            "git_branch",
            &json!({"repo_path": "/workspace", "branch_type": "local"}),
        )
        .expect("git_branch");
    assert!(r.text.contains("feature-x"), "{}", r.text);
    drop(ep);
    let branches = git(
        &repo,
        &["branch", "--format=%(refname:short)"],
        "2020-01-03T00:00:00Z",
    );
    assert_eq!(branches, "main\n", "the original is untouched");
    drop(servers);
    assert!(left(&scratch).is_empty(), "{:?}", left(&scratch));
}
