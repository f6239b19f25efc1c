//! The `[bfcl]` table of an experiment file: [`BfclExperiment`], checked.

use crate::env::{parse_methods, Method};
use crate::experiment::{check_names, Experiment, PAPER_PROMPTS, PROJECT_PROMPTS};
pub use datasets::bfcl::opacify::Setting;
use serde::Deserialize;
use std::path::PathBuf;

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
    "tracefree",
];
/// How BFCL calls may be executed.
pub const BACKENDS: &[&str] = &["simulated", "recorded"];

/// Where the BFCL instances come from.
#[derive(Debug, Clone, PartialEq)]
pub enum DataSource {
    /// The pinned `bfcl-eval` wheel from PyPI (downloaded once into the store's cache).
    Wheel,
    /// A JSON-lines file in BFCL's question format with `ground_truth` per line.
    File(PathBuf),
}

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

/// The `[bfcl]` table as written.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawBfcl {
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

impl BfclExperiment {
    /// Check the `[bfcl]` table; `resolve` makes a path relative to the experiment
    /// file.
    pub fn from_raw(b: RawBfcl, resolve: &dyn Fn(&str) -> PathBuf) -> Result<Self, String> {
        let settings = b
            .settings
            .unwrap_or_else(|| vec!["names".into(), "names+desc".into(), "names+params".into()]);
        check_names("setting", &settings, &SETTINGS[1..])?;
        let settings: Vec<Setting> = settings
            .iter()
            .map(|s| Setting::parse(s).map_err(|e| e.to_string()))
            .collect::<Result<_, _>>()?;
        let methods = b
            .methods
            .unwrap_or_else(|| vec!["gold".into(), "base".into(), "toolobserver".into()]);
        // External methods (`ext:<name>`, configured by `[methods.<name>]`) beside the
        // built-in ones.
        let builtin: Vec<String> = methods
            .iter()
            .filter(|m| !m.starts_with(crate::at::EXTERNAL_PREFIX))
            .cloned()
            .collect();
        if builtin.len() == methods.len() || !builtin.is_empty() {
            check_names("method", &builtin, METHODS)?;
        }
        let methods: Vec<Method> = methods
            .iter()
            .map(|m| match m.strip_prefix(crate::at::EXTERNAL_PREFIX) {
                Some(n) => Method::external(n).ok_or_else(|| {
                    format!(
                        "method `{m}`: an external method's name is 1 to 40 lowercase letters, digits or `_`, starting with a letter"
                    )
                }),
                None => parse_methods(std::slice::from_ref(m), &Method::ALL).map(|v| v[0]),
            })
            .collect::<Result<_, _>>()?;
        let backend = b.backend.unwrap_or_else(|| "simulated".into());
        if backend == "live" {
            return Err(
                "backend = \"live\" is not available in experiments (stage outputs are \
                 cached by key, live answers change); use `otb exec --backend live` or \
                 `otb released score --backend live`"
                    .into(),
            );
        }
        check_names("backend", std::slice::from_ref(&backend), BACKENDS)?;
        let recorded = b.recorded.as_deref().map(resolve);
        if backend == "recorded" {
            match &recorded {
                None => {
                    return Err(
                        "backend = \"recorded\" needs `recorded = \"<responses.json>\"`".into(),
                    )
                }
                Some(p) if !p.is_file() => {
                    return Err(format!(
                        "recorded responses file {} does not exist",
                        p.display()
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
                    return Err(format!("bfcl.data: {} does not exist", p.display()));
                }
                DataSource::File(p)
            }
        };
        let outcome = match b.outcome.as_deref() {
            None | Some("grader") => Outcome::Grader,
            Some("execution") => Outcome::Execution,
            Some(other) => {
                return Err(format!(
                    "bfcl.outcome = `{other}` (valid: grader, execution)"
                ))
            }
        };
        if b.subset == Some(0) {
            return Err("bfcl.subset must be at least 1".into());
        }
        Ok(BfclExperiment {
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
        })
    }
}

impl Experiment {
    /// The `[bfcl]` table, if the experiment has one.
    pub fn bfcl(&self) -> Option<&BfclExperiment> {
        self.table::<BfclExperiment>()
    }

    /// The switches that make this run differ from the defaults, as one line for the
    /// tables; the defaults read
    /// `outcome = grader; prompts = project; play2prompt instances = paper; guard = off`.
    pub fn switches(&self) -> String {
        let is = |set: &crate::experiment::PromptSet| {
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
        let (outcome, guard) = match self.bfcl() {
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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::{ConfigError, Play2PromptBudget, DEFAULT_EDITOR, PAPER_PROMPTS};
    use std::path::Path;

    fn parse(text: &str) -> Result<Experiment, ConfigError> {
        Experiment::parse(&crate::driver::environments(), Path::new("exp.toml"), text)
    }

    #[test]
    fn every_shipped_experiment_file_loads() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../experiments");
        let mut n = 0;
        for f in std::fs::read_dir(&dir).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|x| x == "toml") {
                Experiment::load(&crate::driver::environments(), &p)
                    .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
                n += 1;
            }
        }
        assert!(n >= 8, "{n} experiment files");
    }

    #[test]
    fn defaults() {
        let e = parse("[bfcl]\n").unwrap();
        let b = e.bfcl().unwrap();
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
            "exp.toml: models.agent: unknown scripted agent `scripted:nope` (valid: scripted:schema, scripted:empty, scripted:random, scripted:chess-oracle, scripted:search-oracle, scripted:search-wrong, scripted:mcp-reader, scripted:mcp-oracle)"
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
        assert_eq!(e.bfcl().unwrap().outcome, Outcome::Execution);
        assert_eq!(e.editor_prompt, PAPER_PROMPTS.editor);
        assert_eq!(e.agent_system_prompt, PAPER_PROMPTS.agent_system);
        let e = parse("[bfcl]\n").unwrap();
        assert_eq!(e.bfcl().unwrap().outcome, Outcome::Grader);
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
        let err = Experiment::parse_with(
            &crate::driver::environments(),
            Path::new("exp.toml"),
            text,
            true,
        )
        .unwrap_err();
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
