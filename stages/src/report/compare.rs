//! Paired comparisons: two methods (of one experiment, or of two) on the items both
//! graded, matched by item id within the same environment, setting or tool set and
//! agent; the difference of the means with its paired bootstrap interval.

use super::model::{Cell, Comparison, Item};
use std::collections::HashMap;

/// One side of a comparison: an experiment's cells and items.
pub struct Side<'a> {
    /// What the side is called in the page (the experiment's name).
    pub name: &'a str,
    /// Its cells.
    pub cells: &'a [Cell],
    /// Its items.
    pub items: &'a [Item],
}

/// The cell of `method` that a comparison uses in each group (environment, setting,
/// agent, editor): test play (not exploration), computed, its last round.
fn finals<'a>(side: &Side<'a>, method: &str) -> Vec<&'a Cell> {
    let mut best: HashMap<(&str, &str, &str, &str), &'a Cell> = HashMap::new();
    for c in side.cells {
        if c.method != method || c.split == "train" || c.state != "done" || c.n == 0 {
            continue;
        }
        let k = (
            c.env,
            c.setting.as_str(),
            c.agent.as_str(),
            c.editor.as_str(),
        );
        if best.get(&k).is_none_or(|b| b.round < c.round) {
            best.insert(k, c);
        }
    }
    let mut v: Vec<&Cell> = best.into_values().collect();
    v.sort_by_key(|c| c.id);
    v
}

fn scores(items: &[Item], cell: usize) -> HashMap<&str, f64> {
    items
        .iter()
        .filter(|i| i.cell == cell)
        .map(|i| (i.id.as_str(), i.score))
        .collect()
}

/// Method `ma` of side `a` against method `mb` of side `b`, per group both have.
pub fn compare(a: &Side<'_>, ma: &str, b: &Side<'_>, mb: &str) -> Vec<Comparison> {
    let bs = finals(b, mb);
    // Both sides are one report's cells (item links then work for both).
    let one = std::ptr::eq(a.cells, b.cells);
    let mut out = Vec::new();
    for ca in finals(a, ma) {
        let same =
            |cb: &&&Cell| cb.env == ca.env && cb.setting == ca.setting && cb.agent == ca.agent;
        let Some(cb) = bs
            .iter()
            .filter(same)
            .find(|cb| cb.editor == ca.editor)
            .or_else(|| bs.iter().find(same))
        else {
            continue;
        };
        let (sa, sb) = (scores(a.items, ca.id), scores(b.items, cb.id));
        let mut ids: Vec<&str> = sa.keys().copied().filter(|k| sb.contains_key(k)).collect();
        ids.sort_by_key(|k| natural(k));
        let diffs: Vec<f64> = ids.iter().map(|k| sa[k] - sb[k]).collect();
        let right = |s: &HashMap<&str, f64>, k: &str| s.get(k).is_some_and(|v| *v >= 1.0);
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
        let diff = if diffs.is_empty() {
            f64::NAN
        } else {
            diffs.iter().sum::<f64>() / diffs.len() as f64
        };
        out.push(Comparison {
            a: name(a, ca),
            b: name(b, cb),
            group: format!("{} · {} · agent {}", ca.env, ca.setting, ca.agent),
            a_cell: ca.id,
            b_cell: one.then_some(cb.id),
            matched: ids.len(),
            a_only: ids
                .iter()
                .filter(|k| right(&sa, k) && !right(&sb, k))
                .map(|k| k.to_string())
                .collect(),
            b_only: ids
                .iter()
                .filter(|k| right(&sb, k) && !right(&sa, k))
                .map(|k| k.to_string())
                .collect(),
            diff,
            ci: datasets::stats::bootstrap_mean_ci(&diffs, 1000, 0),
        });
    }
    out
}

/// `exec_simple_12` sorts after `exec_simple_2`: the text before trailing digits,
/// then their value.
pub fn natural(id: &str) -> (&str, u64, &str) {
    let digits = id.len() - id.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    let (head, tail) = id.split_at(id.len() - digits);
    (head, tail.parse().unwrap_or(0), tail)
}

/// The methods a report compares by default: ToolObserver against Base where both
/// are in the grid.
pub fn default_pair(cells: &[Cell]) -> Option<(String, String)> {
    let has = |m: &str| cells.iter().any(|c| c.method == m && c.state == "done");
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
