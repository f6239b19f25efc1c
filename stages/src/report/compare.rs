//! Paired comparisons: two methods (of one experiment, or of two) on the items both
//! graded, matched by item id within the same environment, setting or tool set and
//! agent; the difference of the means with its paired bootstrap interval.

use super::model::{Cell, Comparison, Item};
use crate::metrics::items as metrics;

/// One side of a comparison: an experiment's cells and items.
pub struct Side<'a> {
    /// What the side is called in the page (the experiment's name).
    pub name: &'a str,
    /// Its cells.
    pub cells: &'a [Cell],
    /// Its items.
    pub items: &'a [Item],
}

/// Method `ma` of side `a` against method `mb` of side `b`, per group both have
/// (the pairs and their numbers: [`crate::metrics::items::compare`]).
pub fn compare(a: &Side<'_>, ma: &str, b: &Side<'_>, mb: &str) -> Vec<Comparison> {
    // Both sides are one report's cells (item links then work for both).
    let one = std::ptr::eq(a.cells, b.cells);
    let name = |s: &Side<'_>, c: &Cell| {
        let mut t = c.title();
        if !one {
            t = format!("{}: {t}", s.name);
        }
        if !c.editor.is_empty() {
            t.push_str(&format!(" (editor {})", c.editor));
        }
        t
    };
    metrics::compare((a.cells, a.items), ma, (b.cells, b.items), mb)
        .into_iter()
        .map(|p| Comparison {
            a: name(a, p.a),
            b: name(b, p.b),
            group: format!("{} · {} · agent {}", p.a.env, p.a.setting, p.a.agent),
            a_cell: p.a.id,
            b_cell: one.then_some(p.b.id),
            matched: p.matched.len(),
            a_only: p.a_only,
            b_only: p.b_only,
            diff: p.diff,
            ci: p.ci,
        })
        .collect()
}

pub use crate::metrics::items::natural;

/// The methods a report compares by default: ToolObserver against Base where both
/// are in the grid.
pub fn default_pair(cells: &[Cell]) -> Option<(String, String)> {
    let has = |m: &str| metrics::computed_of(cells, m) > 0;
    (has("toolobserver") && has("base")).then(|| ("toolobserver".into(), "base".into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(id: usize, method: &str, round: i64) -> Cell {
        Cell {
            id,
            env: "bfcl",
            node: format!("n{id}"),
            setting: "names".into(),
            method: method.into(),
            agent: "a".into(),
            editor: String::new(),
            round,
            split: String::new(),
            state: "done".into(),
            n: 3,
            mean: None,
            errors: 0,
            p_a: None,
            docs: None,
            page: None,
        }
    }

    fn item(cell: usize, id: &str, score: f64) -> Item {
        Item {
            cell,
            id: id.into(),
            verdict: "right",
            score,
            error: None,
            summary: String::new(),
            detail: Vec::new(),
        }
    }

    #[test]
    fn items_are_matched_by_id_and_the_last_round_is_used() {
        let cells = [
            cell(0, "base", 0),
            cell(1, "toolobserver", 1),
            cell(2, "toolobserver", 2),
        ];
        let items = [
            item(0, "x", 0.0),
            item(0, "y", 1.0),
            item(0, "z", 0.0),
            item(1, "x", 0.0),
            item(2, "x", 1.0),
            item(2, "y", 0.0),
            item(2, "z", 0.0),
            item(2, "only-here", 1.0),
        ];
        let s = Side {
            name: "e",
            cells: &cells,
            items: &items,
        };
        let c = compare(&s, "toolobserver", &s, "base");
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].matched, 3);
        assert_eq!(c[0].a_only, ["x"]);
        assert_eq!(c[0].b_only, ["y"]);
        assert_eq!(c[0].diff, 0.0);
        assert!(c[0].ci.0 <= 0.0 && c[0].ci.1 >= 0.0);
    }
}
