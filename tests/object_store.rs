//! `--store s3://bucket/prefix`: workers on machines that share no filesystem (each
//! with its own local mirror) share one store on an S3-compatible server that the
//! test starts on 127.0.0.1 (the Python package `moto`, found via `OTB_PYTHON`;
//! the tests skip without it). Two workers make the tables of one local process and
//! compute each node once, a third finds everything fresh; two plain runs racing on
//! every key both succeed with the same tables; an unusable bucket is one line.

mod common;

use common::{one_error_line, otb, stdout_ok};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn scripted() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/scripted.toml")
}

/// A moto S3 server on a free port of 127.0.0.1, stopped when dropped.
struct S3 {
    child: Child,
    port: u16,
}

impl Drop for S3 {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl S3 {
    /// Start one, or `None` (skipped) when no Python with `moto[server]` is there.
    fn start() -> Option<S3> {
        let py = std::env::var("OTB_PYTHON").unwrap_or_else(|_| "python3".into());
        let ok = Command::new(&py)
            .args(["-c", "import moto.server"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            testkit::skip("s3", "no Python with moto[server] (set OTB_PYTHON)");
            return None;
        }
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(&py)
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
            .unwrap();
        let s3 = S3 { child, port };
        let until = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < until, "moto did not start");
            std::thread::sleep(Duration::from_millis(100));
        }
        Some(s3)
    }

    /// Create `bucket` with a plain HTTP PUT.
    fn bucket(&self, bucket: &str) {
        let mut c = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            c,
            "PUT /{bucket} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )
        .unwrap();
        let mut answer = String::new();
        c.read_to_string(&mut answer).unwrap();
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    }

    /// `otb` talking to this server, with its own local mirror under `mirror`.
    fn otb(&self, mirror: &Path) -> Command {
        let mut c = otb();
        for (k, _) in std::env::vars_os() {
            if k.to_string_lossy().starts_with("AWS_") {
                c.env_remove(k);
            }
        }
        c.env("AWS_ACCESS_KEY_ID", "test")
            .env("AWS_SECRET_ACCESS_KEY", "test")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ENDPOINT", format!("http://127.0.0.1:{}", self.port))
            .env("AWS_ALLOW_HTTP", "true")
            .env("OTB_STORE_CACHE", mirror)
            .env("OTB_HEARTBEAT_S", "0");
        c
    }
}

/// Table 2 of the store `store` (a directory, or a URL with `cmd` set up for it).
fn table2(mut cmd: Command, store: &str, exp: &Path) -> String {
    stdout_ok(
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
    )
    .lines()
    .filter(|l| l.contains(",run,"))
    .collect::<Vec<_>>()
    .join("\n")
}

/// The nodes a run's stderr says it computed (`  ran NODE in ...`).
fn ran(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("  ran "))
        .map(|l| l.split(" in ").next().unwrap_or(l).to_string())
        .collect()
}

fn finish(c: Child) -> (String, String) {
    let out: Output = c.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
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

#[test]
fn two_workers_on_s3_make_the_tables_of_one_process_and_a_third_finds_them_fresh() {
    let Some(s3) = S3::start() else { return };
    s3.bucket("otb");
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

    let url = "s3://otb/runs/a";
    let children: Vec<Child> = (1..=2)
        .map(|i| {
            s3.otb(&d.path().join(format!("mirror{i}")))
                .args(["--store", url, "run"])
                .arg(&exp)
                .args(["--shard", &format!("{i}/2")])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let mut computed = Vec::new();
    for c in children {
        let (stdout, stderr) = finish(c);
        assert!(stdout.contains("[shard "), "{stdout}");
        let mine = ran(&stderr);
        assert!(!mine.is_empty(), "each worker computes its share: {stderr}");
        computed.extend(mine);
    }
    let mut once = computed.clone();
    once.sort();
    once.dedup();
    assert_eq!(once.len(), computed.len(), "a node computed twice");
    assert_eq!(computed.len(), total, "every node computed once");

    // A third machine (a fresh mirror) finds everything on the remote.
    let third = d.path().join("mirror3");
    assert_eq!(
        table2(s3.otb(&third), url, &exp),
        table2(otb(), &one_store, &exp)
    );
    let again = stdout_ok(
        &s3.otb(&third)
            .args(["--store", url, "run", "--quiet"])
            .arg(&exp)
            .output()
            .unwrap(),
    );
    assert!(again.contains(&format!("{total} stages, 0 ran")), "{again}");
}

#[test]
fn two_runs_racing_to_publish_every_key_both_succeed_with_one_result() {
    let Some(s3) = S3::start() else { return };
    s3.bucket("race");
    let d = tempfile::tempdir().unwrap();
    let exp = scripted();
    let url = "s3://race/p";
    let children: Vec<Child> = (1..=2)
        .map(|i| {
            s3.otb(&d.path().join(format!("m{i}")))
                .args(["--store", url, "run"])
                .arg(&exp)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<(String, String)> = children.into_iter().map(finish).collect();
    // Without leases both compute (nearly) everything; each key is published once.
    assert!(outs.iter().all(|(_, e)| !ran(e).is_empty()));
    let t1 = table2(s3.otb(&d.path().join("m1")), url, &exp);
    let t2 = table2(s3.otb(&d.path().join("m2")), url, &exp);
    let t3 = table2(s3.otb(&d.path().join("m3")), url, &exp);
    assert_eq!(t1, t2);
    assert_eq!(t1, t3);
    assert!(!t1.is_empty());
}

#[test]
fn a_missing_bucket_is_one_error_line_before_anything_is_written() {
    let Some(s3) = S3::start() else { return };
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
        .args(["--store", "gs://b/p", "status"])
        .arg(scripted())
        .output()
        .unwrap();
    assert!(one_error_line(&out).contains("s3://"));
}
