//! A documentation method written as an external program (`docs/methods.md`): any
//! language, one process per item (a BFCL instance, or a chess or search tool set's
//! shared documentation row), speaking JSON lines on its stdin and stdout.
//!
//! otb writes one `task` message; the method then sends requests, each answered by
//! one reply line: `ask` (a model request in the editor's role, through
//! [`Work::ask_all_with_system`]: cached, recorded in `doc_calls`, replayed on a
//! rerun), `call_tool` (a tool executed by the environment, [`Work::execute`]: stored
//! in `tool_runs`) and `play` (the cell's agent with proposed descriptions on
//! *training* items, through the environment's [`TrainingPlay`], which holds the
//! training split only -- the rows of the stage's training-only input
//! (`chess-train-positions`, `search-train-questions`; the full set is not among
//! its inputs): its trajectories and scores back, its agent turns recorded in
//! `doc_calls`; an `error` of class `unsupported` where the environment has none,
//! BFCL); and finally one `docs` message (a description per tool, optional
//! demonstrations), which otb acknowledges with `done`. The docs are then scored by
//! the same explore + evaluate as every other method.
//!
//! Everything a method does is bounded: one line's size, the whole task's wall time,
//! its requests and its tokens. A method that breaks the protocol (a line over the
//! limit, not JSON, an unknown message or tool, past a budget, silent past its wall
//! time, exiting before its docs or with a non-zero status) fails the stage with one
//! line naming the method, the item and the message: the user's error, nothing
//! published. Its stderr (the last [`STDERR_TAIL`] bytes) is kept under the store's
//! `cache/methods/` folder, and the error line says where. A method leads a process
//! group of its own, killed whole whenever otb is done with it (its docs, a failure,
//! otb's own end), so nothing it started outlives it.

use super::{set_description, tool_description, tool_name, tools_of, Phase, Produced, Work};
use crate::models::{Agent, AgentJob, AgentTurn, CallFailure, CallUsage, Conversation, MultiTurn};
use pipeline::StageError;
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The stage name (every external method's; node names carry the method's name).
pub const STAGE: &str = "external";
/// The stage version.
/// 2: `play` runs the cell's agent on training items (chess); the agent, its system
/// prompt, the training play's key and `max_plays` are in the key.
/// 3: the stage reads the training split alone (`chess-train-positions`,
/// `search-train-questions`, its input `train_positions` or `train_questions`) in
/// place of the full positions or questions: no test item is among its inputs, and
/// `call_tool` and `play` read their items from that node's rows.
pub const VERSION: u32 = 3;
/// The protocol version otb speaks (the `protocol` field of the `task` message).
pub const PROTOCOL: u32 = 1;
/// How many bytes of a method's stderr are kept (the last ones).
pub const STDERR_TAIL: usize = 64 << 10;
/// The largest file `files` may list (each is hashed into the stage key).
pub const MAX_FILE_BYTES: u64 = 16 << 20;

/// A method's budget per item (one process): its requests, its tokens, its time and
/// the size of one message.
#[derive(Debug, Clone, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExternalBudget {
    /// Requests (`ask`, `call_tool`, `play`) per item.
    pub max_calls: u64,
    /// Prompt + completion tokens of its `ask` requests per item.
    pub max_tokens: u64,
    /// Wall time of one item's process, in seconds, from start to exit.
    pub wall_s: u64,
    /// The longest line it may write, in bytes (newline excluded).
    pub max_line_bytes: usize,
    /// `play` requests per item (each plays at most [`MAX_PLAY_ITEMS`] training
    /// items); they count toward `max_calls` too.
    pub max_plays: u64,
}

impl Default for ExternalBudget {
    fn default() -> Self {
        ExternalBudget {
            max_calls: 1000,
            max_tokens: 2_000_000,
            wall_s: 600,
            max_line_bytes: 1 << 20,
            max_plays: 4,
        }
    }
}

/// `[methods.<name>]` as written in the experiment file.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawExternal {
    command: Vec<String>,
    files: Option<Vec<String>>,
    params: Option<Value>,
    max_calls: Option<u64>,
    max_tokens: Option<u64>,
    wall_s: Option<u64>,
    max_line_bytes: Option<usize>,
    max_plays: Option<u64>,
}

/// An external method, checked: everything but `dir` is its stage key.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ExternalMethod {
    /// Its name (`mymethod` of `ext:mymethod`).
    pub name: String,
    /// The program and its arguments, run in the experiment file's folder.
    pub command: Vec<String>,
    /// Its files (the program's sources): the sha256 of each by its path as the
    /// experiment file writes it. A changed file reruns its chain.
    pub files: std::collections::BTreeMap<String, String>,
    /// Passed through to the method in the `task` message.
    pub params: Value,
    /// Its budget per item.
    pub budget: ExternalBudget,
    /// The folder the command runs in (the experiment file's); not in the key, so a
    /// moved experiment folder reuses its entries.
    #[serde(skip)]
    pub dir: PathBuf,
}

impl ExternalMethod {
    /// Check `[methods.<name>]`: `resolve` makes a path relative to the experiment
    /// file's folder `dir`. One line on error.
    pub fn from_raw(
        name: &str,
        raw: RawExternal,
        dir: &Path,
        resolve: &dyn Fn(&str) -> PathBuf,
    ) -> Result<ExternalMethod, String> {
        let at = format!("methods.{name}");
        if !crate::at::valid_external_name(name) {
            return Err(format!(
                "{at}: a method's name is 1 to 40 lowercase letters, digits or `_`, starting with a letter"
            ));
        }
        if raw.command.is_empty() || raw.command[0].trim().is_empty() {
            return Err(format!(
                "{at}.command is empty (e.g. command = [\"python3\", \"{name}.py\"])"
            ));
        }
        let mut files = std::collections::BTreeMap::new();
        for f in raw.files.unwrap_or_default() {
            let p = resolve(&f);
            let bytes = datasets::files::read(&p, MAX_FILE_BYTES)
                .map_err(|e| format!("{at}.files: cannot read {}: {e}", p.display()))?;
            files.insert(f, pipeline::digest::Digest::of_bytes(&bytes).0);
        }
        let d = ExternalBudget::default();
        let budget = ExternalBudget {
            max_calls: raw.max_calls.unwrap_or(d.max_calls),
            max_tokens: raw.max_tokens.unwrap_or(d.max_tokens),
            wall_s: raw.wall_s.unwrap_or(d.wall_s),
            max_line_bytes: raw.max_line_bytes.unwrap_or(d.max_line_bytes),
            max_plays: raw.max_plays.unwrap_or(d.max_plays),
        };
        if budget.wall_s == 0 || budget.max_line_bytes < 1024 {
            return Err(format!(
                "{at}: wall_s must be at least 1 and max_line_bytes at least 1024"
            ));
        }
        let params = raw.params.unwrap_or_else(|| json!({}));
        if !params.is_object() {
            return Err(format!("{at}.params must be a table"));
        }
        Ok(ExternalMethod {
            name: name.to_string(),
            command: raw.command,
            files,
            params,
            budget,
            // `exp.toml`'s folder is the empty path: the current directory.
            dir: if dir.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                dir.to_path_buf()
            },
        })
    }

    /// `ext:<name>`, as method lists and error lines write it.
    pub fn label(&self) -> String {
        format!("{}{}", crate::at::EXTERNAL_PREFIX, self.name)
    }
}

pub use crate::env::{PlayJob, Played, TrainingPlay, MAX_PLAY_ITEMS, MAX_TRAJECTORY_BYTES};

/// The cell's agent, every turn it takes kept (its usage and failure) for the
/// method's `doc_calls`.
struct Recording<'a> {
    agent: &'a dyn MultiTurn,
    turns: Mutex<Vec<(CallUsage, Option<CallFailure>)>>,
}

impl Recording<'_> {
    fn keep(&self, t: &AgentTurn) {
        self.turns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((t.usage.clone(), t.error.clone()));
    }
}

impl Agent for Recording<'_> {
    fn act(&self, job: &AgentJob<'_>) -> AgentTurn {
        let t = self.agent.act(job);
        self.keep(&t);
        t
    }
}

impl MultiTurn for Recording<'_> {
    fn converse(&self, conv: &Conversation<'_>) -> AgentTurn {
        let t = self.agent.converse(conv);
        self.keep(&t);
        t
    }
}

/// Where an item runs: what the `task` message says besides the tools.
pub struct TaskCx<'a> {
    /// The environment's table (`bfcl`).
    pub environment: &'a str,
    /// The setting or tool set.
    pub setting: &'a str,
    /// The seed of the cell.
    pub seed: u64,
    /// The editor model's spec (what `ask` goes to).
    pub editor: &'a str,
    /// Where its stderr is kept: `<dir>/<item>.stderr`.
    pub log_dir: &'a Path,
    /// The environment's training play (`play`); `None` where it has none.
    pub player: Option<&'a dyn TrainingPlay>,
    /// The cell's agent, which `play` runs.
    pub agent: Option<&'a dyn MultiTurn>,
}

/// One line from the method's stdout, as the reader thread saw it.
enum Line {
    /// A whole line (without its newline), valid UTF-8.
    Text(String),
    /// A line longer than the limit (reading stopped there).
    TooLong,
    /// Bytes that are not UTF-8.
    NotUtf8,
    /// The end of its stdout (it closed it or exited).
    Eof,
}

/// Read lines of at most `max` bytes from `r` into `tx`; stops at the first line
/// over the limit, at the end (an unterminated last line is dropped: every message
/// ends with `\n`), or when nobody listens any more.
fn read_lines(r: impl Read, max: usize, tx: SyncSender<Line>) {
    let mut r = BufReader::with_capacity(64 << 10, r);
    let mut line: Vec<u8> = Vec::new();
    loop {
        let (done, used) = match r.fill_buf() {
            Ok([]) => {
                let _ = tx.send(Line::Eof);
                return;
            }
            Ok(buf) => match buf.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    line.extend_from_slice(&buf[..i]);
                    (true, i + 1)
                }
                None => {
                    line.extend_from_slice(buf);
                    (false, buf.len())
                }
            },
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => {
                let _ = tx.send(Line::Eof);
                return;
            }
        };
        r.consume(used);
        if line.len() > max {
            let _ = tx.send(Line::TooLong);
            return;
        }
        if done {
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let msg = match String::from_utf8(std::mem::take(&mut line)) {
                Ok(s) => Line::Text(s),
                Err(_) => Line::NotUtf8,
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
    }
}

/// The last [`STDERR_TAIL`] bytes of a stream.
fn keep_tail(mut r: impl Read, tail: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 8192];
    loop {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                let mut t = tail
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
                t.extend_from_slice(&buf[..n]);
                if t.len() > STDERR_TAIL {
                    let cut = t.len() - STDERR_TAIL;
                    t.drain(..cut);
                }
            }
        }
    }
}

/// How long otb waits for the lines a method wrote before it exited, once it has
/// exited while something it started still holds its stdout open.
const EXIT_GRACE: Duration = Duration::from_millis(500);

/// How often [`Proc::next`] looks whether the method has exited while it waits.
const EXIT_POLL: Duration = Duration::from_millis(100);

/// The process groups of the methods running now (0: a free slot), which a signal
/// that ends otb kills first ([`on_ending_signal`]). A method that finds no free
/// slot is still killed with its group on every other end.
static LIVE_GROUPS: [std::sync::atomic::AtomicI32; 64] =
    [const { std::sync::atomic::AtomicI32::new(0) }; 64];

/// SIGKILL to the process group `pgid` (a method and whatever it started that stayed
/// in its group); nothing for an id that cannot be a method's group.
fn kill_group(pgid: i32) {
    // `kill(-1)` and `kill(0)` would signal every process, or otb's own group.
    if pgid > 1 {
        // SAFETY: kill(2) takes no pointers; a group that is gone is ESRCH, ignored.
        unsafe {
            libc::kill(-pgid, libc::SIGKILL);
        }
    }
}

/// Note `pgid` as a running method's group (or, with `live == false`, no more).
fn track_group(pgid: i32, live: bool) {
    use std::sync::atomic::Ordering::SeqCst;
    let (from, to) = if live { (0, pgid) } else { (pgid, 0) };
    for slot in &LIVE_GROUPS {
        if slot.compare_exchange(from, to, SeqCst, SeqCst).is_ok() {
            return;
        }
    }
}

/// SIGINT, SIGTERM or SIGHUP ending otb while methods run: each method's group is
/// killed (it is not in otb's, so a terminal's Ctrl-C does not reach it), then the
/// signal, whose default action `SA_RESETHAND` restored, ends otb as it would have.
/// Only async-signal-safe calls (atomic loads, kill, raise).
extern "C" fn on_ending_signal(sig: libc::c_int) {
    for slot in &LIVE_GROUPS {
        kill_group(slot.load(std::sync::atomic::Ordering::SeqCst));
    }
    // SAFETY: raise(2) is async-signal-safe; the signal is blocked until this handler
    // returns, then delivered with its default action.
    unsafe {
        libc::raise(sig);
    }
}

/// Install [`on_ending_signal`] for the signals that end otb by default (once; a
/// signal that otb or its caller handles or ignores is left as it is).
fn end_methods_with_otb() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            // SAFETY: sigaction(2) with zeroed (valid) structs; the handler only makes
            // async-signal-safe calls.
            unsafe {
                let mut old: libc::sigaction = std::mem::zeroed();
                if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                    || old.sa_sigaction != libc::SIG_DFL
                {
                    continue;
                }
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = on_ending_signal as extern "C" fn(libc::c_int) as usize;
                new.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
                libc::sigemptyset(&mut new.sa_mask);
                libc::sigaction(sig, &new, std::ptr::null_mut());
            }
        }
    });
}

/// A running method, the leader of a process group of its own: whatever it starts
/// (a subprocess, a wrapper's child) is in that group, and the whole group is killed
/// and the method reaped when this is dropped -- on every end: its docs, a broken
/// protocol, a budget, its wall time, otb's own error path.
struct Proc {
    child: Child,
    /// Its process group's id (its pid).
    pgid: i32,
    /// When otb saw that it had exited (its group may still hold its stdout).
    exited: Option<Instant>,
    /// Lines to write to its stdin (a thread writes them, so a method that does not
    /// read cannot block otb).
    to_method: Option<SyncSender<String>>,
    from_method: Receiver<Line>,
    stderr: Arc<Mutex<Vec<u8>>>,
    deadline: Instant,
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.to_method.take();
        // The group first, while the method (its leader, if still running) keeps the
        // group's id from being reused; a method that exited may have left children.
        kill_group(self.pgid);
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        track_group(self.pgid, false);
    }
}

fn write_lines(mut stdin: ChildStdin, rx: Receiver<String>) {
    for line in rx {
        if stdin.write_all(line.as_bytes()).is_err()
            || stdin.write_all(b"\n").is_err()
            || stdin.flush().is_err()
        {
            return;
        }
    }
}

impl Proc {
    /// Start `m` as the leader of a process group of its own. On Linux it is also
    /// killed when the otb thread that started it ends (otb killed outright).
    fn spawn(m: &ExternalMethod) -> Result<Proc, String> {
        use std::os::unix::process::CommandExt;
        end_methods_with_otb();
        let mut cmd = Command::new(&m.command[0]);
        cmd.args(&m.command[1..])
            .current_dir(&m.dir)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        #[cfg(target_os = "linux")]
        {
            // SAFETY: getpid(2) here; the closure runs between fork and exec and makes
            // only async-signal-safe calls (prctl, getppid) and allocates nothing.
            let otb = unsafe { libc::getpid() };
            unsafe {
                cmd.pre_exec(move || {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    // otb ended before the line above took effect.
                    if libc::getppid() != otb {
                        return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
                    }
                    Ok(())
                });
            }
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", m.command.join(" ")))?;
        let pgid = i32::try_from(child.id()).unwrap_or(0);
        track_group(pgid, true);
        let (stdin, stdout, stderr) =
            match (child.stdin.take(), child.stdout.take(), child.stderr.take()) {
                (Some(i), Some(o), Some(e)) => (i, o, e),
                _ => {
                    kill_group(pgid);
                    let _ = child.kill();
                    let _ = child.wait();
                    track_group(pgid, false);
                    return Err("its pipes could not be opened".into());
                }
            };
        let (to_tx, to_rx) = sync_channel::<String>(16);
        let (from_tx, from_rx) = sync_channel::<Line>(16);
        let tail = Arc::new(Mutex::new(Vec::new()));
        let max = m.budget.max_line_bytes;
        std::thread::spawn(move || write_lines(stdin, to_rx));
        std::thread::spawn(move || read_lines(stdout, max, from_tx));
        let t = tail.clone();
        std::thread::spawn(move || keep_tail(stderr, t));
        Ok(Proc {
            child,
            pgid,
            exited: None,
            to_method: Some(to_tx),
            from_method: from_rx,
            stderr: tail,
            deadline: Instant::now() + Duration::from_secs(m.budget.wall_s),
        })
    }

    /// Queue `msg` for its stdin; `false` when it did not take it before its
    /// deadline (a method that does not read what otb writes).
    fn send(&self, msg: &Value) -> bool {
        let Some(tx) = &self.to_method else {
            return false;
        };
        let mut line = msg.to_string();
        loop {
            match tx.try_send(line) {
                // Gone: it closed its stdin; its next line (or its end) tells.
                Ok(()) | Err(TrySendError::Disconnected(_)) => return true,
                Err(TrySendError::Full(back)) => {
                    if Instant::now() >= self.deadline {
                        return false;
                    }
                    line = back;
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        }
    }

    /// Its next line, or why there is none. A method that exited is at its end
    /// [`EXIT_GRACE`] later even where something it started still holds its stdout
    /// open (that group is then killed, its lines having been read).
    fn next(&mut self) -> Result<Line, String> {
        loop {
            let left = self.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err("timeout".into());
            }
            match self.from_method.recv_timeout(left.min(EXIT_POLL)) {
                Ok(l) => return Ok(l),
                Err(RecvTimeoutError::Disconnected) => return Ok(Line::Eof),
                Err(RecvTimeoutError::Timeout) => {}
            }
            if self.exited.is_none() && matches!(self.child.try_wait(), Ok(Some(_))) {
                self.exited = Some(Instant::now());
            }
            if self.exited.is_some_and(|t| t.elapsed() >= EXIT_GRACE) {
                kill_group(self.pgid);
                return Ok(Line::Eof);
            }
        }
    }

    /// Wait for it to exit until its deadline; its exit status, or `None` when it did
    /// not exit in time.
    fn wait(&mut self) -> Option<std::process::ExitStatus> {
        self.to_method.take();
        loop {
            match self.child.try_wait() {
                Ok(Some(s)) => return Some(s),
                Ok(None) if Instant::now() < self.deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => return None,
            }
        }
    }

    fn stderr_tail(&self) -> Vec<u8> {
        self.stderr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

/// A request's field as a string (empty when absent).
fn field<'v>(m: &'v Map<String, Value>, k: &str) -> &'v str {
    m.get(k).and_then(Value::as_str).unwrap_or("")
}

/// The item's name in a file name: anything but letters, digits, `-`, `_` and `.`
/// becomes `_`.
fn file_safe(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect()
}

/// Run the method `m` on one item (`w`'s instance and starting docs): its docs, or
/// the one-line error that fails the stage.
pub fn produce(
    w: &mut Work<'_>,
    m: &ExternalMethod,
    cx: &TaskCx<'_>,
) -> Result<Produced, StageError> {
    let item = w.instance.instance_id.clone();
    let who = format!("method {} on item {item}", m.label());
    let log = cx.log_dir.join(format!("{}.stderr", file_safe(&item)));
    let fail = |why: String, stderr: &[u8]| -> StageError {
        let kept = std::fs::create_dir_all(cx.log_dir)
            .and_then(|_| std::fs::write(&log, stderr))
            .is_ok();
        let where_ = if kept && !stderr.is_empty() {
            format!(" (its stderr: {})", log.display())
        } else {
            String::new()
        };
        StageError::user(STAGE, format!("{who}: {why}{where_}"))
    };
    let mut proc = Proc::spawn(m).map_err(|e| fail(e, &[]))?;
    let mut tools = tools_of(w.docs);
    let names: Vec<String> = tools.iter().map(|t| tool_name(t).to_string()).collect();
    let unread = |n: u64| {
        format!(
            "did not read otb's messages (at message #{n}) within its wall time ({} s); killed",
            m.budget.wall_s
        )
    };
    let training = match cx.player.filter(|_| cx.agent.is_some()) {
        Some(p) => Some(p.items().map_err(|e| {
            StageError::user(
                STAGE,
                format!("{who}: the training items cannot be read: {e}"),
            )
        })?),
        None => None,
    };
    let supports = if training.is_some() {
        json!(["ask", "call_tool", "play"])
    } else {
        json!(["ask", "call_tool"])
    };
    let mut task = json!({
        "type": "task",
        "protocol": PROTOCOL,
        "method": m.name,
        "environment": cx.environment,
        "setting": cx.setting,
        "item": item,
        "tools": tools,
        "budget": m.budget,
        "params": m.params,
        "seed": cx.seed,
        "editor": cx.editor,
        "supports": supports,
    });
    if let (Some(items), Some(t)) = (&training, task.as_object_mut()) {
        t.insert("training_items".into(), json!(items));
    }
    if !proc.send(&task) {
        return Err(fail(unread(0), &proc.stderr_tail()));
    }
    let (mut calls, mut tokens, mut n, mut plays) = (0u64, 0u64, 0u64, 0u64);
    let docs = loop {
        n += 1;
        let line = match proc.next() {
            Err(_) => {
                return Err(fail(
                    format!(
                        "no message #{n} within its wall time ({} s); killed",
                        m.budget.wall_s
                    ),
                    &proc.stderr_tail(),
                ))
            }
            Ok(Line::TooLong) => {
                return Err(fail(
                    format!(
                        "message #{n} is longer than max_line_bytes ({} bytes)",
                        m.budget.max_line_bytes
                    ),
                    &proc.stderr_tail(),
                ))
            }
            Ok(Line::NotUtf8) => {
                return Err(fail(
                    format!("message #{n} is not UTF-8"),
                    &proc.stderr_tail(),
                ))
            }
            Ok(Line::Eof) => {
                let status = proc.wait();
                let how = match status {
                    Some(s) => format!("exited ({s})"),
                    None => "closed its stdout".to_string(),
                };
                return Err(fail(
                    format!("{how} before sending its docs (at message #{n})"),
                    &proc.stderr_tail(),
                ));
            }
            Ok(Line::Text(t)) => t,
        };
        let msg = match serde_json::from_str::<Value>(&line) {
            Ok(Value::Object(o)) => o,
            _ => {
                return Err(fail(
                    format!(
                        "message #{n} is not a JSON object: {}",
                        datasets::quote::clip(&line)
                    ),
                    &proc.stderr_tail(),
                ))
            }
        };
        let kind = field(&msg, "type").to_string();
        if kind == "docs" {
            break msg;
        }
        if !matches!(kind.as_str(), "ask" | "call_tool" | "play") {
            return Err(fail(
                format!(
                    "message #{n} has unknown type {:?} (valid: ask, call_tool, play, docs)",
                    datasets::quote::clip(&kind)
                ),
                &proc.stderr_tail(),
            ));
        }
        let Some(id) = msg.get("id").filter(|i| i.is_u64()).cloned() else {
            return Err(fail(
                format!("message #{n} ({kind}) has no `id` (a non-negative integer)"),
                &proc.stderr_tail(),
            ));
        };
        calls += 1;
        if calls > m.budget.max_calls {
            return Err(fail(
                format!(
                    "message #{n} ({kind}) is past its budget of {} requests (max_calls)",
                    m.budget.max_calls
                ),
                &proc.stderr_tail(),
            ));
        }
        let reply = match kind.as_str() {
            "ask" => {
                if tokens >= m.budget.max_tokens {
                    return Err(fail(
                        format!(
                            "message #{n} (ask) is past its budget of {} tokens (max_tokens)",
                            m.budget.max_tokens
                        ),
                        &proc.stderr_tail(),
                    ));
                }
                let Some(prompt) = msg.get("prompt").and_then(Value::as_str) else {
                    return Err(fail(
                        format!("message #{n} (ask) has no string `prompt`"),
                        &proc.stderr_tail(),
                    ));
                };
                let phase = match field(&msg, "phase") {
                    "exploration" => Phase::Exploration,
                    _ => Phase::Editing,
                };
                let system = msg.get("system").and_then(Value::as_str);
                let attempt = msg.get("attempt").and_then(Value::as_u64).unwrap_or(0);
                let step = field(&msg, "step").to_string();
                let tool = field(&msg, "tool").to_string();
                let asked = w
                    .ask_all_with_system(system, &step, phase, &[(&tool, prompt)], attempt)
                    .pop();
                let row = asked.as_ref().and_then(|a| w.calls.get(a.call));
                let usage = row.map_or(json!({}), |r| {
                    json!({"prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens})
                });
                tokens += row.map_or(0, |r| (r.prompt_tokens + r.completion_tokens).max(0) as u64);
                match asked.and_then(|a| a.text) {
                    Some(text) => {
                        json!({"type": "result", "id": id, "text": text, "usage": usage})
                    }
                    None => {
                        let kind = row.and_then(|r| r.error_kind.clone()).unwrap_or_default();
                        json!({
                            "type": "error", "id": id, "class": "model",
                            "message": format!("the model call failed ({kind})"),
                            "usage": usage,
                        })
                    }
                }
            }
            "call_tool" => {
                let tool = field(&msg, "tool").to_string();
                if !names.contains(&tool) {
                    return Err(fail(
                        format!(
                            "message #{n} (call_tool) names unknown tool {:?} (this item's tools: {})",
                            datasets::quote::clip(&tool),
                            names.join(", ")
                        ),
                        &proc.stderr_tail(),
                    ));
                }
                let args = match msg.get("arguments") {
                    Some(Value::Object(a)) => a.clone(),
                    None => Map::new(),
                    Some(_) => {
                        return Err(fail(
                            format!("message #{n} (call_tool): `arguments` is not an object"),
                            &proc.stderr_tail(),
                        ))
                    }
                };
                let step = field(&msg, "step").to_string();
                let out = w.execute(&tool, &step, &args);
                json!({"type": "result", "id": id, "ok": out.ok, "output": out.text})
            }
            _ => match (cx.player, cx.agent, &training) {
                (Some(player), Some(agent), Some(items)) => {
                    plays += 1;
                    if plays > m.budget.max_plays {
                        return Err(fail(
                            format!(
                                "message #{n} (play) is past its budget of {} plays (max_plays)",
                                m.budget.max_plays
                            ),
                            &proc.stderr_tail(),
                        ));
                    }
                    match play(w, player, agent, items, &tools, &msg, id.clone()) {
                        Ok(reply) => reply,
                        Err(why) => {
                            return Err(fail(
                                format!("message #{n} (play) {why}"),
                                &proc.stderr_tail(),
                            ))
                        }
                    }
                }
                _ => json!({
                    "type": "error", "id": id, "class": "unsupported",
                    "message": format!("play is not supported in {}: {}", cx.environment, no_play(cx.environment)),
                }),
            },
        };
        if !proc.send(&reply) {
            return Err(fail(unread(n), &proc.stderr_tail()));
        }
    };
    // The final docs: a description per tool (only the tools it names change; a
    // description equal to the current one leaves the tool as it is), and optional
    // demonstrations.
    let descriptions = match docs.get("tools") {
        Some(Value::Object(d)) => d.clone(),
        None => Map::new(),
        Some(_) => {
            return Err(fail(
                format!("message #{n} (docs): `tools` is not an object of descriptions"),
                &proc.stderr_tail(),
            ))
        }
    };
    for (name, d) in &descriptions {
        let Some(d) = d.as_str() else {
            return Err(fail(
                format!("message #{n} (docs): the description of {name:?} is not a string"),
                &proc.stderr_tail(),
            ));
        };
        let Some(t) = tools.iter_mut().find(|t| tool_name(t) == name) else {
            return Err(fail(
                format!(
                    "message #{n} (docs) names unknown tool {:?} (this item's tools: {})",
                    datasets::quote::clip(name),
                    names.join(", ")
                ),
                &proc.stderr_tail(),
            ));
        };
        if tool_description(t) != d {
            set_description(t, d);
        }
    }
    let demos = match docs.get("demos") {
        None | Some(Value::Null) => Value::Null,
        Some(Value::Array(a)) if a.iter().all(is_demo) => Value::Array(a.clone()),
        Some(_) => {
            return Err(fail(
                format!(
                    "message #{n} (docs): `demos` is not a list of {{query, function, arguments}}"
                ),
                &proc.stderr_tail(),
            ))
        }
    };
    if !proc.send(&json!({"type": "done"})) {
        return Err(fail(unread(n), &proc.stderr_tail()));
    }
    let status = proc.wait();
    let stderr = proc.stderr_tail();
    match status {
        Some(s) if s.success() => {}
        Some(s) => return Err(fail(format!("exited with {s} after its docs"), &stderr)),
        None => {
            return Err(fail(
                format!(
                    "did not exit within its wall time ({} s) after its docs; killed",
                    m.budget.wall_s
                ),
                &stderr,
            ))
        }
    }
    if !stderr.is_empty() {
        // Kept for the person reading the run; never part of the docs.
        let _ = std::fs::create_dir_all(cx.log_dir).and_then(|_| std::fs::write(&log, &stderr));
    }
    Ok(Produced { tools, demos })
}

/// Why an environment answers `play` with `unsupported`.
fn no_play(environment: &str) -> &'static str {
    match environment {
        "bfcl" => "BFCL has no training split (every instance is a test instance)",
        _ => "this environment has no training play for methods yet",
    }
}

/// Carry out one `play` request `msg`: the proposed descriptions on the item's
/// `tools`, the agent on the training items it names (`items`, ids from
/// `training`) or on the first `count` of them (default 1); every agent turn
/// recorded in `w`. The reply, or why the request is the method's error.
fn play(
    w: &mut Work<'_>,
    player: &dyn TrainingPlay,
    agent: &dyn MultiTurn,
    training: &[String],
    tools: &[Value],
    msg: &Map<String, Value>,
    id: Value,
) -> Result<Value, String> {
    let mut proposed = tools.to_vec();
    match msg.get("tools") {
        None | Some(Value::Null) => {}
        Some(Value::Object(d)) => {
            for (name, desc) in d {
                let Some(desc) = desc.as_str() else {
                    return Err(format!("gives the description of {name:?} as a non-string"));
                };
                let Some(t) = proposed.iter_mut().find(|t| tool_name(t) == name) else {
                    return Err(format!(
                        "names unknown tool {:?}",
                        datasets::quote::clip(name)
                    ));
                };
                set_description(t, desc);
            }
        }
        Some(_) => return Err("`tools` is not an object of descriptions".into()),
    }
    let chosen: Vec<String> = match msg.get("items") {
        None | Some(Value::Null) => {
            let count = match msg.get("count") {
                None | Some(Value::Null) => 1,
                Some(c) => c.as_u64().ok_or("`count` is not a non-negative integer")? as usize,
            };
            if count > MAX_PLAY_ITEMS {
                return Err(format!(
                    "asks for {count} items (at most {MAX_PLAY_ITEMS} per play)"
                ));
            }
            training.iter().take(count).cloned().collect()
        }
        Some(Value::Array(a)) => {
            if a.len() > MAX_PLAY_ITEMS {
                return Err(format!(
                    "names {} items (at most {MAX_PLAY_ITEMS} per play)",
                    a.len()
                ));
            }
            let mut out = Vec::with_capacity(a.len());
            for i in a {
                // Only training items are played: anything else (a test item's id
                // it guessed too) is refused without saying what it is.
                match i.as_str().filter(|i| training.iter().any(|t| t == i)) {
                    Some(i) => out.push(i.to_string()),
                    None => {
                        return Err(format!(
                        "names {}, which is not a training item (see the task's training_items)",
                        datasets::quote::clip(&i.to_string())
                    ))
                    }
                }
            }
            out
        }
        Some(_) => return Err("`items` is not a list of training item ids".into()),
    };
    let step = field(msg, "step").to_string();
    let system = w.tb.agent_system.to_string();
    let seed = w.tb.seed;
    let mut played = Vec::new();
    let recording = Recording {
        agent,
        turns: Mutex::new(Vec::new()),
    };
    let mut failed = None;
    for item in &chosen {
        match player.play(&PlayJob {
            item,
            agent: &recording,
            system: &system,
            tools: &proposed,
            seed,
        }) {
            Ok(games) => played.extend(games.into_iter().map(|mut p| {
                p.trajectory = clip_bytes(&p.trajectory, MAX_TRAJECTORY_BYTES);
                p
            })),
            Err(e) => {
                failed = Some(format!("could not be played on {item}: {e}"));
                break;
            }
        }
    }
    // Every agent turn is the method's call, recorded as explore's are (a failed
    // play's turns too).
    let turns = recording
        .turns
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for (usage, error) in turns {
        w.record_agent(&step, &usage, error);
    }
    if let Some(why) = failed {
        return Err(why);
    }
    let scores: Vec<f64> = played.iter().filter_map(|p| p.score).collect();
    let mean = (!scores.is_empty()).then(|| scores.iter().sum::<f64>() / scores.len() as f64);
    Ok(json!({
        "type": "result", "id": id,
        "items": chosen,
        "trajectories": played,
        "score": mean,
    }))
}

/// `s` cut to at most `max` bytes at a character boundary, marked when cut.
fn clip_bytes(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}... [cut at {max} bytes]", &s[..end])
}

/// A demonstration as Play2Prompt writes them: `{query, function, arguments}`.
fn is_demo(d: &Value) -> bool {
    d.get("query").is_some_and(Value::is_string)
        && d.get("function").is_some_and(Value::is_string)
        && d.get("arguments").is_some_and(Value::is_object)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines_of(input: &[u8], max: usize) -> Vec<String> {
        let (tx, rx) = sync_channel(64);
        read_lines(input, max, tx);
        rx.try_iter()
            .map(|l| match l {
                Line::Text(t) => format!("text:{t}"),
                Line::TooLong => "too long".into(),
                Line::NotUtf8 => "not utf-8".into(),
                Line::Eof => "eof".into(),
            })
            .collect()
    }

    /// Lines are split at `\n` (a `\r` before it dropped), bounded (reading stops at
    /// the first line over the limit, however the bytes arrive) and checked as UTF-8.
    #[test]
    fn lines_are_bounded_and_checked() {
        assert_eq!(
            lines_of(b"{\"a\":1}\r\n\nb\n", 16),
            ["text:{\"a\":1}", "text:", "text:b", "eof"]
        );
        // A last line without its newline is no message.
        assert_eq!(lines_of(b"12345678\nrest", 8), ["text:12345678", "eof"]);
        assert_eq!(lines_of(b"123456789\nnever read\n", 8), ["too long"]);
        let endless = vec![b'x'; 1 << 20];
        assert_eq!(lines_of(&endless, 1024), ["too long"]);
        assert_eq!(
            lines_of(b"\xff\xfe\nok\n", 8),
            ["not utf-8", "text:ok", "eof"]
        );
    }

    fn raw(toml_text: &str) -> RawExternal {
        toml::from_str(toml_text).unwrap()
    }

    /// `[methods.<name>]` is checked: a name, a command, readable files (hashed),
    /// params as a table, sane budgets; defaults otherwise.
    #[test]
    fn method_tables_are_checked() {
        let dir = std::env::temp_dir().join(format!("otb-ext-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("m.py"), "print()\n").unwrap();
        let resolve = |p: &str| dir.join(p);
        let ok = ExternalMethod::from_raw(
            "mine",
            raw("command = [\"python3\", \"m.py\"]\nfiles = [\"m.py\"]\nparams = { k = 1 }"),
            &dir,
            &resolve,
        )
        .unwrap();
        assert_eq!(ok.label(), "ext:mine");
        assert_eq!(ok.budget, ExternalBudget::default());
        assert_eq!(
            ok.files["m.py"],
            pipeline::digest::Digest::of_bytes(b"print()\n").0
        );
        // The folder it runs in is not in its key.
        let key = serde_json::to_value(&ok).unwrap();
        assert!(key.get("dir").is_none(), "{key}");
        assert_eq!(key["params"], json!({"k": 1}));
        let err = |name: &str, text: &str| {
            ExternalMethod::from_raw(name, raw(text), &dir, &resolve).unwrap_err()
        };
        assert!(err("Mine", "command = [\"x\"]").contains("lowercase"));
        assert!(err("mine", "command = []").contains("methods.mine.command is empty"));
        assert!(err("mine", "command = [\"x\"]\nfiles = [\"absent.py\"]")
            .contains("methods.mine.files: cannot read"));
        assert!(err("mine", "command = [\"x\"]\nparams = 3").contains("params must be a table"));
        assert!(err("mine", "command = [\"x\"]\nwall_s = 0").contains("wall_s"));
        assert!(toml::from_str::<RawExternal>("command = [\"x\"]\nshell = true").is_err());
        // The empty folder of `exp.toml` is the current one.
        let here =
            ExternalMethod::from_raw("mine", raw("command = [\"x\"]"), Path::new(""), &resolve)
                .unwrap();
        assert_eq!(here.dir, PathBuf::from("."));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Training play with two training items; each play's trajectory opens with the
    /// first tool's description it was given and is far over the reply's bound.
    struct FakePlay;

    impl TrainingPlay for FakePlay {
        fn items(&self) -> Result<Vec<String>, String> {
            Ok(vec!["t0".into(), "t1".into()])
        }

        fn play(&self, job: &PlayJob<'_>) -> Result<Vec<Played>, String> {
            job.agent.act(&AgentJob {
                system: job.system,
                question: job.item,
                tools: job.tools,
                seed: job.seed,
            });
            Ok(vec![Played {
                item: job.item.into(),
                task: "play".into(),
                score: Some(1.0),
                outcome: "won".into(),
                trajectory: format!(
                    "{}{}",
                    tool_description(&job.tools[0]),
                    "é".repeat(MAX_TRAJECTORY_BYTES)
                ),
            }])
        }
    }

    /// `play` plays only training items (a test item's id, or anything else not in
    /// the training items, is refused), at most [`MAX_PLAY_ITEMS`] per request, with
    /// the proposed descriptions, and bounds each trajectory it sends back.
    #[test]
    fn play_is_training_items_only_and_bounded() {
        use crate::baselines::testing::{instance, toolbox, FnEditor, FnRunner};
        let ed = FnEditor::new(|_: &str| String::new());
        let runner = FnRunner::new(|_| crate::env::ToolOutput {
            ok: true,
            text: String::new(),
        });
        let tb = toolbox(&ed, &runner);
        let (inst, doc) = instance();
        let mut w = Work::new(&tb, "ext:test", &inst, &doc);
        let tools = tools_of(&doc);
        let training = FakePlay.items().unwrap();
        let agent = crate::models::scripted::agent("empty").unwrap();
        let agent = agent.as_ref();
        let req = |v: Value| v.as_object().unwrap().clone();
        let run = |w: &mut Work<'_>, v: Value| {
            play(w, &FakePlay, agent, &training, &tools, &req(v), json!(1))
        };
        let ok = run(
            &mut w,
            json!({"type": "play", "id": 1, "tools": {"function_1": "Adds."}, "items": ["t1"], "step": "p"}),
        )
        .unwrap();
        assert_eq!(ok["items"], json!(["t1"]));
        assert_eq!(ok["score"], json!(1.0));
        let t = ok["trajectories"][0]["trajectory"].as_str().unwrap();
        assert!(t.starts_with("Adds.é"), "{t:.40}");
        assert!(t.len() <= MAX_TRAJECTORY_BYTES + 40, "{}", t.len());
        assert!(t.ends_with("[cut at 8192 bytes]"), "{}", &t[t.len() - 40..]);
        // The agent's turn is the method's call, recorded as exploration.
        assert_eq!(w.calls.len(), 1);
        assert_eq!(
            (
                w.calls[0].role.as_str(),
                w.calls[0].phase.as_str(),
                w.calls[0].step.as_str()
            ),
            ("agent", "exploration", "p")
        );
        // Without items: the first `count` (default 1).
        let first = run(&mut w, json!({"count": 2})).unwrap();
        assert_eq!(first["items"], json!(["t0", "t1"]));
        let none = run(&mut w, json!({})).unwrap();
        assert_eq!(none["items"], json!(["t0"]));
        assert_eq!(w.calls.len(), 4);
        let mut err = |v: Value| run(&mut w, v).unwrap_err();
        assert!(err(json!({"items": ["p7777"]})).contains("not a training item"));
        assert!(err(json!({"items": [3]})).contains("not a training item"));
        assert!(err(json!({"count": 9})).contains("at most 8"));
        assert!(err(json!({"items": vec!["t0"; 9]})).contains("at most 8"));
        assert!(err(json!({"tools": {"nope": "x"}})).contains("unknown tool"));
        assert!(err(json!({"tools": {"function_1": 1}})).contains("non-string"));
        // Refused requests play nothing.
        assert_eq!(w.calls.len(), 4);
    }

    /// Whether process `pid` is gone (a zombie waiting for init counts as gone).
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

    /// Whether `pid` is gone within 2 s.
    fn gone_soon(pid: i32) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(2) {
            if gone(pid) {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        false
    }

    /// A method running `script` under `sh` (its pid file as `$1`), 30 s of wall time.
    fn shell_method(script: &str, pid_file: &Path) -> ExternalMethod {
        ExternalMethod {
            name: "group".into(),
            command: vec![
                "sh".into(),
                "-c".into(),
                script.into(),
                "sh".into(),
                pid_file.display().to_string(),
            ],
            files: Default::default(),
            params: json!({}),
            budget: ExternalBudget {
                wall_s: 30,
                ..ExternalBudget::default()
            },
            dir: PathBuf::from("."),
        }
    }

    /// The pid a method wrote into `file` (waiting up to 5 s for it).
    fn pid_in(file: &Path) -> i32 {
        let start = Instant::now();
        loop {
            if let Some(pid) = std::fs::read_to_string(file)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
            {
                return pid;
            }
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "no pid in {file:?}"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// A method is the leader of a process group of its own, and what it starts goes
    /// with it: a grandchild sleeping 300 s is killed when the method hangs and otb
    /// gives up on it (the `Proc` dropped), and a method that exits mid-protocol is at
    /// its end at once although that grandchild holds its stdout open.
    #[test]
    fn what_a_method_starts_dies_with_it() {
        let dir = tempfile::tempdir().unwrap();
        // Hangs, its grandchild holding its stdout.
        let file = dir.path().join("hang.pid");
        let proc = Proc::spawn(&shell_method(
            "sleep 300 & echo $! > \"$1\"; exec sleep 300",
            &file,
        ))
        .unwrap();
        let grandchild = pid_in(&file);
        // SAFETY: getpgid(2) takes no pointers.
        assert_eq!(unsafe { libc::getpgid(grandchild) }, proc.pgid);
        assert_ne!(proc.pgid, unsafe { libc::getpgid(0) }, "not otb's group");
        assert!(!gone(grandchild));
        drop(proc);
        assert!(
            gone_soon(grandchild),
            "the grandchild {grandchild} outlived it"
        );

        // Exits at once, its grandchild holding its stdout: the end, not the wall time.
        let file = dir.path().join("exit.pid");
        let mut proc =
            Proc::spawn(&shell_method("sleep 300 & echo $! > \"$1\"; exit 0", &file)).unwrap();
        let grandchild = pid_in(&file);
        let start = Instant::now();
        assert!(matches!(proc.next(), Ok(Line::Eof)));
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert!(proc.wait().is_some_and(|s| s.success()));
        assert!(
            gone_soon(grandchild),
            "the grandchild {grandchild} outlived it"
        );
        drop(proc);
    }

    #[test]
    fn item_ids_become_file_names() {
        assert_eq!(file_safe("exec_simple_0"), "exec_simple_0");
        assert_eq!(file_safe("*"), "_");
        assert_eq!(file_safe("../../etc/passwd"), ".._.._etc_passwd");
    }
}
