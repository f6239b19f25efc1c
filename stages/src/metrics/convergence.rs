//! Convergence of ToolObserver's curves (the paper's Table 5 and Figure 3): rounds to
//! convergence per chain, and per round of a curve the instances frozen and the
//! editor's and agent's tokens.
//!
//! Rounds to convergence of one instance = the number of reflection rounds in which it
//! was still live (its docs were sent to the editor, or it was frozen in that round):
//! an instance frozen by round k's unchanged reply counts k; one still changing at the
//! round limit counts K.

use super::{count, mean, Frame, Framed};
use crate::env::{Cell, Method};
use crate::rows::{DocRow, EditRow, SummaryRow, TrajectoryRow};
use std::collections::BTreeMap;

/// Rounds to convergence of one ToolObserver chain.
#[derive(Clone, Debug, PartialEq)]
pub struct Convergence {
    /// Documentation setting.
    pub setting: String,
    /// Agent model.
    pub agent: String,
    /// Editor model.
    pub editor: String,
    /// `toolobserver` or `toolobserver-guard`.
    pub method: String,
    /// Instances the chain's reflections saw.
    pub instances: i64,
    /// Mean reflection rounds until an instance's docs stopped changing.
    pub mean_rounds: f64,
    /// Instances frozen (before the round limit).
    pub converged: i64,
}

/// (setting, agent, editor, method) of a ToolObserver chain.
pub type Chain = (String, String, String, String);

fn chain(c: &Cell) -> Chain {
    (
        c.setting.clone(),
        c.agent.clone(),
        c.editor.clone(),
        c.method_name().to_string(),
    )
}

/// Rounds to convergence per chain from the reflections' `docs` rows (the frame of
/// the reflection stage), chains of the settings in `settings` in that order (others
/// are left out), then by agent, editor and method. Each instance counts the last
/// round it was seen in up to the first round that froze it; a chain's rounds are
/// read in round order (a round's outputs in drive order).
pub fn rounds_to_convergence(docs: &Frame<DocRow>, settings: &[&str]) -> Vec<Convergence> {
    let mut out = Vec::new();
    for (key, mut rows) in docs.group_by(|r| chain(r.cell)) {
        if !settings.contains(&key.0.as_str()) {
            continue;
        }
        rows.sort_by_key(|r| r.cell.round);
        // instance -> (rounds, frozen)
        let mut per: BTreeMap<&str, (i64, bool)> = BTreeMap::new();
        for r in rows {
            let e = per.entry(r.row.instance_id.as_str()).or_insert((0, false));
            if e.1 {
                continue; // already frozen in an earlier round
            }
            e.0 = r.cell.round;
            e.1 = r.row.frozen;
        }
        let rounds: Vec<f64> = per.values().map(|(r, _)| *r as f64).collect();
        let (setting, agent, editor, method) = key;
        out.push(Convergence {
            setting,
            agent,
            editor,
            method,
            instances: per.len() as i64,
            mean_rounds: mean(&rounds),
            converged: count(per.values(), |(_, f)| *f) as i64,
        });
    }
    let rank = |s: &str| settings.iter().position(|x| *x == s);
    out.sort_by_key(|c| rank(&c.setting));
    out
}

/// The rows of a curve's summary that belong to ToolObserver chains (guarded or
/// not), in order.
pub fn toolobserver_curve(summary: Vec<SummaryRow>) -> Vec<SummaryRow> {
    summary
        .into_iter()
        .filter(|r| r.method.starts_with(Method::ToolObserver.as_str()))
        .collect()
}

/// What a round cost and how far it converged (`toolobserver.md`: report per round
/// E/P/A, instances frozen, editor and agent tokens).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct RoundExtra {
    /// Instances frozen after the round's reflection.
    pub frozen: i64,
    /// Editor prompt + completion tokens of the round.
    pub editor_tokens: i64,
    /// Agent prompt + completion tokens of the round's exploration (reused turns
    /// count 0).
    pub agent_tokens: i64,
}

/// (setting, agent, editor, method, round) of a round of a chain.
type ChainRound = (String, String, String, String, i64);

fn chain_round(c: &Cell) -> ChainRound {
    let (s, a, e, m) = chain(c);
    (s, a, e, m, c.round)
}

/// The rows of a group that came from its last output (the drive's last, where
/// several outputs share a round).
fn last_output<'f, 'a: 'f, R>(rows: &'f [&'f Framed<'a, R>]) -> impl Iterator<Item = &'f R> + 'f {
    let last = rows.last().map(|r| r.node);
    rows.iter()
        .copied()
        .filter(move |r| Some(r.node) == last)
        .map(|r| &r.row)
}

/// Per row of `curve` (a ToolObserver curve's summary rows), what its round cost
/// and froze: the round's reflection's frozen `docs` rows and its `edits` tokens, and
/// the agent's tokens in the round's play (`turns`; round 0 of a curve is the Base
/// chain's play). A round with no such output counts 0.
pub fn round_extras(
    docs: &Frame<DocRow>,
    edits: &Frame<EditRow>,
    turns: &Frame<TrajectoryRow>,
    curve: &[SummaryRow],
) -> Vec<RoundExtra> {
    let tokens = |p: i64, c: i64| p.saturating_add(c);
    let frozen: BTreeMap<ChainRound, i64> = docs
        .group_by(|r| chain_round(r.cell))
        .into_iter()
        .map(|(k, rows)| (k, count(last_output(&rows), |d| d.frozen) as i64))
        .collect();
    let editor: BTreeMap<ChainRound, i64> = edits
        .group_by(|r| chain_round(r.cell))
        .into_iter()
        .map(|(k, rows)| {
            let t = last_output(&rows)
                .map(|r| tokens(r.prompt_tokens, r.completion_tokens))
                .sum();
            (k, t)
        })
        .collect();
    let agent: BTreeMap<ChainRound, i64> = turns
        .group_by(|r| chain_round(r.cell))
        .into_iter()
        .map(|(k, rows)| {
            let t = last_output(&rows)
                .filter(|r| !r.reused)
                .map(|r| tokens(r.prompt_tokens, r.completion_tokens))
                .sum();
            (k, t)
        })
        .collect();
    curve
        .iter()
        .map(|c| {
            let key = (
                c.setting.clone(),
                c.agent.clone(),
                c.editor.clone(),
                c.method.clone(),
                c.round,
            );
            // Round 0 of a curve is the Base chain's play.
            let agent_key = if c.round == 0 {
                (
                    c.setting.clone(),
                    c.agent.clone(),
                    String::new(),
                    Method::Base.as_str().to_string(),
                    0,
                )
            } else {
                key.clone()
            };
            RoundExtra {
                frozen: frozen.get(&key).copied().unwrap_or(0),
                editor_tokens: editor.get(&key).copied().unwrap_or(0),
                agent_tokens: agent.get(&agent_key).copied().unwrap_or(0),
            }
        })
        .collect()
}

/// One line of a curve plot: a chain's E by round.
#[derive(Clone, Debug, PartialEq)]
pub struct CurveLine {
    /// The chain.
    pub chain: Chain,
    /// (round, E), by round.
    pub points: Vec<(i64, f64)>,
}

/// The lines of a curve's plot, one per chain in chain order, and the last round (at
/// least 1).
pub fn curve_lines(curve: &[SummaryRow]) -> (Vec<CurveLine>, i64) {
    let mut lines: BTreeMap<Chain, Vec<(i64, f64)>> = BTreeMap::new();
    for c in curve {
        lines
            .entry((
                c.setting.clone(),
                c.agent.clone(),
                c.editor.clone(),
                c.method.clone(),
            ))
            .or_default()
            .push((c.round, c.e));
    }
    let lines = lines
        .into_iter()
        .map(|(chain, mut points)| {
            points.sort_by_key(|p| p.0);
            CurveLine { chain, points }
        })
        .collect();
    let last = curve.iter().map(|c| c.round).max().unwrap_or(1).max(1);
    (lines, last)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tokens::tests::{cell, edit, turn};
    use serde_json::Value;

    fn doc(id: &str, frozen: bool) -> DocRow {
        DocRow {
            instance_id: id.into(),
            setting: "names".into(),
            round: 0,
            tools: Value::Null,
            name_mapping: Value::Null,
            changed: !frozen,
            frozen,
            demos: Value::Null,
        }
    }

    fn framed<'a, R>(node: &'a str, cell: &'a Cell, rows: Vec<R>) -> Vec<Framed<'a, R>> {
        rows.into_iter()
            .map(|row| Framed { node, cell, row })
            .collect()
    }

    fn summary(setting: &str, editor: &str, method: &str, round: i64, e: f64) -> SummaryRow {
        SummaryRow {
            setting: setting.into(),
            method: method.into(),
            agent: "a".into(),
            editor: editor.into(),
            round,
            n: 1,
            e,
            ..SummaryRow::default()
        }
    }

    #[test]
    fn instances_count_the_rounds_until_they_froze_per_chain() {
        let to = Method::ToolObserver;
        let r1 = cell(to, "e", 1);
        let r2 = cell(to, "e", 2);
        let r3 = cell(to, "e", 3);
        let other = cell(to, "f", 1);
        let guard = Cell {
            guard: true,
            ..cell(to, "e", 1)
        };
        let desc = Cell {
            setting: "names+desc".into(),
            ..cell(to, "e", 1)
        };
        let gold = Cell {
            setting: "gold".into(),
            ..cell(to, "e", 1)
        };
        let mut rows = Vec::new();
        // Drive order need not be round order.
        rows.extend(framed("r3", &r3, vec![doc("y", false)]));
        rows.extend(framed("r1", &r1, vec![doc("x", false), doc("y", false)]));
        rows.extend(framed("r2", &r2, vec![doc("x", true), doc("y", false)]));
        rows.extend(framed("f1", &other, vec![doc("x", true)]));
        rows.extend(framed("g1", &guard, vec![doc("x", false)]));
        rows.extend(framed("d1", &desc, vec![doc("x", true)]));
        rows.extend(framed("gold", &gold, vec![doc("x", true)]));
        let frame = Frame::from_rows(rows);
        let got = rounds_to_convergence(&frame, &["names+desc", "names"]);
        let short: Vec<(&str, &str, &str, i64, f64, i64)> = got
            .iter()
            .map(|c| {
                (
                    c.setting.as_str(),
                    c.editor.as_str(),
                    c.method.as_str(),
                    c.instances,
                    c.mean_rounds,
                    c.converged,
                )
            })
            .collect();
        assert_eq!(
            short,
            [
                // The settings' order, not name order; `gold` is not asked for.
                ("names+desc", "e", "toolobserver", 1, 1.0, 1),
                // x froze in round 2, y still changing at round 3: (2 + 3) / 2.
                ("names", "e", "toolobserver", 2, 2.5, 1),
                ("names", "e", "toolobserver-guard", 1, 1.0, 0),
                ("names", "f", "toolobserver", 1, 1.0, 1),
            ]
        );
    }

    #[test]
    fn round_extras_come_from_the_rounds_outputs_and_round_0_from_base() {
        let to = Method::ToolObserver;
        let base = cell(Method::Base, "", 0);
        let r1 = cell(to, "e", 1);
        let r2 = cell(to, "e", 2);
        let docs = Frame::from_rows(
            [
                framed("d1", &r1, vec![doc("x", true), doc("y", false)]),
                framed("d2", &r2, vec![doc("y", true)]),
            ]
            .into_iter()
            .flatten()
            .collect(),
        );
        let edits = Frame::from_rows(
            [
                framed("d1", &r1, vec![edit(10, 5, true), edit(1, 1, false)]),
                framed("d2", &r2, vec![edit(3, 0, true)]),
            ]
            .into_iter()
            .flatten()
            .collect(),
        );
        let turns = Frame::from_rows(
            [
                framed("b0", &base, vec![turn(50, 50, false)]),
                framed("t1", &r1, vec![turn(7, 3, false), turn(100, 0, true)]),
                // A later output of the same round replaces the earlier one.
                framed("t2", &r2, vec![turn(1000, 0, false)]),
                framed("t2b", &r2, vec![turn(4, 4, false)]),
            ]
            .into_iter()
            .flatten()
            .collect(),
        );
        let curve = [
            summary("names", "e", "toolobserver", 0, 0.1),
            summary("names", "e", "toolobserver", 1, 0.2),
            summary("names", "e", "toolobserver", 2, 0.3),
            summary("names", "e", "toolobserver", 3, 0.3),
        ];
        let x = |frozen, editor_tokens, agent_tokens| RoundExtra {
            frozen,
            editor_tokens,
            agent_tokens,
        };
        assert_eq!(
            round_extras(&docs, &edits, &turns, &curve),
            [x(0, 0, 100), x(1, 17, 10), x(1, 3, 8), x(0, 0, 0)]
        );
    }

    #[test]
    fn the_curve_keeps_toolobserver_and_draws_a_line_per_chain() {
        let rows = vec![
            summary("names", "e", "toolobserver", 2, 0.5),
            summary("names", "", "base", 0, 0.1),
            summary("names", "e", "toolobserver", 0, 0.1),
            summary("desc", "e", "toolobserver-guard", 1, 0.4),
            summary("names", "e", "easytool", 0, 0.3),
        ];
        let curve = toolobserver_curve(rows);
        let methods: Vec<&str> = curve.iter().map(|r| r.method.as_str()).collect();
        assert_eq!(
            methods,
            ["toolobserver", "toolobserver", "toolobserver-guard"]
        );
        let (lines, last) = curve_lines(&curve);
        assert_eq!(last, 2);
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0].chain.0, "desc");
        assert_eq!(lines[1].points, [(0, 0.1), (2, 0.5)]);
        assert_eq!(curve_lines(&[]).1, 1);
    }
}
