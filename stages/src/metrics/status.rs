//! What a drive's stage reports say about its progress and its time: how many stages
//! are in each state, the compute time of the fresh ones per stage kind, the time the
//! stages still to run will take (each at its kind's mean, a later round of a curve
//! projected from the curve's earlier rounds) and how many stages computed at a time
//! (the overlap of their intervals). `otb status` and the tables' progress notes
//! format what these return.

use crate::env::{Cell, Method};
use pipeline::{NodeReport, NodeState};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// Whether the stage's result is in the store (found there or computed just now).
pub fn computed(r: &NodeReport) -> bool {
    matches!(r.state, NodeState::Fresh | NodeState::Ran)
}

/// How many stages are not found fresh in the store (still to compute, waiting, or
/// computed by this very command).
pub fn not_fresh(reports: &[NodeReport]) -> usize {
    super::count(reports, |r| !matches!(r.state, NodeState::Fresh))
}

/// The stage reports counted by state, as `otb status` sums them up.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StateCounts<'a> {
    /// Stages whose result is in the store (fresh or computed just now).
    pub fresh: usize,
    /// Stages that would run now.
    pub would_run: usize,
    /// Stages missing behind one that would run.
    pub blocked: usize,
    /// Stages of later rounds ([`NodeState::Planned`]), per stage kind.
    pub later: BTreeMap<&'a str, usize>,
    /// All stages of later rounds.
    pub later_total: usize,
    /// The compute time of the fresh stages (as recorded when each was computed), in
    /// milliseconds per stage kind.
    pub spent: BTreeMap<&'a str, u64>,
    /// The compute time of all fresh stages, in milliseconds.
    pub spent_total: u64,
}

impl StateCounts<'_> {
    /// The stages listed: fresh, would run, or missing behind one that would.
    pub fn shown(&self) -> usize {
        self.fresh + self.would_run + self.blocked
    }
}

/// `reports` counted by state.
pub fn state_counts(reports: &[NodeReport]) -> StateCounts<'_> {
    let mut c = StateCounts::default();
    for r in reports {
        match &r.state {
            NodeState::Fresh | NodeState::Ran => {
                c.fresh += 1;
                *c.spent.entry(r.stage.as_str()).or_default() += r.wall_ms;
            }
            NodeState::WouldRun { .. } => c.would_run += 1,
            NodeState::Blocked { .. } => c.blocked += 1,
            NodeState::Planned { .. } => *c.later.entry(r.stage.as_str()).or_default() += 1,
        }
    }
    c.later_total = c.later.values().sum();
    c.spent_total = c.spent.values().sum();
    c
}

/// The summed time of some stages still to run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StageTime<'a> {
    /// How many stages.
    pub stages: usize,
    /// Their time in milliseconds: each at the mean time of its kind among the
    /// computed stages, a later round of a curve at its projection (see
    /// [`estimate`]).
    pub ms: u64,
    /// The same with each projected round at its curve's last computed round's time
    /// (never below `ms`).
    pub flat: u64,
    /// The kinds with no time measured yet (not in the sums), in name order.
    pub unknown: Vec<&'a str>,
}

impl StageTime<'_> {
    /// Whether some round was projected below its curve's last round's time.
    pub fn projected(&self) -> bool {
        self.ms < self.flat
    }
}

/// The time the stages still to run will take.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Estimate<'a> {
    /// The listed stages still to run (a lower bound).
    pub left: StageTime<'a>,
    /// The stages of later rounds not listed yet ([`NodeState::Planned`]: an upper
    /// estimate, since an online ToolObserver curve may end early).
    pub later: StageTime<'a>,
    /// How many stages computed at a time so far ([`overlap`]).
    pub overlap: Option<f64>,
}

impl Estimate<'_> {
    /// The listed stages' time with the later rounds' projected time.
    pub fn with_later(&self) -> u64 {
        self.left.ms + self.later.ms
    }

    /// The listed stages' time with the later rounds' time at their curves' last
    /// rounds' (the upper estimate).
    pub fn with_later_flat(&self) -> u64 {
        self.left.ms + self.later.flat
    }
}

/// The time the stages still to run will take, `None` when nothing is left. Each
/// stage counts at the mean time (integer milliseconds) of its kind among the
/// computed ones, except a round of a curve whose earlier rounds were computed: see
/// `Rounds`. `cell_of` gives a node's grid cell.
pub fn estimate<'a>(
    reports: &'a [NodeReport],
    cell_of: &'a dyn Fn(&str) -> Option<&'a Cell>,
) -> Option<Estimate<'a>> {
    let mut mean: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    for r in reports.iter().filter(|r| computed(r)) {
        let e = mean.entry(r.stage.as_str()).or_default();
        e.0 += r.wall_ms;
        e.1 += 1;
    }
    let rounds = Rounds::new(reports, cell_of);
    let time = |stages: &[&'a NodeReport]| {
        let (mut ms, mut flat) = (0u64, 0u64);
        let mut unknown: BTreeSet<&'a str> = BTreeSet::new();
        for r in stages {
            if let Some((shrunk, last)) = rounds.project(r) {
                ms += shrunk;
                flat += last;
                continue;
            }
            match mean.get(r.stage.as_str()) {
                Some((total, n)) => {
                    ms += total / n;
                    flat += total / n;
                }
                None => {
                    unknown.insert(r.stage.as_str());
                }
            }
        }
        StageTime {
            stages: stages.len(),
            ms,
            flat,
            unknown: unknown.into_iter().collect(),
        }
    };
    let (left, later): (Vec<&NodeReport>, Vec<&NodeReport>) = reports
        .iter()
        .filter(|r| !computed(r))
        .partition(|r| !matches!(r.state, NodeState::Planned { .. }));
    if left.is_empty() && later.is_empty() {
        return None;
    }
    Some(Estimate {
        left: time(&left),
        later: time(&later),
        overlap: overlap(reports),
    })
}

/// `ms` of stage time as wall time at `overlap` stages computing at a time.
pub fn wall_ms(ms: u64, overlap: f64) -> u64 {
    (ms as f64 / overlap) as u64
}

/// The computed rounds of each curve, for estimating its rounds still to run. A
/// curve is a ToolObserver chain of one stage kind: its cell but the round (a play on
/// the test split is no round of it), starting from Base's round 0, which every
/// editor's curve shares. As instances freeze, a curve's rounds get shorter (fewer
/// instances left to run and edit), so round N is estimated from the curve's last
/// computed round M < N as `t(M) * q^(N-M)`, where `q` is how much round M shrank
/// from round M-1 (at most 1; 1 when M-1 is unknown).
struct Rounds<'a> {
    // (stage, curve) -> round -> stage time
    done: HashMap<(&'a str, Cell), BTreeMap<i64, u64>>,
    cell_of: &'a dyn Fn(&str) -> Option<&'a Cell>,
}

impl<'a> Rounds<'a> {
    fn new(reports: &'a [NodeReport], cell_of: &'a dyn Fn(&str) -> Option<&'a Cell>) -> Self {
        let mut done: HashMap<_, BTreeMap<i64, u64>> = Default::default();
        for r in reports.iter().filter(|r| computed(r)) {
            if let Some((curve, round)) = cell_of(&r.node).and_then(curve_round) {
                done.entry((r.stage.as_str(), curve))
                    .or_default()
                    .insert(round, r.wall_ms);
            }
        }
        Rounds { done, cell_of }
    }

    /// `(projected, at the last round's time)` for a round of a curve that has an
    /// earlier round computed.
    fn project(&self, r: &NodeReport) -> Option<(u64, u64)> {
        let (curve, round) = (self.cell_of)(&r.node).and_then(curve_round)?;
        let start = self.done.get(&(r.stage.as_str(), curve_start(&curve)));
        let own = self.done.get(&(r.stage.as_str(), curve));
        let mut done: BTreeMap<i64, u64> =
            start.into_iter().flatten().map(|(&k, &v)| (k, v)).collect();
        done.extend(own.into_iter().flatten().map(|(&k, &v)| (k, v)));
        let (&m, &last) = done.range(..round).next_back()?;
        let q = match m.checked_sub(1).and_then(|p| done.get(&p)) {
            Some(&before) if before > 0 => (last as f64 / before as f64).min(1.0),
            _ => 1.0,
        };
        let shrunk = last as f64 * q.powi((round - m) as i32);
        Some((shrunk as u64, last))
    }
}

/// `(curve, N)` for a node of round N of a ToolObserver curve (its Base round 0
/// included): the cell without its round, and N.
fn curve_round(c: &Cell) -> Option<(Cell, i64)> {
    if c.split() == Some(crate::at::Split::Test) {
        return None;
    }
    if c.is_toolobserver() {
        return Some((c.curve(), c.round));
    }
    if c.is(Method::Base) && c.round == 0 {
        return Some((curve_start(c), 0));
    }
    None
}

/// The curve every editor's (and the guard's) ToolObserver curve of `c`'s chain
/// starts from: Base's round 0.
fn curve_start(c: &Cell) -> Cell {
    Cell {
        method: Some(Method::ToolObserver),
        guard: false,
        editor: String::new(),
        ..c.curve()
    }
}

/// How many stages were computing at a time, on average, while any was: the computed
/// stages' summed time over the length of the union of their intervals (each ends when
/// its result was committed). `None` below 1.1 (one chain after another) or when less
/// than a minute of stage time is known.
pub fn overlap(reports: &[NodeReport]) -> Option<f64> {
    let spans: Vec<(u64, u64)> = reports
        .iter()
        .filter(|r| computed(r))
        .filter(|r| r.finished_unix > 0 && r.wall_ms > 0)
        .map(|r| {
            let ms_end = r.finished_unix.saturating_mul(1000);
            (ms_end.saturating_sub(r.wall_ms), ms_end)
        })
        .collect();
    let (summed, union) = summed_and_union(spans);
    if union < 60_000 {
        return None;
    }
    let factor = summed as f64 / union as f64;
    (factor >= 1.1).then_some(factor)
}

/// The summed length of `spans` (start, end) and the length of their union.
pub fn summed_and_union(mut spans: Vec<(u64, u64)>) -> (u64, u64) {
    spans.sort_unstable();
    let summed: u64 = spans.iter().map(|(a, b)| b.saturating_sub(*a)).sum();
    let mut union = 0u64;
    let mut current: Option<(u64, u64)> = None;
    for (a, b) in spans {
        current = match current {
            Some((ca, cb)) if a <= cb => Some((ca, cb.max(b))),
            Some((ca, cb)) => {
                union += cb - ca;
                Some((a, b))
            }
            None => Some((a, b)),
        };
    }
    if let Some((ca, cb)) = current {
        union += cb.saturating_sub(ca);
    }
    (summed, union)
}

/// Node reports for tests of what reads them (here and in `tables::report`).
#[cfg(test)]
pub(crate) mod testing {
    use crate::env::{Cell, Method};
    use pipeline::{NodeReport, NodeState};

    /// A BFCL play cell of the scripted agent (and editor, but for Base).
    pub(crate) fn cell(setting: &str, method: Method, round: i64) -> Cell {
        Cell {
            env: "bfcl",
            setting: setting.into(),
            method: Some(method),
            agent: "scripted:a".into(),
            editor: if method == Method::Base {
                ""
            } else {
                "scripted:e"
            }
            .into(),
            round,
            step: crate::at::Step::Play { split: None },
            ..Cell::default()
        }
    }

    pub(crate) fn report(stage: &str, state: NodeState, wall_ms: u64) -> NodeReport {
        NodeReport {
            node: format!("{stage}[x]"),
            stage: stage.into(),
            key: None,
            state,
            rows: 0,
            wall_ms,
            finished_unix: 0,
            usage: Default::default(),
            inputs: Vec::new(),
        }
    }

    /// A computed stage of `wall_s` seconds whose result was committed at `end`.
    pub(crate) fn at(stage: &str, wall_s: u64, end: u64) -> NodeReport {
        NodeReport {
            finished_unix: end,
            ..report(stage, NodeState::Fresh, wall_s * 1000)
        }
    }

    pub(crate) fn would() -> NodeState {
        NodeState::WouldRun {
            reasons: vec!["never computed".into()],
        }
    }

    pub(crate) fn planned() -> NodeState {
        NodeState::Planned {
            after: "an earlier round".into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;

    #[test]
    fn states_are_counted_and_fresh_time_summed_per_kind() {
        let reports = vec![
            report("explore", NodeState::Fresh, 1_000),
            report("explore", NodeState::Ran, 2_000),
            report("evaluate", NodeState::Fresh, 500),
            report("explore", would(), 0),
            report(
                "evaluate",
                NodeState::Blocked {
                    on: "explore[x]".into(),
                },
                0,
            ),
            report("explore", planned(), 0),
            report("batch-reflect", planned(), 0),
            report("explore", planned(), 0),
        ];
        let c = state_counts(&reports);
        assert_eq!(c.shown(), 5);
        assert_eq!((c.fresh, c.would_run, c.blocked), (3, 1, 1));
        assert_eq!(
            c.later.into_iter().collect::<Vec<_>>(),
            [("batch-reflect", 1), ("explore", 2)]
        );
        assert_eq!(c.later_total, 3);
        assert_eq!(
            c.spent.into_iter().collect::<Vec<_>>(),
            [("evaluate", 500), ("explore", 3_000)]
        );
        assert_eq!(c.spent_total, 3_500);
        // `Ran` is in the store but was not found there fresh.
        assert_eq!(not_fresh(&reports), 6);
        assert_eq!(not_fresh(&reports[..1]), 0);
    }

    #[test]
    fn each_stage_counts_at_its_kinds_mean_and_unmeasured_kinds_are_named() {
        let reports = vec![
            report("explore", NodeState::Fresh, 60_000),
            report("explore", NodeState::Fresh, 120_001),
            report("evaluate", NodeState::Fresh, 1_000),
            report("explore", would(), 0),
            report("explore", would(), 0),
            report("draft", would(), 0),
            report("easytool", planned(), 0),
            report("explore", planned(), 0),
        ];
        let e = estimate(&reports, &|_| None).unwrap();
        // The kind's mean in whole milliseconds: 180001 / 2 = 90000.
        assert_eq!(
            e.left,
            StageTime {
                stages: 3,
                ms: 180_000,
                flat: 180_000,
                unknown: vec!["draft"],
            }
        );
        assert_eq!(
            e.later,
            StageTime {
                stages: 2,
                ms: 90_000,
                flat: 90_000,
                unknown: vec!["easytool"],
            }
        );
        assert!(!e.left.projected());
        assert_eq!(e.overlap, None);
        assert!(estimate(&reports[..3], &|_| None).is_none());
    }

    #[test]
    fn a_curves_later_rounds_are_projected_from_its_shrinking_rounds() {
        let to = |setting: &str, round: i64| cell(setting, Method::ToolObserver, round);
        let (start, _) = curve_round(&cell("names", Method::Base, 0)).unwrap();
        let (curve, round) = curve_round(&to("names", 3)).unwrap();
        assert_eq!((curve_start(&curve), round), (start.clone(), 3));
        assert_ne!(curve, start);
        let guard = Cell {
            guard: true,
            ..to("names", 2)
        };
        assert_eq!(curve_start(&curve_round(&guard).unwrap().0), start);
        let test = Cell {
            step: crate::at::Step::Play {
                split: Some(crate::at::Split::Test),
            },
            ..to("names", 2)
        };
        assert_eq!(curve_round(&test), None);
        assert_eq!(curve_round(&cell("names", Method::Draft, 0)), None);
        // Base r0 100 s, r1 100 s, r2 50 s: r3 at 25 s (50 s flat), r4 at 12.5 s.
        let cells = [
            cell("names", Method::Base, 0),
            to("names", 1),
            to("names", 2),
            to("names", 3),
            to("names", 4),
        ];
        let states = [
            (NodeState::Fresh, 100_000),
            (NodeState::Fresh, 100_000),
            (NodeState::Fresh, 50_000),
            (would(), 0),
            (planned(), 0),
        ];
        let reports: Vec<NodeReport> = states
            .into_iter()
            .enumerate()
            .map(|(i, (s, ms))| NodeReport {
                node: format!("explore[{i}]"),
                ..report("explore", s, ms)
            })
            .collect();
        let cell_of = |node: &str| {
            let i: usize = node
                .strip_prefix("explore[")?
                .strip_suffix(']')?
                .parse()
                .ok()?;
            cells.get(i)
        };
        let e = estimate(&reports, &cell_of).unwrap();
        assert_eq!((e.left.ms, e.left.flat), (25_000, 50_000));
        assert_eq!((e.later.ms, e.later.flat), (12_500, 50_000));
        assert!(e.left.projected() && e.later.projected());
        assert_eq!((e.with_later(), e.with_later_flat()), (37_500, 75_000));
    }

    #[test]
    fn the_overlap_is_summed_time_over_the_union_of_intervals() {
        // Two chains side by side for 100 s, then one alone for 100 s: 1.5 at a time.
        let concurrent = vec![
            at("explore", 100, 1_100),
            at("explore", 100, 1_100),
            at("explore", 100, 1_200),
        ];
        assert_eq!(overlap(&concurrent), Some(1.5));
        assert_eq!(wall_ms(300_000, 1.5), 200_000);
        // One after another (and a gap between sittings): none.
        let sequential = vec![
            at("explore", 100, 1_100),
            at("explore", 100, 1_200),
            at("explore", 100, 9_000),
        ];
        assert_eq!(overlap(&sequential), None);
        // Nested and chained intervals merge.
        let nested = vec![at("a", 100, 1_100), at("b", 50, 1_080), at("c", 100, 1_150)];
        let f = overlap(&nested).unwrap();
        assert!((f - 250.0 / 150.0).abs() < 1e-9, "{f}");
        // Under a minute of wall time: none.
        assert_eq!(overlap(&[at("a", 30, 100), at("b", 30, 100)]), None);
    }
}
