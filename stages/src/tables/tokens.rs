//! `otb table tokens`: what each method spent, summed from the per-call rows in the
//! store (`toolobserver.md`, "Token accounting"), per setting x method x agent x editor.
//!
//! | column | ToolObserver | baselines | Gold / Base |
//! |---|---|---|---|
//! | exploration | agent turns of rounds before the last (their trajectories fed the editor) | `doc_calls` rows with phase `exploration` (tool play, queries, judging, validation runs; DRAFT's explorer and analyzer) | 0 |
//! | editing | `edits` rows (the editor's rewrites) | `doc_calls` rows with phase `editing` | 0 |
//! | evaluation | agent turns of the last round | agent turns on the method's docs | agent turns |
//!
//! Tokens are prompt + completion (OpenAI counts reasoning inside completion tokens;
//! the reasoning column is reported separately, not added again). Agent turns copied
//! from an earlier round (`reused`) made no call and count 0. `docs` = exploration +
//! editing: the cost of producing the documentation; `ratio` = a method's `docs`
//! divided by ToolObserver's for the same setting, agent and editor.

use crate::driver::Located;
use crate::driver::Output;
use crate::env::Method;
use crate::experiment::Experiment;
use crate::rows::{DocCallRow, EditRow, TrajectoryRow};
use pipeline::{Row, StageError};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One row of the token table: what one method spent for one setting, agent and
/// editor.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "tokens",
    doc = "tokens per method: exploration, editing, evaluation"
)]
pub struct TokenRow {
    /// Documentation setting.
    pub setting: String,
    /// `gold`, `base`, `toolobserver`, `easytool`, `play2prompt`, `draft` or `tracefree`.
    pub method: String,
    /// Agent model.
    pub agent: String,
    /// Editor model (empty: none).
    pub editor: String,
    /// Model calls made.
    pub calls: i64,
    /// Tokens spent observing tools.
    pub exploration: i64,
    /// Tokens spent writing documentation.
    pub editing: i64,
    /// Agent tokens on the final documentation.
    pub evaluation: i64,
    /// Reasoning tokens (already inside the columns above).
    pub reasoning: i64,
    /// Exploration + editing.
    pub docs: i64,
    /// `docs` / ToolObserver's `docs` (same setting, agent, editor); null without one.
    pub ratio: Option<f64>,
}

type Key = (String, String, String, String);

#[derive(Default, Clone, Copy)]
struct Sum {
    calls: i64,
    tokens: i64,
    reasoning: i64,
}

fn traj_sum(o: &Output) -> Result<Sum, StageError> {
    let rows: Vec<TrajectoryRow> = o.entry.read()?;
    let mut s = Sum::default();
    for r in rows.iter().filter(|r| !r.reused) {
        s.calls += 1;
        s.tokens += r.prompt_tokens + r.completion_tokens;
        s.reasoning += r.reasoning_tokens;
    }
    Ok(s)
}

/// The token table and the notes printed under it.
pub struct Tokens {
    /// One row per setting, method, agent and editor.
    pub rows: Vec<TokenRow>,
    /// Notes about the run (no results yet).
    pub notes: Vec<String>,
}

/// Sum the token columns of every per-call row the experiment's stages wrote.
pub fn compute(outputs: &[Output]) -> Result<Vec<TokenRow>, StageError> {
    let mut rows: BTreeMap<Key, TokenRow> = BTreeMap::new();
    fn entry<'m>(rows: &'m mut BTreeMap<Key, TokenRow>, k: &Key) -> &'m mut TokenRow {
        rows.entry(k.clone()).or_insert_with(|| TokenRow {
            setting: k.0.clone(),
            method: k.1.clone(),
            agent: k.2.clone(),
            editor: k.3.clone(),
            ..Default::default()
        })
    }
    let key = |o: &Output| -> Key {
        (
            o.cell.setting.clone(),
            o.cell.method_name().to_string(),
            o.cell.agent.clone(),
            o.cell.editor.clone(),
        )
    };
    // ToolObserver's last explored round per (setting, agent, editor).
    // A chain whose first reflection froze everything has no explore beyond round 0:
    // its last round is 0 and Base's turns are its evaluation.
    let mut last: BTreeMap<Key, i64> = BTreeMap::new();
    for o in outputs.iter().filter(|o| o.cell.is_toolobserver()) {
        let k = key(o);
        let r = last.entry(k).or_insert(0);
        if o.stage == crate::bfcl::explore::STAGE {
            *r = (*r).max(o.cell.round);
        }
    }
    for o in outputs {
        match o.stage {
            crate::bfcl::explore::STAGE => {
                let s = traj_sum(o)?;
                let mut add = |k: Key, exploration: bool| {
                    let e = entry(&mut rows, &k);
                    e.calls += s.calls;
                    e.reasoning += s.reasoning;
                    if exploration {
                        e.exploration += s.tokens;
                    } else {
                        e.evaluation += s.tokens;
                    }
                };
                if o.cell.is_toolobserver() {
                    let final_round = last.get(&key(o)).copied().unwrap_or(0);
                    add(key(o), o.cell.round < final_round);
                } else {
                    add(key(o), false);
                }
                // Round 0 (Base) is also each ToolObserver chain's first exploration
                // (its evaluation when the chain never got past it).
                if o.cell.is(Method::Base) {
                    for ((setting, method, agent, editor), &final_round) in &last {
                        if setting == &o.cell.setting && agent == &o.cell.agent {
                            add(
                                (
                                    setting.clone(),
                                    method.clone(),
                                    agent.clone(),
                                    editor.clone(),
                                ),
                                final_round > 0,
                            );
                        }
                    }
                }
            }
            crate::batch_reflect::STAGE => {
                let edits: Vec<EditRow> = o.entry.read()?;
                let e = entry(&mut rows, &key(o));
                for r in edits.iter().filter(|r| r.sent) {
                    e.calls += 1;
                    e.editing += r.prompt_tokens + r.completion_tokens;
                    e.reasoning += r.reasoning_tokens;
                }
            }
            s if crate::experiment::BASELINES.contains(&s) => {
                let calls: Vec<DocCallRow> = o.entry.read()?;
                let e = entry(&mut rows, &key(o));
                for r in &calls {
                    e.calls += 1;
                    let t = r.prompt_tokens + r.completion_tokens;
                    if r.phase == "editing" {
                        e.editing += t;
                    } else {
                        e.exploration += t;
                    }
                    e.reasoning += r.reasoning_tokens;
                }
            }
            _ => {}
        }
    }
    let mut rows: Vec<TokenRow> = rows.into_values().collect();
    for r in rows.iter_mut() {
        r.docs = r.exploration + r.editing;
    }
    let to: BTreeMap<(String, String, String), i64> = rows
        .iter()
        .filter(|r| r.method == "toolobserver")
        .map(|r| {
            (
                (r.setting.clone(), r.agent.clone(), r.editor.clone()),
                r.docs,
            )
        })
        .collect();
    for r in rows.iter_mut() {
        if r.method == "gold" || r.method == "base" {
            continue;
        }
        r.ratio = to
            .get(&(r.setting.clone(), r.agent.clone(), r.editor.clone()))
            .filter(|&&d| d > 0)
            .map(|&d| r.docs as f64 / d as f64);
    }
    Ok(rows)
}

/// Builds the token table from the experiment's outputs in `store`.
pub fn build(exp: &Experiment, located: &Located) -> Result<Tokens, StageError> {
    let (out, _) = (&located.run, &located.reports);
    let rows = compute(&out.outputs)?;
    let mut notes = Vec::new();
    if rows.is_empty() {
        notes.push(format!(
            "{}: no results in the store yet (run `otb run {}`)",
            exp.name,
            exp.path.display()
        ));
    }
    Ok(Tokens { rows, notes })
}

/// The header line of the table's CSV form.
pub const CSV_HEADER: &str =
    "setting,method,agent,editor,calls,exploration,editing,evaluation,reasoning,docs,ratio";

use crate::tables::report::{csv_row, md_row};

impl crate::tables::report::TableReport for Tokens {
    type Row = TokenRow;
    const NAME: &'static str = "tokens";

    fn rows(&self) -> &[TokenRow] {
        &self.rows
    }

    fn render(&self, csv: bool) -> String {
        let ratio = |r: &TokenRow| r.ratio.map(|x| format!("{x:.2}")).unwrap_or_default();
        let mut out = String::new();
        if csv {
            out.push_str(CSV_HEADER);
            out.push('\n');
            for r in &self.rows {
                out.push_str(&csv_row(&[
                    &r.setting,
                    &r.method,
                    &r.agent,
                    &r.editor,
                    &r.calls,
                    &r.exploration,
                    &r.editing,
                    &r.evaluation,
                    &r.reasoning,
                    &r.docs,
                    &ratio(r),
                ]));
            }
            return out;
        }
        out.push_str("Tokens per method (prompt + completion), summed from the per-call rows in the store.\n");
        out.push_str("docs = exploration + editing; ratio = docs / ToolObserver's docs (paper: P2P 3.5-7.5x).\n\n");
        out.push_str("| Setting | Method | Agent | Editor | Calls | Exploration | Editing | Evaluation | Docs | Ratio |\n|---|---|---|---|---|---|---|---|---|---|\n");
        for r in &self.rows {
            out.push_str(&md_row(&[
                &r.setting,
                &r.method,
                &r.agent,
                &r.editor,
                &r.calls,
                &r.exploration,
                &r.editing,
                &r.evaluation,
                &r.docs,
                &ratio(r),
            ]));
        }
        crate::tables::report::end_with_notes(out, &self.notes)
    }
}
