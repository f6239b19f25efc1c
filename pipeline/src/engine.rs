//! Running (or planning) stages against the store.
//!
//! The experiment driver walks its DAG in ordinary code and calls
//! [`Session::stage`] for each node, passing the upstream [`Entry`]s it depends on.
//! Dependencies are therefore dynamic (a ToolObserver loop can stop when every
//! instance is frozen), and the same driver code serves `otb run` (mode
//! [`Mode::Run`]) and `otb status` ([`Mode::Status`], which never computes anything).

use crate::digest::Digest;
use crate::error::StageError;
use crate::key::KeyComponents;
use crate::store::{Entry, Lookup, Staging, Store, Usage};
use crate::table::{Row, TableMeta};
use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::time::Instant;

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

impl NodeReport {
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

/// A node's output as a drive sees it: the node's name and its stored entry, or --
/// only in status mode -- no entry yet (the node would run, or waits for an input of
/// its own). A drive passes handles on as inputs whether they are computed or not, so
/// that status mode walks the whole experiment: a node whose input is pending is
/// listed as waiting for it ([`NodeState::Blocked`]).
#[derive(Clone, Debug)]
pub struct Handle {
    node: String,
    entry: Option<Entry>,
}

impl Handle {
    /// The output of `node`, computed.
    pub fn ready(node: &str, entry: Entry) -> Handle {
        Handle {
            node: node.to_string(),
            entry: Some(entry),
        }
    }

    /// The output of `node`, not computed yet (status mode).
    pub fn pending(node: &str) -> Handle {
        Handle {
            node: node.to_string(),
            entry: None,
        }
    }

    /// The node whose output this is.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The stored entry, when the node is computed.
    pub fn entry(&self) -> Option<&Entry> {
        self.entry.as_ref()
    }

    /// The stored entry. A pending handle here is a bug: only a node that runs reads
    /// its inputs, and a node runs only once every input is computed.
    pub fn get(&self) -> Result<&Entry, StageError> {
        self.entry.as_ref().ok_or_else(|| {
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

/// An upstream table a stage reads: the name it is known by and the upstream node's
/// [`Handle`].
pub type Input<'a> = (&'a str, &'a Handle);

/// The stage's view while it runs: its inputs, a place to write outputs, progress.
pub struct StageCtx<'a> {
    staging: Staging,
    journal: crate::journal::Journal,
    node: &'a str,
    usage: Usage,
    multi: &'a MultiProgress,
    quiet: bool,
}

impl StageCtx<'_> {
    /// Write an output table.
    pub fn write<R: Row>(&mut self, rows: &[R]) -> Result<&TableMeta, StageError> {
        Ok(self.staging.write(rows)?)
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

/// One `otb run` / `otb status` over a store.
pub struct Session<'s> {
    store: &'s Store,
    mode: Mode,
    quiet: bool,
    multi: MultiProgress,
    reports: Vec<NodeReport>,
    after: Option<String>,
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
            reports: Vec::new(),
            after: None,
        }
    }

    /// Whether this session runs or only plans.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Status mode: from now on (until called with `None`), a node that waits for an
    /// input is listed as [`NodeState::Planned`] (`after` says what decides whether
    /// it runs: a loop that may stop before it) instead of [`NodeState::Blocked`].
    pub fn set_after(&mut self, after: Option<String>) {
        self.after = after;
    }

    /// A session over the same store, mode and progress display, with no reports
    /// yet: one per job that runs on its own thread. [`Session::join`] takes its
    /// reports back, so the joined order does not depend on which job finished first.
    pub fn fork(&self) -> Session<'s> {
        Session {
            store: self.store,
            mode: self.mode,
            quiet: self.quiet,
            multi: self.multi.clone(),
            reports: Vec::new(),
            after: self.after.clone(),
        }
    }

    /// Append the reports of a session made by [`Session::fork`].
    pub fn join(&mut self, child: Session<'s>) {
        self.reports.extend(child.reports);
    }

    /// The store it reads and publishes to.
    pub fn store(&self) -> &Store {
        self.store
    }

    /// One report per node passed to [`Session::stage`], in call order, with a forked
    /// session's reports where it was joined.
    pub fn reports(&self) -> &[NodeReport] {
        &self.reports
    }

    /// Number of nodes computed in this session.
    pub fn executed(&self) -> usize {
        self.reports
            .iter()
            .filter(|r| r.state == NodeState::Ran)
            .count()
    }

    /// Print a line above the progress bars (or to stderr when there are none).
    pub fn println(&self, line: &str) {
        print_line(&self.multi, self.quiet, line);
    }

    /// Status mode: list `node` (of `stage`) as waiting for its first input that is
    /// not computed yet, without a key (its key needs what that input holds), and
    /// return its pending handle. In a run every input is computed: a pending one is
    /// a bug of the drive.
    pub fn unkeyed(
        &mut self,
        node: &str,
        stage: &str,
        inputs: &[Input<'_>],
    ) -> Result<Handle, StageError> {
        self.waiting(NodeReport::new(node, stage, inputs), stage, inputs)
    }

    fn waiting(
        &mut self,
        mut report: NodeReport,
        stage: &str,
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
        report.state = match &self.after {
            Some(after) => NodeState::Planned {
                after: after.clone(),
            },
            None => NodeState::Blocked {
                on: format!("input `{name}` is not computed yet"),
            },
        };
        let pending = Handle::pending(&report.node);
        self.reports.push(report);
        Ok(pending)
    }

    /// Ensure the output of one node: reuse it if its key is in the store, otherwise
    /// (run mode) compute it with `run` and publish it. The handle is pending only in
    /// status mode, for a node that would run or waits for an input.
    pub fn stage<F>(
        &mut self,
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
        let pending = Handle::pending(node);
        let mut report = NodeReport::new(node, stage, inputs);
        if inputs.iter().any(|(_, h)| h.entry().is_none()) {
            return self.waiting(report, stage, inputs);
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
        let store_err = |e| StageError::store(stage, e);
        // `inspect` changes nothing: status mode (also used to compute what `gc` keeps)
        // must neither quarantine nor record slots.
        let corrupt = match self.store.inspect(&components) {
            Lookup::Hit(entry) => {
                if self.mode == Mode::Run {
                    self.store
                        .record_slot(node, &components)
                        .map_err(store_err)?;
                }
                report.rows = entry.rows();
                report.wall_ms = entry.manifest.wall_ms;
                report.finished_unix = entry.manifest.created_unix;
                report.usage = entry.manifest.usage.clone();
                self.reports.push(report);
                return Ok(Handle::ready(node, *entry));
            }
            Lookup::Miss => None,
            Lookup::Corrupt { reason } => Some(reason),
        };
        if self.mode == Mode::Status {
            let mut reasons = match (corrupt, self.store.slot(node)) {
                (Some(reason), _) => vec![format!("stored output is corrupt: {reason}")],
                (None, None) => vec!["never run".to_string()],
                (None, Some(slot)) if slot.key == key => {
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
            if self.store.in_progress(stage, &key) {
                // Started but not published: "never run" would say otherwise.
                reasons.retain(|r| r != "never run");
                reasons.insert(
                    0,
                    "in progress: being computed now, or stopped part-way (what it finished is kept)"
                        .to_string(),
                );
            }
            report.state = NodeState::WouldRun { reasons };
            self.reports.push(report);
            return Ok(pending);
        }
        if let Some(reason) = &corrupt {
            // Moved aside or an error: a corrupt entry is never reused.
            self.store
                .quarantine(stage, &key, reason)
                .map_err(store_err)?;
        }
        let start = Instant::now();
        let mut ctx = StageCtx {
            staging: self.store.begin(&components).map_err(store_err)?,
            journal: crate::journal::Journal::new(self.store.root(), &key),
            node,
            usage: Usage::default(),
            multi: &self.multi,
            quiet: self.quiet,
        };
        // On an error the staging directory is dropped, which deletes it.
        run(&mut ctx).map_err(|e| e.in_stage(stage))?;
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
            .record_slot(node, &components)
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
        self.reports.push(report);
        Ok(Handle::ready(node, entry))
    }
}
