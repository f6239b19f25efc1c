//! Stage keys: what identifies a stage run, and how two runs of the same stage differ.

use crate::digest::{canonical_json, Digest};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Everything that goes into a stage key. Outputs are never part of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct KeyComponents {
    /// Stage name, e.g. `evaluate`.
    pub stage: String,
    /// Stage code version: bumped by hand when the stage's semantics change.
    pub code_version: u32,
    /// Parameters (model, prompt template text, iteration, seed, budget...).
    pub params: Value,
    /// Input name -> digest of the upstream output table it reads.
    pub inputs: BTreeMap<String, Digest>,
}

impl KeyComponents {
    /// sha256 of the canonical encoding of the components.
    pub fn key(&self) -> Digest {
        let v = serde_json::json!({
            "stage": self.stage,
            "code_version": self.code_version,
            "params": self.params,
            "inputs": self.inputs,
        });
        Digest::of_bytes(canonical_json(&v).as_bytes())
    }

    /// What changed from `old` to `self`, as human-readable reasons (cargo's "dirty
    /// reasons"). Empty when the components are equal.
    pub fn changes_since(&self, old: &KeyComponents) -> Vec<Change> {
        let mut out = Vec::new();
        if self.stage != old.stage {
            out.push(Change::Stage {
                old: old.stage.clone(),
                new: self.stage.clone(),
            });
        }
        if self.code_version != old.code_version {
            out.push(Change::CodeVersion {
                old: old.code_version,
                new: self.code_version,
            });
        }
        diff_values("params", &old.params, &self.params, &mut out);
        for (name, new) in &self.inputs {
            match old.inputs.get(name) {
                Some(o) if o == new => {}
                Some(o) => out.push(Change::Input {
                    name: name.clone(),
                    old: Some(o.clone()),
                    new: Some(new.clone()),
                }),
                None => out.push(Change::Input {
                    name: name.clone(),
                    old: None,
                    new: Some(new.clone()),
                }),
            }
        }
        for (name, o) in &old.inputs {
            if !self.inputs.contains_key(name) {
                out.push(Change::Input {
                    name: name.clone(),
                    old: Some(o.clone()),
                    new: None,
                });
            }
        }
        out
    }
}

/// One reason why a stage's key differs from its previous run.
#[derive(Clone, Debug, PartialEq)]
pub enum Change {
    /// The stage name differs.
    Stage {
        /// The previous run's stage name.
        old: String,
        /// The current stage name.
        new: String,
    },
    /// The stage's code version was bumped (or lowered).
    CodeVersion {
        /// The previous run's code version.
        old: u32,
        /// The current code version.
        new: u32,
    },
    /// One parameter differs, was added or was removed.
    Param {
        /// Where in the params, e.g. `params.model` (object keys joined by `.`).
        path: String,
        /// The previous value; `None` when the parameter is new.
        old: Option<Value>,
        /// The current value; `None` when the parameter was removed.
        new: Option<Value>,
    },
    /// An input's upstream output digest differs, or the input was added or removed.
    Input {
        /// The input's name.
        name: String,
        /// The previous digest; `None` when the input is new.
        old: Option<Digest>,
        /// The current digest; `None` when the input was removed.
        new: Option<Digest>,
    },
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::Stage { old, new } => write!(f, "stage renamed {old} -> {new}"),
            Change::CodeVersion { old, new } => write!(f, "code version {old} -> {new}"),
            Change::Param { path, old, new } => write!(
                f,
                "{path}: {} -> {}",
                show_value(old.as_ref()),
                show_value(new.as_ref())
            ),
            Change::Input { name, old, new } => write!(
                f,
                "input `{name}` {} -> {}",
                old.as_ref().map(|d| d.short()).unwrap_or("(none)"),
                new.as_ref().map(|d| d.short()).unwrap_or("(none)")
            ),
        }
    }
}

fn show_value(v: Option<&Value>) -> String {
    match v {
        None => "(absent)".to_string(),
        Some(v) => {
            let s = canonical_json(v);
            if s.chars().count() > 40 {
                let head: String = s.chars().take(37).collect();
                format!(
                    "{head}... ({} bytes, sha {})",
                    s.len(),
                    &Digest::of_json(v).short()[..8]
                )
            } else {
                s
            }
        }
    }
}

fn diff_values(path: &str, old: &Value, new: &Value, out: &mut Vec<Change>) {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{path}.{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => diff_values(&p, x, y, out),
                    (x, y) => out.push(Change::Param {
                        path: p,
                        old: x.cloned(),
                        new: y.cloned(),
                    }),
                }
            }
        }
        (a, b) if a == b => {}
        (a, b) => out.push(Change::Param {
            path: path.to_string(),
            old: Some(a.clone()),
            new: Some(b.clone()),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn comps(params: Value) -> KeyComponents {
        KeyComponents {
            stage: "explore".into(),
            code_version: 1,
            params,
            inputs: BTreeMap::from([("tools".to_string(), Digest::of_bytes(b"t"))]),
        }
    }

    #[test]
    fn key_is_stable_under_param_order() {
        let a = comps(json!({"model": "m", "seed": 0}));
        let b = comps(serde_json::from_str(r#"{"seed":0,"model":"m"}"#).unwrap());
        assert_eq!(a.key(), b.key());
        assert_ne!(a.key(), comps(json!({"model": "m", "seed": 1})).key());
    }

    #[test]
    fn changes_name_the_param_path() {
        let old = comps(json!({"model": "m", "sampling": {"temperature": 0.0}}));
        let new = comps(json!({"model": "m", "sampling": {"temperature": 0.7}}));
        let ch = new.changes_since(&old);
        assert_eq!(ch.len(), 1);
        assert_eq!(ch[0].to_string(), "params.sampling.temperature: 0.0 -> 0.7");
    }

    #[test]
    fn changes_name_inputs_and_versions() {
        let old = comps(json!({}));
        let mut new = comps(json!({}));
        new.code_version = 2;
        new.inputs.insert("tools".into(), Digest::of_bytes(b"u"));
        let text: Vec<String> = new
            .changes_since(&old)
            .iter()
            .map(|c| c.to_string())
            .collect();
        assert_eq!(text[0], "code version 1 -> 2");
        assert!(text[1].starts_with("input `tools` "), "{}", text[1]);
    }
}
