//! Human-readable reports of a session: the `otb status` listing.

use crate::driver::Located;
use crate::env::Cell;
use crate::metrics;
use pipeline::{NodeReport, NodeState};

/// One line per node: state, node, and for stale nodes the reasons, indented; then the
/// counts, the stages of later rounds, the estimate and the time spent
/// ([`metrics::status`]).
pub fn status_text(located: &Located) -> String {
    let reports = &located.reports[..];
    let mut out = String::new();
    for r in reports {
        let key = r
            .key
            .as_ref()
            .map(|k| k.short().to_string())
            .unwrap_or_else(|| "-".repeat(12));
        match &r.state {
            NodeState::Fresh | NodeState::Ran => {
                out.push_str(&format!(
                    "fresh      {key}  {}  ({})\n",
                    r.node,
                    seconds(r.wall_ms)
                ));
            }
            NodeState::WouldRun { reasons } => {
                out.push_str(&format!("would run  {key}  {}\n", r.node));
                for reason in reasons {
                    out.push_str(&format!("             because {reason}\n"));
                }
            }
            NodeState::Blocked { on } => {
                out.push_str(&format!("missing    {key}  {} (waits: {on})\n", r.node));
            }
            NodeState::Planned { .. } => {}
        }
    }
    let c = metrics::status::state_counts(reports);
    out.push_str(&format!(
        "{} stages shown: {} fresh, {} would run, {} missing behind them\n",
        c.shown(),
        c.fresh,
        c.would_run,
        c.blocked
    ));
    if !c.later.is_empty() {
        let kinds: Vec<String> = c.later.iter().map(|(k, n)| format!("{n} {k}")).collect();
        out.push_str(&format!(
            "not shown: up to {} stages of later rounds ({}), which run only if their online ToolObserver curve goes on (it ends early when every instance is frozen; `otb plan` lists them)\n",
            c.later_total,
            kinds.join(", ")
        ));
    }
    if let Some(eta) = estimate(reports, &|node| located.cell(node)) {
        out.push_str(&eta);
    }
    if !c.spent.is_empty() {
        let parts: Vec<String> = c
            .spent
            .iter()
            .map(|(stage, ms)| format!("{stage} {}", seconds(*ms)))
            .collect();
        out.push_str(&format!(
            "time the fresh stages took to compute: {} ({})\n",
            seconds(c.spent_total),
            parts.join(", ")
        ));
    }
    out
}

/// The time the stages still to run will take ([`metrics::status::estimate`]), as
/// lines; `None` when nothing is left.
fn estimate<'a>(
    reports: &'a [NodeReport],
    cell_of: &'a dyn Fn(&str) -> Option<&'a Cell>,
) -> Option<String> {
    let e = metrics::status::estimate(reports, cell_of)?;
    let (left, later) = (&e.left, &e.later);
    // Nothing measured yet but stages that take no time (grading, a summary): saying
    // "at least 0 s" would mislead.
    if left.ms < 1000 && !left.unknown.is_empty() {
        return Some(format!(
            "estimated time for the {} stages still to run: not known until a stage of each kind has run ({})\n",
            left.stages,
            left.unknown.join(", "),
        ));
    }
    let mut line = format!(
        "estimated time for the {} stages still to run: at least {} of stage time (each at the mean time of its kind so far{}; stages of concurrent chains overlap, so the wall time is shorter",
        left.stages,
        duration(left.ms),
        if left.projected() || later.projected() {
            ", a later round of a curve at its last round's time shrunk as its rounds have shrunk so far"
        } else {
            ""
        }
    );
    if !left.unknown.is_empty() {
        line.push_str(&format!("; not yet measured: {}", left.unknown.join(", ")));
    }
    line.push_str(")\n");
    if later.stages > 0 {
        line.push_str(&format!(
            "  and up to {} more for the {} stages of later rounds not shown ({}less if curves end early{})\n",
            duration(later.flat),
            later.stages,
            if later.projected() {
                format!(
                    "about {} if the rounds go on shrinking as they have so far; ",
                    duration(later.ms)
                )
            } else {
                String::new()
            },
            if later.unknown.is_empty() {
                String::new()
            } else {
                format!("; not yet measured: {}", later.unknown.join(", "))
            }
        ));
    }
    if let Some(factor) = e.overlap {
        let wall = |ms: u64| duration(metrics::status::wall_ms(ms, factor));
        line.push_str(&format!(
            "  at the overlap measured so far ({factor:.1} stages computing at a time), about {} of wall time{} (longer if too few chains are left to keep the model busy)\n",
            wall(left.ms),
            if later.stages == 0 {
                String::new()
            } else if later.projected() {
                format!(
                    ", about {} with the later rounds (up to {})",
                    wall(e.with_later()),
                    wall(e.with_later_flat())
                )
            } else {
                format!(", up to {} with the later rounds", wall(e.with_later_flat()))
            }
        ));
    }
    Some(line)
}

/// Milliseconds as `1 h 05 min`, `12 min 03 s` or `4.2 s`.
fn duration(ms: u64) -> String {
    let s = ms / 1000;
    if s >= 3600 {
        format!("{} h {:02} min", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{} min {:02} s", s / 60, s % 60)
    } else {
        seconds(ms)
    }
}

/// Milliseconds as seconds with one decimal (`12.3 s`).
fn seconds(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::Method;
    use crate::metrics::status::testing::*;

    fn k(set: &str, model: &str, source: &str, editor: &str, method: &str) -> GridKey {
        GridKey {
            tool_set: set.into(),
            model: model.into(),
            source: source.into(),
            editor: editor.into(),
            method: method.into(),
        }
    }

    /// Paper rows and run rows of one model are neighbours (`gpt-5` and
    /// `openai:gpt-5`), and two editors get a row each with the editor-free cells
    /// (Gold, Base) repeated.
    #[test]
    fn method_grid_groups_a_model_and_splits_editors() {
        let rows = vec![
            k("s", "gpt-5", "paper", "", "base"),
            k("s", "gpt-5-mini", "paper", "", "base"),
            k("s", "openai:gpt-5-mini", "run", "", "base"),
            k("s", "openai:gpt-5-mini", "run", "openai:a", "toolobserver"),
            k("s", "openai:gpt-5-mini", "run", "openai:b", "toolobserver"),
            k("s", "openai:gpt-5", "run", "openai:a", "toolobserver"),
        ];
        let grid = method_grid(&rows, &|r| r.clone(), &|r| {
            format!("{}{}", r.method, r.editor)
        });
        let lines: Vec<&str> = grid.lines().collect();
        assert_eq!(
            lines[0],
            "| Tool set | Model | Source | Editor | Gold | Base | +TO | +P2P | +ET |"
        );
        assert_eq!(
            &lines[2..],
            &[
                "| s | gpt-5 | paper |  |  | base |  |  |  |",
                "| s | openai:gpt-5 | run | openai:a |  |  | toolobserveropenai:a |  |  |",
                "| s | gpt-5-mini | paper |  |  | base |  |  |  |",
                "| s | openai:gpt-5-mini | run | openai:a |  | base | toolobserveropenai:a |  |  |",
                "| s | openai:gpt-5-mini | run | openai:b |  | base | toolobserveropenai:b |  |  |",
            ]
        );
        // One editor: no editor column, one row per model and source.
        let one: Vec<GridKey> = rows[..4].to_vec();
        let grid = method_grid(&one, &|r| r.clone(), &|r| r.method.clone());
        assert!(
            grid.starts_with("| Tool set | Model | Source | Gold |"),
            "{grid}"
        );
        assert_eq!(grid.lines().count(), 5, "{grid}");
    }

    /// Each external method a row has is a column of its own, named as the method
    /// list writes it, after the built-in ones in first-seen order.
    #[test]
    fn method_grid_gives_each_external_method_a_column() {
        let rows = vec![
            k("s", "m", "run", "", "base"),
            k("s", "m", "run", "e", "ext:zeta"),
            k("s", "m", "run", "e", "ext:alpha"),
            k("s", "m", "run", "e", "ext:zeta"),
        ];
        let grid = method_grid(&rows, &|r| r.clone(), &|r| r.method.clone());
        let lines: Vec<&str> = grid.lines().collect();
        assert_eq!(
            lines[0],
            "| Tool set | Model | Source | Gold | Base | +TO | +P2P | +ET | ext:zeta | ext:alpha |"
        );
        assert_eq!(
            lines[2],
            "| s | m | run |  | base |  |  |  | ext:zeta | ext:alpha |"
        );
        // Without one, the columns are the paper's.
        let grid = method_grid(&rows[..1], &|r| r.clone(), &|r| r.method.clone());
        assert!(
            grid.starts_with("| Tool set | Model | Source | Gold | Base | +TO | +P2P | +ET |\n")
        );
    }

    #[test]
    fn with_overlapping_stages_the_estimate_also_gives_wall_time() {
        // Two chains side by side for 100 s, then one alone for 100 s: 300 s of stage
        // time in 200 s of wall time (1.5 at a time).
        let concurrent = vec![
            at("explore", 100, 1_100),
            at("explore", 100, 1_100),
            at("explore", 100, 1_200),
            report("explore", would(), 0),
            report("explore", would(), 0),
            report("explore", would(), 0),
        ];
        let text = status_text(&plain(concurrent));
        assert!(
            text.contains("at least 5 min 00 s of stage time") && text.contains("at the overlap measured so far (1.5 stages computing at a time), about 3 min 20 s of wall time"),
            "{text}"
        );
        // One after another (and a gap between sittings): no wall-time line.
        let sequential = vec![
            at("explore", 100, 1_100),
            at("explore", 100, 1_200),
            at("explore", 100, 9_000),
            report("explore", would(), 0),
        ];
        let text = status_text(&plain(sequential.clone()));
        assert!(!text.contains("overlap measured"), "{text}");
    }

    #[test]
    fn later_rounds_are_counted_apart_as_an_upper_estimate() {
        let reports = vec![
            at("explore", 100, 1_100),
            at("batch-reflect", 200, 1_200),
            at("explore", 100, 1_100),
            report("batch-reflect", would(), 0),
            report("explore", planned(), 0),
            report("explore", planned(), 0),
            report("batch-reflect", planned(), 0),
        ];
        let text = status_text(&plain(reports.clone()));
        assert!(
            text.contains("4 stages shown: 3 fresh, 1 would run, 0 missing behind them\n"),
            "{text}"
        );
        assert!(
            text.contains("not shown: up to 3 stages of later rounds (1 batch-reflect, 2 explore)"),
            "{text}"
        );
        assert!(
            text.contains("for the 1 stages still to run: at least 3 min 20 s of stage time"),
            "{text}"
        );
        assert!(
            text.contains("  and up to 6 min 40 s more for the 3 stages of later rounds not shown"),
            "{text}"
        );
        // 400 s of stage time over 200 s: two at a time.
        assert!(
            text.contains("(2.0 stages computing at a time), about 1 min 40 s of wall time, up to 5 min 00 s with the later rounds"),
            "{text}"
        );
    }

    /// Reports with no grid cells.
    fn plain(reports: Vec<NodeReport>) -> Located {
        Located::new(crate::env::RunOutput::default(), reports)
    }

    #[test]
    fn a_curves_later_rounds_shrink_as_its_rounds_have_shrunk() {
        let to = |setting: &str, round: i64| cell(setting, Method::ToolObserver, round);
        let located = |rows: Vec<(Cell, NodeState, u64)>| {
            let mut run = crate::env::RunOutput::default();
            let mut reports = Vec::new();
            for (i, (c, state, wall_s)) in rows.into_iter().enumerate() {
                let node = format!("explore[{i}]");
                reports.push(NodeReport {
                    node: node.clone(),
                    ..report("explore", state, wall_s * 1000)
                });
                run.cells.push((node, c));
            }
            Located::new(run, reports)
        };
        let text = status_text(&located(vec![
            (cell("names", Method::Base, 0), NodeState::Fresh, 100),
            (to("names", 1), NodeState::Fresh, 100),
            (to("names", 2), NodeState::Fresh, 50),
            // Round 2 took half of round 1: round 3 is estimated at 25 s, round 4 at
            // 12.5 s; a curve with no round computed counts at the kind's mean.
            (to("names", 3), would(), 0),
            (cell("desc", Method::Base, 0), would(), 0),
            (to("names", 4), planned(), 0),
        ]));
        // 25 s + 83.3 s (the mean)
        assert!(
            text.contains("for the 2 stages still to run: at least 1 min 48 s of stage time (each at the mean time of its kind so far, a later round of a curve at its last round's time shrunk"),
            "{text}"
        );
        assert!(
            text.contains("  and up to 50.0 s more for the 1 stages of later rounds not shown (about 12.5 s if the rounds go on shrinking as they have so far; less if curves end early)"),
            "{text}"
        );
        // Round 1 is projected from Base's round 0, which starts every curve.
        let text = status_text(&located(vec![
            (cell("names", Method::Base, 0), NodeState::Fresh, 40),
            (cell("desc", Method::Base, 0), NodeState::Fresh, 160),
            (to("names", 1), would(), 0),
        ]));
        assert!(
            text.contains("for the 1 stages still to run: at least 40.0 s of stage time"),
            "{text}"
        );
        // Rounds that grew are not extrapolated upwards.
        let text = status_text(&located(vec![
            (to("names", 1), NodeState::Fresh, 50),
            (to("names", 2), NodeState::Fresh, 100),
            (to("names", 3), planned(), 0),
        ]));
        assert!(
            text.contains("  and up to 1 min 40 s more for the 1 stages of later rounds not shown (less if curves end early)"),
            "{text}"
        );
    }

    #[test]
    fn the_estimate_uses_each_stage_kinds_mean_time() {
        let reports = vec![
            report("explore", NodeState::Fresh, 60_000),
            report("explore", NodeState::Fresh, 120_000),
            report("evaluate", NodeState::Fresh, 1_000),
            report("explore", would(), 0),
            report("explore", would(), 0),
            report("draft", would(), 0),
        ];
        let text = status_text(&plain(reports.clone()));
        assert!(
            text.contains("estimated time for the 3 stages still to run: at least 3 min 00 s of stage time (each at the mean time of its kind so far; stages of concurrent chains overlap, so the wall time is shorter; not yet measured: draft)"),
            "{text}"
        );
        assert!(estimate(&reports[..3], &|_| None).is_none());
        // Only stages that take no time measured: not "at least 0 s".
        let cheap = vec![
            report("evaluate", NodeState::Fresh, 100),
            report("evaluate", would(), 0),
            report("draft", would(), 0),
        ];
        assert_eq!(
            estimate(&cheap, &|_| None).as_deref(),
            Some("estimated time for the 2 stages still to run: not known until a stage of each kind has run (draft)\n")
        );
        assert_eq!(duration(3_725_000), "1 h 02 min");
    }
}

/// Write `<name>.md`, `<name>.csv` and `<name>.parquet` into `dir` (created if needed).
pub fn write_table<R: pipeline::Row>(
    dir: &std::path::Path,
    name: &str,
    markdown: &str,
    csv: &str,
    rows: &[R],
) -> Result<Vec<std::path::PathBuf>, pipeline::StageError> {
    let fail = |p: &std::path::Path, e: std::io::Error| {
        pipeline::StageError::infra(name, format!("{}: {e}", p.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(dir, e))?;
    let md = dir.join(format!("{name}.md"));
    std::fs::write(&md, markdown).map_err(|e| fail(&md, e))?;
    let csv_path = dir.join(format!("{name}.csv"));
    std::fs::write(&csv_path, csv).map_err(|e| fail(&csv_path, e))?;
    let pq = dir.join(format!("{name}.parquet"));
    pipeline::table::write_rows(rows, &pq)?;
    Ok(vec![md, csv_path, pq])
}

/// One CSV line: the cells joined by commas, a cell with a comma, quote or line break
/// quoted (RFC 4180), then a newline.
pub fn csv_row(cells: &[&dyn std::fmt::Display]) -> String {
    let mut line = cells
        .iter()
        .map(|c| {
            let c = c.to_string();
            if c.contains([',', '"', '\n', '\r']) {
                format!("\"{}\"", c.replace('"', "\"\""))
            } else {
                c
            }
        })
        .collect::<Vec<_>>()
        .join(",");
    line.push('\n');
    line
}

/// One Markdown table row (`| a | b |`), then a newline; `|` in a cell is escaped.
pub fn md_row(cells: &[&dyn std::fmt::Display]) -> String {
    let mut line = String::from("|");
    for c in cells {
        line.push(' ');
        line.push_str(&c.to_string().replace('|', "\\|"));
        line.push_str(" |");
    }
    line.push('\n');
    line
}

/// The notes under a Markdown table, each on its own paragraph, then a final newline.
pub fn end_with_notes(mut out: String, notes: &[String]) -> String {
    for n in notes {
        out.push_str(&format!("\n{n}"));
    }
    out.push('\n');
    out
}

/// Where a cell of an environment table sits: its tool set, agent model, source
/// (`paper`, `run`, ...), editor (empty where none is involved: paper rows, Gold,
/// Base) and method.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GridKey {
    /// Tool set (or documentation setting).
    pub tool_set: String,
    /// Agent model.
    pub model: String,
    /// Where the value comes from (`paper`, `run`, ...).
    pub source: String,
    /// Editor model (empty where none is involved).
    pub editor: String,
    /// Method.
    pub method: String,
}

/// A model's family for grouping: `openai:gpt-5` and the paper's `gpt-5` are one
/// model (the endpoint's prefix is how this project names it).
pub fn model_family(model: &str) -> &str {
    match model.split_once(':') {
        Some(("openai" | "replay", m)) => m,
        _ => model,
    }
}

/// A Markdown table with one row per `(tool set, model, source, editor)` and one
/// column per method (Gold, Base, +TO, +P2P, +ET), each cell rendered by `cell` from
/// the row with that method, or empty. Rows are ordered by tool set, then model
/// family (a paper row and a run row of the same model are neighbours, the paper's
/// first), then source and editor, each in first-seen order. The editor column
/// appears when the rows name more than one editor; a row of one editor then shows
/// the editor-free cells (Gold, Base) of its tool set, model and source beside its
/// own.
pub fn method_grid<R>(
    rows: &[R],
    key: &dyn Fn(&R) -> GridKey,
    cell: &dyn Fn(&R) -> String,
) -> String {
    method_grid_with(rows, key, cell, "+TF-prompt")
}

/// [`method_grid`], with a column for Trace-Free+ (method `tracefree`, beyond the
/// paper's tables) labelled `tracefree_label` when a row has that method, and one
/// for each external method (`ext:<name>`) a row has, labelled by that name.
pub fn method_grid_with<R>(
    rows: &[R],
    key: &dyn Fn(&R) -> GridKey,
    cell: &dyn Fn(&R) -> String,
    tracefree_label: &str,
) -> String {
    let keys: Vec<GridKey> = rows.iter().map(key).collect();
    let mut methods: Vec<(&str, &str)> = vec![
        ("gold", "Gold"),
        ("base", "Base"),
        ("toolobserver", "+TO"),
        ("play2prompt", "+P2P"),
        ("easytool", "+ET"),
    ];
    if keys.iter().any(|k| k.method == "tracefree") {
        methods.push(("tracefree", tracefree_label));
    }
    // An external method (`ext:<name>`) has a column of its own, labelled by its
    // name as the experiment's method list writes it, in first-seen order.
    for k in &keys {
        let m = k.method.as_str();
        if m.starts_with(crate::at::EXTERNAL_PREFIX) && !methods.iter().any(|(x, _)| *x == m) {
            methods.push((m, m));
        }
    }
    let mut editors: Vec<&str> = Vec::new();
    for k in &keys {
        if !k.editor.is_empty() && !editors.contains(&k.editor.as_str()) {
            editors.push(&k.editor);
        }
    }
    let with_editor = editors.len() > 1;
    let first = |f: &dyn Fn(&GridKey) -> &str| -> Vec<String> {
        let mut seen: Vec<String> = Vec::new();
        for k in &keys {
            let v = f(k).to_string();
            if !seen.contains(&v) {
                seen.push(v);
            }
        }
        seen
    };
    let sets = first(&|k| &k.tool_set);
    let families = first(&|k| model_family(&k.model));
    let sources = first(&|k| &k.source);
    let rank = |v: &[String], x: &str| v.iter().position(|y| y == x).unwrap_or(usize::MAX);
    // One group per (tool set, model, source, editor); with one editor (or none) the
    // editor is not part of the group.
    let group_of = |k: &GridKey| -> [String; 4] {
        [
            k.tool_set.clone(),
            k.model.clone(),
            k.source.clone(),
            if with_editor {
                k.editor.clone()
            } else {
                String::new()
            },
        ]
    };
    let mut groups: Vec<[String; 4]> = Vec::new();
    for k in &keys {
        let g = group_of(k);
        if !groups.contains(&g) {
            groups.push(g);
        }
    }
    // An editor-free group (Gold, Base) is shown inside its editors' rows.
    if with_editor {
        let has_editor_rows =
            |g: &[String; 4]| groups.iter().any(|h| h[..3] == g[..3] && !h[3].is_empty());
        let drop: Vec<[String; 4]> = groups
            .iter()
            .filter(|g| g[3].is_empty() && has_editor_rows(g))
            .cloned()
            .collect();
        groups.retain(|g| !drop.contains(g));
    }
    let seen = groups.clone();
    groups.sort_by_key(|g| {
        (
            rank(&sets, &g[0]),
            rank(&families, model_family(&g[1])),
            rank(&sources, &g[2]),
            seen.iter().position(|h| h == g),
        )
    });
    let mut header: Vec<&dyn std::fmt::Display> = vec![&"Tool set", &"Model", &"Source"];
    if with_editor {
        header.push(&"Editor");
    }
    for (_, label) in &methods {
        header.push(label);
    }
    let mut out = md_row(&header);
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for g in groups {
        let cells: Vec<String> = methods
            .iter()
            .map(|(m, _)| {
                let find = |editor: &str| {
                    rows.iter().zip(&keys).find(|(_, k)| {
                        k.tool_set == g[0]
                            && k.model == g[1]
                            && k.source == g[2]
                            && k.method == *m
                            && (!with_editor || k.editor == editor)
                    })
                };
                find(&g[3])
                    .or_else(|| find(""))
                    .map(|(r, _)| cell(r))
                    .unwrap_or_default()
            })
            .collect();
        let mut row: Vec<&dyn std::fmt::Display> = vec![&g[0], &g[1], &g[2]];
        if with_editor {
            row.push(&g[3]);
        }
        for c in &cells {
            row.push(c);
        }
        out.push_str(&md_row(&row));
    }
    out
}

/// A table that `otb table` prints (Markdown or CSV) and writes with `--out`.
pub trait TableReport {
    /// The row type of the table's parquet file.
    type Row: pipeline::Row;
    /// File stem of the written files (`table2` -> `table2.md`, ...).
    const NAME: &'static str;
    /// The table as text: Markdown, or CSV when `csv`.
    fn render(&self, csv: bool) -> String;
    /// The rows written to `<NAME>.parquet`.
    fn rows(&self) -> &[Self::Row];
    /// `<NAME>.md`, `<NAME>.csv` and `<NAME>.parquet` in `dir`.
    fn write(
        &self,
        dir: &std::path::Path,
    ) -> Result<Vec<std::path::PathBuf>, pipeline::StageError> {
        write_table(
            dir,
            Self::NAME,
            &self.render(false),
            &self.render(true),
            self.rows(),
        )
    }
}

#[cfg(test)]
mod row_tests {
    use super::{csv_row, md_row};

    #[test]
    fn csv_cells_are_quoted_only_when_needed() {
        assert_eq!(
            csv_row(&[&"a", &1, &"b,c", &"say \"hi\""]),
            "a,1,\"b,c\",\"say \"\"hi\"\"\"\n"
        );
        assert_eq!(
            md_row(&[&"x", &format!("{:.2}", 0.5), &"a|b"]),
            "| x | 0.50 | a\\|b |\n"
        );
    }
}
