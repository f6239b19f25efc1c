//! `otb gc`: which store entries the kept experiments reference, and removing the
//! rest. Refuses when an experiment's walk is incomplete (a node that would run or
//! is blocked: what lies downstream of it is unknown, so its entries would be
//! collected by mistake).

use crate::env::DriveError;
use crate::experiment::Experiment;
use pipeline::{Digest, Mode, NodeState, Session, Store};
use std::collections::BTreeSet;
use std::fmt;

/// What `gc` did or, with `dry_run`, would do.
#[derive(Debug, Default)]
pub struct GcReport {
    pub dry_run: bool,
    pub kept: usize,
    /// `(path, bytes)` removed or to be removed.
    pub removed: Vec<(std::path::PathBuf, u64)>,
}

impl fmt::Display for GcReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.dry_run { "would remove" } else { "removed" };
        for (p, bytes) in &self.removed {
            writeln!(f, "{verb} {} ({bytes} bytes)", p.display())?;
        }
        let total: u64 = self.removed.iter().map(|(_, b)| b).sum();
        writeln!(
            f,
            "gc: {verb} {} entries, {total} bytes; kept {} referenced keys",
            self.removed.len(),
            self.kept
        )
    }
}

/// The keys `exps` reference. Every node must be fresh: otherwise the walk stopped
/// early and the error names the first node that is not.
pub fn keep_set(store: &Store, exps: &[Experiment]) -> Result<BTreeSet<Digest>, DriveError> {
    let mut keys = BTreeSet::new();
    for exp in exps {
        let mut session = Session::new(store, Mode::Status, true);
        crate::driver::drive(exp, &mut session)?;
        if let Some(r) = session
            .reports()
            .iter()
            .find(|r| !matches!(r.state, NodeState::Fresh))
        {
            return Err(DriveError::Stage(pipeline::StageError::failed(
                "gc",
                format!(
                    "{}: node {} is not complete in the store, so what depends on it cannot be \
                     known; nothing was removed (finish the run with `otb run {}`, or drop it \
                     from --keep)",
                    exp.name,
                    r.node,
                    exp.path.display()
                ),
            )));
        }
        keys.extend(session.reports().iter().filter_map(|r| r.key.clone()));
    }
    Ok(keys)
}

/// Remove (or list, with `dry_run`) every entry no experiment in `exps` references.
pub fn collect(store: &Store, exps: &[Experiment], dry_run: bool) -> Result<GcReport, DriveError> {
    let keys = keep_set(store, exps)?;
    let removed = if dry_run {
        store
            .entries()?
            .into_iter()
            .filter(|(_, dir)| {
                let k = dir
                    .file_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                !keys.contains(&Digest(k))
            })
            .map(|(_, dir)| (dir, 0))
            .collect()
    } else {
        store.gc(&keys)?
    };
    Ok(GcReport {
        dry_run,
        kept: keys.len(),
        removed,
    })
}
