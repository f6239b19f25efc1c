//! `manifest.json`: what a published stage output records about itself (written
//! last), and the accounting of its model calls.

use crate::digest::{canonical_json, Digest};
use crate::key::KeyComponents;
use crate::table::TableMeta;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of `manifest.json`.
pub const MANIFEST_VERSION: u32 = 1;

/// Token and call accounting of one stage run (sums of its model calls).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Model calls made, cached ones included.
    pub calls: u64,
    /// Calls answered from the call cache (a subset of `calls`).
    pub cached_calls: u64,
    /// Calls whose answer was a failure stored as a row (a subset of `calls`).
    pub errors: u64,
    /// Prompt (input) tokens, as the model reported them.
    pub prompt_tokens: u64,
    /// Completion (output) tokens, as the model reported them.
    pub completion_tokens: u64,
    /// Reasoning tokens, as the model reported them.
    pub reasoning_tokens: u64,
}

impl Usage {
    /// Add another run's counts; every counter saturates at `u64::MAX` (a model that
    /// reports absurd token counts must not wrap a sum around to a small number).
    pub fn add(&mut self, o: &Usage) {
        self.calls = self.calls.saturating_add(o.calls);
        self.cached_calls = self.cached_calls.saturating_add(o.cached_calls);
        self.errors = self.errors.saturating_add(o.errors);
        self.prompt_tokens = self.prompt_tokens.saturating_add(o.prompt_tokens);
        self.completion_tokens = self.completion_tokens.saturating_add(o.completion_tokens);
        self.reasoning_tokens = self.reasoning_tokens.saturating_add(o.reasoning_tokens);
    }

    /// Prompt + completion + reasoning tokens (saturating).
    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens
            .saturating_add(self.completion_tokens)
            .saturating_add(self.reasoning_tokens)
    }
}

/// `manifest.json` of one published stage output. Written last.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Version of this file's layout ([`MANIFEST_VERSION`]).
    pub manifest_version: u32,
    /// The stage key: the digest of `components`; also the entry's directory name.
    pub key: Digest,
    /// What the key was computed from.
    pub components: KeyComponents,
    /// Table name -> file, digest, rows, bytes.
    pub outputs: BTreeMap<String, TableMeta>,
    /// Digest over all output tables; this is what downstream keys include.
    pub output_digest: Digest,
    /// The experiment node that produced it, e.g. `explore[names/gpt-5/r2]`.
    pub node: String,
    /// Wall-clock time of the stage run, in milliseconds.
    pub wall_ms: u64,
    /// Model-call accounting of the stage run.
    pub usage: Usage,
    /// When the output was committed (Unix seconds).
    pub created_unix: u64,
}

/// Digest over a set of tables (name -> digest), independent of anything else.
pub fn output_digest(outputs: &BTreeMap<String, TableMeta>) -> Digest {
    let m: BTreeMap<&String, &Digest> = outputs.iter().map(|(k, v)| (k, &v.digest)).collect();
    Digest::of_bytes(canonical_json(&serde_json::json!(m)).as_bytes())
}
