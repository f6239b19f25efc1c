//! The SFT pairs of an offline environment's ToolObserver curves (`otb export
//! --sft`), shared by chess and search: each names its stages and scores its own
//! training play ([`Curves`]).
//!
//! Selected on the **training** split only. Round `r` of a curve plays the training
//! split with the docs of round `r` (`r` = 0..K-1; the last docs, round K, are played
//! on the test split only), so the pair's target is the description of the round
//! `r` >= 1 whose training play scored best, when that beats round 0 (the original
//! docs) on the same split. No test-split row is read. Traces are the round-0
//! training play as the editor read it.

use crate::baselines::{tool_description, tool_name, tools_of};
use crate::env::{Output, RunOutput, SHARED};
use crate::reading::{changed, traces_of, SftPair, SELECTED_ON_TRAIN};
use crate::rows::DocRow;
use pipeline::StageError;
use serde_json::Value;
use std::collections::BTreeSet;

/// One training play of an offline curve: its score and the texts the editor read.
pub struct TrainPlay {
    /// The play's score on the environment's scale (`None`: nothing to score).
    pub score: Option<f64>,
    /// Each episode or game as the editor read it.
    pub texts: Vec<String>,
}

/// What an offline environment's pairs are read from.
pub struct Curves<'a> {
    /// Its stage of a tool set's gold and opaque docs (the opaque ones: Base's).
    pub docs_stage: &'a str,
    /// Its exploration stage (a training play per round).
    pub explore_stage: &'a str,
    /// A stage that judges a training play and whose rows the editor read instead
    /// (search's judge), if any.
    pub judge_stage: Option<&'a str>,
    /// The score of a training play.
    pub score: &'a ScoreFn<'a>,
}

/// Scores a training play: `(tool set, the play, its judge's output, the original
/// tools)`.
pub type ScoreFn<'a> =
    dyn Fn(&str, &Output, Option<&Output>, &[Value]) -> Result<TrainPlay, StageError> + 'a;

/// The tool sets of `run` played by `docs_stage`'s Base docs, named by
/// [`crate::at::tool_set_id`] from their cells.
pub fn tool_sets(run: &RunOutput, docs_stage: &str) -> Vec<String> {
    run.by_stage(docs_stage)
        .filter(|o| o.cell.is(crate::at::Method::Base))
        .map(|o| crate::at::tool_set_id(o.cell.env, &o.cell.setting))
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// Whether `o` is a play of the training split.
fn on_train(o: &Output) -> bool {
    o.cell.split() == Some(crate::at::Split::Train)
}

/// The pairs of every ToolObserver curve of `c` in `run`.
pub fn pairs(run: &RunOutput, c: &Curves<'_>) -> Result<Vec<SftPair>, StageError> {
    let merge = super::MERGE_STAGE;
    let mut out = Vec::new();
    for opaque in run
        .by_stage(c.docs_stage)
        .filter(|o| o.cell.is(crate::at::Method::Base))
    {
        let set = opaque.cell.setting.as_str();
        let mut curves: Vec<(&str, &str)> = run
            .by_stage(merge)
            .filter(|o| o.cell.setting == set && o.cell.is(crate::at::Method::ToolObserver))
            .map(|o| (o.cell.agent.as_str(), o.cell.editor.as_str()))
            .collect();
        curves.sort_unstable();
        curves.dedup();
        let original: Vec<DocRow> = opaque.entry.read()?;
        let Some(o) = original.first() else {
            continue;
        };
        let before_tools = tools_of(o);
        for (agent, editor) in curves {
            let cell = |x: &Output| {
                x.cell.setting == set
                    && x.cell.agent == agent
                    && x.cell.is(crate::at::Method::ToolObserver)
                    && x.cell.editor == editor
            };
            // Round r's training play (docs of round r) and, with a judge, its verdicts.
            let play_at = |r: i64| -> Result<Option<TrainPlay>, StageError> {
                let Some(p) = run
                    .by_stage(c.explore_stage)
                    .find(|x| cell(x) && x.cell.round == r && on_train(x))
                else {
                    return Ok(None);
                };
                let judged = c.judge_stage.and_then(|j| {
                    run.by_stage(j)
                        .find(|x| cell(x) && x.cell.round == r && on_train(x))
                });
                (c.score)(set, p, judged, &before_tools).map(Some)
            };
            let Some(base) = play_at(0)? else {
                continue;
            };
            let Some(before) = base.score else {
                continue;
            };
            // The best round played on the training split, when it beats round 0.
            let mut best: Option<(f64, &Output)> = None;
            for docs in run.by_stage(merge).filter(|x| cell(x) && x.cell.round >= 1) {
                let Some(score) = play_at(docs.cell.round)?.and_then(|p| p.score) else {
                    continue;
                };
                let better = match best {
                    None => score > before,
                    Some((s, d)) => score > s || (score == s && docs.cell.round > d.cell.round),
                };
                if better {
                    best = Some((score, docs));
                }
            }
            let Some((after, docs)) = best else {
                continue;
            };
            let finals: Vec<DocRow> = docs.entry.read()?;
            let Some(d) = finals.first() else {
                continue;
            };
            let after_tools = tools_of(d);
            for (b, a) in changed(&before_tools, &after_tools) {
                out.push(SftPair {
                    environment: opaque.cell.env.into(),
                    setting: set.into(),
                    tool_set: crate::at::tool_set_id(opaque.cell.env, set),
                    held_out: false,
                    agent: agent.into(),
                    editor: editor.into(),
                    method: "toolobserver".into(),
                    instance_id: SHARED.into(),
                    tool: tool_name(a).into(),
                    round: docs.cell.round,
                    selected_on: SELECTED_ON_TRAIN.into(),
                    interface: b.to_string(),
                    traces: traces_of(&base.texts, tool_name(a)),
                    target: tool_description(a).trim().into(),
                    score_before: before,
                    score_after: after,
                });
            }
        }
    }
    Ok(out)
}
