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
fn table2(cmd: Command, store: &str, exp: &Path) -> String {
    common::run_rows(&table_csv(cmd, store, "table2", exp))
}

/// `otb table TABLE` of `exp` on the store `store` as CSV (`cmd` set up for it).
fn table_csv(mut cmd: Command, store: &str, table: &str, exp: &Path) -> String {
    let csv = ["table", table, "--format", "csv", "--experiment"];
    stdout_ok(
        &cmd.args(["--store", store])
            .args(csv)
            .arg(exp)
            .output()
            .unwrap(),
    )
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

/// Two tests of `scenario`: on S3 (named `s3`) and on Azure (named `azure`).
macro_rules! on_s3_and_azure {
    ($scenario:ident: $s3:ident, $azure:ident) => {
        #[test]
        fn $s3() {
            $scenario(Kind::S3);
        }

        #[test]
        fn $azure() {
            $scenario(Kind::Azure);
        }
    };
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

on_s3_and_azure!(
    two_workers_make_the_tables_of_one_process_and_a_third_finds_them_fresh:
    two_workers_on_s3_make_the_tables_of_one_process_and_a_third_finds_them_fresh,
    two_workers_on_azure_make_the_tables_of_one_process_and_a_third_finds_them_fresh
);

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

on_s3_and_azure!(
    two_runs_racing_to_publish_every_key_both_succeed_with_one_result:
    two_runs_racing_on_s3_to_publish_every_key_both_succeed_with_one_result,
    two_runs_racing_on_azure_to_publish_every_key_both_succeed_with_one_result
);

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
    let mut first = common::paused_at_publish(
        cloud
            .otb(&m1)
            .args(["--store", url, "run"])
            .arg(&exp)
            .args(["--shard", "1/2"]),
    );
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

on_s3_and_azure!(
    a_killed_workers_lease_is_taken_over_by_the_other_worker:
    a_killed_workers_lease_on_s3_is_taken_over_by_the_other_worker,
    a_killed_workers_lease_on_azure_is_taken_over_by_the_other_worker
);

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

/// The grid of the chaos tests: the scripted models on two settings and four
/// methods (8 chains, one per worker; 2 rounds), small enough for an object store
/// server in Python under 8 debug-build workers on two cores.
fn chaos_grid(dir: &Path) -> PathBuf {
    let exp = dir.join("chaos.toml");
    std::fs::write(
        &exp,
        "name = \"chaos\"\n[bfcl]\nsettings = [\"names\", \"names+params\"]\nmethods = [\"gold\", \"base\", \"toolobserver\", \"easytool\"]\nbackend = \"simulated\"\nrounds = 2\n[models]\nagent = \"scripted:schema\"\neditor = \"scripted:errors\"\n",
    )
    .unwrap();
    exp
}

/// The tables a chaos run must reproduce: Table 2's rows of this run, Table 5 and
/// the token table (CSV).
fn chaos_tables(mut cmd: impl FnMut() -> Command, store: &str, exp: &Path) -> String {
    ["table2", "table5", "tokens"]
        .iter()
        .map(|t| {
            let csv = table_csv(cmd(), store, t, exp);
            if *t == "table2" {
                common::run_rows(&csv)
            } else {
                csv
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A takeover line (`  taking over NODE from shard I/N (host H, pid P): its lease
/// expired`): the node and the dead holder's pid.
fn takeover(line: &str) -> Option<(String, u32)> {
    let rest = line.trim().strip_prefix("taking over ")?;
    let (node, holder) = rest.split_once(" from shard ")?;
    let pid = holder
        .split("pid ")
        .nth(1)?
        .split(')')
        .next()?
        .parse()
        .ok()?;
    Some((node.to_string(), pid))
}

/// 8 workers (`--shard i/8`) of the chaos grid on one store (`store`: a `file://`
/// URL, or the S3 server's), two of them SIGKILLed at moments drawn from a seed
/// (`OTB_CHAOS_SEED`, default 59), the rest left to finish (taking the killed
/// workers' nodes over once their leases expire, after `lease_s`). The store then
/// holds the tables of one process, and every node was computed once, but for the
/// killed workers' open leases: that work is done again by the worker that takes
/// the lease over (the duplicate work, counted and printed). `otb_for(mirror)` is
/// `otb` set up for the store with that local mirror; `leases_dir`, where the store
/// keeps its leases as files (`file://`), lets the test read the leases a killed
/// worker left and check each takeover against them.
fn eight_workers_two_killed(
    label: &str,
    store: &str,
    otb_for: &dyn Fn(&Path) -> Command,
    lease_s: u32,
    leases_dir: Option<&Path>,
    d: &Path,
) {
    let exp = chaos_grid(d);
    let one = d.join("one");
    let one_store = one.to_string_lossy().into_owned();
    let total = stages(&stdout_ok(
        &otb()
            .args(["--store", &one_store, "run", "--quiet"])
            .arg(&exp)
            .output()
            .unwrap(),
    ));
    let expected = chaos_tables(otb, &one_store, &exp);

    let seed: u64 = std::env::var("OTB_CHAOS_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(59);
    let mut rng = datasets::rng::SplitMix64::new(seed);
    let first = rng.below(8) + 1;
    let second = (first + rng.below(7)) % 8 + 1;
    // The moments, by progress (so they fall inside the run on any machine): once
    // the workers together have computed k nodes, k drawn from 1 to 2/3 of the grid.
    let mut kills = [first, second].map(|w| (1 + rng.below(total * 2 / 3), w));
    kills.sort();

    let started = Instant::now();
    let mut workers: Vec<(Child, PathBuf)> = (1..=8)
        .map(|i| {
            let log = d.join(format!("worker{i}.log"));
            let child = otb_for(&d.join(format!("mirror{i}")))
                .args(["--store", store, "run"])
                .arg(&exp)
                .args(["--shard", &format!("{i}/8")])
                .env("OTB_LEASE_S", lease_s.to_string())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(&log).unwrap())
                .spawn()
                .unwrap();
            (child, log)
        })
        .collect();
    let ran_so_far = |workers: &[(Child, PathBuf)]| {
        workers
            .iter()
            .map(|(_, log)| {
                common::ran_nodes(&std::fs::read_to_string(log).unwrap_or_default()).len()
            })
            .sum::<usize>()
    };
    let mut killed = Vec::new();
    let mut open_leases = Vec::new();
    for (k, w) in kills {
        while ran_so_far(&workers) < k {
            assert!(started.elapsed() < Duration::from_secs(300), "no progress");
            std::thread::sleep(Duration::from_millis(5));
        }
        let at = started.elapsed();
        let child = &mut workers[w - 1].0;
        let ended_before = child.try_wait().unwrap().is_some();
        assert!(
            !ended_before,
            "worker {w} ended before its kill after {k} nodes"
        );
        child.kill().unwrap();
        child.wait().unwrap();
        killed.push((w, child.id(), at, k));
        // The leases it left (a file:// store's board is a folder), read before they
        // expire.
        for e in leases_dir
            .map(std::fs::read_dir)
            .into_iter()
            .flatten()
            .flatten()
        {
            let lease: serde_json::Value = std::fs::read(e.unwrap().path())
                .ok()
                .and_then(|b| serde_json::from_slice(&b).ok())
                .unwrap_or_default();
            if lease["pid"].as_u64() == Some(u64::from(child.id())) {
                open_leases.push(lease["node"].as_str().unwrap_or_default().to_string());
            }
        }
    }
    let mut computed = Vec::new();
    let mut taken_over = Vec::new();
    // Every survivor ends (a lease no one can take over would keep them waiting).
    let deadline = Instant::now() + Duration::from_secs(300);
    let mut statuses = Vec::new();
    for i in 0..workers.len() {
        let status = loop {
            if let Some(status) = workers[i].0.try_wait().unwrap() {
                break status;
            }
            if Instant::now() > deadline {
                for (c, _) in workers.iter_mut() {
                    let _ = c.kill();
                }
                panic!(
                    "worker {} still waiting after 300 s: {}",
                    i + 1,
                    std::fs::read_to_string(&workers[i].1).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        statuses.push(status);
    }
    for (i, ((_, log), status)) in workers.iter().zip(statuses).enumerate() {
        let text = std::fs::read_to_string(log).unwrap();
        let victim = killed.iter().any(|(w, _, _, _)| *w == i + 1);
        assert!(victim || status.success(), "worker {}: {text}", i + 1);
        computed.extend(common::ran_nodes(&text));
        taken_over.extend(text.lines().filter_map(takeover));
    }
    let wall = started.elapsed();

    // Computed once: no node's computation was published twice, and the only work
    // done again is a killed worker's, under a lease that expired.
    common::assert_once(&computed);
    let dead: Vec<u32> = killed.iter().map(|(_, pid, _, _)| *pid).collect();
    for (node, pid) in &taken_over {
        assert!(
            dead.contains(pid),
            "{node} was taken over from a live worker (pid {pid}): two workers computed it"
        );
        assert!(
            computed.contains(node),
            "{node} taken over but not computed"
        );
    }
    // A killed worker may have published a node and died before its line.
    let unreported = total - computed.len();
    assert!(
        unreported <= killed.len(),
        "{unreported} nodes computed by no one's log"
    );
    if leases_dir.is_some() {
        // Each open lease of a killed worker was taken over, unless its node had
        // been published before the kill (then it is reused, not computed again).
        let mut taken: Vec<&String> = taken_over.iter().map(|(n, _)| n).collect();
        taken.sort();
        for node in &taken {
            assert!(
                open_leases.contains(node),
                "{node} taken over without a lease left"
            );
        }
        assert!(taken.len() <= open_leases.len());
    }

    // The tables of one process, and nothing left to compute (a fresh mirror).
    let fresh = d.join("mirror-check");
    assert_eq!(chaos_tables(|| otb_for(&fresh), store, &exp), expected);
    let again = stdout_ok(
        &otb_for(&fresh)
            .args(["--store", store, "run", "--quiet"])
            .arg(&exp)
            .output()
            .unwrap(),
    );
    assert!(again.contains(&format!("{total} stages, 0 ran")), "{again}");
    let kills: Vec<String> = killed
        .iter()
        .map(|(w, _, at, k)| format!("shard {w}/8 after {k} nodes ({:.1} s)", at.as_secs_f64()))
        .collect();
    println!(
        "chaos ({label}, seed {seed}, OTB_LEASE_S={lease_s}): {total} nodes, 8 workers, killed {}; all ended in {:.1} s; {} computations published (each node once; {unreported} published by a killed worker before its line); duplicate work: {} node(s) taken over from the killed workers' open leases{}",
        kills.join(" and "),
        wall.as_secs_f64(),
        computed.len(),
        taken_over.len(),
        if leases_dir.is_some() {
            format!(" ({} lease(s) left open)", open_leases.len())
        } else {
            String::new()
        }
    );
}

/// On one `file://` store (each worker with its own mirror).
#[test]
fn eight_workers_on_a_file_store_two_sigkilled_make_the_tables_of_one_process() {
    let d = tempfile::tempdir().unwrap();
    let shared = d.path().join("shared");
    let url = format!("file://{}", shared.display());
    let otb_for = |mirror: &Path| {
        let mut c = otb();
        c.env("OTB_STORE_CACHE", mirror).env("OTB_HEARTBEAT_S", "0");
        c
    };
    let leases = shared.join("cache").join("leases");
    eight_workers_two_killed("file://", &url, &otb_for, 3, Some(&leases), d.path());
}

/// On the S3 test server. The leases are longer: a heartbeat that the one Python
/// server answers late under 8 workers' polling must not make a live worker's
/// lease look expired.
#[test]
fn eight_workers_on_s3_two_sigkilled_make_the_tables_of_one_process() {
    let Some(s3) = Cloud::s3() else { return };
    s3.bucket("chaos");
    let d = tempfile::tempdir().unwrap();
    let url = s3.url("chaos", "p");
    let otb_for = |mirror: &Path| s3.otb(mirror);
    eight_workers_two_killed("S3", &url, &otb_for, 15, None, d.path());
}
