//! Agents and editors backed by the `llm` crate (OpenAI-compatible endpoints and the
//! embedded model).

use crate::agents::{Agent, Editor};
use crate::InputError;

/// Validate a model spec without loading anything.
pub fn check_spec(spec: &str) -> Result<(), InputError> {
    match spec.split_once(':') {
        Some(("scripted", _)) => Ok(()),
        Some(("openai", m)) | Some(("embedded", m)) if !m.is_empty() => Ok(()),
        _ => Err(InputError(format!(
            "model `{spec}`: expected scripted:<name>, embedded:<name> or openai:<model>"
        ))),
    }
}

pub fn agent(spec: &str) -> Result<Box<dyn Agent>, InputError> {
    Err(InputError(format!("model `{spec}`: not wired yet")))
}

pub fn editor(spec: &str) -> Result<Box<dyn Editor>, InputError> {
    Err(InputError(format!("model `{spec}`: not wired yet")))
}
