//! The experiment driver: expands an [`Experiment`] into stage calls on a
//! [`Session`], one environment after another ([`environments`]: the registry). The
//! same code plans (`otb status`, `otb plan`) and runs (`otb run`); in status mode a
//! node whose inputs are not computed yet is listed waiting for them, and so is
//! everything after it: the whole experiment is walked.
//!
//! Each environment expands its own table of the experiment (`[bfcl]`: see
//! [`crate::bfcl::env::drive`]); everything they share -- the models, the labels of
//! outputs, the ToolObserver loops -- lives in [`crate::env`], [`crate::models`],
//! [`crate::online`] and [`crate::offline`].

use crate::experiment::{ConfigError, Experiment, Registry};
use crate::models::Models;
use pipeline::{ErrorClass, Mode, NodeReport, Session, Store};
use std::path::Path;
use std::sync::Arc;

pub use crate::env::{DriveError, Label, Output, RunOutput};

/// The environments an experiment file may name, in drive order: adding an
/// environment is its own folders plus one line in [`builtin`].
pub fn environments() -> Arc<Registry> {
    Arc::new(builtin())
}

/// The built-in environments, to add more to (`builtin().with(MyEnvironment)`).
pub fn builtin() -> Registry {
    Registry::new()
        .with(crate::bfcl::BfclEnvironment)
        .with(crate::chess::ChessEnvironment)
        .with(crate::search::SearchEnvironment)
        .with(crate::mcp::McpEnvironment)
}

/// Read and check an experiment file naming the built-in [`environments`].
pub fn load(path: &Path) -> Result<Experiment, ConfigError> {
    Experiment::load(&environments(), path)
}

/// How a run goes beyond its experiment and session.
#[derive(Clone, Copy, Debug)]
pub struct DriveOptions {
    /// On a store on object storage: how often the calls made so far are sent to
    /// the shared call cache while the run goes on (zero: only when it ends).
    pub push_every: std::time::Duration,
}

impl Default for DriveOptions {
    fn default() -> Self {
        DriveOptions {
            push_every: std::time::Duration::from_secs(30),
        }
    }
}

/// Run (or, in status mode, plan) every stage of `exp`. The experiment's models were
/// checked when it was parsed; they are loaded on first use.
pub fn drive(exp: &Experiment, s: &Session<'_>) -> Result<RunOutput, DriveError> {
    drive_with(exp, s, DriveOptions::default())
}

/// The environments' preludes ([`crate::experiment::EnvTable::prelude`]): the
/// stages without which the rest of the plan is not known yet (an MCP server's tool
/// list), which `otb run` computes before it prints its bill.
pub fn prelude(exp: &Experiment, s: &Session<'_>) -> Result<(), DriveError> {
    let models = Models::for_store(s.store()).with_endpoints(&exp.endpoints);
    let out = crate::env::Recorder::default();
    let mut cx = crate::env::Cx::new(s, &models, &out);
    exp.envs.iter().try_for_each(|env| {
        cx.set_env(env.table());
        env.prelude(exp, &mut cx)
    })
}

/// [`drive`] with `opts`.
pub fn drive_with(
    exp: &Experiment,
    s: &Session<'_>,
    opts: DriveOptions,
) -> Result<RunOutput, DriveError> {
    use crate::models::cache_sync::{push_while, CacheSync};
    let models = Models::for_store(s.store()).with_endpoints(&exp.endpoints);
    // A store on object storage: the other machines' calls first, this one's while
    // it runs and after (also after a failure: the calls were paid for).
    let sync = match s.mode() {
        pipeline::Mode::Status => None,
        _ => CacheSync::pull(s.store(), &models)?.map(std::sync::Mutex::new),
    };
    if let Some((segments @ 1.., calls)) =
        sync.as_ref().and_then(|c| c.lock().ok().map(|c| c.pulled))
    {
        s.println(&format!(
            "shared call cache: {calls} call(s) from {segments} segment(s) of other runs"
        ));
    }
    let out = crate::env::Recorder::default();
    let driven = push_while(sync.as_ref(), opts.push_every, || {
        let mut cx = crate::env::Cx::new(s, &models, &out);
        exp.envs.iter().try_for_each(|env| {
            cx.set_env(env.table());
            env.drive(exp, &mut cx)
        })
    });
    if let Some(mut sync) = sync.and_then(|m| m.into_inner().ok()) {
        if let Err(e) = sync.push() {
            eprintln!(
                "otb: warning: {} (the calls stay in this mirror; the next run sends them)",
                e.message
            );
        }
    }
    driven?;
    let out = out.finish();
    // What the run used, after it (an error line stays the only line of a failed run).
    s.println(&exp.models_line());
    for (spec, line) in models.metrics_summaries() {
        s.println(&format!("{spec}: {line}"));
    }
    Ok(out)
}

/// What must hold before a run touches the store, beyond what parsing the experiment
/// checked: the endpoint variables of `openai:` models are valid, and each
/// environment's own checks (a user's BFCL data and frozen-responses files parse;
/// the chess engine binary exists; ...).
pub fn preflight(exp: &Experiment) -> Result<(), crate::InputError> {
    let first_of = |kind| {
        exp.agents
            .iter()
            .chain(&exp.editors)
            .chain(exp.envs.iter().flat_map(|e| e.models()))
            .find(|m| m.kind == kind)
    };
    let bad = |spec: &crate::models::ModelSpec, e: &dyn std::fmt::Display| {
        crate::InputError(format!("model `{spec}`: {e}"))
    };
    // An endpoint's configuration (the variables `openai:` models read) is checked
    // before anything is written; reaching the endpoint is the stages' business.
    if let Some(spec) = first_of(crate::models::ModelKind::OpenAi) {
        llm::OpenAiBackend::from_env_with(&exp.endpoints).map_err(|e| bad(spec, &e))?;
    }
    // So are the embedded model's variables (files named there must exist).
    if let Some(spec) = first_of(crate::models::ModelKind::Embedded) {
        llm::check_embedded_env().map_err(|e| bad(spec, &e))?;
    }
    for env in &exp.envs {
        env.preflight(exp)?;
    }
    Ok(())
}

/// An experiment's results as the store holds them: one status-mode walk of its
/// drive, which every reader of a command (tables, report, plan, export, gc's keep
/// list, shard owners) takes instead of walking again.
#[derive(Debug, Default)]
pub struct Located {
    /// Every computed output with its cell, the summary's curve and every grid
    /// node's cell, in drive order.
    pub run: RunOutput,
    /// The state of every node (fresh, would run, blocked, planned), in drive order.
    pub reports: Vec<NodeReport>,
    cells: std::collections::HashMap<String, usize>,
}

impl Located {
    /// Results from a drive's output and its session's reports.
    pub fn new(run: RunOutput, reports: Vec<NodeReport>) -> Located {
        let cells = run
            .cells
            .iter()
            .enumerate()
            .map(|(i, (n, _))| (n.clone(), i))
            .collect();
        Located {
            run,
            reports,
            cells,
        }
    }

    /// The grid cell of node `node` (computed or not); `None` outside the grid.
    pub fn cell(&self, node: &str) -> Option<&crate::env::Cell> {
        self.cells.get(node).map(|&i| &self.run.cells[i].1)
    }
}

/// How many times this process has walked an experiment's drive to locate its
/// results ([`locate`]): a command walks once per experiment it reads
/// (`OTB_TRACE_WALKS=1` makes `otb` print the count when it ends; a test holds it
/// to one).
pub fn walks() -> usize {
    WALKS.load(std::sync::atomic::Ordering::Relaxed)
}

static WALKS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The one way readers locate an experiment's results: the driver in status mode
/// (nothing runs, no model is loaded), quietly, with the status of every node so a
/// reader can say what is missing. Call it once per command and pass the
/// [`Located`] on.
pub fn locate(exp: &Experiment, store: &Store) -> Result<Located, DriveError> {
    WALKS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let s = Session::new(store, Mode::Status, true);
    let out = drive(exp, &s)?;
    Ok(Located::new(out, s.reports()))
}

/// The class of `e` when it is one of the workspace's classified errors (the
/// binary walks an error's causes and takes the first that has one). It lives here,
/// above every module that defines one of them.
pub fn class_of(e: &(dyn std::error::Error + 'static)) -> Option<ErrorClass> {
    fn class_as<T: pipeline::Classify + std::error::Error + 'static>(
        e: &(dyn std::error::Error + 'static),
    ) -> Option<ErrorClass> {
        e.downcast_ref::<T>().map(pipeline::Classify::class)
    }
    class_as::<crate::InputError>(e)
        .or_else(|| class_as::<crate::Failure>(e))
        .or_else(|| class_as::<crate::experiment::ConfigError>(e))
        .or_else(|| class_as::<crate::env::DriveError>(e))
        .or_else(|| class_as::<pipeline::StageError>(e))
        .or_else(|| class_as::<pipeline::StoreError>(e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Failure, InputError};
    use pipeline::StageError;

    #[test]
    fn drive_errors_are_classified_by_what_they_carry() {
        use crate::env::DriveError;
        let d = DriveError::from(StageError::bug("x", "broken"));
        assert_eq!(class_of(&d), Some(ErrorClass::Bug));
        let d = DriveError::from(InputError("bad".into()));
        assert_eq!(class_of(&d), Some(ErrorClass::User));
        let d = DriveError::from(Failure::infra("disk"));
        assert_eq!(class_of(&d), Some(ErrorClass::Infrastructure));
        let plain = std::io::Error::other("x");
        assert_eq!(class_of(&plain), None);
    }
}
