//! Cross-checks of three paper claims against the authors' released BFCL runs
//! (`../shared/data/otb/bfcl/released_runs/`, layout in its README.md): Table 5 (mean
//! reflection rounds to convergence), the token-cost claim (ToolObserver's exploration
//! budget vs Play2Prompt's) and Table 7 (editor ablation, E).
//!
//! Pure computation over the released JSON files: every function takes the root of the
//! release (the directory holding `tool_observer/`, `play2prompt/`, `easytool/`) and returns
//! plain structs; each `render_*` turns one into a small Markdown table.
//!
//! What a ToolObserver chain holds (checked against the release):
//! `improvements/<edit>/v{N}/improvement_reasoning.json` is editor round N (it reads the
//! results of version N-1 and writes `v{N}/config.json`); `converged_tests.json` of v{N}
//! lists, cumulatively, the instances whose tools that round left unchanged (frozen from
//! then on; v1 often has no file, meaning none); `token_usage_descriptions.json` is the
//! editor's usage of round N, `token_usage_generation.json` the agent re-running only the
//! changed instances with v{N}'s tools; `v0_token_usage_generation.json` is the Base run.
//! The Play2Prompt and EasyTool directories hold only the agent's evaluation run with the
//! learned docs: the cost of learning those docs is not released.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::data::Category;
use super::opacify::Setting;
use super::released::{read_scored, split_config, ReleasedError};

/// The ToolObserver method directory of the release.
pub const TOOL_OBSERVER: &str = "tool_observer";

/// The three opaque settings in Table 5 / Table 7 row order.
pub const OPAQUE_SETTINGS: [Setting; 3] =
    [Setting::Names, Setting::NamesDesc, Setting::NamesParams];

/// Play2Prompt's exploration budget in the hardest setting as the paper states it (~1.7M
/// tokens). Not in the release: the token ratios divide this paper number by ToolObserver's
/// released usage.
pub const PAPER_P2P_BUDGET: u64 = 1_700_000;

/// Errors of this module; each names the file it is about.
#[derive(Debug, thiserror::Error)]
pub enum ChecksError {
    /// Reading the release through [`super::released`] failed.
    #[error(transparent)]
    Released(#[from] ReleasedError),
    /// Reading a file or directory failed.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file is not in the released format.
    #[error("{path}: {message}")]
    Malformed {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        message: String,
    },
    /// The root holds no ToolObserver chain.
    #[error(
        "{0}: no ToolObserver chain (tool_observer/<config>/<agent>/improvements/<editor>/v<N>/)"
    )]
    NoChains(PathBuf),
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ChecksError + '_ {
    move |source| ChecksError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn malformed(path: &Path, message: impl Into<String>) -> ChecksError {
    ChecksError::Malformed {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

fn read_json(path: &Path) -> Result<Value, ChecksError> {
    let text = fs::read_to_string(path).map_err(io_err(path))?;
    serde_json::from_str(&text).map_err(|e| malformed(path, format!("invalid JSON: {e}")))
}

fn sorted_subdirs(path: &Path) -> Result<Vec<(String, PathBuf)>, ChecksError> {
    let mut out = Vec::new();
    for entry in fs::read_dir(path).map_err(io_err(path))? {
        let p = entry.map_err(io_err(path))?.path();
        if p.is_dir() {
            if let Some(name) = p.file_name().and_then(|n| n.to_str()) {
                out.push((name.to_string(), p.clone()));
            }
        }
    }
    out.sort();
    Ok(out)
}

/// The run directories of one method: (category, setting, generation hypers, directory)
/// for every `<config>/<gen_hypers>/` whose config name is a known setting.
fn run_dirs(method_dir: &Path) -> Result<Vec<(Category, Setting, String, PathBuf)>, ChecksError> {
    let mut out = Vec::new();
    for (config, config_dir) in sorted_subdirs(method_dir)? {
        let Some((category, suffix)) = split_config(&config) else {
            continue;
        };
        let Some(setting) = Setting::from_reference_suffix(suffix) else {
            continue;
        };
        for (gen_hypers, gen_dir) in sorted_subdirs(&config_dir)? {
            out.push((category, setting, gen_hypers, gen_dir));
        }
    }
    Ok(out)
}

/// The model of a hypers directory name: the part before the first `_`
/// (`gpt5_medium_req_...` -> `gpt5`, `gpt5mini_...` -> `gpt5mini`).
pub fn model_of(hypers: &str) -> &str {
    hypers.split('_').next().unwrap_or(hypers)
}

/// The paper's column/row label of a model short name.
pub fn model_label(model: &str) -> String {
    match model {
        "gpt5" => "GPT-5".to_string(),
        "gpt5mini" => "GPT-5-mini".to_string(),
        other => other.to_string(),
    }
}

/// Two-decimal equality the way a printed table rounds (half away from zero on the value).
pub fn matches_print(value: f64, printed: f64) -> bool {
    (value * 100.0).round() == (printed * 100.0).round()
}

// ---------------------------------------------------------------------------------------
// Chains
// ---------------------------------------------------------------------------------------

/// One ToolObserver chain: a (setting, category, agent hypers, editor hypers) with its
/// version directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// Documentation setting.
    pub setting: Setting,
    /// Category.
    pub category: Category,
    /// Agent generation hypers directory, e.g. `gpt5_medium_req_8192_must_call_tool_seed0`.
    pub gen_hypers: String,
    /// Editor hypers directory, e.g. `gpt5_medium_basic_improved_8192`.
    pub edit_hypers: String,
    /// `<root>/tool_observer/<config>/<gen_hypers>`.
    pub gen_dir: PathBuf,
    /// Version numbers N of `improvements/<edit_hypers>/v{N}`, ascending.
    pub versions: Vec<u32>,
}

impl Chain {
    /// Agent model short name (`gpt5`, `gpt5mini`).
    pub fn agent(&self) -> &str {
        model_of(&self.gen_hypers)
    }

    /// Editor model short name.
    pub fn editor(&self) -> &str {
        model_of(&self.edit_hypers)
    }

    /// The directory of version `v` (0 is the generation directory itself).
    pub fn version_dir(&self, v: u32) -> PathBuf {
        if v == 0 {
            self.gen_dir.clone()
        } else {
            self.gen_dir
                .join("improvements")
                .join(&self.edit_hypers)
                .join(format!("v{v}"))
        }
    }

    /// The scored file of version `v`, if released.
    fn scored_path(&self, v: u32) -> Option<PathBuf> {
        let p = if v == 0 {
            self.gen_dir.join("v0_scored.json")
        } else {
            self.version_dir(v).join("scored.json")
        };
        p.is_file().then_some(p)
    }
}

/// Lists every ToolObserver chain under `root` (gold chains included), sorted by agent,
/// editor, setting, category.
pub fn discover_chains(root: &Path) -> Result<Vec<Chain>, ChecksError> {
    let method_dir = root.join(TOOL_OBSERVER);
    if !method_dir.is_dir() {
        return Err(ChecksError::NoChains(root.to_path_buf()));
    }
    let mut chains = Vec::new();
    for (category, setting, gen_hypers, gen_dir) in run_dirs(&method_dir)? {
        let improvements = gen_dir.join("improvements");
        if !improvements.is_dir() {
            continue;
        }
        for (edit_hypers, edit_dir) in sorted_subdirs(&improvements)? {
            let mut versions: Vec<u32> = sorted_subdirs(&edit_dir)?
                .into_iter()
                .filter_map(|(name, _)| name.strip_prefix('v')?.parse().ok())
                .filter(|&v| v > 0)
                .collect();
            versions.sort_unstable();
            if versions.is_empty() {
                continue;
            }
            chains.push(Chain {
                setting,
                category,
                gen_hypers: gen_hypers.clone(),
                edit_hypers,
                gen_dir: gen_dir.clone(),
                versions,
            });
        }
    }
    if chains.is_empty() {
        return Err(ChecksError::NoChains(root.to_path_buf()));
    }
    let order = |s: Setting| Setting::ALL.iter().position(|&x| x == s);
    chains.sort_by(|a, b| {
        (a.agent(), a.editor(), order(a.setting), a.category as u8).cmp(&(
            b.agent(),
            b.editor(),
            order(b.setting),
            b.category as u8,
        ))
    });
    Ok(chains)
}

// ---------------------------------------------------------------------------------------
// Table 5: rounds to convergence
// ---------------------------------------------------------------------------------------

/// Per instance of a chain: when it converged and how often the editor changed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstanceRounds {
    /// Test index.
    pub index: usize,
    /// The round N whose `converged_tests.json` first lists it (`None`: never).
    pub first_listed: Option<u32>,
    /// The last editor round that changed one of its tools (`improvement_reasoning.json`,
    /// any `functions_updated[].changed`); 0 if none did.
    pub last_changed: u32,
    /// How many editor rounds changed one of its tools.
    pub changed_rounds: u32,
}

/// The convergence record of one chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainRounds {
    /// Setting.
    pub setting: Setting,
    /// Category.
    pub category: Category,
    /// Agent short name.
    pub agent: String,
    /// Editor short name.
    pub editor: String,
    /// The last version directory of the chain.
    pub last_version: u32,
    /// One entry per instance, by index.
    pub instances: Vec<InstanceRounds>,
}

/// Reads `converged_tests.json` and `improvement_reasoning.json` of every version of a
/// chain. The instance count is `total_tests` of the convergence files (the category's
/// size when none says).
pub fn chain_rounds(chain: &Chain) -> Result<ChainRounds, ChecksError> {
    let mut first_listed: BTreeMap<usize, u32> = BTreeMap::new();
    let mut last_changed: BTreeMap<usize, u32> = BTreeMap::new();
    let mut changed_rounds: BTreeMap<usize, u32> = BTreeMap::new();
    let mut total = None;
    for &v in &chain.versions {
        let dir = chain.version_dir(v);
        let conv = dir.join("converged_tests.json");
        if conv.is_file() {
            let doc = read_json(&conv)?;
            let list = doc
                .get("converged_tests")
                .and_then(Value::as_array)
                .ok_or_else(|| malformed(&conv, "no `converged_tests` list"))?;
            for i in list {
                let i = i
                    .as_u64()
                    .ok_or_else(|| malformed(&conv, "a converged test is not an index"))?;
                first_listed.entry(i as usize).or_insert(v);
            }
            if let Some(t) = doc.get("total_tests").and_then(Value::as_u64) {
                total = Some(total.map_or(t, |x: u64| x.max(t)));
            }
        }
        let reasoning = dir.join("improvement_reasoning.json");
        if reasoning.is_file() {
            let doc = read_json(&reasoning)?;
            let tests = doc
                .get("test_reasoning")
                .and_then(Value::as_array)
                .ok_or_else(|| malformed(&reasoning, "no `test_reasoning` list"))?;
            for t in tests {
                let i = t
                    .get("test_index")
                    .and_then(Value::as_u64)
                    .ok_or_else(|| malformed(&reasoning, "an entry lacks `test_index`"))?;
                let changed = t
                    .get("functions_updated")
                    .and_then(Value::as_array)
                    .is_some_and(|fs| {
                        fs.iter()
                            .any(|f| f.get("changed").and_then(Value::as_bool) == Some(true))
                    });
                if changed {
                    last_changed.insert(i as usize, v);
                    *changed_rounds.entry(i as usize).or_default() += 1;
                }
            }
        }
    }
    let n = total.map_or(chain.category.expected_len(), |t| t as usize);
    let instances = (0..n)
        .map(|index| InstanceRounds {
            index,
            first_listed: first_listed.get(&index).copied(),
            last_changed: last_changed.get(&index).copied().unwrap_or(0),
            changed_rounds: changed_rounds.get(&index).copied().unwrap_or(0),
        })
        .collect();
    Ok(ChainRounds {
        setting: chain.setting,
        category: chain.category,
        agent: chain.agent().to_string(),
        editor: chain.editor().to_string(),
        last_version: chain.versions.last().copied().unwrap_or(0),
        instances,
    })
}

/// A definition of "reflection rounds to convergence" of one instance.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoundsDef {
    /// The round N whose `converged_tests.json` first lists the instance (editor rounds
    /// including the one that changed nothing); never listed counts as the chain's last
    /// version.
    FirstListed,
    /// As [`RoundsDef::FirstListed`], never-listed instances left out.
    FirstListedExcludingNever,
    /// [`RoundsDef::FirstListed`] + 1: the Base run (round 0) counted as a round.
    FirstListedPlusRoundZero,
    /// The last editor round that changed the instance's tools (0 if none).
    LastChanged,
    /// The number of editor rounds that changed the instance's tools.
    ChangedRounds,
}

impl RoundsDef {
    /// Every definition, in report order.
    pub const ALL: [RoundsDef; 5] = [
        RoundsDef::FirstListed,
        RoundsDef::FirstListedExcludingNever,
        RoundsDef::FirstListedPlusRoundZero,
        RoundsDef::LastChanged,
        RoundsDef::ChangedRounds,
    ];

    /// Short label.
    pub fn label(self) -> &'static str {
        match self {
            RoundsDef::FirstListed => "first listed converged (never = last round)",
            RoundsDef::FirstListedExcludingNever => "first listed converged (never excluded)",
            RoundsDef::FirstListedPlusRoundZero => "first listed converged + round 0",
            RoundsDef::LastChanged => "last round that changed it",
            RoundsDef::ChangedRounds => "rounds that changed it",
        }
    }

    fn value(self, inst: &InstanceRounds, last_version: u32) -> Option<u32> {
        match self {
            RoundsDef::FirstListed => Some(inst.first_listed.unwrap_or(last_version)),
            RoundsDef::FirstListedExcludingNever => inst.first_listed,
            RoundsDef::FirstListedPlusRoundZero => {
                Some(inst.first_listed.unwrap_or(last_version) + 1)
            }
            RoundsDef::LastChanged => Some(inst.last_changed),
            RoundsDef::ChangedRounds => Some(inst.changed_rounds),
        }
    }
}

/// How the two categories of a setting are combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// `exec_simple` only.
    Simple,
    /// `exec_multiple` only.
    Multiple,
    /// Instances of both categories pooled (100 + 50).
    Pooled,
    /// The unweighted mean of the two category means.
    CategoryMean,
}

impl Aggregate {
    /// Every aggregate, in report order.
    pub const ALL: [Aggregate; 4] = [
        Aggregate::Pooled,
        Aggregate::CategoryMean,
        Aggregate::Simple,
        Aggregate::Multiple,
    ];

    /// Short label.
    pub fn label(self) -> &'static str {
        match self {
            Aggregate::Simple => "simple",
            Aggregate::Multiple => "multiple",
            Aggregate::Pooled => "pooled",
            Aggregate::CategoryMean => "mean of categories",
        }
    }
}

/// Sum and count of a definition over one chain.
fn sum_count(c: &ChainRounds, def: RoundsDef) -> (u64, usize) {
    c.instances
        .iter()
        .filter_map(|i| def.value(i, c.last_version))
        .fold((0, 0), |(s, n), v| (s + u64::from(v), n + 1))
}

/// The mean of a definition over the chains of one (agent, editor, setting), combined as
/// `agg`; `None` when a needed category is missing or empty.
pub fn mean_rounds(chains: &[&ChainRounds], def: RoundsDef, agg: Aggregate) -> Option<f64> {
    let of = |cat: Category| {
        let (s, n) = sum_count(chains.iter().find(|c| c.category == cat)?, def);
        (n > 0).then_some((s, n))
    };
    let mean = |(s, n): (u64, usize)| s as f64 / n as f64;
    match agg {
        Aggregate::Simple => of(Category::Simple).map(mean),
        Aggregate::Multiple => of(Category::Multiple).map(mean),
        Aggregate::Pooled => {
            let (a, b) = (of(Category::Simple)?, of(Category::Multiple)?);
            Some(mean((a.0 + b.0, a.1 + b.1)))
        }
        Aggregate::CategoryMean => {
            Some((mean(of(Category::Simple)?) + mean(of(Category::Multiple)?)) / 2.0)
        }
    }
}

/// Table 5 as printed: (setting, agent short name, value).
pub const TABLE5_PRINTED: [(Setting, &str, f64); 6] = [
    (Setting::Names, "gpt5", 3.44),
    (Setting::NamesDesc, "gpt5", 2.66),
    (Setting::NamesParams, "gpt5", 2.22),
    (Setting::Names, "gpt5mini", 2.96),
    (Setting::NamesDesc, "gpt5mini", 2.60),
    (Setting::NamesParams, "gpt5mini", 2.24),
];

fn printed5(setting: Setting, agent: &str) -> Option<f64> {
    TABLE5_PRINTED
        .iter()
        .find(|(s, a, _)| *s == setting && *a == agent)
        .map(|t| t.2)
}

/// One (agent, editor, definition, aggregate) row of the Table 5 check.
#[derive(Debug, Clone, PartialEq)]
pub struct Table5Row {
    /// Agent short name.
    pub agent: String,
    /// Editor short name.
    pub editor: String,
    /// The definition.
    pub def: RoundsDef,
    /// The combination of categories.
    pub agg: Aggregate,
    /// Values for names / names+desc / names+params ([`OPAQUE_SETTINGS`] order).
    pub values: [Option<f64>; 3],
    /// Per setting: whether the value equals the print to 2 decimals.
    pub cell_matches: [bool; 3],
    /// All three settings match the print.
    pub matches: bool,
}

/// The Table 5 check: the per-chain records and every (definition, aggregate) tried.
#[derive(Debug, Clone, PartialEq)]
pub struct Table5Check {
    /// Every chain's record (gold chains included).
    pub chains: Vec<ChainRounds>,
    /// Every definition x aggregate, per (agent, editor) present.
    pub rows: Vec<Table5Row>,
}

impl Table5Check {
    /// The value of one definition/aggregate for (agent, setting), first editor found.
    pub fn value(
        &self,
        agent: &str,
        setting: Setting,
        def: RoundsDef,
        agg: Aggregate,
    ) -> Option<f64> {
        let k = OPAQUE_SETTINGS.iter().position(|&s| s == setting)?;
        self.rows
            .iter()
            .find(|r| r.agent == agent && r.def == def && r.agg == agg)
            .and_then(|r| r.values[k])
    }

    /// The rows that reproduce the print for all three settings.
    pub fn matching(&self) -> impl Iterator<Item = &Table5Row> {
        self.rows.iter().filter(|r| r.matches)
    }
}

/// Computes the Table 5 check over the release at `root`.
pub fn table5(root: &Path) -> Result<Table5Check, ChecksError> {
    let chains = discover_chains(root)?
        .iter()
        .map(chain_rounds)
        .collect::<Result<Vec<_>, _>>()?;
    let pairs: BTreeSet<(String, String)> = chains
        .iter()
        .map(|c| (c.agent.clone(), c.editor.clone()))
        .collect();
    let mut rows = Vec::new();
    for (agent, editor) in &pairs {
        for def in RoundsDef::ALL {
            for agg in Aggregate::ALL {
                let mut values = [None; 3];
                let mut cell_matches = [false; 3];
                for (k, &setting) in OPAQUE_SETTINGS.iter().enumerate() {
                    let of: Vec<&ChainRounds> = chains
                        .iter()
                        .filter(|c| {
                            &c.agent == agent && &c.editor == editor && c.setting == setting
                        })
                        .collect();
                    values[k] = mean_rounds(&of, def, agg);
                    cell_matches[k] = matches!(
                        (values[k], printed5(setting, agent)),
                        (Some(v), Some(p)) if matches_print(v, p)
                    );
                }
                rows.push(Table5Row {
                    agent: agent.clone(),
                    editor: editor.clone(),
                    def,
                    agg,
                    values,
                    cell_matches,
                    matches: cell_matches.iter().all(|&m| m),
                });
            }
        }
    }
    Ok(Table5Check { chains, rows })
}

fn fmt_opt(v: Option<f64>, matched: bool) -> String {
    match v {
        Some(v) if matched => format!("**{v:.2}**"),
        Some(v) => format!("{v:.2}"),
        None => "-".to_string(),
    }
}

fn fmt_printed(p: Option<f64>) -> String {
    p.map_or_else(|| "-".to_string(), |p| format!("{p:.2}"))
}

/// Markdown for the Table 5 check: one line per (agent, definition, aggregate); values
/// equal to the print (2 decimals) in bold.
pub fn render_table5(check: &Table5Check) -> String {
    let mut out = String::from(
        "Table 5 (mean reflection rounds to convergence) from the released converged_tests.json / \
         improvement_reasoning.json; round N = editor round writing v{N}; bold = equals the print.\n\n\
         | Agent | Editor | Definition | Categories | Names | + Desc. | + Param. | matches print |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    let mut agents: Vec<&str> = check.rows.iter().map(|r| r.agent.as_str()).collect();
    agents.dedup();
    for agent in agents {
        let p = |s| fmt_printed(printed5(s, agent));
        let _ = writeln!(
            out,
            "| {} | - | printed | - | {} | {} | {} | - |",
            model_label(agent),
            p(Setting::Names),
            p(Setting::NamesDesc),
            p(Setting::NamesParams)
        );
        for r in check.rows.iter().filter(|r| r.agent == agent) {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} |",
                model_label(&r.agent),
                model_label(&r.editor),
                r.def.label(),
                r.agg.label(),
                fmt_opt(r.values[0], r.cell_matches[0]),
                fmt_opt(r.values[1], r.cell_matches[1]),
                fmt_opt(r.values[2], r.cell_matches[2]),
                if r.matches { "yes" } else { "no" }
            );
        }
    }
    out
}

// ---------------------------------------------------------------------------------------
// Token claim
// ---------------------------------------------------------------------------------------

/// One `token_usage_*.json` file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TokenUsage {
    /// `prompt_tokens`.
    pub prompt: u64,
    /// `completion_tokens`.
    pub completion: u64,
    /// `total_tokens`.
    pub total: u64,
    /// `num_requests` (absent in the zero-usage files of a round with nothing to run).
    pub requests: Option<u64>,
}

impl std::ops::AddAssign for TokenUsage {
    fn add_assign(&mut self, o: TokenUsage) {
        self.prompt += o.prompt;
        self.completion += o.completion;
        self.total += o.total;
        self.requests = match (self.requests, o.requests) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) => a.or(b),
        };
    }
}

/// Reads a token-usage file; `None` when it does not exist.
pub fn read_token_usage(path: &Path) -> Result<Option<TokenUsage>, ChecksError> {
    if !path.is_file() {
        return Ok(None);
    }
    let doc = read_json(path)?;
    let field = |k: &str| doc.get(k).and_then(Value::as_u64);
    let total = field("total_tokens").ok_or_else(|| malformed(path, "no `total_tokens`"))?;
    Ok(Some(TokenUsage {
        prompt: field("prompt_tokens").unwrap_or(0),
        completion: field("completion_tokens").unwrap_or(0),
        total,
        requests: field("num_requests"),
    }))
}

/// ToolObserver's released token usage for one chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainTokens {
    /// Setting.
    pub setting: Setting,
    /// Category.
    pub category: Category,
    /// Agent short name.
    pub agent: String,
    /// Editor short name.
    pub editor: String,
    /// The Base run (`v0_token_usage_generation.json`): the agent with the opaque docs.
    pub agent_v0: TokenUsage,
    /// The agent re-runs of rounds 1..N (`v{N}/token_usage_generation.json`).
    pub agent_rounds: TokenUsage,
    /// The agent tokens of the last round that ran the agent (the run with the final docs).
    pub agent_last_run: u64,
    /// The editor, all rounds (`v{N}/token_usage_descriptions.json`).
    pub editor_usage: TokenUsage,
}

impl ChainTokens {
    /// Agent tokens, Base run plus every round.
    pub fn agent_all(&self) -> u64 {
        self.agent_v0.total + self.agent_rounds.total
    }

    /// Agent tokens without the last agent run (the final-docs run is evaluation).
    pub fn agent_before_last(&self) -> u64 {
        self.agent_all() - self.agent_last_run
    }

    /// Agent plus editor tokens.
    pub fn all(&self) -> u64 {
        self.agent_all() + self.editor_usage.total
    }
}

/// Reads the token usage of one chain.
pub fn chain_tokens(chain: &Chain) -> Result<ChainTokens, ChecksError> {
    let agent_v0 = read_token_usage(&chain.gen_dir.join("v0_token_usage_generation.json"))?
        .unwrap_or_default();
    let mut agent_rounds = TokenUsage::default();
    let mut editor_usage = TokenUsage::default();
    let mut agent_last_run = 0;
    for &v in &chain.versions {
        let dir = chain.version_dir(v);
        if let Some(u) = read_token_usage(&dir.join("token_usage_generation.json"))? {
            if u.total > 0 {
                agent_last_run = u.total;
            }
            agent_rounds += u;
        }
        if let Some(u) = read_token_usage(&dir.join("token_usage_descriptions.json"))? {
            editor_usage += u;
        }
    }
    if agent_last_run == 0 {
        agent_last_run = agent_v0.total;
    }
    Ok(ChainTokens {
        setting: chain.setting,
        category: chain.category,
        agent: chain.agent().to_string(),
        editor: chain.editor().to_string(),
        agent_v0,
        agent_rounds,
        agent_last_run,
        editor_usage,
    })
}

/// A baseline's released usage: only its evaluation run (`v0_token_usage_generation.json`,
/// the agent answering with the baseline's learned docs).
#[derive(Debug, Clone, PartialEq)]
pub struct BaselineTokens {
    /// `play2prompt` or `easytool`.
    pub method: String,
    /// Setting.
    pub setting: Setting,
    /// Category.
    pub category: Category,
    /// Agent short name.
    pub agent: String,
    /// The evaluation run's usage.
    pub eval: TokenUsage,
}

/// What a ratio divides [`PAPER_P2P_BUDGET`] by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RatioBasis {
    /// ToolObserver's agent tokens, Base run plus every round.
    AgentAll,
    /// ToolObserver's agent tokens without the last (final-docs) run.
    AgentBeforeLast,
    /// ToolObserver's agent plus editor tokens.
    AgentAndEditor,
}

impl RatioBasis {
    /// Every basis, in report order.
    pub const ALL: [RatioBasis; 3] = [
        RatioBasis::AgentAll,
        RatioBasis::AgentBeforeLast,
        RatioBasis::AgentAndEditor,
    ];

    /// Short label.
    pub fn label(self) -> &'static str {
        match self {
            RatioBasis::AgentAll => "P2P 1.7M / TO agent (all)",
            RatioBasis::AgentBeforeLast => "P2P 1.7M / TO agent (before last run)",
            RatioBasis::AgentAndEditor => "P2P 1.7M / TO agent+editor",
        }
    }

    /// The ToolObserver tokens this basis counts.
    pub fn tokens(self, t: &ChainTokens) -> u64 {
        match self {
            RatioBasis::AgentAll => t.agent_all(),
            RatioBasis::AgentBeforeLast => t.agent_before_last(),
            RatioBasis::AgentAndEditor => t.all(),
        }
    }

    /// [`PAPER_P2P_BUDGET`] over this basis (`None` for zero tokens).
    pub fn ratio(self, t: &ChainTokens) -> Option<f64> {
        let d = self.tokens(t);
        (d > 0).then(|| PAPER_P2P_BUDGET as f64 / d as f64)
    }
}

/// The token check: ToolObserver per chain, baselines per run.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenCheck {
    /// ToolObserver, per chain (gold chains included).
    pub tool_observer: Vec<ChainTokens>,
    /// Play2Prompt and EasyTool evaluation runs.
    pub baselines: Vec<BaselineTokens>,
}

impl TokenCheck {
    /// The chain of (agent, setting, category), first editor found.
    pub fn chain(&self, agent: &str, setting: Setting, category: Category) -> Option<&ChainTokens> {
        self.tool_observer
            .iter()
            .find(|t| t.agent == agent && t.setting == setting && t.category == category)
    }

    /// A baseline run's evaluation usage.
    pub fn baseline(
        &self,
        method: &str,
        agent: &str,
        setting: Setting,
        category: Category,
    ) -> Option<&BaselineTokens> {
        self.baselines.iter().find(|b| {
            b.method == method && b.agent == agent && b.setting == setting && b.category == category
        })
    }
}

/// Computes the token check over the release at `root`.
pub fn tokens(root: &Path) -> Result<TokenCheck, ChecksError> {
    let tool_observer = discover_chains(root)?
        .iter()
        .map(chain_tokens)
        .collect::<Result<Vec<_>, _>>()?;
    let mut baselines = Vec::new();
    for method in ["play2prompt", "easytool"] {
        let dir = root.join(method);
        if !dir.is_dir() {
            continue;
        }
        for (category, setting, gen_hypers, gen_dir) in run_dirs(&dir)? {
            if let Some(eval) = read_token_usage(&gen_dir.join("v0_token_usage_generation.json"))? {
                baselines.push(BaselineTokens {
                    method: method.to_string(),
                    setting,
                    category,
                    agent: model_of(&gen_hypers).to_string(),
                    eval,
                });
            }
        }
    }
    Ok(TokenCheck {
        tool_observer,
        baselines,
    })
}

/// Markdown for the token check: per chain of an opaque setting, ToolObserver's agent and
/// editor tokens, the baselines' evaluation tokens, and the labelled ratios.
pub fn render_tokens(check: &TokenCheck) -> String {
    let mut out = String::from(
        "Token claim: TO agent = Base run + agent re-runs of every round (token_usage_generation), \
         TO editor = token_usage_descriptions of every round; P2P/ET = their released evaluation run only \
         (the cost of learning their docs is not released); ratios divide the paper's P2P budget (1.7M) by TO's tokens.\n\n\
         | Agent | Setting | Category | TO agent (all) | TO agent (before last run) | TO editor | TO agent+editor | P2P eval | ET eval |",
    );
    for b in RatioBasis::ALL {
        let _ = write!(out, " {} |", b.label());
    }
    out.push_str("\n|---|---|---|---|---|---|---|---|---|");
    out.push_str(&"---|".repeat(RatioBasis::ALL.len()));
    out.push('\n');
    for t in check
        .tool_observer
        .iter()
        .filter(|t| OPAQUE_SETTINGS.contains(&t.setting))
    {
        let base = |m| {
            check
                .baseline(m, &t.agent, t.setting, t.category)
                .map_or_else(|| "-".to_string(), |b| b.eval.total.to_string())
        };
        let _ = write!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            model_label(&t.agent),
            t.setting.as_str(),
            t.category.as_str(),
            t.agent_all(),
            t.agent_before_last(),
            t.editor_usage.total,
            t.all(),
            base("play2prompt"),
            base("easytool"),
        );
        for b in RatioBasis::ALL {
            let _ = write!(
                out,
                " {} |",
                b.ratio(t)
                    .map_or_else(|| "-".to_string(), |r| format!("{r:.2}x"))
            );
        }
        out.push('\n');
    }
    out
}

// ---------------------------------------------------------------------------------------
// Table 7: editor ablation
// ---------------------------------------------------------------------------------------

/// Table 7 as printed: (agent, editor, E).
pub const TABLE7_PRINTED: [(&str, &str, f64); 6] = [
    ("gpt5", "gpt5", 0.64),
    ("gpt5", "gpt5mini", 0.62),
    ("gpt5", "o3", 0.60),
    ("gpt5mini", "gpt5", 0.62),
    ("gpt5mini", "gpt5mini", 0.54),
    ("gpt5mini", "o3", 0.48),
];

/// The printed Table 7 value of an (agent, editor) pair.
pub fn table7_printed(agent: &str, editor: &str) -> Option<f64> {
    TABLE7_PRINTED
        .iter()
        .find(|(a, e, _)| *a == agent && *e == editor)
        .map(|t| t.2)
}

/// One Table 7 cell candidate: E of ToolObserver's last scored version, for one
/// (agent, editor) and a setting and category scope.
#[derive(Debug, Clone, PartialEq)]
pub struct Table7Cell {
    /// Agent short name.
    pub agent: String,
    /// Editor short name.
    pub editor: String,
    /// `None`: pooled over the three opaque settings.
    pub setting: Option<Setting>,
    /// `None`: both categories pooled.
    pub category: Option<Category>,
    /// Correct instances (released verdicts of the last scored version).
    pub correct: usize,
    /// Instances.
    pub n: usize,
    /// E by version (0 = Base run), from the released verdicts; only for one category.
    pub e_by_version: Vec<(u32, f64)>,
    /// The print for this (agent, editor).
    pub printed: Option<f64>,
}

impl Table7Cell {
    /// E = correct / n.
    pub fn e(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.correct as f64 / self.n as f64
        }
    }

    /// Whether E equals the print to 2 decimals.
    pub fn matches(&self) -> bool {
        self.printed.is_some_and(|p| matches_print(self.e(), p))
    }
}

/// The Table 7 check: every (agent, editor) pair present, per setting x category,
/// per setting, and pooled.
#[derive(Debug, Clone, PartialEq)]
pub struct Table7Check {
    /// The cells, per pair: setting x category first, then setting pools, then the pool.
    pub cells: Vec<Table7Cell>,
}

impl Table7Check {
    /// The cell of (agent, editor, setting, category).
    pub fn cell(
        &self,
        agent: &str,
        editor: &str,
        setting: Option<Setting>,
        category: Option<Category>,
    ) -> Option<&Table7Cell> {
        self.cells.iter().find(|c| {
            c.agent == agent && c.editor == editor && c.setting == setting && c.category == category
        })
    }
}

fn count_valid(path: &Path) -> Result<(usize, usize), ChecksError> {
    let verdicts = read_scored(path)?;
    Ok((
        verdicts.values().filter(|v| v.valid).count(),
        verdicts.len(),
    ))
}

/// Computes the Table 7 check from the released `scored.json` verdicts (which the
/// re-scorer of [`super::released`] reproduces for the GPT-5 runs).
pub fn table7(root: &Path) -> Result<Table7Check, ChecksError> {
    let chains = discover_chains(root)?;
    let mut leaves = Vec::new();
    for chain in chains
        .iter()
        .filter(|c| OPAQUE_SETTINGS.contains(&c.setting))
    {
        let mut e_by_version = Vec::new();
        let mut last = None;
        for v in std::iter::once(0).chain(chain.versions.iter().copied()) {
            if let Some(p) = chain.scored_path(v) {
                let (correct, n) = count_valid(&p)?;
                e_by_version.push((
                    v,
                    if n == 0 {
                        0.0
                    } else {
                        correct as f64 / n as f64
                    },
                ));
                last = Some((correct, n));
            }
        }
        let Some((correct, n)) = last else {
            continue;
        };
        leaves.push(Table7Cell {
            agent: chain.agent().to_string(),
            editor: chain.editor().to_string(),
            setting: Some(chain.setting),
            category: Some(chain.category),
            correct,
            n,
            e_by_version,
            printed: table7_printed(chain.agent(), chain.editor()),
        });
    }
    let pairs: BTreeSet<(String, String)> = leaves
        .iter()
        .map(|c| (c.agent.clone(), c.editor.clone()))
        .collect();
    let mut cells = Vec::new();
    for (agent, editor) in pairs {
        let of_pair: Vec<&Table7Cell> = leaves
            .iter()
            .filter(|c| c.agent == agent && c.editor == editor)
            .collect();
        let pool = |setting: Option<Setting>| {
            let (correct, n) = of_pair
                .iter()
                .filter(|c| setting.is_none() || c.setting == setting)
                .fold((0, 0), |(k, n), c| (k + c.correct, n + c.n));
            Table7Cell {
                agent: agent.clone(),
                editor: editor.clone(),
                setting,
                category: None,
                correct,
                n,
                e_by_version: Vec::new(),
                printed: table7_printed(&agent, &editor),
            }
        };
        cells.extend(of_pair.iter().map(|&c| c.clone()));
        cells.extend(OPAQUE_SETTINGS.iter().map(|&s| pool(Some(s))));
        cells.push(pool(None));
    }
    Ok(Table7Check { cells })
}

/// Markdown for the Table 7 check.
pub fn render_table7(check: &Table7Check) -> String {
    let mut out = String::from(
        "Table 7 (editor ablation, E) from the released scored.json of ToolObserver's last scored version; \
         `all` pools instances (100 simple + 50 multiple per setting); bold = equals the print.\n\n\
         | Agent | Editor | Setting | Category | E | correct/n | printed | E by round |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for c in &check.cells {
        let rounds = c
            .e_by_version
            .iter()
            .map(|(v, e)| format!("v{v} {e:.2}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {}/{} | {} | {} |",
            model_label(&c.agent),
            model_label(&c.editor),
            c.setting.map_or("all", |s| s.as_str()),
            c.category.map_or("all", |k| k.as_str()),
            fmt_opt(Some(c.e()), c.matches()),
            c.correct,
            c.n,
            fmt_printed(c.printed),
            if rounds.is_empty() {
                "-".to_string()
            } else {
                rounds
            },
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A scratch directory removed on drop.
    struct Scratch(PathBuf);

    impl Scratch {
        fn new() -> Scratch {
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "released_checks_{}_{}",
                std::process::id(),
                N.fetch_add(1, Ordering::SeqCst)
            ));
            let _ = fs::remove_dir_all(&p);
            fs::create_dir_all(&p).unwrap();
            Scratch(p)
        }
    }

    impl Drop for Scratch {
        fn drop(&mut self) {
            let _ = fs::remove_dir_all(&self.0);
        }
    }

    fn write(path: &Path, v: &Value) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, v.to_string()).unwrap();
    }

    fn scored(valid: &[bool]) -> Value {
        let evals: Vec<Value> = valid
            .iter()
            .enumerate()
            .map(|(i, &ok)| {
                json!({"index": i, "valid": ok, "parameter_metrics": {"accuracy": 1.0},
                       "ast_metrics": {"score": 1.0}})
            })
            .collect();
        json!({ "detailed_evaluations": evals })
    }

    fn usage(total: u64) -> Value {
        json!({"prompt_tokens": 1, "completion_tokens": total - 1, "total_tokens": total, "num_requests": 2})
    }

    /// A 4-instance simple chain and a 2-instance multiple chain, setting `names`, agent
    /// gpt5, editor gpt5. Simple: instances 0,1 converge at round 2, 2 at round 3, 3 never
    /// (chain ends at v3). Multiple: both converge at round 2.
    fn release(root: &Path) {
        let names = Setting::Names.reference_suffix();
        let chain = |cat: Category| {
            root.join(TOOL_OBSERVER)
                .join(format!("{}_{names}", cat.reference_name()))
                .join("gpt5_medium_req")
        };
        let s = chain(Category::Simple);
        write(&s.join("v0_token_usage_generation.json"), &usage(100));
        write(&s.join("v0_scored.json"), &scored(&[false; 4]));
        let v = |n: u32| {
            s.join("improvements/gpt5_medium_edit")
                .join(format!("v{n}"))
        };
        let changed = |i: u64, c: bool| json!({"test_index": i, "functions_updated": [{"function_name": "function_1", "changed": c}]});
        write(
            &v(1).join("improvement_reasoning.json"),
            &json!({"test_reasoning": [changed(0, true), changed(1, true), changed(2, true), changed(3, true)]}),
        );
        write(&v(1).join("token_usage_descriptions.json"), &usage(40));
        write(&v(1).join("token_usage_generation.json"), &usage(30));
        write(
            &v(1).join("scored.json"),
            &scored(&[true, false, false, false]),
        );
        write(
            &v(2).join("converged_tests.json"),
            &json!({"converged_tests": [0, 1], "total_tests": 4}),
        );
        write(
            &v(2).join("improvement_reasoning.json"),
            &json!({"test_reasoning": [changed(0, false), changed(1, false), changed(2, true), changed(3, true)]}),
        );
        write(&v(2).join("token_usage_descriptions.json"), &usage(20));
        write(&v(2).join("token_usage_generation.json"), &usage(10));
        write(
            &v(2).join("scored.json"),
            &scored(&[true, true, false, false]),
        );
        write(
            &v(3).join("converged_tests.json"),
            &json!({"converged_tests": [0, 1, 2], "total_tests": 4}),
        );
        write(&v(3).join("token_usage_descriptions.json"), &usage(5));
        write(
            &v(3).join("token_usage_generation.json"),
            &json!({"total_tokens": 0, "prompt_tokens": 0, "completion_tokens": 0}),
        );

        let m = chain(Category::Multiple);
        write(&m.join("v0_token_usage_generation.json"), &usage(50));
        let w = |n: u32| {
            m.join("improvements/gpt5_medium_edit")
                .join(format!("v{n}"))
        };
        write(&w(1).join("scored.json"), &scored(&[true, true]));
        write(
            &w(2).join("converged_tests.json"),
            &json!({"converged_tests": [1, 0], "total_tests": 2}),
        );
        let p2p = root
            .join("play2prompt")
            .join(format!("{}_{names}", Category::Multiple.reference_name()))
            .join("gpt5_medium_req");
        write(&p2p.join("v0_token_usage_generation.json"), &usage(77));
    }

    #[test]
    fn model_names_and_rounding() {
        assert_eq!(model_of("gpt5mini_medium_req"), "gpt5mini");
        assert_eq!(model_of("o3"), "o3");
        assert_eq!(model_label("gpt5"), "GPT-5");
        assert!(matches_print(2.2199999, 2.22));
        assert!(matches_print(3.4449, 3.44));
        assert!(!matches_print(3.4451, 3.44));
        assert!(!matches_print(2.193, 2.22));
    }

    #[test]
    fn table5_definitions_on_a_small_release() {
        let dir = Scratch::new();
        release(&dir.0);
        let check = table5(&dir.0).unwrap();
        let simple = check
            .chains
            .iter()
            .find(|c| c.category == Category::Simple)
            .unwrap();
        assert_eq!(simple.last_version, 3);
        assert_eq!(simple.instances[2].first_listed, Some(3));
        assert_eq!(simple.instances[3].first_listed, None);
        assert_eq!(simple.instances[3].last_changed, 2);
        assert_eq!(simple.instances[3].changed_rounds, 2);
        let v = |def, agg| check.value("gpt5", Setting::Names, def, agg);
        // Simple: 2, 2, 3, never (-> 3) = 10/4; multiple: 2, 2.
        assert_eq!(v(RoundsDef::FirstListed, Aggregate::Simple), Some(2.5));
        assert_eq!(v(RoundsDef::FirstListed, Aggregate::Multiple), Some(2.0));
        assert_eq!(
            v(RoundsDef::FirstListed, Aggregate::Pooled),
            Some(14.0 / 6.0)
        );
        assert_eq!(
            v(RoundsDef::FirstListed, Aggregate::CategoryMean),
            Some(2.25)
        );
        assert_eq!(
            v(RoundsDef::FirstListedExcludingNever, Aggregate::Simple),
            Some(7.0 / 3.0)
        );
        assert_eq!(
            v(RoundsDef::FirstListedPlusRoundZero, Aggregate::Simple),
            Some(3.5)
        );
        // Last changed: 1, 1, 2, 2; changed rounds the same here.
        assert_eq!(v(RoundsDef::LastChanged, Aggregate::Simple), Some(1.5));
        assert_eq!(v(RoundsDef::ChangedRounds, Aggregate::Simple), Some(1.5));
        // Multiple has no reasoning files: nothing changed.
        assert_eq!(v(RoundsDef::LastChanged, Aggregate::Multiple), Some(0.0));
        // Settings without chains stay empty and never match.
        assert_eq!(
            check.value(
                "gpt5",
                Setting::NamesDesc,
                RoundsDef::FirstListed,
                Aggregate::Pooled
            ),
            None
        );
        assert_eq!(check.matching().count(), 0);
        let md = render_table5(&check);
        assert!(
            md.contains("| GPT-5 | - | printed | - | 3.44 | 2.66 | 2.22 | - |"),
            "{md}"
        );
        assert!(md.contains("| GPT-5 | GPT-5 | first listed converged (never = last round) | simple | 2.50 | - | - | no |"), "{md}");
    }

    #[test]
    fn tokens_on_a_small_release() {
        let dir = Scratch::new();
        release(&dir.0);
        let check = tokens(&dir.0).unwrap();
        let t = check
            .chain("gpt5", Setting::Names, Category::Simple)
            .unwrap();
        assert_eq!(t.agent_v0.total, 100);
        assert_eq!(t.agent_rounds.total, 40);
        assert_eq!(t.agent_rounds.requests, Some(4));
        assert_eq!(t.agent_all(), 140);
        // The last round with agent tokens is v2 (v3's file is all zeros).
        assert_eq!(t.agent_last_run, 10);
        assert_eq!(t.agent_before_last(), 130);
        assert_eq!(t.editor_usage.total, 65);
        assert_eq!(t.all(), 205);
        assert_eq!(RatioBasis::AgentAll.ratio(t), Some(1_700_000.0 / 140.0));
        // No round ran the agent: the Base run is the last run.
        let m = check
            .chain("gpt5", Setting::Names, Category::Multiple)
            .unwrap();
        assert_eq!(m.agent_before_last(), 0);
        assert_eq!(RatioBasis::AgentBeforeLast.ratio(m), None);
        let b = check
            .baseline("play2prompt", "gpt5", Setting::Names, Category::Multiple)
            .unwrap();
        assert_eq!(b.eval.total, 77);
        let md = render_tokens(&check);
        assert!(md.contains("| GPT-5 | names | exec_multiple | 50 | 0 | 0 | 50 | 77 | - | 34000.00x | - | 34000.00x |"), "{md}");
    }

    #[test]
    fn table7_on_a_small_release() {
        let dir = Scratch::new();
        release(&dir.0);
        let check = table7(&dir.0).unwrap();
        let s = check
            .cell("gpt5", "gpt5", Some(Setting::Names), Some(Category::Simple))
            .unwrap();
        assert_eq!((s.correct, s.n), (2, 4));
        assert_eq!(s.e_by_version, vec![(0, 0.0), (1, 0.25), (2, 0.5)]);
        assert_eq!(s.printed, Some(0.64));
        assert!(!s.matches());
        let pooled = check.cell("gpt5", "gpt5", None, None).unwrap();
        assert_eq!((pooled.correct, pooled.n), (4, 6));
        let desc = check
            .cell("gpt5", "gpt5", Some(Setting::NamesDesc), None)
            .unwrap();
        assert_eq!(desc.n, 0);
        let md = render_table7(&check);
        assert!(md.contains("| GPT-5 | GPT-5 | names | exec_simple | 0.50 | 2/4 | 0.64 | v0 0.00, v1 0.25, v2 0.50 |"), "{md}");
    }

    #[test]
    fn malformed_files_are_errors() {
        let dir = Scratch::new();
        release(&dir.0);
        let conv = dir
            .0
            .join(TOOL_OBSERVER)
            .join(format!(
                "{}_{}",
                Category::Simple.reference_name(),
                Setting::Names.reference_suffix()
            ))
            .join("gpt5_medium_req/improvements/gpt5_medium_edit/v2/converged_tests.json");
        fs::write(&conv, "{\"converged_tests\": [0, \"x\"]}").unwrap();
        let err = table5(&dir.0).unwrap_err();
        assert!(err.to_string().contains("not an index"), "{err}");
        fs::write(&conv, "{\"converged_tests\": [0,").unwrap();
        let err = table5(&dir.0).unwrap_err();
        assert!(err.to_string().contains("invalid JSON"), "{err}");
        assert!(matches!(
            table5(&dir.0.join("nope")),
            Err(ChecksError::NoChains(_))
        ));
        let usage = dir.0.join("u.json");
        fs::write(&usage, "{\"prompt_tokens\": 3}").unwrap();
        assert!(read_token_usage(&usage)
            .unwrap_err()
            .to_string()
            .contains("total_tokens"));
        assert_eq!(read_token_usage(&dir.0.join("absent.json")).unwrap(), None);
    }
}
