//! `otb docs` and `otb mcp proxy` end to end.
//!
//! - `otb docs` on the scripted BFCL grid: the learned tool list in MCP's
//!   `tools/list` shape with its provenance; bad input is one line, exit 2, nothing
//!   written.
//! - The proxy in front of hostile stdio servers (`tests/fixtures/hostile_mcp.py`,
//!   standard library only) with a plain JSON-RPC client written here: every
//!   misbehaviour bounded, one line naming the server, no hang.
//! - The proxy with a real client and a real server: the official MCP Python SDK
//!   (`OTB_MCP_PYTHON`, a Python with PyPI `mcp`) lists the learned descriptions
//!   and calls a tool of PyPI `mcp-server-git` (`OTB_MCP_SERVER_GIT`, its command)
//!   through it, over stdio and over Streamable HTTP. Without them it skips, saying
//!   so, unless `OTB_REQUIRE` names `mcp`.

mod common;

use common::{one_error_line, stdout_ok, Scratch, MODELS};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn hostile() -> PathBuf {
    common::fixture("hostile_mcp.py")
}

/// `python3` runs, or the test skips (the resource `mcp`).
fn python3() -> bool {
    common::python3("mcp", "no python3 for the test-made MCP servers")
}

/// A tool list naming `echo` with a learned description.
fn learned(dir: &Path) -> PathBuf {
    let p = dir.join("tools.json");
    let list = json!({"tools": [{"name": "echo", "description": "LEARNED: repeats `text`.",
        "inputSchema": {"type": "object"}}], "_otb": {"experiment": "test"}});
    std::fs::write(&p, list.to_string()).expect("write tools.json");
    p
}

/// `otb mcp proxy` on stdio with a JSON-RPC client of the test's own.
struct Proxy {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
    stderr: std::thread::JoinHandle<String>,
    next: u64,
}

impl Proxy {
    fn start(docs: &Path, upstream: &[&str]) -> Proxy {
        Proxy::start_with(docs, upstream, "2")
    }

    /// With `call_s` seconds for a request.
    fn start_with(docs: &Path, upstream: &[&str], call_s: &str) -> Proxy {
        let mut child = common::otb()
            .args(["mcp", "proxy", "--docs"])
            .arg(docs)
            .args([
                "--connect-timeout-s",
                "2",
                "--call-timeout-s",
                call_s,
                "--upstream",
            ])
            .args(upstream)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start otb mcp proxy");
        let stdout = child.stdout.take().expect("stdout");
        let stderr = child.stderr.take().expect("stderr");
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(stdout).lines() {
                let Ok(l) = l else { break };
                if tx.send(l).is_err() {
                    break;
                }
            }
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut BufReader::new(stderr), &mut s);
            s
        });
        Proxy {
            stdin: child.stdin.take(),
            child,
            lines,
            stderr,
            next: 1,
        }
    }

    fn send(&mut self, msg: Value) -> bool {
        let Some(stdin) = self.stdin.as_mut() else {
            return false;
        };
        writeln!(stdin, "{msg}")
            .and_then(|()| stdin.flush())
            .is_ok()
    }

    /// Send request `method` and wait (at most 20 s) for its answer: `None` when
    /// the proxy closed its stdout first.
    fn request(&mut self, method: &str, params: Value) -> Option<Value> {
        let id = self.next;
        self.next += 1;
        if !self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})) {
            return None;
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let left = deadline.checked_duration_since(Instant::now())?;
            match self.lines.recv_timeout(left) {
                Ok(l) => {
                    let v: Value = serde_json::from_str(&l).expect("the proxy speaks JSON");
                    if v["id"] == json!(id) {
                        return Some(v);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => panic!("no answer to {method} in 20 s"),
                Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            }
        }
    }

    fn handshake(&mut self) -> Option<Value> {
        let r = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "test", "version": "0"}}),
        )?;
        self.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        Some(r)
    }

    /// Close stdin and wait (at most 20 s) for the proxy to end: its exit code and
    /// stderr.
    fn finish(mut self) -> (Option<i32>, String) {
        self.stdin = None;
        let deadline = Instant::now() + Duration::from_secs(20);
        let status = loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("otb mcp proxy did not end within 20 s of its stdin closing");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        (status.code(), self.stderr.join().expect("stderr"))
    }
}

/// The one `otb: error:` line of a proxy that ended because of its upstream.
fn upstream_line(code: Option<i32>, stderr: &str, mode: &str) -> String {
    assert_eq!(code, Some(1), "{stderr}");
    let lines: Vec<&str> = stderr.lines().filter(|l| l.starts_with("otb: ")).collect();
    assert_eq!(lines.len(), 1, "{stderr}");
    assert!(
        lines[0].starts_with("otb: error: MCP server `python3 ")
            && lines[0].contains(&format!("hostile_mcp.py {mode}`")),
        "{stderr}"
    );
    lines[0].to_string()
}

fn error_message(v: &Value) -> String {
    v["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("an MCP error, got {v}"))
        .to_string()
}

#[test]
fn the_proxy_lists_learned_descriptions_and_forwards_calls_and_errors() {
    if !python3() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = learned(dir.path());
    let h = hostile();
    let mut p = Proxy::start(&docs, &["python3", h.to_str().expect("utf8"), "echo"]);
    let init = p.handshake().expect("initialize");
    assert_eq!(
        init["result"]["serverInfo"]["name"], "hostile-echo",
        "{init}"
    );
    let list = p.request("tools/list", json!({})).expect("tools/list");
    assert_eq!(
        list["result"]["tools"][0]["description"], "LEARNED: repeats `text`.",
        "{list}"
    );
    assert_eq!(
        list["result"]["tools"][0]["inputSchema"]["properties"]["text"]["type"], "string",
        "the upstream's schema is served unchanged: {list}"
    );
    let call = p
        .request(
            "tools/call",
            json!({"name": "echo", "arguments": {"text": "hi there"}}),
        )
        .expect("tools/call");
    assert_eq!(call["result"]["content"][0]["text"], "hi there", "{call}");
    // An error the upstream answers passes through as it is.
    let err = p
        .request("tools/call", json!({"name": "nope", "arguments": {}}))
        .expect("tools/call");
    assert_eq!(err["error"]["code"], -32602, "{err}");
    assert_eq!(err["error"]["message"], "no such tool", "{err}");
    let (code, stderr) = p.finish();
    assert_eq!(code, Some(0), "{stderr}");
}

#[test]
fn an_upstream_that_never_answers_initialize_ends_the_proxy_with_one_line() {
    if !python3() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let h = hostile();
    let started = Instant::now();
    let mut p = Proxy::start(
        &learned(dir.path()),
        &["python3", h.to_str().expect("utf8"), "never-init"],
    );
    assert!(
        p.handshake().is_none(),
        "the proxy must not serve without an upstream"
    );
    let (code, stderr) = p.finish();
    let line = upstream_line(code, &stderr, "never-init");
    assert!(
        line.contains("did not answer `initialize` within 2 s"),
        "{line}"
    );
    assert!(started.elapsed() < Duration::from_secs(15));
}

#[test]
fn bounded_answers_are_mcp_errors_naming_the_server_and_the_proxy_goes_on() {
    if !python3() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = learned(dir.path());
    let h = hostile();
    for (mode, method, params, says) in [
        (
            "never-call",
            "tools/call",
            json!({"name": "echo", "arguments": {}}),
            "did not answer `tools/call` within 2 s",
        ),
        (
            "many-tools",
            "tools/list",
            json!({}),
            "listed 10000 tools (the limit is 1000)",
        ),
        (
            "big-desc",
            "tools/list",
            json!({}),
            "the description of tool `echo` is 1048576 bytes (the limit is 16384)",
        ),
    ] {
        let mut p = Proxy::start(&docs, &["python3", h.to_str().expect("utf8"), mode]);
        p.handshake().expect("initialize");
        let r = p.request(method, params).expect("an answer");
        let m = error_message(&r);
        assert!(
            m.starts_with("MCP server `python3 ") && m.contains(mode),
            "{mode}: {m}"
        );
        assert!(m.contains(says), "{mode}: {m}");
        // Still serving.
        let ping = p.request("ping", json!({})).expect("ping");
        assert!(ping.get("result").is_some(), "{mode}: {ping}");
        let (code, stderr) = p.finish();
        assert_eq!(code, Some(0), "{mode}: {stderr}");
    }
}

#[test]
fn an_upstream_that_breaks_the_protocol_or_dies_mid_call_is_one_error_then_one_line() {
    if !python3() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let docs = learned(dir.path());
    let h = hostile();
    for (mode, says) in [
        (
            "garbage",
            "printed something that is not an MCP message on stdout: `Traceback",
        ),
        ("huge", "sent a message of more than 8388608 bytes"),
        ("exit", "exited (exit status: 3) during `tools/call`"),
    ] {
        let started = Instant::now();
        // Time enough for Python to write 50 MB: the size bound must be what ends it.
        let mut p = Proxy::start_with(&docs, &["python3", h.to_str().expect("utf8"), mode], "60");
        p.handshake().expect("initialize");
        let r = p
            .request(
                "tools/call",
                json!({"name": "echo", "arguments": {"text": "x"}}),
            )
            .expect("the failed call is answered before the proxy ends");
        let m = error_message(&r);
        assert!(m.contains(mode) && m.contains(says), "{mode}: {m}");
        let (code, stderr) = p.finish();
        let line = upstream_line(code, &stderr, mode);
        assert!(line.contains(says), "{mode}: {line}");
        assert!(started.elapsed() < Duration::from_secs(15), "{mode}");
    }
}

#[test]
fn proxy_input_errors_are_one_line_before_anything_starts() {
    let dir = tempfile::tempdir().expect("tempdir");
    let bad = dir.path().join("bad.json");
    std::fs::write(&bad, r#"{"tools": [{"name": "a"}, {"name": "a"}]}"#).expect("write");
    let out = common::otb()
        .args(["mcp", "proxy", "--docs"])
        .arg(&bad)
        .args(["--upstream", "no-such-program-otb"])
        .output()
        .expect("run");
    assert!(one_error_line(&out).contains("tool `a` is listed twice"));
    let out = common::otb()
        .args(["mcp", "proxy", "--docs"])
        .arg(dir.path().join("missing.json"))
        .args(["--upstream", "x"])
        .output()
        .expect("run");
    assert!(one_error_line(&out).contains("missing.json"));
    // A command that cannot start is the upstream's failure (exit 1), named.
    let docs = learned(dir.path());
    let out = common::otb()
        .args(["mcp", "proxy", "--docs"])
        .arg(&docs)
        .args(["--upstream", "no-such-program-otb", "--flag"])
        .stdin(Stdio::null())
        .output()
        .expect("run");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.contains("MCP server `no-such-program-otb --flag` cannot start it"),
        "{stderr}"
    );
}

// ---------------------------------------------------------------- otb docs

/// The scripted mini grid, run.
fn scripted() -> Scratch {
    let s = Scratch::new("", MODELS);
    let r = s.run();
    assert!(r.total > 0, "{}", r.stderr);
    s
}

fn docs_cmd(s: &Scratch, args: &[&str]) -> std::process::Output {
    let exp = s.exp();
    let mut all = vec!["docs", exp.to_str().expect("utf8")];
    all.extend_from_slice(args);
    s.otb(&all)
}

#[test]
fn docs_writes_the_learned_tool_list_with_its_provenance() {
    let s = scripted();
    let to = s.dir.path().join("tools.json");
    let out = docs_cmd(
        &s,
        &[
            "--method",
            "toolobserver",
            "--setting",
            "names",
            "--instance",
            "exec_simple_0",
            "--to",
            to.to_str().expect("utf8"),
        ],
    );
    let said = stdout_ok(&out);
    assert!(
        said.starts_with("wrote ") && said.contains("tools.json"),
        "{said}"
    );
    let list: Value =
        serde_json::from_str(&std::fs::read_to_string(&to).expect("read")).expect("json");
    let tools = list["tools"].as_array().expect("tools");
    assert!(!tools.is_empty(), "{list}");
    for t in tools {
        let name = t["name"].as_str().expect("name");
        assert!(
            !name.starts_with("function_"),
            "real names, not the opaque ones: {list}"
        );
        assert!(t["inputSchema"].is_object(), "{list}");
        assert!(t["description"].is_string(), "{list}");
    }
    let p = &list["_otb"];
    assert_eq!(p["experiment"], "mini", "{p}");
    assert_eq!(p["cell"]["method"], "toolobserver", "{p}");
    assert_eq!(p["cell"]["setting"], "names", "{p}");
    assert_eq!(p["cell"]["instance"], "exec_simple_0", "{p}");
    assert!(p["cell"]["round"].as_i64().expect("round") >= 1, "{p}");
    assert_eq!(
        p["scores"]["before"]["measure"], "E (execution accuracy)",
        "{p}"
    );
    assert!(p["scores"]["after"]["value"].is_number(), "{p}");
    assert!(p["scores"]["before"]["instance_e"].is_boolean(), "{p}");
    // The descriptions are the curve's last round's, under the real names: the
    // scripted editor's texts, not the opaque setting's empty ones.
    let base = docs_cmd(
        &s,
        &[
            "--method",
            "base",
            "--setting",
            "names",
            "--instance",
            "exec_simple_0",
        ],
    );
    let base: Value = serde_json::from_str(&stdout_ok(&base)).expect("json");
    assert_eq!(base["_otb"]["cell"]["round"], 0);
    assert_ne!(
        base["tools"], list["tools"],
        "ToolObserver changed the descriptions"
    );
    let names = |v: &Value| -> Vec<String> {
        v["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .map(|t| t["name"].as_str().expect("name").to_string())
            .collect()
    };
    assert_eq!(names(&base), names(&list));
    // Gold has the same names and schemas.
    let gold = docs_cmd(&s, &["--method", "gold", "--instance", "exec_simple_0"]);
    let gold: Value = serde_json::from_str(&stdout_ok(&gold)).expect("json");
    assert_eq!(names(&gold), names(&list));
}

#[test]
fn docs_refuses_what_does_not_name_one_cell_in_one_line_writing_nothing() {
    let s = scripted();
    let to = s.dir.path().join("tools.json");
    let to_s = to.to_str().expect("utf8");
    for (args, says) in [
        (
            vec!["--method", "magic", "--to", to_s],
            "--method magic: not a method with documentation",
        ),
        (
            vec!["--method", "toolobserver", "--to", to_s],
            "2 cells have documentation of method toolobserver",
        ),
        (
            vec![
                "--method",
                "toolobserver",
                "--setting",
                "names",
                "--to",
                to_s,
            ],
            "documentation is per instance",
        ),
        (
            vec![
                "--method",
                "toolobserver",
                "--setting",
                "names",
                "--instance",
                "nope",
                "--to",
                to_s,
            ],
            "--instance nope: not an instance",
        ),
        (
            vec!["--method", "easytool", "--to", to_s],
            "no computed documentation of method easytool",
        ),
        (
            vec![
                "--method",
                "base",
                "--setting",
                "names",
                "--instance",
                "exec_simple_0",
                "--to",
                "/no/such/folder/t.json",
            ],
            "is not a folder",
        ),
    ] {
        let out = docs_cmd(&s, &args);
        let line = one_error_line(&out);
        assert!(line.contains(says), "{args:?}: {line}");
        assert!(!to.exists(), "{args:?} wrote {}", to.display());
    }
    // A file inside the store (its root, or an entry's folder) is the store's: a
    // cell that would be written anywhere else is refused there.
    let entry = std::fs::read_dir(s.store().join("batch-reflect"))
        .expect("batch-reflect entries")
        .filter_map(Result::ok)
        .map(|e| e.path())
        .find(|p| p.is_dir())
        .expect("an entry");
    for inside in [s.store().join("tools.json"), entry.join("tools.json")] {
        let out = docs_cmd(
            &s,
            &[
                "--method",
                "toolobserver",
                "--setting",
                "names",
                "--instance",
                "exec_simple_0",
                "--to",
                inside.to_str().expect("utf8"),
            ],
        );
        let line = one_error_line(&out);
        assert!(line.contains("is inside the store"), "{line}");
        assert!(!inside.exists(), "wrote {}", inside.display());
        assert!(
            !inside.with_extension("json.tmp").exists(),
            "wrote {}",
            inside.display()
        );
    }
    // The same cell outside the store is written (the refusal is the place only).
    let out = docs_cmd(
        &s,
        &[
            "--method",
            "toolobserver",
            "--setting",
            "names",
            "--instance",
            "exec_simple_0",
            "--to",
            to_s,
        ],
    );
    assert!(stdout_ok(&out).starts_with("wrote "));
    assert!(to.exists());
}

// ------------------------------------------- a real client and a real server

/// The official MCP Python SDK's Python and mcp-server-git's command, or `None`
/// (skipping, unless `OTB_REQUIRE` names `mcp`).
fn real_mcp() -> Option<(String, Vec<String>)> {
    let py = std::env::var("OTB_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_sdk = Command::new(&py)
        .args(["-c", "import mcp.client.stdio"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !has_sdk {
        testkit::skip(
            "mcp",
            format!("no Python with the MCP SDK ({py}; set OTB_MCP_PYTHON)"),
        );
        return None;
    }
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
    if !runs {
        testkit::skip(
            "mcp",
            format!(
                "no mcp-server-git ({}; set OTB_MCP_SERVER_GIT)",
                server.join(" ")
            ),
        );
        return None;
    }
    Some((py, server))
}

/// A git repository with one commit.
fn repo(dir: &Path) -> PathBuf {
    let r = dir.join("repo");
    std::fs::create_dir(&r).expect("mkdir");
    std::fs::write(r.join("a.txt"), "hello\n").expect("write");
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "a.txt"],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@example.org",
            "commit",
            "-q",
            "-m",
            "first commit",
        ],
    ] {
        let ok = Command::new("git")
            .args(args)
            .current_dir(&r)
            .status()
            .expect("git");
        assert!(ok.success(), "git {args:?}");
    }
    r
}

const CLIENT: &str = r#"
import asyncio, json, sys
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

async def session(s):
    await s.initialize()
    tools = await s.list_tools()
    r = await s.call_tool("git_log", {"repo_path": sys.argv[1]})
    text = "".join(c.text for c in r.content if getattr(c, "type", "") == "text")
    print(json.dumps({"tools": {t.name: t.description for t in tools.tools}, "log": text}))

async def main():
    if sys.argv[2] == "http":
        from mcp.client.streamable_http import streamable_http_client
        async with streamable_http_client(sys.argv[3]) as streams:
            async with ClientSession(streams[0], streams[1]) as s:
                await session(s)
    else:
        params = StdioServerParameters(command=sys.argv[3], args=sys.argv[4:])
        async with stdio_client(params) as (r, w):
            async with ClientSession(r, w) as s:
                await session(s)

asyncio.run(main())
"#;

fn check_client_answer(out: &std::process::Output) {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "client failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_str(stdout.trim()).expect("the client's JSON");
    assert_eq!(
        v["tools"]["git_status"], "LEARNED: what changed in the work tree.",
        "{v}"
    );
    let log_desc = v["tools"]["git_log"].as_str().expect("git_log is listed");
    assert!(
        !log_desc.starts_with("LEARNED"),
        "a tool the docs do not name keeps its own: {v}"
    );
    assert!(
        v["log"].as_str().expect("log").contains("first commit"),
        "{v}"
    );
}

#[test]
fn a_real_client_sees_learned_descriptions_of_a_real_server_through_the_proxy() {
    let Some((py, server)) = real_mcp() else {
        return;
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let r = repo(dir.path());
    let docs = dir.path().join("tools.json");
    std::fs::write(
        &docs,
        json!({"tools": [{"name": "git_status", "description": "LEARNED: what changed in the work tree.",
            "inputSchema": {"type": "object"}}]})
        .to_string(),
    )
    .expect("write");
    let client = dir.path().join("client.py");
    std::fs::write(&client, CLIENT).expect("write client");
    // Over stdio: the client starts the proxy as its server.
    let mut cmd = Command::new(&py);
    cmd.arg(&client)
        .arg(&r)
        .arg("stdio")
        .arg(env!("CARGO_BIN_EXE_otb"))
        .args(["mcp", "proxy", "--docs"])
        .arg(&docs)
        .arg("--upstream")
        .args(&server)
        .arg("--repository")
        .arg(&r);
    check_client_answer(&cmd.output().expect("run the client"));

    // Over Streamable HTTP.
    let mut proxy = common::otb()
        .args(["mcp", "proxy", "--docs"])
        .arg(&docs)
        .args(["--addr", "127.0.0.1:0", "--upstream"])
        .args(&server)
        .arg("--repository")
        .arg(&r)
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the proxy");
    let mut err = BufReader::new(proxy.stderr.take().expect("stderr"));
    let mut line = String::new();
    let url = loop {
        line.clear();
        if err.read_line(&mut line).expect("stderr") == 0 {
            let _ = proxy.kill();
            panic!("the proxy ended before serving");
        }
        if let Some(rest) = line.trim().strip_prefix("otb mcp proxy: serving ") {
            break rest.split_whitespace().next().expect("url").to_string();
        }
    };
    let out = Command::new(&py)
        .arg(&client)
        .arg(&r)
        .arg("http")
        .arg(&url)
        .output();
    // And a proxy whose upstream is that URL (rmcp's Streamable HTTP client), on stdio.
    let chained = Command::new(&py)
        .arg(&client)
        .arg(&r)
        .arg("stdio")
        .arg(env!("CARGO_BIN_EXE_otb"))
        .args(["mcp", "proxy", "--docs"])
        .arg(&docs)
        .arg("--upstream")
        .arg(&url)
        .output();
    let _ = proxy.kill();
    let _ = proxy.wait();
    check_client_answer(&out.expect("run the client"));
    check_client_answer(&chained.expect("run the client"));
}
