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
//! ```
//!
//! Validation happens here, before the store is opened: a bad file never touches it.

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// A problem with an experiment file: one line, naming the file and the fix.
#[derive(Debug, thiserror::Error)]
#[error("{path}: {message}")]
pub struct ConfigError {
    pub path: String,
    pub message: String,
}

fn cfg_err(path: &Path, message: impl Into<String>) -> ConfigError {
    ConfigError {
        path: path.display().to_string(),
        message: message.into(),
    }
}

pub const SETTINGS: &[&str] = &["gold", "names", "names+desc", "names+params"];
pub const METHODS: &[&str] = &["gold", "base", "toolobserver"];
pub const BACKENDS: &[&str] = &["simulated", "recorded"];

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExperiment {
    name: Option<String>,
    bfcl: Option<RawBfcl>,
    models: Option<RawModels>,
    prompts: Option<RawPrompts>,
}

#[derive(Debug, Clone, Deserialize)]
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
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModels {
    agent: Option<String>,
    editor: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPrompts {
    agent_system: Option<String>,
    editor: Option<String>,
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
    pub path: PathBuf,
    pub name: String,
    pub bfcl: BfclExperiment,
    pub agent: String,
    pub editor: String,
    /// Prompt template texts (hashed into stage keys) and where they came from.
    pub agent_system_prompt: String,
    pub editor_prompt: String,
}

#[derive(Debug, Clone)]
pub struct BfclExperiment {
    pub settings: Vec<String>,
    pub methods: Vec<String>,
    pub subset: Option<usize>,
    pub data: DataSource,
    pub backend: String,
    pub recorded: Option<PathBuf>,
    pub rounds: u32,
    pub seeds: Vec<u64>,
    pub reflect_skip_success: bool,
}

/// The agent's system prompt shipped with the project (`prompts/agent_system.txt`).
pub const DEFAULT_AGENT_SYSTEM: &str = include_str!("../../prompts/agent_system.txt");
/// The online editor prompt shipped with the project (`prompts/editor_online.txt`).
pub const DEFAULT_EDITOR: &str = include_str!("../../prompts/editor_online.txt");

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

fn check_model(path: &Path, role: &str, spec: &str) -> Result<(), ConfigError> {
    let ok = ["scripted:", "embedded:", "openai:", "replay:"]
        .iter()
        .any(|p| spec.starts_with(p) && spec.len() > p.len());
    if !ok {
        return Err(cfg_err(
            path,
            format!("models.{role} = `{spec}`: expected `scripted:<name>`, `embedded:<name>`, `openai:<model>` or `replay:<model>`"),
        ));
    }
    Ok(())
}

impl Experiment {
    /// Read and validate an experiment file.
    pub fn load(path: &Path) -> Result<Experiment, ConfigError> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| cfg_err(path, format!("cannot read experiment file: {e}")))?;
        Experiment::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Experiment, ConfigError> {
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
        let resolve = |p: &str| -> PathBuf {
            let p = PathBuf::from(p);
            if p.is_absolute() {
                p
            } else {
                base.join(p)
            }
        };
        let b = raw
            .bfcl
            .ok_or_else(|| cfg_err(path, "missing [bfcl] table (the only environment so far)"))?;
        let settings = b
            .settings
            .unwrap_or_else(|| vec!["names".into(), "names+desc".into(), "names+params".into()]);
        check_names(path, "setting", &settings, &SETTINGS[1..])?;
        let methods = b
            .methods
            .unwrap_or_else(|| vec!["gold".into(), "base".into(), "toolobserver".into()]);
        check_names(path, "method", &methods, METHODS)?;
        let backend = b.backend.unwrap_or_else(|| "simulated".into());
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
        if b.subset == Some(0) {
            return Err(cfg_err(path, "bfcl.subset must be at least 1"));
        }
        let models = raw.models.unwrap_or(RawModels {
            agent: None,
            editor: None,
        });
        let agent = models
            .agent
            .unwrap_or_else(|| "embedded:qwen2.5-coder-1.5b".into());
        let editor = models.editor.unwrap_or_else(|| agent.clone());
        check_model(path, "agent", &agent)?;
        check_model(path, "editor", &editor)?;
        let prompts = raw.prompts.unwrap_or(RawPrompts {
            agent_system: None,
            editor: None,
        });
        let read_prompt = |p: Option<String>, default: &str| -> Result<String, ConfigError> {
            match p {
                None => Ok(default.to_string()),
                Some(p) => std::fs::read_to_string(resolve(&p))
                    .map_err(|e| cfg_err(path, format!("prompt template {p}: {e}"))),
            }
        };
        Ok(Experiment {
            path: path.to_path_buf(),
            name: raw.name.unwrap_or_else(|| {
                path.file_stem()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default()
            }),
            bfcl: BfclExperiment {
                settings,
                methods,
                subset: b.subset,
                data,
                backend,
                recorded,
                rounds: b.rounds.unwrap_or(10),
                seeds: b.seeds.unwrap_or_else(|| vec![0]),
                reflect_skip_success: b.reflect_skip_success.unwrap_or(false),
            },
            agent,
            editor,
            agent_system_prompt: read_prompt(prompts.agent_system, DEFAULT_AGENT_SYSTEM)?,
            editor_prompt: read_prompt(prompts.editor, DEFAULT_EDITOR)?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Experiment, ConfigError> {
        Experiment::parse(Path::new("exp.toml"), text)
    }

    #[test]
    fn defaults() {
        let e = parse("[bfcl]\n").unwrap();
        assert_eq!(e.bfcl.settings, ["names", "names+desc", "names+params"]);
        assert_eq!(e.bfcl.rounds, 10);
        assert!(e.agent.starts_with("embedded:"));
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
    fn unknown_key_is_rejected() {
        let err = parse("[bfcl]\nsetings = []\n").unwrap_err();
        assert!(err.to_string().contains("setings"), "{err}");
    }
}
