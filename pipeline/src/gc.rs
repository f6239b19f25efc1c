//! Garbage collection: remove entries no kept experiment reaches.
//!
//! What to keep is computed by walking experiments in status mode. A walk that stops
//! early (a corrupt upstream entry, a node that would run, an error) cannot say which
//! downstream entries it would still reuse -- after an early cutoff, all of them -- so
//! a [`KeepSet`] remembers whether every walk reached every node, and [`Store::gc`]
//! refuses to collect with one that did not. Only paths of the store's own shape are
//! ever removed; anything else under the root is listed and left alone.

use crate::digest::Digest;
use crate::engine::{NodeReport, NodeState};
use crate::error::{StoreError, StoreErrorKind};
use crate::layout;
use crate::store::{dir_size, Access, Store};
use std::collections::BTreeSet;
use std::fs;
use std::path::PathBuf;

/// The keys to keep, built only from complete walks of experiments.
#[derive(Clone, Debug, Default)]
pub struct KeepSet {
    keys: BTreeSet<Digest>,
    walks: usize,
    incomplete: Vec<String>,
}

impl KeepSet {
    /// An empty set with no walks recorded (a collection with it refuses).
    pub fn new() -> KeepSet {
        KeepSet::default()
    }

    /// Record one walk (the reports of a status session over the experiment
    /// `label`). Every key in it is kept; the walk is complete only if every node in
    /// it is fresh (or ran).
    pub fn add_walk(&mut self, label: &str, reports: &[NodeReport]) {
        self.walks += 1;
        for r in reports {
            if let Some(k) = &r.key {
                self.keys.insert(k.clone());
            }
            match &r.state {
                NodeState::Fresh | NodeState::Ran => {}
                NodeState::WouldRun { reasons } => self.incomplete.push(format!(
                    "{label}: node `{}` would run ({})",
                    r.node,
                    reasons.join("; ")
                )),
                NodeState::Blocked { on } | NodeState::Planned { after: on } => self
                    .incomplete
                    .push(format!("{label}: node `{}` is not reached ({on})", r.node)),
            }
        }
    }

    /// Record a walk that stopped with an error; a collection with this set refuses.
    pub fn add_failed_walk(&mut self, label: &str, error: &dyn std::fmt::Display) {
        self.walks += 1;
        self.incomplete
            .push(format!("{label}: the walk stopped: {error}"));
    }

    /// True when at least one walk was recorded and every walk reached every node.
    pub fn is_complete(&self) -> bool {
        self.walks > 0 && self.incomplete.is_empty()
    }

    /// Why the set is incomplete, one line per node or walk.
    pub fn incomplete(&self) -> &[String] {
        &self.incomplete
    }

    /// Every key reached by a recorded walk.
    pub fn keys(&self) -> &BTreeSet<Digest> {
        &self.keys
    }

    /// Whether a recorded walk reached `key`.
    pub fn contains(&self, key: &Digest) -> bool {
        self.keys.contains(key)
    }

    fn refusal(&self) -> Option<String> {
        if self.walks == 0 {
            return Some("no experiment was walked, so nothing is known to be needed; name the experiments to keep".into());
        }
        let first = self.incomplete.first()?;
        let more = match self.incomplete.len() {
            1 => String::new(),
            n => format!(" (and {} more)", n - 1),
        };
        Some(format!(
            "a kept experiment is not complete in the store: {first}{more}; run it to completion (`otb run`) before collecting"
        ))
    }
}

/// What [`Store::gc`] removed (or, in a dry run, would remove) and left alone.
#[derive(Clone, Debug, Default)]
pub struct GcReport {
    /// Entry and quarantine directories, with their size in bytes.
    pub removed: Vec<(PathBuf, u64)>,
    /// Paths under the root that are not of the store's shape, and why; never touched.
    pub left_alone: Vec<(PathBuf, String)>,
    /// Number of entries kept because a walk reached them.
    pub kept: usize,
    /// True when nothing was actually removed.
    pub dry_run: bool,
}

impl GcReport {
    /// Total size of the removed directories in bytes (saturating).
    pub fn removed_bytes(&self) -> u64 {
        self.removed
            .iter()
            .fold(0u64, |sum, (_, b)| sum.saturating_add(*b))
    }
}

impl Store {
    /// Remove every entry whose key is not in `keep`, and every quarantined entry.
    /// Refuses ([`StoreErrorKind::IncompleteKeep`]) unless `keep` is complete. With
    /// `dry_run` nothing at all is changed (a read-only store is fine); the report
    /// says what would go. Only directories of the store's own shape are removed.
    pub fn gc(&self, keep: &KeepSet, dry_run: bool) -> Result<GcReport, StoreError> {
        if let Some(why) = keep.refusal() {
            return Err(StoreError::new(
                StoreErrorKind::IncompleteKeep(why),
                self.root(),
            ));
        }
        if !dry_run && self.access() != Access::ReadWrite {
            return Err(StoreError::new(
                StoreErrorKind::NotWritable("opened read-only".into()),
                self.root(),
            ));
        }
        let scan = self.scan()?;
        let mut report = GcReport {
            left_alone: scan.foreign,
            dry_run,
            ..GcReport::default()
        };
        let mut victims = Vec::new();
        for (_, dir) in scan.entries {
            let key = dir
                .file_name()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            if keep.contains(&Digest(key)) {
                report.kept += 1;
                continue;
            }
            match layout::check_entry_contents(&dir) {
                Ok(()) => victims.push(dir),
                Err(why) => report.left_alone.push((dir, why)),
            }
        }
        let qdir = self.root().join("quarantine");
        if let Ok(rd) = fs::read_dir(&qdir) {
            for item in rd {
                let item = item.map_err(|e| StoreError::io(&qdir, e))?;
                let (path, name) = (item.path(), item.file_name());
                if !layout::is_quarantine_name(&name.to_string_lossy()) {
                    report.left_alone.push((
                        path,
                        "not a name the store gives a quarantined entry".into(),
                    ));
                    continue;
                }
                match layout::check_entry_contents(&path) {
                    Ok(()) => victims.push(path),
                    Err(why) => report.left_alone.push((path, why)),
                }
            }
        }
        for dir in victims {
            let size = dir_size(&dir);
            if !dry_run {
                fs::remove_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
            }
            report.removed.push((dir, size));
        }
        report.removed.sort();
        report.left_alone.sort();
        Ok(report)
    }
}
