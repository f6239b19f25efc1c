//! `otb table table5`: mean ToolObserver reflection rounds to convergence per setting
//! (the paper's Table 5), plus the per-round curve of E/P/A (the paper's Figure 3) as
//! CSV, Parquet and a PNG plot.
//!
//! Rounds to convergence of one instance = the number of reflection rounds in which it
//! was still live (its docs were sent to the editor, or it was frozen in that round):
//! an instance frozen by round k's unchanged reply counts k; one still changing at the
//! round limit counts K.

use crate::bfcl::summarize::SummaryRow;
use crate::driver::Located;
use crate::experiment::Experiment;
use crate::metrics::{convergence, Frame};
use crate::rows::DocRow;
use crate::tables::report::{csv_row, md_row};
use crate::tables::table2::SETTINGS;
use pipeline::{Row, StageError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

pub use crate::metrics::convergence::RoundExtra;

/// One row of Table 5: mean reflection rounds to convergence of one ToolObserver
/// chain (setting, agent, editor, method).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "table5",
    doc = "mean reflection rounds to convergence per setting and agent model"
)]
pub struct RoundsRow {
    /// Documentation setting.
    pub setting: String,
    /// Agent model.
    pub model: String,
    /// Editor model.
    pub editor: String,
    /// Instances.
    pub instances: i64,
    /// Mean reflection rounds until the docs stopped changing.
    pub mean_rounds: f64,
    /// Instances frozen before the round limit.
    pub converged: i64,
    /// The round limit K of the experiment.
    pub round_limit: i64,
    /// `toolobserver`, or `toolobserver-guard` (successes not sent to the editor).
    pub method: String,
}

/// Table 5 and the per-round curve (Figure 3), with the notes printed under them.
pub struct Table5 {
    /// One row per ToolObserver chain, settings in table order.
    pub rows: Vec<RoundsRow>,
    /// The `summarize` rows of the ToolObserver chains: E/P/A per round.
    pub curve: Vec<SummaryRow>,
    /// Per curve row: instances frozen after that round's reflection, the editor's
    /// tokens in that round, and the agent's tokens in that round's exploration
    /// (turns reused from an earlier round count 0).
    pub round_extra: Vec<RoundExtra>,
    /// Notes about the run (no ToolObserver rounds yet).
    pub notes: Vec<String>,
}

/// Builds Table 5 and the curve from the experiment's outputs in `store`
/// ([`crate::metrics::convergence`] computes them).
pub fn build(exp: &Experiment, located: &Located) -> Result<Table5, StageError> {
    let out = &located.run;
    let mut notes = Vec::new();
    let k = exp.bfcl().map_or(0, |b| b.rounds) as i64;
    let reflect = crate::batch_reflect::STAGE;
    let docs = Frame::<DocRow>::of_stage(out, reflect)?;
    let settings: Vec<&str> = SETTINGS.iter().map(|(s, _)| *s).collect();
    let rows: Vec<RoundsRow> = convergence::rounds_to_convergence(&docs, &settings)
        .into_iter()
        .map(|c| RoundsRow {
            setting: c.setting,
            model: c.agent,
            editor: c.editor,
            instances: c.instances,
            mean_rounds: c.mean_rounds,
            converged: c.converged,
            round_limit: k,
            method: c.method,
        })
        .collect();
    if rows.is_empty() {
        notes.push(format!(
            "{}: no ToolObserver rounds in the store yet (run `otb run {}`)",
            exp.name,
            exp.path.display()
        ));
    }
    let summary: Vec<SummaryRow> = match out.by_stage(crate::bfcl::summarize::STAGE).next() {
        Some(s) => s.entry.read()?,
        None => Vec::new(),
    };
    let curve = convergence::toolobserver_curve(summary);
    let round_extra = convergence::round_extras(
        &docs,
        &Frame::of_stage(out, reflect)?,
        &Frame::of_stage(out, crate::bfcl::explore::STAGE)?,
        &curve,
    );
    Ok(Table5 {
        rows,
        curve,
        round_extra,
        notes,
    })
}

impl crate::tables::report::TableReport for Table5 {
    type Row = RoundsRow;
    const NAME: &'static str = "table5";

    fn rows(&self) -> &[RoundsRow] {
        &self.rows
    }

    fn render(&self, csv: bool) -> String {
        let mut out = String::new();
        if csv {
            out.push_str(
                "setting,model,editor,instances,mean_rounds,converged,round_limit,method\n",
            );
            for r in &self.rows {
                out.push_str(&csv_row(&[
                    &r.setting,
                    &r.model,
                    &r.editor,
                    &r.instances,
                    &format!("{:.4}", r.mean_rounds),
                    &r.converged,
                    &r.round_limit,
                    &r.method,
                ]));
            }
            return out;
        }
        out.push_str("Table 5 -- mean reflection rounds to convergence (paper, GPT-5 / GPT-5-mini: names 3.44 / 2.96, +desc 2.66 / 2.60, +params 2.22 / 2.24)\n\n");
        out.push_str("| Setting | Model | Editor | Instances | Mean rounds | Converged before K | K |\n|---|---|---|---|---|---|---|\n");
        for r in &self.rows {
            out.push_str(&md_row(&[
                &r.setting,
                &r.model,
                &r.editor,
                &r.instances,
                &format!("{:.2}", r.mean_rounds),
                &r.converged,
                &r.round_limit,
            ]));
        }
        out.push_str("\nPer round: E/P/A, instances frozen after the round's reflection, editor and agent tokens of the round:\n\n| Setting | Agent | Editor | Method | Round | n | E | P | A | Frozen | Editor tokens | Agent tokens |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n");
        for (i, c) in self.curve.iter().enumerate() {
            let x = self.round_extra.get(i).copied().unwrap_or_default();
            out.push_str(&md_row(&[
                &c.setting,
                &c.agent,
                &c.editor,
                &c.method,
                &c.round,
                &c.n,
                &format!("{:.3}", c.e),
                &format!("{:.3}", c.p),
                &format!("{:.3}", c.a),
                &x.frozen,
                &x.editor_tokens,
                &x.agent_tokens,
            ]));
        }
        crate::tables::report::end_with_notes(out, &self.notes)
    }

    /// `table5.csv`, `table5.parquet`, `rounds.csv` (the curve) and `rounds.png`.
    fn write(&self, dir: &Path) -> Result<Vec<PathBuf>, StageError> {
        let fail =
            |p: &Path, e: String| StageError::infra("table5", format!("{}: {e}", p.display()));
        std::fs::create_dir_all(dir).map_err(|e| fail(dir, e.to_string()))?;
        let csv = dir.join("table5.csv");
        std::fs::write(&csv, self.render(true)).map_err(|e| fail(&csv, e.to_string()))?;
        let pq = dir.join("table5.parquet");
        pipeline::table::write_rows(&self.rows, &pq)?;
        let curve = dir.join("rounds.csv");
        let mut text = String::from(
            "setting,agent,editor,round,n,E,P,A,E_lo,E_hi,method,frozen,editor_tokens,agent_tokens\n",
        );
        for (i, c) in self.curve.iter().enumerate() {
            let x = self.round_extra.get(i).copied().unwrap_or_default();
            let f4 = |x: f64| format!("{x:.4}");
            text.push_str(&csv_row(&[
                &c.setting,
                &c.agent,
                &c.editor,
                &c.round,
                &c.n,
                &f4(c.e),
                &f4(c.p),
                &f4(c.a),
                &f4(c.e_lo),
                &f4(c.e_hi),
                &c.method,
                &x.frozen,
                &x.editor_tokens,
                &x.agent_tokens,
            ]));
        }
        std::fs::write(&curve, text).map_err(|e| fail(&curve, e.to_string()))?;
        let png = dir.join("rounds.png");
        crate::tables::plot::rounds_png(&self.curve, &png).map_err(|e| fail(&png, e))?;
        Ok(vec![csv, pq, curve, png])
    }
}
