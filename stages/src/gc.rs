//! `otb gc`: walk every kept experiment in status mode (nothing is changed by the
//! walk) and hand the keys to [`pipeline::Store::gc`], which refuses when any walk is
//! incomplete (a node that would run or is blocked: what lies downstream of it is
//! unknown, so its entries would be collected by mistake) and removes only the
//! store's own entries.

use crate::env::DriveError;
use crate::experiment::Experiment;
use pipeline::{GcReport, KeepSet, Store};
use std::fmt::Write as _;

/// The keys `exps` reference, each walk recorded as complete or not.
pub fn keep_set(store: &Store, exps: &[Experiment]) -> KeepSet {
    let mut keep = KeepSet::new();
    for exp in exps {
        let label = exp.path.display().to_string();
        match crate::driver::locate(exp, store) {
            Ok(located) => keep.add_walk(&label, &located.reports),
            Err(e) => keep.add_failed_walk(&label, &e),
        }
    }
    keep
}

/// Remove (or list, with `dry_run`) every entry no experiment in `exps` references.
pub fn collect(store: &Store, exps: &[Experiment], dry_run: bool) -> Result<GcReport, DriveError> {
    let keep = keep_set(store, exps);
    Ok(store.gc(&keep, dry_run)?)
}

/// The lines `otb gc` prints.
pub fn render(r: &GcReport) -> String {
    let verb = if r.dry_run { "would remove" } else { "removed" };
    let mut out = String::new();
    for (p, bytes) in &r.removed {
        let _ = writeln!(out, "{verb} {} ({bytes} bytes)", p.display());
    }
    for (p, why) in &r.left_alone {
        let _ = writeln!(out, "left alone {} ({why})", p.display());
    }
    let _ = writeln!(
        out,
        "gc: {verb} {} entries, {} bytes; kept {} referenced keys",
        r.removed.len(),
        r.removed_bytes(),
        r.kept
    );
    out
}
