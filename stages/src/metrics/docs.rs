//! Documentation along ToolObserver's curves (the report's "Documentation edits"):
//! the documentation outputs of each curve in round order, instances frozen per
//! round, the baselines' final documentation beside a curve, and the tools a curve
//! never changed.

use super::{count, items::CurveKey};
use crate::at::{Cell, Method};
use crate::rows::DocRow;
use std::collections::BTreeMap;

/// ToolObserver's documentation outputs (`cells`: each output's cell, in output
/// order) per curve (setting, agent, editor): indices into `cells` of its rounds
/// after round 0, in round order.
pub fn curves(cells: &[&Cell]) -> BTreeMap<CurveKey, Vec<usize>> {
    let mut out: BTreeMap<CurveKey, Vec<usize>> = BTreeMap::new();
    for (i, l) in cells.iter().enumerate() {
        if l.is(Method::ToolObserver) && l.round > 0 {
            out.entry((l.setting.clone(), l.agent.clone(), l.editor.clone()))
                .or_default()
                .push(i);
        }
    }
    for rounds in out.values_mut() {
        rounds.sort_by_key(|&i| cells[i].round);
    }
    out
}

/// How many of an output's documentation `rows` are frozen (no longer edited).
pub fn frozen(rows: &[DocRow]) -> usize {
    count(rows, |r| r.frozen)
}

/// Instances frozen after each round of a curve: `rounds` are `(round, online,
/// rows)` in round order, and only the online rounds (one documentation row per
/// instance) count.
pub fn frozen_by_round<'d>(
    rounds: impl IntoIterator<Item = (i64, bool, &'d [DocRow])>,
) -> Vec<(i64, usize)> {
    rounds
        .into_iter()
        .filter(|(_, online, _)| *online)
        .map(|(round, _, rows)| (round, frozen(rows)))
        .collect()
}

/// The final documentation of each baseline (in [`Method::ALL`]'s order, then the
/// external methods `cells` have, `ext:<name>`, by name) for the curve of `setting`
/// and `editor`, among documentation outputs `cells`: the first output of the
/// setting and baseline whose editor is `editor` or none, else its first; indices
/// into `cells`.
pub fn baseline_finals(cells: &[&Cell], setting: &str, editor: &str) -> Vec<usize> {
    let externals: std::collections::BTreeSet<Method> = cells
        .iter()
        .filter_map(|c| c.method)
        .filter(|m| m.external_name().is_some())
        .collect();
    Method::ALL
        .into_iter()
        .filter(|m| m.is_baseline())
        .chain(externals)
        .filter_map(|m| {
            let of = |i: &usize| cells[*i].setting == setting && cells[*i].is(m);
            (0..cells.len())
                .filter(of)
                .find(|i| cells[*i].editor == editor || cells[*i].editor.is_empty())
                .or_else(|| (0..cells.len()).find(of))
        })
        .collect()
}

/// How many tools of a subject a curve never changed, of their histories' lengths
/// (round 0 and each round that changed the tool).
pub fn unchanged(history_lens: impl IntoIterator<Item = usize>) -> usize {
    count(history_lens, |n| *n < 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(setting: &str, m: Method, round: i64, editor: &str) -> Cell {
        Cell {
            setting: setting.into(),
            agent: "a".into(),
            editor: editor.into(),
            method: Some(m),
            round,
            ..Cell::default()
        }
    }

    fn row(frozen: bool) -> DocRow {
        DocRow {
            instance_id: "i".into(),
            setting: "s".into(),
            round: 1,
            tools: serde_json::Value::Null,
            name_mapping: serde_json::Value::Null,
            changed: true,
            frozen,
            demos: serde_json::Value::Null,
        }
    }

    #[test]
    fn curves_are_toolobserver_rounds_after_zero_in_round_order() {
        let cells = [
            cell("s", Method::ToolObserver, 2, "e"),
            cell("s", Method::ToolObserver, 0, "e"),
            cell("s", Method::Base, 1, "e"),
            cell("s", Method::ToolObserver, 1, "e"),
            cell("s", Method::ToolObserver, 1, "f"),
        ];
        let refs: Vec<&Cell> = cells.iter().collect();
        let c = curves(&refs);
        assert_eq!(c.len(), 2);
        assert_eq!(c[&("s".into(), "a".into(), "e".into())], [3, 0]);
        assert_eq!(c[&("s".into(), "a".into(), "f".into())], [4]);
    }

    #[test]
    fn frozen_instances_are_counted_on_online_rounds_only() {
        let a = [row(true), row(false), row(true)];
        let b = [row(true)];
        assert_eq!(frozen(&a), 2);
        assert_eq!(
            frozen_by_round([(1, true, &a[..]), (2, false, &b[..]), (3, true, &b[..])]),
            [(1, 2), (3, 1)]
        );
        assert_eq!(unchanged([1, 2, 1, 3]), 2);
    }

    #[test]
    fn a_baselines_final_prefers_the_curves_editor() {
        let cells = [
            cell("s", Method::EasyTool, 0, "x"),
            cell("s", Method::EasyTool, 0, "e"),
            cell("t", Method::Play2Prompt, 0, "e"),
            cell("s", Method::Play2Prompt, 0, "x"),
            cell("s", Method::ToolObserver, 1, "e"),
        ];
        let refs: Vec<&Cell> = cells.iter().collect();
        let mut got = baseline_finals(&refs, "s", "e");
        got.sort();
        // EasyTool: the one of editor e; Play2Prompt: of setting s, another editor.
        assert_eq!(got, [1, 3]);
        assert!(baseline_finals(&refs, "u", "e").is_empty());
    }

    #[test]
    fn external_methods_finals_follow_the_builtin_ones() {
        let ext = |n: &str| Method::external(n).unwrap();
        let cells = [
            cell("s", ext("zeta"), 0, "e"),
            cell("s", Method::EasyTool, 0, "e"),
            cell("s", ext("alpha"), 0, "e"),
            cell("t", ext("beta"), 0, "e"),
            cell("s", Method::ToolObserver, 1, "e"),
        ];
        let refs: Vec<&Cell> = cells.iter().collect();
        // EasyTool, then ext:alpha and ext:zeta by name; ext:beta is of another setting.
        assert_eq!(baseline_finals(&refs, "s", "e"), [1, 2, 0]);
    }
}
