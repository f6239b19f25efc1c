//! The report's grid of cells and their graded items: each cell's item count, errors
//! and mean score; the final cell of a method in each group; paired comparisons of
//! two cells on the items both graded, with the paired bootstrap interval; and
//! ToolObserver's online curves by round (cells, and tokens per round).
//!
//! The report's cells and items are its own types (`report::model`): they implement
//! [`AsGridCell`] and [`ScoredItem`], which is all these metrics read of them.

use super::{bootstrap, count, mean_of, paired, sum, Paired};
use crate::at::{Cell, Method};
use std::collections::BTreeMap;

/// Resamples of every bootstrap interval the report draws.
pub const RESAMPLES: u32 = 1000;
/// The seed of every bootstrap interval the report draws.
pub const SEED: u64 = 0;

/// What the metrics read of one cell of the report's grid.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct GridCell<'a> {
    /// The cell's index in the report (what its items point at).
    pub id: usize,
    /// The environment.
    pub env: &'a str,
    /// Setting (BFCL) or tool set.
    pub setting: &'a str,
    /// The method's name (`base`, `toolobserver`, a baseline).
    pub method: &'a str,
    /// Agent model spec.
    pub agent: &'a str,
    /// Editor model spec (empty: none).
    pub editor: &'a str,
    /// Documentation round.
    pub round: i64,
    /// `test`, `train` or empty (no split: BFCL).
    pub split: &'a str,
    /// Whether the cell's node is computed.
    pub computed: bool,
    /// Its items.
    pub items: usize,
}

/// A cell of the report's grid.
pub trait AsGridCell {
    /// Its fields as the metrics read them.
    fn grid(&self) -> GridCell<'_>;
}

impl AsGridCell for GridCell<'_> {
    fn grid(&self) -> GridCell<'_> {
        *self
    }
}

/// A graded item of a cell.
pub trait ScoredItem {
    /// The cell's id ([`GridCell::id`]).
    fn cell(&self) -> usize;
    /// The item's id (what a paired comparison matches on).
    fn id(&self) -> &str;
    /// Its score in \[0, 1\].
    fn score(&self) -> f64;
    /// Whether its model call failed.
    fn failed(&self) -> bool;
}

/// Whether a score counts as right (a comparison's and a flip's verdict).
pub fn right(score: f64) -> bool {
    score >= 1.0
}

/// One cell's items counted: how many, how many failed, their mean score.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ItemSummary {
    /// Items.
    pub n: usize,
    /// Items whose model call failed.
    pub errors: usize,
    /// Mean score, summed in order; `None` with no items.
    pub mean: Option<f64>,
}

/// The summary of one cell's `items`.
pub fn summary<I: ScoredItem>(items: &[I]) -> ItemSummary {
    ItemSummary {
        n: items.len(),
        errors: count(items, |i| i.failed()),
        mean: mean_of(items, |i| i.score()),
    }
}

/// The items of cell `cell`, in order.
pub fn of_cell<I: ScoredItem>(items: &[I], cell: usize) -> Vec<&I> {
    items.iter().filter(|i| i.cell() == cell).collect()
}

/// Every cell's scores, in item order, by cell id.
pub fn scores_by_cell<I: ScoredItem>(items: &[I]) -> BTreeMap<usize, Vec<f64>> {
    let mut out: BTreeMap<usize, Vec<f64>> = BTreeMap::new();
    for it in items {
        out.entry(it.cell()).or_default().push(it.score());
    }
    out
}

/// The report's bootstrap 95% interval of the mean of `scores` ([`RESAMPLES`],
/// [`SEED`]).
pub fn interval(scores: &[f64]) -> (f64, f64) {
    bootstrap(scores, RESAMPLES, SEED)
}

/// How many of `cells` are not computed.
pub fn pending<C: AsGridCell>(cells: &[C]) -> usize {
    count(cells, |c| !c.grid().computed)
}

/// How many of `cells` of `method` are computed.
pub fn computed_of<C: AsGridCell>(cells: &[C], method: &str) -> usize {
    count(cells, |c| {
        let g = c.grid();
        g.method == method && g.computed
    })
}

/// The cell of `method` that a comparison uses in each group (environment, setting,
/// agent, editor): test play (not exploration), computed, with items, the highest
/// round (the first such cell on a tie); in cell order.
pub fn finals<'c, C: AsGridCell>(cells: &'c [C], method: &str) -> Vec<&'c C> {
    let mut best: BTreeMap<(&str, &str, &str, &str), &'c C> = BTreeMap::new();
    for c in cells {
        let g = c.grid();
        if g.method != method || g.split == "train" || !g.computed || g.items == 0 {
            continue;
        }
        let k = (g.env, g.setting, g.agent, g.editor);
        if best.get(&k).is_none_or(|b| b.grid().round < g.round) {
            best.insert(k, c);
        }
    }
    let mut v: Vec<&C> = best.into_values().collect();
    v.sort_by_key(|c| c.grid().id);
    v
}

/// The cell among `others` that `cell` is compared with: same environment, setting
/// and agent, the same editor first.
pub fn counterpart<'c, C: AsGridCell>(cell: &C, others: &[&'c C]) -> Option<&'c C> {
    let a = cell.grid();
    let same = |b: &&&C| {
        let b = b.grid();
        b.env == a.env && b.setting == a.setting && b.agent == a.agent
    };
    others
        .iter()
        .filter(same)
        .find(|b| b.grid().editor == a.editor)
        .or_else(|| others.iter().find(same))
        .copied()
}

/// `exec_simple_12` sorts after `exec_simple_2`: the text before trailing digits,
/// then their value (and the digits as written, so that no two ids are equal).
pub fn natural(id: &str) -> (&str, u64, &str) {
    let digits = id.len() - id.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = id.split_at(id.len() - digits);
    (head, tail.parse().unwrap_or(0), tail)
}

/// The scores of cell `cell`'s items by their id in [`natural`] order (an id graded
/// twice: its last score).
pub fn scores_of<I: ScoredItem>(items: &[I], cell: usize) -> BTreeMap<(&str, u64, &str), f64> {
    of_cell(items, cell)
        .into_iter()
        .map(|i| (natural(i.id()), i.score()))
        .collect()
}

/// [`paired`] with the seeded bootstrap interval of the mean difference `b - a`
/// (`resamples` draws of the matched ids' differences, in id order).
pub fn paired_interval<K: Ord + Copy>(
    a: &BTreeMap<K, f64>,
    b: &BTreeMap<K, f64>,
    right: impl Fn(f64) -> bool,
    resamples: u32,
    seed: u64,
) -> (Paired<K>, (f64, f64)) {
    let p = paired(a, b, right);
    let diffs: Vec<f64> = p.both.iter().map(|k| b[k] - a[k]).collect();
    let ci = bootstrap(&diffs, resamples, seed);
    (p, ci)
}

/// Two cells compared on the items both graded.
#[derive(Debug)]
pub struct PairedCells<'c, C> {
    /// Side A's cell.
    pub a: &'c C,
    /// Side B's cell.
    pub b: &'c C,
    /// The item ids both graded, in [`natural`] order.
    pub matched: Vec<String>,
    /// Mean of A's score minus B's over `matched` (NaN for none).
    pub diff: f64,
    /// Paired bootstrap 95% interval of `diff` ([`RESAMPLES`], [`SEED`]).
    pub ci: (f64, f64),
    /// Right on A and not on B.
    pub a_only: Vec<String>,
    /// Right on B and not on A.
    pub b_only: Vec<String>,
}

fn joined(k: &(&str, u64, &str)) -> String {
    format!("{}{}", k.0, k.2)
}

/// Method `ma` of cells `a` (items `a_items`) against method `mb` of cells `b`: in
/// each group the [`finals`] of both, paired ([`counterpart`]) and compared on their
/// common items (right: [`right`]).
pub fn compare<'c, C: AsGridCell, I: ScoredItem>(
    a: (&'c [C], &[I]),
    ma: &str,
    b: (&'c [C], &[I]),
    mb: &str,
) -> Vec<PairedCells<'c, C>> {
    let bs = finals(b.0, mb);
    let mut out = Vec::new();
    for ca in finals(a.0, ma) {
        let Some(cb) = counterpart(ca, &bs) else {
            continue;
        };
        let (sa, sb) = (scores_of(a.1, ca.grid().id), scores_of(b.1, cb.grid().id));
        // B against A: the difference is A's score minus B's.
        let (p, ci) = paired_interval(&sb, &sa, right, RESAMPLES, SEED);
        out.push(PairedCells {
            a: ca,
            b: cb,
            matched: p.both.iter().map(joined).collect(),
            diff: p.mean_diff,
            ci,
            a_only: p.won.iter().map(joined).collect(),
            b_only: p.lost.iter().map(joined).collect(),
        });
    }
    out
}

/// A curve's coordinates: (setting, agent, editor).
pub type CurveKey = (String, String, String);

/// ToolObserver's online curves (every round plays the same items: no split): the
/// computed cells of each (setting, agent, editor) in round order, led by round 0
/// (the setting and agent's Base cell, or a released chain's Gold run of round 0)
/// when it is computed and no ToolObserver cell is of round 0.
pub fn online_curves<C: AsGridCell>(cells: &[C]) -> BTreeMap<CurveKey, Vec<&C>> {
    let mut seqs: BTreeMap<CurveKey, Vec<&C>> = BTreeMap::new();
    for c in cells {
        let g = c.grid();
        if g.split.is_empty() && g.method == "toolobserver" && g.computed {
            seqs.entry((g.setting.into(), g.agent.into(), g.editor.into()))
                .or_default()
                .push(c);
        }
    }
    for ((setting, agent, _), seq) in seqs.iter_mut() {
        let base = cells.iter().find(|c| {
            let g = c.grid();
            g.split.is_empty()
                && g.setting == setting
                && g.agent == agent
                && (g.method == "base" || (g.method == "gold" && g.round == 0))
        });
        if let Some(base) = base {
            if base.grid().computed && seq.iter().all(|c| c.grid().round > 0) {
                seq.push(base);
            }
        }
        seq.sort_by_key(|c| c.grid().round);
    }
    seqs
}

/// The curves whose items flip from one cell to the next: ToolObserver's computed
/// cells of each (setting, agent, editor) that are not exploration, in round order,
/// led by the setting and agent's computed Base cell when no ToolObserver cell is of
/// round 0.
pub fn edit_curves<C: AsGridCell>(cells: &[C]) -> BTreeMap<CurveKey, Vec<&C>> {
    let mut curves: BTreeMap<CurveKey, Vec<&C>> = BTreeMap::new();
    for c in cells {
        let g = c.grid();
        if g.method == "toolobserver" && g.split != "train" && g.computed {
            curves
                .entry((g.setting.into(), g.agent.into(), g.editor.into()))
                .or_default()
                .push(c);
        }
    }
    for ((setting, agent, _), seq) in curves.iter_mut() {
        seq.sort_by_key(|c| c.grid().round);
        let base = cells.iter().find(|c| {
            let g = c.grid();
            g.setting == setting
                && g.agent == agent
                && g.method == "base"
                && g.split != "train"
                && g.computed
        });
        if let Some(base) = base {
            if seq.first().is_none_or(|c| c.grid().round > 0) {
                seq.insert(0, base);
            }
        }
    }
    curves
}

/// An item whose verdict changed from one cell of a curve to the next.
#[derive(Clone, Debug, PartialEq)]
pub struct Flip {
    /// The item id.
    pub item: String,
    /// The later cell's id.
    pub cell: usize,
    /// The later cell's round.
    pub round: i64,
    /// `wrong -> right` or `right -> wrong`.
    pub direction: &'static str,
}

/// The items of `items` whose verdict ([`right`]) changed between consecutive cells
/// of `seq` (pairs of cells both with items), ids in order within a pair.
pub fn flips<C: AsGridCell, I: ScoredItem>(seq: &[&C], items: &[I]) -> Vec<Flip> {
    let mut by_cell: BTreeMap<usize, BTreeMap<&str, f64>> = BTreeMap::new();
    for it in items {
        by_cell
            .entry(it.cell())
            .or_default()
            .insert(it.id(), it.score());
    }
    let mut out = Vec::new();
    for w in seq.windows(2) {
        let (b, a) = (w[0].grid(), w[1].grid());
        let (Some(before), Some(after)) = (by_cell.get(&b.id), by_cell.get(&a.id)) else {
            continue;
        };
        for (id, sa) in after {
            let Some(sb) = before.get(id) else { continue };
            let direction = match (right(*sb), right(*sa)) {
                (false, true) => "wrong -> right",
                (true, false) => "right -> wrong",
                _ => continue,
            };
            out.push(Flip {
                item: id.to_string(),
                cell: a.id,
                round: a.round,
                direction,
            });
        }
    }
    out
}

/// Tokens a ToolObserver curve (setting, agent, editor) used per round, over
/// `outputs` (each output's cell, its manifest's usage and tokens it used that the
/// manifest does not record): prompt plus completion tokens, summed in output order,
/// `(round, tokens)` in round order.
pub fn tokens_by_round<'o>(
    outputs: impl IntoIterator<Item = (&'o Cell, &'o pipeline::Usage, u64)>,
    curve: (&str, &str, &str),
) -> Vec<(i64, f64)> {
    let mut by: BTreeMap<i64, Vec<f64>> = BTreeMap::new();
    for (l, u, extra) in outputs {
        if !l.is(Method::ToolObserver)
            || l.setting != curve.0
            || l.agent != curve.1
            || l.editor != curve.2
        {
            continue;
        }
        let used = (u.prompt_tokens + u.completion_tokens) as f64 + extra as f64;
        by.entry(l.round).or_default().push(used);
    }
    by.into_iter()
        .map(|(round, used)| (round, sum(used)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell<'a>(id: usize, method: &'a str, round: i64, editor: &'a str) -> GridCell<'a> {
        GridCell {
            id,
            env: "bfcl",
            setting: "names",
            method,
            agent: "a",
            editor,
            round,
            split: "",
            computed: true,
            items: 3,
        }
    }

    struct It(usize, &'static str, f64, bool);

    impl ScoredItem for It {
        fn cell(&self) -> usize {
            self.0
        }
        fn id(&self) -> &str {
            self.1
        }
        fn score(&self) -> f64 {
            self.2
        }
        fn failed(&self) -> bool {
            self.3
        }
    }

    #[test]
    fn a_cells_summary_counts_errors_and_means_scores() {
        let its = [
            It(0, "x", 1.0, false),
            It(0, "y", 0.0, true),
            It(0, "z", 0.5, true),
        ];
        let s = summary(&its);
        assert_eq!((s.n, s.errors, s.mean), (3, 2, Some(0.5)));
        assert_eq!(summary::<It>(&[]).mean, None);
        let by = scores_by_cell(&[
            It(1, "x", 1.0, false),
            It(0, "y", 0.0, false),
            It(1, "z", 0.5, false),
        ]);
        assert_eq!(by[&1], [1.0, 0.5]);
        assert_eq!(by[&0], [0.0]);
        let its = [
            It(1, "x", 1.0, false),
            It(0, "y", 0.0, false),
            It(1, "z", 0.5, false),
        ];
        let ids: Vec<&str> = of_cell(&its, 1).iter().map(|i| i.1).collect();
        assert_eq!(ids, ["x", "z"]);
    }

    #[test]
    fn finals_are_the_last_computed_test_round_per_group() {
        let mut cells = vec![
            cell(0, "toolobserver", 1, "e"),
            cell(1, "toolobserver", 3, "e"),
            cell(2, "toolobserver", 2, "e"),
            cell(3, "toolobserver", 1, "f"),
            cell(4, "toolobserver", 5, "e"),
            cell(5, "toolobserver", 6, "e"),
            cell(6, "toolobserver", 7, "e"),
            cell(7, "base", 9, ""),
        ];
        cells[4].split = "train";
        cells[5].computed = false;
        cells[6].items = 0;
        let f: Vec<usize> = finals(&cells, "toolobserver")
            .iter()
            .map(|c| c.id)
            .collect();
        // Editor e's last is round 3 (not the train, pending or empty ones); f's is 1.
        assert_eq!(f, [1, 3]);
        // The counterpart has the same editor first, else any of the group.
        let bs = finals(&cells, "base");
        assert_eq!(counterpart(&cells[1], &bs).map(|c| c.id), Some(7));
        let mut other = cells[1];
        other.agent = "b";
        assert!(counterpart(&other, &bs).is_none());
        assert_eq!(pending(&cells), 1);
        assert_eq!(
            (
                computed_of(&cells, "toolobserver"),
                computed_of(&cells, "gold")
            ),
            (6, 0)
        );
    }

    #[test]
    fn comparisons_pair_items_by_id_in_natural_order() {
        let cells = [cell(0, "base", 0, ""), cell(1, "toolobserver", 1, "e")];
        let items = [
            It(0, "q10", 1.0, false),
            It(0, "q2", 0.0, false),
            It(0, "q3", 1.0, false),
            It(1, "q10", 0.0, false),
            It(1, "q2", 1.0, false),
            It(1, "q3", 1.0, false),
            It(1, "only", 1.0, false),
        ];
        let c = compare((&cells, &items), "toolobserver", (&cells, &items), "base");
        assert_eq!(c.len(), 1);
        assert_eq!((c[0].a.id, c[0].b.id), (1, 0));
        assert_eq!(c[0].matched, ["q2", "q3", "q10"]);
        assert_eq!(c[0].a_only, ["q2"]);
        assert_eq!(c[0].b_only, ["q10"]);
        // A minus B: (1 - 0 + 0 + 0 - 1) / 3.
        assert_eq!(c[0].diff, 0.0);
        let (p, ci) = paired_interval(
            &[(1, 0.0), (2, 0.0)].into(),
            &[(1, 1.0), (2, 1.0)].into(),
            right,
            100,
            0,
        );
        assert_eq!((p.mean_diff, ci), (1.0, (1.0, 1.0)));
        assert!(natural("x2") < natural("x10") && natural("x10") != natural("x010"));
    }

    #[test]
    fn curves_lead_with_round_zero_and_flips_follow_them() {
        let mut cells = vec![
            cell(0, "toolobserver", 2, "e"),
            cell(1, "base", 0, ""),
            cell(2, "toolobserver", 1, "e"),
            cell(3, "toolobserver", 3, "e"),
        ];
        cells[3].computed = false;
        let curves = online_curves(&cells);
        let ids: Vec<usize> = curves[&("names".into(), "a".into(), "e".into())]
            .iter()
            .map(|c| c.id)
            .collect();
        assert_eq!(ids, [1, 2, 0]);
        let seq = &edit_curves(&cells)[&("names".into(), "a".into(), "e".into())];
        assert_eq!(seq.iter().map(|c| c.id).collect::<Vec<_>>(), [1, 2, 0]);
        let items = [
            It(1, "x", 0.0, false),
            It(1, "y", 1.0, false),
            It(2, "x", 1.0, false),
            It(2, "y", 1.0, false),
            It(0, "x", 1.0, false),
            It(0, "y", 0.5, false),
        ];
        let f = flips(seq, &items);
        assert_eq!(
            f,
            [
                Flip {
                    item: "x".into(),
                    cell: 2,
                    round: 1,
                    direction: "wrong -> right"
                },
                Flip {
                    item: "y".into(),
                    cell: 0,
                    round: 2,
                    direction: "right -> wrong"
                },
            ]
        );
        // A Base that is not computed leads no curve.
        cells[1].computed = false;
        assert_eq!(online_curves(&cells).values().next().map(Vec::len), Some(2));
    }

    #[test]
    fn tokens_are_summed_per_round_of_one_curve() {
        let c = |round: i64, editor: &str, m: Method| Cell {
            setting: "names".into(),
            agent: "a".into(),
            editor: editor.into(),
            method: Some(m),
            round,
            ..Cell::default()
        };
        let u = |p: u64, c: u64| pipeline::Usage {
            prompt_tokens: p,
            completion_tokens: c,
            ..Default::default()
        };
        let cells = [
            c(2, "e", Method::ToolObserver),
            c(1, "e", Method::ToolObserver),
            c(2, "e", Method::ToolObserver),
            c(1, "f", Method::ToolObserver),
            c(1, "e", Method::Base),
        ];
        let us = [u(10, 1), u(100, 0), u(5, 5), u(1000, 0), u(7, 7)];
        let outs = cells
            .iter()
            .zip(&us)
            .zip([0, 0, 3, 0, 0])
            .map(|((c, u), x)| (c, u, x));
        assert_eq!(
            tokens_by_round(outs, ("names", "a", "e")),
            [(1, 100.0), (2, 24.0)]
        );
    }
}
