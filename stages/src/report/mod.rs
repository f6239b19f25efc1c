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
//! - `text.rs`: the documentation edits as text (`otb report --edits`).
//! - `html.rs`: the page (maud templates, inline CSS, SVG, the items as JSON read by a
//!   small script that writes every value as text).
//!
//! The tables come from the same renderers as `otb table` (`crate::tables`).
//! Every number the page shows (item counts and means, comparisons, curves, cost,
//! frozen counts, flips) is computed in `crate::metrics` (`items`, `docs`, `cost`);
//! these files read the store and format.

pub mod compare;
pub mod cost;
pub mod docs;
pub mod html;
pub mod items;
pub mod model;
pub mod source;
pub mod text;

use crate::env::DriveError;
use crate::experiment::Experiment;
use crate::tables::report::TableReport;
use model::{Chart, Intervals, NodeLine, Report, TableText};
use pipeline::{StageError, Store};
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

/// Tokens a node's output used that its manifest does not record (the released runs'
/// token-usage files), by node name.
type ExtraTokens = std::collections::HashMap<String, u64>;

/// Cells, items, documentation edits and cost of a source.
fn body(
    src: &Source,
    opts: &Options,
    title: &str,
    extra_tokens: &ExtraTokens,
) -> Result<Report, StageError> {
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
    (r.charts, r.curve_notes) = curves(src, &r, extra_tokens);
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
    let pending = crate::metrics::items::pending(&r.cells);
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
    let located = crate::driver::locate(exp, store)?;
    let mut src = Source::of_run(&located);
    src.environments = exp.registry.clone();
    src.mark_in_progress(store);
    let mut r = body(&src, opts, &exp.name, &ExtraTokens::new())?;
    r.provenance.store = shown_path(store.root());
    r.provenance.models = exp.models_line();
    r.provenance.switches = exp.env_switches();
    r.estimate = crate::estimate::versus_of(exp, store, &located);
    r.provenance.experiment = Some((
        shown_path(&exp.path),
        std::fs::read_to_string(&exp.path).unwrap_or_default(),
    ));
    (r.tables, r.more_tables) = tables(store, exp, &located, &r, opts);
    match against {
        None => compare_within(&mut r, opts.compare.clone()),
        Some(other) => {
            let mut src2 = Source::of_run(&crate::driver::locate(other, store)?);
            src2.environments = other.registry.clone();
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

/// A path as the page shows it: relative to the working directory when it lies
/// under it, else as given (no machine paths on a page made from relative ones).
pub fn shown_path(p: &Path) -> String {
    std::env::current_dir()
        .ok()
        .and_then(|cwd| p.strip_prefix(&cwd).ok().map(Path::to_path_buf))
        .filter(|rel| !rel.as_os_str().is_empty())
        .unwrap_or_else(|| p.to_path_buf())
        .display()
        .to_string()
}

/// A released run's configuration by the paper's setting name and the category:
/// `names · exec_simple`, `gold · exec_multiple` (the raw name when it is not one of
/// the four settings).
pub fn released_setting(config: &str) -> String {
    use datasets::bfcl::opacify::Setting;
    match datasets::bfcl::released::split_config(config) {
        Some((cat, suffix)) => match Setting::from_reference_suffix(suffix) {
            Some(s) => format!("{} · {}", s.as_str(), cat.as_str()),
            None => config.to_string(),
        },
        None => config.to_string(),
    }
}

/// Table 2's model label of a released run's generation hypers (`gpt5_...` ->
/// `GPT-5`, `gpt5mini_...` -> `GPT-5-mini`), as Table 2 labels its rows.
fn released_model(gen_hypers: &str) -> String {
    match gen_hypers.split('_').next().unwrap_or("") {
        "gpt5" => "GPT-5".into(),
        "gpt5mini" => "GPT-5-mini".into(),
        _ => gen_hypers.to_string(),
    }
}

/// The report's method of a released run version: ToolObserver's version 0 is its
/// Base (the opacified docs, no edit yet) or, on the original docs, Gold; later
/// versions are its rounds.
fn released_method(i: &crate::bfcl::import_released::Imported) -> String {
    let gold = datasets::bfcl::released::split_config(&i.config).is_some_and(|(_, s)| s == "base");
    match (i.method.as_str(), i.version) {
        ("tool_observer", 0) if gold => "gold".to_string(),
        ("tool_observer", 0) => "base".to_string(),
        ("tool_observer", _) => "toolobserver".to_string(),
        (m, _) => m.to_string(),
    }
}

/// The tokens a released run version used, from its `token_usage_*.json` files:
/// version 0 the agent's Base run (`v0_token_usage_generation.json`), version N the
/// agent's re-run and the editor (`vN/token_usage_generation.json`,
/// `vN/token_usage_descriptions.json`). `None` when it has no such file.
fn released_tokens(run: &datasets::bfcl::released::RunRef) -> Option<u64> {
    use datasets::bfcl::released_checks::read_token_usage;
    let dir = run.results_path.parent()?;
    let files: &[&str] = if run.version == 0 {
        &["v0_token_usage_generation.json"]
    } else {
        &[
            "token_usage_generation.json",
            "token_usage_descriptions.json",
        ]
    };
    let mut total = None;
    for f in files {
        if let Ok(Some(u)) = read_token_usage(&dir.join(f)) {
            *total.get_or_insert(0) += u.total;
        }
    }
    total
}

/// The report of the authors' released runs, imported into the store. Its Table 2
/// rescores the release under `dir` with `exec` (`expected`: the reference tool
/// configs), as `otb table table2 --released` does.
pub fn of_released(
    imported: &[crate::bfcl::import_released::Imported],
    reports: &[pipeline::NodeReport],
    dir: &Path,
    store: &Store,
    exec: &datasets::bfcl::executor::Executor,
    expected: Option<&Path>,
    opts: &Options,
) -> Result<Report, DriveError> {
    use std::collections::BTreeSet;
    // Agents by Table 2's model label where that names each generation hypers once.
    let hypers: BTreeSet<&str> = imported.iter().map(|i| i.gen_hypers.as_str()).collect();
    let labels: BTreeSet<String> = hypers.iter().map(|h| released_model(h)).collect();
    let agent = |h: &str| {
        if labels.len() == hypers.len() {
            released_model(h)
        } else {
            h.to_string()
        }
    };
    let runs = datasets::bfcl::released::discover_runs(dir).unwrap_or_default();
    let mut extra = ExtraTokens::new();
    let mut outs = Vec::new();
    for i in imported {
        let (method, guard) = crate::at::Method::parse_label(&released_method(i));
        let label = crate::at::Cell {
            env: "bfcl",
            setting: released_setting(&i.config),
            method,
            guard,
            agent: agent(&i.gen_hypers),
            round: i64::from(i.version),
            step: crate::at::Step::Play { split: None },
            ..crate::at::Cell::default()
        };
        let run = runs.iter().find(|r| {
            r.method == i.method
                && r.config == i.config
                && r.gen_hypers == i.gen_hypers
                && r.version == i.version
        });
        if let Some(t) = run.and_then(released_tokens) {
            extra.insert(i.import.manifest.node.clone(), t);
        }
        outs.push(source::Out {
            node: i.import.manifest.node.clone(),
            stage: crate::bfcl::import_released::STAGE.into(),
            cell: label.clone(),
            entry: i.import.clone(),
        });
        outs.push(source::Out {
            node: i.scores.manifest.node.clone(),
            stage: crate::bfcl::evaluate::STAGE.into(),
            cell: label,
            entry: i.scores.clone(),
        });
    }
    let src = Source::new(outs, reports, Vec::new());
    let title = format!("released runs in {}", dir.display());
    let mut r = body(&src, opts, &title, &extra)?;
    r.provenance.store = shown_path(store.root());
    r.provenance.models =
        "the authors' released runs (GPT-5 family), rescored with this project's grader".into();
    match crate::tables::table2::build(store, None, Some(dir), exec, expected) {
        Ok(mut t2) => {
            released_intervals(&mut t2, imported, &r);
            r.tables.push(TableText {
                name: "Table 2 (BFCL-Opaque)".into(),
                markdown: t2.render(false),
            });
        }
        Err(e) => r.tables.push(TableText {
            name: "Table 2 (BFCL-Opaque)".into(),
            markdown: format!("(not rendered: {e})"),
        }),
    }
    {
        use datasets::bfcl::released_checks as rc;
        let checks = [
            (
                "Table 5 (rounds to convergence), from the release",
                rc::table5(dir).map(|c| rc::render_table5(&c)),
            ),
            (
                "Tokens (the paper's cost claim), from the release",
                rc::tokens(dir).map(|c| rc::render_tokens(&c)),
            ),
        ];
        for (name, md) in checks {
            r.more_tables.push(TableText {
                name: name.into(),
                markdown: md.unwrap_or_else(|e| format!("(not rendered: {e})")),
            });
        }
    }
    let mut md = String::from(
        "The released runs, rescored here (one row per run version)\n\n| method | setting | agent | version | E | P | A | n |\n|---|---|---|---|---|---|---|---|\n",
    );
    for i in imported {
        md.push_str(&format!(
            "| {} | {} | {} | {} | {:.3} | {:.3} | {:.3} | {} |\n",
            i.method,
            released_setting(&i.config),
            agent(&i.gen_hypers),
            i.version,
            i.e,
            i.p,
            i.a,
            i.n
        ));
    }
    r.listings.push(TableText {
        name: format!("Released run versions ({})", imported.len()),
        markdown: md,
    });
    compare_within(&mut r, opts.compare.clone());
    Ok(r)
}

/// E's bootstrap interval (1000 resamples, seed 0) of each released cell of Table 2,
/// from the report's items of the run versions that cell pools (Gold: ToolObserver's
/// version 0 on the original docs; Base: its version 0; +TO: its last version; +P2P
/// and +ET: the baseline's run), when those items are exactly the cell's (same count,
/// same mean to 3 decimals); otherwise the cell keeps no interval.
fn released_intervals(
    t2: &mut crate::tables::table2::Table2,
    imported: &[crate::bfcl::import_released::Imported],
    r: &Report,
) {
    use crate::metrics::accuracy::{self, RunVersion};
    use crate::metrics::items::{scores_by_cell, RESAMPLES, SEED};
    fn version(i: &crate::bfcl::import_released::Imported) -> RunVersion<'_> {
        RunVersion {
            method: &i.method,
            config: &i.config,
            gen_hypers: &i.gen_hypers,
            version: i.version,
        }
    }
    let last = accuracy::last_versions(imported.iter().map(version));
    let cell_of: std::collections::HashMap<&str, usize> =
        r.cells.iter().map(|c| (c.node.as_str(), c.id)).collect();
    let scores = scores_by_cell(&r.items);
    // Table 2's column label of a released method.
    let label = crate::tables::table2::released_label;
    for c in t2.cells.iter_mut().filter(|c| c.source == "released") {
        // The item scores of the run versions Table 2 pools into this cell.
        let mut es: Vec<f64> = Vec::new();
        for i in imported {
            let v = version(i);
            let pooled =
                accuracy::released_column(v, last[&v.run()]).is_some_and(|(settings, m)| {
                    label(m) == c.method && settings.contains(&c.setting.as_str())
                });
            if !pooled || released_model(&i.gen_hypers) != c.model {
                continue;
            }
            if let Some(v) = cell_of
                .get(i.scores.manifest.node.as_str())
                .and_then(|id| scores.get(id))
            {
                es.extend(v);
            }
        }
        if let Some((lo, hi)) = accuracy::pooled_interval(&es, c.n, c.e, (RESAMPLES, SEED)) {
            c.e_lo = Some(lo);
            c.e_hi = Some(hi);
        }
    }
}

/// The paper tables that apply to the experiment's cells, as `otb table` renders
/// them: the paper's table of each environment (Table 2, 3, 4: the page opens on
/// them), then the others (rounds to convergence, tokens). A table that cannot be
/// rendered is a note, not a failed report.
fn tables(
    store: &Store,
    exp: &Experiment,
    located: &crate::driver::Located,
    r: &Report,
    opts: &Options,
) -> (Vec<TableText>, Vec<TableText>) {
    let has = |env: &str| r.cells.iter().any(|c| c.env == env);
    let mut out = Vec::new();
    let mut more = Vec::new();
    let mut push = |name: &str, md: Result<String, String>| {
        let t = TableText {
            name: name.into(),
            markdown: md.unwrap_or_else(|e| format!("(not rendered: {e})")),
        };
        if name.starts_with("Table 2") || name.starts_with("Table 3") || name.starts_with("Table 4")
        {
            out.push(t);
        } else {
            more.push(t);
        }
    };
    for env in exp.registry.environments().filter(|e| has(e.table())) {
        for (name, md) in crate::tables::of_environment(
            env.table(),
            store,
            exp,
            located,
            opts.released_runs.as_deref(),
        ) {
            push(name, md);
        }
    }
    (out, more)
}

/// ToolObserver's online curves (BFCL): E, P and A by round with E's bootstrap
/// interval, instances frozen and tokens per round (the manifests' usage plus
/// `extra`), and a note for what cannot be drawn: a tokens chart with no token
/// recorded says so instead of drawing a line at zero.
fn curves(src: &Source, r: &Report, extra: &ExtraTokens) -> (Vec<Chart>, Vec<String>) {
    use crate::metrics::items as metrics;
    let scores = metrics::scores_by_cell(&r.items);
    let seqs = metrics::online_curves(&r.cells);
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
    let mut untokened = 0;
    for ((setting, agent, editor), seq) in seqs {
        let (mut e, mut p, mut a) = (Vec::new(), Vec::new(), Vec::new());
        for c in &seq {
            let (Some(mean), Some((pm, am)), Some(es)) = (c.mean, c.p_a, scores.get(&c.id)) else {
                continue;
            };
            let (lo, hi) = metrics::interval(es);
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
                title: if editor.is_empty() {
                    format!("ToolObserver by round: {setting} · {agent}")
                } else {
                    format!("ToolObserver by round: {setting} · {agent} · editor {editor}")
                },
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
        let outputs = src.outs.iter().map(|o| {
            let extra = extra.get(&o.node).copied().unwrap_or(0);
            (&o.cell, &o.entry.manifest.usage, extra)
        });
        let tk: Vec<model::Point> = metrics::tokens_by_round(outputs, (&setting, &agent, &editor))
            .into_iter()
            .map(|(round, used)| (round as f64, used, None, None))
            .collect();
        if !fz.is_empty() {
            frozen.push((name.clone(), fz));
        }
        if tk.iter().any(|t| t.1 > 0.0) {
            tokens.push((name, tk));
        } else if !tk.is_empty() {
            untokened += 1;
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
    let mut notes = Vec::new();
    if untokened > 0 {
        notes.push(format!(
            "ToolObserver tokens per round: no token usage recorded for {untokened} curve{} (its models report none), so no tokens chart is drawn for {}.",
            if untokened == 1 { "" } else { "s" },
            if untokened == 1 { "it" } else { "them" }
        ));
    }
    (charts, notes)
}

/// The interval charts the environments draw of the computed outputs (chess: each
/// test cell's bootstrap Elo; search: each test cell's accuracy with its bootstrap
/// interval): one chart per title, in the registry's order, a bar per output.
fn intervals(src: &Source) -> Result<Vec<Intervals>, StageError> {
    let label = |l: &crate::at::Cell| {
        let mut s = format!("{} · {}", l.setting, l.method_name());
        if l.is(crate::at::Method::ToolObserver) {
            s.push_str(&format!(" r{}", l.round));
        }
        s.push_str(&format!(" · {}", l.agent));
        s
    };
    let mut charts: Vec<Intervals> = Vec::new();
    for env in src.environments.environments() {
        for o in &src.outs {
            let out = crate::reading::Computed {
                node: &o.node,
                stage: &o.stage,
                cell: &o.cell,
                entry: &o.entry,
            };
            for i in env.reader().intervals(&out)? {
                let row = (label(&o.cell), i.value, i.lo, i.hi);
                match charts.iter_mut().find(|c| c.title == i.title) {
                    Some(c) => c.rows.push(row),
                    None => charts.push(Intervals {
                        title: i.title.into(),
                        unit: i.unit.into(),
                        rows: vec![row],
                    }),
                }
            }
        }
    }
    Ok(charts)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_show_relative_to_the_working_directory_or_as_given() {
        let cwd = std::env::current_dir().unwrap();
        assert_eq!(
            shown_path(&cwd.join("outputs").join("store")),
            "outputs/store"
        );
        assert_eq!(shown_path(Path::new("outputs/store")), "outputs/store");
        assert_eq!(
            shown_path(Path::new("/elsewhere/store")),
            "/elsewhere/store"
        );
        assert_eq!(shown_path(&cwd), cwd.display().to_string());
    }

    #[test]
    fn released_configs_read_as_the_papers_settings() {
        assert_eq!(
            released_setting("executable_simple_name[all:increasing_number]_param[all:remove_all]"),
            "names+desc · exec_simple"
        );
        assert_eq!(
            released_setting("executable_multiple_function_name[all:increasing_number]_desc[all:blank]_param[all:remove_all]"),
            "names · exec_multiple"
        );
        assert_eq!(
            released_setting("executable_multiple_function_name[all:increasing_number]_desc[all:blank]_param[all:blank_descriptions]"),
            "names+params · exec_multiple"
        );
        assert_eq!(
            released_setting("executable_simple_base"),
            "gold · exec_simple"
        );
        assert_eq!(released_setting("something_else"), "something_else");
        assert_eq!(
            released_model("gpt5_medium_req_8192_must_call_tool_seed0"),
            "GPT-5"
        );
        assert_eq!(released_model("gpt5mini_medium_x"), "GPT-5-mini");
    }
}
