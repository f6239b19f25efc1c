//! The bill before a run (`otb plan`, the first lines of `otb run`): for every node of
//! the plan that is not in the store yet, how many model calls it makes, how many
//! prompt and completion tokens they send and receive, how long they take on this
//! machine and, for models with a price, what they cost.
//!
//! - **Calls** per node come from the stage's protocol and the experiment's item
//!   counts (BFCL instances and their tools, chess positions, games and plies, search
//!   questions and turns, the baselines' budgets). A count is *exact* where the
//!   protocol fixes it (an explore of round 0 asks the agent once per instance,
//!   EasyTool makes two editor passes per tool set), *expected* where a baseline's
//!   tries end at the first that works (Play2Prompt's tool play, DRAFT's and
//!   Trace-Free+'s re-asks: counted as the first try working, with the budget's bound
//!   beside it) and an *upper bound* otherwise (a later round asks only about
//!   instances whose docs changed, a game may end before its ply cap). The rounds of an online ToolObserver
//!   curve after the first whose docs are not computed are planned: they run only if
//!   the curve goes on, and are summed apart as "up to N more".
//! - **Tokens** per call are *measured* (the mean of finished nodes of the same stage
//!   and model in this store) or *modelled* (a fixed per-stage model of the prompt's
//!   size: its template, the tools shown, the example; [`modelled_tokens`]).
//! - **Time** is model time, one call after another: *measured* (the same stage and
//!   model's wall time per uncached call in this store), *calibrated* (an embedded
//!   model's prompt and generation rates from a short benchmark on this machine,
//!   cached beside the model file; [`calibration`]), 0 for scripted and replayed
//!   models, and unknown for an endpoint nothing in the store has measured.
//! - **Dollars** from a price file (`otb report`'s `--prices`) for the models it
//!   names.
//!
//! `otb run` records its bill under `<store>/cache/estimates/<experiment>.json`
//! ([`save`]); `otb report` puts it beside what the nodes cost ([`versus`]).

use crate::baselines::budget::{DraftBudget, Play2PromptBudget, TraceFreeBudget};
use crate::experiment::Experiment;
use crate::plan::{Plan, PlanNode};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One model's share of one node's work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BillLine {
    /// The node's name.
    pub node: String,
    /// Its stage.
    pub stage: String,
    /// Whose model: `agent`, `editor`, `judge` or `generator`.
    pub role: String,
    /// The model spec.
    pub model: String,
    /// Model calls: exact, an upper bound (`exact` false), or the expected count
    /// (`bound` set).
    pub calls: u64,
    /// Whether `calls` is exact (else an upper bound or an expectation).
    pub exact: bool,
    /// The most calls there can be, when `calls` is the expected count (a baseline
    /// whose tries end at the first that works).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bound: Option<u64>,
    /// Whether the node runs only if its ToolObserver curve goes on.
    pub planned: bool,
    /// Whether the calls are an external method's budget (`[methods.NAME]`), summed
    /// apart: a method's own calls are known only once it has run.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub budget: bool,
    /// Prompt tokens of these calls.
    pub prompt_tokens: u64,
    /// Completion tokens of these calls.
    pub completion_tokens: u64,
    /// `measured` (this store's finished nodes of the same stage and model) or
    /// `modelled`.
    pub tokens_from: String,
    /// Model time in seconds, one call after another; `None` when unknown.
    pub seconds: Option<f64>,
    /// `measured`, `calibrated`, `scripted` (no time) or `unknown`.
    pub time_from: String,
    /// Dollars, for a model the price file names.
    pub dollars: Option<f64>,
}

/// Sums of a bill's lines (certain nodes and planned ones apart).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    /// Nodes to run (not in the store), planned ones included.
    pub nodes: u64,
    /// Model calls of the nodes that run for certain (exact, expected, or an upper
    /// bound).
    pub calls: u64,
    /// Of `calls`, those counted exactly.
    pub exact_calls: u64,
    /// Of `calls`, those that are an expectation.
    #[serde(default)]
    pub expected_calls: u64,
    /// The most calls the certain nodes can make (`calls` with every expectation
    /// replaced by its bound).
    #[serde(default)]
    pub bound_calls: u64,
    /// Model calls of planned nodes (an upper bound: they run only if their curve
    /// goes on).
    pub planned_calls: u64,
    /// Prompt tokens, certain nodes.
    pub prompt_tokens: u64,
    /// Completion tokens, certain nodes.
    pub completion_tokens: u64,
    /// Prompt + completion tokens of planned nodes.
    pub planned_tokens: u64,
    /// Hours of model time, certain nodes (`None`: some model's time is unknown).
    pub hours: Option<f64>,
    /// Hours of model time of planned nodes.
    pub planned_hours: Option<f64>,
    /// Dollars, certain nodes (`None`: no price file, or no priced model).
    pub dollars: Option<f64>,
    /// Dollars of planned nodes.
    pub planned_dollars: Option<f64>,
    /// Model calls external methods may make within their budgets (apart).
    #[serde(default)]
    pub budget_calls: u64,
    /// Prompt + completion tokens of those calls.
    #[serde(default)]
    pub budget_tokens: u64,
    /// Hours of model time of those calls.
    #[serde(default)]
    pub budget_hours: Option<f64>,
}

/// The bill of an experiment's plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bill {
    /// The experiment's name.
    pub experiment: String,
    /// When it was made (UTC).
    pub made: String,
    /// One line per node and model, in plan order.
    pub lines: Vec<BillLine>,
    /// The sums.
    pub totals: Totals,
    /// What was assumed or could not be estimated.
    pub notes: Vec<String>,
}

/// Dollars of (model spec, prompt tokens, completion tokens), for the models a price
/// file names (`crate::report::cost::Prices::dollars`).
pub type PriceOf<'a> = &'a dyn Fn(&str, u64, u64) -> Option<f64>;

/// How the bill is made.
#[derive(Clone, Copy, Default)]
pub struct Options<'a> {
    /// Prices of models (dollars per million tokens).
    pub prices: Option<PriceOf<'a>>,
    /// Whether an embedded model without a cached calibration may be benchmarked now
    /// (`otb plan`, `otb run`).
    pub calibrate: bool,
    /// Whether an embedded model that is not downloaded yet is downloaded first to be
    /// calibrated (`otb run`, which needs it anyway; `otb plan` never downloads).
    pub fetch: bool,
}

/// A model's prompt and completion rates, tokens per second.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// Prompt processing.
    pub prompt_per_s: f64,
    /// Generation.
    pub completion_per_s: f64,
}

/// What the store says about one stage and model: sums over its finished nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Measured {
    /// Model calls.
    pub calls: u64,
    /// Calls not answered from the call cache.
    pub uncached: u64,
    /// Prompt tokens.
    pub prompt: u64,
    /// Completion tokens.
    pub completion: u64,
    /// Wall time of the nodes whose calls were not all cached, in milliseconds,
    /// divided by how many of the model's stages ran at once (stages computed
    /// together share the model: each one's wall time holds the others' calls too).
    pub wall_ms: u64,
}

/// The store's measurements by (stage, model spec).
pub type Measurements = BTreeMap<(String, String), Measured>;

/// The model spec a stage's params name for `role` (an embedded spec's key text
/// carries the backend revision after a space: only the spec is kept).
fn params_model(params: &serde_json::Value, role: &str) -> Option<String> {
    let v = params.get(role)?.as_str()?;
    Some(v.split_whitespace().next().unwrap_or(v).to_string())
}

/// Every published entry's usage and time, by stage and model (the agent's for
/// agent stages, else the editor's, the judge's or the generator's). A model's
/// stages that ran at the same time are counted once: their wall times are divided
/// by the model's overlap (the sum of its stages' wall times over the time any of
/// them was running).
pub fn measurements(store: &pipeline::Store) -> Result<Measurements, pipeline::StoreError> {
    let mut out = Measurements::new();
    // Per model: each timed stage's (start, end) in milliseconds.
    let mut spans: BTreeMap<String, Vec<(u64, u64)>> = BTreeMap::new();
    for (stage, dir) in store.entries()? {
        let Ok(text) = std::fs::read_to_string(dir.join("manifest.json")) else {
            continue;
        };
        let Ok(m) = serde_json::from_str::<pipeline::Manifest>(&text) else {
            continue;
        };
        let u = &m.usage;
        if u.calls == 0 {
            continue;
        }
        let roles: &[&str] = match role_of(&stage) {
            "agent" => &["agent"],
            _ => &["editor", "judge", "generator", "agent"],
        };
        let Some(model) = roles
            .iter()
            .find_map(|r| params_model(&m.components.params, r))
        else {
            continue;
        };
        let e = out.entry((stage, model.clone())).or_default();
        e.calls += u.calls;
        e.prompt += u.prompt_tokens;
        e.completion += u.completion_tokens;
        let uncached = u.calls.saturating_sub(u.cached_calls);
        if uncached > 0 {
            e.uncached += uncached;
            e.wall_ms += m.wall_ms;
            let end = m.created_unix.saturating_mul(1000);
            spans
                .entry(model)
                .or_default()
                .push((end.saturating_sub(m.wall_ms), end));
        }
    }
    for ((_, model), e) in out.iter_mut() {
        if let Some(s) = spans.get(model) {
            e.wall_ms = (e.wall_ms as f64 / overlap(s)).round() as u64;
        }
    }
    Ok(out)
}

/// How many of `spans` ran at once on average: the sum of their lengths over the
/// length of their union (1 when none overlap or they are empty).
fn overlap(spans: &[(u64, u64)]) -> f64 {
    let (sum, union) = crate::metrics::status::summed_and_union(
        spans.iter().copied().filter(|(a, b)| b > a).collect(),
    );
    if union == 0 {
        1.0
    } else {
        (sum as f64 / union as f64).max(1.0)
    }
}

/// Whose model a stage mainly calls.
fn role_of(stage: &str) -> &'static str {
    match stage {
        crate::bfcl::explore::STAGE
        | crate::chess::EXPLORE_STAGE
        | crate::search::EXPLORE_STAGE => "agent",
        crate::search::judge::JUDGE_STAGE => "judge",
        _ => "editor",
    }
}

/// The item counts of a `[bfcl]` table's instances (after `subset`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BfclCounts {
    /// Instances.
    pub instances: u64,
    /// Tools over all instances.
    pub tools: u64,
    /// `exec_multiple` instances.
    pub multiple: u64,
    /// Their tools.
    pub multiple_tools: u64,
}

/// The counts of `b`'s instances: from its data file, or the pinned wheel's known
/// counts ([`datasets::bfcl::data::WHEEL_TOOLS`]: exact before the wheel is
/// downloaded); `approx` is set when a data file does not read (the run reports it).
fn bfcl_counts(b: &crate::bfcl::config::BfclExperiment) -> (BfclCounts, bool) {
    use crate::bfcl::config::DataSource;
    use datasets::bfcl::data;
    let instances = match &b.data {
        DataSource::File(p) => data::load_jsonl(p, None).ok(),
        DataSource::Wheel => None,
    };
    if let Some(all) = instances {
        let rows = crate::bfcl::data::to_rows(&all, b.subset);
        let mut c = BfclCounts::default();
        for r in &rows {
            let tools = r.functions.as_array().map_or(0, Vec::len) as u64;
            c.instances += 1;
            c.tools += tools;
            if r.category == data::Category::Multiple.as_str() {
                c.multiple += 1;
                c.multiple_tools += tools;
            }
        }
        return (c, false);
    }
    // The pinned wheel's own counts (its first `subset` instances per category):
    // exact unless the data is a file of the user's that did not read.
    let mut c = BfclCounts::default();
    for (cat, digits) in data::WHEEL_TOOLS {
        let k = b.subset.unwrap_or(usize::MAX);
        for d in digits.bytes().take(k) {
            let tools = u64::from(d.saturating_sub(b'0'));
            c.instances += 1;
            c.tools += tools;
            if cat == data::Category::Multiple {
                c.multiple += 1;
                c.multiple_tools += tools;
            }
        }
    }
    (c, matches!(b.data, DataSource::File(_)))
}

/// One model's calls of a node, before tokens and time.
#[derive(Clone, Debug, PartialEq)]
pub struct Need {
    /// Whose model.
    pub role: &'static str,
    /// The model spec.
    pub model: String,
    /// Calls (exact, an upper bound, or an expectation when `bound` is set).
    pub calls: u64,
    /// Whether `calls` is exact.
    pub exact: bool,
    /// The most calls the node can make, when `calls` is the expected count (a
    /// baseline whose tries end at the first that works).
    pub bound: Option<u64>,
    /// Tools the calls show (for the modelled prompt size), per call.
    pub tools_per_call: f64,
    /// Tokens of one tool as an editor reads it (its rendered text).
    pub tool_text: f64,
    /// Whether the node is an offline environment's (chess, search): its editor
    /// reads mini-batches of trajectories.
    pub offline: bool,
}

impl Need {
    /// `calls` as the expected count, `bound` the most there can be.
    fn expected(mut self, bound: u64) -> Need {
        self.bound = (bound != self.calls).then_some(bound);
        self
    }
}

/// Tokens of one BFCL tool rendered as text for an editor, by documentation setting
/// (the first instances of `make reproduce-table2 SUBSET=1`, 2026-12-02: an opaque
/// name about 11, with a description 20, with parameters 28); docs an editor has
/// written (a ToolObserver round after the first) carry about 40 more.
fn bfcl_tool_text(setting: &str, round: i64) -> f64 {
    let base = match setting {
        "names" => 11.0,
        "names+desc" => 20.0,
        "names+params" => 28.0,
        _ => 50.0,
    };
    if round > 0 {
        base + 40.0
    } else {
        base
    }
}

/// What the call counts are computed from.
struct World<'a> {
    exp: &'a Experiment,
    bfcl: Option<BfclCounts>,
    chess: Option<&'a crate::chess::config::ChessExperiment>,
    search: Option<&'a crate::search::config::SearchExperiment>,
    mcp: Option<(&'a crate::mcp::McpExperiment, BTreeMap<String, McpCounts>)>,
}

/// One MCP server's items: its tasks by split (those with a judge's rubric apart)
/// and, once its server node is in the store, how many tools it lists.
#[derive(Clone, Debug, Default, PartialEq)]
struct McpCounts {
    train: u64,
    test: u64,
    train_rubric: u64,
    test_rubric: u64,
    tools: Option<u64>,
}

/// The tools a server listed, 0 before it has.
fn tools_known(c: &McpCounts) -> f64 {
    c.tools.unwrap_or(0) as f64
}

/// Tokens of one MCP tool by the tool set's documentation setting (`<server>:<setting>`):
/// (as an editor reads it, as an agent is offered it). Measured with the embedded
/// model on `names` (2026-12-02: EasyTool's prompt over the SQLite server's 6 tools, an
/// episode's first prompt over 6, 9 and 14 tools); the others scaled from BFCL's.
fn mcp_tool_tokens(tool_set: &str) -> (f64, f64) {
    match tool_set.rsplit(':').next().unwrap_or_default() {
        "names" => (20.0, 42.0),
        "names+params" => (30.0, 50.0),
        "names+desc" => (50.0, 70.0),
        _ => (80.0, 100.0),
    }
}

/// The calls an MCP episode is expected to make: one tool call and the answer.
const MCP_EPISODE_CALLS: u64 = 2;

/// The counts of every server of `m`: tasks from its tasks file (split as
/// `mcp-tasks` splits them), tools from its `mcp-server` node when the store has it.
fn mcp_counts(
    m: &crate::mcp::McpExperiment,
    store: &pipeline::Store,
) -> BTreeMap<String, McpCounts> {
    use crate::mcp::{tasks, ServerRow};
    let names: Vec<&str> = m.servers.iter().map(|s| s.name.as_str()).collect();
    let all = m
        .tasks
        .as_deref()
        .and_then(|p| tasks::load(p, &names).ok())
        .unwrap_or_default();
    let mut out = BTreeMap::new();
    for s in &m.servers {
        let mut c = McpCounts::default();
        for r in tasks::split(&all, &s.name, m.seed, m.train_fraction) {
            let rubric = r.judge.is_some();
            match r.split.as_str() {
                "train" => {
                    c.train += 1;
                    c.train_rubric += u64::from(rubric);
                }
                _ => {
                    c.test += 1;
                    c.test_rubric += u64::from(rubric);
                }
            }
        }
        let node = format!("{}[{}]", crate::mcp::SERVER_STAGE, s.name);
        c.tools = store
            .slot(&node)
            .and_then(|slot| match store.inspect(&slot.components) {
                pipeline::Lookup::Hit(e) => e
                    .read::<ServerRow>()
                    .ok()?
                    .first()
                    .and_then(|r| r.tools.as_array().map(|a| a.len() as u64)),
                _ => None,
            });
        out.insert(s.name.clone(), c);
    }
    out
}

/// Play2Prompt's calls per tool (upper bounds): the editor's tool play (a play and a
/// critique per try), the query written from a working call, its judgement and
/// refinements, and the description search (a critique and a rewrite per
/// candidate); the agent validates the initial description and every candidate on
/// each example.
pub fn play2prompt_per_tool(b: &Play2PromptBudget) -> (u64, u64) {
    play2prompt_calls(b, b.init_loops)
}

/// Play2Prompt's expected calls per tool: the first try of the tool play works (a
/// play and a critique), then the query, its judgement and refinements and the
/// description search as in [`play2prompt_per_tool`]; (editor, agent).
pub fn play2prompt_expected_per_tool(b: &Play2PromptBudget) -> (u64, u64) {
    play2prompt_calls(b, b.init_loops.min(1))
}

/// (editor, agent) calls per tool with `tries` tool-play tries per example.
fn play2prompt_calls(b: &Play2PromptBudget, tries: u32) -> (u64, u64) {
    let examples = u64::from(b.examples);
    let candidates =
        u64::from(b.iterations) * u64::from(b.beam_width.max(1)) * u64::from(b.expansions);
    let editor =
        examples * (2 * u64::from(tries) + 2 + 2 * u64::from(b.refine_steps)) + 2 * candidates;
    let agent = examples * (1 + candidates);
    (editor, agent)
}

/// DRAFT's editor calls per tool (upper bound): per episode the explorer (with its
/// re-asks), the analyzer and the rewriter.
pub fn draft_per_tool(b: &DraftBudget) -> u64 {
    u64::from(b.episodes) * (1 + u64::from(b.retries) + 2)
}

/// Trace-Free+'s generator calls per tool: one request (and its re-asks after a
/// reply without JSON) plus one proposal per trace; exact without either.
pub fn tracefree_per_tool(b: &TraceFreeBudget) -> (u64, bool) {
    (
        1 + u64::from(b.retries) + u64::from(b.traces),
        b.retries == 0 && b.traces == 0,
    )
}

/// An external method's calls per item (upper bounds): `(editor, agent)`. The editor
/// gets at most `max_calls` requests, all of them `ask` (`call_tool` costs no model
/// call); where the environment carries `play` -- `training` is `(training items,
/// agent turns per item)`, `None` in BFCL -- the agent takes at most `max_plays`
/// plays (and no more than `max_calls`, which plays count toward) of at most
/// [`MAX_PLAY_ITEMS`](crate::env::MAX_PLAY_ITEMS) training items each, every item
/// at most its turns.
pub fn external_per_item(
    b: &crate::baselines::external::ExternalBudget,
    training: Option<(u64, u64)>,
) -> (u64, u64) {
    let agent = training.map_or(0, |(items, turns)| {
        let per_play = items.min(crate::env::MAX_PLAY_ITEMS as u64);
        b.max_plays
            .min(b.max_calls)
            .saturating_mul(per_play)
            .saturating_mul(turns)
    });
    (b.max_calls, agent)
}

/// The model calls of one node of the plan.
fn needs(n: &PlanNode, w: &World<'_>) -> (Vec<Need>, Option<String>) {
    let Some(cell) = &n.cell else {
        return (Vec::new(), None);
    };
    let offline = matches!(cell.env, "chess" | "search" | "mcp");
    let split = cell.split().map(|s| s.as_str());
    let tool_text = match cell.env {
        "bfcl" => bfcl_tool_text(&cell.setting, cell.round),
        "mcp" => mcp_tool_tokens(&cell.setting).0,
        _ => 100.0,
    };
    let need = |role: &'static str, model: &str, calls: u64, exact: bool, tools: f64| Need {
        role,
        model: model.to_string(),
        calls,
        exact,
        bound: None,
        tools_per_call: tools,
        tool_text,
        offline,
    };
    let chess_family = w.chess.filter(|_| cell.env == "chess").and_then(|c| {
        c.tool_sets
            .iter()
            .find(|f| f.as_str() == cell.setting)
            .copied()
    });
    let search_set = w.search.filter(|_| cell.env == "search");
    let bl = &w.exp.baselines;
    let editor = cell.editor.as_str();
    let agent = cell.agent.as_str();
    // An external method at `sets` items (`per` tools each): its `ask`s in the
    // editor's role and, where it can `play` (`training`: items, agent turns per
    // item), the agent's turns; upper bounds.
    let external = |sets: u64, per: f64, training: Option<(u64, u64)>| -> Vec<Need> {
        let Some(m) = cell
            .method
            .and_then(|m| m.external_name())
            .and_then(|name| bl.external.get(name))
        else {
            return Vec::new();
        };
        let (asks, turns) = external_per_item(&m.budget, training);
        let items = sets.max(1);
        let (asks, turns) = (asks.saturating_mul(items), turns.saturating_mul(items));
        let mut out = vec![need("editor", editor, asks, false, per)];
        if turns > 0 {
            out.push(need("agent", agent, turns, false, per));
        }
        out
    };
    // Baseline stages: per tool set (EasyTool) or per tool.
    let baseline = |sets: u64, tools: u64| -> Vec<Need> {
        let per = if sets == 0 {
            1.0
        } else {
            tools as f64 / sets as f64
        };
        match n.stage.as_str() {
            crate::baselines::easytool::STAGE => vec![need("editor", editor, 2 * sets, true, per)],
            // Expected: every re-ask or retry unused (the budget is the bound).
            crate::baselines::draft::STAGE => {
                let expected = u64::from(bl.draft.episodes) * 3 * tools;
                vec![need("editor", editor, expected, false, 1.0)
                    .expected(draft_per_tool(&bl.draft) * tools)]
            }
            crate::baselines::play2prompt::STAGE => {
                let (e, a) = play2prompt_per_tool(&bl.play2prompt);
                let (ee, ea) = play2prompt_expected_per_tool(&bl.play2prompt);
                vec![
                    need("editor", editor, ee * tools, false, 1.0).expected(e * tools),
                    need("agent", agent, ea * tools, false, per).expected(a * tools),
                ]
            }
            crate::baselines::tracefree::STAGE => {
                let (k, exact) = tracefree_per_tool(&bl.tracefree);
                let generator = bl.tracefree.generator.as_deref().unwrap_or(editor);
                let expected = (1 + u64::from(bl.tracefree.traces)) * tools;
                let n = need("generator", generator, expected, exact, 1.0);
                vec![if exact { n } else { n.expected(k * tools) }]
            }
            // An external method where it cannot `play` (BFCL).
            crate::baselines::external::STAGE => external(sets, per, None),
            _ => Vec::new(),
        }
    };
    if let Some(family) = chess_family {
        let Some(c) = w.chess else {
            return (Vec::new(), None);
        };
        let train_games = c.train_positions as u64 * 2;
        let plies = |cap: usize| cap.div_ceil(2) as u64;
        let tools = datasets::chess::tools::ToolSet::new(family).len() as u64;
        let out = match n.stage.as_str() {
            crate::chess::EXPLORE_STAGE => match split {
                Some("train") => vec![need(
                    "agent",
                    agent,
                    train_games * plies(datasets::chess::game::EXPLORATION_PLIES),
                    false,
                    tools as f64,
                )],
                _ => {
                    let sides = if c.mirror { 2 } else { 1 };
                    let games = c.test_positions as u64 * c.opponents.len() as u64 * sides;
                    vec![need(
                        "agent",
                        agent,
                        games * plies(c.max_plies),
                        false,
                        tools as f64,
                    )]
                }
            },
            crate::offline::REFLECT_STAGE => vec![need(
                "editor",
                editor,
                train_games.div_ceil(c.batch_size.max(1) as u64),
                false,
                tools as f64,
            )],
            crate::offline::MERGE_STAGE => vec![need("editor", editor, 1, false, tools as f64)],
            // `play`: a training position's two exploration games (both sides), each
            // its moves as the training explore counts them.
            crate::baselines::external::STAGE => external(
                1,
                tools as f64,
                Some((
                    c.train_positions as u64,
                    2 * plies(datasets::chess::game::EXPLORATION_PLIES),
                )),
            ),
            _ => baseline(1, tools),
        };
        return (out, None);
    }
    if let Some((m, counts)) = w.mcp.as_ref().filter(|_| cell.env == "mcp") {
        let server = cell.setting.split(':').next().unwrap_or_default();
        let Some(c) = counts.get(server) else {
            return (Vec::new(), None);
        };
        let online = m.toolobserver == crate::mcp::config::ToolObserverMode::Online;
        let tasks = |split: Option<&str>| match split {
            Some("train") => c.train,
            _ => c.test,
        };
        let turns = m.max_turns as u64 + 1;
        // An agent's prompt shows the tools through the chat template: about 100
        // tokens a tool as the server describes it, fewer opaque.
        let agent_tools = tools_known(c) * mcp_tool_tokens(&cell.setting).1 / 100.0;
        let tools_needed = |out: Vec<Need>| match c.tools {
            Some(_) => (out, None),
            None => (
                Vec::new(),
                Some(format!(
                    "{}: counted once its server has listed its tools",
                    n.node
                )),
            ),
        };
        let tools = c.tools.unwrap_or(0);
        return match n.stage.as_str() {
            // An episode: expected a tool call and the answer, at most `max_turns`
            // tool turns and the answer.
            crate::mcp::EXPLORE_STAGE => {
                let k = tasks(split);
                let expected = MCP_EPISODE_CALLS.min(turns) * k;
                (
                    vec![need("agent", agent, expected, false, agent_tools).expected(k * turns)],
                    None,
                )
            }
            crate::mcp::JUDGE_STAGE => match &m.judge {
                Some(j) => {
                    let k = match split {
                        Some("train") => c.train_rubric,
                        _ => c.test_rubric,
                    };
                    (vec![need("judge", &j.to_string(), k, true, 0.0)], None)
                }
                None => (Vec::new(), None),
            },
            // Online: one request per test task not frozen; offline: mini-batches.
            crate::offline::REFLECT_STAGE if online => {
                let mut n = need("editor", editor, c.test, false, tools as f64);
                n.offline = false;
                (vec![n], None)
            }
            crate::offline::REFLECT_STAGE => (
                vec![need(
                    "editor",
                    editor,
                    c.train.div_ceil(m.batch_size.max(1) as u64),
                    false,
                    tools as f64,
                )],
                None,
            ),
            crate::offline::MERGE_STAGE => {
                tools_needed(vec![need("editor", editor, 1, false, tools as f64)])
            }
            crate::baselines::external::STAGE => tools_needed(external(1, tools as f64, None)),
            crate::baselines::easytool::STAGE
            | crate::baselines::draft::STAGE
            | crate::baselines::play2prompt::STAGE
            | crate::baselines::tracefree::STAGE => {
                // The agent (Play2Prompt's validation) is offered the tools as an
                // episode's agent is.
                let scale = mcp_tool_tokens(&cell.setting).1 / 100.0;
                let mut out = baseline(1, tools);
                for n in out.iter_mut().filter(|n| n.role == "agent") {
                    n.tools_per_call *= scale;
                }
                tools_needed(out)
            }
            _ => (Vec::new(), None),
        };
    }
    if let Some(s) = search_set {
        let tools = crate::search::tools::tool_count(s, &cell.setting) as u64;
        let q = |split: &str| match split {
            "train" => s.train_questions,
            _ => s.test_questions,
        };
        let out = match n.stage.as_str() {
            crate::search::EXPLORE_STAGE => {
                let split = split.unwrap_or("test");
                match q(split) {
                    Some(k) => vec![need(
                        "agent",
                        agent,
                        k as u64 * s.max_turns as u64,
                        false,
                        tools as f64,
                    )],
                    None => {
                        return (
                            Vec::new(),
                            Some(format!(
                            "{}: the questions of the {split} split are counted when they are made",
                            n.node
                        )),
                        )
                    }
                }
            }
            crate::search::judge::JUDGE_STAGE => {
                let split = split.unwrap_or("test");
                match (q(split), &s.judge) {
                    (Some(k), Some(j)) => vec![need("judge", &j.to_string(), k as u64, false, 0.0)],
                    _ => return (Vec::new(), Some(format!("{}: not estimated", n.node))),
                }
            }
            crate::offline::REFLECT_STAGE => match s.train_questions {
                Some(k) => vec![need(
                    "editor",
                    editor,
                    (k as u64).div_ceil(s.batch_size.max(1) as u64),
                    false,
                    tools as f64,
                )],
                None => return (Vec::new(), Some(format!("{}: not estimated", n.node))),
            },
            crate::offline::MERGE_STAGE => vec![need("editor", editor, 1, false, tools as f64)],
            // Per tool set (EasyTool) or per tool (Play2Prompt, DRAFT, Trace-Free+).
            crate::baselines::easytool::STAGE
            | crate::baselines::draft::STAGE
            | crate::baselines::play2prompt::STAGE
            | crate::baselines::tracefree::STAGE => baseline(1, tools),
            // `play`: a training question's episode, at most `max_turns` tool turns
            // and the forced answer (questions not counted yet: at most a play's).
            crate::baselines::external::STAGE => external(
                1,
                tools as f64,
                Some((
                    s.train_questions
                        .map_or(crate::env::MAX_PLAY_ITEMS as u64, |k| k as u64),
                    s.max_turns as u64 + 1,
                )),
            ),
            _ => Vec::new(),
        };
        return (out, None);
    }
    let Some(c) = w.bfcl.as_ref().filter(|_| cell.env == "bfcl") else {
        return (Vec::new(), None);
    };
    // The paper's +P2P cells on names / names+desc cover exec_multiple only.
    let only_multiple = cell.is(crate::env::Method::Play2Prompt)
        && bl.play2prompt.instances == "paper"
        && matches!(cell.setting.as_str(), "names" | "names+desc");
    let (instances, tools) = if only_multiple {
        (c.multiple, c.multiple_tools)
    } else {
        (c.instances, c.tools)
    };
    let per = if instances == 0 {
        1.0
    } else {
        tools as f64 / instances as f64
    };
    let out = match n.stage.as_str() {
        // Round 0 asks about every instance; a later round only about those whose
        // docs changed.
        crate::bfcl::explore::STAGE => {
            vec![need("agent", agent, instances, cell.round == 0, per)]
        }
        // One request per instance that is not frozen and has an example to show.
        crate::batch_reflect::STAGE => vec![need("editor", editor, instances, false, per)],
        _ => baseline(instances, tools),
    };
    (out, None)
}

/// Prompt and completion tokens per call, modelled from the prompt's parts: the
/// template's characters / 4, the tools shown (about 100 tokens a tool offered to an
/// agent, with the chat template's framing; `tool_text` a tool an editor reads), the
/// example or game state; completions by what the role writes (a call, a
/// description, a merge). The single-turn editors' sizes are those measured in
/// `SUBSET=1 make reproduce-table2` (2026-12-02; docs/log/).
pub fn modelled_tokens(
    stage: &str,
    role: &str,
    offline: bool,
    exp: &Experiment,
    tools_per_call: f64,
    tool_text: f64,
) -> (u64, u64) {
    let t = |s: &str| s.len() as f64 / 4.0;
    let tools = 100.0 * tools_per_call;
    let text = tool_text * tools_per_call;
    let mean = |ts: &[&str]| ts.iter().map(|s| t(s)).sum::<f64>() / ts.len().max(1) as f64;
    let (p, c): (f64, f64) = match stage {
        crate::bfcl::explore::STAGE => (t(&exp.agent_system_prompt) + tools + 80.0, 40.0),
        crate::chess::EXPLORE_STAGE => (t(&exp.agent_system_prompt) + tools + 400.0, 40.0),
        // Multi-turn: the history grows by each tool turn's call and results, so a
        // call sees half of the episode's turns on average.
        crate::search::EXPLORE_STAGE => {
            match exp.table::<crate::search::config::SearchExperiment>() {
                Some(s) => {
                    let (first, per_turn) = search_episode(s, tools);
                    (first + search_history(per_turn, s.max_turns), 80.0)
                }
                None => (t(crate::search::config::AGENT_SYSTEM) + tools + 100.0, 80.0),
            }
        }
        crate::search::judge::JUDGE_STAGE => (400.0, 20.0),
        // The system prompt, the tools, the request; the expected episode's second call
        // also carries the first's call and result (about 60 + 200 tokens).
        crate::mcp::EXPLORE_STAGE => (
            t(crate::mcp::config::AGENT_SYSTEM) + tools + 40.0 + MCP_TURN_TOKENS / 2.0,
            100.0,
        ),
        crate::mcp::JUDGE_STAGE => (t(crate::mcp::judge::JUDGE_TEMPLATE) + 150.0, 40.0),
        // An explorer's query and call, the analysis of its result, a rewrite.
        crate::baselines::draft::STAGE => (
            mean(&[
                crate::baselines::draft::EXPLORER,
                crate::baselines::draft::ANALYZER,
                crate::baselines::draft::REWRITER,
            ]) + text
                + 120.0,
            120.0,
        ),
        crate::baselines::tracefree::STAGE => (
            t(crate::baselines::tracefree::SYSTEM)
                + t(crate::baselines::tracefree::GENERATE)
                + tool_text,
            115.0,
        ),
        // The agent validates a description with every tool shown and answers with a
        // call; the editor's plays, queries, judgements and critiques are short.
        crate::baselines::play2prompt::STAGE if role == "agent" => {
            (t(&exp.agent_system_prompt) + tools + 20.0, 40.0)
        }
        // A template, the tool, a call and its output (or the history of tries).
        crate::baselines::play2prompt::STAGE => (
            mean(crate::baselines::play2prompt::TEMPLATES) + text + 50.0,
            65.0,
        ),
        // A condensed description, then guidelines, per tool set.
        crate::baselines::easytool::STAGE => (
            mean(&[
                crate::baselines::easytool::CONDENSE,
                crate::baselines::easytool::GUIDELINES,
            ]) + text
                + 10.0,
            30.0 + 25.0 * tools_per_call,
        ),
        // The instance's tools, one trajectory and its grade.
        crate::batch_reflect::STAGE if !offline => (t(&exp.editor_prompt) + text + 90.0, 140.0),
        crate::offline::REFLECT_STAGE => (t(&exp.batch_prompt) + tools + 2000.0, 600.0),
        crate::offline::MERGE_STAGE => (t(&exp.merge_prompt) + tools + 1500.0, 800.0),
        _ => (500.0 + tools, 250.0),
    };
    (p.round() as u64, c.round() as u64)
}

/// A search episode's prompt, in tokens: its first call's (the system prompt, the
/// tools shown, the question) and what each tool turn adds to it (its call, about 60
/// tokens, and its results, about 1.4 tokens a word of snippet and 25 of JSON around
/// each).
fn search_episode(s: &crate::search::config::SearchExperiment, tools: f64) -> (f64, f64) {
    let system = if s.paper_prompts {
        crate::search::config::AGENT_SYSTEM_PAPER
    } else {
        crate::search::config::AGENT_SYSTEM
    };
    let per_result = 1.4 * s.shape.snippet_tokens as f64 + 25.0;
    (
        system.len() as f64 / 4.0 + tools + 100.0,
        60.0 + s.shape.results as f64 * per_result,
    )
}

/// The mean history a search agent's call carries: a call sees half of the
/// episode's tool turns on average; at most a long context (128k tokens).
fn search_history(per_turn: f64, turns: usize) -> f64 {
    (per_turn * turns.saturating_sub(1) as f64 / 2.0).min(128_000.0)
}

/// What one tool turn adds to an MCP episode's prompt: the call and its result.
const MCP_TURN_TOKENS: f64 = 260.0;

/// How much faster an embedded model generates in a run than the calibration's one
/// request: a run keeps several requests in flight, which the backend decodes
/// together (`make reproduce-table4`, 2026-12-02, the 2-core AMD EPYC: 22.9 tokens/s
/// with 3 requests in flight against a calibrated 17.7).
const DECODED_TOGETHER: f64 = 1.3;

/// The share of a stage's prompt tokens an embedded model evaluates: a multi-turn
/// episode's call repeats the one before it, which the backend's KV cache still
/// holds, so an episode evaluates about its last prompt (its first prompt and every
/// turn's addition) rather than the sum of its prompts; 1 for single-turn stages.
fn evaluated_share(stage: &str, exp: &Experiment) -> f64 {
    match (
        stage,
        exp.table::<crate::search::config::SearchExperiment>(),
    ) {
        (crate::search::EXPLORE_STAGE, Some(s)) if s.max_turns > 1 => {
            let tools = 100.0 * crate::search::tools::tool_count(s, "domains") as f64;
            let (first, per_turn) = search_episode(s, tools);
            let t = s.max_turns as f64;
            let sum = t * first + per_turn * t * (t - 1.0) / 2.0;
            let last = first + per_turn * (t - 1.0);
            (last / sum).min(1.0)
        }
        // The expected episode's second call repeats its first (a first prompt of
        // about 600 tokens, a turn of 260): (600 + 260) / (2 x 600 + 260).
        (crate::mcp::EXPLORE_STAGE, _) => 0.6,
        _ => 1.0,
    }
}

/// The kind of a model spec (its prefix).
fn kind(model: &str) -> &str {
    model.split(':').next().unwrap_or("")
}

/// `OTB_CALIBRATE`: `0` turns the embedded model's calibration off (a plan then
/// says its time is unknown until something measured it).
fn calibration_allowed() -> bool {
    std::env::var("OTB_CALIBRATE").map_or(true, |v| v.trim() != "0")
}

/// Where an embedded model's calibration is cached: beside the model files, per
/// model and thread count.
fn calibration_file(name: &str, threads: i64) -> PathBuf {
    llm::models::default_cache_dir()
        .join("calibration")
        .join(format!("{name}-t{threads}.json"))
}

/// The thread count the embedded backend would use.
fn threads() -> i64 {
    std::env::var("OTB_LLAMA_THREADS")
        .ok()
        .and_then(|v| v.trim().parse::<i64>().ok())
        .filter(|n| *n > 0)
        .unwrap_or_else(|| {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get()) as i64;
            if n > 2 {
                n - 1
            } else {
                n
            }
        })
}

/// A cached calibration: the rates, and how busy the machine was when they were
/// measured (a benchmark that shares the cores with a build reads several times
/// slower than the model runs on a quiet machine).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The rates measured.
    #[serde(flatten)]
    pub rates: Rates,
    /// The 1-minute load average just before the benchmark (`None`: not recorded, a
    /// calibration written before loads were).
    #[serde(default)]
    pub load: Option<f64>,
    /// The logical CPUs of the machine then.
    #[serde(default)]
    pub cpus: Option<u64>,
    /// When (Unix seconds).
    #[serde(default)]
    pub unix: Option<u64>,
}

impl Calibration {
    /// Whether it was measured on a quiet machine (a load of at most half its CPUs).
    pub fn quiet(&self) -> bool {
        matches!((self.load, self.cpus), (Some(l), Some(c)) if is_quiet(l, c))
    }
}

/// Whether a 1-minute load average of `load` on `cpus` logical CPUs leaves the
/// benchmark the cores it will use.
fn is_quiet(load: f64, cpus: u64) -> bool {
    load <= 0.5 * cpus.max(1) as f64
}

/// This machine's 1-minute load average and logical CPUs (`None` where
/// `/proc/loadavg` is not readable).
fn machine_load() -> Option<(f64, u64)> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let load = text.split_whitespace().next()?.parse::<f64>().ok()?;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as u64;
    Some((load, cpus))
}

/// Which calibration to use, given the cached one and the machine's load now: a
/// quiet cached one is kept; one measured on a busy machine (or with no load on
/// record) is measured again when the machine is quiet now; `None`: measure.
fn keep_cached(cached: Option<Calibration>, now: Option<(f64, u64)>) -> Option<Calibration> {
    let c = cached.filter(|c| c.rates.prompt_per_s > 0.0 && c.rates.completion_per_s > 0.0)?;
    if c.quiet() {
        return Some(c);
    }
    match now {
        Some((l, n)) if is_quiet(l, n) => None,
        _ => Some(c),
    }
}

/// An embedded model's rates on this machine: cached, or (with `run`) measured now
/// with a short benchmark (a 128-token prompt and 16 generated tokens after a
/// warm-up, twice, the faster kept; about 20-40 s for the 1.5B model on 2 cores) when
/// the model file is present, and cached with the machine's load. A calibration made
/// while the machine was busy is made again once it is quiet;
/// the returned note says when the rates in use came from a busy machine. `None`
/// when there are no rates.
pub fn calibration(model: &str, run: bool, fetch: bool) -> Option<(Rates, Option<String>)> {
    let name = model.strip_prefix("embedded:")?;
    let file = calibration_file(name, threads());
    let cached = std::fs::read_to_string(&file)
        .ok()
        .and_then(|t| serde_json::from_str::<Calibration>(&t).ok());
    let now = machine_load();
    let busy_note = |c: &Calibration| {
        (!c.quiet()).then(|| match (c.load, c.cpus) {
            (Some(l), Some(n)) => format!(
                "{model}'s calibration was measured on a busy machine (load {l:.1} on {n} CPUs): \
                 its time may read long; it is measured again when the machine is quiet"
            ),
            _ => format!(
                "{model}'s calibration has no load on record: it is measured again when the machine is quiet"
            ),
        })
    };
    if let Some(c) = keep_cached(cached, now) {
        return Some((c.rates, busy_note(&c)));
    }
    if !run || !calibration_allowed() {
        return cached.map(|c| (c.rates, busy_note(&c)));
    }
    let Some(rates) = bench(name, fetch) else {
        return cached.map(|c| (c.rates, busy_note(&c)));
    };
    let fresh = Calibration {
        rates,
        load: now.map(|n| n.0),
        cpus: now.map(|n| n.1),
        unix: Some(pipeline::clock::now_unix()),
    };
    if let Some(dir) = file.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    if let Ok(text) = serde_json::to_string(&fresh) {
        let _ = pipeline::write_atomic(&file, text.as_bytes());
    }
    Some((fresh.rates, busy_note(&fresh)))
}

#[cfg(feature = "embedded")]
fn bench(name: &str, fetch: bool) -> Option<Rates> {
    let dir = llm::models::default_cache_dir();
    let path = match llm::models::cached_model(name, &dir).ok()? {
        Some(p) => p,
        None if fetch => {
            eprintln!(
                "otb: downloading {name} (once; the run needs it) to calibrate it for the bill"
            );
            llm::models::fetch_model(name, &dir).ok()?
        }
        None => return None,
    };
    eprintln!(
        "otb: calibrating {name} on this machine (again when it was measured on a busy one; OTB_CALIBRATE=0 skips it)"
    );
    let cfg = llm::EmbeddedConfig::new(path);
    let raw = llm::embedded::bench_raw(&cfg, 128, 16, 2).ok()?;
    // The fastest repetition: other work on the machine only ever slows one down.
    let best = |xs: &[f64]| xs.iter().copied().fold(0.0, f64::max);
    let (p, g) = (best(&raw.prompt), best(&raw.generation));
    (p > 0.0 && g > 0.0).then_some(Rates {
        prompt_per_s: p,
        completion_per_s: g,
    })
}

#[cfg(not(feature = "embedded"))]
fn bench(_name: &str, _fetch: bool) -> Option<Rates> {
    None
}

/// What the store measured of one model over all its stages: wall seconds of the
/// nodes whose calls were not all cached, and the prompt and completion tokens of
/// those uncached calls (each stage's tokens per call times its uncached calls).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct ModelMeasured {
    wall_s: f64,
    prompt: f64,
    completion: f64,
}

fn by_model(measured: &Measurements) -> BTreeMap<String, ModelMeasured> {
    let mut out: BTreeMap<String, ModelMeasured> = BTreeMap::new();
    for ((_, model), m) in measured
        .iter()
        .filter(|(_, m)| m.uncached > 0 && m.calls > 0)
    {
        let share = m.uncached as f64 / m.calls as f64;
        let e = out.entry(model.clone()).or_default();
        e.wall_s += m.wall_ms as f64 / 1000.0;
        e.prompt += m.prompt as f64 * share;
        e.completion += m.completion as f64 * share;
    }
    out
}

/// The time of an embedded model's calls for a stage the store has not measured:
/// from the calibration's rates, scaled by how the model's measured stages in this
/// store compared with the same rates (requests decoded together, the machine's
/// real load: the estimator corrects itself after every run); from the measured
/// stages' seconds per token where there is no calibration. `(None, "unknown")`
/// with neither.
fn model_time(
    rates: Option<Rates>,
    measured: Option<&ModelMeasured>,
    prompt_tokens: u64,
    completion_tokens: u64,
    evaluated: f64,
) -> (Option<f64>, &'static str) {
    let at = |r: &Rates, p: f64, c: f64| p / r.prompt_per_s + c / r.completion_per_s;
    let (p, c) = (prompt_tokens as f64, completion_tokens as f64);
    // Before any stage of the model is measured: the prompt tokens it evaluates (not
    // those its KV cache still holds) and generation as fast as requests decoded
    // together make it.
    let unmeasured =
        |r: &Rates| p * evaluated / r.prompt_per_s + c / (r.completion_per_s * DECODED_TOGETHER);
    let measured = measured.filter(|m| m.wall_s > 0.0 && m.prompt + m.completion > 0.0);
    match (rates, measured) {
        (Some(r), Some(m)) => {
            let predicted = at(&r, m.prompt, m.completion);
            if predicted > 0.0 {
                (
                    Some(at(&r, p, c) * m.wall_s / predicted),
                    "calibrated, scaled by measured stages",
                )
            } else {
                (Some(unmeasured(&r)), "calibrated")
            }
        }
        (Some(r), None) => (Some(unmeasured(&r)), "calibrated"),
        (None, Some(m)) => (
            Some((p + c) * m.wall_s / (m.prompt + m.completion)),
            "measured (other stages)",
        ),
        (None, None) => (None, "unknown"),
    }
}

/// The bill of `plan` (made from `exp` over `store`, which is only read).
pub fn bill(
    exp: &Experiment,
    store: &pipeline::Store,
    plan: &Plan,
    opts: Options<'_>,
) -> Result<Bill, pipeline::StoreError> {
    let measured = measurements(store)?;
    let mut notes = Vec::new();
    let bfcl = match exp.table::<crate::bfcl::config::BfclExperiment>() {
        Some(b) => {
            let (c, approx) = bfcl_counts(b);
            if approx {
                notes.push(
                    "BFCL instances and tools: the pinned wheel's (the data file does not read)"
                        .to_string(),
                );
            }
            Some(c)
        }
        None => None,
    };
    let world = World {
        exp,
        bfcl,
        chess: exp.table::<crate::chess::config::ChessExperiment>(),
        search: exp.table::<crate::search::config::SearchExperiment>(),
        mcp: exp
            .table::<crate::mcp::McpExperiment>()
            .map(|m| (m, mcp_counts(m, store))),
    };
    let mut calibrations: BTreeMap<String, Option<Rates>> = BTreeMap::new();
    let by_model = by_model(&measured);
    let mut lines = Vec::new();
    for n in plan.nodes.iter().filter(|n| n.state != "fresh") {
        let (needs, note) = needs(n, &world);
        notes.extend(note);
        for need in needs {
            let m = measured
                .get(&(n.stage.clone(), need.model.clone()))
                .filter(|m| m.calls > 0);
            let ((p, c), tokens_from) = match m {
                Some(m) => ((m.prompt / m.calls, m.completion / m.calls), "measured"),
                None => (
                    modelled_tokens(
                        &n.stage,
                        need.role,
                        need.offline,
                        exp,
                        need.tools_per_call,
                        need.tool_text,
                    ),
                    "modelled",
                ),
            };
            let prompt_tokens = p.saturating_mul(need.calls);
            let completion_tokens = c.saturating_mul(need.calls);
            let (seconds, time_from) = match (kind(&need.model), m.filter(|m| m.uncached > 0)) {
                ("scripted" | "replay", _) => (Some(0.0), "scripted"),
                (_, Some(m)) => (
                    Some(m.wall_ms as f64 / 1000.0 / m.uncached as f64 * need.calls as f64),
                    "measured",
                ),
                ("embedded", None) => {
                    let r = calibrations
                        .entry(need.model.clone())
                        .or_insert_with(|| {
                            let c = calibration(&need.model, opts.calibrate, opts.fetch);
                            if let Some((_, Some(note))) = &c {
                                notes.push(note.clone());
                            }
                            c.map(|c| c.0)
                        })
                        .as_ref()
                        .copied();
                    model_time(
                        r,
                        by_model.get(&need.model),
                        prompt_tokens,
                        completion_tokens,
                        evaluated_share(&n.stage, exp),
                    )
                }
                _ => (None, "unknown"),
            };
            let dollars = opts
                .prices
                .and_then(|pr| pr(&need.model, prompt_tokens, completion_tokens));
            lines.push(BillLine {
                node: n.node.clone(),
                stage: n.stage.clone(),
                role: need.role.to_string(),
                model: need.model,
                calls: need.calls,
                exact: need.exact,
                bound: need.bound,
                planned: n.state == "planned",
                budget: n.stage == crate::baselines::external::STAGE,
                prompt_tokens,
                completion_tokens,
                tokens_from: tokens_from.to_string(),
                seconds,
                time_from: time_from.to_string(),
                dollars,
            });
        }
    }
    // An MCP server's grid hangs on its tool list, which only the server gives.
    let unstarted: Vec<&str> = plan
        .nodes
        .iter()
        .filter(|n| n.stage == crate::mcp::SERVER_STAGE && n.state != "fresh")
        .map(|n| n.node.as_str())
        .collect();
    if !unstarted.is_empty() {
        notes.push(format!(
            "{}: the grid of an MCP server is planned and billed once its server node has run (its tools come from the server): `otb run` starts it first and bills the grid before running it",
            unstarted.join(", ")
        ));
    }
    let unknown: std::collections::BTreeSet<&str> = lines
        .iter()
        .filter(|l| l.seconds.is_none())
        .map(|l| l.model.as_str())
        .collect();
    for m in unknown {
        notes.push(format!(
            "time of {m}: unknown (no finished calls in this store{})",
            if kind(m) == "embedded" {
                "; `otb run` downloads it and calibrates it first, `otb plan` once it is downloaded"
            } else {
                ""
            }
        ));
    }
    let totals = totals(plan, &lines);
    Ok(Bill {
        experiment: exp.name.clone(),
        made: pipeline::clock::utc_datetime(pipeline::clock::now_unix()),
        lines,
        totals,
        notes,
    })
}

/// The sums of `lines` (nodes: the plan's nodes not in the store).
fn totals(plan: &Plan, lines: &[BillLine]) -> Totals {
    let mut t = Totals {
        nodes: plan.nodes.iter().filter(|n| n.state != "fresh").count() as u64,
        ..Totals::default()
    };
    let add = |a: Option<f64>, b: Option<f64>| match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
    let (mut hours, mut planned_hours, mut budget_hours) = (Some(0.0), Some(0.0), Some(0.0));
    for l in lines {
        let h = l.seconds.map(|s| s / 3600.0);
        if l.budget {
            t.budget_calls += l.calls;
            t.budget_tokens += l.prompt_tokens + l.completion_tokens;
            budget_hours = add(budget_hours, h);
        } else if l.planned {
            t.planned_calls += l.calls;
            t.planned_tokens += l.prompt_tokens + l.completion_tokens;
            planned_hours = add(planned_hours, h);
            if let Some(d) = l.dollars {
                t.planned_dollars = Some(t.planned_dollars.unwrap_or(0.0) + d);
            }
        } else {
            t.calls += l.calls;
            t.bound_calls += l.bound.unwrap_or(l.calls);
            if l.exact {
                t.exact_calls += l.calls;
            }
            if l.bound.is_some() {
                t.expected_calls += l.calls;
            }
            t.prompt_tokens += l.prompt_tokens;
            t.completion_tokens += l.completion_tokens;
            hours = add(hours, h);
            if let Some(d) = l.dollars {
                t.dollars = Some(t.dollars.unwrap_or(0.0) + d);
            }
        }
    }
    t.hours = hours;
    t.planned_hours = planned_hours;
    t.budget_hours = (t.budget_calls > 0).then_some(budget_hours).flatten();
    t
}

/// `n` with thousands separators.
fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, ch) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(ch);
    }
    out
}

/// Hours with a precision that suits them.
fn hours(h: Option<f64>) -> String {
    match h {
        None => "? h".into(),
        Some(h) if h < 0.1 => format!("{:.0} s", h * 3600.0),
        Some(h) => format!("{h:.1} h"),
    }
}

impl Bill {
    /// The totals in one or two lines (the first lines of `otb run`).
    pub fn short(&self) -> String {
        let t = &self.totals;
        let at_most = t.calls - t.exact_calls - t.expected_calls;
        let calls = match (t.exact_calls == t.calls, t.expected_calls) {
            (true, _) => format!("{} model calls", thousands(t.calls)),
            (false, 0) => format!(
                "{} model calls ({} exact, the rest at most)",
                thousands(t.calls),
                thousands(t.exact_calls)
            ),
            (false, e) => format!(
                "{} model calls ({} exact, {} at most, {} expected; at most {} in all)",
                thousands(t.calls),
                thousands(t.exact_calls),
                thousands(at_most),
                thousands(e),
                thousands(t.bound_calls)
            ),
        };
        let mut out = format!(
            "bill: {} stages to run, {calls}, {} prompt + {} completion tokens, {} model time{}",
            t.nodes,
            thousands(t.prompt_tokens),
            thousands(t.completion_tokens),
            hours(t.hours),
            t.dollars.map(|d| format!(", ${d:.2}")).unwrap_or_default()
        );
        if t.planned_calls > 0 {
            out.push_str(&format!(
                "\nbill: up to {} more calls ({} tokens, {}{}) in rounds that run only if a curve goes on",
                thousands(t.planned_calls),
                thousands(t.planned_tokens),
                hours(t.planned_hours),
                t.planned_dollars
                    .map(|d| format!(", ${d:.2}"))
                    .unwrap_or_default()
            ));
        }
        if t.budget_calls > 0 {
            out.push_str(&format!(
                "\nbill: up to {} more calls ({} tokens, {}) if the external methods use their whole budgets (their own calls are known once they have run)",
                thousands(t.budget_calls),
                thousands(t.budget_tokens),
                hours(t.budget_hours),
            ));
        }
        out.push('\n');
        out
    }

    /// The bill by stage and model (calls, tokens and where they come from, time,
    /// dollars), then the totals and the notes: the end of `otb plan`'s text.
    pub fn text(&self) -> String {
        type Key = ((bool, bool), String, String);
        #[derive(Default)]
        struct Row {
            calls: u64,
            exact: bool,
            expected: bool,
            prompt: u64,
            completion: u64,
            tokens_from: std::collections::BTreeSet<String>,
            seconds: Option<f64>,
            time_from: std::collections::BTreeSet<String>,
            dollars: Option<f64>,
        }
        let mut rows: Vec<(Key, Row)> = Vec::new();
        for l in &self.lines {
            let k = ((l.planned, l.budget), l.stage.clone(), l.model.clone());
            let i = match rows.iter().position(|(x, _)| *x == k) {
                Some(i) => i,
                None => {
                    rows.push((
                        k,
                        Row {
                            exact: true,
                            seconds: Some(0.0),
                            ..Row::default()
                        },
                    ));
                    rows.len() - 1
                }
            };
            let r = &mut rows[i].1;
            r.calls += l.calls;
            r.exact &= l.exact;
            r.expected |= l.bound.is_some();
            r.prompt += l.prompt_tokens;
            r.completion += l.completion_tokens;
            r.tokens_from.insert(l.tokens_from.clone());
            r.seconds = r.seconds.zip(l.seconds).map(|(a, b)| a + b);
            r.time_from.insert(l.time_from.clone());
            if let Some(d) = l.dollars {
                r.dollars = Some(r.dollars.unwrap_or(0.0) + d);
            }
        }
        // Certain nodes first, then the planned rounds (a stable sort keeps plan order).
        rows.sort_by_key(|(k, _)| k.0);
        let mut out = String::from("bill (estimate, before running):\n");
        let sw = rows
            .iter()
            .map(|(k, _)| k.1.len())
            .max()
            .unwrap_or(5)
            .max(5);
        let mw = rows
            .iter()
            .map(|(k, _)| k.2.len())
            .max()
            .unwrap_or(5)
            .max(5);
        for ((planned, stage, model), r) in &rows {
            let join = |s: &std::collections::BTreeSet<String>| {
                s.iter().cloned().collect::<Vec<_>>().join("+")
            };
            let mark = match (r.exact, r.expected) {
                (true, _) => "",
                (false, true) => "~",
                (false, false) => "<=",
            };
            let calls = format!("{mark}{}", thousands(r.calls));
            let line = format!(
                "  {:<sw$}  {:<mw$}  {:>9} calls  {:>11} prompt  {:>9} completion ({})  {} ({}){}{}",
                stage,
                model,
                calls,
                thousands(r.prompt),
                thousands(r.completion),
                join(&r.tokens_from),
                hours(r.seconds.map(|s| s / 3600.0)),
                join(&r.time_from),
                r.dollars.map(|d| format!("  ${d:.2}")).unwrap_or_default(),
                match planned {
                    (_, true) => "  [external method's budget]",
                    (true, _) => "  [planned rounds]",
                    _ => "",
                }
            );
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out.push_str(&self.short());
        for n in &self.notes {
            out.push_str(&format!("note: {n}\n"));
        }
        out
    }
}

/// The plan as JSON with its bill (`"bill"`) beside the nodes.
pub fn plan_json(plan: &Plan, bill: &Bill) -> String {
    let mut v = serde_json::to_value(plan).unwrap_or_default();
    if let Some(o) = v.as_object_mut() {
        o.insert(
            "bill".into(),
            serde_json::to_value(bill).unwrap_or_default(),
        );
    }
    serde_json::to_string_pretty(&v).unwrap_or_default() + "\n"
}

/// Where `otb run` records the bill of `experiment`.
pub fn bill_path(store_root: &Path, experiment: &str) -> PathBuf {
    store_root
        .join("cache")
        .join("estimates")
        .join(format!("{experiment}.json"))
}

/// Record `bill` for `otb report`: its lines replace those of the same nodes in the
/// recorded bill, the others are kept (a resumed run estimates only what is left).
pub fn save(store_root: &Path, bill: &Bill) -> Result<(), pipeline::StoreError> {
    let path = bill_path(store_root, &bill.experiment);
    let mut merged = load(store_root, &bill.experiment).unwrap_or_else(|| Bill {
        lines: Vec::new(),
        ..bill.clone()
    });
    let fresh: std::collections::HashSet<&str> =
        bill.lines.iter().map(|l| l.node.as_str()).collect();
    merged.lines.retain(|l| !fresh.contains(l.node.as_str()));
    merged.lines.extend(bill.lines.iter().cloned());
    merged.made = bill.made.clone();
    merged.notes = bill.notes.clone();
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| pipeline::StoreError::io(dir, e))?;
    }
    let text = serde_json::to_string_pretty(&merged).unwrap_or_default();
    pipeline::write_atomic(&path, text.as_bytes())?;
    Ok(())
}

/// The bill `otb run` recorded for `experiment`, if any.
pub fn load(store_root: &Path, experiment: &str) -> Option<Bill> {
    let text = std::fs::read_to_string(bill_path(store_root, experiment)).ok()?;
    serde_json::from_str(&text).ok()
}

/// Estimate beside actual for one stage and model.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Versus {
    /// The stage.
    pub stage: String,
    /// The model.
    pub model: String,
    /// Estimated calls (an upper bound or an expectation where not exact).
    pub est_calls: u64,
    /// Calls made.
    pub calls: u64,
    /// Estimated prompt + completion tokens.
    pub est_tokens: u64,
    /// Tokens used.
    pub tokens: u64,
    /// Estimated seconds (`None`: unknown).
    pub est_seconds: Option<f64>,
    /// Wall seconds of the nodes.
    pub seconds: f64,
}

/// The recorded bill beside what its nodes cost, by stage and model: only nodes
/// that are computed now (`computed`: node name -> its manifest's usage and wall
/// time). A node with several models (Play2Prompt's editor and agent) is compared
/// on its first line, holding the node's whole estimate.
pub fn versus(bill: &Bill, computed: &BTreeMap<String, (pipeline::Usage, u64)>) -> Vec<Versus> {
    let mut out: Vec<Versus> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for l in &bill.lines {
        let Some((usage, wall_ms)) = computed.get(&l.node) else {
            continue;
        };
        let node_lines: Vec<&BillLine> = bill.lines.iter().filter(|x| x.node == l.node).collect();
        if !seen.insert(l.node.clone()) {
            continue;
        }
        let i = match out
            .iter()
            .position(|v| v.stage == l.stage && v.model == l.model)
        {
            Some(i) => i,
            None => {
                out.push(Versus {
                    stage: l.stage.clone(),
                    model: l.model.clone(),
                    est_seconds: Some(0.0),
                    ..Versus::default()
                });
                out.len() - 1
            }
        };
        let v = &mut out[i];
        for x in node_lines {
            v.est_calls += x.calls;
            v.est_tokens += x.prompt_tokens + x.completion_tokens;
            v.est_seconds = v.est_seconds.zip(x.seconds).map(|(a, b)| a + b);
        }
        v.calls += usage.calls;
        v.tokens += usage.prompt_tokens + usage.completion_tokens;
        v.seconds += *wall_ms as f64 / 1000.0;
    }
    out
}

/// What each computed node of `plan` cost: its manifest's usage and wall time, by
/// node name (the plan's keys, so another experiment's node of the same name is not
/// read).
pub fn actual(store: &pipeline::Store, plan: &Plan) -> BTreeMap<String, (pipeline::Usage, u64)> {
    let mut out = BTreeMap::new();
    for n in plan.nodes.iter().filter(|n| n.state == "fresh") {
        let Some(key) = &n.key else { continue };
        let dir = store.entry_dir(&n.stage, &pipeline::Digest(key.clone()));
        let Ok(text) = std::fs::read_to_string(dir.join("manifest.json")) else {
            continue;
        };
        if let Ok(m) = serde_json::from_str::<pipeline::Manifest>(&text) {
            out.insert(n.node.clone(), (m.usage, m.wall_ms));
        }
    }
    out
}

/// The recorded bill of `exp` beside what its computed nodes cost (empty when no
/// bill was recorded or none of its nodes is computed).
pub fn versus_of(
    exp: &Experiment,
    store: &pipeline::Store,
    located: &crate::driver::Located,
) -> Vec<Versus> {
    let Some(bill) = load(store.root(), &exp.name) else {
        return Vec::new();
    };
    let plan = Plan::of(exp, located);
    versus(&bill, &actual(store, &plan))
}

/// [`versus_of`]'s rows as text lines (`otb report` prints them); empty without rows.
pub fn versus_report(rows: &[Versus]) -> String {
    if rows.is_empty() {
        return String::new();
    }
    format!(
        "estimate (the bill of `otb run`) vs actual:\n{}",
        versus_text(rows)
    )
}

/// [`versus`] as text lines (`otb report`'s cost section).
pub fn versus_text(rows: &[Versus]) -> String {
    let mut out = String::new();
    for v in rows {
        out.push_str(&format!(
            "{} {}: calls {} estimated, {} made; tokens {} estimated, {} used; time {} estimated, {:.0} s taken\n",
            v.stage,
            v.model,
            thousands(v.est_calls),
            thousands(v.calls),
            thousands(v.est_tokens),
            thousands(v.tokens),
            v.est_seconds
                .map(|s| format!("{s:.0} s"))
                .unwrap_or_else(|| "?".into()),
            v.seconds
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    fn cal(load: Option<f64>) -> Calibration {
        Calibration {
            rates: Rates {
                prompt_per_s: 6.1,
                completion_per_s: 0.29,
            },
            load,
            cpus: load.map(|_| 2),
            unix: None,
        }
    }

    #[test]
    fn a_calibration_from_a_busy_machine_is_measured_again_once_it_is_quiet() {
        // Quiet then: kept whatever the load now.
        let quiet = cal(Some(0.4));
        assert_eq!(keep_cached(Some(quiet), Some((3.0, 2))), Some(quiet));
        // Busy then (a build held both cores): kept while the machine is busy,
        // measured again (None) once it is quiet.
        let busy = cal(Some(3.5));
        assert_eq!(keep_cached(Some(busy), Some((2.5, 2))), Some(busy));
        assert_eq!(keep_cached(Some(busy), Some((0.2, 2))), None);
        assert_eq!(keep_cached(Some(busy), None), Some(busy));
        // Written before loads were recorded: as if busy.
        let old: Calibration =
            serde_json::from_str(r#"{"prompt_per_s":6.1,"completion_per_s":0.29}"#).unwrap();
        assert_eq!(old, cal(None));
        assert!(!old.quiet());
        assert_eq!(keep_cached(Some(old), Some((0.1, 2))), None);
        // Nothing cached, or rates of zero: measure.
        assert_eq!(keep_cached(None, Some((0.1, 2))), None);
        let mut zero = quiet;
        zero.rates.completion_per_s = 0.0;
        assert_eq!(keep_cached(Some(zero), Some((3.0, 2))), None);
    }

    #[test]
    fn calibrated_time_is_scaled_by_what_the_models_finished_stages_took() {
        let r = Rates {
            prompt_per_s: 10.0,
            completion_per_s: 1.0,
        };
        // Calibration alone: 100/10 + 20/1.3 s, or half the prompt evaluated
        // (the rest held by the KV cache): 50/10 + 20/1.3.
        let (t, from) = model_time(Some(r), None, 100, 20, 1.0);
        assert!((t.unwrap() - (10.0 + 20.0 / DECODED_TOGETHER)).abs() < 1e-9);
        assert_eq!(from, "calibrated");
        let (t, _) = model_time(Some(r), None, 100, 20, 0.5);
        assert!((t.unwrap() - (5.0 + 20.0 / DECODED_TOGETHER)).abs() < 1e-9);
        // The store's stages of this model: 1000 prompt + 100 completion tokens
        // predicted 200 s, took 50 s: a quarter.
        let m = ModelMeasured {
            wall_s: 50.0,
            prompt: 1000.0,
            completion: 100.0,
        };
        // (The measured stages hold the cache and the batching already.)
        assert_eq!(
            model_time(Some(r), Some(&m), 100, 20, 0.5),
            (Some(7.5), "calibrated, scaled by measured stages")
        );
        // No calibration: seconds per token of the measured stages (50 s / 1100).
        let (t, from) = model_time(None, Some(&m), 100, 20, 1.0);
        assert!((t.unwrap() - 120.0 * 50.0 / 1100.0).abs() < 1e-9);
        assert_eq!(from, "measured (other stages)");
        assert_eq!(model_time(None, None, 100, 20, 1.0), (None, "unknown"));
    }

    #[test]
    fn a_models_measurements_pool_its_uncached_calls_over_stages() {
        let mut ms = Measurements::new();
        let m = |calls, uncached, prompt, completion, wall_ms| Measured {
            calls,
            uncached,
            prompt,
            completion,
            wall_ms,
        };
        ms.insert(
            ("explore".into(), "embedded:a".into()),
            m(10, 5, 1000, 100, 4000),
        );
        ms.insert(
            ("batch-reflect".into(), "embedded:a".into()),
            m(4, 4, 400, 40, 1000),
        );
        // Entirely cached: no time to learn from.
        ms.insert(
            ("evaluate".into(), "embedded:a".into()),
            m(3, 0, 300, 30, 9000),
        );
        ms.insert(("explore".into(), "embedded:b".into()), m(2, 2, 20, 2, 500));
        let b = by_model(&ms);
        assert_eq!(
            b["embedded:a"],
            ModelMeasured {
                wall_s: 5.0,
                prompt: 500.0 + 400.0,
                completion: 50.0 + 40.0,
            }
        );
        assert_eq!(b["embedded:b"].wall_s, 0.5);
    }

    use super::*;

    #[test]
    fn an_external_methods_plays_are_counted_as_agent_turns() {
        use crate::baselines::external::ExternalBudget;
        let b = ExternalBudget::default();
        assert_eq!((b.max_calls, b.max_plays), (1000, 4));
        // BFCL: no play, its asks only.
        assert_eq!(external_per_item(&b, None), (1000, 0));
        // Chess, 3 training positions: 4 plays x 3 positions x (2 games x 5 moves).
        assert_eq!(external_per_item(&b, Some((3, 10))), (1000, 4 * 3 * 10));
        // 20 training positions: a play takes at most 8 of them.
        assert_eq!(external_per_item(&b, Some((20, 10))), (1000, 4 * 8 * 10));
        // Search, 2 questions, 2 turns and the forced answer each.
        assert_eq!(external_per_item(&b, Some((2, 3))), (1000, 4 * 2 * 3));
        // Plays count toward max_calls: no more plays than requests.
        let few = ExternalBudget {
            max_calls: 2,
            ..ExternalBudget::default()
        };
        assert_eq!(external_per_item(&few, Some((8, 10))), (2, 2 * 8 * 10));
        let none = ExternalBudget {
            max_plays: 0,
            ..ExternalBudget::default()
        };
        assert_eq!(external_per_item(&none, Some((8, 10))), (1000, 0));
    }

    #[test]
    fn baseline_budgets_give_calls_per_tool() {
        // The paper's reduced Play2Prompt budget: one example found in up to 3 tries
        // (a play and a critique each), its query and judgement, one refinement (a
        // rewrite and a judgement), one candidate (a critique and a rewrite); the
        // agent scores the initial description and the candidate.
        assert_eq!(
            play2prompt_per_tool(&Play2PromptBudget::default()),
            (6 + 2 + 2 + 2, 2)
        );
        // Expected: the first try works (a play and a critique), the rest as above.
        assert_eq!(
            play2prompt_expected_per_tool(&Play2PromptBudget::default()),
            (2 + 2 + 2 + 2, 2)
        );
        let none = Play2PromptBudget {
            init_loops: 0,
            ..Play2PromptBudget::default()
        };
        assert_eq!(play2prompt_expected_per_tool(&none).0, 6);
        // DRAFT: 5 episodes of an explorer (with 3 re-asks at most), analyzer, rewriter.
        assert_eq!(draft_per_tool(&DraftBudget::default()), 5 * 6);
        assert_eq!(tracefree_per_tool(&TraceFreeBudget::default()), (2, false));
        let once = TraceFreeBudget {
            retries: 0,
            ..TraceFreeBudget::default()
        };
        assert_eq!(tracefree_per_tool(&once), (1, true));
    }

    #[test]
    fn a_search_calls_history_is_half_its_episodes_turns() {
        // Table 4's shape (3 results of 40 words, 2 turns): a turn adds 303 tokens
        // (60 + 3 x (1.4 x 40 + 25)) and a call carries half of one turn; with one
        // turn there is no history.
        let exp = crate::driver::load(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../experiments/table4.toml"
        )))
        .expect("table4.toml parses");
        let s = exp
            .table::<crate::search::config::SearchExperiment>()
            .expect("a search table");
        let (_, per_turn) = search_episode(s, 1000.0);
        assert!((per_turn - 303.0).abs() < 1e-9);
        assert!((search_history(per_turn, 2) - 151.5).abs() < 1e-9);
        assert_eq!(search_history(per_turn, 1), 0.0);
        assert_eq!(search_history(per_turn, 0), 0.0);
        // The paper's turns (50) at the paper's results (5 of 512 words) stay under
        // the cap; 100 such turns reach it.
        let paper = 60.0 + 5.0 * (1.4 * 512.0 + 25.0);
        assert!((search_history(paper, 50) - paper * 24.5).abs() < 1e-6);
        assert_eq!(search_history(paper, 100), 128_000.0);
        // An episode of 2 calls evaluates its last prompt, not both.
        let share = evaluated_share(crate::search::EXPLORE_STAGE, &exp);
        assert!(share > 0.5 && share < 0.6, "{share}");
        assert_eq!(evaluated_share(crate::batch_reflect::STAGE, &exp), 1.0);
    }

    #[test]
    fn numbers_read_as_written() {
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(12), "12");
        assert_eq!(hours(Some(0.05)), "180 s");
        assert_eq!(hours(Some(2.25)), "2.2 h");
        assert_eq!(hours(None), "? h");
    }

    fn line(node: &str, calls: u64, exact: bool, planned: bool, secs: Option<f64>) -> BillLine {
        BillLine {
            node: node.into(),
            stage: "explore".into(),
            role: "agent".into(),
            model: "openai:m".into(),
            calls,
            exact,
            bound: None,
            planned,
            budget: false,
            prompt_tokens: calls * 100,
            completion_tokens: calls * 10,
            tokens_from: "modelled".into(),
            seconds: secs,
            time_from: "measured".into(),
            dollars: Some(calls as f64 * 0.01),
        }
    }

    #[test]
    fn an_external_methods_budget_is_summed_apart() {
        let mut ext = line("external[names ext:m]", 1000, false, false, Some(3600.0));
        ext.stage = crate::baselines::external::STAGE.into();
        ext.budget = true;
        let lines = vec![line("a", 10, true, false, Some(36.0)), ext];
        let plan = Plan {
            experiment: "x".into(),
            nodes: Vec::new(),
        };
        let t = totals(&plan, &lines);
        assert_eq!((t.calls, t.budget_calls), (10, 1000));
        assert_eq!(t.budget_tokens, 110_000);
        assert_eq!(t.hours, Some(0.01));
        assert_eq!(t.budget_hours, Some(1.0));
        let bill = Bill {
            experiment: "x".into(),
            made: String::new(),
            totals: t,
            lines,
            notes: Vec::new(),
        };
        let text = bill.text();
        assert!(text.contains("[external method's budget]"), "{text}");
        assert!(
            text.contains("up to 1,000 more calls (110,000 tokens, 1.0 h) if the external methods use their whole budgets"),
            "{text}"
        );
    }

    #[test]
    fn totals_keep_planned_rounds_and_bounds_apart() {
        let plan = Plan {
            experiment: "x".into(),
            nodes: Vec::new(),
        };
        let lines = vec![
            line("a", 10, true, false, Some(3600.0)),
            line("b", 5, false, false, Some(1800.0)),
            line("c", 7, false, true, None),
        ];
        let t = totals(&plan, &lines);
        assert_eq!((t.calls, t.exact_calls, t.planned_calls), (15, 10, 7));
        assert_eq!((t.prompt_tokens, t.completion_tokens), (1500, 150));
        assert_eq!(t.planned_tokens, 770);
        assert_eq!(t.hours, Some(1.5));
        assert_eq!(t.planned_hours, None, "an unknown time is not a zero");
        assert!((t.dollars.unwrap() - 0.15).abs() < 1e-9);
        let bill = Bill {
            experiment: "x".into(),
            made: String::new(),
            lines,
            totals: t,
            notes: vec![],
        };
        let s = bill.short();
        assert!(
            s.starts_with("bill: 0 stages to run, 15 model calls (10 exact, the rest at most), 1,500 prompt + 150 completion tokens, 1.5 h model time, $0.15\n"),
            "{s}"
        );
        assert!(
            s.contains("up to 7 more calls (770 tokens, ? h, $0.07)"),
            "{s}"
        );
        let text = bill.text();
        // By stage and model: an exact line and a bound make a bound.
        assert!(text.contains("<=15 calls"), "{text}");
        assert!(text.contains("<=7 calls"), "{text}");
        assert!(
            text.trim_end()
                .lines()
                .nth(2)
                .unwrap()
                .ends_with("[planned rounds]"),
            "{text}"
        );
    }

    #[test]
    fn stages_that_ran_together_share_their_wall_time() {
        assert_eq!(overlap(&[]), 1.0);
        assert_eq!(overlap(&[(0, 10), (20, 30)]), 1.0);
        // Two stages over the same 10 s, then one alone for 10 s: 30 s of stage time
        // in 20 s.
        assert_eq!(overlap(&[(0, 10_000), (0, 10_000), (10_000, 20_000)]), 1.5);
        assert_eq!(overlap(&[(5, 15), (0, 10)]), 20.0 / 15.0);
    }

    #[test]
    fn an_expected_count_keeps_its_bound_beside_it() {
        let plan = Plan {
            experiment: "x".into(),
            nodes: Vec::new(),
        };
        let mut p2p = line("p", 8, false, false, Some(60.0));
        p2p.stage = "play2prompt".into();
        p2p.bound = Some(12);
        let lines = vec![
            line("a", 10, true, false, Some(60.0)),
            line("b", 5, false, false, Some(60.0)),
            p2p,
        ];
        let t = totals(&plan, &lines);
        assert_eq!(
            (t.calls, t.exact_calls, t.expected_calls, t.bound_calls),
            (23, 10, 8, 27)
        );
        let bill = Bill {
            experiment: "x".into(),
            made: String::new(),
            lines,
            totals: t,
            notes: vec![],
        };
        let s = bill.short();
        assert!(
            s.starts_with(
                "bill: 0 stages to run, 23 model calls (10 exact, 5 at most, 8 expected; at most 27 in all),"
            ),
            "{s}"
        );
        assert!(bill.text().contains("~8 calls"), "{}", bill.text());
        // The need: an expectation equal to its bound is no expectation.
        let n = Need {
            role: "editor",
            model: "m".into(),
            calls: 4,
            exact: false,
            bound: None,
            tools_per_call: 1.0,
            tool_text: 100.0,
            offline: false,
        };
        assert_eq!(n.clone().expected(4).bound, None);
        assert_eq!(n.expected(9).bound, Some(9));
    }

    #[test]
    fn bfcl_editor_prompts_grow_with_what_the_setting_shows() {
        let exp = Experiment::parse(
            &crate::driver::environments(),
            Path::new("x.toml"),
            "name = \"x\"\n[bfcl]\n",
        )
        .unwrap();
        let size = |stage: &str, setting: &str, round: i64| {
            modelled_tokens(
                stage,
                "editor",
                false,
                &exp,
                2.0,
                bfcl_tool_text(setting, round),
            )
            .0
        };
        for stage in [
            crate::batch_reflect::STAGE,
            crate::baselines::easytool::STAGE,
            crate::baselines::play2prompt::STAGE,
        ] {
            assert!(
                size(stage, "names", 0) < size(stage, "names+desc", 0),
                "{stage}"
            );
            assert!(
                size(stage, "names+desc", 0) < size(stage, "names+params", 0),
                "{stage}"
            );
            assert!(size(stage, "names", 0) < size(stage, "names", 1), "{stage}");
        }
        // EasyTool's two templates with two opaque names: about what SUBSET=1 used
        // (154 prompt tokens a call on `names`, 2026-12-02).
        let e = size(crate::baselines::easytool::STAGE, "names", 0);
        assert!((150..=180).contains(&e), "{e}");
    }

    #[test]
    fn the_recorded_bill_is_merged_and_compared_node_by_node() {
        let d = tempfile::tempdir().unwrap();
        let mk = |lines: Vec<BillLine>| Bill {
            experiment: "x".into(),
            made: "t".into(),
            lines,
            totals: Totals::default(),
            notes: vec![],
        };
        save(
            d.path(),
            &mk(vec![
                line("a", 10, true, false, Some(5.0)),
                line("b", 4, true, false, Some(1.0)),
            ]),
        )
        .unwrap();
        // A resumed run estimates only what is left.
        save(d.path(), &mk(vec![line("b", 3, true, false, Some(2.0))])).unwrap();
        let b = load(d.path(), "x").unwrap();
        assert_eq!(
            b.lines
                .iter()
                .map(|l| (l.node.as_str(), l.calls))
                .collect::<Vec<_>>(),
            [("a", 10), ("b", 3)]
        );
        let mut computed = BTreeMap::new();
        let usage = |calls| pipeline::Usage {
            calls,
            prompt_tokens: 90 * calls,
            completion_tokens: 10 * calls,
            ..Default::default()
        };
        computed.insert("a".to_string(), (usage(9), 4000));
        let v = versus(&b, &computed);
        assert_eq!(v.len(), 1);
        assert_eq!((v[0].est_calls, v[0].calls), (10, 9));
        assert_eq!((v[0].est_tokens, v[0].tokens), (1100, 900));
        assert_eq!((v[0].est_seconds, v[0].seconds), (Some(5.0), 4.0));
        assert!(versus_text(&v).contains("calls 10 estimated, 9 made"));
    }
}
