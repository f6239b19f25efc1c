//! Experiment files: a small TOML document that expands into the stage DAG.
//!
//! ```toml
//! name = "table2"
//!
//! [bfcl]
//! settings = ["names", "names+desc", "names+params"]   # plus "gold" rows come from `methods`
//! methods  = ["gold", "base", "toolobserver"]
//! subset   = 10            # instances per category (optional; all 150 when absent)
//! data     = "wheel"       # or a path to a JSON-lines file in BFCL's format
//! backend  = "simulated"   # REST tools: "simulated" | "recorded"
//! recorded = "path/to/recorded_api_responses.json"  # with backend = "recorded"
//! rounds   = 10            # ToolObserver: max reflection rounds
//! seeds    = [0]
//!
//! [models]
//! agent  = "scripted:schema"   # "embedded:<name>", "openai:<model>", "scripted:<name>"
//! editor = "scripted:errors"
//! # or grids (Table 7: every agent x every editor):
//! # agents  = ["openai:gpt-5", "openai:gpt-5-mini"]
//! # editors = ["openai:gpt-5", "openai:gpt-5-mini"]
//!
//! [baselines]              # methods "easytool", "play2prompt", "draft", "tracefree"
//! concurrency = 8          # instances worked on at once
//! [baselines.play2prompt]  # the paper's reduced budget
//! init_loops = 3
//! beam_width = 1
//! expansions = 1
//! iterations = 1
//! refine_steps = 1
//! top_k = 1
//! examples = 1
//! [baselines.draft]
//! episodes = 5
//! diversity = 0.9          # reject a query whose cosine to a previous one is >= this
//! retries = 3
//! converge = 0.75          # stop when (BLEU + cosine) / 2 > this
//! embedder = "minilm"      # or "bag-of-words" (scripted tests)
//! [baselines.tracefree]    # Trace-Free+: one generator request per tool
//! traces = 0               # 0: trace-free; k: a summary of k tool-play calls per tool
//! temperature = 0.3        # the paper's sampling
//! top_p = 0.9
//! repetition_penalty = 1.1 # 1.0: none; never sent to a reasoning model
//! # send_repetition_penalty = true  # openai: generators (default: when `generator` is set)
//! retries = 1              # a reply without the JSON object is asked again
//! max_tokens = 1024        # room per reply
//! # generator = "openai:<name>"   # default: the editor
//! # generator_tuned = true  # `generator` is a fine-tuned Trace-Free+ generator: the
//! #   column is `+TF`; otherwise `+TF-prompt` (a prompting baseline)
//! # trained_on = ["chess:phase_specialists"]  # the generator's training tool sets
//! #   (`otb export --sft`'s holdout.json): a Trace-Free+ cell on one is refused
//! ```
//!
//! Validation happens here, before the store is opened: a bad file never touches it.

pub use crate::baselines::budget::{Baselines, DraftBudget, Play2PromptBudget, TraceFreeBudget};
use crate::env::{Cx, DriveError};
use crate::models::{ModelSpec, Role, SplitSampling, TurnSampling};
pub use datasets::bfcl::opacify::Setting;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A problem with an experiment file: one line, naming the file and the fix.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    /// The experiment file the error is about.
    pub path: String,
    /// What is wrong, one line.
    pub message: String,
}

impl pipeline::Classify for ConfigError {
    /// The experiment file is the user's.
    fn class(&self) -> pipeline::ErrorClass {
        pipeline::ErrorClass::User
    }
}

fn cfg_err(path: &Path, message: impl Into<String>) -> ConfigError {
    ConfigError {
        path: path.display().to_string(),
        message: message.into(),
    }
}

/// The sentence embedders DRAFT may use.
pub const EMBEDDERS: &[&str] = &["minilm", "bag-of-words"];
pub use crate::env::{parse_methods, Method};

/// The methods that produce documentation with a baseline stage.
pub const BASELINES: &[&str] = &["easytool", "play2prompt", "draft", "tracefree"];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    name: Option<String>,
    models: Option<RawModels>,
    prompts: Option<RawPrompts>,
    baselines: Option<RawBaselines>,
    /// External methods (`[methods.<name>]`, `docs/methods.md`).
    methods: Option<std::collections::BTreeMap<String, crate::baselines::external::RawExternal>>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBaselines {
    concurrency: Option<usize>,
    play2prompt: Option<Play2PromptBudget>,
    draft: Option<DraftBudget>,
    tracefree: Option<TraceFreeBudget>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModels {
    agent: Option<String>,
    editor: Option<String>,
    agents: Option<Vec<String>>,
    editors: Option<Vec<String>>,
    explore_temperature: Option<f64>,
    test_temperature: Option<f64>,
    explore_reasoning_effort: Option<String>,
    reasoning_effort: Option<String>,
    endpoints: Option<Vec<String>>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrompts {
    set: Option<String>,
    agent_system: Option<String>,
    editor: Option<String>,
    /// Offline ToolObserver: the batch-analysis and consensus-merge templates.
    editor_batch: Option<String>,
    editor_merge: Option<String>,
}

pub use crate::at::tool_set_id;

/// The first tool set of `exp`'s Trace-Free+ cells that `[baselines.tracefree]
/// trained_on` lists, as the one-line refusal: a generator is scored only on tools
/// it was not trained on (or an entry that is no [`tool_set_id`] of a known
/// environment). `None` when all is well.
pub fn trained_on_overlap(exp: &Experiment) -> Option<String> {
    let trained = &exp.baselines.tracefree.trained_on;
    let envs: Vec<&str> = exp.registry.environments().map(|e| e.table()).collect();
    if let Some(bad) = trained.iter().find(|t| {
        t.as_str() != "bfcl"
            && !t
                .split_once(':')
                .is_some_and(|(env, set)| envs.contains(&env) && env != "bfcl" && !set.is_empty())
    }) {
        return Some(format!(
            "baselines.tracefree.trained_on: `{bad}` is no tool set (bfcl, chess:<set>, search:<set>, as holdout.json names them)"
        ));
    }
    let hit = exp
        .tracefree_tool_sets()
        .into_iter()
        .find(|t| trained.contains(t))?;
    Some(format!(
        "baselines.tracefree.trained_on lists `{hit}`, which this experiment scores Trace-Free+ on: a generator is evaluated only on tool sets it was not trained on (drop `tracefree` there, or use a generator exported with `--holdout {hit}`)"
    ))
}

/// Longest experiment name (characters).
pub const MAX_NAME_CHARS: usize = 100;

/// Why `name` cannot name an experiment, if it cannot: it becomes one path
/// component of the folders the user's commands write (reports, exports), so it is
/// one non-empty component of at most [`MAX_NAME_CHARS`] characters, without
/// separators (`/`, `\`), without `..` and without control characters (an absolute
/// path starts with a separator).
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("is empty".into());
    }
    if name.chars().count() > MAX_NAME_CHARS {
        return Err(format!("is longer than {MAX_NAME_CHARS} characters"));
    }
    if name.contains(['/', '\\']) || name.contains("..") {
        return Err("must be one folder name: no `/`, `\\` or `..`".into());
    }
    if name.chars().any(char::is_control) {
        return Err("must not contain control characters".into());
    }
    Ok(())
}

/// A validated experiment.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// The experiment file.
    pub path: PathBuf,
    /// Its name (`name = ...`, else the file's stem): in tables and export folders.
    pub name: String,
    /// Its environment tables (`[bfcl]`, `[chess]`, `[search]`, ...), checked, in the
    /// registry's order: every one is optional, and an experiment names at least one.
    pub envs: Vec<std::sync::Arc<dyn EnvTable>>,
    /// The environments it was read with.
    pub registry: std::sync::Arc<Registry>,
    /// Agent models (rows of Table 7); one chain per agent.
    pub agents: Vec<ModelSpec>,
    /// Editor models (columns of Table 7), used by ToolObserver and the baselines.
    pub editors: Vec<ModelSpec>,
    /// The baselines' budgets (`[baselines]`).
    pub baselines: Baselines,
    /// Prompt template texts (hashed into stage keys) and where they came from.
    pub agent_system_prompt: String,
    /// The online editor's template (BFCL).
    pub editor_prompt: String,
    /// Offline ToolObserver (chess, search): batch analysis and consensus merge.
    pub batch_prompt: String,
    /// The consensus-merge template (offline ToolObserver).
    pub merge_prompt: String,
    /// The shipped set named by `[prompts] set` (`project` or `paper`).
    pub prompt_set: &'static str,
    /// How agents sample in the offline environments' exploration and test play
    /// (`[models] explore_temperature`, `test_temperature`, `explore_reasoning_effort`,
    /// `reasoning_effort`).
    pub sampling: SplitSampling,
    /// The OpenAI-compatible servers of its `openai:` models (`[models] endpoints`;
    /// `OTB_LLM_BASE_URL`, when set, wins): a fleet, each request sent to the one
    /// with the fewest in flight. Where calls go is in no key.
    pub endpoints: Vec<String>,
}

/// `[models] endpoints`, checked: each an http(s) URL, none twice.
fn endpoints(path: &Path, list: Option<&[String]>) -> Result<Vec<String>, ConfigError> {
    let Some(list) = list else {
        return Ok(Vec::new());
    };
    if list.is_empty() {
        return Err(cfg_err(path, "models.endpoints is empty"));
    }
    let mut seen = std::collections::BTreeSet::new();
    for e in list {
        let e = e.trim();
        if !llm::openai::is_base_url(e) || e.contains([',', ' ']) {
            return Err(cfg_err(
                path,
                format!("models.endpoints: {e:?} is not an http:// or https:// URL"),
            ));
        }
        if !seen.insert(e.trim_end_matches('/')) {
            return Err(cfg_err(path, format!("models.endpoints lists {e:?} twice")));
        }
    }
    Ok(list.iter().map(|e| e.trim().to_owned()).collect())
}

/// The paper's exploration samples (toolobserver.md: "temperature sampling, or the
/// model's default sampling where temperature is not allowed"): 1.0 is the default
/// temperature of OpenAI-compatible chat APIs.
pub const EXPLORE_TEMPERATURE: f64 = 1.0;

/// `[models]`'s sampling fields, checked.
fn sampling(path: &Path, m: &RawModels) -> Result<SplitSampling, ConfigError> {
    for (name, t) in [
        ("explore_temperature", m.explore_temperature),
        ("test_temperature", m.test_temperature),
    ] {
        if let Some(t) = t {
            if !(0.0..=2.0).contains(&t) {
                return Err(cfg_err(
                    path,
                    format!("models.{name} = {t}: a temperature lies in [0, 2]"),
                ));
            }
        }
    }
    for (name, e) in [
        ("explore_reasoning_effort", &m.explore_reasoning_effort),
        ("reasoning_effort", &m.reasoning_effort),
    ] {
        if let Some(e) = e {
            if e.is_empty() || !e.chars().all(|c| c.is_ascii_lowercase() || c == '_') {
                return Err(cfg_err(
                    path,
                    format!(
                        "models.{name} = `{e}`: a reasoning effort is a word such as minimal, low, medium or high"
                    ),
                ));
            }
        }
    }
    Ok(SplitSampling {
        explore: TurnSampling {
            temperature: Some(m.explore_temperature.unwrap_or(EXPLORE_TEMPERATURE)),
            reasoning_effort: m
                .explore_reasoning_effort
                .clone()
                .or_else(|| m.reasoning_effort.clone()),
            top_p: None,
        },
        test: TurnSampling {
            temperature: m.test_temperature,
            reasoning_effort: m.reasoning_effort.clone(),
            top_p: None,
        },
    })
}

/// The agent's system prompt shipped with the project (`prompts/agent_system.txt`).
pub const DEFAULT_AGENT_SYSTEM: &str = include_str!("../../prompts/agent_system.txt");
/// The online editor prompt shipped with the project (`prompts/editor_online.txt`).
pub const DEFAULT_EDITOR: &str = include_str!("../../prompts/editor_online.txt");

/// The largest prompt template an experiment may name.
pub const MAX_PROMPT_BYTES: u64 = 256 * 1024;

/// A shipped set of prompts (`[prompts] set = "project" | "paper"`): BFCL's online
/// agent and editor, and the offline editor's batch and merge templates. The chess and
/// search agents' prompts and editor notes follow the same choice (each environment
/// keeps its files: `paper_prompts`).
pub struct PromptSet {
    /// `project` or `paper`.
    pub name: &'static str,
    /// BFCL's agent system prompt.
    pub agent_system: &'static str,
    /// BFCL's online editor template.
    pub editor: &'static str,
    /// The offline batch-analysis template.
    pub editor_batch: &'static str,
    /// The offline consensus-merge template.
    pub editor_merge: &'static str,
}

/// This project's prompts (the default): they add a rule on required parameters for
/// the editor and a hint on descriptive parameter names for the agent.
pub const PROJECT_PROMPTS: PromptSet = PromptSet {
    name: "project",
    agent_system: DEFAULT_AGENT_SYSTEM,
    editor: DEFAULT_EDITOR,
    editor_batch: crate::offline::DEFAULT_BATCH,
    editor_merge: crate::offline::DEFAULT_MERGE,
};

/// What the paper's templates convey and nothing more (in this project's words):
/// no extra rules or hints, and the paper's test of an accurate description.
/// Offline, the paper's batch analysis also asks for a `Reasoning:` after each
/// description and a framework for choosing between the tools at the end, and its
/// merge for a `Synthesis reasoning:` before each final description.
pub const PAPER_PROMPTS: PromptSet = PromptSet {
    name: "paper",
    agent_system: include_str!("../../prompts/paper/agent_system.txt"),
    editor: include_str!("../../prompts/paper/editor_online.txt"),
    editor_batch: include_str!("../../prompts/paper/editor_batch.txt"),
    editor_merge: include_str!("../../prompts/paper/editor_merge.txt"),
};

/// Each of `got` is one of `valid` (the `what`s), and there is at least one; else
/// the line that says which is not, or that none is listed.
pub fn check_names(what: &str, got: &[String], valid: &[&str]) -> Result<(), String> {
    for g in got {
        if !valid.contains(&g.as_str()) {
            return Err(format!(
                "unknown {what} `{g}` (valid: {})",
                valid.join(", ")
            ));
        }
    }
    if got.is_empty() {
        return Err(format!("no {what}s listed (valid: {})", valid.join(", ")));
    }
    Ok(())
}

/// The one line an environment's table that does not deserialise gives: the table,
/// then what is wrong and where (`bfcl: invalid type: ... in \`settings\``).
pub fn table_error(table: &str, e: &toml::de::Error) -> String {
    format!("{table}: {}", e.to_string().trim_end())
}

/// `a`, `a or b`, `a, b or c`.
fn or_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} or {last}", rest.join(", ")),
    }
}

/// The experiment's own top-level keys and tables, beside the environments'.
const OWN_KEYS: &[&str] = &["name", "models", "prompts", "baselines", "methods"];

/// An environment of the benchmark as an experiment file sees it: its table's name
/// and how the table is read. Adding an environment is its own folders plus one
/// line in the registry of built-in environments (`driver::environments`).
pub trait Environment: Send + Sync {
    /// Its table in experiment files (`bfcl`, `chess`, `search`).
    fn table(&self) -> &'static str;

    /// Read and check its table; `resolve` makes a path relative to the experiment
    /// file (and notes one that leaves its folder).
    fn parse(
        &self,
        table: toml::Value,
        resolve: &dyn Fn(&str) -> PathBuf,
    ) -> Result<Box<dyn EnvTable>, String>;

    /// The tables its stages write beyond the shared ones (`otb export`'s SCHEMA.md).
    fn exported(&self) -> Vec<crate::rows::Exported> {
        Vec::new()
    }

    /// Scripted agents of its own (`scripted:<name>`), which its drive registers.
    fn scripted_agents(&self) -> &'static [&'static str] {
        &[]
    }

    /// Scripted editors of its own, which its drive registers.
    fn scripted_editors(&self) -> &'static [&'static str] {
        &[]
    }

    /// How it reads its own rows for `otb report` and `otb export --sft` (default:
    /// nothing of its own: no items, roles, intervals or SFT pairs).
    fn reader(&self) -> &dyn Reader {
        &NoReader
    }
}

/// What an environment reads of its own rows (`otb report`: its items, the roles of
/// its stages' model calls, its interval bars, its gold docs; `otb export --sft`: its
/// tool sets and pairs), so that `report/` and `tables/` name no environment.
pub trait Reader: Send + Sync {
    /// Whether its nodes of `stage` hold the report's items (one cell of the report's
    /// grid each: BFCL's `evaluate`, an offline `*-explore`).
    fn holds_items(&self, _stage: &str) -> bool {
        false
    }

    /// The report's items of `out`, a computed node of a stage it
    /// [`holds_items`](Reader::holds_items), reading what it needs `along` the
    /// plan's edges; every text a model wrote goes through `cap`.
    fn items(
        &self,
        _out: &crate::reading::Computed<'_>,
        _along: &dyn crate::reading::Along,
        _cap: &mut crate::reading::Cap,
    ) -> Result<crate::reading::Reading, pipeline::StoreError> {
        Ok(crate::reading::Reading::default())
    }

    /// Whose model its `stage` calls (`agent`, `judge`), for the report's cost;
    /// `None` for a stage not its own or one that calls no model (the shared editor
    /// stages are the editor's).
    fn role_of(&self, _stage: &str) -> Option<&'static str> {
        None
    }

    /// The report's interval bars of `out`, any computed output of the run (the
    /// environment picks those holding its tables).
    fn intervals(
        &self,
        _out: &crate::reading::Computed<'_>,
    ) -> Result<Vec<crate::reading::Interval>, pipeline::StoreError> {
        Ok(Vec::new())
    }

    /// Whether the documentation output `out` (at `stage`) is the gold documentation
    /// the report shows beside a ToolObserver curve on `setting`: by default the
    /// setting's own `gold` method.
    fn is_gold_docs(&self, setting: &str, _stage: &str, out: &crate::at::Cell) -> bool {
        out.setting == setting && out.is(Method::Gold)
    }

    /// Its tool sets in `run` ([`tool_set_id`]s), for `otb export --sft`.
    fn sft_tool_sets(&self, _run: &crate::env::RunOutput) -> Vec<String> {
        Vec::new()
    }

    /// The SFT pairs of `run`: every tool whose ToolObserver description made its
    /// agent better (none held out yet), for `otb export --sft`.
    fn sft_pairs(
        &self,
        _run: &crate::env::RunOutput,
        _exp: &Experiment,
    ) -> Result<Vec<crate::reading::SftPair>, pipeline::StageError> {
        Ok(Vec::new())
    }
}

/// The reader of an environment that reads nothing of its own.
pub struct NoReader;

impl Reader for NoReader {}

/// One environment's table of an experiment, checked: what the experiment, the
/// driver and `otb run` ask of it.
pub trait EnvTable: std::fmt::Debug + Send + Sync + std::any::Any {
    /// Its table's name in experiment files ([`Environment::table`]): the
    /// [`crate::env::Cell::env`] of every output its drive records.
    fn table(&self) -> &'static str;

    /// Whether one of its methods uses an editor (the editors are then checked as
    /// editors).
    fn uses_editor(&self) -> bool {
        Method::any_uses_editor(&self.methods())
    }

    /// The methods it runs (its external methods must be configured).
    fn methods(&self) -> Vec<Method> {
        Vec::new()
    }

    /// Its tool sets as its cells' settings name them (BFCL's one is `""`: every
    /// instance has its own tools).
    fn tool_sets(&self) -> Vec<String> {
        Vec::new()
    }

    /// The tool sets of its cells that play `method`, named as `otb export --sft`
    /// names them ([`tool_set_id`]).
    fn tool_sets_with(&self, method: Method) -> Vec<String> {
        if !self.methods().contains(&method) {
            return Vec::new();
        }
        self.tool_sets()
            .iter()
            .map(|t| tool_set_id(self.table(), t))
            .collect()
    }

    /// Whether its agents play a training and a test split (the run's model line then
    /// says how they sample on each).
    fn plays_offline(&self) -> bool {
        true
    }

    /// `[prompts] set`: whether the paper's set was chosen (an environment with its
    /// own prompt files follows the choice).
    fn follow_prompt_set(&mut self, _paper: bool) {}

    /// Its switches away from the paper's protocol, one phrase each.
    fn switches(&self) -> Vec<String> {
        Vec::new()
    }

    /// Models it uses beyond the experiment's agents and editors (a judge).
    fn models(&self) -> Vec<&ModelSpec> {
        Vec::new()
    }

    /// What must hold before a run touches the store (input files parse, an engine
    /// exists).
    fn preflight(&self, _exp: &Experiment) -> Result<(), crate::InputError> {
        Ok(())
    }

    /// Expand the table into stage calls.
    fn drive<'p>(&'p self, exp: &'p Experiment, cx: &mut Cx<'p, '_>) -> Result<(), DriveError>;

    /// The stages without which the rest of its plan cannot be known (an MCP
    /// server's tool list), which `otb run` computes before it prints its bill
    /// (default: none).
    fn prelude<'p>(&'p self, _exp: &'p Experiment, _cx: &mut Cx<'p, '_>) -> Result<(), DriveError> {
        Ok(())
    }

    /// The table as `Any`, so that its environment's code can read its own type.
    fn as_any(&self) -> &dyn std::any::Any;
}

/// The environments an experiment file may name, in drive order.
#[derive(Default)]
pub struct Registry {
    envs: Vec<Arc<dyn Environment>>,
}

impl Registry {
    /// No environment yet.
    pub fn new() -> Registry {
        Registry::default()
    }

    /// `self` with `env` added after the others.
    pub fn with(mut self, env: impl Environment + 'static) -> Registry {
        self.envs.push(Arc::new(env));
        self
    }

    /// The environments, in drive order.
    pub fn environments(&self) -> impl Iterator<Item = &dyn Environment> {
        self.envs.iter().map(|e| e.as_ref())
    }

    /// The environment whose table is `table` (a [`crate::env::Cell::env`]).
    pub fn get(&self, table: &str) -> Option<&dyn Environment> {
        self.environments().find(|e| e.table() == table)
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list()
            .entries(self.envs.iter().map(|e| e.table()))
            .finish()
    }
}

fn check_model(
    path: &Path,
    registry: &Registry,
    role: &str,
    spec: &str,
    as_role: Role,
) -> Result<ModelSpec, ConfigError> {
    // The registered environments' own scripted models are valid too.
    let extra: Vec<&str> = registry
        .envs
        .iter()
        .flat_map(|e| match as_role {
            Role::Agent => e.scripted_agents(),
            Role::Editor => e.scripted_editors(),
            Role::Serve | Role::Unused => &[],
        })
        .copied()
        .collect();
    crate::models::parse_for_with(spec, as_role, &extra)
        .map_err(|e| cfg_err(path, format!("models.{role}: {}", e.0)))
}

/// The experiment file's text as a TOML table.
fn read_toml(path: &Path, text: &str) -> Result<toml::Table, ConfigError> {
    toml::from_str(text).map_err(|e| {
        let msg = e.message().to_string();
        let loc = e
            .span()
            .map(|s| {
                let line = text[..s.start.min(text.len())].lines().count().max(1);
                format!("line {line}: ")
            })
            .unwrap_or_default();
        cfg_err(path, format!("malformed TOML: {loc}{msg}"))
    })
}

/// An experiment file's environment tables, each with its environment.
type EnvTables = Vec<(Arc<dyn Environment>, toml::Value)>;

/// The environment tables of `doc`, in the registry's order, and the rest: the
/// experiment's own tables and keys (an unknown one is an error).
fn split_tables(
    registry: &Registry,
    path: &Path,
    mut doc: toml::Table,
) -> Result<(EnvTables, RawExperiment), ConfigError> {
    // The environment tables go to their environments; the rest is the
    // experiment's own.
    let env_tables: EnvTables = registry
        .envs
        .iter()
        .filter_map(|e| doc.remove(e.table()).map(|t| (e.clone(), t)))
        .collect();
    if let Some(k) = doc.keys().find(|k| !OWN_KEYS.contains(&k.as_str())) {
        let valid: Vec<&str> = OWN_KEYS
            .iter()
            .copied()
            .chain(registry.envs.iter().map(|e| e.table()))
            .collect();
        return Err(cfg_err(
            path,
            format!("unknown table or key `{k}` (valid: {})", valid.join(", ")),
        ));
    }
    let raw: RawExperiment = toml::Value::Table(doc).try_into().map_err(|e| {
        cfg_err(
            path,
            format!("malformed TOML: {}", e.to_string().trim_end()),
        )
    })?;
    Ok((env_tables, raw))
}

/// Resolves the experiment's relative paths inside its folder and notes each one
/// that climbs out of it (`../..`): such a path is refused unless the user allowed
/// it.
struct Resolver<'a> {
    /// The experiment file's folder.
    base: &'a Path,
    /// The relative paths resolved so far that leave it.
    escapes: std::cell::RefCell<Vec<String>>,
}

impl Resolver<'_> {
    /// `p` made relative to the experiment's folder (an absolute path as it is).
    fn resolve(&self, p: &str) -> PathBuf {
        let pb = PathBuf::from(p);
        if pb.is_absolute() {
            return pb;
        }
        let mut depth = 0i64;
        for c in pb.components() {
            match c {
                std::path::Component::ParentDir => depth -= 1,
                std::path::Component::Normal(_) => depth += 1,
                _ => {}
            }
            if depth < 0 {
                self.escapes.borrow_mut().push(p.to_string());
                break;
            }
        }
        self.base.join(pb)
    }
}

/// The error of path `p`, which leaves the experiment's folder.
fn outside_err(path: &Path, p: &str) -> ConfigError {
    cfg_err(
        path,
        format!(
            "path `{p}` leaves the experiment's folder; use a path inside it, an absolute path, or `otb --allow-outside-paths`"
        ),
    )
}

/// Each environment table read and checked by its environment; at least one.
fn parse_envs(
    registry: &Registry,
    path: &Path,
    env_tables: EnvTables,
    resolver: &Resolver<'_>,
) -> Result<Vec<Box<dyn EnvTable>>, ConfigError> {
    let resolve = |p: &str| resolver.resolve(p);
    let envs: Vec<Box<dyn EnvTable>> = env_tables
        .into_iter()
        .map(|(e, t)| e.parse(t, &resolve).map_err(|m| cfg_err(path, m)))
        .collect::<Result<_, _>>()?;
    if envs.is_empty() {
        let tables: Vec<String> = registry
            .envs
            .iter()
            .map(|e| format!("`[{}]`", e.table()))
            .collect();
        return Err(cfg_err(
            path,
            format!("no environment table: add {}", or_list(&tables)),
        ));
    }
    Ok(envs)
}

/// The `[models]` table, checked.
struct Models {
    agents: Vec<ModelSpec>,
    editors: Vec<ModelSpec>,
    sampling: SplitSampling,
    endpoints: Vec<String>,
}

/// Reads `[models]`: the endpoints, the agents' sampling, the agents and the editors
/// (checked as editors only where `needs_editor`; by default the first agent).
fn parse_models(
    registry: &Registry,
    path: &Path,
    raw: Option<RawModels>,
    needs_editor: bool,
) -> Result<Models, ConfigError> {
    let models = raw.unwrap_or(RawModels {
        agent: None,
        editor: None,
        agents: None,
        editors: None,
        explore_temperature: None,
        test_temperature: None,
        explore_reasoning_effort: None,
        reasoning_effort: None,
        endpoints: None,
    });
    let endpoints = endpoints(path, models.endpoints.as_deref())?;
    let sampling = sampling(path, &models)?;
    let agents = model_list(
        (registry, path),
        "agent",
        models.agent,
        models.agents,
        vec!["embedded:qwen2.5-coder-1.5b".to_string()],
        Role::Agent,
    )?;
    let first_agent = agents[0].to_string();
    let editors = model_list(
        (registry, path),
        "editor",
        models.editor,
        models.editors,
        vec![first_agent],
        if needs_editor {
            Role::Editor
        } else {
            Role::Unused
        },
    )?;
    Ok(Models {
        agents,
        editors,
        sampling,
        endpoints,
    })
}

/// The models of `role` (`one` = `models.<role>` or `many` = `models.<role>s`, else
/// `default`), each checked `as_role`, none twice.
fn model_list(
    (registry, path): (&Registry, &Path),
    role: &str,
    one: Option<String>,
    many: Option<Vec<String>>,
    default: Vec<String>,
    as_role: Role,
) -> Result<Vec<ModelSpec>, ConfigError> {
    let list = match (one, many) {
        (Some(_), Some(_)) => {
            return Err(cfg_err(
                path,
                format!("models: give `{role}` or `{role}s`, not both"),
            ))
        }
        (Some(m), None) => vec![m],
        (None, Some(ms)) => ms,
        (None, None) => default,
    };
    if list.is_empty() {
        return Err(cfg_err(path, format!("models.{role}s is empty")));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut specs = Vec::with_capacity(list.len());
    for m in &list {
        specs.push(check_model(path, registry, role, m, as_role)?);
        if !seen.insert(m.as_str()) {
            return Err(cfg_err(path, format!("models.{role}s lists `{m}` twice")));
        }
    }
    Ok(specs)
}

/// The `[baselines]` table with its defaults, checked.
fn parse_baselines(path: &Path, raw: Option<RawBaselines>) -> Result<Baselines, ConfigError> {
    let rb = raw.unwrap_or_default();
    let baselines = Baselines {
        concurrency: rb.concurrency.unwrap_or(8),
        play2prompt: rb.play2prompt.unwrap_or_default(),
        draft: rb.draft.unwrap_or_default(),
        tracefree: rb.tracefree.unwrap_or_default(),
        external: Default::default(),
    };
    if baselines.concurrency == 0 {
        return Err(cfg_err(path, "baselines.concurrency must be at least 1"));
    }
    let p = &baselines.play2prompt;
    if [
        p.init_loops,
        p.beam_width,
        p.expansions,
        p.top_k,
        p.examples,
    ]
    .contains(&0)
    {
        return Err(cfg_err(
            path,
            "baselines.play2prompt: init_loops, beam_width, expansions, top_k and examples must be at least 1",
        ));
    }
    check_names(
        "baselines.play2prompt.instances value",
        std::slice::from_ref(&p.instances),
        &["paper", "all"],
    )
    .map_err(|m| cfg_err(path, m))?;
    let d = &baselines.draft;
    check_names("embedder", std::slice::from_ref(&d.embedder), EMBEDDERS)
        .map_err(|m| cfg_err(path, m))?;
    if d.episodes == 0 || !(0.0..=1.0).contains(&d.diversity) || !(0.0..=1.0).contains(&d.converge)
    {
        return Err(cfg_err(
            path,
            "baselines.draft: episodes must be at least 1; diversity and converge lie in [0, 1]",
        ));
    }
    let t = &baselines.tracefree;
    if let Some(g) = &t.generator {
        crate::models::parse_for(g, Role::Editor)
            .map_err(|e| cfg_err(path, format!("baselines.tracefree.generator: {}", e.0)))?;
    }
    if !((0.0..=2.0).contains(&t.temperature)
        && t.top_p > 0.0
        && t.top_p <= 1.0
        && t.max_tokens >= 16)
    {
        return Err(cfg_err(
            path,
            "baselines.tracefree: temperature lies in [0, 2], top_p in (0, 1], max_tokens is at least 16",
        ));
    }
    if !(t.repetition_penalty > 0.0 && t.repetition_penalty <= 2.0) {
        return Err(cfg_err(
            path,
            "baselines.tracefree: repetition_penalty lies in (0, 2] (1.0: none)",
        ));
    }
    if t.generator_tuned && t.generator.is_none() {
        return Err(cfg_err(
            path,
            "baselines.tracefree: generator_tuned = true marks a named generator as fine-tuned; name it with generator = \"openai:<name>\"",
        ));
    }
    Ok(baselines)
}

/// The `[prompts]` table read: the set and the four template texts.
struct Prompts {
    set: &'static PromptSet,
    agent_system: String,
    editor: String,
    batch: String,
    merge: String,
}

/// Reads `[prompts]`: the shipped set it names, and each template from the file the
/// user names or else the set's; the offline templates must have their placeholders.
fn read_prompts(
    path: &Path,
    raw: Option<RawPrompts>,
    resolver: &Resolver<'_>,
    allow_outside: bool,
) -> Result<Prompts, ConfigError> {
    let prompts = raw.unwrap_or(RawPrompts {
        set: None,
        agent_system: None,
        editor: None,
        editor_batch: None,
        editor_merge: None,
    });
    let set = match prompts.set.as_deref() {
        None | Some("project") => &PROJECT_PROMPTS,
        Some("paper") => &PAPER_PROMPTS,
        Some(other) => {
            return Err(cfg_err(
                path,
                format!("prompts.set = `{other}` (valid: project, paper)"),
            ))
        }
    };
    let read =
        |p: Option<String>, default: &str| read_prompt((path, resolver, allow_outside), p, default);
    let agent_system = read(prompts.agent_system, set.agent_system)?;
    let editor = read(prompts.editor, set.editor)?;
    let batch = read(prompts.editor_batch, set.editor_batch)?;
    let merge = read(prompts.editor_merge, set.editor_merge)?;
    for (name, text, fields) in [
        (
            "editor_batch",
            &batch,
            &["{{tools}}", "{{trajectories}}"][..],
        ),
        ("editor_merge", &merge, &["{{tools}}", "{{analyses}}"][..]),
    ] {
        if let Some(f) = fields.iter().find(|f| !text.contains(**f)) {
            return Err(cfg_err(
                path,
                format!("prompts.{name}: the template has no {f} placeholder"),
            ));
        }
    }
    Ok(Prompts {
        set,
        agent_system,
        editor,
        batch,
        merge,
    })
}

/// One template: the text of the file `p` names (a regular file of at most
/// `MAX_PROMPT_BYTES`, refused while any path leaves the experiment's folder unless
/// allowed), or `default` without one.
fn read_prompt(
    (path, resolver, allow_outside): (&Path, &Resolver<'_>, bool),
    p: Option<String>,
    default: &str,
) -> Result<String, ConfigError> {
    let Some(p) = p else {
        return Ok(default.to_string());
    };
    let f = resolver.resolve(&p);
    if !allow_outside && !resolver.escapes.borrow().is_empty() {
        return Err(outside_err(path, &p));
    }
    let meta =
        std::fs::metadata(&f).map_err(|e| cfg_err(path, format!("prompt template {p}: {e}")))?;
    if !meta.is_file() {
        return Err(cfg_err(
            path,
            format!("prompt template {p}: not a regular file"),
        ));
    }
    if meta.len() > MAX_PROMPT_BYTES {
        return Err(cfg_err(
            path,
            format!(
                "prompt template {p}: {} bytes, more than the {MAX_PROMPT_BYTES} a template may have",
                meta.len()
            ),
        ));
    }
    datasets::files::read_text(&f, MAX_PROMPT_BYTES)
        .map_err(|e| cfg_err(path, format!("prompt template {p}: {e}")))
}

/// The experiment's name (`name = ...`, else the file's stem), checked: it becomes a
/// folder (`outputs/reports/<name>/`, export folders), so a shared experiment file
/// must not choose a path outside the folders the user named.
fn experiment_name(path: &Path, name: Option<String>) -> Result<String, ConfigError> {
    let name = name.unwrap_or_else(|| {
        path.file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default()
    });
    if let Err(why) = check_name(&name) {
        return Err(cfg_err(path, format!("name {name:?}: {why}")));
    }
    Ok(name)
}

impl Experiment {
    /// Read and validate an experiment file whose relative paths may leave its folder.
    pub fn load_allowing_outside_paths(
        registry: &Arc<Registry>,
        path: &Path,
    ) -> Result<Experiment, ConfigError> {
        let text = datasets::files::read_text(path, datasets::files::SMALL_TEXT)
            .map_err(|e| cfg_err(path, format!("cannot read experiment file: {e}")))?;
        Experiment::parse_with(registry, path, &text, true)
    }

    /// Read and validate an experiment file (relative paths stay inside its folder)
    /// whose environment tables are those of `registry`.
    pub fn load(registry: &Arc<Registry>, path: &Path) -> Result<Experiment, ConfigError> {
        let text = datasets::files::read_text(path, datasets::files::SMALL_TEXT)
            .map_err(|e| cfg_err(path, format!("cannot read experiment file: {e}")))?;
        Experiment::parse(registry, path, &text)
    }

    /// Validate the text of the experiment file `path`.
    pub fn parse(
        registry: &Arc<Registry>,
        path: &Path,
        text: &str,
    ) -> Result<Experiment, ConfigError> {
        Experiment::parse_with(registry, path, text, false)
    }

    /// `allow_outside`: relative paths may climb out of the experiment's folder
    /// (`otb --allow-outside-paths`).
    pub fn parse_with(
        registry: &Arc<Registry>,
        path: &Path,
        text: &str,
        allow_outside: bool,
    ) -> Result<Experiment, ConfigError> {
        let doc = read_toml(path, text)?;
        let (env_tables, raw) = split_tables(registry, path, doc)?;
        let resolver = Resolver {
            base: path.parent().unwrap_or(Path::new(".")),
            escapes: std::cell::RefCell::new(Vec::new()),
        };
        let mut envs = parse_envs(registry, path, env_tables, &resolver)?;
        // Editors are checked as editors only where a method uses one.
        let needs_editor = envs.iter().any(|e| e.uses_editor());
        let models = parse_models(registry, path, raw.models, needs_editor)?;
        let mut baselines = parse_baselines(path, raw.baselines)?;
        for (name, m) in raw.methods.unwrap_or_default() {
            let m = crate::baselines::external::ExternalMethod::from_raw(
                &name,
                m,
                resolver.base,
                &|p| resolver.resolve(p),
            )
            .map_err(|e| cfg_err(path, e))?;
            baselines.external.insert(name, m);
        }
        // Every external method a table lists has its `[methods.<name>]`.
        for e in &envs {
            for m in e.methods() {
                if let Some(n) = m.external_name() {
                    if !baselines.external.contains_key(n) {
                        return Err(cfg_err(
                            path,
                            format!(
                                "{}: method `ext:{n}` has no [methods.{n}] table (command = [...], files = [...], params = {{...}})",
                                e.table()
                            ),
                        ));
                    }
                }
            }
        }
        let prompts = read_prompts(path, raw.prompts, &resolver, allow_outside)?;
        let paper = prompts.set.name == "paper";
        // Trace-Free+'s generator requests follow the set too.
        baselines.tracefree.paper = paper;
        // The offline environments keep their own agent prompts and editor notes, one
        // file per set.
        for e in envs.iter_mut() {
            e.follow_prompt_set(paper);
        }
        if let (false, Some(p)) = (allow_outside, resolver.escapes.borrow().first()) {
            return Err(outside_err(path, p));
        }
        let name = experiment_name(path, raw.name)?;
        let exp = Experiment {
            path: path.to_path_buf(),
            name,
            envs: envs.into_iter().map(std::sync::Arc::from).collect(),
            registry: registry.clone(),
            agents: models.agents,
            editors: models.editors,
            baselines,
            agent_system_prompt: prompts.agent_system,
            editor_prompt: prompts.editor,
            batch_prompt: prompts.batch,
            merge_prompt: prompts.merge,
            prompt_set: prompts.set.name,
            sampling: models.sampling,
            endpoints: models.endpoints,
        };
        // A fine-tuned generator is scored only on tool sets it was not trained on.
        if let Some(m) = trained_on_overlap(&exp) {
            return Err(cfg_err(path, m));
        }
        Ok(exp)
    }

    /// The tool sets it scores Trace-Free+ (`tracefree`) on, as [`tool_set_id`]s.
    pub fn tracefree_tool_sets(&self) -> Vec<String> {
        self.envs
            .iter()
            .flat_map(|e| e.tool_sets_with(Method::TraceFree))
            .collect()
    }

    /// The chess and search protocol a run used, one phrase each: chess's hints,
    /// sides, Elo games and opponents always, search's switches where they differ
    /// from the paper's defaults (a hinting prompt, the reference code's protocol).
    pub fn env_switches(&self) -> Vec<String> {
        self.envs.iter().flat_map(|e| e.switches()).collect()
    }

    /// The run's model line: agents, editors and how the agents sample.
    pub fn models_line(&self) -> String {
        let list = |v: &[ModelSpec]| {
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut line = format!(
            "models: agents {}; editors {}",
            list(&self.agents),
            list(&self.editors)
        );
        if self.envs.iter().any(|e| e.plays_offline()) {
            line.push_str(&format!(
                "; exploration {}; test play {} (a temperature reaches standard models, a reasoning effort openai: reasoning models only)",
                self.sampling.explore.describe(),
                self.sampling.test.describe()
            ));
        }
        let switches = self.env_switches();
        if !switches.is_empty() {
            line.push_str(&format!("\nprotocol: {}", switches.join("; ")));
        }
        line
    }

    /// The environment table of type `T`, if the experiment has one.
    pub fn table<T: 'static>(&self) -> Option<&T> {
        self.envs
            .iter()
            .find_map(|e| e.as_any().downcast_ref::<T>())
    }

    /// What the offline environments (chess, search) share: the editor's templates
    /// and the agents' sampling.
    pub fn offline_protocol(&self) -> crate::offline::Protocol<'_> {
        crate::offline::Protocol {
            templates: crate::offline::Templates {
                batch: &self.batch_prompt,
                merge: &self.merge_prompt,
            },
            sampling: self.sampling.clone(),
        }
    }
}
