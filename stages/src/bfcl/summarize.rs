//! Stage `summarize`: per (setting, round) aggregates of the instance scores --
//! E, P, A and corrected A as means over instances, with bootstrap 95%
//! percentile intervals over instances, and error counts.

use crate::env::Cell;
use crate::metrics::accuracy;
use pipeline::{Handle, StageCtx, StageError};

pub use crate::rows::SummaryRow;

/// The stage name.
pub const STAGE: &str = "summarize";
/// 3: the interval is `datasets::stats::bootstrap_mean_ci` (unbiased draws,
/// interpolated percentiles), shared with the other environments.
/// 4: means summed in row order (polars summed in stripes, which can differ in
/// the last bit).
pub const VERSION: u32 = 4;
/// Bootstrap settings (part of the key).
pub const BOOTSTRAP: (u32, u64) = (1000, 0);

/// One score table to aggregate, with where it sits in the experiment's grid.
#[derive(Clone, Debug)]
pub struct SummaryInput {
    /// Unique within a drive (part of the stage key).
    pub label: String,
    /// Pending in status mode when not computed yet.
    pub entry: Handle,
    /// The grid cell of the score table.
    pub cell: Cell,
}

impl SummaryInput {
    /// The summary's inputs from a drive's `RunOutput::curve` entries.
    pub fn from_curve(curve: &[(String, Cell, Handle)]) -> Vec<SummaryInput> {
        curve
            .iter()
            .map(|(tag, c, e)| SummaryInput {
                label: tag.clone(),
                entry: e.clone(),
                cell: c.clone(),
            })
            .collect()
    }

    /// Its coordinates as the stage's key names them: setting, method, agent,
    /// editor, round.
    pub fn grid(&self) -> [String; 5] {
        let c = &self.cell;
        [
            c.setting.clone(),
            c.method_name().to_string(),
            c.agent.clone(),
            c.editor.clone(),
            c.round.to_string(),
        ]
    }
}

/// Aggregate the score tables (each must be computed): one
/// [`accuracy::summary`] per input, in input order.
pub fn summarize(inputs: &[SummaryInput]) -> Result<Vec<SummaryRow>, StageError> {
    let mut curve = Vec::with_capacity(inputs.len());
    for i in inputs {
        i.entry.get()?;
        curve.push((i.label.clone(), i.cell.clone(), i.entry.clone()));
    }
    accuracy::summaries(&curve, BOOTSTRAP)
}

/// Runs `summarize`: one summary row per input score table.
pub fn run(ctx: &mut StageCtx<'_>, inputs: &[SummaryInput]) -> Result<(), StageError> {
    let rows = summarize(inputs)?;
    ctx.write(&rows)?;
    Ok(())
}
