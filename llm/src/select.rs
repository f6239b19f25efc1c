//! Picks the backend from the environment, for the CLI.
//!
//! | `OTB_LLM_BACKEND` | `OTB_LLM_BASE_URL` | backend |
//! |---|---|---|
//! | `openai` | any | [`OpenAiBackend::from_env`] |
//! | `embedded` | any | embedded model (feature `embedded`) |
//! | unset | set | `openai` |
//! | unset | unset | `embedded` (the default when no endpoint is configured) |
//!
//! The embedded model is `OTB_EMBEDDED_MODEL` (a path), else the model named
//! by `OTB_EMBEDDED_MODEL_NAME` (default [`crate::models::DEFAULT_MODEL`]),
//! fetched into [`crate::models::default_cache_dir`].

use std::sync::Arc;

use crate::backend::Backend;
use crate::error::{ErrorKind, LlmError};
use crate::openai::OpenAiBackend;

/// Which backend the environment asks for (`"openai"` or `"embedded"`).
pub fn backend_kind_from_env() -> Result<&'static str, LlmError> {
    let var = |k: &str| std::env::var(k).ok().filter(|v| !v.trim().is_empty());
    match var("OTB_LLM_BACKEND").as_deref().map(str::trim) {
        Some("openai") => Ok("openai"),
        Some("embedded") => Ok("embedded"),
        Some(other) => Err(LlmError::new(
            ErrorKind::Fatal,
            format!("OTB_LLM_BACKEND={other:?} is not one of: openai, embedded"),
        )),
        None if var("OTB_LLM_BASE_URL").is_some() => Ok("openai"),
        None => Ok("embedded"),
    }
}

/// Builds the backend the environment asks for (see the module docs).
pub fn backend_from_env() -> Result<Arc<dyn Backend>, LlmError> {
    match backend_kind_from_env()? {
        "openai" => Ok(Arc::new(OpenAiBackend::from_env()?)),
        _ => embedded_from_env(),
    }
}

#[cfg(feature = "embedded")]
fn embedded_from_env() -> Result<Arc<dyn Backend>, LlmError> {
    let name = std::env::var("OTB_EMBEDDED_MODEL_NAME")
        .ok()
        .filter(|v| !v.trim().is_empty())
        .unwrap_or_else(|| crate::models::DEFAULT_MODEL.to_owned());
    let path = crate::models::fetch_model(&name, &crate::models::default_cache_dir())
        .map_err(|e| LlmError::new(ErrorKind::Fatal, e.to_string()))?;
    let cfg = crate::embedded::EmbeddedConfig::new(path);
    Ok(Arc::new(crate::embedded::EmbeddedBackend::load(cfg)?))
}

#[cfg(not(feature = "embedded"))]
fn embedded_from_env() -> Result<Arc<dyn Backend>, LlmError> {
    Err(LlmError::new(
        ErrorKind::Fatal,
        "no LLM endpoint configured (set OTB_LLM_BASE_URL) and this build has no embedded model (build with feature `embedded`)",
    ))
}
