//! Accuracy: E, P and A of BFCL's score tables (the `summarize` stage), Table 2's
//! cells (the authors' released run versions pooled per setting, model and method;
//! this run's latest round per agent, setting and method) and Table 7's final E per
//! agent and editor.

use super::{bootstrap, count, mean, weighted_mean, Frame, Framed};
use crate::env::Cell;
use crate::rows::{EditorCell, ScoreRow, SummaryRow};
use datasets::bfcl::opacify::Setting;
use datasets::bfcl::released::{split_config, ScoreRow as ReleasedScore};
use pipeline::{Handle, StageError};
use std::collections::BTreeMap;

/// The summary of one score table: `rows` (the table's rows, in stored order) under
/// `label` and `cell`, with E, P, A and corrected A as means over instances,
/// bootstrap intervals (`(resamples, seed)`) of E, P and A, and the error rows
/// counted.
pub fn summary(
    label: &str,
    cell: &Cell,
    rows: &[&Framed<'_, ScoreRow>],
    (resamples, seed): (u32, u64),
) -> SummaryRow {
    let col = |f: fn(&ScoreRow) -> f64| rows.iter().map(|r| f(&r.row)).collect::<Vec<f64>>();
    let (e, p, a) = (
        col(|r| if r.e { 1.0 } else { 0.0 }),
        col(|r| r.p),
        col(|r| r.a),
    );
    let (e_lo, e_hi) = bootstrap(&e, resamples, seed);
    let (p_lo, p_hi) = bootstrap(&p, resamples, seed);
    let (a_lo, a_hi) = bootstrap(&a, resamples, seed);
    SummaryRow {
        label: label.to_string(),
        setting: cell.setting.clone(),
        method: cell.method_name().to_string(),
        agent: cell.agent.clone(),
        editor: cell.editor.clone(),
        round: cell.round,
        n: rows.len() as i64,
        e: mean(&e),
        p: mean(&p),
        a: mean(&a),
        a_corrected: mean(&col(|r| r.a_corrected)),
        e_lo,
        e_hi,
        p_lo,
        p_hi,
        a_lo,
        a_hi,
        errors: count(rows, |r| r.row.error_kind.is_some()) as i64,
    }
}

/// One [`summary`] per computed entry of a drive's score curve
/// (`RunOutput::curve`: label, cell, score table), in curve order; pending entries
/// have none.
pub fn summaries(
    curve: &[(String, Cell, Handle)],
    bootstrap: (u32, u64),
) -> Result<Vec<SummaryRow>, StageError> {
    let frame = Frame::<ScoreRow>::of_curve(curve)?;
    let tables = frame.group_by(|r| r.node);
    Ok(curve
        .iter()
        .filter(|(.., h)| h.entry().is_some())
        .map(|(label, cell, _)| {
            let rows = tables.get(label.as_str()).map_or(&[][..], Vec::as_slice);
            summary(label, cell, rows, bootstrap)
        })
        .collect())
}

/// This run's Table 2 cells: per (agent, setting, method) of the summary `rows`, the
/// row of the latest round with no editor or editor `editor` (of rows of one round,
/// the last).
pub fn latest_rounds<'r>(
    rows: &'r [SummaryRow],
    editor: &str,
) -> BTreeMap<(&'r str, &'r str, &'r str), &'r SummaryRow> {
    let mut latest: BTreeMap<(&str, &str, &str), &SummaryRow> = BTreeMap::new();
    for r in rows {
        if !(r.editor.is_empty() || r.editor == editor) {
            continue;
        }
        let k = (r.agent.as_str(), r.setting.as_str(), r.method.as_str());
        if latest.get(&k).is_none_or(|l| l.round <= r.round) {
            latest.insert(k, r);
        }
    }
    latest
}

/// Table 7's cells from the summary `rows`: per agent and editor, ToolObserver's E
/// at the last round of each setting's chain (of rows of one round, the first),
/// weighted by instances over the settings (0 with no instances), with the instances
/// and settings counted. Cells in (agent, editor) order.
pub fn editor_finals(rows: &[SummaryRow]) -> Vec<EditorCell> {
    // (agent, editor, setting) -> last round's row
    let mut last: BTreeMap<(&str, &str, &str), &SummaryRow> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.method == "toolobserver") {
        let k = (r.agent.as_str(), r.editor.as_str(), r.setting.as_str());
        if last.get(&k).is_none_or(|p| p.round < r.round) {
            last.insert(k, r);
        }
    }
    let mut pairs: BTreeMap<(&str, &str), Vec<&SummaryRow>> = BTreeMap::new();
    for ((agent, editor, _), r) in last {
        pairs.entry((agent, editor)).or_default().push(r);
    }
    pairs
        .into_iter()
        .map(|((agent, editor), rs)| EditorCell {
            agent: agent.to_string(),
            editor: editor.to_string(),
            n: rs.iter().map(|r| r.n).sum(),
            e: weighted_mean(rs.iter().map(|r| (r.e, r.n as f64))).unwrap_or(0.0),
            settings: rs.len() as i64,
        })
        .collect()
}

/// A Table 2 method column that the authors' released runs fill.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReleasedMethod {
    /// ToolObserver's version 0 on the original docs.
    Gold,
    /// ToolObserver's version 0 on opacified docs.
    Base,
    /// ToolObserver's last version on opacified docs.
    ToolObserver,
    /// Play2Prompt's run.
    Play2Prompt,
    /// EasyTool's run.
    EasyTool,
}

/// One released run version, as Table 2's pooling reads it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunVersion<'a> {
    /// The method directory (`tool_observer`, `easytool`, `play2prompt`).
    pub method: &'a str,
    /// The tool config name (category and documentation suffix).
    pub config: &'a str,
    /// The generation hypers (the agent model and its settings).
    pub gen_hypers: &'a str,
    /// 0 for the base run, N for improvement iteration N.
    pub version: u32,
}

impl<'a> RunVersion<'a> {
    /// The run of a rescored released run version.
    pub fn of(r: &'a ReleasedScore) -> Self {
        RunVersion {
            method: &r.method,
            config: &r.config,
            gen_hypers: &r.gen_hypers,
            version: r.version,
        }
    }

    /// The run this is a version of: (method, config, gen_hypers).
    pub fn run(&self) -> (&'a str, &'a str, &'a str) {
        (self.method, self.config, self.gen_hypers)
    }
}

/// The last version of every run ([`RunVersion::run`]) among `versions`.
pub fn last_versions<'a>(
    versions: impl IntoIterator<Item = RunVersion<'a>>,
) -> BTreeMap<(&'a str, &'a str, &'a str), u32> {
    let mut last: BTreeMap<(&str, &str, &str), u32> = BTreeMap::new();
    for v in versions {
        let l = last.entry(v.run()).or_insert(0);
        *l = (*l).max(v.version);
    }
    last
}

/// Where a released run version is pooled in Table 2, given its run's last version
/// `last`: the settings (a config on the original docs pools into every opacified
/// setting) and the method column; `None` for a version no cell pools (an
/// intermediate ToolObserver version, a baseline's later version, a config of no
/// known category or setting).
pub fn released_column(
    v: RunVersion<'_>,
    last: u32,
) -> Option<(Vec<&'static str>, ReleasedMethod)> {
    let (_, suffix) = split_config(v.config)?;
    let original = suffix == "base";
    let settings: Vec<&'static str> = if original {
        Setting::ALL
            .into_iter()
            .filter(|s| *s != Setting::Gold)
            .map(Setting::as_str)
            .collect()
    } else {
        match Setting::from_reference_suffix(suffix) {
            Some(s) if s != Setting::Gold => vec![s.as_str()],
            _ => return None,
        }
    };
    let method = match (v.method, original) {
        ("tool_observer", true) if v.version == 0 => ReleasedMethod::Gold,
        ("tool_observer", false) if v.version == 0 => ReleasedMethod::Base,
        ("tool_observer", false) if v.version == last => ReleasedMethod::ToolObserver,
        ("play2prompt", false) if v.version == 0 => ReleasedMethod::Play2Prompt,
        ("easytool", false) if v.version == 0 => ReleasedMethod::EasyTool,
        _ => return None,
    };
    Some((settings, method))
}

/// A released Table 2 cell: its run versions' E, P and A weighted by instances.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pooled {
    /// Instances over the pooled versions.
    pub n: i64,
    /// Execution accuracy.
    pub e: f64,
    /// Parameter accuracy.
    pub p: f64,
    /// AST accuracy.
    pub a: f64,
}

/// The rescored released run versions `rows` pooled into Table 2's cells
/// ([`released_column`]), each cell named by `key(setting, gen_hypers, method)`
/// (versions whose keys are equal pool together), cells in key order; a cell of no
/// instances is left out.
pub fn released_pools<K: Ord>(
    rows: &[ReleasedScore],
    key: impl Fn(&'static str, &str, ReleasedMethod) -> K,
) -> Vec<(K, Pooled)> {
    let last = last_versions(rows.iter().map(RunVersion::of));
    let mut cells: BTreeMap<K, Vec<&ReleasedScore>> = BTreeMap::new();
    for r in rows {
        let v = RunVersion::of(r);
        let Some((settings, method)) = released_column(v, last[&v.run()]) else {
            continue;
        };
        for s in settings {
            cells
                .entry(key(s, &r.gen_hypers, method))
                .or_default()
                .push(r);
        }
    }
    cells
        .into_iter()
        .filter_map(|(k, rs)| {
            let w =
                |f: fn(&ReleasedScore) -> f64| weighted_mean(rs.iter().map(|r| (f(r), r.n as f64)));
            let pooled = Pooled {
                n: rs.iter().map(|r| r.n as i64).sum(),
                e: w(|r| r.e)?,
                p: w(|r| r.p)?,
                a: w(|r| r.a)?,
            };
            Some((k, pooled))
        })
        .collect()
}

/// The instance-verdict disagreements with the released scored files, over `rows`.
pub fn released_disagreements(rows: &[ReleasedScore]) -> usize {
    rows.iter()
        .map(|r| r.disagreements_with_released_scored)
        .sum()
}

/// E's bootstrap interval (`(resamples, seed)`) of a pooled released cell of `n`
/// instances and mean E `e`, from per-instance scores `es` that should be the cell's:
/// `None` unless they are as many and have the same mean to 3 decimals.
pub fn pooled_interval(
    es: &[f64],
    n: i64,
    e: f64,
    (resamples, seed): (u32, u64),
) -> Option<(f64, f64)> {
    if es.is_empty() || es.len() as i64 != n || (mean(es) - e).abs() >= 5e-4 {
        return None;
    }
    Some(bootstrap(es, resamples, seed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::tokens::tests::{entry, table};

    fn score(id: &str, e: bool, p: f64, a: f64, error: bool) -> ScoreRow {
        ScoreRow {
            instance_id: id.into(),
            category: "exec_simple".into(),
            round: 0,
            e,
            e_reason: String::new(),
            p,
            a,
            a_corrected: a / 2.0,
            outputs: serde_json::Value::Null,
            outcome: String::new(),
            error_kind: error.then(|| "timeout".to_string()),
        }
    }

    fn cell(setting: &str, round: i64) -> Cell {
        Cell {
            env: "bfcl",
            setting: setting.into(),
            method: Some(crate::env::Method::ToolObserver),
            agent: "a".into(),
            editor: "x".into(),
            round,
            ..Cell::default()
        }
    }

    /// Each curve entry's own rows, in curve order (not label order); a pending
    /// entry has no summary.
    #[test]
    fn summaries_are_per_curve_entry_in_curve_order() {
        let tmp = tempfile::tempdir().unwrap();
        let ready = |label: &str, rows: Vec<ScoreRow>| {
            let e = entry(&tmp.path().join(label), |d| vec![table(d, &rows)]);
            Handle::ready(label, e)
        };
        let curve = vec![
            (
                "z".to_string(),
                cell("names", 1),
                ready(
                    "z",
                    vec![
                        score("1", true, 1.0, 1.0, false),
                        score("2", false, 0.5, 0.0, true),
                        score("3", true, 0.0, 1.0, false),
                    ],
                ),
            ),
            ("p".to_string(), cell("names", 2), Handle::pending("p")),
            (
                "a".to_string(),
                cell("names+desc", 0),
                ready("a", vec![score("1", false, 0.25, 1.0, false)]),
            ),
        ];
        let s = summaries(&curve, (100, 0)).unwrap();
        let grid: Vec<(&str, &str, i64, i64, i64)> = s
            .iter()
            .map(|r| (r.label.as_str(), r.setting.as_str(), r.round, r.n, r.errors))
            .collect();
        assert_eq!(
            grid,
            [("z", "names", 1, 3, 1), ("a", "names+desc", 0, 1, 0)]
        );
        let means: Vec<[f64; 4]> = s.iter().map(|r| [r.e, r.p, r.a, r.a_corrected]).collect();
        assert_eq!(
            means,
            [
                [2.0 / 3.0, 0.5, 2.0 / 3.0, 1.0 / 3.0],
                [0.0, 0.25, 1.0, 0.5]
            ]
        );
        assert_eq!(
            (s[0].method.as_str(), s[0].agent.as_str()),
            ("toolobserver", "a")
        );
        assert_eq!(s[0].editor, "x");
        // The interval is the seeded bootstrap of the entry's own E values.
        let (lo, hi) = bootstrap(&[1.0, 0.0, 1.0], 100, 0);
        assert_eq!((s[0].e_lo, s[0].e_hi), (lo, hi));
        assert_eq!((s[1].e_lo, s[1].e_hi), (0.0, 0.0));
    }

    fn row(agent: &str, editor: &str, setting: &str, round: i64, n: i64, e: f64) -> SummaryRow {
        SummaryRow {
            setting: setting.into(),
            method: "toolobserver".into(),
            agent: agent.into(),
            editor: editor.into(),
            round,
            n,
            e,
            ..SummaryRow::default()
        }
    }

    #[test]
    fn editor_finals_take_each_settings_last_round_weighted_by_instances() {
        let mut other = row("A", "X", "names", 9, 100, 0.9);
        other.method = "base".into();
        let rows = vec![
            row("A", "X", "names", 0, 10, 0.0),
            row("A", "X", "names", 2, 10, 0.5),
            // A second row of the last round: the first one counts.
            row("A", "X", "names", 2, 10, 0.7),
            row("A", "X", "names+desc", 1, 30, 1.0),
            row("A", "Y", "names", 1, 10, 0.2),
            row("B", "X", "names", 1, 0, 0.3),
            other,
        ];
        let c = editor_finals(&rows);
        let got: Vec<(&str, &str, i64, i64)> = c
            .iter()
            .map(|c| (c.agent.as_str(), c.editor.as_str(), c.n, c.settings))
            .collect();
        assert_eq!(
            got,
            [("A", "X", 40, 2), ("A", "Y", 10, 1), ("B", "X", 0, 1)]
        );
        assert_eq!(c[0].e, (0.5 * 10.0 + 1.0 * 30.0) / 40.0);
        assert_eq!(c[1].e, 0.2);
        assert_eq!(c[2].e, 0.0, "no instances: 0");
    }

    #[test]
    fn latest_rounds_keep_the_editors_last_round_per_agent_setting_and_method() {
        let mut gold = row("A", "", "gold", 0, 10, 0.9);
        gold.method = "gold".into();
        let rows = vec![
            gold,
            row("A", "X", "names", 1, 10, 0.1),
            row("A", "X", "names", 3, 10, 0.3),
            // Another editor's later round is not this table's.
            row("A", "Y", "names", 5, 10, 0.5),
            // Of two rows of the last round, the last one.
            row("A", "X", "names", 3, 10, 0.4),
            row("A", "X", "names", 2, 10, 0.2),
            row("B", "X", "names", 1, 10, 0.6),
        ];
        let l = latest_rounds(&rows, "X");
        let got: Vec<((&str, &str, &str), f64)> = l.iter().map(|(k, r)| (*k, r.e)).collect();
        assert_eq!(
            got,
            [
                (("A", "gold", "gold"), 0.9),
                (("A", "names", "toolobserver"), 0.4),
                (("B", "names", "toolobserver"), 0.6),
            ]
        );
    }

    fn released(
        method: &str,
        config: &str,
        gen: &str,
        version: u32,
        n: usize,
        e: f64,
    ) -> ReleasedScore {
        ReleasedScore {
            method: method.into(),
            config: config.into(),
            gen_hypers: gen.into(),
            version,
            e,
            p: e / 2.0,
            a: 1.0,
            a_corrected: 1.0,
            n,
            disagreements_with_released_scored: version as usize,
            disagreement_notes: Vec::new(),
        }
    }

    #[test]
    fn released_versions_pool_into_their_cells_weighted_by_instances() {
        let names = Setting::Names.reference_suffix();
        let desc = Setting::NamesDesc.reference_suffix();
        let simple = |s: &str| format!("executable_simple_{s}");
        let multiple = |s: &str| format!("executable_multiple_function_{s}");
        let to = "tool_observer";
        let rows = vec![
            // Gold: version 0 on the original docs, in every opacified setting.
            released(to, &simple("base"), "gpt5_a", 0, 10, 1.0),
            released(to, &simple("base"), "gpt5_a", 1, 10, 0.0),
            // Base and +TO (the last version; version 1 is pooled nowhere), two
            // categories of one setting pooled, weighted by instances.
            released(to, &simple(names), "gpt5_a", 0, 10, 0.0),
            released(to, &simple(names), "gpt5_a", 1, 10, 0.5),
            released(to, &simple(names), "gpt5_a", 2, 10, 0.6),
            released(to, &multiple(names), "gpt5_a", 0, 30, 0.4),
            released(to, &multiple(names), "gpt5_a", 1, 30, 0.8),
            // Another seed of the same model pools with it; a baseline's later version
            // is pooled nowhere.
            released("easytool", &simple(desc), "gpt5_a", 0, 10, 0.2),
            released("easytool", &simple(desc), "gpt5_b", 0, 30, 0.6),
            released("easytool", &simple(desc), "gpt5_b", 1, 30, 0.9),
            released("play2prompt", &simple(desc), "gpt5mini_a", 0, 0, 0.5),
        ];
        let model = |g: &str| g.split('_').next().unwrap_or("").to_string();
        let pools = released_pools(&rows, |s, g, m| (s, model(g), format!("{m:?}")));
        let got: Vec<(&str, &str, &str, i64, f64)> = pools
            .iter()
            .map(|((s, m, c), p)| (*s, m.as_str(), c.as_str(), p.n, p.e))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "names",
                    "gpt5",
                    "Base",
                    40,
                    (0.0 * 10.0 + 0.4 * 30.0) / 40.0
                ),
                ("names", "gpt5", "Gold", 10, 1.0),
                (
                    "names",
                    "gpt5",
                    "ToolObserver",
                    40,
                    (0.6 * 10.0 + 0.8 * 30.0) / 40.0
                ),
                (
                    "names+desc",
                    "gpt5",
                    "EasyTool",
                    40,
                    (0.2 * 10.0 + 0.6 * 30.0) / 40.0
                ),
                ("names+desc", "gpt5", "Gold", 10, 1.0),
                ("names+params", "gpt5", "Gold", 10, 1.0),
            ]
        );
        assert_eq!(pools[0].1.p, (0.0 * 10.0 + 0.2 * 30.0) / 40.0);
        assert_eq!(released_disagreements(&rows), 1 + 1 + 2 + 1 + 1);
    }

    #[test]
    fn released_columns() {
        let v = |method, config, version| RunVersion {
            method,
            config,
            gen_hypers: "g",
            version,
        };
        let base = "executable_simple_base";
        assert_eq!(
            released_column(v("tool_observer", base, 0), 3),
            Some((
                vec!["names", "names+desc", "names+params"],
                ReleasedMethod::Gold
            ))
        );
        assert_eq!(released_column(v("tool_observer", base, 3), 3), None);
        assert_eq!(released_column(v("easytool", base, 0), 0), None);
        assert_eq!(
            released_column(v("tool_observer", "unknown_base", 0), 0),
            None
        );
        let last = last_versions([
            v("tool_observer", base, 2),
            v("tool_observer", base, 0),
            v("easytool", base, 1),
        ]);
        assert_eq!(last[&("tool_observer", base, "g")], 2);
        assert_eq!(last[&("easytool", base, "g")], 1);
    }

    #[test]
    fn a_pooled_interval_needs_the_cells_own_items() {
        let es = [1.0, 0.0, 1.0, 1.0];
        let ci = bootstrap(&es, 100, 0);
        assert_eq!(pooled_interval(&es, 4, 0.75, (100, 0)), Some(ci));
        assert_eq!(pooled_interval(&es, 4, 0.7504, (100, 0)), Some(ci));
        assert_eq!(
            pooled_interval(&es, 4, 0.7506, (100, 0)),
            None,
            "another mean"
        );
        assert_eq!(
            pooled_interval(&es, 5, 0.75, (100, 0)),
            None,
            "another count"
        );
        assert_eq!(pooled_interval(&[], 0, 0.0, (100, 0)), None);
    }
}
