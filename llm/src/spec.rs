//! Model specs: the one grammar every model is named by (`kind:name`), and opening
//! the backend a model-backed spec names.
//!
//! - `embedded:<name>`: a GGUF model run in-process ([`crate::models`] lists the
//!   names; `OTB_EMBEDDED_MODEL` may name a file instead);
//! - `openai:<model>`: an OpenAI-compatible endpoint (`OTB_LLM_BASE_URL`, ...);
//! - `replay:<model>`: answers only from the call cache;
//! - `scripted:<name>`: a deterministic program of the caller's (tests, oracles);
//!   not a backend this crate opens.

use crate::{Backend, CallCache, LlmError, EMBEDDED_REVISION};
use std::fmt;
use std::sync::Arc;

/// Which family a model spec names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ModelKind {
    /// `scripted:<name>`: a program of the caller's, never a backend of this crate.
    Scripted,
    /// `embedded:<name>`: a model run in-process.
    Embedded,
    /// `openai:<model>`: an OpenAI-compatible endpoint.
    OpenAi,
    /// `replay:<model>`: the call cache only.
    Replay,
}

impl ModelKind {
    const ALL: [(ModelKind, &'static str); 4] = [
        (ModelKind::Scripted, "scripted"),
        (ModelKind::Embedded, "embedded"),
        (ModelKind::OpenAi, "openai"),
        (ModelKind::Replay, "replay"),
    ];

    /// The kind as written before the colon.
    pub fn as_str(self) -> &'static str {
        Self::ALL
            .iter()
            .find(|(k, _)| *k == self)
            .map(|(_, s)| *s)
            .unwrap_or("")
    }
}

/// A model spec (`kind:name`), parsed once. It serialises as the string it was
/// written as, so the keys that hold it do not depend on this type; an `embedded:`
/// spec adds the embedded backend's revision ([`EMBEDDED_REVISION`]), so a stage
/// that an embedded model feeds is computed again when the backend changes.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ModelSpec {
    /// The family.
    pub kind: ModelKind,
    /// The name after the colon.
    pub name: String,
}

/// A spec that does not follow the grammar (the message names it).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SpecError(pub String);

impl ModelSpec {
    /// What a spec looks like, for error messages.
    pub const GRAMMAR: &'static str =
        "expected `scripted:<name>`, `embedded:<name>`, `openai:<model>` or `replay:<model>`";

    /// Parse the grammar only (no file or model is looked at).
    pub fn parse(spec: &str) -> Result<ModelSpec, SpecError> {
        let bad = || SpecError(format!("model `{spec}`: {}", Self::GRAMMAR));
        let (kind, name) = spec.split_once(':').ok_or_else(bad)?;
        let kind = ModelKind::ALL
            .iter()
            .find(|(_, s)| *s == kind)
            .map(|(k, _)| *k)
            .ok_or_else(bad)?;
        if name.trim().is_empty() || name.trim() != name {
            return Err(bad());
        }
        Ok(ModelSpec {
            kind,
            name: name.to_string(),
        })
    }

    /// A short, node-name friendly tag (`openai:gpt-5` -> `gpt-5`).
    pub fn tag(&self) -> &str {
        &self.name
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.name)
    }
}

impl ModelSpec {
    /// What an `embedded:` spec's keys hold: the spec, the backend's revision and,
    /// when `OTB_EMBEDDED_MODEL` names the model file, that file's identity
    /// ([`crate::models::file_identity`]).
    fn embedded_key(&self, file: Option<&str>) -> String {
        match file {
            None => format!("{self} (embedded backend revision {EMBEDDED_REVISION})"),
            Some(id) => format!(
                "{self} (embedded backend revision {EMBEDDED_REVISION}, OTB_EMBEDDED_MODEL file of {id})"
            ),
        }
    }
}

impl serde::Serialize for ModelSpec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self.kind {
            ModelKind::Embedded => {
                let file = crate::models::override_identity().map_err(serde::ser::Error::custom)?;
                s.collect_str(&self.embedded_key(file.as_deref()))
            }
            _ => s.collect_str(self),
        }
    }
}

/// Whose failure opening a backend was.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// The user's to fix: an endpoint variable, an unknown model name, a model file
    /// they named that does not load.
    User,
    /// The machine's or the network's: a download failed, a file this crate fetched
    /// and verified does not load.
    Infrastructure,
    /// The caller's mistake: a scripted spec has no backend here.
    Bug,
}

/// Opening a backend failed: whose fault, and a one-line message naming the spec.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct OpenError {
    /// Whose failure it is.
    pub fault: Fault,
    /// The line to show.
    pub message: String,
}

/// The backend `spec` names and the model name to send with each request. A
/// `replay:` backend answers from `cache`; `embedded:` loads the model (fetching
/// its pinned file on first use unless `OTB_EMBEDDED_MODEL` names one).
pub fn open_backend(
    spec: &ModelSpec,
    cache: &Arc<CallCache>,
) -> Result<(Arc<dyn Backend>, String), OpenError> {
    open_backend_with(spec, cache, &[])
}

/// [`open_backend`], an `openai:` model reaching `endpoints` (an experiment's
/// `[models] endpoints`) unless `OTB_LLM_BASE_URL` names its servers.
pub fn open_backend_with(
    spec: &ModelSpec,
    cache: &Arc<CallCache>,
    endpoints: &[String],
) -> Result<(Arc<dyn Backend>, String), OpenError> {
    // Configuring an endpoint fails only on what the user set (the base URL, the
    // API key variables).
    let user = |e: LlmError| OpenError {
        fault: Fault::User,
        message: format!("model `{spec}`: {e}"),
    };
    let m = spec.name.clone();
    match spec.kind {
        ModelKind::OpenAi => Ok((
            Arc::new(crate::OpenAiBackend::from_env_with(endpoints).map_err(user)?),
            m,
        )),
        ModelKind::Replay => Ok((Arc::new(crate::Replay::new(cache.clone(), "replay")), m)),
        ModelKind::Embedded => embedded(spec, &m),
        ModelKind::Scripted => Err(OpenError {
            fault: Fault::Bug,
            message: format!("model `{spec}`: not a model-backed spec"),
        }),
    }
}

#[cfg(feature = "embedded")]
fn embedded(spec: &ModelSpec, name: &str) -> Result<(Arc<dyn Backend>, String), OpenError> {
    let user_file = std::env::var("OTB_EMBEDDED_MODEL")
        .ok()
        .filter(|p| !p.trim().is_empty());
    let path = match &user_file {
        Some(p) => std::path::PathBuf::from(p),
        None => crate::fetch_model(name, &crate::models::default_cache_dir()).map_err(|e| {
            let fault = match e {
                crate::ModelError::Unknown { .. } | crate::ModelError::OverrideMissing(_) => {
                    Fault::User
                }
                crate::ModelError::Io { .. } | crate::ModelError::Fetch(_) => Fault::Infrastructure,
            };
            OpenError {
                fault,
                message: format!("model `{spec}`: {e}"),
            }
        })?,
    };
    // The model's name in requests, and so in the call cache's keys: a file the
    // user named adds its identity, so its calls never answer for the pinned model's.
    let name = match &user_file {
        None => name.to_string(),
        Some(_) => {
            let id = crate::models::file_identity(&path).map_err(|e| OpenError {
                fault: Fault::User,
                message: format!("model `{spec}`: {e}"),
            })?;
            format!("{name} (OTB_EMBEDDED_MODEL file of {id})")
        }
    };
    let mut cfg = crate::EmbeddedConfig::new(path);
    cfg.draft_model = draft_model(spec)?;
    // A file the user named that does not load is theirs to fix; the verified
    // file this crate fetched failing to load is not.
    let backend = crate::EmbeddedBackend::load(cfg).map_err(|e| OpenError {
        fault: if user_file.is_some() || std::env::var_os("OTB_EMBEDDED_DRAFT").is_some() {
            Fault::User
        } else {
            Fault::Infrastructure
        },
        message: format!("model `{spec}`: {e}"),
    })?;
    Ok((Arc::new(backend), name))
}

/// What the embedded model's variables name, checked without opening anything (a
/// run calls it before it writes anything; a fully cached run opens no model, so
/// only the names are checked): `OTB_EMBEDDED_MODEL`, when set, must be a file, and
/// `OTB_EMBEDDED_DRAFT`, when set, a file or a known model's name.
pub fn check_embedded_env() -> Result<(), String> {
    // The same readers as the loaders use.
    crate::models::override_path().map_err(|e| e.to_string())?;
    if let Some(v) = draft_setting() {
        if !std::path::Path::new(&v).is_file() {
            crate::models::spec(&v).map_err(|e| {
                format!("OTB_EMBEDDED_DRAFT={v} is neither a file nor a known model: {e}")
            })?;
        }
    }
    Ok(())
}

/// `OTB_EMBEDDED_DRAFT`, trimmed; unset or blank: `None`.
fn draft_setting() -> Option<String> {
    std::env::var("OTB_EMBEDDED_DRAFT")
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The draft model of speculative decoding: `OTB_EMBEDDED_DRAFT`, a known
/// model's name (fetched like the model) or a GGUF file; unset or empty: none.
#[cfg(feature = "embedded")]
fn draft_model(spec: &ModelSpec) -> Result<Option<std::path::PathBuf>, OpenError> {
    let Some(v) = draft_setting() else {
        return Ok(None);
    };
    let p = std::path::PathBuf::from(&v);
    if p.is_file() {
        return Ok(Some(p));
    }
    crate::fetch_model(&v, &crate::models::default_cache_dir())
        .map(Some)
        .map_err(|e| OpenError {
            fault: match e {
                crate::ModelError::Io { .. } | crate::ModelError::Fetch(_) => Fault::Infrastructure,
                _ => Fault::User,
            },
            message: format!("model `{spec}`: OTB_EMBEDDED_DRAFT={v}: {e}"),
        })
}

#[cfg(not(feature = "embedded"))]
fn embedded(spec: &ModelSpec, _name: &str) -> Result<(Arc<dyn Backend>, String), OpenError> {
    Err(OpenError {
        fault: Fault::User,
        message: format!(
            "model `{spec}`: this otb was built without the embedded model (feature `embedded`); set OTB_LLM_BASE_URL and use openai:<model>"
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grammar_round_trips_and_refuses_the_rest() {
        let s = ModelSpec::parse("openai:gpt-5").unwrap();
        assert_eq!((s.kind, s.tag()), (ModelKind::OpenAi, "gpt-5"));
        assert_eq!(s.to_string(), "openai:gpt-5");
        assert_eq!(serde_json::to_value(&s).unwrap(), "openai:gpt-5");
        for bad in ["gpt-5", "cloud:x", "embedded:", "openai: x", "scripted:x "] {
            let e = ModelSpec::parse(bad).unwrap_err();
            assert!(e.0.contains(ModelSpec::GRAMMAR), "{bad}: {e}");
        }
    }

    /// Stage keys hold specs as serialised: the embedded backend's revision is in an
    /// embedded spec's, and no other kind's key material changes with it.
    #[test]
    fn an_embedded_spec_serialises_with_the_backends_revision() {
        let key = |spec: &str| serde_json::to_value(ModelSpec::parse(spec).unwrap()).unwrap();
        assert_eq!(
            key("embedded:qwen2.5-coder-1.5b"),
            format!("embedded:qwen2.5-coder-1.5b (embedded backend revision {EMBEDDED_REVISION})")
                .as_str()
        );
        for other in ["openai:gpt-5", "replay:gpt-5", "scripted:random"] {
            assert_eq!(key(other), other);
        }
        // What a person reads stays the spec as written.
        let s = ModelSpec::parse("embedded:qwen2.5-coder-1.5b").unwrap();
        assert_eq!(s.to_string(), "embedded:qwen2.5-coder-1.5b");
    }

    /// A model file named by `OTB_EMBEDDED_MODEL` is in the key by its identity:
    /// two files differing in size, in their first or in their last MiB have two
    /// keys; the same bytes elsewhere have one.
    #[test]
    fn a_users_model_file_is_in_the_key_by_its_bytes() {
        let dir = crate::cache::tests::tempdir("identity");
        let s = ModelSpec::parse("embedded:qwen2.5-coder-1.5b").unwrap();
        let mib = 1usize << 20;
        let base: Vec<u8> = (0..3 * mib + 5).map(|i| (i % 251) as u8).collect();
        let mut head = base.clone();
        head[10] ^= 1;
        let mut tail = base.clone();
        tail[3 * mib] ^= 1;
        let mut middle = base.clone();
        middle[mib + 7] ^= 1;
        let shorter = base[..base.len() - 1].to_vec();
        let key = |name: &str, bytes: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, bytes).unwrap();
            s.embedded_key(Some(&crate::models::file_identity(&p).unwrap()))
        };
        let k = key("base.gguf", &base);
        assert_eq!(
            k,
            format!(
                "embedded:qwen2.5-coder-1.5b (embedded backend revision {EMBEDDED_REVISION}, OTB_EMBEDDED_MODEL file of {} bytes, first and last MiB sha256 {})",
                base.len(),
                k.rsplit(' ').next().unwrap().trim_end_matches(')')
            )
        );
        assert_eq!(key("copy.gguf", &base), k);
        for (name, bytes) in [("head", &head), ("tail", &tail), ("shorter", &shorter)] {
            assert_ne!(key(name, bytes), k, "{name}");
        }
        // The middle is not read (a whole 1 GB file would cost seconds per run).
        assert_eq!(key("middle", &middle), k);
        // Small files are read whole.
        assert_ne!(key("a", b"ab"), key("b", b"ac"));
        assert!(crate::models::file_identity(&dir.path().join("none")).is_err());
    }

    #[test]
    fn a_scripted_spec_has_no_backend() {
        let dir = crate::cache::tests::tempdir("spec");
        let cache = Arc::new(CallCache::open(&dir).unwrap());
        let spec = ModelSpec::parse("scripted:x").unwrap();
        let e = open_backend(&spec, &cache).err().unwrap();
        assert_eq!(e.fault, Fault::Bug);
        let spec = ModelSpec::parse("replay:m").unwrap();
        assert_eq!(open_backend(&spec, &cache).unwrap().1, "m");
    }
}
