//! `otb report`: one self-contained HTML page per experiment (or per set of the
//! authors' released runs), read from the store only -- no model, no engine.
//!
//! - `source.rs`: what the page reads: every computed output by node, and the plan's
//!   nodes with their inputs (a status-mode drive, or the released runs' import).
//! - `items.rs`: the cells of the grid and their items (BFCL instances, chess games,
//!   search episodes), every text a model wrote capped.
//! - `docs.rs`: each tool's description along the ToolObserver curves, gold and the
//!   baselines' finals beside it, and the items that flipped after an edit.
//! - `compare.rs`: paired comparisons of two methods or two experiments.
//! - `cost.rs`: tokens per stage, method, role and model; dollars from a price file.
//! - `html.rs`: the page (maud templates, inline CSS, SVG, the items as JSON read by a
//!   small script that writes every value as text).
//!
//! The tables come from the same renderers as `otb table` (`crate::tables`).

pub mod compare;
pub mod cost;
pub mod docs;
pub mod html;
pub mod items;
pub mod model;
pub mod source;

use crate::env::DriveError;
use crate::experiment::Experiment;
use crate::tables::report::TableReport;
use model::{Chart, Intervals, NodeLine, Report, TableText};
use pipeline::{Row, StageError, Store};
use source::Source;
use std::path::{Path, PathBuf};

/// How a report is made.
#[derive(Clone, Debug)]
pub struct Options {
    /// `--compare A B`: the methods to compare (default: ToolObserver against Base).
    pub compare: Option<(String, String)>,
    /// `--prices FILE`, read.
    pub prices: Option<cost::Prices>,
    /// The authors' released runs for Table 2's `released` rows.
    pub released_runs: Option<PathBuf>,
    /// Bytes kept of any one text of an item.
    pub item_bytes: usize,
    /// Items' JSON above this many bytes splits the report into a page per cell.
    pub split_above: usize,
    /// `otb` version and commit, for provenance.
    pub version: String,
    /// Draw a progress bar (on a terminal).
    pub progress: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            compare: None,
            prices: None,
            released_runs: None,
            item_bytes: 16 * 1024,
            split_above: 40 << 20,
            version: format!("otb {}", env!("CARGO_PKG_VERSION")),
            progress: false,
        }
    }
}

fn bar(n: usize, on: bool, what: &str) -> indicatif::ProgressBar {
    if !on {
        return indicatif::ProgressBar::hidden();
    }
    let b = indicatif::ProgressBar::new(n as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} cells [{elapsed}]")
    {
        b.set_style(style);
    }
    b.set_message(what.to_string());
    b
}

/// Cells, items, documentation edits and cost of a source.
fn body(src: &Source, opts: &Options, title: &str) -> Result<Report, StageError> {
    let mut cap = items::Cap::new(opts.item_bytes);
    let grid = items::grid(src);
    let pb = bar(grid.len(), opts.progress, "reading the store");
    let (cells, items) = items::collect(src, grid, &mut cap, || pb.inc(1))?;
    pb.finish_and_clear();
    let docs = docs::collect(src, &cells, &items, &mut cap)?;
    let cost = cost::collect(src, opts.prices.as_ref())?;
    let mut r = Report {
        title: title.to_string(),
        written_unix: pipeline::clock::now_unix(),
        cut: (cap.texts, cap.bytes),
        priced: opts.prices.is_some(),
        cells,
        items,
        docs,
        cost,
        ..Report::default()
    };
    r.charts = curves(src, &r);
    r.intervals = intervals(src)?;
    r.provenance.nodes = src
        .nodes
        .iter()
        .map(|n| NodeLine {
            node: n.node.clone(),
            stage: n.stage.clone(),
            key: n.key.as_ref().map(|k| k.0.clone()),
            state: src.state(&n.node),
            finished_unix: n.finished_unix,
            wall_ms: n.wall_ms,
            calls: n.usage.calls,
        })
        .collect();
    r.provenance.version = opts.version.clone();
    let pending = r.cells.iter().filter(|c| c.state != "done").count();
    if pending > 0 {
        r.notes.push(format!(
            "{pending} of {} cells are not computed yet (their state says why); what is computed is shown.",
            r.cells.len()
        ));
    }
    Ok(r)
}

fn compare_within(r: &mut Report, pair: Option<(String, String)>) {
    if let Some((a, b)) = pair.or_else(|| compare::default_pair(&r.cells)) {
        let side = compare::Side {
            name: &r.title,
            cells: &r.cells,
            items: &r.items,
        };
        r.comparisons = compare::compare(&side, &a, &side, &b);
        if r.comparisons.is_empty() {
            r.notes.push(format!(
                "--compare {a} {b}: no setting or tool set has finished cells of both"
            ));
        }
    }
}

/// The report of `exp` in `store` (finished or not). With `against`, its cells are
/// compared with that experiment's (in the same store).
pub fn of_experiment(
    store: &Store,
    exp: &Experiment,
    against: Option<&Experiment>,
    opts: &Options,
) -> Result<Report, DriveError> {
    let (run, reports) = crate::driver::locate(exp, store)?;
    let mut src = Source::of_run(run, &reports);
    src.mark_in_progress(store);
    let mut r = body(&src, opts, &exp.name)?;
    r.provenance.store = store.root().display().to_string();
    r.provenance.models = exp.models_line();
    r.provenance.switches = exp.env_switches();
    r.provenance.experiment = Some((
        exp.path.display().to_string(),
        std::fs::read_to_string(&exp.path).unwrap_or_default(),
    ));
    r.tables = tables(store, exp, &r, opts);
    match against {
        None => compare_within(&mut r, opts.compare.clone()),
        Some(other) => {
            let (run2, reports2) = crate::driver::locate(other, store)?;
            let src2 = Source::of_run(run2, &reports2);
            let mut cap = items::Cap::new(opts.item_bytes);
            let (cells2, items2) = items::collect(&src2, items::grid(&src2), &mut cap, || {})?;
            let a = compare::Side {
                name: &exp.name,
                cells: &r.cells,
                items: &r.items,
            };
            let b = compare::Side {
                name: &other.name,
                cells: &cells2,
                items: &items2,
            };
            let pairs: Vec<(String, String)> = match &opts.compare {
                Some(p) => vec![p.clone()],
                None => {
                    let mut ms: Vec<String> = r.cells.iter().map(|c| c.method.clone()).collect();
                    ms.sort();
                    ms.dedup();
                    ms.into_iter().map(|m| (m.clone(), m)).collect()
                }
            };
            let mut all = Vec::new();
            for (ma, mb) in pairs {
                all.extend(compare::compare(&a, &ma, &b, &mb));
            }
            if all.is_empty() {
                r.notes.push(format!(
                    "--against {}: no cell of it matches a finished cell of {} (same environment, setting and agent)",
                    other.name, exp.name
                ));
            }
            r.comparisons = all;
        }
    }
    Ok(r)
}

/// The report of the authors' released runs, imported into the store.
pub fn of_released(
    imported: &[crate::bfcl::import_released::Imported],
    reports: &[pipeline::NodeReport],
    dir: &Path,
    store: &Store,
    opts: &Options,
) -> Result<Report, DriveError> {
    let mut outs = Vec::new();
    for i in imported {
        // A ToolObserver run's version 0 is its Base (the opacified docs, no edit
        // yet); later versions are its rounds.
        let method = match (i.method.as_str(), i.version) {
            ("tool_observer", 0) => "base".to_string(),
            ("tool_observer", _) => "toolobserver".to_string(),
            (m, _) => m.to_string(),
        };
        let label = crate::at::Label {
            setting: i.config.clone(),
            method,
            agent: i.gen_hypers.clone(),
            editor: String::new(),
            round: i64::from(i.version),
        };
        outs.push(source::Out {
            node: i.import.manifest.node.clone(),
            stage: crate::bfcl::import_released::STAGE.into(),
            label: label.clone(),
            entry: i.import.clone(),
        });
        outs.push(source::Out {
            node: i.scores.manifest.node.clone(),
            stage: crate::bfcl::evaluate::STAGE.into(),
            label,
            entry: i.scores.clone(),
        });
    }
    let src = Source::new(outs, reports, Vec::new());
    let title = format!("released runs in {}", dir.display());
    let mut r = body(&src, opts, &title)?;
    r.provenance.store = store.root().display().to_string();
    r.provenance.models =
        "the authors' released runs (GPT-5 family), rescored with this project's grader".into();
    let mut md = String::from(
        "The released runs, rescored here (one row per run version)\n\n| method | config | gen_hypers | version | E | P | A | n |\n|---|---|---|---|---|---|---|---|\n",
    );
    for i in imported {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {} |\n",
            i.method, i.config, i.gen_hypers, i.version, i.e, i.p, i.a, i.n
        ));
    }
    r.tables.push(TableText {
        name: "Released runs".into(),
        markdown: md,
    });
    compare_within(&mut r, opts.compare.clone());
    Ok(r)
}

/// The paper tables that apply to the experiment's cells, as `otb table` renders
/// them; a table that cannot be rendered is a note, not a failed report.
fn tables(store: &Store, exp: &Experiment, r: &Report, opts: &Options) -> Vec<TableText> {
    let has = |env: &str| r.cells.iter().any(|c| c.env == env);
    let mut out = Vec::new();
    let mut push = |name: &str, md: Result<String, String>| match md {
        Ok(markdown) => out.push(TableText {
            name: name.into(),
            markdown,
        }),
        Err(e) => out.push(TableText {
            name: name.into(),
            markdown: format!("(not rendered: {e})"),
        }),
    };
    if has("bfcl") {
        let t2 = crate::bfcl::make_executor(None)
            .map_err(|e| e.to_string())
            .and_then(|exec| {
                crate::tables::table2::build(
                    store,
                    Some(exp),
                    opts.released_runs.as_deref(),
                    &exec,
                    None,
                )
                .map_err(|e| e.to_string())
            })
            .map(|t| t.render(false));
        push("Table 2 (BFCL-Opaque)", t2);
        push(
            "Table 5 (rounds to convergence)",
            crate::tables::table5::build(store, exp)
                .map(|t| t.render(false))
                .map_err(|e| e.to_string()),
        );
        push(
            "Tokens per method",
            crate::tables::tokens::build(store, exp)
                .map(|t| t.render(false))
                .map_err(|e| e.to_string()),
        );
    }
    if has("chess") {
        push(
            "Table 3 (chess)",
            crate::tables::table3::build(store, exp)
                .map(|t| t.render(false))
                .map_err(|e| e.to_string()),
        );
    }
    if has("search") {
        push(
            "Table 4 (search)",
            crate::tables::table4::build(store, exp)
                .map(|t| t.render(false))
                .map_err(|e| e.to_string()),
        );
    }
    out
}

/// ToolObserver's online curves (BFCL): E, P and A by round with E's bootstrap
/// interval, instances frozen and tokens per round.
fn curves(src: &Source, r: &Report) -> Vec<Chart> {
    use std::collections::{BTreeMap, HashMap};
    let mut scores: HashMap<usize, Vec<f64>> = HashMap::new();
    for it in &r.items {
        scores.entry(it.cell).or_default().push(it.score);
    }
    type Curve = (String, String, String);
    let mut seqs: BTreeMap<Curve, Vec<&model::Cell>> = BTreeMap::new();
    for c in &r.cells {
        if c.env == "bfcl" && c.method == "toolobserver" && c.state == "done" {
            seqs.entry((c.setting.clone(), c.agent.clone(), c.editor.clone()))
                .or_default()
                .push(c);
        }
    }
    let mut charts = Vec::new();
    // Legends name the setting alone when every curve has one agent and editor.
    let one_pair = seqs
        .keys()
        .map(|(_, a, e)| (a, e))
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        <= 1;
    let mut frozen: Vec<model::Series> = Vec::new();
    let mut tokens: Vec<model::Series> = Vec::new();
    for ((setting, agent, editor), mut seq) in seqs {
        if let Some(base) = r.cells.iter().find(|c| {
            c.env == "bfcl" && c.setting == setting && c.agent == agent && c.method == "base"
        }) {
            if base.state == "done" && seq.iter().all(|c| c.round > 0) {
                seq.push(base);
            }
        }
        seq.sort_by_key(|c| c.round);
        let (mut e, mut p, mut a) = (Vec::new(), Vec::new(), Vec::new());
        for c in &seq {
            let (Some(mean), Some((pm, am)), Some(es)) = (c.mean, c.p_a, scores.get(&c.id)) else {
                continue;
            };
            let (lo, hi) = datasets::stats::bootstrap_mean_ci(es, 1000, 0);
            let x = c.round as f64;
            e.push((x, mean, Some(lo), Some(hi)));
            p.push((x, pm, None, None));
            a.push((x, am, None, None));
        }
        let name = if one_pair {
            setting.clone()
        } else if editor.is_empty() {
            format!("{setting} · {agent}")
        } else {
            format!("{setting} · {agent} · editor {editor}")
        };
        if !e.is_empty() {
            charts.push(Chart {
                title: format!("ToolObserver by round: {setting} · {agent} · editor {editor}"),
                x: "round".into(),
                y: "accuracy".into(),
                series: vec![("E (95% CI)".into(), e), ("P".into(), p), ("A".into(), a)],
            });
        }
        let fz: Vec<model::Point> = r
            .docs
            .frozen
            .get(&(setting.clone(), agent.clone(), editor.clone()))
            .into_iter()
            .flatten()
            .map(|&(round, n)| (round as f64, n as f64, None, None))
            .collect();
        let mut tk = Vec::new();
        for o in &src.outs {
            let l = &o.label;
            if l.method != "toolobserver"
                || l.setting != setting
                || l.agent != agent
                || l.editor != editor
            {
                continue;
            }
            let u = &o.entry.manifest.usage;
            let x = l.round as f64;
            match tk.iter_mut().find(|(rx, ..): &&mut model::Point| *rx == x) {
                Some(t) => t.1 += (u.prompt_tokens + u.completion_tokens) as f64,
                None => tk.push((
                    x,
                    (u.prompt_tokens + u.completion_tokens) as f64,
                    None,
                    None,
                )),
            }
        }
        tk.sort_by(|a, b| a.0.total_cmp(&b.0));
        if !fz.is_empty() {
            frozen.push((name.clone(), fz));
        }
        if !tk.is_empty() {
            tokens.push((name, tk));
        }
    }
    if !frozen.is_empty() {
        charts.push(Chart {
            title: "Instances frozen (documentation no longer changes)".into(),
            x: "round".into(),
            y: "instances".into(),
            series: frozen,
        });
    }
    if !tokens.is_empty() {
        charts.push(Chart {
            title: "ToolObserver tokens per round (exploration + editing)".into(),
            x: "round".into(),
            y: "tokens".into(),
            series: tokens,
        });
    }
    charts
}

/// Chess: each test cell's bootstrap Elo (mean, 95% interval); search: each test
/// cell's accuracy with its bootstrap interval.
fn intervals(src: &Source) -> Result<Vec<Intervals>, StageError> {
    use crate::chess::rows::EloRow;
    use crate::search::rows::SearchScoreRow;
    let mut elo = Intervals {
        title: "Chess: bootstrap Elo of the test games (mean, 95% interval)".into(),
        unit: "Elo".into(),
        rows: Vec::new(),
    };
    let mut acc = Intervals {
        title: "Search: judged accuracy (bootstrap 95% interval)".into(),
        unit: "%".into(),
        rows: Vec::new(),
    };
    let label = |l: &crate::at::Label| {
        let mut s = format!("{} · {}", l.setting, l.method);
        if l.method == "toolobserver" {
            s.push_str(&format!(" r{}", l.round));
        }
        s.push_str(&format!(" · {}", l.agent));
        s
    };
    for o in &src.outs {
        let has = |t: &str| o.entry.manifest.outputs.contains_key(t);
        if has(EloRow::TABLE) {
            for e in o.entry.read::<EloRow>()? {
                elo.rows
                    .push((label(&o.label), e.mean, e.ci95_lo, e.ci95_hi));
            }
        } else if has(SearchScoreRow::TABLE) {
            for s in o.entry.read::<SearchScoreRow>()? {
                acc.rows.push((
                    label(&o.label),
                    s.accuracy * 100.0,
                    s.ci95_lo * 100.0,
                    s.ci95_hi * 100.0,
                ));
            }
        }
    }
    Ok([elo, acc]
        .into_iter()
        .filter(|i| !i.rows.is_empty())
        .collect())
}

/// Write the report to `dir`: `report.html`, and with a large store one page per
/// cell under `cells/`. Returns the files written. Each file is written whole or
/// not at all (temporary file, rename).
pub fn write(r: &mut Report, dir: &Path, opts: &Options) -> Result<Vec<PathBuf>, StageError> {
    let fail = |p: &Path, e: &dyn std::fmt::Display| {
        StageError::infra("report", format!("{}: {e}", p.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| fail(dir, &e))?;
    let size: usize = r
        .items
        .iter()
        .map(|i| serde_json::to_string(i).map(|s| s.len()).unwrap_or(0))
        .sum();
    let split = size > opts.split_above;
    let mut written = Vec::new();
    if split {
        let cells_dir = dir.join("cells");
        std::fs::create_dir_all(&cells_dir).map_err(|e| fail(&cells_dir, &e))?;
        for c in r.cells.iter_mut().filter(|c| c.n > 0) {
            c.page = Some(format!("cells/cell-{}.html", c.id));
        }
        r.notes.push(format!(
            "The items ({} MB as JSON) are on a page per cell (cells/), so that each page stays light.",
            size >> 20
        ));
        for c in r.cells.iter().filter(|c| c.n > 0) {
            let p = cells_dir.join(format!("cell-{}.html", c.id));
            pipeline::write_atomic(&p, html::cell_page(r, c).as_bytes())
                .map_err(|e| fail(&p, &e))?;
            written.push(p);
        }
    }
    let p = dir.join("report.html");
    pipeline::write_atomic(&p, html::page(r, split).as_bytes()).map_err(|e| fail(&p, &e))?;
    written.insert(0, p);
    Ok(written)
}
