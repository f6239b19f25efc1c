//! `otb table table4`: Table 4 of the paper (BrowseComp-Domains) -- judged accuracy
//! and tool calls per question per tool set x method, paper beside this run. This
//! run's rows are labelled with their data source: on the substitute corpus they are
//! not BrowseComp-Plus numbers.

use crate::driver::Located;
use crate::experiment::Experiment;
use crate::metrics::{Frame, Framed};
use crate::search::SearchScoreRow;
use crate::tables::report::csv_row;
use pipeline::{Row, StageError};
use serde::{Deserialize, Serialize};

/// The paper's Table 4 (`targets.md`): tool set, model, method, accuracy %, calls.
pub const PAPER: &[(&str, &str, &str, f64, f64)] = &[
    ("domains", "gpt-5", "gold", 22.5, 7.0),
    ("domains", "gpt-5", "base", 18.1, 10.0),
    ("domains", "gpt-5", "toolobserver", 21.9, 6.3),
    ("domains", "gpt-5", "play2prompt", 17.9, 7.8),
    ("domains", "gpt-5", "easytool", 18.9, 8.2),
    ("domains", "gpt-5-mini", "gold", 9.7, 2.8),
    ("domains", "gpt-5-mini", "base", 3.1, 4.1),
    ("domains", "gpt-5-mini", "toolobserver", 3.2, 3.5),
    ("domains", "gpt-5-mini", "play2prompt", 2.8, 3.5),
    ("domains", "gpt-5-mini", "easytool", 7.1, 3.8),
    ("domains+all", "gpt-5", "gold", 27.8, 6.8),
    ("domains+all", "gpt-5", "base", 21.8, 9.3),
    ("domains+all", "gpt-5", "toolobserver", 22.1, 9.5),
    ("domains+all", "gpt-5", "play2prompt", 15.8, 7.2),
    ("domains+all", "gpt-5", "easytool", 17.1, 8.6),
    ("domains+all", "gpt-5-mini", "gold", 12.6, 3.0),
    ("domains+all", "gpt-5-mini", "base", 9.7, 3.7),
    ("domains+all", "gpt-5-mini", "toolobserver", 12.8, 3.3),
    ("domains+all", "gpt-5-mini", "play2prompt", 5.6, 3.5),
    ("domains+all", "gpt-5-mini", "easytool", 8.2, 3.5),
];

/// One cell of Table 4.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "table4",
    doc = "one cell of Table 4 (search): judged accuracy and tool calls per question"
)]
pub struct Table4Row {
    /// `domains` or `domains+all`.
    pub tool_set: String,
    /// Agent model.
    pub model: String,
    /// `gold`, `base`, `toolobserver`, `play2prompt` or `easytool`.
    pub method: String,
    /// `paper (BrowseComp-Plus)` or this run's data source.
    pub source: String,
    /// Editor model spec of the run's +TO and baseline cells; empty for paper rows,
    /// Gold and Base.
    pub editor: String,
    /// Judged accuracy, %.
    pub accuracy_pct: f64,
    /// Bootstrap 2.5th percentile, %.
    pub ci95_lo_pct: Option<f64>,
    /// Bootstrap 97.5th percentile, %.
    pub ci95_hi_pct: Option<f64>,
    /// Tool calls per question.
    pub tool_calls: f64,
    /// Test questions.
    pub questions: Option<i64>,
}

/// Table 4 (search): the paper's cells and this run's, and the notes printed under it.
pub struct Table4 {
    /// The paper's rows, then one row per evaluate node of the run.
    pub rows: Vec<Table4Row>,
    /// The Trace-Free+ column's label (`+TF-prompt`, or `+TF` for a generator marked
    /// as fine-tuned; ` traces` added when trace-based).
    pub tracefree_label: String,
    /// Notes about the run (judges, progress, protocol switches, substitute corpus).
    pub notes: Vec<String>,
}

/// Builds Table 4: the paper's printed cells, then this experiment's judged results
/// from `store`.
pub fn build(exp: &Experiment, located: &Located) -> Result<Table4, StageError> {
    let mut rows: Vec<Table4Row> = PAPER
        .iter()
        .map(|&(s, m, meth, acc, tc)| Table4Row {
            tool_set: s.into(),
            model: m.into(),
            method: meth.into(),
            editor: String::new(),
            source: "paper (BrowseComp-Plus)".into(),
            accuracy_pct: acc,
            ci95_lo_pct: None,
            ci95_hi_pct: None,
            tool_calls: tc,
            questions: None,
        })
        .collect();
    let mut notes = Vec::new();
    let (out, reports) = (&located.run, &located.reports);
    let mut judges = std::collections::BTreeSet::new();
    // One score row per evaluate output: the run's cells.
    let scores = Frame::<SearchScoreRow>::of_stage(out, crate::search::EVALUATE_STAGE)?.firsts();
    let found = scores.len();
    for Framed { cell, row: r, .. } in scores.iter() {
        judges.insert(r.judge.clone());
        rows.push(Table4Row {
            tool_set: cell.setting.clone(),
            model: cell.agent.clone(),
            method: cell.method_name().to_string(),
            editor: cell.editor.clone(),
            source: format!("run: {}", r.source),
            accuracy_pct: 100.0 * r.accuracy,
            ci95_lo_pct: Some(100.0 * r.ci95_lo),
            ci95_hi_pct: Some(100.0 * r.ci95_hi),
            tool_calls: r.tool_calls_per_question,
            questions: Some(r.questions),
        });
    }
    if !judges.is_empty() {
        notes.push(format!(
            "run accuracy judged by: {} (normalised exact match is `exact_accuracy` in the export)",
            judges.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    notes.extend(crate::tables::progress_note(exp, "search", found, reports));
    let switches = exp.env_switches();
    if !switches.is_empty() {
        notes.push(format!("protocol: {}", switches.join("; ")));
    }
    if rows.iter().any(|r| r.source.starts_with("run: substitute")) {
        notes.push(
            "run rows on the substitute corpus (Wikipedia summaries, generated questions) are not BrowseComp-Plus numbers"
                .into(),
        );
    }
    let tracefree_label = crate::tables::tracefree_label(exp, &rows, |r| &r.method, &mut notes);
    Ok(Table4 {
        rows,
        tracefree_label,
        notes,
    })
}

impl crate::tables::report::TableReport for Table4 {
    type Row = Table4Row;
    const NAME: &'static str = "table4";

    fn rows(&self) -> &[Table4Row] {
        &self.rows
    }

    fn render(&self, csv: bool) -> String {
        let mut out = String::new();
        if csv {
            out.push_str("tool_set,model,method,source,editor,accuracy_pct,ci95_lo_pct,ci95_hi_pct,tool_calls,questions\n");
            for r in &self.rows {
                let opt = |v: Option<f64>| v.map(|x| format!("{x:.1}")).unwrap_or_default();
                out.push_str(&csv_row(&[
                    &r.tool_set,
                    &r.model,
                    &r.method,
                    &r.source,
                    &r.editor,
                    &format!("{:.1}", r.accuracy_pct),
                    &opt(r.ci95_lo_pct),
                    &opt(r.ci95_hi_pct),
                    &format!("{:.1}", r.tool_calls),
                    &r.questions.map(|q| q.to_string()).unwrap_or_default(),
                ]));
            }
            return out;
        }
        crate::tables::method_table(
            "Table 4 -- BrowseComp-Domains: judged accuracy % / tool calls per question",
            &self.rows,
            &|r: &Self::Row| crate::tables::report::GridKey {
                tool_set: r.tool_set.clone(),
                model: r.model.clone(),
                source: r.source.clone(),
                editor: r.editor.clone(),
                method: r.method.clone(),
            },
            &|r: &Self::Row| match (r.ci95_lo_pct, r.ci95_hi_pct, r.questions) {
                (Some(lo), Some(hi), Some(n)) => format!(
                    "{:.1} [{lo:.1}, {hi:.1}] / {:.1} (n={n})",
                    r.accuracy_pct, r.tool_calls
                ),
                _ => format!("{:.1} / {:.1}", r.accuracy_pct, r.tool_calls),
            },
            &self.notes,
            &self.tracefree_label,
        )
    }
}
