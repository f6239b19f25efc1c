//! Running (or planning) stages against the store.
//!
//! The experiment driver walks its DAG in ordinary code and calls
//! [`Session::stage`] for each node, passing the upstream [`Entry`]s it depends on.
//! Dependencies are therefore dynamic (a ToolObserver loop can stop when every
//! instance is frozen), and the same driver code serves `otb run` (mode
//! [`Mode::Run`]) and `otb status` ([`Mode::Status`], which never computes anything).

use crate::digest::Digest;
use crate::error::{StageError, StoreError};
use crate::key::KeyComponents;
use crate::store::{Entry, Lookup, Staging, Store, Usage};
use crate::table::{Row, TableMeta};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Whether a [`Session`] computes what is missing or only looks keys up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// `otb run`: reuse fresh outputs, compute and publish the others.
    Run,
    /// `otb status`: look keys up and say what would run and why; computes,
    /// publishes, quarantines and records nothing.
    Status,
}

/// What happened to (or would happen to) one node.
#[derive(Clone, Debug, PartialEq)]
pub enum NodeState {
    /// Found in the store, verified, reused.
    Fresh,
    /// Computed in this session.
    Ran,
    /// Status mode: would be computed; the reasons say why.
    WouldRun {
        /// Why, one line each (e.g. a changed key component, "never run").
        reasons: Vec<String>,
    },
    /// Status mode: cannot be keyed yet because an upstream node would run first.
    Blocked {
        /// Which input is not computed yet.
        on: String,
    },
    /// Status mode: a node of a later round that is not reached yet and runs only if
    /// the loop has not stopped by then (`after` says what decides it).
    Planned {
        /// What decides whether the node runs.
        after: String,
    },
}

/// One line of the run/status report.
#[derive(Clone, Debug)]
pub struct NodeReport {
    /// The experiment node, e.g. `explore[names/gpt-5/r2]`.
    pub node: String,
    /// The stage it runs, e.g. `explore`.
    pub stage: String,
    /// The node's key; `None` when it could not be computed (blocked or planned).
    pub key: Option<Digest>,
    /// Reused, ran, or (status mode) would run, blocked or planned.
    pub state: NodeState,
    /// Rows over all output tables (0 when there is no output).
    pub rows: u64,
    /// Wall-clock time of the run that computed the output, in milliseconds (0 when
    /// not computed).
    pub wall_ms: u64,
    /// When the stage's result was committed (Unix seconds; 0 when not computed).
    pub finished_unix: u64,
    /// Model-call accounting of the run that computed the output.
    pub usage: Usage,
    /// The node's inputs: the name each is known by, and the upstream node.
    pub inputs: Vec<(String, String)>,
}

/// A node whose key is known: what the steps of [`Session::stage_at`] share.
struct Keyed<'a> {
    node: &'a str,
    stage: &'a str,
    components: KeyComponents,
    key: Digest,
}

impl NodeReport {
    /// What the run that computed `entry` reported: its rows, time and usage.
    fn computed_as(&mut self, entry: &Entry) {
        self.rows = entry.rows();
        self.wall_ms = entry.manifest.wall_ms;
        self.finished_unix = entry.manifest.created_unix;
        self.usage = entry.manifest.usage.clone();
    }

    /// The report of `node` (of `stage`, reading `inputs`) before anything is known
    /// of it: no key, nothing computed.
    fn new(node: &str, stage: &str, inputs: &[Input<'_>]) -> NodeReport {
        NodeReport {
            node: node.to_string(),
            stage: stage.to_string(),
            key: None,
            state: NodeState::Fresh,
            rows: 0,
            wall_ms: 0,
            finished_unix: 0,
            usage: Usage::default(),
            inputs: inputs
                .iter()
                .map(|(n, h)| (n.to_string(), h.node().to_string()))
                .collect(),
        }
    }
}

/// A node's output as a drive sees it: the node's name and its stored entry, or no
/// entry yet. A drive passes handles on as inputs whether they are computed or not:
/// in status mode a node that is not in the store has a pending handle, and every
/// node after it is listed as waiting for it ([`NodeState::Blocked`]); in a run whose
/// nodes an [`crate::exec::Schedule`] executes, a handle is a promise that the node
/// settles when it is computed (or fails), and the nodes reading it wait for it.
#[derive(Clone)]
pub struct Handle {
    node: Arc<str>,
    /// The promise: settled once (the executor starts a node only once all its
    /// inputs are settled).
    slot: Arc<OnceLock<Settled>>,
}

/// What a handle's node came to.
#[derive(Clone, Debug)]
enum Settled {
    /// Computed (or found): its entry.
    Ready(Box<Entry>),
    /// Status mode: not computed (it would run, or waits for an input).
    Pending,
    /// A run: the node failed, or was skipped because an input failed.
    Failed,
}

impl std::fmt::Debug for Handle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("node", &self.node)
            .field("settled", &self.slot.get())
            .finish()
    }
}

impl Handle {
    fn settled(node: &str, value: Settled) -> Handle {
        Handle {
            node: Arc::from(node),
            slot: Arc::new(OnceLock::from(value)),
        }
    }

    /// The output of `node`, computed.
    pub fn ready(node: &str, entry: Entry) -> Handle {
        Handle::settled(node, Settled::Ready(Box::new(entry)))
    }

    /// The output of `node`, not computed yet (status mode).
    pub fn pending(node: &str) -> Handle {
        Handle::settled(node, Settled::Pending)
    }

    /// The output of `node`, to be settled by whoever computes it.
    pub(crate) fn promise(node: &str) -> Handle {
        Handle {
            node: Arc::from(node),
            slot: Arc::default(),
        }
    }

    /// Settle the promise (a second settlement is ignored).
    fn settle(&self, value: Settled) {
        let _ = self.slot.set(value);
    }

    /// Settle the promise with another handle's outcome.
    pub(crate) fn settle_as(&self, other: &Handle) {
        self.settle(other.slot.get().cloned().unwrap_or(Settled::Failed));
    }

    /// Settle the promise as failed: the nodes waiting for it are skipped.
    pub(crate) fn fail(&self) {
        self.settle(Settled::Failed);
    }

    /// Whether the handle's node came to something (computed, pending or failed).
    pub(crate) fn is_settled(&self) -> bool {
        self.slot.get().is_some()
    }

    /// Whether the handle's node failed or was skipped.
    pub(crate) fn is_failed(&self) -> bool {
        matches!(self.slot.get(), Some(Settled::Failed))
    }

    /// The node whose output this is.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The stored entry, when the node is computed.
    pub fn entry(&self) -> Option<&Entry> {
        match self.slot.get() {
            Some(Settled::Ready(e)) => Some(&**e),
            _ => None,
        }
    }

    /// The stored entry. A handle without one here is a bug: only a node that runs
    /// reads its inputs, and a node runs only once every input is computed.
    pub fn get(&self) -> Result<&Entry, StageError> {
        self.entry().ok_or_else(|| {
            StageError::bug(
                "drive",
                format!(
                    "the output of `{}` was read before it was computed",
                    self.node
                ),
            )
        })
    }

    /// The rows of the entry's table of `R` (see [`Handle::get`]).
    pub fn read<R: Row>(&self) -> Result<Vec<R>, StageError> {
        Ok(self.get()?.read()?)
    }
}

/// What one node computes, as [`Session::stage_at`] keys it: the node's name, its
/// stage and the stage's code version, and its params.
#[derive(Clone, Debug)]
pub struct Call<'a> {
    /// The experiment node, e.g. `explore[names/gpt-5/r2]`.
    pub node: &'a str,
    /// The stage it runs.
    pub stage: &'a str,
    /// The stage's code version.
    pub code_version: u32,
    /// The node's params (part of its key).
    pub params: serde_json::Value,
    /// Status mode: whether the node runs at all is decided by an output not computed
    /// yet (a loop that may stop before it; this says what decides it). While it
    /// waits for an input, such a node is listed as [`NodeState::Planned`] instead of
    /// [`NodeState::Blocked`]. Not part of its key.
    pub after: Option<&'a str>,
}

/// Where a node stands in a drive's order: a path of indices (a node issued by a
/// continuation sorts under the continuation's place). Reports and records are
/// listed in this order whatever order concurrent nodes finish in, so a run lists
/// what a run one node at a time (and status mode) lists.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Seq(Vec<u32>);

impl Seq {
    /// The `i`-th place under this one.
    pub fn child(&self, i: u32) -> Seq {
        let mut v = self.0.clone();
        v.push(i);
        Seq(v)
    }
}

/// An upstream table a stage reads: the name it is known by and the upstream node's
/// [`Handle`].
pub type Input<'a> = (&'a str, &'a Handle);

/// The stage's view while it runs: its inputs, a place to write outputs, progress.
pub struct StageCtx<'a> {
    inputs: Vec<(String, Handle)>,
    staging: Staging,
    journal: crate::journal::Journal,
    node: &'a str,
    usage: Usage,
    multi: &'a MultiProgress,
    active: &'a Mutex<Vec<Active>>,
    quiet: bool,
}

impl StageCtx<'_> {
    /// Write an output table.
    pub fn write<R: Row>(&mut self, rows: &[R]) -> Result<&TableMeta, StageError> {
        Ok(self.staging.write(rows)?)
    }

    /// The input known by `name` (always computed: a node runs only once its inputs
    /// are).
    pub fn input(&self, name: &str) -> Result<&Handle, StageError> {
        self.inputs
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, h)| h)
            .ok_or_else(|| StageError::bug(self.node, format!("no input named `{name}`")))
    }

    /// The rows of the table of `R` of the input known by `name`.
    pub fn read<R: Row>(&self, name: &str) -> Result<Vec<R>, StageError> {
        self.input(name)?.read()
    }

    /// Add model-call accounting to this stage's manifest.
    pub fn add_usage(&mut self, u: &Usage) {
        self.usage.add(u);
    }

    /// A progress bar for `total` items (hidden with `--quiet`).
    pub fn progress(&self, total: u64) -> ProgressBar {
        if self.quiet {
            return ProgressBar::hidden();
        }
        let pb = self.multi.add(ProgressBar::new(total));
        pb.set_style(
            ProgressStyle::with_template(
                "{prefix:>28} [{bar:30}] {pos}/{len} {elapsed_precise} ETA {eta} {msg}",
            )
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
        );
        pb.set_prefix(self.node.to_string());
        if let Some(a) = self
            .active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .find(|a| a.node == self.node)
        {
            a.bars.push(pb.clone());
        }
        pb
    }

    /// The experiment node being computed (also the progress bars' prefix).
    pub fn node(&self) -> &str {
        self.node
    }

    /// A line for the person watching (hidden with `--quiet`), e.g. how much of the
    /// stage was resumed from its journal.
    pub fn note(&self, line: &str) {
        print_line(self.multi, self.quiet, line);
    }

    /// This stage key's journal: finished items recorded as they finish are found
    /// again when the same stage is rerun after a crash or a kill, and deleted once
    /// the stage publishes (see [`crate::journal`]).
    pub fn journal(&self) -> &crate::journal::Journal {
        &self.journal
    }
}

/// Who holds a lease, where and since when: `shard 2/4 on host h (pid 12) since
/// 12:01:02 UTC, last heartbeat 3s ago`.
fn lease_text(h: &crate::lease::Holder) -> String {
    let now = crate::clock::now_ms();
    format!(
        "{} on host {} (pid {}) since {} UTC, last heartbeat {} ago",
        h.worker,
        h.host,
        h.pid,
        crate::clock::utc_time(h.started_ms / 1000),
        short_duration(Duration::from_millis(now.saturating_sub(h.heartbeat_ms)))
    )
}

/// The time left at the mean pace so far: `elapsed` for `done` of `total` items.
/// (indicatif's own estimate weighs recent steps and decays while none comes: in a
/// log, between the rare items of a model-bound stage, it grew to millions of
/// hours.)
fn linear_eta(elapsed: Duration, done: u64, total: u64) -> Option<Duration> {
    (done > 0 && done < total).then(|| elapsed.mul_f64((total - done) as f64 / done as f64))
}

/// A heartbeat's estimate for a stage with `done` of `total` items, the last of which
/// finished at `at` (time since the stage started), `now` being the time since it
/// started: the mean pace up to the last finished item, counted down since then. It
/// never grows while no item finishes (a stage whose calls wait behind other stages'
/// in the model's queue); once the countdown is spent it says how long no item has
/// finished instead.
fn eta_text(at: Duration, now: Duration, done: u64, total: u64) -> String {
    let idle = now.saturating_sub(at);
    match linear_eta(at, done, total) {
        Some(d) if d > idle => format!(", ETA {}", short_duration(d - idle)),
        Some(_) => format!(", no item done for {}", short_duration(idle)),
        None => String::new(),
    }
}

/// `1h 02m`, `4m 10s`, `12s`.
fn short_duration(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 3600 {
        format!("{}h {:02}m", s / 3600, s % 3600 / 60)
    } else if s >= 60 {
        format!("{}m {:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

/// A line above the progress bars (or to stderr when there are none); nothing when
/// quiet.
fn print_line(multi: &MultiProgress, quiet: bool, line: &str) {
    if quiet {
        return;
    }
    if multi.is_hidden() {
        eprintln!("{line}");
    } else {
        let _ = multi.println(line);
    }
}

/// One `otb run` / `otb status` over a store. Shared by the threads of a run: its
/// methods take `&self`.
pub struct Session<'s> {
    store: &'s Store,
    mode: Mode,
    quiet: bool,
    multi: MultiProgress,
    reports: Mutex<Vec<(Seq, NodeReport)>>,
    /// The place of the next node passed without one ([`Session::stage`]).
    next: AtomicU32,
    /// One lock per key being looked up or computed: two nodes of one run with the
    /// same key compute it once (the second finds the first's output).
    computing: Mutex<HashMap<Digest, Arc<Mutex<()>>>>,
    /// The nodes being computed now, since when, and their progress bars (what a
    /// heartbeat line reports).
    active: Mutex<Vec<Active>>,
    /// Cooperating with other workers on the store (`otb run --shard`).
    coop: Option<Arc<crate::lease::Coop>>,
    /// Nodes found computed by another worker in this session.
    by_others: AtomicU32,
}

/// A node being computed.
struct Active {
    node: String,
    since: Instant,
    bars: Vec<ProgressBar>,
    /// The progress a heartbeat last saw change (position, length) and when (time
    /// since the bar started).
    last: Option<(u64, u64, Duration)>,
}

impl<'s> Session<'s> {
    /// A session over `store`; `quiet` hides progress bars and notes (status mode
    /// never draws progress bars).
    pub fn new(store: &'s Store, mode: Mode, quiet: bool) -> Session<'s> {
        let multi = MultiProgress::new();
        if quiet || mode == Mode::Status {
            multi.set_draw_target(ProgressDrawTarget::hidden());
        }
        Session {
            store,
            mode,
            quiet,
            multi,
            reports: Mutex::default(),
            next: AtomicU32::new(0),
            computing: Mutex::default(),
            active: Mutex::default(),
            coop: None,
            by_others: AtomicU32::new(0),
        }
    }

    /// Cooperate with the other workers of the store: a missing node is computed
    /// only under its lease, and another shard's node is waited for while that
    /// shard's worker is alive (see [`crate::lease`]).
    pub fn with_coop(mut self, coop: Arc<crate::lease::Coop>) -> Self {
        self.coop = Some(coop);
        self
    }

    /// Nodes of this session that another worker computed while this one waited.
    pub fn computed_by_others(&self) -> u32 {
        self.by_others.load(Ordering::Relaxed)
    }

    /// Until `node` is in the store (another worker published it: `Ok(Err(entry))`)
    /// or this worker holds its lease (`Ok(Ok(guard))`): a node another live shard
    /// owns, or one whose lease another worker holds, is polled for, with one line
    /// saying so.
    fn cooperate(
        &self,
        coop: &crate::lease::Coop,
        node: &str,
        components: &KeyComponents,
        key: &Digest,
    ) -> Result<Result<crate::lease::LeaseGuard, Entry>, StoreError> {
        // Short nodes are common: poll fast at first, then back off.
        let most = (coop.timeout / 4).clamp(Duration::from_millis(50), Duration::from_secs(2));
        let mut poll = Duration::from_millis(10);
        let mut told = String::new();
        loop {
            if let Lookup::Hit(e) = self.store.inspect(components) {
                return Ok(Err(*e));
            }
            let why = match coop.other_owner(node) {
                Some(owner) => format!("shard {owner} computes it"),
                None => match coop.claim(node, key)? {
                    crate::lease::Claim::Held(guard) => {
                        // Published between the lookup and the lease?
                        if let Lookup::Hit(e) = self.store.inspect(components) {
                            return Ok(Err(*e));
                        }
                        match guard.taken_from() {
                            // Work the dead worker did on it is lost: say so, so that
                            // a log counts what was computed twice.
                            Some(h) if h.pid != 0 => self.println(&format!(
                                "  taking over {node} from {} (host {}, pid {}): its lease expired",
                                h.worker, h.host, h.pid
                            )),
                            Some(_) => self.println(&format!(
                                "  taking over {node}: its lease was left unreadable by a worker that died writing it"
                            )),
                            None => {}
                        }
                        return Ok(Ok(guard));
                    }
                    crate::lease::Claim::Busy(h) if h.pid == 0 => {
                        format!("{} is taking its lease", h.worker)
                    }
                    crate::lease::Claim::Busy(h) => {
                        format!("{} computes it (host {}, pid {})", h.worker, h.host, h.pid)
                    }
                },
            };
            if why != told {
                self.println(&format!("  waiting for {node}: {why}"));
                told = why;
            }
            std::thread::sleep(poll);
            poll = (poll * 3 / 2).min(most);
        }
    }

    /// One line on the run's state for a log without a terminal: the nodes being
    /// computed with their items done / total and ETA (or time so far), the nodes
    /// finished, and `extra` (e.g. model calls so far).
    pub fn heartbeat(&self, extra: &str) -> String {
        let mut active = self.active.lock().unwrap_or_else(|e| e.into_inner());
        let mut parts = Vec::new();
        for a in active.iter_mut() {
            let bar = a.bars.iter().rev().find(|b| b.length().unwrap_or(0) > 0);
            parts.push(match bar {
                Some(b) => {
                    let (pos, len, now) = (b.position(), b.length().unwrap_or(0), b.elapsed());
                    let at = match a.last {
                        Some((p, l, at)) if (p, l) == (pos, len) => at,
                        _ => {
                            a.last = Some((pos, len, now));
                            now
                        }
                    };
                    format!("{} {pos}/{len}{}", a.node, eta_text(at, now, pos, len))
                }
                None => format!("{} ({})", a.node, short_duration(a.since.elapsed())),
            });
        }
        let done = self
            .reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, r)| matches!(r.state, NodeState::Ran | NodeState::Fresh))
            .count();
        const SHOWN: usize = 8;
        let n = parts.len();
        if n > SHOWN {
            parts.truncate(SHOWN);
            parts.push(format!("and {} more", n - SHOWN));
        }
        let mut line = match n {
            0 => "no stage computing".to_string(),
            n => format!("{n} computing: {}", parts.join("; ")),
        };
        line.push_str(&format!("; {done} done"));
        if !extra.is_empty() {
            line.push_str("; ");
            line.push_str(extra);
        }
        line
    }

    /// Whether this session runs or only plans.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The store it reads and publishes to.
    pub fn store(&self) -> &Store {
        self.store
    }

    /// One report per node passed to [`Session::stage`] or [`Session::stage_at`], in
    /// the nodes' order ([`Seq`]), whatever order they finished in.
    pub fn reports(&self) -> Vec<NodeReport> {
        let mut r = self
            .reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        r.sort_by(|a, b| a.0.cmp(&b.0));
        r.into_iter().map(|(_, r)| r).collect()
    }

    /// Number of nodes computed in this session.
    pub fn executed(&self) -> usize {
        self.reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .filter(|(_, r)| r.state == NodeState::Ran)
            .count()
    }

    /// Print a line above the progress bars (or to stderr when there are none).
    pub fn println(&self, line: &str) {
        print_line(&self.multi, self.quiet, line);
    }

    fn report(&self, seq: &Seq, report: NodeReport) {
        self.reports
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((seq.clone(), report));
    }

    /// The next place for a node passed without one.
    fn next_seq(&self) -> Seq {
        Seq(vec![self.next.fetch_add(1, Ordering::Relaxed)])
    }

    /// Status mode: list `node` (of `stage`, at `seq`) as waiting for its first input
    /// that is not computed yet, without a key (its key needs what that input holds),
    /// and return its pending handle; with `after`, it is listed as planned (see
    /// [`Call::after`]). In a run every input is computed: a pending one is a bug of
    /// the drive.
    pub fn unkeyed(
        &self,
        seq: &Seq,
        (node, stage): (&str, &str),
        after: Option<&str>,
        inputs: &[Input<'_>],
    ) -> Result<Handle, StageError> {
        let report = NodeReport::new(node, stage, inputs);
        self.waiting(seq, report, (stage, after), inputs)
    }

    fn waiting(
        &self,
        seq: &Seq,
        mut report: NodeReport,
        (stage, after): (&str, Option<&str>),
        inputs: &[Input<'_>],
    ) -> Result<Handle, StageError> {
        let (name, h) = inputs
            .iter()
            .find(|(_, h)| h.entry().is_none())
            .ok_or_else(|| StageError::bug(stage, "a node waits for none of its inputs"))?;
        if self.mode == Mode::Run {
            return Err(StageError::bug(
                stage,
                format!("input `{name}` ({}) is not computed", h.node()),
            ));
        }
        report.state = match after {
            Some(after) => NodeState::Planned {
                after: after.to_string(),
            },
            None => NodeState::Blocked {
                on: format!("input `{name}` is not computed yet"),
            },
        };
        let pending = Handle::pending(&report.node);
        self.report(seq, report);
        Ok(pending)
    }

    /// [`Session::stage_at`] at the next place of nodes passed without one.
    pub fn stage<F>(
        &self,
        node: &str,
        stage: &str,
        code_version: u32,
        params: serde_json::Value,
        inputs: &[Input<'_>],
        run: F,
    ) -> Result<Handle, StageError>
    where
        F: FnOnce(&mut StageCtx<'_>) -> Result<(), StageError>,
    {
        let seq = self.next_seq();
        let call = Call {
            node,
            stage,
            code_version,
            params,
            after: None,
        };
        self.stage_at(&seq, call, inputs, run)
    }

    /// Ensure the output of one node: reuse it if its key is in the store, otherwise
    /// (run mode) compute it with `run` and publish it. The handle is pending only in
    /// status mode, for a node that would run or waits for an input.
    pub fn stage_at<F>(
        &self,
        seq: &Seq,
        call: Call<'_>,
        inputs: &[Input<'_>],
        run: F,
    ) -> Result<Handle, StageError>
    where
        F: FnOnce(&mut StageCtx<'_>) -> Result<(), StageError>,
    {
        let Call {
            node,
            stage,
            code_version,
            params,
            after,
        } = call;
        let mut report = NodeReport::new(node, stage, inputs);
        if inputs.iter().any(|(_, h)| h.entry().is_none()) {
            return self.waiting(seq, report, (stage, after), inputs);
        }
        let components = KeyComponents {
            stage: stage.to_string(),
            code_version,
            params,
            inputs: inputs
                .iter()
                .filter_map(|(n, h)| h.entry().map(|e| (n.to_string(), e.digest().clone())))
                .collect(),
        };
        let key = components.key();
        report.key = Some(key.clone());
        let keyed = Keyed {
            node,
            stage,
            components,
            key,
        };
        let store_err = |e| StageError::store(stage, e);
        // One computation per key in a run: a second node with this key waits here
        // and then finds the first one's output.
        let gate = (self.mode == Mode::Run).then(|| {
            self.computing
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(keyed.key.clone())
                .or_default()
                .clone()
        });
        let _computing = gate
            .as_ref()
            .map(|g| g.lock().unwrap_or_else(|e| e.into_inner()));
        // `inspect` changes nothing: status mode (also used to compute what `gc` keeps)
        // must neither quarantine nor record slots.
        let corrupt = match self.store.inspect(&keyed.components) {
            Lookup::Hit(entry) => return self.reuse(seq, report, &keyed, *entry),
            Lookup::Miss => None,
            Lookup::Corrupt { reason } => Some(reason),
        };
        if self.mode == Mode::Status {
            report.state = NodeState::WouldRun {
                reasons: self.why_it_would_run(&keyed, corrupt),
            };
            self.report(seq, report);
            return Ok(Handle::pending(node));
        }
        if let Some(reason) = &corrupt {
            // Moved aside or an error: a corrupt entry is never reused.
            self.store
                .quarantine(stage, &keyed.key, reason)
                .map_err(store_err)?;
        }
        let _lease = match &self.coop {
            None => None,
            Some(coop) => match self
                .cooperate(coop, node, &keyed.components, &keyed.key)
                .map_err(store_err)?
            {
                Ok(guard) => Some(guard),
                Err(entry) => return self.computed_by_another_worker(seq, report, &keyed, entry),
            },
        };
        self.compute(seq, report, &keyed, inputs, run)
    }

    /// [`Session::stage_at`] found the node's entry in the store: reuse it (a run
    /// records the node's slot first).
    fn reuse(
        &self,
        seq: &Seq,
        mut report: NodeReport,
        keyed: &Keyed<'_>,
        entry: Entry,
    ) -> Result<Handle, StageError> {
        if self.mode == Mode::Run {
            self.store
                .record_slot(keyed.node, &keyed.components)
                .map_err(|e| StageError::store(keyed.stage, e))?;
            // A run stopped between publishing this entry and deleting its
            // journal left the journal behind: the entry is the result now.
            crate::journal::Journal::new(self.store.root(), &keyed.key).remove();
        }
        report.computed_as(&entry);
        self.report(seq, report);
        Ok(Handle::ready(keyed.node, entry))
    }

    /// Status mode: why a node that is not in the store would run (`corrupt`: what
    /// verification found wrong with its stored entry), an entry in progress first.
    fn why_it_would_run(&self, keyed: &Keyed<'_>, corrupt: Option<String>) -> Vec<String> {
        let Keyed {
            node,
            stage,
            components,
            key,
        } = keyed;
        let mut reasons = match (corrupt, self.store.slot(node)) {
            (Some(reason), _) => vec![format!("stored output is corrupt: {reason}")],
            (None, None) => vec!["never run".to_string()],
            (None, Some(slot)) if slot.key == *key => {
                vec!["output missing from the store (removed by gc?)".to_string()]
            }
            (None, Some(slot)) => {
                let ch = components.changes_since(&slot.components);
                if ch.is_empty() {
                    vec!["key changed".to_string()]
                } else {
                    ch.iter().map(|c| c.to_string()).collect()
                }
            }
        };
        if let Some(h) = crate::lease::lease_of(&crate::lease::Board::of(self.store), key) {
            reasons.retain(|r| r != "never run");
            reasons.insert(0, format!("in progress: {}", lease_text(&h)));
        } else if self.store.in_progress(stage, key) {
            // Started but not published: "never run" would say otherwise.
            reasons.retain(|r| r != "never run");
            reasons.insert(
                0,
                "in progress: being computed now, or stopped part-way (what it finished is kept)"
                    .to_string(),
            );
        }
        reasons
    }

    /// Cooperating workers: another worker published the node's entry while this
    /// one waited for its lease; take it.
    fn computed_by_another_worker(
        &self,
        seq: &Seq,
        mut report: NodeReport,
        keyed: &Keyed<'_>,
        entry: Entry,
    ) -> Result<Handle, StageError> {
        self.store
            .record_slot(keyed.node, &keyed.components)
            .map_err(|e| StageError::store(keyed.stage, e))?;
        // The worker that published it may have stopped before deleting
        // its journal: the entry is the result now.
        crate::journal::Journal::new(self.store.root(), &keyed.key).remove();
        self.by_others.fetch_add(1, Ordering::Relaxed);
        report.computed_as(&entry);
        self.println(&format!("  {}: computed by another worker", keyed.node));
        self.report(seq, report);
        Ok(Handle::ready(keyed.node, entry))
    }

    /// Run mode, a node not in the store: compute it with `run` in a staging
    /// directory (journaled, shown among the active nodes), then publish it and
    /// record the node's slot.
    fn compute<F>(
        &self,
        seq: &Seq,
        mut report: NodeReport,
        keyed: &Keyed<'_>,
        inputs: &[Input<'_>],
        run: F,
    ) -> Result<Handle, StageError>
    where
        F: FnOnce(&mut StageCtx<'_>) -> Result<(), StageError>,
    {
        let Keyed {
            node,
            stage,
            components,
            key,
        } = keyed;
        let (node, stage) = (*node, *stage);
        let store_err = |e| StageError::store(stage, e);
        let start = Instant::now();
        let mut ctx = StageCtx {
            inputs: inputs
                .iter()
                .map(|(n, h)| (n.to_string(), (*h).clone()))
                .collect(),
            staging: self.store.begin(components).map_err(store_err)?,
            journal: crate::journal::Journal::new(self.store.root(), key),
            node,
            usage: Usage::default(),
            multi: &self.multi,
            quiet: self.quiet,
            active: &self.active,
        };
        self.active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Active {
                node: node.to_string(),
                since: start,
                bars: Vec::new(),
                last: None,
            });
        // On an error the staging directory is dropped, which deletes it.
        let ran = run(&mut ctx);
        self.active
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|a| a.node != node);
        ran.map_err(|e| e.in_stage(stage))?;
        let wall_ms = u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX);
        let StageCtx {
            staging,
            usage,
            journal,
            ..
        } = ctx;
        let entry = self
            .store
            .commit(staging, node, wall_ms, usage.clone())
            .map_err(store_err)?;
        journal.remove();
        self.store
            .record_slot(node, components)
            .map_err(store_err)?;
        report.state = NodeState::Ran;
        report.rows = entry.rows();
        report.wall_ms = wall_ms;
        report.finished_unix = entry.manifest.created_unix;
        report.usage = usage;
        self.println(&format!(
            "  ran {node} in {:.1}s ({} rows)",
            wall_ms as f64 / 1000.0,
            report.rows
        ));
        self.report(seq, report);
        Ok(Handle::ready(node, entry))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_heartbeat_eta_is_the_mean_pace_so_far() {
        let s = Duration::from_secs;
        assert_eq!(linear_eta(s(120), 4, 8), Some(s(120)));
        assert_eq!(linear_eta(s(30), 1, 4), Some(s(90)));
        // Nothing done yet, or all of it: no estimate.
        assert_eq!(linear_eta(s(30), 0, 4), None);
        assert_eq!(linear_eta(s(30), 4, 4), None);
        assert_eq!(short_duration(s(3 * 3600 + 65)), "3h 01m");
    }

    /// While no item finishes, the estimate counts down from the pace at the last
    /// one instead of growing by a minute every minute; once spent, the line says how
    /// long no item has finished.
    #[test]
    fn the_heartbeat_eta_does_not_grow_while_no_item_finishes() {
        let s = Duration::from_secs;
        // 1 of 2 items after 172 s: 2m 52s to go.
        assert_eq!(eta_text(s(172), s(172), 1, 2), ", ETA 2m 52s");
        // Five minutes later, still 1 of 2 (the linear estimate said 7m 52s).
        assert_eq!(linear_eta(s(472), 1, 2), Some(s(472)));
        assert_eq!(eta_text(s(172), s(232), 1, 2), ", ETA 1m 52s");
        assert_eq!(eta_text(s(172), s(472), 1, 2), ", no item done for 5m 00s");
        assert_eq!(eta_text(s(10), s(10), 0, 2), "");
    }
}
