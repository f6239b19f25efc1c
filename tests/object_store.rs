//! `--store s3://bucket/prefix` and `az://container/prefix`: workers on machines that
//! share no filesystem (each with its own local mirror) share one store on an object
//! store server that the test starts on 127.0.0.1 (S3: the Python package `moto`,
//! found via `OTB_PYTHON`; Azure Blob: Azurite from npm, `OTB_AZURITE` or
//! `azurite-blob` on `PATH`; the tests skip without them). Two workers make the tables
//! of one local process and compute each node once, a third finds everything fresh;
//! two plain runs racing on every key both succeed with the same tables; a killed
//! worker's lease is taken over; an unusable bucket is one line; the call cache
//! reaches the shared store.

mod common;

use common::{one_error_line, otb, stdout_ok};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn scripted() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/scripted.toml")
}

/// Which object store a test server speaks.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    /// S3 (the Python package `moto` in its server mode).
    S3,
    /// Azure Blob storage (Azurite's blob service, from npm).
    Azure,
}

/// An object store server on a free port of 127.0.0.1, stopped when dropped.
struct Cloud {
    child: Child,
    port: u16,
    kind: Kind,
}

impl Drop for Cloud {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn python() -> String {
    std::env::var("OTB_PYTHON").unwrap_or_else(|_| "python3".into())
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `req(method, path, query, headers, body)`: a request to Azurite (port `AZ_PORT`)
/// signed with the development account's shared key, in Python's standard library;
/// its HTTP status.
const AZ_PY: &str = r#"
import base64, hmac, hashlib, email.utils, os, urllib.request, urllib.error, urllib.parse
def req(method, path, query, headers, body):
    if body:
        headers = dict(headers, **{'Content-Type': 'application/octet-stream'})
    h = {'x-ms-date': email.utils.formatdate(usegmt=True), 'x-ms-version': '2021-08-06'}
    h.update({k: v for k, v in headers.items() if k.startswith('x-ms-')})
    std = ['Content-Encoding', 'Content-Language', 'Content-Length', 'Content-MD5', 'Content-Type', 'Date',
           'If-Modified-Since', 'If-Match', 'If-None-Match', 'If-Unmodified-Since', 'Range']
    plain = dict(headers, **{'Content-Length': str(len(body)) if body else ''})
    s = method + '\n' + ''.join(plain.get(k, '') + '\n' for k in std)
    s += ''.join(k + ':' + v + '\n' for k, v in sorted(h.items()))
    s += '/devstoreaccount1/devstoreaccount1/' + path + ''.join('\n' + k + ':' + v for k, v in sorted(query.items()))
    key = base64.b64decode('Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==')
    sig = base64.b64encode(hmac.new(key, s.encode(), hashlib.sha256).digest()).decode()
    h.update({k: v for k, v in headers.items() if not k.startswith('x-ms-')})
    h['Authorization'] = 'SharedKey devstoreaccount1:' + sig
    h['Content-Length'] = str(len(body))
    url = 'http://127.0.0.1:' + os.environ['AZ_PORT'] + '/devstoreaccount1/' + path
    if query:
        url += '?' + urllib.parse.urlencode(query)
    r = urllib.request.Request(url, method=method, headers=h, data=body if body else None)
    try:
        return urllib.request.urlopen(r).status
    except urllib.error.HTTPError as e:
        return e.code
"#;

impl Cloud {
    /// The server of `kind`, or `None` (skipped) when it is not installed.
    fn start(kind: Kind) -> Option<Cloud> {
        match kind {
            Kind::S3 => Cloud::s3(),
            Kind::Azure => Cloud::azure(),
        }
    }

    /// A moto S3 server, or `None` (skipped) when no Python with `moto[server]` is there.
    fn s3() -> Option<Cloud> {
        let ok = Command::new(python())
            .args(["-c", "import moto.server"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            testkit::skip("s3", "no Python with moto[server] (set OTB_PYTHON)");
            return None;
        }
        Some(Cloud::launch(Kind::S3, |port| {
            Command::new(python())
                .args([
                    "-m",
                    "moto.server",
                    "-H",
                    "127.0.0.1",
                    "-p",
                    &port.to_string(),
                ])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        }))
    }

    /// Azurite's blob service (in memory), or `None` (skipped) when there is no
    /// `azurite-blob` (`OTB_AZURITE`, else on `PATH`).
    fn azure() -> Option<Cloud> {
        let bin = std::env::var("OTB_AZURITE").unwrap_or_else(|_| "azurite-blob".into());
        let spawn = |port: u16| {
            Command::new(&bin)
                .args(["--blobHost", "127.0.0.1", "--blobPort", &port.to_string()])
                .args(["--inMemoryPersistence", "--skipApiVersionCheck", "--loose"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
        };
        let Ok(probe) = spawn(free_port()) else {
            testkit::skip("azure", format!("no Azurite (`{bin}`; set OTB_AZURITE)"));
            return None;
        };
        drop(Cloud {
            child: probe,
            port: 0,
            kind: Kind::Azure,
        });
        Some(Cloud::launch(Kind::Azure, |port| spawn(port).unwrap()))
    }

    /// A server started by `spawn` on a free port, once it accepts connections and
    /// is still running a moment later. Tests start servers at the same time, so a
    /// port found free may be taken before the server binds it: then the server
    /// exits (or never answers) and another port is tried.
    fn launch(kind: Kind, spawn: impl Fn(u16) -> Child) -> Cloud {
        for _ in 0..5 {
            let port = free_port();
            let mut cloud = Cloud {
                child: spawn(port),
                port,
                kind,
            };
            let until = Instant::now() + Duration::from_secs(30);
            let mut up = false;
            while Instant::now() < until {
                if cloud.child.try_wait().ok().flatten().is_some() {
                    break;
                }
                if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    std::thread::sleep(Duration::from_millis(300));
                    up = cloud.child.try_wait().ok().flatten().is_none();
                    break;
                }
                std::thread::sleep(Duration::from_millis(100));
            }
            if up {
                return cloud;
            }
        }
        panic!("the object store server did not start on any of 5 ports");
    }

    /// The store URL of `prefix` in `bucket` (Azure: the container).
    fn url(&self, bucket: &str, prefix: &str) -> String {
        let scheme = match self.kind {
            Kind::S3 => "s3",
            Kind::Azure => "az",
        };
        format!("{scheme}://{bucket}/{prefix}")
    }

    /// A plain HTTP PUT of `body` at `path`: the status line.
    fn put(&self, path: &str, body: &str) -> String {
        let mut c = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            c,
            "PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            self.port,
            body.len()
        )
        .unwrap();
        let mut answer = String::new();
        c.read_to_string(&mut answer).unwrap();
        answer.lines().next().unwrap_or_default().to_string()
    }

    /// Whether the server refuses, as the store relies on it to, a create-only
    /// write over an object and an update over a version that is not the object's
    /// (S3: asked through the S3 client moto comes with, as the server answers
    /// unsigned conditional writes differently; Azure: signed requests).
    fn refuses_conflicting_writes(&self, bucket: &str) -> bool {
        let script = match self.kind {
            Kind::S3 => format!(
                "import boto3, botocore\n\
                 c = boto3.client('s3', endpoint_url='http://127.0.0.1:{}', region_name='us-east-1', aws_access_key_id='t', aws_secret_access_key='t')\n\
                 c.put_object(Bucket='{bucket}', Key='probe', Body=b'1')\n\
                 codes = []\n\
                 for kw in [dict(IfNoneMatch='*'), dict(IfMatch='\"0123\"')]:\n\
                 \x20   try:\n\
                 \x20       c.put_object(Bucket='{bucket}', Key='probe', Body=b'2', **kw)\n\
                 \x20       codes.append(200)\n\
                 \x20   except botocore.exceptions.ClientError as e:\n\
                 \x20       codes.append(e.response['ResponseMetadata']['HTTPStatusCode'])\n\
                 print(codes)\n",
                self.port
            ),
            Kind::Azure => format!(
                "{AZ_PY}\n\
                 blob = {{'x-ms-blob-type': 'BlockBlob'}}\n\
                 req('PUT', '{bucket}/probe', {{}}, blob, b'1')\n\
                 print([req('PUT', '{bucket}/probe', {{}}, dict(blob, **c), b'2') for c in [{{'If-None-Match': '*'}}, {{'If-Match': '\"0x0123\"'}}]])\n"
            ),
        };
        let out = Command::new(python())
            .args(["-c", &script])
            .env("AZ_PORT", self.port.to_string())
            .output()
            .unwrap();
        let codes = String::from_utf8_lossy(&out.stdout).trim().to_string();
        match self.kind {
            Kind::S3 => codes == "[412, 412]",
            // A create-only write over a blob: 409 (BlobAlreadyExists).
            Kind::Azure => codes == "[409, 412]",
        }
    }

    /// Create `bucket` (Azure: a container).
    fn bucket(&self, bucket: &str) {
        if self.kind == Kind::S3 {
            let answer = self.put(&format!("/{bucket}"), "");
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
            return;
        }
        let script = format!(
            "{AZ_PY}\nprint(req('PUT', '{bucket}', {{'restype': 'container'}}, {{}}, b''))\n"
        );
        let out = Command::new(python())
            .args(["-c", &script])
            .env("AZ_PORT", self.port.to_string())
            .output()
            .unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "201",
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// `otb` talking to this server, with its own local mirror under `mirror`.
    fn otb(&self, mirror: &Path) -> Command {
        let mut c = otb();
        for (k, _) in std::env::vars_os() {
            let k_text = k.to_string_lossy();
            if k_text.starts_with("AWS_") || k_text.starts_with("AZURE") {
                c.env_remove(k);
            }
        }
        match self.kind {
            Kind::S3 => c
                .env("AWS_ACCESS_KEY_ID", "test")
                .env("AWS_SECRET_ACCESS_KEY", "test")
                .env("AWS_REGION", "us-east-1")
                .env("AWS_ENDPOINT", format!("http://127.0.0.1:{}", self.port))
                .env("AWS_ALLOW_HTTP", "true"),
            Kind::Azure => c.env("AZURE_STORAGE_USE_EMULATOR", "true").env(
                "AZURITE_BLOB_STORAGE_URL",
                format!("http://127.0.0.1:{}", self.port),
            ),
        };
        c.env("OTB_STORE_CACHE", mirror).env("OTB_HEARTBEAT_S", "0");
        c
    }
}

/// Table 2 of the store `store` (a directory, or a URL with `cmd` set up for it).
fn table2(mut cmd: Command, store: &str, exp: &Path) -> String {
    common::run_rows(&stdout_ok(
        &cmd.args([
            "--store",
            store,
            "table",
            "table2",
            "--format",
            "csv",
            "--experiment",
        ])
        .arg(exp)
        .output()
        .unwrap(),
    ))
}

/// The stage count of a run's summary (`name: N stages, ...`).
fn stages(summary: &str) -> usize {
    summary
        .split(": ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("stage count")
}

/// Two workers make the tables of one local process, each node computed once; a
/// third machine finds everything fresh and a fourth reports from the remote.
fn two_workers_make_the_tables_of_one_process_and_a_third_finds_them_fresh(kind: Kind) {
    let Some(cloud) = Cloud::start(kind) else {
        return;
    };
    cloud.bucket("otb");
    let d = tempfile::tempdir().unwrap();
    let exp = scripted();
    let one = d.path().join("one");
    let one_store = one.to_string_lossy().into_owned();
    let total = stages(&stdout_ok(
        &otb()
            .args(["--store", &one_store, "run", "--quiet"])
            .arg(&exp)
            .output()
            .unwrap(),
    ));

    let url = &cloud.url("otb", "runs/a");
    let outs = common::run_together((1..=2).map(|i| {
        let mut c = cloud.otb(&d.path().join(format!("mirror{i}")));
        c.args(["--store", url, "run"])
            .arg(&exp)
            .args(["--shard", &format!("{i}/2")]);
        c
    }));
    let mut computed = Vec::new();
    for (stdout, stderr) in outs {
        assert!(stdout.contains("[shard "), "{stdout}");
        let mine = common::ran_nodes(&stderr);
        assert!(!mine.is_empty(), "each worker computes its share: {stderr}");
        computed.extend(mine);
    }
    common::assert_once(&computed);
    assert_eq!(computed.len(), total, "every node computed once");

    // A third machine (a fresh mirror) finds everything on the remote.
    let third = d.path().join("mirror3");
    assert_eq!(
        table2(cloud.otb(&third), url, &exp),
        table2(otb(), &one_store, &exp)
    );
    let again = stdout_ok(
        &cloud
            .otb(&third)
            .args(["--store", url, "run", "--quiet"])
            .arg(&exp)
            .output()
            .unwrap(),
    );
    assert!(again.contains(&format!("{total} stages, 0 ran")), "{again}");

    // A fourth machine reports the run straight from the remote (a fresh mirror).
    let rep = d.path().join("report");
    let out = stdout_ok(
        &cloud
            .otb(&d.path().join("mirror4"))
            .args(["--store", url, "report"])
            .arg(&exp)
            .arg("--to")
            .arg(&rep)
            .output()
            .unwrap(),
    );
    assert!(out.contains("report.html"), "{out}");
    let page = std::fs::read_to_string(rep.join("report.html")).unwrap();
    assert!(
        page.contains("data-node=\"evaluate[names r1]\""),
        "cells listed"
    );
    assert!(!page.contains("data-items=\"0\" data-node=\"evaluate[gold r0]\""));
}

#[test]
fn two_workers_on_s3_make_the_tables_of_one_process_and_a_third_finds_them_fresh() {
    two_workers_make_the_tables_of_one_process_and_a_third_finds_them_fresh(Kind::S3);
}

#[test]
fn two_workers_on_azure_make_the_tables_of_one_process_and_a_third_finds_them_fresh() {
    two_workers_make_the_tables_of_one_process_and_a_third_finds_them_fresh(Kind::Azure);
}

/// Two plain runs (no leases) racing to publish every key both succeed, and every
/// machine reads the same tables: of each key's two writers, one won.
fn two_runs_racing_to_publish_every_key_both_succeed_with_one_result(kind: Kind) {
    let Some(cloud) = Cloud::start(kind) else {
        return;
    };
    cloud.bucket("race");
    assert!(cloud.refuses_conflicting_writes("race"));
    let d = tempfile::tempdir().unwrap();
    let exp = scripted();
    let url = &cloud.url("race", "p");
    let outs = common::run_together((1..=2).map(|i| {
        let mut c = cloud.otb(&d.path().join(format!("m{i}")));
        c.args(["--store", url, "run"]).arg(&exp);
        c
    }));
    // Without leases both compute (nearly) everything; each key is published once.
    assert!(outs.iter().all(|(_, e)| !common::ran_nodes(e).is_empty()));
    let t1 = table2(cloud.otb(&d.path().join("m1")), url, &exp);
    let t2 = table2(cloud.otb(&d.path().join("m2")), url, &exp);
    let t3 = table2(cloud.otb(&d.path().join("m3")), url, &exp);
    assert_eq!(t1, t2);
    assert_eq!(t1, t3);
    assert!(!t1.is_empty());
}

#[test]
fn two_runs_racing_on_s3_to_publish_every_key_both_succeed_with_one_result() {
    two_runs_racing_to_publish_every_key_both_succeed_with_one_result(Kind::S3);
}

#[test]
fn two_runs_racing_on_azure_to_publish_every_key_both_succeed_with_one_result() {
    two_runs_racing_to_publish_every_key_both_succeed_with_one_result(Kind::Azure);
}

#[test]
fn a_missing_bucket_is_one_error_line_before_anything_is_written() {
    let Some(s3) = Cloud::s3() else { return };
    let d = tempfile::tempdir().unwrap();
    let mirror = d.path().join("mirror");
    let out = s3
        .otb(&mirror)
        .args(["--store", "s3://no-such-bucket/p", "run"])
        .arg(scripted())
        .output()
        .unwrap();
    let line = one_error_line(&out);
    assert!(
        line.contains("NoSuchBucket") || line.contains("bucket"),
        "{line}"
    );
    assert!(!mirror.exists(), "no mirror was made");
    let out = otb()
        .args(["--store", "ftp://b/p", "status"])
        .arg(scripted())
        .output()
        .unwrap();
    let line = one_error_line(&out);
    assert!(line.contains("s3://") && line.contains("az://"), "{line}");
}

/// Worker 1 holds a node's lease on the object store and is killed; worker 2 waits
/// for the lease to expire, takes the node over, and no node is computed twice.
fn a_killed_workers_lease_is_taken_over_by_the_other_worker(kind: Kind) {
    let Some(cloud) = Cloud::start(kind) else {
        return;
    };
    cloud.bucket("takeover");
    let d = tempfile::tempdir().unwrap();
    let exp = scripted();
    let url = &cloud.url("takeover", "p");
    // Worker 1 stops at its first publish (before the object store has it), holding
    // that node's lease on the object store.
    let m1 = d.path().join("m1");
    let mut first = cloud
        .otb(&m1)
        .args(["--store", url, "run"])
        .arg(&exp)
        .args(["--shard", "1/2"])
        .env("OTB_LEASE_S", "1")
        .env("OTB_FAULT_PAUSE", "publish")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let paused = || {
        std::fs::read_dir(&m1)
            .into_iter()
            .flatten()
            .flatten()
            .any(|e| e.path().join("tmp").join("PAUSED").exists())
    };
    while !paused() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "worker 1 never paused"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Another machine's `otb status` names the lease holder (the lease is remote).
    let status = stdout_ok(
        &cloud
            .otb(&d.path().join("m0"))
            .args(["--store", url, "status"])
            .arg(&exp)
            .output()
            .unwrap(),
    );
    assert!(
        status.contains("in progress: shard 1/2 on host "),
        "{status}"
    );
    let mut second = common::Watched::spawn(
        cloud
            .otb(&d.path().join("m2"))
            .args(["--store", url, "run"])
            .arg(&exp)
            .args(["--shard", "2/2"])
            .env("OTB_LEASE_S", "1"),
    );
    // Worker 1 dies only once worker 2 has found its lease held (a fixed pause
    // was not enough on a loaded machine: worker 2 came after the lease expired).
    second.wait_for("computes it (host ", Duration::from_secs(120));
    first.kill().unwrap();
    first.wait().unwrap();
    let (_, stderr) = second.finish();
    let computed = common::ran_nodes(&stderr);
    let mut once = computed.clone();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), computed.len(), "a node computed twice");
    let again = stdout_ok(
        &cloud
            .otb(&d.path().join("m3"))
            .args(["--store", url, "run", "--quiet"])
            .arg(&exp)
            .output()
            .unwrap(),
    );
    assert!(again.contains(", 0 ran"), "all fresh: {again}");
    assert_eq!(
        stages(&again),
        computed.len(),
        "worker 2 computed everything"
    );
}

#[test]
fn a_killed_workers_lease_on_s3_is_taken_over_by_the_other_worker() {
    a_killed_workers_lease_is_taken_over_by_the_other_worker(Kind::S3);
}

#[test]
fn a_killed_workers_lease_on_azure_is_taken_over_by_the_other_worker() {
    a_killed_workers_lease_is_taken_over_by_the_other_worker(Kind::Azure);
}

/// A canned chat completion: one call of `function_1` with no arguments.
const REPLY: &str = r#"{"id":"t","object":"chat.completion","model":"fake","choices":[{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"function_1","arguments":"{}"}}]},"finish_reason":"tool_calls"}],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}"#;

fn answer(mut stream: TcpStream, answered: std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    if common::read_request(&stream).is_some() && common::respond(&mut stream, "200 OK", REPLY) {
        answered.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// An experiment on the mini BFCL fixture with `agent`.
fn mini(dir: &Path, agent: &str) -> PathBuf {
    let exp = dir.join(format!("{}.toml", agent.replace(':', "-")));
    std::fs::write(
        &exp,
        format!(
            "name = \"calls\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\", \"names+params\"]\nmethods = [\"base\"]\n[models]\nagent = \"{agent}\"\n",
            common::fixture("mini_bfcl.jsonl").display()
        ),
    )
    .unwrap();
    exp
}

/// The call cache reaches the shared store: a run on one machine with a model server,
/// then a run on another machine (a fresh mirror, no server) of the same grid with
/// the model replayed from the cache only (`replay:fake`: other stage keys, the same
/// calls) makes the same Table 2 from the calls the first machine made; a third run
/// there sends nothing new. Lines of a segment that do not check are refused.
#[test]
fn calls_made_on_one_machine_replay_on_another() {
    let Some(s3) = Cloud::s3() else { return };
    s3.bucket("otb");
    let d = tempfile::tempdir().unwrap();
    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = common::spawn_server(answered.clone(), answer);
    let url = "s3://otb/calls";
    let (exp_a, exp_b) = (mini(d.path(), "openai:fake"), mini(d.path(), "replay:fake"));
    let (mirror_a, mirror_b) = (d.path().join("a"), d.path().join("b"));

    let out = s3
        .otb(&mirror_a)
        .args(["--store", url, "run"])
        .arg(&exp_a)
        .env("OTB_LLM_BASE_URL", &server)
        .env("OTB_LLM_API_KEY", "test")
        .output()
        .unwrap();
    stdout_ok(&out);
    let calls = answered.load(std::sync::atomic::Ordering::SeqCst);
    assert!(calls > 4, "{calls} calls");

    // A line that fails its checksum, in a segment of its own: refused, not merged.
    let bad = r#"{"v":2,"key":"0","sum":"0000000000000000"}"#;
    assert!(s3
        .put("/otb/calls/cache/llm/bad.jsonl", &format!("{bad}\n"))
        .starts_with("HTTP/1.1 200"));

    let run_b = || {
        s3.otb(&mirror_b)
            .args(["--store", url, "run"])
            .arg(&exp_b)
            .env_remove("OTB_LLM_BASE_URL")
            .output()
            .unwrap()
    };
    let out = run_b();
    let text = format!(
        "{}{}",
        stdout_ok(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains(&format!(
            "shared call cache: {calls} call(s) from 2 segment(s)"
        )),
        "{text}"
    );
    assert!(text.contains("1 line(s) refused"), "{text}");
    assert_eq!(
        table2(s3.otb(&mirror_b), url, &exp_b),
        table2(s3.otb(&mirror_a), url, &exp_a).replace("openai:fake", "replay:fake")
    );
    assert_eq!(answered.load(std::sync::atomic::Ordering::SeqCst), calls);

    // Again on the second machine: nothing new to fetch, nothing new to send.
    let out = run_b();
    let text = stdout_ok(&out);
    assert!(!text.contains("shared call cache"), "{text}");
}

/// Requests taken (each gets a ticket on arrival) and answered.
#[derive(Default)]
struct Gate {
    tickets: std::sync::atomic::AtomicUsize,
    answered: std::sync::atomic::AtomicUsize,
}

/// Answers the first `FIRST` requests to arrive and holds every later one
/// unanswered (a worker stuck in its calls until it is killed).
fn answer_first(mut stream: TcpStream, gate: std::sync::Arc<Gate>) {
    const FIRST: usize = 3;
    if common::read_request(&stream).is_none() {
        return;
    }
    if gate
        .tickets
        .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
        >= FIRST
    {
        std::thread::sleep(Duration::from_secs(120));
        return;
    }
    if common::respond(&mut stream, "200 OK", REPLY) {
        gate.answered
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A worker killed mid-run has already sent the calls it completed (it pushes every
/// `OTB_CACHE_PUSH_S` while it runs): another machine with a fresh mirror takes them
/// from the shared store and asks its server only for the rest.
#[test]
fn a_killed_workers_completed_calls_reach_the_shared_store() {
    let Some(s3) = Cloud::s3() else { return };
    s3.bucket("kill");
    let d = tempfile::tempdir().unwrap();
    let url = &s3.url("kill", "calls");
    let exp = mini(d.path(), "openai:fake");
    let stuck = std::sync::Arc::new(Gate::default());
    let stuck_server = common::spawn_server(stuck.clone(), answer_first);
    let mut first = s3
        .otb(&d.path().join("a"))
        .args(["--store", url, "run"])
        .arg(&exp)
        .env("OTB_LLM_BASE_URL", &stuck_server)
        .env("OTB_LLM_API_KEY", "test")
        .env("OTB_CACHE_PUSH_S", "0.2")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    while stuck.answered.load(std::sync::atomic::Ordering::SeqCst) < 3 {
        assert!(t.elapsed() < Duration::from_secs(60), "no calls answered");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Several push intervals, then the kill (the held calls are in flight).
    std::thread::sleep(Duration::from_secs(2));
    first.kill().unwrap();
    first.wait().unwrap();

    let answered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = common::spawn_server(answered.clone(), answer);
    let out = s3
        .otb(&d.path().join("b"))
        .args(["--store", url, "run"])
        .arg(&exp)
        .env("OTB_LLM_BASE_URL", &server)
        .env("OTB_LLM_API_KEY", "test")
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        stdout_ok(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("shared call cache: 3 call(s) from "),
        "{text}"
    );
    // Without the pushes during the run, the second machine would have asked again.
    let total = answered.load(std::sync::atomic::Ordering::SeqCst) + 3;
    let again = tempfile::tempdir().unwrap();
    let counted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let server = common::spawn_server(counted.clone(), answer);
    stdout_ok(
        &otb()
            .args(["--store"])
            .arg(again.path())
            .arg("run")
            .arg(&exp)
            .env("OTB_LLM_BASE_URL", &server)
            .env("OTB_LLM_API_KEY", "test")
            .output()
            .unwrap(),
    );
    assert_eq!(
        counted.load(std::sync::atomic::Ordering::SeqCst),
        total,
        "the grid's calls: the first machine's 3 and the second's"
    );
}
