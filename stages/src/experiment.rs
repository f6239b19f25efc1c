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
//! [baselines]              # methods "easytool", "play2prompt", "draft"
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
//! ```
//!
//! Validation happens here, before the store is opened: a bad file never touches it.

pub use crate::baselines::budget::{Baselines, DraftBudget, Play2PromptBudget};
use crate::models::{ModelSpec, Role, SplitSampling, TurnSampling};
pub use datasets::bfcl::opacify::Setting;
use serde::Deserialize;
use std::path::{Path, PathBuf};

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

/// BFCL's settings: gold, then the opaque ones.
pub const SETTINGS: &[&str] = &["gold", "names", "names+desc", "names+params"];
/// The methods a `[bfcl]` table may name.
pub const METHODS: &[&str] = &[
    "gold",
    "base",
    "toolobserver",
    "easytool",
    "play2prompt",
    "draft",
];
/// The sentence embedders DRAFT may use.
pub const EMBEDDERS: &[&str] = &["minilm", "bag-of-words"];
pub use crate::env::{parse_methods, Method};

/// The methods that produce documentation with a baseline stage.
pub const BASELINES: &[&str] = &["easytool", "play2prompt", "draft"];
/// How BFCL calls may be executed.
pub const BACKENDS: &[&str] = &["simulated", "recorded"];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    name: Option<String>,
    bfcl: Option<RawBfcl>,
    chess: Option<crate::chess::RawChess>,
    search: Option<crate::search::RawSearch>,
    models: Option<RawModels>,
    prompts: Option<RawPrompts>,
    baselines: Option<RawBaselines>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBaselines {
    concurrency: Option<usize>,
    play2prompt: Option<Play2PromptBudget>,
    draft: Option<DraftBudget>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBfcl {
    settings: Option<Vec<String>>,
    methods: Option<Vec<String>>,
    subset: Option<usize>,
    data: Option<String>,
    backend: Option<String>,
    recorded: Option<String>,
    rounds: Option<u32>,
    seeds: Option<Vec<u64>>,
    reflect_skip_success: Option<bool>,
    outcome: Option<String>,
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

/// Where the BFCL instances come from.
#[derive(Debug, Clone, PartialEq)]
pub enum DataSource {
    /// The pinned `bfcl-eval` wheel from PyPI (downloaded once into the store's cache).
    Wheel,
    /// A JSON-lines file in BFCL's question format with `ground_truth` per line.
    File(PathBuf),
}

/// A validated experiment.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// The experiment file.
    pub path: PathBuf,
    /// Its name (`name = ...`, else the file's stem): in tables and export folders.
    pub name: String,
    /// The BFCL-Opaque grid (`[bfcl]`); every environment table is optional, and an
    /// experiment names at least one.
    pub bfcl: Option<BfclExperiment>,
    /// The chess grid (`[chess]`).
    pub chess: Option<crate::chess::ChessExperiment>,
    /// The search grid (`[search]`, BrowseComp-Domains on the substitute corpus).
    pub search: Option<crate::search::SearchExperiment>,
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
        },
        test: TurnSampling {
            temperature: m.test_temperature,
            reasoning_effort: m.reasoning_effort.clone(),
        },
    })
}

/// The `[bfcl]` table, checked.
#[derive(Debug, Clone)]
pub struct BfclExperiment {
    /// The opaque settings (gold rows come from `methods`).
    pub settings: Vec<Setting>,
    /// The methods to run (`gold`, `base`, `toolobserver`, baselines).
    pub methods: Vec<Method>,
    /// Only the first N instances of each category (`SUBSET`).
    pub subset: Option<usize>,
    /// Where the instances come from.
    pub data: DataSource,
    /// How calls are executed: `simulated` or `recorded` (frozen API responses).
    pub backend: String,
    /// The frozen responses file for the `recorded` backend.
    pub recorded: Option<PathBuf>,
    /// At most this many ToolObserver rounds (K).
    pub rounds: u32,
    /// One chain per seed.
    pub seeds: Vec<u64>,
    /// A variant beyond the paper that uses gold labels: never a default.
    pub reflect_skip_success: bool,
    /// What the editor is shown of a call's outcome.
    pub outcome: Outcome,
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

/// What the online editor is told about the outcome of an observed call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `SUCCESS: <outputs>` when the grader (which knows the gold answer) judged the
    /// call correct: what the authors' code and the released runs did.
    Grader,
    /// Outputs and error texts only, no verdict: the paper's "the gold output is not
    /// used in online mode".
    Execution,
}

fn check_names(path: &Path, what: &str, got: &[String], valid: &[&str]) -> Result<(), ConfigError> {
    for g in got {
        if !valid.contains(&g.as_str()) {
            return Err(cfg_err(
                path,
                format!("unknown {what} `{g}` (valid: {})", valid.join(", ")),
            ));
        }
    }
    if got.is_empty() {
        return Err(cfg_err(
            path,
            format!("no {what}s listed (valid: {})", valid.join(", ")),
        ));
    }
    Ok(())
}

fn check_model(
    path: &Path,
    role: &str,
    spec: &str,
    as_role: Role,
) -> Result<ModelSpec, ConfigError> {
    crate::models::parse_for(spec, as_role)
        .map_err(|e| cfg_err(path, format!("models.{role}: {}", e.0)))
}

impl Experiment {
    /// The switches that make this run differ from the defaults, as one line for the
    /// tables; the defaults read
    /// `outcome = grader; prompts = project; play2prompt instances = paper; guard = off`.
    pub fn switches(&self) -> String {
        let is = |set: &PromptSet| {
            self.editor_prompt == set.editor
                && self.agent_system_prompt == set.agent_system
                && self.batch_prompt == set.editor_batch
                && self.merge_prompt == set.editor_merge
        };
        let prompts = if is(&PAPER_PROMPTS) {
            "paper"
        } else if is(&PROJECT_PROMPTS) {
            "project"
        } else {
            "custom files"
        };
        let (outcome, guard) = match &self.bfcl {
            Some(b) => (
                match b.outcome {
                    Outcome::Grader => "grader",
                    Outcome::Execution => "execution",
                },
                if b.reflect_skip_success {
                    "on (uses gold labels)"
                } else {
                    "off"
                },
            ),
            None => ("-", "-"),
        };
        format!(
            "outcome = {outcome}; prompts = {prompts}; play2prompt instances = {}; guard = {guard}",
            self.baselines.play2prompt.instances
        )
    }

    /// Read and validate an experiment file whose relative paths may leave its folder.
    pub fn load_allowing_outside_paths(path: &Path) -> Result<Experiment, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| cfg_err(path, format!("cannot read experiment file: {e}")))?;
        Experiment::parse_with(path, &text, true)
    }

    /// Read and validate an experiment file (relative paths stay inside its folder).
    pub fn load(path: &Path) -> Result<Experiment, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| cfg_err(path, format!("cannot read experiment file: {e}")))?;
        Experiment::parse(path, &text)
    }

    /// Validate the text of the experiment file `path`.
    pub fn parse(path: &Path, text: &str) -> Result<Experiment, ConfigError> {
        Experiment::parse_with(path, text, false)
    }

    /// `allow_outside`: relative paths may climb out of the experiment's folder
    /// (`otb --allow-outside-paths`).
    pub fn parse_with(
        path: &Path,
        text: &str,
        allow_outside: bool,
    ) -> Result<Experiment, ConfigError> {
        let raw: RawExperiment = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_string();
            let loc = e
                .span()
                .map(|s| {
                    let line = text[..s.start.min(text.len())].lines().count().max(1);
                    format!("line {line}: ")
                })
                .unwrap_or_default();
            cfg_err(path, format!("malformed TOML: {loc}{msg}"))
        })?;
        let base = path.parent().unwrap_or(Path::new("."));
        // A relative path resolves inside the experiment's folder; one that climbs out
        // of it (`../..`) is refused unless the user allowed it.
        let escapes: std::cell::RefCell<Vec<String>> = std::cell::RefCell::new(Vec::new());
        let resolve = |p: &str| -> PathBuf {
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
                    escapes.borrow_mut().push(p.to_string());
                    break;
                }
            }
            base.join(pb)
        };
        let mut chess = raw
            .chess
            .map(|c| crate::chess::ChessExperiment::from_raw(c, &resolve))
            .transpose()
            .map_err(|m| cfg_err(path, m))?;
        let mut search = raw
            .search
            .map(|s| crate::search::SearchExperiment::from_raw(s, &resolve))
            .transpose()
            .map_err(|m| cfg_err(path, m))?;
        let has_bfcl = raw.bfcl.is_some();
        if !has_bfcl && chess.is_none() && search.is_none() {
            return Err(cfg_err(
                path,
                "no environment table: add `[bfcl]`, `[chess]` or `[search]`",
            ));
        }
        let b = raw.bfcl.unwrap_or_default();
        let settings = b
            .settings
            .unwrap_or_else(|| vec!["names".into(), "names+desc".into(), "names+params".into()]);
        check_names(path, "setting", &settings, &SETTINGS[1..])?;
        let settings: Vec<Setting> = settings
            .iter()
            .map(|s| Setting::parse(s).map_err(|e| cfg_err(path, e.to_string())))
            .collect::<Result<_, _>>()?;
        let methods = b
            .methods
            .unwrap_or_else(|| vec!["gold".into(), "base".into(), "toolobserver".into()]);
        check_names(path, "method", &methods, METHODS)?;
        let methods: Vec<Method> =
            parse_methods(&methods, &Method::ALL).map_err(|m| cfg_err(path, m))?;
        let backend = b.backend.unwrap_or_else(|| "simulated".into());
        if backend == "live" {
            return Err(cfg_err(
                path,
                "backend = \"live\" is not available in experiments (stage outputs are \
                 cached by key, live answers change); use `otb exec --backend live` or \
                 `otb released score --backend live`",
            ));
        }
        check_names(path, "backend", std::slice::from_ref(&backend), BACKENDS)?;
        let recorded = b.recorded.as_deref().map(resolve);
        if backend == "recorded" {
            match &recorded {
                None => {
                    return Err(cfg_err(
                        path,
                        "backend = \"recorded\" needs `recorded = \"<responses.json>\"`",
                    ))
                }
                Some(p) if !p.is_file() => {
                    return Err(cfg_err(
                        path,
                        format!("recorded responses file {} does not exist", p.display()),
                    ))
                }
                _ => {}
            }
        }
        let data = match b.data.as_deref() {
            None | Some("wheel") => DataSource::Wheel,
            Some(p) => {
                let p = resolve(p);
                if !p.is_file() {
                    return Err(cfg_err(
                        path,
                        format!("bfcl.data: {} does not exist", p.display()),
                    ));
                }
                DataSource::File(p)
            }
        };
        let outcome = match b.outcome.as_deref() {
            None | Some("grader") => Outcome::Grader,
            Some("execution") => Outcome::Execution,
            Some(other) => {
                return Err(cfg_err(
                    path,
                    format!("bfcl.outcome = `{other}` (valid: grader, execution)"),
                ))
            }
        };
        if b.subset == Some(0) {
            return Err(cfg_err(path, "bfcl.subset must be at least 1"));
        }
        let models = raw.models.unwrap_or(RawModels {
            agent: None,
            editor: None,
            agents: None,
            editors: None,
            explore_temperature: None,
            test_temperature: None,
            explore_reasoning_effort: None,
            reasoning_effort: None,
        });
        let sampling = sampling(path, &models)?;
        let one_or_many = |role: &str,
                           one: Option<String>,
                           many: Option<Vec<String>>,
                           default: &dyn Fn() -> Vec<String>,
                           as_role: Role|
         -> Result<Vec<ModelSpec>, ConfigError> {
            let list = match (one, many) {
                (Some(_), Some(_)) => {
                    return Err(cfg_err(
                        path,
                        format!("models: give `{role}` or `{role}s`, not both"),
                    ))
                }
                (Some(m), None) => vec![m],
                (None, Some(ms)) => ms,
                (None, None) => default(),
            };
            if list.is_empty() {
                return Err(cfg_err(path, format!("models.{role}s is empty")));
            }
            let mut seen = std::collections::BTreeSet::new();
            let mut specs = Vec::with_capacity(list.len());
            for m in &list {
                specs.push(check_model(path, role, m, as_role)?);
                if !seen.insert(m.as_str()) {
                    return Err(cfg_err(path, format!("models.{role}s lists `{m}` twice")));
                }
            }
            Ok(specs)
        };
        // Editors are checked as editors only where a method uses one.
        let needs_editor = (has_bfcl
            && methods
                .iter()
                .any(|m| *m == Method::ToolObserver || m.is_baseline()))
            || chess
                .as_ref()
                .is_some_and(|c| c.methods.contains(&Method::ToolObserver))
            || search
                .as_ref()
                .is_some_and(|c| c.methods.contains(&Method::ToolObserver));
        let agents = one_or_many(
            "agent",
            models.agent,
            models.agents,
            &|| vec!["embedded:qwen2.5-coder-1.5b".to_string()],
            Role::Agent,
        )?;
        let first_agent = agents[0].to_string();
        let editors = one_or_many(
            "editor",
            models.editor,
            models.editors,
            &|| vec![first_agent.clone()],
            if needs_editor {
                Role::Editor
            } else {
                Role::Unused
            },
        )?;
        let rb = raw.baselines.unwrap_or_default();
        let baselines = Baselines {
            concurrency: rb.concurrency.unwrap_or(8),
            play2prompt: rb.play2prompt.unwrap_or_default(),
            draft: rb.draft.unwrap_or_default(),
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
            path,
            "baselines.play2prompt.instances value",
            std::slice::from_ref(&p.instances),
            &["paper", "all"],
        )?;
        let d = &baselines.draft;
        check_names(
            path,
            "embedder",
            std::slice::from_ref(&d.embedder),
            EMBEDDERS,
        )?;
        if d.episodes == 0
            || !(0.0..=1.0).contains(&d.diversity)
            || !(0.0..=1.0).contains(&d.converge)
        {
            return Err(cfg_err(
                path,
                "baselines.draft: episodes must be at least 1; diversity and converge lie in [0, 1]",
            ));
        }
        let prompts = raw.prompts.unwrap_or(RawPrompts {
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
        let read_prompt = |p: Option<String>, default: &str| -> Result<String, ConfigError> {
            match p {
                None => Ok(default.to_string()),
                Some(p) => {
                    let f = resolve(&p);
                    if !allow_outside && !escapes.borrow().is_empty() {
                        return Err(cfg_err(
                            path,
                            format!(
                                "path `{p}` leaves the experiment's folder; use a path inside it, an absolute path, or `otb --allow-outside-paths`"
                            ),
                        ));
                    }
                    let meta = std::fs::metadata(&f)
                        .map_err(|e| cfg_err(path, format!("prompt template {p}: {e}")))?;
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
                    std::fs::read_to_string(&f)
                        .map_err(|e| cfg_err(path, format!("prompt template {p}: {e}")))
                }
            }
        };
        // The offline environments keep their own agent prompts and editor notes, one
        // file per set.
        if let Some(s) = search.as_mut() {
            s.paper_prompts = set.name == "paper";
        }
        if let Some(c) = chess.as_mut() {
            c.paper_prompts = set.name == "paper";
        }
        let agent_system_prompt = read_prompt(prompts.agent_system, set.agent_system)?;
        let editor_prompt = read_prompt(prompts.editor, set.editor)?;
        let batch_prompt = read_prompt(prompts.editor_batch, set.editor_batch)?;
        let merge_prompt = read_prompt(prompts.editor_merge, set.editor_merge)?;
        for (name, text, fields) in [
            (
                "editor_batch",
                &batch_prompt,
                &["{{tools}}", "{{trajectories}}"][..],
            ),
            (
                "editor_merge",
                &merge_prompt,
                &["{{tools}}", "{{analyses}}"][..],
            ),
        ] {
            if let Some(f) = fields.iter().find(|f| !text.contains(**f)) {
                return Err(cfg_err(
                    path,
                    format!("prompts.{name}: the template has no {f} placeholder"),
                ));
            }
        }
        if let (false, Some(p)) = (allow_outside, escapes.borrow().first()) {
            return Err(cfg_err(
                path,
                format!(
                    "path `{p}` leaves the experiment's folder; use a path inside it, an absolute path, or `otb --allow-outside-paths`"
                ),
            ));
        }
        Ok(Experiment {
            path: path.to_path_buf(),
            name: raw.name.unwrap_or_else(|| {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            }),
            chess,
            search,
            bfcl: has_bfcl.then_some(BfclExperiment {
                settings,
                methods,
                subset: b.subset,
                data,
                backend,
                recorded,
                rounds: b.rounds.unwrap_or(10),
                seeds: b.seeds.unwrap_or_else(|| vec![0]),
                reflect_skip_success: b.reflect_skip_success.unwrap_or(false),
                outcome,
            }),
            agents,
            editors,
            baselines,
            agent_system_prompt,
            editor_prompt,
            batch_prompt,
            merge_prompt,
            prompt_set: set.name,
            sampling,
        })
    }

    /// The chess and search protocol a run used, one phrase each: chess's hints,
    /// sides, Elo games and opponents always, search's switches where they differ
    /// from the paper's defaults (a hinting prompt, the reference code's protocol).
    pub fn env_switches(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(c) = &self.chess {
            out.extend(c.switches());
        }
        if let Some(s) = &self.search {
            out.extend(s.switches());
        }
        out
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
        if self.chess.is_some() || self.search.is_some() {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Experiment, ConfigError> {
        Experiment::parse(Path::new("exp.toml"), text)
    }

    #[test]
    fn every_shipped_experiment_file_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments");
        let mut n = 0;
        for f in std::fs::read_dir(&dir).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                Experiment::load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert!(n >= 8, "{n} experiment files");
    }

    #[test]
    fn defaults() {
        let e = parse("[bfcl]\n").unwrap();
        let b = e.bfcl.as_ref().unwrap();
        assert_eq!(
            b.settings,
            [Setting::Names, Setting::NamesDesc, Setting::NamesParams]
        );
        assert_eq!(b.rounds, 10);
        assert_eq!(e.agents[0].to_string(), "embedded:qwen2.5-coder-1.5b");
        assert_eq!(e.editors, e.agents);
        assert_eq!(e.baselines.play2prompt, Play2PromptBudget::default());
        assert_eq!(e.baselines.play2prompt.init_loops, 3);
        assert_eq!(e.baselines.draft.episodes, 5);
    }

    #[test]
    fn model_grids_and_budgets() {
        let e = parse(
            "[bfcl]\nmethods = [\"base\", \"play2prompt\"]\n[models]\nagents = [\"scripted:schema\", \"scripted:empty\"]\neditors = [\"scripted:errors\"]\n[baselines.play2prompt]\ninit_loops = 5\n",
        )
        .unwrap();
        assert_eq!(e.agents.len(), 2);
        assert_eq!(e.editors[0].to_string(), "scripted:errors");
        assert_eq!(e.baselines.play2prompt.init_loops, 5);
        assert_eq!(e.baselines.play2prompt.beam_width, 1);
        let err =
            parse("[bfcl]\n[models]\nagent = \"scripted:schema\"\nagents = [\"scripted:empty\"]\n")
                .unwrap_err();
        assert!(err.to_string().contains("not both"), "{err}");
        let err = parse("[bfcl]\n[baselines.play2prompt]\ninit_loops = 0\n").unwrap_err();
        assert!(err.to_string().contains("at least 1"), "{err}");
        let err = parse("[bfcl]\n[baselines.draft]\nepisdes = 2\n").unwrap_err();
        assert!(err.to_string().contains("episdes"), "{err}");
    }

    #[test]
    fn unknown_setting_names_the_valid_ones() {
        let err = parse("[bfcl]\nsettings = [\"names\", \"nmaes\"]\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "exp.toml: unknown setting `nmaes` (valid: names, names+desc, names+params)"
        );
    }

    #[test]
    fn malformed_toml_gives_a_line() {
        let err = parse("[bfcl]\nsettings = [\"names\"\n").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("exp.toml: malformed TOML: line "),
            "{err}"
        );
    }

    #[test]
    fn unknown_models_are_bad_input() {
        let err = parse("[bfcl]\n[models]\nagent = \"scripted:nope\"\n").unwrap_err();
        assert_eq!(
            err.to_string(),
            "exp.toml: models.agent: unknown scripted agent `scripted:nope` (valid: scripted:schema, scripted:empty, scripted:random, scripted:chess-oracle, scripted:search-oracle, scripted:search-wrong)"
        );
        let err = parse("[bfcl]\n[models]\nagent = \"embedded:nope\"\n").unwrap_err();
        assert!(
            err.to_string()
                .starts_with("exp.toml: models.agent: model `embedded:nope`"),
            "{err}"
        );
        // An editor is checked as an editor only where a method needs one.
        assert!(
            parse("[bfcl]\nmethods = [\"base\"]\n[models]\nagent = \"scripted:schema\"\n").is_ok()
        );
        assert!(parse(
            "[bfcl]\nmethods = [\"toolobserver\"]\n[models]\nagent = \"scripted:schema\"\n"
        )
        .is_err());
    }

    #[test]
    fn outcome_and_prompt_set_switches() {
        let e = parse("[bfcl]\noutcome = \"execution\"\n[prompts]\nset = \"paper\"\n").unwrap();
        assert_eq!(e.bfcl.as_ref().unwrap().outcome, Outcome::Execution);
        assert_eq!(e.editor_prompt, PAPER_PROMPTS.editor);
        assert_eq!(e.agent_system_prompt, PAPER_PROMPTS.agent_system);
        let e = parse("[bfcl]\n").unwrap();
        assert_eq!(e.bfcl.as_ref().unwrap().outcome, Outcome::Grader);
        assert_eq!(e.editor_prompt, DEFAULT_EDITOR);
        assert!(parse("[bfcl]\noutcome = \"gold\"\n").is_err());
        assert!(parse("[bfcl]\n[prompts]\nset = \"x\"\n").is_err());
    }

    #[test]
    fn relative_paths_stay_inside_the_experiment_folder() {
        let text = "[bfcl]\n[prompts]\neditor = \"../../etc/passwd\"\n";
        let err = parse(text).unwrap_err();
        assert!(
            err.to_string().contains("leaves the experiment's folder"),
            "{err}"
        );
        // Allowed: it is then only a missing (or unreadable) file.
        let err = Experiment::parse_with(Path::new("exp.toml"), text, true).unwrap_err();
        assert!(!err.to_string().contains("leaves"), "{err}");
    }

    #[test]
    fn an_environment_table_is_required() {
        let err = parse("name = \"x\"\n").unwrap_err();
        assert!(err.to_string().contains("no environment table"), "{err}");
    }

    #[test]
    fn unknown_key_is_rejected() {
        let err = parse("[bfcl]\nsetings = []\n").unwrap_err();
        assert!(err.to_string().contains("setings"), "{err}");
    }
}
