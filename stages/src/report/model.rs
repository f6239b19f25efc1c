//! What a report shows, as plain values: the cells of the grid and their items (the
//! page embeds these as JSON and its script lists, filters and opens them), and the
//! sections rendered on the Rust side (documentation edits, comparisons, cost,
//! provenance). Everything a model wrote is a `String` here; only `html.rs` turns
//! values into markup, and it escapes every one of them.

use serde::Serialize;

/// One grid cell with items: a set of graded BFCL instances, chess games or search
/// episodes played with one documentation (setting or tool set, method, agent,
/// editor, round, split).
#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    /// Index in [`Report::cells`] (what items point at).
    pub id: usize,
    /// `bfcl`, `chess` or `search`.
    pub env: &'static str,
    /// The node that holds the items (BFCL's `evaluate`, an offline `*-explore`).
    pub node: String,
    /// Setting (BFCL) or tool set (chess, search).
    pub setting: String,
    /// The method (`gold`, `base`, `toolobserver`, a baseline).
    pub method: String,
    /// Agent model spec.
    pub agent: String,
    /// Editor model spec (empty: none).
    pub editor: String,
    /// Documentation round.
    pub round: i64,
    /// `test`, `train` (offline exploration) or empty (BFCL).
    pub split: String,
    /// `done`, or what the plan says of a node not computed (`would-run`, `waits`,
    /// `planned`).
    pub state: String,
    /// Items in the cell.
    pub n: usize,
    /// Mean item score (E, game score, judged accuracy); `None` with no items.
    pub mean: Option<f64>,
    /// Items whose model call failed.
    pub errors: usize,
    /// BFCL: mean parameter and AST accuracy of the items (the curves' P and A).
    #[serde(skip)]
    pub p_a: Option<(f64, f64)>,
    /// The documentation the agent saw, when one text serves every item of the cell
    /// (chess, search); BFCL items carry their own.
    pub docs: Option<String>,
    /// The file that lists this cell's items when the report is split
    /// (`cells/cell-N.html`); `None`: this page.
    pub page: Option<String>,
}

impl Cell {
    /// `setting method rN` with agent and editor: the cell's name in lists.
    pub fn title(&self) -> String {
        let mut t = format!("{} · {}", self.setting, self.method);
        if self.method == "toolobserver" || self.round > 0 {
            t.push_str(&format!(" r{}", self.round));
        }
        if !self.split.is_empty() {
            t.push_str(&format!(" [{}]", self.split));
        }
        t
    }
}

impl crate::metrics::items::AsGridCell for Cell {
    fn grid(&self) -> crate::metrics::items::GridCell<'_> {
        crate::metrics::items::GridCell {
            id: self.id,
            env: self.env,
            setting: &self.setting,
            method: &self.method,
            agent: &self.agent,
            editor: &self.editor,
            round: self.round,
            split: &self.split,
            computed: self.state == "done",
            items: self.n,
        }
    }
}

pub use crate::reading::{Block, Item};

impl crate::metrics::items::ScoredItem for Item {
    fn cell(&self) -> usize {
        self.cell
    }
    fn id(&self) -> &str {
        &self.id
    }
    fn score(&self) -> f64 {
        self.score
    }
    fn failed(&self) -> bool {
        self.error.is_some()
    }
}

/// One tool's description through a curve's rounds, with the other methods' final
/// descriptions beside it.
#[derive(Clone, Debug, Default)]
pub struct ToolHistory {
    /// The tool's shown name.
    pub tool: String,
    /// `(round, text)` for round 0 and every round that changed it.
    pub rounds: Vec<(i64, String)>,
    /// `(method, final description)` of the other methods (gold first).
    pub others: Vec<(String, String)>,
}

/// The documentation of one subject (a BFCL instance, an offline tool set) along one
/// ToolObserver curve.
#[derive(Clone, Debug, Default)]
pub struct DocSubject {
    /// `bfcl`, `chess` or `search`.
    pub env: &'static str,
    /// Setting or tool set.
    pub setting: String,
    /// Agent and editor of the curve.
    pub agent: String,
    /// Editor of the curve.
    pub editor: String,
    /// The BFCL instance (empty offline).
    pub instance: String,
    /// Each tool's history.
    pub tools: Vec<ToolHistory>,
}

/// An item that changed verdict between consecutive documentation rounds.
#[derive(Clone, Debug)]
pub struct Flip {
    /// Setting or tool set.
    pub setting: String,
    /// Agent of the curve.
    pub agent: String,
    /// Editor of the curve.
    pub editor: String,
    /// The item.
    pub item: String,
    /// The round whose documentation turned it (the edit before it).
    pub round: i64,
    /// The cell of that round (where the item opens).
    pub cell: usize,
    /// `wrong -> right` or `right -> wrong`.
    pub direction: &'static str,
    /// The tools the edit of that round changed (BFCL), when known.
    pub tools: Vec<String>,
}

/// The documentation-edit section.
#[derive(Clone, Debug, Default)]
pub struct DocEdits {
    /// Subjects whose documentation ToolObserver changed, in grid order.
    pub subjects: Vec<DocSubject>,
    /// Subjects it never changed (counted, not listed).
    pub unchanged: usize,
    /// Items that flipped after an edit.
    pub flips: Vec<Flip>,
    /// Instances frozen after each round of each online curve (setting, agent,
    /// editor): `(round, frozen)` in round order.
    pub frozen: std::collections::BTreeMap<(String, String, String), Vec<(i64, usize)>>,
}

/// A paired comparison of two cells (or two experiments' cells) on their common
/// items.
#[derive(Clone, Debug)]
pub struct Comparison {
    /// What side A is (`toolobserver r3` of a setting, ...).
    pub a: String,
    /// What side B is.
    pub b: String,
    /// The grid coordinates both share (environment, setting, agent).
    pub group: String,
    /// A's cell (where its items open).
    pub a_cell: usize,
    /// B's cell, when B is of the same report.
    pub b_cell: Option<usize>,
    /// Items graded on both sides.
    pub matched: usize,
    /// Items right on A and not on B.
    pub a_only: Vec<String>,
    /// Items right on B and not on A.
    pub b_only: Vec<String>,
    /// Mean score of A minus mean score of B, over matched items.
    pub diff: f64,
    /// Paired bootstrap 95% interval of `diff` (1000 resamples of the matched items,
    /// seed 0).
    pub ci: (f64, f64),
}

/// Tokens and dollars per stage, method, role and model (summed by
/// [`crate::metrics::cost::by_key`]).
pub use crate::metrics::cost::CostRow;

/// One node of the plan, as provenance lists it.
#[derive(Clone, Debug)]
pub struct NodeLine {
    /// Node name.
    pub node: String,
    /// Stage.
    pub stage: String,
    /// Key (hex), when known.
    pub key: Option<String>,
    /// `fresh`, `would-run`, `waits`, `planned`.
    pub state: String,
    /// When its output was committed (Unix seconds; 0 when not computed).
    pub finished_unix: u64,
    /// Its wall time, ms.
    pub wall_ms: u64,
    /// Model calls.
    pub calls: u64,
}

/// Where the report's numbers come from.
#[derive(Clone, Debug, Default)]
pub struct Provenance {
    /// The experiment file's path and text (empty for the released runs).
    pub experiment: Option<(String, String)>,
    /// `otb` version and commit.
    pub version: String,
    /// The models line of the run (agents, editors, sampling, protocol switches).
    pub models: String,
    /// Switches away from the paper's protocol.
    pub switches: Vec<String>,
    /// Every node of the plan.
    pub nodes: Vec<NodeLine>,
    /// The store's path.
    pub store: String,
}

/// A table as `otb table` prints it, in parts: titled Markdown tables and notes.
#[derive(Clone, Debug)]
pub struct TableText {
    /// Which table (`Table 2`, ...).
    pub name: String,
    /// The text `otb table` prints (Markdown).
    pub markdown: String,
}

/// A point of a chart: x, y, and the interval around y when there is one.
pub type Point = (f64, f64, Option<f64>, Option<f64>);

/// A named series of points.
pub type Series = (String, Vec<Point>);

/// A line chart: named series of (x, y) points with optional intervals.
#[derive(Clone, Debug)]
pub struct Chart {
    /// Title.
    pub title: String,
    /// X axis label.
    pub x: String,
    /// Y axis label.
    pub y: String,
    /// Series: name and points `(x, y, lo, hi)`.
    pub series: Vec<Series>,
}

/// Intervals drawn as horizontal bars: chess Elo distributions, search accuracy.
#[derive(Clone, Debug)]
pub struct Intervals {
    /// Title.
    pub title: String,
    /// Unit of the axis.
    pub unit: String,
    /// Rows: label, point value, lower and upper end.
    pub rows: Vec<(String, f64, f64, f64)>,
}

/// A whole report.
#[derive(Clone, Debug, Default)]
pub struct Report {
    /// The title (experiment name, or the released runs' folder).
    pub title: String,
    /// When it was written (Unix seconds).
    pub written_unix: u64,
    /// The paper's table of the run (Table 2, 3 or 4 as `otb table` renders them:
    /// paper / released / run side by side): the page opens on it.
    pub tables: Vec<TableText>,
    /// The other tables that apply (rounds to convergence, tokens), after the curves.
    pub more_tables: Vec<TableText>,
    /// Long listings (the released runs' versions), folded after the tables.
    pub listings: Vec<TableText>,
    /// Per-round curves.
    pub charts: Vec<Chart>,
    /// What the curves cannot draw, and why (e.g. no token usage recorded).
    pub curve_notes: Vec<String>,
    /// Interval plots.
    pub intervals: Vec<Intervals>,
    /// Every cell, in grid order.
    pub cells: Vec<Cell>,
    /// Every item, by cell.
    pub items: Vec<Item>,
    /// Items cut short (their text capped), and bytes cut in all.
    pub cut: (usize, usize),
    /// Documentation edits.
    pub docs: DocEdits,
    /// Paired comparisons.
    pub comparisons: Vec<Comparison>,
    /// Cost rows.
    pub cost: Vec<CostRow>,
    /// The bill `otb run` recorded, beside what its computed nodes cost.
    pub estimate: Vec<crate::estimate::Versus>,
    /// Whether a price file was given.
    pub priced: bool,
    /// Provenance.
    pub provenance: Provenance,
    /// Notes for the reader (what is missing and why).
    pub notes: Vec<String>,
}
