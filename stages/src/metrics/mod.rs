//! Every number that a table, the report or the SFT export shows is computed here, once,
//! as an aggregation over the store read as frames; renderers (`tables/`, `report/`)
//! only format what these functions return.
//!
//! A [`Frame`] is one row kind (scores, trajectories, games, doc_calls, ...) over every
//! output of a stage in a drive's [`RunOutput`], each row beside the typed [`Cell`] of
//! the output it came from: the grid's cells are columns, so a metric groups by cell
//! fields ([`Frame::group_by`]) and folds a group with the aggregations below
//! ([`mean`], [`sum`], [`count`], [`weighted_mean`], [`bootstrap`], [`paired`]). Frames
//! are typed rows carrying their cell, not arrow record batches: the rows' types are
//! the ones their stages wrote, so a metric reads fields, not strings
//! (ARCHITECTURE.md, "Metrics").
//!
//! The metric families live in the submodules, named for what they measure; each
//! environment's row types stay in its folder and are only read here.

use crate::env::{Cell, Output, RunOutput};
use pipeline::{Handle, Row, StageError};
use std::collections::BTreeMap;

pub mod accuracy;
pub mod convergence;
pub mod cost;
pub mod docs;
pub mod fidelity;
pub mod items;
pub mod progress;
pub mod sft;
pub mod status;
pub mod tokens;

/// The seeded bootstrap 95% percentile interval of a mean (`resamples` draws,
/// `seed`): `(lo, hi)`, NaN for no data.
pub use datasets::stats::bootstrap_mean_ci as bootstrap;

/// One row of a [`Frame`] with where it sits in the grid.
#[derive(Debug)]
pub struct Framed<'a, R> {
    /// The output's node name (a curve frame: the curve entry's label, unique within
    /// the drive). For people and keys of a group, never parsed.
    pub node: &'a str,
    /// The cell of the output the row came from.
    pub cell: &'a Cell,
    /// The row.
    pub row: R,
}

/// Rows of one kind with their cells, in drive order (rows of one output in stored
/// order).
#[derive(Debug)]
pub struct Frame<'a, R> {
    rows: Vec<Framed<'a, R>>,
}

impl<'a, R> Default for Frame<'a, R> {
    fn default() -> Self {
        Frame { rows: Vec::new() }
    }
}

impl<'a, R: Row> Frame<'a, R> {
    /// Every row of table `R::TABLE` written by the outputs of stage `stage`.
    pub fn of_stage(run: &'a RunOutput, stage: &str) -> Result<Self, StageError> {
        Self::of_outputs(run.outputs.iter().filter(|o| o.stage == stage))
    }

    /// Every row of table `R::TABLE` of `outputs` (each must have the table).
    pub fn of_outputs(outputs: impl IntoIterator<Item = &'a Output>) -> Result<Self, StageError> {
        let mut rows = Vec::new();
        for o in outputs {
            for row in o.entry.read::<R>()? {
                rows.push(Framed {
                    node: &o.node,
                    cell: &o.cell,
                    row,
                });
            }
        }
        Ok(Frame { rows })
    }

    /// Every row of table `R::TABLE` of the computed entries of a drive's score curve
    /// (`RunOutput::curve`; pending entries are skipped), each under its label.
    pub fn of_curve(curve: &'a [(String, Cell, Handle)]) -> Result<Self, StageError> {
        let mut rows = Vec::new();
        for (label, cell, h) in curve {
            let Some(e) = h.entry() else { continue };
            for row in e.read::<R>()? {
                rows.push(Framed {
                    node: label,
                    cell,
                    row,
                });
            }
        }
        Ok(Frame { rows })
    }
}

impl<'a, R> Frame<'a, R> {
    /// A frame of rows already read.
    pub fn from_rows(rows: Vec<Framed<'a, R>>) -> Self {
        Frame { rows }
    }

    /// The rows in order.
    pub fn iter(&self) -> std::slice::Iter<'_, Framed<'a, R>> {
        self.rows.iter()
    }

    /// How many rows.
    pub fn len(&self) -> usize {
        self.rows.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows for which `keep` holds.
    pub fn filter(self, keep: impl Fn(&Framed<'a, R>) -> bool) -> Self {
        Frame {
            rows: self.rows.into_iter().filter(|r| keep(r)).collect(),
        }
    }

    /// The rows grouped by `key`, groups in key order, rows of a group in frame order.
    pub fn group_by<K: Ord>(
        &self,
        key: impl Fn(&Framed<'a, R>) -> K,
    ) -> BTreeMap<K, Vec<&Framed<'a, R>>> {
        let mut groups: BTreeMap<K, Vec<&Framed<'a, R>>> = BTreeMap::new();
        for r in &self.rows {
            groups.entry(key(r)).or_default().push(r);
        }
        groups
    }

    /// The rows, without their cells.
    pub fn into_rows(self) -> Vec<R> {
        self.rows.into_iter().map(|r| r.row).collect()
    }

    /// The first row of each output (of a table holding one row per output, such as
    /// a stage's aggregate), in order; an output with no rows has none.
    pub fn firsts(self) -> Self {
        let mut last: Option<&str> = None;
        let mut rows = Vec::new();
        for r in self.rows {
            if last != Some(r.node) {
                last = Some(r.node);
                rows.push(r);
            }
        }
        Frame { rows }
    }
}

impl<'a, 'f, R> IntoIterator for &'f Frame<'a, R> {
    type Item = &'f Framed<'a, R>;
    type IntoIter = std::slice::Iter<'f, Framed<'a, R>>;
    fn into_iter(self) -> Self::IntoIter {
        self.rows.iter()
    }
}

/// The mean of `xs`, summed in order (NaN for none): the order is fixed so that the
/// last bit of a stored mean never depends on how rows were grouped.
pub fn mean(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return f64::NAN;
    }
    sum(xs.iter().copied()) / xs.len() as f64
}

/// The mean of `f` over `items`, `None` for no items.
pub fn mean_of<T>(items: impl IntoIterator<Item = T>, f: impl Fn(T) -> f64) -> Option<f64> {
    let xs: Vec<f64> = items.into_iter().map(f).collect();
    (!xs.is_empty()).then(|| mean(&xs))
}

/// The sum of `xs`, in order.
pub fn sum(xs: impl IntoIterator<Item = f64>) -> f64 {
    xs.into_iter().fold(0.0, |a, x| a + x)
}

/// How many of `items` satisfy `pred`.
pub fn count<T>(items: impl IntoIterator<Item = T>, pred: impl Fn(&T) -> bool) -> usize {
    items.into_iter().filter(|x| pred(x)).count()
}

/// The mean of values weighted by counts, `(value, weight)` pairs: `sum(v*w) / sum(w)`,
/// `None` when the weights sum to zero.
pub fn weighted_mean(pairs: impl IntoIterator<Item = (f64, f64)>) -> Option<f64> {
    let (mut num, mut den) = (0.0, 0.0);
    for (v, w) in pairs {
        num += v * w;
        den += w;
    }
    (den > 0.0).then(|| num / den)
}

/// A paired comparison of two score maps over the ids both have: the ids in order,
/// the mean difference `b - a` (NaN for none), the ids `a` gets right and `b` not
/// (`right` decides), and those `b` gets right and `a` not.
pub fn paired<'k, K: Ord + Copy + 'k>(
    a: &BTreeMap<K, f64>,
    b: &BTreeMap<K, f64>,
    right: impl Fn(f64) -> bool,
) -> Paired<K> {
    let both: Vec<K> = a.keys().copied().filter(|k| b.contains_key(k)).collect();
    let diffs: Vec<f64> = both.iter().map(|k| b[k] - a[k]).collect();
    let lost = both
        .iter()
        .copied()
        .filter(|k| right(a[k]) && !right(b[k]))
        .collect();
    let won = both
        .iter()
        .copied()
        .filter(|k| right(b[k]) && !right(a[k]))
        .collect();
    Paired {
        mean_diff: mean(&diffs),
        both,
        lost,
        won,
    }
}

/// What [`paired`] finds.
#[derive(Clone, Debug, PartialEq)]
pub struct Paired<K> {
    /// The ids both sides scored, in order.
    pub both: Vec<K>,
    /// Mean of `b - a` over `both` (NaN for none).
    pub mean_diff: f64,
    /// Right in `a`, wrong in `b`.
    pub lost: Vec<K>,
    /// Right in `b`, wrong in `a`.
    pub won: Vec<K>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_sums_in_order_and_is_nan_for_none() {
        assert!(mean(&[]).is_nan());
        assert_eq!(mean(&[1.0, 2.0, 4.0]), 7.0 / 3.0);
        // In order: (0.1 + 0.2) + 0.3, not 0.1 + (0.2 + 0.3).
        assert_eq!(mean(&[0.1, 0.2, 0.3]), ((0.1 + 0.2) + 0.3) / 3.0);
        assert_eq!(mean_of(Vec::<f64>::new(), |x| x), None);
        assert_eq!(mean_of([1, 3], |x| x as f64), Some(2.0));
    }

    #[test]
    fn weighted_means_and_counts() {
        assert_eq!(weighted_mean([(1.0, 1.0), (0.0, 3.0)]), Some(0.25));
        assert_eq!(weighted_mean([(1.0, 0.0)]), None);
        assert_eq!(count([1, 2, 3, 4], |x| x % 2 == 0), 2);
        assert_eq!(sum([0.5, 0.25]), 0.75);
    }

    #[test]
    fn frames_group_by_cell_fields_in_key_order() {
        let cells = [
            Cell {
                setting: "names".into(),
                round: 1,
                ..Cell::default()
            },
            Cell {
                setting: "gold".into(),
                ..Cell::default()
            },
        ];
        let f = Frame::from_rows(vec![
            Framed {
                node: "a",
                cell: &cells[0],
                row: 1.0,
            },
            Framed {
                node: "b",
                cell: &cells[1],
                row: 2.0,
            },
            Framed {
                node: "c",
                cell: &cells[0],
                row: 3.0,
            },
        ]);
        let g = f.group_by(|r| r.cell.setting.clone());
        let keys: Vec<&String> = g.keys().collect();
        assert_eq!(keys, ["gold", "names"]);
        let names: Vec<f64> = g["names"].iter().map(|r| r.row).collect();
        assert_eq!(names, [1.0, 3.0]);
        let f = f.filter(|r| r.cell.round == 1);
        assert_eq!(f.len(), 2);
        assert_eq!(f.into_rows(), [1.0, 3.0]);
    }

    #[test]
    fn firsts_keep_each_outputs_first_row() {
        let cell = Cell::default();
        let f = Frame::from_rows(
            [("a", 1), ("a", 2), ("b", 3), ("c", 4), ("c", 5)]
                .into_iter()
                .map(|(node, row)| Framed {
                    node,
                    cell: &cell,
                    row,
                })
                .collect(),
        );
        assert_eq!(f.firsts().into_rows(), [1, 3, 4]);
    }

    #[test]
    fn paired_comparison() {
        let a: BTreeMap<&str, f64> = [("x", 1.0), ("y", 0.0), ("z", 1.0)].into();
        let b: BTreeMap<&str, f64> = [("x", 0.0), ("y", 1.0), ("w", 1.0)].into();
        let p = paired(&a, &b, |s| s >= 1.0);
        assert_eq!(p.both, ["x", "y"]);
        assert_eq!(p.mean_diff, 0.0);
        assert_eq!(p.lost, ["x"]);
        assert_eq!(p.won, ["y"]);
    }
}
