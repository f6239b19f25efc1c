//! `otb table table2`: Table 2 of the paper (BFCL-Opaque, E/P/A) with three sources
//! per cell -- the paper's printed value, the authors' released runs rescored by this
//! project's grader, and this project's own run from the store -- and the differences.

use crate::bfcl::released::csv_field;
use crate::bfcl::summarize::{SummaryRow, BOOTSTRAP, STAGE as SUMMARIZE};
use crate::driver::Located;
use crate::experiment::Experiment;
use crate::metrics::accuracy::{self, ReleasedMethod};
use crate::metrics::progress;
use datasets::bfcl::executor::Executor;
use datasets::bfcl::released::score_tree;
use pipeline::{Row, StageError, Store};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Settings in table order with the paper's row labels.
pub const SETTINGS: [(&str, &str); 3] = [
    ("names", "Anon. Fn. Names Only"),
    ("names+desc", "Anon. Fn. + Real Desc"),
    ("names+params", "Anon. Fn. + Param Names"),
];
/// The method columns, in table order.
pub const METHODS: [&str; 7] = ["Gold", "Base", "+TO", "+TO guard", "+P2P", "+ET", "+DRAFT"];
/// The Trace-Free+ column's labels (`TraceFreeBudget::label`), in column order.
const TRACEFREE_LABELS: [&str; 4] = ["+TF-prompt", "+TF-prompt traces", "+TF", "+TF traces"];

/// The paper's printed Table 2 (`targets.md`): setting, model, method, E, P, A, n.
/// Printed Gold cells swap E and P relative to the released runs, and the four
/// n=50 Play2Prompt cells cover only exec_multiple.
#[rustfmt::skip]
pub const PAPER: &[(&str, &str, &str, f64, f64, f64, u32)] = &[
    ("names", "GPT-5", "Gold", 0.95, 0.96, 0.96, 150), ("names", "GPT-5", "Base", 0.00, 0.00, 0.60, 150),
    ("names", "GPT-5", "+TO", 0.80, 0.78, 0.89, 150), ("names", "GPT-5", "+P2P", 0.44, 0.45, 0.76, 50),
    ("names", "GPT-5", "+ET", 0.00, 0.00, 0.60, 150),
    ("names", "GPT-5-mini", "Gold", 0.93, 0.94, 0.96, 150), ("names", "GPT-5-mini", "Base", 0.00, 0.00, 0.60, 150),
    ("names", "GPT-5-mini", "+TO", 0.66, 0.63, 0.85, 150), ("names", "GPT-5-mini", "+P2P", 0.43, 0.43, 0.77, 50),
    ("names", "GPT-5-mini", "+ET", 0.00, 0.00, 0.60, 150),
    ("names+desc", "GPT-5", "Gold", 0.95, 0.96, 0.96, 150), ("names+desc", "GPT-5", "Base", 0.00, 0.00, 0.60, 150),
    ("names+desc", "GPT-5", "+TO", 0.86, 0.82, 0.91, 150), ("names+desc", "GPT-5", "+P2P", 0.53, 0.54, 0.82, 50),
    ("names+desc", "GPT-5", "+ET", 0.00, 0.00, 0.60, 150),
    ("names+desc", "GPT-5-mini", "Gold", 0.93, 0.94, 0.96, 150), ("names+desc", "GPT-5-mini", "Base", 0.00, 0.00, 0.60, 150),
    ("names+desc", "GPT-5-mini", "+TO", 0.84, 0.81, 0.91, 150), ("names+desc", "GPT-5-mini", "+P2P", 0.55, 0.55, 0.82, 50),
    ("names+desc", "GPT-5-mini", "+ET", 0.00, 0.00, 0.60, 150),
    ("names+params", "GPT-5", "Gold", 0.95, 0.96, 0.96, 150), ("names+params", "GPT-5", "Base", 0.82, 0.85, 0.96, 150),
    ("names+params", "GPT-5", "+TO", 0.83, 0.86, 0.95, 150), ("names+params", "GPT-5", "+P2P", 0.79, 0.81, 0.95, 150),
    ("names+params", "GPT-5", "+ET", 0.75, 0.77, 0.94, 150),
    ("names+params", "GPT-5-mini", "Gold", 0.93, 0.94, 0.96, 150), ("names+params", "GPT-5-mini", "Base", 0.84, 0.88, 0.96, 150),
    ("names+params", "GPT-5-mini", "+TO", 0.85, 0.89, 0.96, 150), ("names+params", "GPT-5-mini", "+P2P", 0.77, 0.80, 0.95, 150),
    ("names+params", "GPT-5-mini", "+ET", 0.76, 0.79, 0.95, 150),
];

/// One cell value from one source.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "table2",
    doc = "one Table 2 cell (setting x model x method) from one source"
)]
pub struct CellRow {
    /// `names`, `names+desc` or `names+params`.
    pub setting: String,
    /// Agent model.
    pub model: String,
    /// Gold, Base, +TO, +TO guard, +P2P, +ET, +DRAFT, +TF-prompt (traces), +TF (traces).
    pub method: String,
    /// `paper` (printed), `released` (the authors' runs rescored here) or `run`
    /// (this project's run).
    pub source: String,
    /// Instances.
    pub n: i64,
    /// Execution accuracy.
    pub e: f64,
    /// Parameter accuracy.
    pub p: f64,
    /// AST accuracy.
    pub a: f64,
    /// E bootstrap 2.5th percentile (run only).
    pub e_lo: Option<f64>,
    /// E bootstrap 97.5th percentile (run only).
    pub e_hi: Option<f64>,
    /// Model-call error rows (run only).
    pub errors: Option<i64>,
}

/// Table 2: cells from every source, the notes printed under it, and this run's
/// unfinished cells.
pub struct Table2 {
    /// Every cell value, from every source.
    pub cells: Vec<CellRow>,
    /// Notes about the sources (rescoring disagreements, the run's progress).
    pub notes: Vec<String>,
    /// This run's cells that are not finished yet: shown as `in progress` or `not
    /// started` (a cell with a value whose chain is not finished, such as
    /// ToolObserver before its last round, gets `(in progress)` after it).
    pub pending: Vec<Pending>,
}

/// A cell of this run that is not finished.
#[derive(Clone, Debug, PartialEq)]
pub struct Pending {
    /// The documentation setting.
    pub setting: String,
    /// The agent model spec.
    pub model: String,
    /// The column label (`+TO`, ...).
    pub method: String,
    /// Part of it is computed or being computed (or was stopped part-way).
    pub started: bool,
}

fn model_label(gen_hypers: &str) -> String {
    match gen_hypers.split('_').next().unwrap_or("") {
        "gpt5" => "GPT-5".into(),
        "gpt5mini" => "GPT-5-mini".into(),
        other => other.to_string(),
    }
}

/// The column label of a method the released runs fill.
pub fn released_label(m: ReleasedMethod) -> &'static str {
    match m {
        ReleasedMethod::Gold => "Gold",
        ReleasedMethod::Base => "Base",
        ReleasedMethod::ToolObserver => "+TO",
        ReleasedMethod::Play2Prompt => "+P2P",
        ReleasedMethod::EasyTool => "+ET",
    }
}

/// Rescore the released tree; its versions pooled per cell
/// ([`accuracy::released_pools`]) and the disagreements with the released scored
/// files.
fn released_cells(
    root: &Path,
    exec: &Executor,
    expected: Option<&Path>,
) -> Result<(Vec<CellRow>, usize), StageError> {
    let fail =
        |e: datasets::bfcl::released::ReleasedError| StageError::infra("table2", e.to_string());
    let rows = score_tree(root, exec, expected).map_err(fail)?;
    let pools = accuracy::released_pools(&rows, |setting, gen_hypers, method| {
        (
            setting.to_string(),
            model_label(gen_hypers),
            released_label(method).to_string(),
        )
    });
    let cells = pools
        .into_iter()
        .map(|((setting, model, method), c)| CellRow {
            setting,
            model,
            method,
            source: "released".into(),
            n: c.n,
            e: c.e,
            p: c.p,
            a: c.a,
            e_lo: None,
            e_hi: None,
            errors: None,
        })
        .collect();
    Ok((cells, accuracy::released_disagreements(&rows)))
}

/// This project's run: the experiment's `summarize` output, or, while the run is
/// still going (or was stopped), the same aggregation over the evaluate outputs that
/// exist; cells that are not finished are listed in `pending`.
fn run_cells(store: &Store, exp: &Experiment, located: &Located) -> Result<RunCells, StageError> {
    let (out, reports) = (&located.run, &located.reports);
    let mut notes = Vec::new();
    let pending_nodes = progress::pending_nodes(reports);
    let rows: Vec<SummaryRow> = match out.by_stage(SUMMARIZE).next() {
        Some(summary) => summary.entry.read()?,
        None if out.curve.iter().all(|(.., h)| h.entry().is_none()) => {
            notes.push(format!(
                "{}: no results in the store yet (run `otb run {}`)",
                exp.name,
                exp.path.display()
            ));
            return Ok(RunCells {
                cells: Vec::new(),
                notes,
                pending: Vec::new(),
            });
        }
        None => accuracy::summaries(&out.curve, BOOTSTRAP)?,
    };
    if pending_nodes > 0 {
        notes.push(format!(
            "{}: {pending_nodes} stages not computed yet; finished cells are shown, the others are marked",
            exp.name
        ));
    }
    notes.push(format!("{}: {}", exp.name, exp.switches()));
    let mut cells = Vec::new();
    let cell = |setting: &str, method: &str, r: &SummaryRow| CellRow {
        setting: setting.to_string(),
        model: r.agent.clone(),
        method: method.to_string(),
        source: "run".into(),
        n: r.n,
        e: r.e,
        p: r.p,
        a: r.a,
        e_lo: Some(r.e_lo),
        e_hi: Some(r.e_hi),
        errors: Some(r.errors),
    };
    // Table 2 shows the first editor's columns (the paper's GPT-5 editor); the
    // agent x editor grid is Table 7.
    let editor = exp
        .editors
        .first()
        .map(ToString::to_string)
        .unwrap_or_default();
    let latest = accuracy::latest_rounds(&rows, &editor);
    let tf = exp.baselines.tracefree.label();
    let tf = tf.as_str();
    // The experiment's external methods (`ext:<name>`), each a column of its own
    // labelled by its name as the method list writes it.
    let externals: Vec<&str> = exp
        .bfcl()
        .map(|b| {
            b.methods
                .iter()
                .filter(|m| m.external_name().is_some())
                .map(|m| m.as_str())
                .collect()
        })
        .unwrap_or_default();
    // Whether this run has a value for the cell: shown below.
    let shown = |agent: &str, setting: &str, method: &str| -> bool {
        let (row_setting, row_method) = if method == "gold" {
            ("gold", "gold")
        } else {
            (setting, method)
        };
        SETTINGS.iter().any(|(s, _)| *s == setting)
            && latest.contains_key(&(agent, row_setting, row_method))
    };
    for agent in exp.agents.iter().map(ToString::to_string) {
        let of =
            |setting: &str, method: &str| latest.get(&(agent.as_str(), setting, method)).copied();
        let gold = of("gold", "gold");
        for (s, _) in SETTINGS {
            if let Some(g) = gold {
                cells.push(cell(s, "Gold", g));
            }
            for (method, label) in [
                ("base", "Base"),
                ("toolobserver", "+TO"),
                ("toolobserver-guard", "+TO guard"),
                ("play2prompt", "+P2P"),
                ("easytool", "+ET"),
                ("draft", "+DRAFT"),
                ("tracefree", tf),
            ]
            .into_iter()
            .chain(externals.iter().map(|&m| (m, m)))
            {
                if let Some(r) = of(s, method) {
                    cells.push(cell(s, label, r));
                }
            }
        }
    }
    // Cells the experiment asks for that are not finished: a chain is finished when
    // none of its nodes is missing from the store.
    let mut pending = Vec::new();
    if pending_nodes > 0 {
        let b = exp.bfcl();
        let methods: Vec<&str> = b
            .map(|b| b.methods.iter().map(|m| m.as_str()).collect())
            .unwrap_or_default();
        let settings: Vec<String> = b
            .map(|b| b.settings.iter().map(|s| s.as_str().to_string()).collect())
            .unwrap_or_default();
        let grid = progress::Cells::new(store, reports, &out.cells);
        for agent in exp.agents.iter().map(ToString::to_string) {
            for s in &settings {
                for (method, label) in [
                    ("gold", "Gold"),
                    ("base", "Base"),
                    ("toolobserver", "+TO"),
                    ("play2prompt", "+P2P"),
                    ("easytool", "+ET"),
                    ("draft", "+DRAFT"),
                    ("tracefree", tf),
                ]
                .into_iter()
                .chain(externals.iter().map(|&m| (m, m)))
                {
                    if !methods.contains(&method) {
                        continue;
                    }
                    // The cell's nodes: those of its setting (gold: every node of the
                    // `gold` setting) and method, for this agent (or agent-free).
                    let p = grid.progress(|c| {
                        (c.agent.is_empty() || c.agent == agent)
                            && if method == "gold" {
                                c.setting == "gold"
                            } else {
                                c.setting == *s && c.method_name() == method
                            }
                    });
                    if p.unfinished || !shown(&agent, s, method) {
                        pending.push(Pending {
                            setting: s.clone(),
                            model: agent.clone(),
                            method: label.to_string(),
                            started: p.started,
                        });
                    }
                }
            }
        }
    }
    if cells.iter().any(|c| c.method == tf) || pending.iter().any(|p| p.method == tf) {
        notes.push(crate::tables::tracefree_note(exp, "table"));
    }
    Ok(RunCells {
        cells,
        notes,
        pending,
    })
}

struct RunCells {
    cells: Vec<CellRow>,
    notes: Vec<String>,
    pending: Vec<Pending>,
}

/// Builds Table 2: the paper's printed cells; with `released`, the authors' runs
/// under that folder rescored with `exec` (`expected`: the reference tool configs,
/// see [`score_tree`]); with `exp`, this experiment's cells as `located` in `store`.
pub fn build(
    store: &Store,
    exp: Option<(&Experiment, &Located)>,
    released: Option<&Path>,
    exec: &Executor,
    expected: Option<&Path>,
) -> Result<Table2, StageError> {
    let mut cells: Vec<CellRow> = PAPER
        .iter()
        .map(|&(s, m, meth, e, p, a, n)| CellRow {
            setting: s.into(),
            model: m.into(),
            method: meth.into(),
            source: "paper".into(),
            n: n as i64,
            e,
            p,
            a,
            e_lo: None,
            e_hi: None,
            errors: None,
        })
        .collect();
    let mut notes = Vec::new();
    if let Some(root) = released {
        let (c, dis) = released_cells(root, exec, expected)?;
        cells.extend(c);
        notes.push(format!(
            "released: rescored {} with this project's grader; {dis} instance verdicts differ from the released scored files",
            root.display()
        ));
    }
    let mut pending = Vec::new();
    if let Some((exp, located)) = exp {
        let r = run_cells(store, exp, located)?;
        cells.extend(r.cells);
        notes.extend(r.notes);
        pending = r.pending;
    }
    Ok(Table2 {
        cells,
        notes,
        pending,
    })
}

fn fmt3(e: f64, p: f64, a: f64) -> String {
    let f = |x: f64| {
        let s = format!("{x:.2}");
        s.strip_prefix('0').map(str::to_string).unwrap_or(s)
    };
    format!("{}/{}/{}", f(e), f(p), f(a))
}

impl Table2 {
    fn get(&self, setting: &str, model: &str, method: &str, source: &str) -> Option<&CellRow> {
        self.cells.iter().find(|c| {
            c.setting == setting && c.model == model && c.method == method && c.source == source
        })
    }
}

impl crate::tables::report::TableReport for Table2 {
    type Row = CellRow;
    const NAME: &'static str = "table2";

    fn rows(&self) -> &[CellRow] {
        &self.cells
    }

    /// Markdown (one block per setting; rows = model x source) or CSV
    /// (`setting,model,method,source,n,E,P,A`).
    fn render(&self, csv: bool) -> String {
        let mut out = String::new();
        if csv {
            out.push_str("setting,model,method,source,n,E,P,A\n");
            for c in &self.cells {
                out.push_str(&format!(
                    "{},{},{},{},{},{:.4},{:.4},{:.4}\n",
                    c.setting,
                    csv_field(&c.model),
                    c.method,
                    c.source,
                    c.n,
                    c.e,
                    c.p,
                    c.a
                ));
            }
            return out;
        }
        out.push_str("Table 2 -- BFCL-Opaque, E/P/A (paper = printed; released = authors' runs rescored here; run = this store; Δ = released - paper)\n\n");
        // A method has a column when the paper, the released runs or this run has it
        // (the guard variant, DRAFT, Trace-Free+ and the external methods, `ext:<name>`
        // in first-seen order, are beyond the paper's table).
        let mut externals: Vec<&str> = Vec::new();
        for m in self
            .cells
            .iter()
            .map(|c| &c.method)
            .chain(self.pending.iter().map(|p| &p.method))
        {
            if m.starts_with(crate::at::EXTERNAL_PREFIX) && !externals.contains(&m.as_str()) {
                externals.push(m);
            }
        }
        let methods: Vec<&str> = METHODS
            .iter()
            .copied()
            .chain(TRACEFREE_LABELS)
            .chain(externals)
            .filter(|l| {
                self.cells.iter().any(|c| c.method == *l)
                    || self.pending.iter().any(|p| p.method == *l)
            })
            .collect();
        out.push_str(&format!(
            "| Documentation | Model | Source | {} |\n|---|---|---|{}\n",
            methods.join(" | "),
            "---|".repeat(methods.len())
        ));
        let mut models: Vec<&str> = Vec::new();
        for m in self
            .cells
            .iter()
            .map(|c| &c.model)
            .chain(self.pending.iter().map(|p| &p.model))
        {
            if !models.contains(&m.as_str()) {
                models.push(m);
            }
        }
        for (s, label) in SETTINGS {
            for m in &models {
                for source in ["paper", "released", "Δ", "run"] {
                    let mut any = false;
                    let vals: Vec<String> = methods
                        .iter()
                        .map(|meth| {
                            if source == "Δ" {
                                match (
                                    self.get(s, m, meth, "released"),
                                    self.get(s, m, meth, "paper"),
                                ) {
                                    (Some(r), Some(p)) => {
                                        any = true;
                                        format!(
                                            "{:+.2}/{:+.2}/{:+.2}",
                                            r.e - p.e,
                                            r.p - p.p,
                                            r.a - p.a
                                        )
                                    }
                                    _ => String::new(),
                                }
                            } else {
                                let pending = (source == "run")
                                    .then(|| {
                                        self.pending.iter().find(|p| {
                                            p.setting == *s && p.model == *m && p.method == *meth
                                        })
                                    })
                                    .flatten();
                                match self.get(s, m, meth, source) {
                                    Some(c) => {
                                        any = true;
                                        let mut v = fmt3(c.e, c.p, c.a);
                                        if c.n != 150 {
                                            v.push_str(&format!(" (n={})", c.n));
                                        }
                                        if let (Some(lo), Some(hi)) = (c.e_lo, c.e_hi) {
                                            v.push_str(&format!(" E∈[{lo:.2},{hi:.2}]"));
                                        }
                                        if let Some(err) = c.errors.filter(|&e| e > 0) {
                                            v.push_str(&format!(" {err} err"));
                                        }
                                        if pending.is_some() {
                                            v.push_str(" (in progress)");
                                        }
                                        v
                                    }
                                    None => match pending {
                                        Some(p) => {
                                            any = true;
                                            if p.started {
                                                "in progress"
                                            } else {
                                                "not started"
                                            }
                                            .to_string()
                                        }
                                        None => String::new(),
                                    },
                                }
                            }
                        })
                        .collect();
                    if any {
                        out.push_str(&format!(
                            "| {label} | {m} | {source} | {} |\n",
                            vals.join(" | ")
                        ));
                    }
                }
            }
        }
        crate::tables::report::end_with_notes(out, &self.notes)
    }
}
