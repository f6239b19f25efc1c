//! Stage `summarize`: per (setting, round) aggregates of the instance scores --
//! E, P, A and corrected A as means over instances, with bootstrap 95%
//! percentile intervals over instances, and error counts.

use crate::rows::ScoreRow;
use datasets::stats::bootstrap_mean_ci;
use pipeline::{Handle, Row, StageCtx, StageError};
use serde::{Deserialize, Serialize};

/// The stage name.
pub const STAGE: &str = "summarize";
/// 3: the interval is `datasets::stats::bootstrap_mean_ci` (unbiased draws,
/// interpolated percentiles), shared with the other environments.
/// 4: means summed in row order (polars summed in stripes, which can differ in
/// the last bit).
pub const VERSION: u32 = 4;
/// Bootstrap settings (part of the key).
pub const BOOTSTRAP: (u32, u64) = (1000, 0);

/// One aggregate of the summary: E, P and A of one score table (a setting, method,
/// agent, editor and round), with bootstrap intervals.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "summary",
    doc = "E/P/A per setting and round with bootstrap 95% intervals"
)]
pub struct SummaryRow {
    /// Setting/round label.
    pub label: String,
    /// Documentation setting.
    pub setting: String,
    /// `gold`, `base`, `toolobserver`, `easytool`, `play2prompt` or `draft`.
    pub method: String,
    /// Agent model spec.
    pub agent: String,
    /// Editor model spec (empty: none).
    pub editor: String,
    /// ToolObserver round (0 = base docs).
    pub round: i64,
    /// Instances.
    pub n: i64,
    /// Execution accuracy.
    pub e: f64,
    /// Parameter accuracy.
    pub p: f64,
    /// AST accuracy (reference behaviour).
    pub a: f64,
    /// AST accuracy with the hallucination check.
    pub a_corrected: f64,
    /// E, bootstrap 2.5th percentile.
    pub e_lo: f64,
    /// E, bootstrap 97.5th percentile.
    pub e_hi: f64,
    /// P, 2.5th percentile.
    pub p_lo: f64,
    /// P, 97.5th percentile.
    pub p_hi: f64,
    /// A, 2.5th percentile.
    pub a_lo: f64,
    /// A, 97.5th percentile.
    pub a_hi: f64,
    /// Instances whose model call failed (error rows).
    pub errors: i64,
}

/// Mean of `xs`, summed in order (NaN for none).
fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    xs.iter().sum::<f64>() / xs.len() as f64
}

/// One score table to aggregate, with where it sits in the experiment's grid.
#[derive(Clone, Debug)]
pub struct SummaryInput {
    /// Unique within a drive (part of the stage key).
    pub label: String,
    /// The documentation setting.
    pub setting: String,
    /// The method.
    pub method: String,
    /// Agent model spec.
    pub agent: String,
    /// Editor model spec (empty: none).
    pub editor: String,
    /// The documentation round.
    pub round: i64,
    /// Pending in status mode when not computed yet.
    pub entry: Handle,
}

impl SummaryInput {
    /// The summary's inputs from a drive's `RunOutput::curve` entries.
    pub fn from_curve(curve: &[(String, crate::env::Cell, Handle)]) -> Vec<SummaryInput> {
        curve
            .iter()
            .map(|(tag, c, e)| SummaryInput {
                label: tag.clone(),
                setting: c.setting.clone(),
                method: c.method_name().to_string(),
                agent: c.agent.clone(),
                editor: c.editor.clone(),
                round: c.round,
                entry: e.clone(),
            })
            .collect()
    }
}

/// Aggregate the score tables.
pub fn summarize(inputs: &[SummaryInput]) -> Result<Vec<SummaryRow>, StageError> {
    let mut out = Vec::new();
    for input in inputs {
        let (label, entry) = (&input.label, input.entry.get()?);
        let rows: Vec<ScoreRow> = entry.read()?;
        let col = |f: fn(&ScoreRow) -> f64| rows.iter().map(f).collect::<Vec<f64>>();
        let (e, p, a) = (
            col(|r| if r.e { 1.0 } else { 0.0 }),
            col(|r| r.p),
            col(|r| r.a),
        );
        let errors = rows.iter().filter(|r| r.error_kind.is_some()).count() as i64;
        let (bn, seed) = BOOTSTRAP;
        let (e_lo, e_hi) = bootstrap_mean_ci(&e, bn, seed);
        let (p_lo, p_hi) = bootstrap_mean_ci(&p, bn, seed);
        let (a_lo, a_hi) = bootstrap_mean_ci(&a, bn, seed);
        out.push(SummaryRow {
            label: label.clone(),
            setting: input.setting.clone(),
            method: input.method.clone(),
            agent: input.agent.clone(),
            editor: input.editor.clone(),
            round: input.round,
            n: rows.len() as i64,
            e: mean(&e),
            p: mean(&p),
            a: mean(&a),
            a_corrected: mean(&col(|r| r.a_corrected)),
            e_lo,
            e_hi,
            p_lo,
            p_hi,
            a_lo,
            a_hi,
            errors,
        });
    }
    Ok(out)
}

/// Runs `summarize`: one summary row per input score table.
pub fn run(ctx: &mut StageCtx<'_>, inputs: &[SummaryInput]) -> Result<(), StageError> {
    let rows = summarize(inputs)?;
    ctx.write(&rows)?;
    Ok(())
}
