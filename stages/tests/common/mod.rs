//! Helpers shared by the stages' end-to-end tests.
#![allow(dead_code)]

use stages::driver::{Output, RunOutput};

/// The Trace-Free+ output of `out` and the tools of its docs, each asserted to carry
/// a generated description.
pub fn tracefree_tools(out: &RunOutput) -> (&Output, Vec<serde_json::Value>) {
    let tf = out
        .by_stage("tracefree")
        .next()
        .expect("a tracefree output");
    let docs: Vec<stages::rows::DocRow> = tf.entry.read().unwrap();
    let tools = docs[0].tools.as_array().unwrap().clone();
    assert!(tools.iter().all(|t| t["description"]
        .as_str()
        .unwrap()
        .starts_with("Generated: ")));
    (tf, tools)
}

/// The ToolObserver training play of round `r` in `out` (an output of exploration
/// stage `stage`).
pub fn train_play<'a>(out: &'a RunOutput, stage: &'a str, r: i64) -> &'a Output {
    out.by_stage(stage)
        .find(|o| {
            o.cell.is(stages::env::Method::ToolObserver)
                && o.cell.round == r
                && o.cell.split() == Some(stages::env::Split::Train)
        })
        .expect("a ToolObserver training play of that round")
}

/// The SFT pairs of a one-curve run whose round 1 changed `changed` tools: one per
/// changed tool when round 1 scored better than round 0 on the training split
/// (`before`, `after`), else none; each of round 1, selected on the training split,
/// with those scores.
pub fn assert_round_1_pairs(
    pairs: &[stages::reading::SftPair],
    changed: usize,
    (before, after): (f64, f64),
) {
    let expected = if after > before { changed } else { 0 };
    assert_eq!(pairs.len(), expected, "{pairs:#?}");
    assert!(pairs.iter().all(|p| p.round == 1
        && p.selected_on == "train"
        && p.score_before == before
        && p.score_after == after));
}
