//! `otb table table3`: Table 3 of the paper (chess) -- best-tool % and bootstrap
//! streaming Elo per tool set x method x agent, with the paper's printed values
//! beside this run's (mean Elo as the headline, median and the 95% interval too).

use crate::chess::rows::EloRow;
use crate::driver::Located;
use crate::experiment::Experiment;
use crate::metrics::{Frame, Framed};
use crate::tables::report::csv_row;
use pipeline::{Row, StageError};
use serde::{Deserialize, Serialize};

/// The paper's Table 3 (`targets.md`): tool set, model, method, best-tool %, Elo.
pub const PAPER: &[(&str, &str, &str, f64, f64)] = &[
    ("phase_specialists", "gpt-5", "gold", 64.4, 1411.0),
    ("phase_specialists", "gpt-5", "base", 23.5, 728.0),
    ("phase_specialists", "gpt-5", "toolobserver", 40.1, 1020.0),
    ("phase_specialists", "gpt-5", "play2prompt", 35.8, 966.0),
    ("phase_specialists", "gpt-5", "easytool", 23.2, 761.0),
    ("phase_specialists", "gpt-5-mini", "gold", 52.8, 1243.0),
    ("phase_specialists", "gpt-5-mini", "base", 24.9, 772.0),
    (
        "phase_specialists",
        "gpt-5-mini",
        "toolobserver",
        32.1,
        949.0,
    ),
    (
        "phase_specialists",
        "gpt-5-mini",
        "play2prompt",
        19.5,
        754.0,
    ),
    ("phase_specialists", "gpt-5-mini", "easytool", 25.8, 739.0),
    ("strength_gradient", "gpt-5", "gold", 100.0, 2341.0),
    ("strength_gradient", "gpt-5", "base", 24.9, 1572.0),
    ("strength_gradient", "gpt-5", "toolobserver", 29.1, 1756.0),
    ("strength_gradient", "gpt-5", "play2prompt", 0.25, 1622.0),
    ("strength_gradient", "gpt-5", "easytool", 24.9, 1584.0),
    ("strength_gradient", "gpt-5-mini", "gold", 100.0, 2346.0),
    ("strength_gradient", "gpt-5-mini", "base", 25.7, 1674.0),
    (
        "strength_gradient",
        "gpt-5-mini",
        "toolobserver",
        28.4,
        1778.0,
    ),
    (
        "strength_gradient",
        "gpt-5-mini",
        "play2prompt",
        22.7,
        1481.0,
    ),
    ("strength_gradient", "gpt-5-mini", "easytool", 25.5, 1645.0),
];

/// One cell of Table 3.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "table3",
    doc = "one cell of Table 3 (chess): best-tool % and bootstrap Elo"
)]
pub struct Table3Row {
    /// `phase_specialists` or `strength_gradient`.
    pub tool_set: String,
    /// Agent model.
    pub model: String,
    /// `gold`, `base`, `toolobserver`, `play2prompt` or `easytool`.
    pub method: String,
    /// `paper` or `run`.
    pub source: String,
    /// Editor model spec of the run's +TO and baseline cells; empty for paper rows,
    /// Gold and Base.
    pub editor: String,
    /// Share of tool calls that picked the optimal tool.
    pub best_tool_pct: f64,
    /// Mean bootstrap streaming Elo (the paper's headline).
    pub elo_mean: f64,
    /// Median bootstrap Elo.
    pub elo_median: Option<f64>,
    /// 2.5th percentile.
    pub elo_ci95_lo: Option<f64>,
    /// 97.5th percentile.
    pub elo_ci95_hi: Option<f64>,
    /// Test games.
    pub games: Option<i64>,
    /// Agent tool calls.
    pub tool_calls: Option<i64>,
}

/// Table 3 (chess): the paper's cells and this run's, and the notes printed under it.
pub struct Table3 {
    /// The paper's rows, then one row per Elo node of the run.
    pub rows: Vec<Table3Row>,
    /// The Trace-Free+ column's label (`+TF-prompt`, or `+TF` for a generator marked
    /// as fine-tuned; ` traces` added when trace-based).
    pub tracefree_label: String,
    /// Notes about the run (its progress and protocol switches).
    pub notes: Vec<String>,
}

/// Builds Table 3: the paper's printed cells, then this experiment's Elo results
/// from `store`.
pub fn build(exp: &Experiment, located: &Located) -> Result<Table3, StageError> {
    let mut rows: Vec<Table3Row> = PAPER
        .iter()
        .map(|&(s, m, meth, acc, elo)| Table3Row {
            tool_set: s.into(),
            model: m.into(),
            method: meth.into(),
            editor: String::new(),
            source: "paper".into(),
            best_tool_pct: acc,
            elo_mean: elo,
            elo_median: None,
            elo_ci95_lo: None,
            elo_ci95_hi: None,
            games: None,
            tool_calls: None,
        })
        .collect();
    let mut notes = Vec::new();
    let (out, reports) = (&located.run, &located.reports);
    // One Elo row per Elo output: the run's cells.
    let elo = Frame::<EloRow>::of_stage(out, crate::chess::ELO_STAGE)?.firsts();
    let found = elo.len();
    for Framed { cell, row: e, .. } in elo.iter() {
        rows.push(Table3Row {
            tool_set: cell.setting.clone(),
            model: cell.agent.clone(),
            method: cell.method_name().to_string(),
            editor: cell.editor.clone(),
            source: "run".into(),
            best_tool_pct: e.best_tool_pct,
            elo_mean: e.mean,
            elo_median: Some(e.median),
            elo_ci95_lo: Some(e.ci95_lo),
            elo_ci95_hi: Some(e.ci95_hi),
            games: Some(e.games),
            tool_calls: Some(e.tool_calls),
        });
    }
    notes.extend(crate::tables::progress_note(exp, "chess", found, reports));
    let switches = exp.env_switches();
    if !switches.is_empty() {
        notes.push(format!("protocol: {}", switches.join("; ")));
    }
    let tracefree_label = crate::tables::tracefree_label(exp, &rows, |r| &r.method, &mut notes);
    Ok(Table3 {
        rows,
        tracefree_label,
        notes,
    })
}

impl crate::tables::report::TableReport for Table3 {
    type Row = Table3Row;
    const NAME: &'static str = "table3";

    fn rows(&self) -> &[Table3Row] {
        &self.rows
    }

    fn render(&self, csv: bool) -> String {
        let mut out = String::new();
        if csv {
            out.push_str("tool_set,model,method,source,editor,best_tool_pct,elo_mean,elo_median,elo_ci95_lo,elo_ci95_hi,games\n");
            for r in &self.rows {
                let opt = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_default();
                out.push_str(&csv_row(&[
                    &r.tool_set,
                    &r.model,
                    &r.method,
                    &r.source,
                    &r.editor,
                    &format!("{:.1}", r.best_tool_pct),
                    &format!("{:.1}", r.elo_mean),
                    &opt(r.elo_median),
                    &opt(r.elo_ci95_lo),
                    &opt(r.elo_ci95_hi),
                    &r.games.map(|g| g.to_string()).unwrap_or_default(),
                ]));
            }
            return out;
        }
        crate::tables::method_table(
            "Table 3 -- Chess: best-tool % / bootstrap Elo (mean; run rows add the median and the 95% interval, and the number of test games)",
            &self.rows,
            &|r: &Self::Row| crate::tables::report::GridKey {
                tool_set: r.tool_set.clone(),
                model: r.model.clone(),
                source: r.source.clone(),
                editor: r.editor.clone(),
                method: r.method.clone(),
            },
            &|r: &Self::Row| match (r.elo_median, r.elo_ci95_lo, r.elo_ci95_hi, r.games) {
                (Some(med), Some(lo), Some(hi), Some(g)) => format!(
                    "{:.1} / {:.0} (median {med:.0}, 95% [{lo:.0}, {hi:.0}], {g} games)",
                    r.best_tool_pct, r.elo_mean
                ),
                _ => format!("{:.1} / {:.0}", r.best_tool_pct, r.elo_mean),
            },
            &self.notes,
            &self.tracefree_label,
        )
    }
}
