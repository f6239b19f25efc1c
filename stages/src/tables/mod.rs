//! Renderers: tables, plots and exports read from the store. Each locates an
//! experiment's results the same way ([`crate::driver::locate`]: the driver in status
//! mode), so a renderer never recomputes a stage.

pub mod export;
pub mod fidelity;
pub mod plot;
pub mod report;
pub mod sft;
pub mod table2;
pub mod table3;
pub mod table4;
pub mod table5;
pub mod table7;
pub mod tokens;

use crate::experiment::Experiment;

/// The note an environment table ends with about the run: nothing in the store yet
/// (`found` = 0 run cells: run it first), or how many stages are still to compute
/// (finished cells are shown).
pub fn progress_note(
    exp: &Experiment,
    what: &str,
    found: usize,
    reports: &[pipeline::NodeReport],
) -> Option<String> {
    let pending = reports
        .iter()
        .filter(|r| !matches!(r.state, pipeline::NodeState::Fresh))
        .count();
    if found == 0 {
        Some(format!(
            "{}: no {what} results in the store yet (run `otb run {}`)",
            exp.name,
            exp.path.display()
        ))
    } else if pending > 0 {
        Some(format!(
            "{}: {pending} stages not computed yet; finished cells are shown",
            exp.name
        ))
    } else {
        None
    }
}

/// The Trace-Free+ column's label for `exp` (`+TF`, or `+TF traces` when it is
/// trace-based); when a row of `rows` has that method, a note says it is beyond the
/// paper's tables.
pub fn tracefree_label<R>(
    exp: &Experiment,
    rows: &[R],
    method: impl Fn(&R) -> &String,
    notes: &mut Vec<String>,
) -> String {
    let k = exp.baselines.tracefree.traces;
    let label = if k > 0 { "+TF traces" } else { "+TF" };
    if rows.iter().any(|r| method(r) == "tracefree") {
        notes.push(match k {
            0 => format!("{label} = Trace-Free+ (trace-free: each tool's interface alone), a method beyond the paper's tables"),
            k => format!("{label} = Trace-Free+ (trace-based: up to {k} recorded calls per tool), a method beyond the paper's tables"),
        });
    }
    label.to_string()
}

/// An environment table as text: the title, one grid of methods (rows keyed by tool
/// set, model and source), then the notes.
pub fn method_table<R>(
    title: &str,
    rows: &[R],
    key: &dyn Fn(&R) -> report::GridKey,
    cell: &dyn Fn(&R) -> String,
    notes: &[String],
    tracefree_label: &str,
) -> String {
    let mut out = format!("{title}\n\n");
    out.push_str(&report::method_grid_with(rows, key, cell, tracefree_label));
    for n in notes {
        out.push_str(&format!("\nNote: {n}\n"));
    }
    out
}
