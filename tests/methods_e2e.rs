//! External documentation methods (`docs/methods.md`) through `otb run`:
//!
//! - conformance: `examples/methods/easytool.py` (EasyTool written with the Python
//!   helper) beside the built-in `easytool` on BFCL, with a local OpenAI-compatible
//!   model on 127.0.0.1 as the editor: it sends exactly the built-in's requests (all
//!   answered from the call cache: the model receives none), records the same calls
//!   and produces exactly the same docs, which explore + evaluate score like any
//!   other method; a rerun starts no process; a changed file or params reruns only
//!   its chain;
//! - hostile methods (test-made Python scripts): one that never answers, floods
//!   stdout, sends a 100 MB line, asks for 10,000 tool calls past its budget, sends
//!   requests without reading the replies, asks past its tokens, exits mid-protocol,
//!   writes invalid JSON, asks for an unknown tool or message, exits non-zero: each
//!   one error line naming the method and the message, exit 2 (the method is the
//!   user's), within its bounds, nothing published for its stage; a grandchild it
//!   started dies with it;
//! - the shipped examples' messages match `docs/methods/schema/`, and no message
//!   sent to a method holds an instance's question or gold answer;
//! - an external method is a column or rows of its own wherever the built-in methods
//!   are: Tables 2, 3, 4 and 6, `otb table tokens` (its tokens counted), `otb report`
//!   (its docs as word diffs, its cost, `--compare ext:NAME toolobserver`), `otb
//!   export` and `otb plan`;
//! - `play` (chess, search): `reflect.py` has the agent play training items with
//!   its descriptions and writes docs from what it saw; no test item reaches it; a
//!   play past `max_plays` is one line, exit 2, nothing published; a rerun starts
//!   no process.

mod common;

use common::{fixture, one_error_line, stdout_ok, stored, Recorder};
use serde_json::{json, Value};
use stages::rows::{DocCallRow, DocRow, ToolRunRow};
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The repository's `examples/methods/` folder.
fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/methods")
}

/// Whether `python3` runs here (the tests skip, saying so, where it does not).
fn python() -> bool {
    common::python3("python3", "python3 is not on the PATH")
}

/// `otb run --quiet` of `toml` (written as `exp.toml` in `dir`, store `dir/store`)
/// with `env`; killed (and failed) after `secs` seconds.
fn run(dir: &Path, toml: &str, env: &[(&str, &str)], secs: u64) -> Output {
    let exp = dir.join("exp.toml");
    std::fs::write(&exp, toml).unwrap();
    let mut c = common::otb();
    c.arg("--store")
        .arg(dir.join("store"))
        .arg("run")
        .arg(&exp)
        .arg("--quiet")
        .env("OTB_LLAMA_THREADS", "1");
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    // Read the pipes on threads so a chatty run cannot block on them.
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let o = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut so, &mut b).ok();
        b
    });
    let e = std::thread::spawn(move || {
        let mut b = Vec::new();
        std::io::Read::read_to_end(&mut se, &mut b).ok();
        b
    });
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("otb still running after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    }
}

/// The tool names an EasyTool prompt lists (`Name: <name>` lines).
fn names_in(prompt: &str) -> Vec<String> {
    prompt
        .lines()
        .filter_map(|l| l.strip_prefix("Name: "))
        .map(str::to_string)
        .collect()
}

/// A model on 127.0.0.1 that answers EasyTool's two passes with JSON for every tool
/// the prompt lists, wrapped in prose and a code fence, with non-ASCII text, quotes,
/// nested parameters and floats (what a description written from it must carry
/// byte for byte).
fn model(mut stream: std::net::TcpStream, rec: Arc<Recorder>) {
    let Some(req) = rec.record(&stream) else {
        return;
    };
    let user = req["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    let mut obj = serde_json::Map::new();
    for n in names_in(&user) {
        let v = if user.contains("\"Scenario\"") {
            json!({"Scenario": format!("  Someone needs {n} for a café bill.  "),
                "Parameters": {"amount": 12.5, "items": [1, "thé", {"k": null}], "note": "say \"hi\"\n"}})
        } else {
            json!(format!(" Computes what {n} computes — «exactly». "))
        };
        obj.insert(n, v);
    }
    let content = format!(
        "Here you are:\n```json\n{}\n```\nAnything else?",
        serde_json::to_string_pretty(&Value::Object(obj)).unwrap()
    );
    let reply = json!({"id": "t", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
    common::respond(&mut stream, "200 OK", &reply.to_string());
}

/// The experiment: BFCL's mini fixture on two settings, `methods`, the editor
/// `editor`, and `[methods.easytool_py]` running the example (copied into the
/// experiment's `methods/` folder by [`copy_examples`]) with `params`.
fn conformance_exp(methods: &str, editor: &str, params: &str) -> String {
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    format!(
        "name = \"ext\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\", \"names+params\"]\nmethods = [{methods}]\n[models]\nagent = \"scripted:schema\"\neditor = \"{editor}\"\n[methods.easytool_py]\ncommand = [\"python3\", \"methods/easytool.py\"]\nfiles = [\"methods/easytool.py\", \"methods/otb_method.py\"]\nparams = {{prompts = \"{}\", {params}}}\n",
        fixture("mini_bfcl.jsonl").display(),
        prompts.display(),
    )
}

/// The example method and its helper, copied into `<dir>/methods/`.
fn copy_examples(dir: &Path) {
    std::fs::create_dir_all(dir.join("methods")).unwrap();
    for f in ["easytool.py", "otb_method.py"] {
        std::fs::copy(examples().join(f), dir.join("methods").join(f)).unwrap();
    }
}

/// The docs rows of `stage`, by (setting, instance).
fn docs_of(store: &Path, stage: &str) -> Vec<(String, String, Value, Value)> {
    let mut rows: Vec<(String, String, Value, Value)> =
        stored::<DocRow>(store, stage, "docs.parquet")
            .into_iter()
            .map(|d| (d.setting, d.instance_id, d.tools, d.demos))
            .collect();
    rows.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    rows
}

#[test]
fn python_easytool_is_the_builtin_easytool() {
    if !python() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    copy_examples(d.path());
    let rec = Arc::new(Recorder::default());
    let url = common::spawn_server(rec.clone(), model);
    let env = [
        ("OTB_LLM_BASE_URL", url.as_str()),
        ("OTB_LLM_API_KEY", "test"),
    ];
    // The built-in method first: its requests reach the model.
    let out = run(
        d.path(),
        &conformance_exp("\"base\", \"easytool\"", "openai:fake", ""),
        &env,
        300,
    );
    stdout_ok(&out);
    // The distinct requests (a request sent twice at once, or retried, counts once).
    let distinct = || {
        rec.requests
            .lock()
            .unwrap()
            .iter()
            .map(Value::to_string)
            .collect::<std::collections::BTreeSet<String>>()
    };
    let builtin_requests = distinct();
    // Two passes per instance, in two settings (instances whose tools look alike in
    // a setting may share a request).
    assert!(builtin_requests.len() >= 10, "{}", builtin_requests.len());
    let sent_before = rec.requests.lock().unwrap().len();
    // Then the Python method: the very same requests, every one answered from the
    // call cache.
    let out = run(
        d.path(),
        &conformance_exp(
            "\"base\", \"easytool\", \"ext:easytool_py\"",
            "openai:fake",
            "",
        ),
        &env,
        300,
    );
    stdout_ok(&out);
    assert_eq!(
        distinct(),
        builtin_requests,
        "the Python EasyTool sent a request the built-in did not"
    );
    assert_eq!(
        rec.requests.lock().unwrap().len(),
        sent_before,
        "the Python EasyTool's requests did not all come from the cache"
    );
    let store = d.path().join("store");
    let builtin = docs_of(&store, "easytool");
    let external = docs_of(&store, "external");
    assert_eq!(builtin.len(), 10);
    assert_eq!(external, builtin);
    // The replies did change the docs (a test where nothing changes proves nothing).
    let desc = builtin[0].2[0]["description"].as_str().unwrap().to_string();
    assert!(desc.contains("«exactly».") && desc.contains("Call with {\"amount\":12.5,\"items\":[1,\"thé\",{\"k\":null}],\"note\":\"say \\\"hi\\\"\\n\"}"), "{desc}");
    // The same calls recorded, as the method's own.
    let calls = |stage: &str| {
        let mut c: Vec<(String, String, String, i64, i64)> =
            stored::<DocCallRow>(&store, stage, "doc_calls.parquet")
                .into_iter()
                .map(|c| {
                    (
                        c.instance_id,
                        c.step,
                        c.phase,
                        c.prompt_tokens,
                        c.completion_tokens,
                    )
                })
                .collect();
        c.sort();
        c
    };
    assert_eq!(calls("external"), calls("easytool"));
    let ext_calls: Vec<DocCallRow> = stored(&store, "external", "doc_calls.parquet");
    assert!(ext_calls
        .iter()
        .all(|c| c.method == "ext:easytool_py" && c.model == "openai:fake" && c.role == "editor"));
    assert!(stored::<ToolRunRow>(&store, "external", "tool_runs.parquet").is_empty());
    // Scored like every other method: its explore and evaluate ran.
    let status = stdout_ok(
        &common::otb()
            .arg("--store")
            .arg(&store)
            .arg("status")
            .arg(d.path().join("exp.toml"))
            .output()
            .unwrap(),
    );
    for node in [
        "external[names ext:easytool_py]",
        "evaluate[names ext:easytool_py r0]",
        "evaluate[names+params ext:easytool_py r0]",
    ] {
        assert!(status.contains(node), "{node} in\n{status}");
    }
    // A rerun starts no process: with no python3 to be found, nothing fails.
    let out = run(
        d.path(),
        &conformance_exp(
            "\"base\", \"easytool\", \"ext:easytool_py\"",
            "openai:fake",
            "",
        ),
        &[
            ("OTB_LLM_BASE_URL", url.as_str()),
            ("OTB_LLM_API_KEY", "test"),
            ("PATH", "/nonexistent"),
        ],
        300,
    );
    let text = stdout_ok(&out);
    assert!(text.contains(", 0 ran"), "{text}");
    // Changed params rerun only the method's stage (`otb status` says why first):
    // its docs come out the same (EasyTool reads no params), so the explore and
    // evaluate after it, keyed by their inputs' content, are fresh.
    let changed = conformance_exp(
        "\"base\", \"easytool\", \"ext:easytool_py\"",
        "openai:fake",
        "note = \"v2\"",
    );
    std::fs::write(d.path().join("exp.toml"), &changed).unwrap();
    let status = stdout_ok(
        &common::otb()
            .arg("--store")
            .arg(&store)
            .arg("status")
            .arg(d.path().join("exp.toml"))
            .output()
            .unwrap(),
    );
    assert!(
        status.contains("external[names ext:easytool_py]"),
        "{status}"
    );
    assert!(
        status.contains("because params.budget.params.note: (absent) -> \"v2\""),
        "{status}"
    );
    let out = run(d.path(), &changed, &env, 300);
    let text = stdout_ok(&out);
    assert!(text.contains(", 2 ran"), "{text}");
    assert_eq!(docs_of(&store, "external").len(), 20);
    assert_eq!(docs_of(&store, "easytool").len(), 10);
    // So does a changed file of the method.
    let script = d.path().join("methods/easytool.py");
    let text = std::fs::read_to_string(&script).unwrap() + "\n# v3\n";
    std::fs::write(&script, text).unwrap();
    let status = stdout_ok(
        &common::otb()
            .arg("--store")
            .arg(&store)
            .arg("status")
            .arg(d.path().join("exp.toml"))
            .output()
            .unwrap(),
    );
    assert!(
        status.contains("because params.budget.files.methods/easytool.py: "),
        "{status}"
    );
    let out = run(d.path(), &changed, &env, 300);
    assert!(stdout_ok(&out).contains(", 2 ran"));
}

/// A Python method of a few lines that uses the helper, written into `dir`.
fn hostile(dir: &Path, body: &str) -> String {
    let p = dir.join("hostile.py");
    std::fs::write(
        &p,
        format!(
            "import json, sys, time\nsys.path.insert(0, {:?})\nfrom otb_method import Method\n{body}\n",
            examples().display().to_string()
        ),
    )
    .unwrap();
    p.display().to_string()
}

/// BFCL's mini fixture, one setting, the method `ext:hostile` running `script`, with
/// `budget` lines in its table.
fn hostile_exp(script: &str, budget: &str) -> String {
    format!(
        "name = \"h\"\n[bfcl]\ndata = \"{}\"\nsubset = 1\nsettings = [\"names\"]\nmethods = [\"ext:hostile\"]\n[models]\nagent = \"scripted:schema\"\neditor = \"scripted:errors\"\n[baselines]\nconcurrency = 1\n[methods.hostile]\ncommand = [\"python3\", \"{script}\"]\n{budget}\n",
        fixture("mini_bfcl.jsonl").display()
    )
}

#[test]
fn hostile_methods_fail_in_one_line_and_publish_nothing() {
    if !python() {
        return;
    }
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "never answers",
            "time.sleep(600)",
            "wall_s = 2",
            "no message #1 within its wall time (2 s)",
        ),
        (
            "floods stdout",
            "m = Method()\nwhile True:\n    sys.stdout.write('x' * 65536)\n",
            "",
            "message #1 is longer than max_line_bytes (1048576 bytes)",
        ),
        (
            "a 100 MB line",
            "m = Method()\nsys.stdout.write('{\"type\": \"ask\", \"prompt\": \"' + 'a' * (100 << 20) + '\"}\\n')\nsys.stdout.flush()\ntime.sleep(60)",
            "",
            "message #1 is longer than max_line_bytes",
        ),
        (
            "10,000 tool calls past its budget",
            "m = Method()\nfor i in range(10000):\n    m.call_tool('function_1', {})\nm.finish({})",
            "max_calls = 50",
            "message #51 (call_tool) is past its budget of 50 requests (max_calls)",
        ),
        (
            "requests without reading the replies",
            "m = Method()\nline = json.dumps({'type': 'call_tool', 'id': 1, 'tool': 'function_1'}) + '\\n'\nwhile True:\n    sys.stdout.write(line)\n    sys.stdout.flush()",
            "max_calls = 1000000\nwall_s = 3",
            "did not read otb's messages (at message #",
        ),
        (
            "asks past its tokens",
            "m = Method()\nm.ask('a')\nm.ask('b')\nm.finish({})",
            "max_tokens = 1",
            "message #2 (ask) is past its budget of 1 tokens (max_tokens)",
        ),
        (
            "exits mid-protocol",
            "m = Method()\nm.ask('hello')\nsys.exit(0)",
            "",
            "exited (exit status: 0) before sending its docs (at message #2)",
        ),
        (
            "invalid JSON",
            "m = Method()\nprint('{\"type\": \"ask\", ')\nsys.stdout.flush()\ntime.sleep(60)",
            "",
            "message #1 is not a JSON object: {\"type\": \"ask\", ",
        ),
        (
            "an unknown tool",
            "m = Method()\nm.call_tool('rm_rf', {})",
            "",
            "message #1 (call_tool) names unknown tool \"rm_rf\"",
        ),
        (
            "an unknown message",
            "m = Method()\nm._request({'type': 'shell', 'cmd': 'ls'})",
            "",
            "message #1 has unknown type \"shell\"",
        ),
        (
            "exits non-zero after its docs",
            "m = Method()\nm.finish({})\nsys.stderr.write('bye\\n')\nsys.exit(3)",
            "",
            "exited with exit status: 3 after its docs",
        ),
    ];
    for (what, body, budget, expect) in cases {
        let d = tempfile::tempdir().unwrap();
        let script = hostile(d.path(), body);
        let start = Instant::now();
        let out = run(d.path(), &hostile_exp(&script, budget), &[], 120);
        let line = one_error_line(&out);
        assert!(
            line.contains("method ext:hostile on item exec_simple_0: ") && line.contains(expect),
            "{what}: {line}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "{what}: took {:?}",
            start.elapsed()
        );
        let store = d.path().join("store");
        assert!(
            stored::<DocRow>(&store, "external", "docs.parquet").is_empty(),
            "{what}: docs were published"
        );
    }
}

/// Whether process `pid` is gone (a zombie waiting for init to reap it counts as
/// gone).
fn gone(pid: i32) -> bool {
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.trim_start().starts_with('Z'))
        });
    // SAFETY: kill(2) with signal 0 only checks that the process exists.
    let exists = unsafe { libc::kill(pid, 0) == 0 };
    !exists || zombie == Some(true)
}

/// A method's children die with it: a method that starts a grandchild sleeping
/// 300 s (holding the method's stdout, as a subprocess does by default) and then
/// hangs or exits mid-protocol fails its stage in one line as any other, within its
/// bounds (exiting: at once, not after its wall time), and the grandchild is gone a
/// moment later.
#[test]
fn what_a_hostile_method_starts_dies_with_it() {
    if !python() {
        return;
    }
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "hangs",
            "time.sleep(600)",
            "wall_s = 2",
            "no message #1 within its wall time (2 s)",
        ),
        (
            "exits mid-protocol",
            "m = Method()\nm.ask('hello')\nsys.exit(0)",
            "",
            "exited (exit status: 0) before sending its docs (at message #2)",
        ),
    ];
    for (what, rest, budget, expect) in cases {
        let d = tempfile::tempdir().unwrap();
        let pid_file = d.path().join("grandchild.pid");
        let body = format!(
            "import subprocess\nchild = subprocess.Popen(['sleep', '300'])\nwith open({:?}, 'w') as f:\n    f.write(str(child.pid))\n{rest}",
            pid_file.display().to_string()
        );
        let script = hostile(d.path(), &body);
        let start = Instant::now();
        let out = run(d.path(), &hostile_exp(&script, budget), &[], 120);
        let line = one_error_line(&out);
        assert!(
            line.contains("method ext:hostile on item exec_simple_0: ") && line.contains(expect),
            "{what}: {line}"
        );
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: took {:?}",
            start.elapsed()
        );
        let pid: i32 = std::fs::read_to_string(&pid_file)
            .unwrap_or_else(|e| panic!("{what}: no grandchild pid: {e}"))
            .trim()
            .parse()
            .unwrap();
        let ended = Instant::now();
        while !gone(pid) && ended.elapsed() < Duration::from_secs(2) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let left = !gone(pid);
        if left {
            // SAFETY: kill(2) takes no pointers; the test's own grandchild.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        assert!(!left, "{what}: the grandchild {pid} outlived the stage");
        assert!(
            stored::<DocRow>(&d.path().join("store"), "external", "docs.parquet").is_empty(),
            "{what}: docs were published"
        );
    }
}

/// The method's stderr is kept in the store's `cache/methods/`, and the error line
/// says where.
#[test]
fn a_failed_methods_stderr_is_kept() {
    if !python() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let script = hostile(
        d.path(),
        "m = Method()\nsys.stderr.write('the reason it broke\\n')\nsys.stderr.flush()\nsys.exit(5)",
    );
    let out = run(d.path(), &hostile_exp(&script, ""), &[], 120);
    let line = one_error_line(&out);
    let path = line
        .split("(its stderr: ")
        .nth(1)
        .and_then(|s| s.split(')').next())
        .unwrap_or_else(|| panic!("no stderr path in {line}"));
    assert!(path.contains("/cache/methods/"), "{line}");
    assert_eq!(
        std::fs::read_to_string(path).unwrap(),
        "the reason it broke\n"
    );
}

/// An experiment listing `ext:x` without `[methods.x]`, or with a file that does
/// not exist, is refused before the store is touched.
#[test]
fn an_unconfigured_method_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let exp = format!(
        "name = \"h\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\"]\nmethods = [\"ext:nothere\"]\n[models]\nagent = \"scripted:schema\"\neditor = \"scripted:errors\"\n",
        fixture("mini_bfcl.jsonl").display()
    );
    let line = one_error_line(&run(d.path(), &exp, &[], 60));
    assert!(
        line.contains("method `ext:nothere` has no [methods.nothere] table"),
        "{line}"
    );
    let exp2 = exp.replace("ext:nothere", "ext:x")
        + "[methods.x]\ncommand = [\"python3\", \"x.py\"]\nfiles = [\"x.py\"]\n";
    let line = one_error_line(&run(d.path(), &exp2, &[], 60));
    assert!(line.contains("methods.x.files: cannot read"), "{line}");
    let exp3 = exp.replace("ext:nothere", "ext:Bad");
    let line = one_error_line(&run(d.path(), &exp3, &[], 60));
    assert!(line.contains("method `ext:Bad`"), "{line}");
    assert!(!d.path().join("store").join("external").exists());
}

/// A wrapper that runs a method (`tee.py LOG CMD...`) and logs every line each way
/// (`in\t<otb's line>`, `out\t<the method's line>`).
const TEE: &str = r#"import subprocess, sys, threading
log = open(sys.argv[1], "a", encoding="utf-8")
lock = threading.Lock()
child = subprocess.Popen(sys.argv[2:], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, encoding="utf-8")
def down():
    for line in sys.stdin:
        with lock:
            log.write("in\t" + line); log.flush()
        child.stdin.write(line); child.stdin.flush()
    child.stdin.close()
threading.Thread(target=down, daemon=True).start()
for line in child.stdout:
    with lock:
        log.write("out\t" + line); log.flush()
    sys.stdout.write(line); sys.stdout.flush()
sys.exit(child.wait())
"#;

/// The schemas of `docs/methods/schema/`, by message type.
fn schemas() -> std::collections::BTreeMap<String, Value> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/methods/schema");
    std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| {
            let name = e.path().file_stem().unwrap().to_string_lossy().into_owned();
            let v: Value = serde_json::from_str(&std::fs::read_to_string(e.path()).unwrap())
                .unwrap_or_else(|err| panic!("{name}: {err}"));
            (name, v)
        })
        .collect()
}

/// Why `v` does not match `schema` (the subset of JSON Schema the protocol's schemas
/// use: type, const, enum, required, properties, additionalProperties, items,
/// minimum), or `None`.
fn violation(v: &Value, schema: &Value, at: &str) -> Option<String> {
    let s = schema.as_object().expect("a schema is an object");
    for k in s.keys() {
        assert!(
            [
                "$schema",
                "$id",
                "title",
                "description",
                "type",
                "const",
                "enum",
                "required",
                "properties",
                "additionalProperties",
                "items",
                "minimum",
            ]
            .contains(&k.as_str()),
            "keyword {k} at {at} is outside the validator's subset"
        );
    }
    if let Some(t) = s.get("type").and_then(Value::as_str) {
        let ok = match t {
            "object" => v.is_object(),
            "array" => v.is_array(),
            "string" => v.is_string(),
            "integer" => v.is_i64() || v.is_u64(),
            "number" => v.is_number(),
            "boolean" => v.is_boolean(),
            "null" => v.is_null(),
            other => panic!("type {other}"),
        };
        if !ok {
            return Some(format!("{at}: not {t}: {v}"));
        }
    }
    if let Some(c) = s.get("const") {
        if v != c {
            return Some(format!("{at}: {v} is not {c}"));
        }
    }
    if let Some(e) = s.get("enum").and_then(Value::as_array) {
        if !e.contains(v) {
            return Some(format!("{at}: {v} not in {e:?}"));
        }
    }
    if let (Some(min), Some(x)) = (s.get("minimum").and_then(Value::as_f64), v.as_f64()) {
        if x < min {
            return Some(format!("{at}: {x} < {min}"));
        }
    }
    if let Some(o) = v.as_object() {
        for r in s
            .get("required")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let r = r.as_str().unwrap();
            if !o.contains_key(r) {
                return Some(format!("{at}: `{r}` is missing"));
            }
        }
        let props = s.get("properties").and_then(Value::as_object);
        for (k, x) in o {
            let sub = props.and_then(|p| p.get(k));
            let sub = match (sub, s.get("additionalProperties")) {
                (Some(sub), _) => sub,
                (None, Some(Value::Bool(false))) => {
                    return Some(format!("{at}: `{k}` is not allowed"))
                }
                (None, Some(extra @ Value::Object(_))) => extra,
                (None, _) => continue,
            };
            if let Some(why) = violation(x, sub, &format!("{at}.{k}")) {
                return Some(why);
            }
        }
    }
    if let (Some(a), Some(items)) = (v.as_array(), s.get("items")) {
        for (i, x) in a.iter().enumerate() {
            if let Some(why) = violation(x, items, &format!("{at}[{i}]")) {
                return Some(why);
            }
        }
    }
    None
}

/// The validator catches what it must (a test that cannot fail is a defect).
#[test]
fn the_schema_validator_rejects_bad_messages() {
    let s = schemas();
    for name in [
        "task",
        "ask",
        "call_tool",
        "play",
        "docs",
        "result",
        "error",
        "done",
    ] {
        assert!(s.contains_key(name), "no schema for {name}");
    }
    let ok = json!({"type": "ask", "id": 1, "prompt": "p", "phase": "editing"});
    assert_eq!(violation(&ok, &s["ask"], "ask"), None);
    for bad in [
        json!({"type": "ask", "prompt": "p"}),
        json!({"type": "ask", "id": -1, "prompt": "p"}),
        json!({"type": "ask", "id": 1, "prompt": 3}),
        json!({"type": "ask", "id": 1, "prompt": "p", "phase": "dreaming"}),
        json!({"type": "ask", "id": 1, "prompt": "p", "extra": true}),
        json!({"type": "call_tool", "id": 1, "prompt": "p"}),
    ] {
        assert!(violation(&bad, &s["ask"], "ask").is_some(), "{bad}");
    }
    let demo =
        json!({"type": "docs", "tools": {"f": "d"}, "demos": [{"query": "q", "function": "f"}]});
    assert!(violation(&demo, &s["docs"], "docs").is_some());
    let demo = json!({"type": "docs", "tools": {"f": 1}});
    assert!(violation(&demo, &s["docs"], "docs").is_some());
}

/// Every message the shipped examples (`easytool.py`, `reflect.py`) exchange with
/// otb on the scripted BFCL grid matches its schema in `docs/methods/schema/`; each
/// kind they use is seen.
#[test]
fn the_examples_messages_match_the_schemas() {
    if !python() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("tee.py"), TEE).unwrap();
    let log = d.path().join("wire.log");
    let ex = examples();
    let prompts = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let exp = format!(
        "name = \"w\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\"]\nmethods = [\"ext:easytool_py\", \"ext:reflect\"]\n[models]\nagent = \"scripted:schema\"\neditor = \"scripted:errors\"\n[methods.easytool_py]\ncommand = [\"python3\", \"tee.py\", \"{log}\", \"python3\", \"{et}\"]\nparams = {{prompts = \"{prompts}\"}}\n[methods.reflect]\ncommand = [\"python3\", \"tee.py\", \"{log}\", \"python3\", \"{rf}\"]\nparams = {{rounds = 2}}\n",
        fixture("mini_bfcl.jsonl").display(),
        log = log.display(),
        et = ex.join("easytool.py").display(),
        rf = ex.join("reflect.py").display(),
        prompts = prompts.display(),
    );
    stdout_ok(&run(d.path(), &exp, &[], 300));
    let s = schemas();
    let text = std::fs::read_to_string(&log).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for line in text.lines() {
        let (dir, msg) = line.split_once('\t').unwrap();
        let v: Value = serde_json::from_str(msg).unwrap_or_else(|e| panic!("{e}: {msg}"));
        let kind = v["type"].as_str().unwrap().to_string();
        let from_otb = ["task", "result", "error", "done"].contains(&kind.as_str());
        assert_eq!(dir == "in", from_otb, "{kind} went the wrong way: {line}");
        if let Some(why) = violation(&v, &s[&kind], &kind) {
            panic!("{why}\n{msg}");
        }
        seen.insert(kind);
    }
    for kind in ["task", "ask", "call_tool", "result", "docs", "done"] {
        assert!(seen.contains(kind), "no {kind} message in\n{text}");
    }
    // What the agent is scored on never reaches the method: no message otb sent it
    // holds an instance's question or gold answer.
    let fixture_text = std::fs::read_to_string(fixture("mini_bfcl.jsonl")).unwrap();
    let mut secrets = Vec::new();
    for l in fixture_text.lines() {
        let v: Value = serde_json::from_str(l).unwrap();
        secrets.push(v["question"][0][0]["content"].as_str().unwrap().to_string());
        for g in v["ground_truth"].as_array().unwrap() {
            secrets.push(g.as_str().unwrap().to_string());
        }
    }
    assert_eq!(secrets.len(), 10);
    for line in text.lines().filter(|l| l.starts_with("in\t")) {
        for s in &secrets {
            assert!(
                !line.contains(s.as_str()),
                "{s:?} was sent to a method: {line}"
            );
        }
    }
    // reflect.py learnt from its tool play: the scripted editor names the
    // parameters the error texts revealed.
    let store = d.path().join("store");
    let runs: Vec<ToolRunRow> = stored(&store, "external", "tool_runs.parquet");
    assert!(!runs.is_empty() && runs.iter().all(|r| r.method == "ext:reflect"));
    let docs: Vec<DocRow> = stored(&store, "external", "docs.parquet");
    assert!(
        docs.iter()
            .any(|d| d.tools.to_string().contains("Parameters: ")),
        "{docs:?}"
    );
}

/// Chess: an external method runs on a tool set's shared documentation row, its
/// `call_tool` plays a tool on a training position (stored as `tool_runs`), its
/// messages match the schemas, and its docs are played on the test split like every
/// other method's.
#[test]
fn chess_runs_an_external_method_on_a_tool_set() {
    let train = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -";
    let Some((d, log)) = chess_dir(&[train]) else {
        return;
    };
    let test = CHESS_TEST_FEN;
    let exp = format!(
        "name = \"c\"\n[chess]\ntool_sets = [\"phase_specialists\"]\nmethods = [\"base\", \"ext:reflect\"]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponents = [1350]\nmovetime_ms = 10\nmax_plies = 6\nopponent_ratings = \"nominal\"\nconcurrency = 2\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:errors\"\n[methods.reflect]\ncommand = [\"python3\", \"tee.py\", \"{}\", \"python3\", \"{}\"]\nparams = {{ observe = \"calls\" }}\n",
        log.display(),
        examples().join("reflect.py").display(),
    );
    stdout_ok(&run(d.path(), &exp, &[], 600));
    let text = std::fs::read_to_string(&log).unwrap();
    let s = schemas();
    for l in text.lines() {
        let (_, msg) = l.split_once('\t').unwrap();
        let v: Value = serde_json::from_str(msg).unwrap();
        let kind = v["type"].as_str().unwrap().to_string();
        if let Some(why) = violation(&v, &s[&kind], &kind) {
            panic!("{why}\n{msg}");
        }
        if kind == "task" {
            assert_eq!(v["environment"], "chess", "{msg}");
            assert_eq!(v["setting"], "phase_specialists", "{msg}");
        }
        if l.starts_with("in\t") {
            assert!(
                !l.contains(test) && !l.contains("p7777"),
                "a test position was sent: {l}"
            );
        }
    }
    let store = d.path().join("store");
    let runs: Vec<ToolRunRow> = stored(&store, "external", "tool_runs.parquet");
    assert!(!runs.is_empty(), "no tool play");
    assert!(
        runs.iter().all(
            |r| r.method == "ext:reflect" && r.output.starts_with(&format!("Position {train}"))
        ),
        "{runs:?}"
    );
    assert_eq!(
        stored::<DocRow>(&store, "external", "docs.parquet").len(),
        1
    );
    let status = stdout_ok(
        &common::otb()
            .arg("--store")
            .arg(&store)
            .arg("status")
            .arg(d.path().join("exp.toml"))
            .output()
            .unwrap(),
    );
    assert!(
        status.contains("chess-evaluate[phase_specialists ext:reflect test]"),
        "{status}"
    );
    // Table 3: a column of its own, named as the method list writes it, with this
    // run's cell.
    let cell = ext_column(
        d.path(),
        "table3",
        "| phase_specialists | scripted:random | run |",
    );
    assert!(cell.contains("games"), "{cell}");
}

/// An editor on 127.0.0.1 for `reflect.py`: for the first tool its prompt lists, a
/// description quoting the first observation line (`Item ...`) of the prompt, so the
/// docs show what the method saw.
fn reflecting_model(mut stream: std::net::TcpStream, rec: Arc<Recorder>) {
    let Some(req) = rec.record(&stream) else {
        return;
    };
    let user = req["messages"]
        .as_array()
        .and_then(|m| m.iter().rev().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    let seen = user
        .lines()
        .find(|l| l.starts_with("Item "))
        .unwrap_or("nothing");
    let tool = names_in(&user).into_iter().next().unwrap_or_default();
    let content = format!("FUNCTION: {tool}\nDESCRIPTION: Seen: {seen}\n");
    let reply = json!({"id": "t", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
    common::respond(&mut stream, "200 OK", &reply.to_string());
}

/// Chess `play`: `reflect.py` has the experiment's agent play training positions
/// with its descriptions (the agent's turns recorded in `doc_calls`), and its docs
/// come from what it saw there; a planted test position (its id and FEN) is in no
/// message the method receives; a rerun starts no process; a play past `max_plays`
/// fails in one line, exit 2, nothing published.
#[test]
fn chess_play_runs_the_agent_on_training_positions_only() {
    let train = [
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -",
        "rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq -",
    ];
    let Some((d, log)) = chess_dir(&train) else {
        return;
    };
    let test = CHESS_TEST_FEN;
    let rec = Arc::new(Recorder::default());
    let url = common::spawn_server(rec.clone(), reflecting_model);
    let env = [
        ("OTB_LLM_BASE_URL", url.as_str()),
        ("OTB_LLM_API_KEY", "test"),
    ];
    let exp = |method: &str| {
        format!(
            "name = \"c\"\n[chess]\ntool_sets = [\"phase_specialists\"]\nmethods = [\"base\", \"ext:reflect\"]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponents = [1350]\nmovetime_ms = 10\nmax_plies = 6\nopponent_ratings = \"nominal\"\nconcurrency = 2\n[models]\nagent = \"scripted:random\"\neditor = \"openai:fake\"\n[methods.reflect]\ncommand = [\"python3\", \"tee.py\", \"{}\", \"python3\", \"{}\"]\n{method}\n",
            log.display(),
            examples().join("reflect.py").display(),
        )
    };
    let ok = exp("params = { rounds = 2 }");
    // The plan: the training positions' own node, which the method's stage reads in
    // place of `chess-positions`; the bill counts `play`'s agent moves, at most 4
    // plays x 8 positions (of at most 200) x 2 games x 5 moves.
    let nodes = (
        "chess-train-positions",
        "train_positions",
        "chess-positions",
    );
    assert_eq!(plan_before_run(d.path(), &ok, nodes), 4 * 8 * 2 * 5);
    stdout_ok(&run(d.path(), &ok, &env, 600));
    let text = std::fs::read_to_string(&log).unwrap();
    let s = schemas();
    let mut played = Vec::new();
    for l in text.lines() {
        let (dir, msg) = l.split_once('\t').unwrap();
        let v: Value = serde_json::from_str(msg).unwrap();
        let kind = v["type"].as_str().unwrap().to_string();
        if let Some(why) = violation(&v, &s[&kind], &kind) {
            panic!("{why}\n{msg}");
        }
        if dir == "in" {
            assert!(
                !l.contains(test) && !l.contains("p7777"),
                "a test position was sent: {l}"
            );
            if kind == "task" {
                assert_eq!(v["supports"], json!(["ask", "call_tool", "play"]), "{msg}");
                assert_eq!(v["training_items"], json!(["p0", "p1"]), "{msg}");
            }
            if v.get("trajectories").is_some() {
                played.push(v);
            }
        }
    }
    // Two rounds, one training position each (a different one per round), both
    // sides: two games per play, each with its trajectory.
    assert_eq!(played.len(), 2, "{text}");
    assert_eq!(played[0]["items"], json!(["p0"]));
    assert_eq!(played[1]["items"], json!(["p1"]));
    for p in &played {
        let t = p["trajectories"].as_array().unwrap();
        assert_eq!(t.len(), 2, "{p}");
        assert!(
            t.iter()
                .all(|g| !g["trajectory"].as_str().unwrap().is_empty()),
            "{p}"
        );
    }
    let store = d.path().join("store");
    // The agent's turns in play are the method's calls, recorded like explore's.
    let calls: Vec<DocCallRow> = stored(&store, "external", "doc_calls.parquet");
    let agent_turns = calls
        .iter()
        .filter(|c| c.role == "agent" && c.phase == "exploration" && c.step == "play-r0")
        .count();
    assert!(agent_turns >= 2, "{calls:?}");
    assert!(calls.iter().all(|c| c.method == "ext:reflect"), "{calls:?}");
    // The docs say what the method saw in its last play (the second round's).
    let docs: Vec<DocRow> = stored(&store, "external", "docs.parquet");
    assert_eq!(docs.len(), 1);
    let descs: Vec<&str> = docs[0]
        .tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["description"].as_str())
        .collect();
    assert!(
        descs
            .iter()
            .any(|d| d.starts_with("Seen: Item p1 (play white from this position)")),
        "{descs:?}"
    );
    // What its stage stores as its inputs holds no test position: the docs and
    // `chess-train-positions`, whose rows are the training positions alone.
    reads_training_only(&store, nodes);
    let rows: Vec<stages::chess::rows::PositionRow> =
        stored(&store, "chess-train-positions", "chess_positions.parquet");
    let ids: Vec<&str> = rows.iter().map(|r| r.position_id.as_str()).collect();
    assert_eq!(ids, ["p0", "p1"]);
    assert!(rows.iter().all(|r| r.split == "train" && r.fen != test));
    // A rerun: nothing runs, the method is not started.
    let before = std::fs::read_to_string(&log).unwrap();
    stdout_ok(&run(d.path(), &ok, &env, 600));
    assert_eq!(std::fs::read_to_string(&log).unwrap(), before);

    // Past its plays: one line, exit 2, nothing published for its stage.
    let d2 = tempfile::tempdir().unwrap();
    for f in ["tee.py", "train.jsonl", "test.jsonl"] {
        std::fs::copy(d.path().join(f), d2.path().join(f)).unwrap();
    }
    let out = run(
        d2.path(),
        &exp("params = { rounds = 3 }\nmax_plays = 2"),
        &env,
        600,
    );
    let err = one_error_line(&out);
    assert!(
        err.contains("method ext:reflect on item *: message #")
            && err.contains("(play) is past its budget of 2 plays (max_plays)"),
        "{err}"
    );
    assert!(stored::<DocRow>(&d2.path().join("store"), "external", "docs.parquet").is_empty());
}

/// Search: the same method on a tool set of domain search tools; `call_tool` runs a
/// domain search (stored as `tool_runs`), and the docs are played on the test split.
#[test]
fn search_runs_an_external_method_on_a_tool_set() {
    if !python() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    if !common::substitute_corpus(&d.path().join("store")) {
        return;
    }
    std::fs::write(d.path().join("tee.py"), TEE).unwrap();
    let log = d.path().join("wire.log");
    let exp = format!(
        "name = \"s\"\n[search]\ntool_sets = [\"domains\"]\nmethods = [\"base\", \"ext:reflect\"]\ntrain_questions = 2\ntest_questions = 2\nmax_turns = 2\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:errors\"\n[methods.reflect]\ncommand = [\"python3\", \"tee.py\", \"{}\", \"python3\", \"{}\"]\nparams = {{ observe = \"calls\" }}\n",
        log.display(),
        examples().join("reflect.py").display(),
    );
    stdout_ok(&run(d.path(), &exp, &[], 600));
    let text = std::fs::read_to_string(&log).unwrap();
    let task = text
        .lines()
        .find_map(|l| l.strip_prefix("in\t").filter(|m| m.contains("\"task\"")))
        .expect("a task");
    let task: Value = serde_json::from_str(task).unwrap();
    assert_eq!(task["environment"], "search");
    assert_eq!(task["setting"], "domains");
    let store = d.path().join("store");
    let runs: Vec<ToolRunRow> = stored(&store, "external", "tool_runs.parquet");
    assert_eq!(runs.len(), task["tools"].as_array().unwrap().len());
    assert!(runs.iter().all(|r| r.method == "ext:reflect"), "{runs:?}");
    let status = stdout_ok(
        &common::otb()
            .arg("--store")
            .arg(&store)
            .arg("status")
            .arg(d.path().join("exp.toml"))
            .output()
            .unwrap(),
    );
    assert!(status.contains("ext:reflect test]"), "{status}");
    // Table 4: a column of its own, with this run's cell.
    let cell = ext_column(d.path(), "table4", "| domains | scripted:random | run:");
    assert!(cell.contains("(n=2)"), "{cell}");
}

/// The `manifest.json` of every entry of stage `stage` in `store`.
fn manifests(store: &Path, stage: &str) -> Vec<Value> {
    let Ok(rd) = std::fs::read_dir(store.join(stage)) else {
        return Vec::new();
    };
    rd.flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("manifest.json")).ok())
        .map(|t| serde_json::from_str(&t).unwrap())
        .collect()
}

/// The one external stage's stored inputs (its manifest's key inputs) are the opaque
/// docs and, as `input`, the output of the training-only node `train`; the output of
/// the full set `full` (both splits) is none of them.
fn reads_training_only(store: &Path, (train, input, full): (&str, &str, &str)) {
    let ext = manifests(store, "external");
    assert_eq!(ext.len(), 1, "{ext:?}");
    let inputs = ext[0]["components"]["inputs"].as_object().unwrap();
    let names: Vec<&str> = inputs.keys().map(String::as_str).collect();
    assert_eq!(names, ["docs", input], "{inputs:?}");
    let output = |stage: &str| {
        let m = manifests(store, stage);
        assert_eq!(m.len(), 1, "{stage}: {m:?}");
        m[0]["output_digest"].clone()
    };
    assert_eq!(inputs[input], output(train));
    let full = output(full);
    assert!(inputs.values().all(|d| *d != full), "{inputs:?}");
}

/// `otb plan --format json` of `toml` (written as `dir/exp.toml`) before its run:
/// the training-only node `train` reads the full set `full`, and the external node
/// reads `train` (as `input`) and not `full`. Returns the agent calls the bill
/// counts for the external node (its `play`), an upper bound ("at most").
fn plan_before_run(dir: &Path, toml: &str, (train, input, full): (&str, &str, &str)) -> u64 {
    let exp_path = dir.join("exp.toml");
    std::fs::write(&exp_path, toml).unwrap();
    let plan: Value = serde_json::from_str(&otb_ok(
        dir,
        &["plan", exp_path.to_str().unwrap(), "--format", "json"],
    ))
    .unwrap();
    let nodes = plan["nodes"].as_array().unwrap();
    let edges = |n: &Value| -> Vec<(String, String)> {
        n["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| {
                (
                    i["name"].as_str().unwrap().to_string(),
                    i["node"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let own = nodes
        .iter()
        .find(|n| n["node"] == train)
        .unwrap_or_else(|| panic!("no {train} in {plan}"));
    assert_eq!(own["stage"], train);
    assert!(edges(own).iter().any(|(_, n)| n == full), "{own}");
    let ext: Vec<&Value> = nodes.iter().filter(|n| n["stage"] == "external").collect();
    assert_eq!(ext.len(), 1, "{plan}");
    let e = edges(ext[0]);
    assert!(e.contains(&(input.to_string(), train.to_string())), "{e:?}");
    assert!(e.iter().all(|(_, n)| n != full), "{e:?}");
    let lines: Vec<&Value> = plan["bill"]["lines"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|l| l["stage"] == "external")
        .collect();
    let agent = lines
        .iter()
        .find(|l| l["role"] == "agent")
        .unwrap_or_else(|| panic!("no agent line: {lines:?}"));
    assert_eq!(agent["exact"], false, "{agent}");
    assert!(lines
        .iter()
        .any(|l| l["role"] == "editor" && l["calls"] == 1000 && l["exact"] == false));
    agent["calls"].as_u64().unwrap()
}

/// The planted test position of the chess tests: it must never reach the method.
const CHESS_TEST_FEN: &str = "8/5pk1/6p1/8/3R4/6P1/5PK1/2r5 w - -";

/// A folder for a chess test of an external method (`None`, said, without python3
/// or a chess engine): `tee.py`, `train.jsonl` with `train`'s positions (ids `p0`,
/// `p1`, ...) and `test.jsonl` with [`CHESS_TEST_FEN`] as `p7777`; and the path of
/// the wire log `tee.py` writes.
fn chess_dir(train: &[&str]) -> Option<(tempfile::TempDir, PathBuf)> {
    if !python() {
        return None;
    }
    if let Err(e) = datasets::chess::engine::find_engine(None) {
        testkit::skip("engine", format_args!("no chess engine ({e})"));
        return None;
    }
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("tee.py"), TEE).unwrap();
    let log = d.path().join("wire.log");
    let line = |i: usize, fen: &str| {
        json!({"fen": fen, "phase": "opening", "evaluation": "equal", "cp": 0.0,
            "mate": null, "depth": 12, "test_id": format!("p{i}")})
        .to_string()
    };
    let lines: String = train
        .iter()
        .enumerate()
        .map(|(i, fen)| line(i, fen) + "\n")
        .collect();
    std::fs::write(d.path().join("train.jsonl"), lines).unwrap();
    std::fs::write(
        d.path().join("test.jsonl"),
        line(7_777, CHESS_TEST_FEN) + "\n",
    )
    .unwrap();
    Some((d, log))
}

/// `otb table TABLE` of the experiment in `dir`: its header ends with an
/// `ext:reflect` column after `+ET`, and the run row starting with `row` has a cell
/// there, returned.
fn ext_column(dir: &Path, table: &str, row: &str) -> String {
    let exp_path = dir.join("exp.toml");
    let t = otb_ok(
        dir,
        &["table", table, "--experiment", exp_path.to_str().unwrap()],
    );
    assert!(
        t.lines()
            .any(|l| l.starts_with("| Tool set |")
                && l.trim_end().ends_with("| +ET | ext:reflect |")),
        "{t}"
    );
    let run_row = t
        .lines()
        .find(|l| l.starts_with(row))
        .unwrap_or_else(|| panic!("{t}"));
    let vals: Vec<&str> = run_row.split('|').map(str::trim).collect();
    vals[vals.len() - 2].to_string()
}

/// `otb --store <dir>/store ARGS`: its stdout (the command must succeed).
fn otb_ok(dir: &Path, args: &[&str]) -> String {
    stdout_ok(
        &common::otb()
            .arg("--store")
            .arg(dir.join("store"))
            .args(args)
            .output()
            .unwrap(),
    )
}

/// A row of an exported table: its grid cell's method (the table's own `method`
/// column, where it has one, is exported as is and the cell's becomes `cell_method`).
#[derive(Debug, serde::Serialize, serde::Deserialize, pipeline::Row)]
#[row(table = "scores", doc = "exported scores")]
struct ExportedScore {
    /// The cell's method.
    method: String,
    /// The node that wrote the row.
    node: String,
}

/// An exported `doc_calls` row: the call's own method and its cell's.
#[derive(Debug, serde::Serialize, serde::Deserialize, pipeline::Row)]
#[row(table = "doc_calls", doc = "exported doc_calls")]
struct ExportedDocCall {
    /// The method that made the call.
    method: String,
    /// The cell's method.
    cell_method: String,
    /// Prompt tokens.
    prompt_tokens: i64,
}

/// An external method is a column or rows of its own wherever the built-in methods
/// are: `otb table table2` (a column named as the method list writes it), `otb table
/// table6` (its fidelity row), `otb table tokens` (its editing tokens counted from its `doc_calls`), `otb report` (its final
/// docs beside gold and ToolObserver's edits, its cost, `--compare ext:NAME
/// toolobserver`), `otb export` (the cell columns) and `otb plan` (its node and key).
#[test]
fn an_external_method_is_a_column_of_its_own_everywhere() {
    if !python() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let exp = format!(
        "name = \"col\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\"]\nmethods = [\"gold\", \"base\", \"toolobserver\", \"easytool\", \"ext:reflect\"]\nrounds = 2\n[models]\nagent = \"scripted:schema\"\neditor = \"scripted:errors\"\n[baselines.draft]\nembedder = \"bag-of-words\"\n[methods.reflect]\ncommand = [\"python3\", \"{}\"]\n",
        fixture("mini_bfcl.jsonl").display(),
        examples().join("reflect.py").display(),
    );
    let exp_path = d.path().join("exp.toml");
    std::fs::write(&exp_path, &exp).unwrap();
    let exp_arg = exp_path.to_str().unwrap();
    // Before the run the plan lists its node, waiting or ready to run.
    let plan = otb_ok(d.path(), &["plan", exp_arg]);
    assert!(plan.contains("external[names ext:reflect]"), "{plan}");
    stdout_ok(&run(d.path(), &exp, &[], 600));

    // Table 2: a column of its own, with this run's value.
    let t2 = otb_ok(d.path(), &["table", "table2", "--experiment", exp_arg]);
    let header = t2
        .lines()
        .find(|l| l.starts_with("| Documentation |"))
        .unwrap_or_else(|| panic!("{t2}"));
    let cols: Vec<&str> = header.split('|').map(str::trim).collect();
    assert_eq!(cols.last(), Some(&""), "{header}");
    assert_eq!(cols[cols.len() - 2], "ext:reflect", "{header}");
    let run_row = t2
        .lines()
        .find(|l| l.starts_with("| Anon. Fn. Names Only | scripted:schema | run |"))
        .unwrap_or_else(|| panic!("{t2}"));
    let vals: Vec<&str> = run_row.split('|').map(str::trim).collect();
    assert!(
        vals[vals.len() - 2].contains("(n=5)"),
        "the method's cell: {run_row}"
    );
    let csv = otb_ok(
        d.path(),
        &[
            "table",
            "table2",
            "--experiment",
            exp_arg,
            "--format",
            "csv",
        ],
    );
    assert!(
        csv.lines()
            .any(|l| l.starts_with("names,scripted:schema,ext:reflect,run,5,")),
        "{csv}"
    );

    // Table 6: its row, scored from its final docs as the built-ins' are (the same
    // instances' tools compared), under its agent (its docs are per agent).
    let t6 = otb_ok(
        d.path(),
        &[
            "table",
            "table6",
            "--experiment",
            exp_arg,
            "--format",
            "csv",
        ],
    );
    let t6_row = |method: &str| -> Vec<String> {
        t6.lines()
            .find(|l| l.starts_with(&format!("names,{method},")))
            .unwrap_or_else(|| panic!("no {method} row in\n{t6}"))
            .split(',')
            .map(str::to_string)
            .collect()
    };
    // setting,method,agent,editor,tools,semantic,lexical
    let (ext6, et6) = (t6_row("ext:reflect"), t6_row("easytool"));
    assert_eq!(ext6[2], "scripted:schema", "{t6}");
    assert_eq!(ext6[3], "scripted:errors", "{t6}");
    assert!(ext6[4].parse::<i64>().unwrap() > 0, "{t6}");
    assert_eq!(ext6[4], et6[4], "the same tools compared: {t6}");
    for v in &ext6[5..7] {
        let v: f64 = v.parse().unwrap();
        assert!((0.0..=1.0).contains(&v), "{t6}");
    }
    let md = otb_ok(d.path(), &["table", "table6", "--experiment", exp_arg]);
    assert!(
        md.lines()
            .any(|l| l.starts_with("| names | ext:reflect | scripted:schema |")),
        "{md}"
    );

    // Tokens: its editing tokens are its doc_calls' (scripted models count words).
    let calls: Vec<DocCallRow> = stored(&d.path().join("store"), "external", "doc_calls.parquet");
    assert!(!calls.is_empty(), "the method asked the editor");
    let editing: i64 = calls
        .iter()
        .filter(|c| c.phase == "editing")
        .map(|c| c.prompt_tokens + c.completion_tokens)
        .sum();
    assert!(editing > 0);
    let tokens = otb_ok(
        d.path(),
        &[
            "table",
            "tokens",
            "--experiment",
            exp_arg,
            "--format",
            "csv",
        ],
    );
    let row = tokens
        .lines()
        .find(|l| l.starts_with("names,ext:reflect,"))
        .unwrap_or_else(|| panic!("{tokens}"));
    let f: Vec<&str> = row.split(',').collect();
    // setting,method,agent,editor,calls,exploration,editing,evaluation,reasoning,docs,ratio
    assert_eq!(f[6], editing.to_string(), "{row}");
    let exploration: i64 = calls
        .iter()
        .filter(|c| c.phase != "editing")
        .map(|c| c.prompt_tokens + c.completion_tokens)
        .sum();
    assert_eq!(f[5], exploration.to_string(), "{row}");
    assert_eq!(f[9], (exploration + editing).to_string(), "{row}");
    assert!(f[7].parse::<i64>().unwrap() > 0, "its evaluation: {row}");

    // The report: its final docs beside ToolObserver's edits, its cost, and the
    // paired comparison against ToolObserver.
    let rep = d.path().join("rep");
    let edits = otb_ok(
        d.path(),
        &[
            "report",
            exp_arg,
            "--to",
            rep.to_str().unwrap(),
            "--compare",
            "ext:reflect",
            "toolobserver",
        ],
    );
    assert!(edits.contains("report.html"), "{edits}");
    let page = std::fs::read_to_string(rep.join("report.html")).unwrap();
    assert!(
        page.contains("ext:reflect (final)"),
        "its docs beside the edits"
    );
    assert!(page.contains("easytool (final)"), "the built-in's too");
    // As a word diff against what the agent saw first (round 0: no description in
    // `names`, so every word of its description is an insertion).
    assert!(
        page.contains("ext:reflect (final)</div><div class=\"diff\"><ins class=\"w\">"),
        "its docs as a word diff"
    );
    assert!(
        page.contains("<td>external</td><td>ext:reflect</td><td>editor</td>"),
        "its cost row"
    );
    assert!(
        page.contains("A = names · ext:reflect") && page.contains("B = names · toolobserver"),
        "the comparison"
    );

    // Export: its rows carry its cell's method.
    let out = d.path().join("export");
    otb_ok(
        d.path(),
        &["export", exp_arg, "--to", out.to_str().unwrap()],
    );
    let scores: Vec<ExportedScore> =
        pipeline::table::read_rows(&out.join("scores.parquet")).unwrap();
    assert!(
        scores
            .iter()
            .any(|s| s.method == "ext:reflect" && s.node == "evaluate[names ext:reflect r0]"),
        "{scores:?}"
    );
    let doc_calls: Vec<ExportedDocCall> =
        pipeline::table::read_rows(&out.join("doc_calls.parquet")).unwrap();
    let ext: Vec<&ExportedDocCall> = doc_calls
        .iter()
        .filter(|c| c.cell_method == "ext:reflect")
        .collect();
    assert_eq!(ext.len(), calls.len());
    assert!(ext
        .iter()
        .all(|c| c.method == "ext:reflect" && c.prompt_tokens > 0));

    // The plan: its node, fresh, with the key of its store entry.
    let plan: Value =
        serde_json::from_str(&otb_ok(d.path(), &["plan", exp_arg, "--format", "json"])).unwrap();
    let node = plan["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "external[names ext:reflect]")
        .unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(node["stage"], "external");
    assert_eq!(node["state"], "fresh");
    let key = node["key"].as_str().unwrap();
    assert!(d.path().join("store/external").join(key).is_dir(), "{key}");
}

/// Search `play`: `reflect.py` has the agent answer training questions with its
/// descriptions (an episode each, graded by exact match; the agent's turns recorded
/// in `doc_calls`), and its docs come from what it saw; no test question (its id,
/// its text or its answer) is in any message the method receives.
#[test]
fn search_play_runs_the_agent_on_training_questions_only() {
    if !python() {
        return;
    }
    let d = tempfile::tempdir().unwrap();
    if !common::substitute_corpus(&d.path().join("store")) {
        return;
    }
    std::fs::write(d.path().join("tee.py"), TEE).unwrap();
    let log = d.path().join("wire.log");
    let rec = Arc::new(Recorder::default());
    let url = common::spawn_server(rec.clone(), reflecting_model);
    let env = [
        ("OTB_LLM_BASE_URL", url.as_str()),
        ("OTB_LLM_API_KEY", "test"),
    ];
    let exp = format!(
        "name = \"s\"\n[search]\ntool_sets = [\"domains\"]\nmethods = [\"base\", \"ext:reflect\"]\ntrain_questions = 2\ntest_questions = 2\nmax_turns = 2\n[models]\nagent = \"scripted:random\"\neditor = \"openai:fake\"\n[methods.reflect]\ncommand = [\"python3\", \"tee.py\", \"{}\", \"python3\", \"{}\"]\nparams = {{ play_items = 2 }}\n",
        log.display(),
        examples().join("reflect.py").display(),
    );
    let nodes = (
        "search-train-questions",
        "train_questions",
        "search-questions",
    );
    // The bill counts `play`'s agent turns: at most 4 plays x 2 questions x (2 tool
    // turns and the forced answer).
    assert_eq!(plan_before_run(d.path(), &exp, nodes), 4 * 2 * 3);
    stdout_ok(&run(d.path(), &exp, &env, 600));
    let store = d.path().join("store");
    let questions: Vec<stages::search::rows::QuestionRow> =
        stored(&store, "search-questions", "search_questions.parquet");
    let (train, test): (Vec<_>, Vec<_>) = questions.iter().partition(|q| q.split == "train");
    assert_eq!((train.len(), test.len()), (2, 2));
    // What its stage stores as its inputs holds no test question: the docs and
    // `search-train-questions`, whose rows are the training questions alone.
    reads_training_only(&store, nodes);
    let own: Vec<stages::search::rows::QuestionRow> =
        stored(&store, "search-train-questions", "search_questions.parquet");
    assert_eq!(own, train.iter().map(|q| (*q).clone()).collect::<Vec<_>>());
    let text = std::fs::read_to_string(&log).unwrap();
    let s = schemas();
    let mut played = Vec::new();
    for l in text.lines() {
        let (dir, msg) = l.split_once('\t').unwrap();
        let v: Value = serde_json::from_str(msg).unwrap();
        let kind = v["type"].as_str().unwrap().to_string();
        if let Some(why) = violation(&v, &s[&kind], &kind) {
            panic!("{why}\n{msg}");
        }
        if dir != "in" {
            continue;
        }
        for q in &test {
            assert!(
                !msg.contains(&format!("\"{}\"", q.question_id))
                    && !msg.contains(&q.question)
                    && !msg.contains(&format!("\"{}\"", q.answer)),
                "a test question was sent: {msg}"
            );
        }
        if kind == "task" {
            let ids: Vec<&str> = train.iter().map(|q| q.question_id.as_str()).collect();
            assert_eq!(v["training_items"], json!(ids), "{msg}");
        }
        if v.get("trajectories").is_some() {
            played.push(v);
        }
    }
    assert_eq!(played.len(), 1, "{text}");
    let t = played[0]["trajectories"].as_array().unwrap();
    assert_eq!(t.len(), 2, "{t:?}");
    // What the method saw is a training question's episode.
    assert!(
        t.iter()
            .zip(&train)
            .all(|(e, q)| e["item"] == q.question_id.as_str()
                && e["trajectory"].as_str().unwrap().contains(&q.question)),
        "{t:?}"
    );
    let calls: Vec<DocCallRow> = stored(&store, "external", "doc_calls.parquet");
    assert!(
        calls
            .iter()
            .any(|c| c.role == "agent" && c.phase == "exploration" && c.step == "play-r0"),
        "{calls:?}"
    );
    let docs: Vec<DocRow> = stored(&store, "external", "docs.parquet");
    let first = format!(
        "Seen: Item {} (answer this training question",
        train[0].question_id
    );
    assert!(
        docs[0]
            .tools
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["description"]
                .as_str()
                .is_some_and(|d| d.starts_with(&first))),
        "{:?}",
        docs[0].tools
    );
}
