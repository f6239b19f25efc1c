//! What each method spent, summed from the per-call rows in the store
//! (`toolobserver.md`, "Token accounting"), per setting x method x agent x editor.
//!
//! | column | ToolObserver | baselines | Gold / Base |
//! |---|---|---|---|
//! | exploration | agent turns of rounds before the last (their trajectories fed the editor) | `doc_calls` rows with phase `exploration` (tool play, queries, judging, validation runs; DRAFT's explorer and analyzer) | 0 |
//! | editing | `edits` rows the editor was sent (its rewrites) | `doc_calls` rows with phase `editing` | 0 |
//! | evaluation | agent turns of the last round | agent turns on the method's docs | agent turns |
//!
//! Tokens are prompt + completion (OpenAI counts reasoning inside completion tokens;
//! the reasoning column is reported separately, not added again). Agent turns copied
//! from an earlier round (`reused`) made no call and count 0. `docs` = exploration +
//! editing: the cost of producing the documentation; `ratio` = a method's `docs`
//! divided by ToolObserver's for the same setting, agent and editor.

use crate::env::{Method, Output, RunOutput};
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

/// The stages whose rows are counted, by name (the caller's environment names them).
#[derive(Clone, Copy, Debug)]
pub struct TokenStages<'s> {
    /// The agent's play (`trajectories` rows).
    pub explore: &'s str,
    /// ToolObserver's reflection (`edits` rows).
    pub reflect: &'s str,
    /// The baselines' stages (`doc_calls` rows).
    pub baselines: &'s [&'s str],
}

/// (setting, method, agent, editor)
type Key = (String, String, String, String);

fn key(o: &Output) -> Key {
    (
        o.cell.setting.clone(),
        o.cell.method_name().to_string(),
        o.cell.agent.clone(),
        o.cell.editor.clone(),
    )
}

/// Calls, prompt + completion tokens and reasoning tokens of some rows.
#[derive(Default, Clone, Copy)]
struct Sum {
    calls: i64,
    tokens: i64,
    reasoning: i64,
}

/// The agent's turns that made a call (not `reused`).
fn turns(rows: &[TrajectoryRow]) -> Sum {
    let mut s = Sum::default();
    for r in rows.iter().filter(|r| !r.reused) {
        s.calls += 1;
        s.tokens += r.prompt_tokens + r.completion_tokens;
        s.reasoning += r.reasoning_tokens;
    }
    s
}

/// The token table of a drive: one row per setting, method, agent and editor that
/// has an output of `stages` (an output with no rows counts 0), in key order.
pub fn per_method(run: &RunOutput, stages: &TokenStages) -> Result<Vec<TokenRow>, StageError> {
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
    // ToolObserver's last explored round per (setting, agent, editor).
    // A chain whose first reflection froze everything has no explore beyond round 0:
    // its last round is 0 and Base's turns are its evaluation.
    let mut last: BTreeMap<Key, i64> = BTreeMap::new();
    for o in run.outputs.iter().filter(|o| o.cell.is_toolobserver()) {
        let r = last.entry(key(o)).or_insert(0);
        if o.stage == stages.explore {
            *r = (*r).max(o.cell.round);
        }
    }
    for o in &run.outputs {
        if o.stage == stages.explore {
            let s = turns(&o.entry.read()?);
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
        } else if o.stage == stages.reflect {
            let edits: Vec<EditRow> = o.entry.read()?;
            let e = entry(&mut rows, &key(o));
            for r in edits.iter().filter(|r| r.sent) {
                e.calls += 1;
                e.editing += r.prompt_tokens + r.completion_tokens;
                e.reasoning += r.reasoning_tokens;
            }
        } else if stages.baselines.contains(&o.stage) {
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
    }
    let mut rows: Vec<TokenRow> = rows.into_values().collect();
    for r in rows.iter_mut() {
        r.docs = r.exploration + r.editing;
    }
    let to: BTreeMap<(String, String, String), i64> = rows
        .iter()
        .filter(|r| r.method == Method::ToolObserver.as_str())
        .map(|r| {
            (
                (r.setting.clone(), r.agent.clone(), r.editor.clone()),
                r.docs,
            )
        })
        .collect();
    for r in rows.iter_mut() {
        if r.method == Method::Gold.as_str() || r.method == Method::Base.as_str() {
            continue;
        }
        r.ratio = to
            .get(&(r.setting.clone(), r.agent.clone(), r.editor.clone()))
            .filter(|&&d| d > 0)
            .map(|&d| r.docs as f64 / d as f64);
    }
    Ok(rows)
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::at::{Cell, Step};
    use std::path::Path;

    /// A stored entry under `dir` holding the tables `write` writes into its folder.
    pub(in crate::metrics) fn entry(
        dir: &Path,
        write: impl FnOnce(&Path) -> Vec<(&'static str, pipeline::table::TableMeta)>,
    ) -> pipeline::Entry {
        std::fs::create_dir_all(dir).unwrap();
        let outputs = write(dir)
            .into_iter()
            .map(|(t, m)| (t.to_string(), m))
            .collect();
        let d = pipeline::Digest::of_bytes(b"x");
        pipeline::Entry {
            dir: dir.to_path_buf(),
            manifest: pipeline::Manifest {
                manifest_version: 1,
                key: d.clone(),
                components: pipeline::KeyComponents {
                    stage: "s".into(),
                    code_version: 1,
                    params: serde_json::Value::Null,
                    inputs: Default::default(),
                },
                outputs,
                output_digest: d,
                node: String::new(),
                wall_ms: 0,
                usage: Default::default(),
                created_unix: 0,
            },
        }
    }

    /// `rows` written as their table into `dir`.
    pub(in crate::metrics) fn table<R: Row>(
        dir: &Path,
        rows: &[R],
    ) -> (&'static str, pipeline::table::TableMeta) {
        let meta =
            pipeline::table::write_rows(rows, &dir.join(format!("{}.parquet", R::TABLE))).unwrap();
        (R::TABLE, meta)
    }

    /// A cell of setting `names`, agent `a`.
    pub(in crate::metrics) fn cell(method: Method, editor: &str, round: i64) -> Cell {
        Cell {
            env: "bfcl",
            setting: "names".into(),
            method: Some(method),
            agent: "a".into(),
            editor: editor.into(),
            round,
            step: Step::Play { split: None },
            ..Cell::default()
        }
    }

    pub(in crate::metrics) fn turn(prompt: i64, completion: i64, reused: bool) -> TrajectoryRow {
        TrajectoryRow {
            instance_id: "i".into(),
            round: 0,
            model: "a".into(),
            calls: Vec::new(),
            content: None,
            error_kind: None,
            error: None,
            prompt_tokens: prompt,
            completion_tokens: completion,
            reasoning_tokens: 1,
            latency_ms: 0,
            reused,
        }
    }

    pub(in crate::metrics) fn edit(prompt: i64, completion: i64, sent: bool) -> EditRow {
        EditRow {
            instance_id: "i".into(),
            round: 1,
            model: "e".into(),
            sent,
            reply: None,
            updated: Vec::new(),
            lenient_parses: 0,
            error_kind: None,
            prompt_tokens: prompt,
            completion_tokens: completion,
            reasoning_tokens: 2,
        }
    }

    fn doc_call(phase: &str, prompt: i64, completion: i64) -> DocCallRow {
        DocCallRow {
            instance_id: "i".into(),
            tool: "t".into(),
            method: "easytool".into(),
            step: "s".into(),
            phase: phase.into(),
            role: "editor".into(),
            model: "e".into(),
            error_kind: None,
            prompt_tokens: prompt,
            completion_tokens: completion,
            reasoning_tokens: 0,
        }
    }

    const STAGES: TokenStages = TokenStages {
        explore: "explore",
        reflect: "batch-reflect",
        baselines: &["easytool"],
    };

    #[test]
    fn tokens_are_split_into_exploration_editing_and_evaluation_per_method() {
        let tmp = tempfile::tempdir().unwrap();
        let mut n = 0;
        let mut out = |stage: &'static str, cell: Cell, write: &dyn Fn(&Path) -> Vec<_>| {
            n += 1;
            Output {
                node: format!("{stage}[{n}]"),
                stage,
                cell,
                entry: entry(&tmp.path().join(n.to_string()), write),
            }
        };
        let to = Method::ToolObserver;
        let run = RunOutput {
            outputs: vec![
                // Base's round 0: Base's evaluation and each chain's first exploration.
                out("explore", cell(Method::Base, "", 0), &|d| {
                    vec![table(d, &[turn(10, 5, false), turn(100, 100, true)])]
                }),
                out("batch-reflect", cell(to, "e", 1), &|d| {
                    vec![table(d, &[edit(20, 10, true), edit(1000, 0, false)])]
                }),
                out("explore", cell(to, "e", 1), &|d| {
                    vec![table(d, &[turn(7, 3, false)])]
                }),
                out("batch-reflect", cell(to, "e", 2), &|d| {
                    vec![table(d, &[edit(4, 4, true)])]
                }),
                // The last explored round: the chain's evaluation.
                out("explore", cell(to, "e", 2), &|d| {
                    vec![table(d, &[turn(2, 2, false)])]
                }),
                // A chain whose first reflection froze everything: Base's turns are
                // its evaluation.
                out("batch-reflect", cell(to, "f", 1), &|d| {
                    vec![table(d, &[edit(6, 0, true)])]
                }),
                out("easytool", cell(Method::EasyTool, "e", 0), &|d| {
                    vec![table(
                        d,
                        &[doc_call("exploration", 30, 0), doc_call("editing", 40, 5)],
                    )]
                }),
                out("explore", cell(Method::EasyTool, "e", 0), &|d| {
                    vec![table(d, &[turn(9, 0, false)])]
                }),
                // Not a counted stage.
                out("evaluate", cell(to, "e", 2), &|_| Vec::new()),
            ],
            ..RunOutput::default()
        };
        let rows = per_method(&run, &STAGES).unwrap();
        type Got<'a> = (&'a str, &'a str, i64, i64, i64, i64, i64, i64, Option<f64>);
        let got: Vec<Got> = rows
            .iter()
            .map(|r| {
                (
                    r.method.as_str(),
                    r.editor.as_str(),
                    r.calls,
                    r.exploration,
                    r.editing,
                    r.evaluation,
                    r.reasoning,
                    r.docs,
                    r.ratio,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                ("base", "", 1, 0, 0, 15, 1, 0, None),
                // docs over ToolObserver's with the same editor: 75 / 63.
                ("easytool", "e", 3, 30, 45, 9, 1, 75, Some(75.0 / 63.0)),
                // explore r0 (15) and r1 (10), edits 30 + 8; evaluation r2 (4).
                ("toolobserver", "e", 5, 25, 38, 4, 7, 63, Some(1.0)),
                ("toolobserver", "f", 2, 0, 6, 15, 3, 6, Some(1.0)),
            ]
        );
    }
}
