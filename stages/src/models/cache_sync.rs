//! The call cache of a store on object storage (`--store s3://...`): every
//! machine's completed calls reach the shared store, and every machine's mirror
//! gets the others' before it runs.
//!
//! Each machine's calls are first on its own disk, in its mirror's cache (as on a
//! local store: appended and fsynced the moment a call completes). They reach the
//! remote as **segments**: immutable objects `cache/llm/<sha256>.jsonl` holding the
//! log's lines as they are (each line carries its checksum), named by their content
//! and written create-only, so two machines never overwrite each other and a segment
//! written twice is the same object. A run on a remote store
//! - **pulls** before it starts: the segments its mirror has not merged are
//!   downloaded and merged ([`llm::CallCache::merge`]: a line is taken only when it
//!   passes its checksum and its request hashes to its key);
//! - **pushes** while it runs, every `OTB_CACHE_PUSH_S` seconds (default 30; a
//!   background thread, [`push_while`]), and when it ends, also after a
//!   failure: the records its mirror's log gained since the last push, as one
//!   segment.
//!
//! What each mirror has pushed (an offset in its log) and merged (segment names) is
//! kept beside its cache in `remote-sync.json` (written to a temporary file, synced,
//! renamed). A worker killed mid-run has sent every call that completed up to the
//! last push (a push interval before the kill at most); the rest stay in its mirror
//! and the next run there sends them. A failed push is a warning (the stages' results
//! are published already) and the next push retries it.

use super::Models;
use crate::error::Failure;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Where the segments live, below the remote store's prefix.
const SEGMENTS: &str = "cache/llm";

#[derive(Debug, Default, Serialize, Deserialize)]
struct State {
    /// The mirror log's offset up to which its records are on the remote.
    pushed: u64,
    /// Segments merged into (or pushed from) this mirror.
    seen: BTreeSet<String>,
}

/// The sync of one run: what the pull did, and what the push needs.
pub struct CacheSync {
    remote: pipeline::remote::Remote,
    cache: Arc<llm::CallCache>,
    state_path: PathBuf,
    state: State,
    /// Segments merged by the pull, and the calls they added.
    pub pulled: (usize, usize),
}

fn infra(what: &str, e: impl std::fmt::Display) -> Failure {
    Failure::infra(format!("the shared call cache: {what}: {e}"))
}

fn load(path: &Path) -> State {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

impl CacheSync {
    /// For a run (not a status walk) on a remote store: merges the segments this
    /// mirror lacks into its call cache. `None` for a local store.
    pub fn pull(store: &pipeline::Store, models: &Models) -> Result<Option<CacheSync>, Failure> {
        let Some(remote) = store.remote().cloned() else {
            return Ok(None);
        };
        let cache = models.call_cache()?;
        let state_path = models.cache_dir.join("remote-sync.json");
        let mut state = load(&state_path);
        let names = remote
            .list(SEGMENTS)
            .map_err(|e| infra("listing the segments", e))?;
        // With nothing of its own waiting to be sent, what the mirror merges now is
        // not sent back.
        let reading = |e| infra("reading the mirror's cache", e);
        let clean = cache.tail_from(state.pushed).map_err(reading)?.0.is_empty();
        let (mut segments, mut calls) = (0, 0);
        for name in names {
            if !name.ends_with(".jsonl") || state.seen.contains(&name) {
                continue;
            }
            let rel = format!("{SEGMENTS}/{name}");
            let Some(bytes) = remote.get_bytes(&rel).map_err(|e| infra(&rel, e))? else {
                continue;
            };
            let report = cache.merge(&bytes).map_err(|e| infra(&rel, e))?;
            if report.refused > 0 {
                eprintln!(
                    "otb: warning: {}/{rel}: {} line(s) refused (checksum, record or key)",
                    remote.url(),
                    report.refused
                );
            }
            segments += 1;
            calls += report.added;
            state.seen.insert(name);
        }
        if clean {
            state.pushed = cache.end().map_err(reading)?;
        }
        let mut sync = CacheSync {
            remote,
            cache,
            state_path,
            state,
            pulled: (segments, calls),
        };
        if segments > 0 {
            sync.save()?;
        }
        Ok(Some(sync))
    }

    fn save(&mut self) -> Result<(), Failure> {
        let bytes = serde_json::to_vec(&self.state).map_err(|e| infra("state", e))?;
        pipeline::write_atomic(&self.state_path, &bytes)
            .map_err(|e| infra(&self.state_path.display().to_string(), e))
    }

    /// Sends the records the mirror's cache gained since the last push as one
    /// segment; returns how many bytes went.
    pub fn push(&mut self) -> Result<usize, Failure> {
        let (bytes, end) = self
            .cache
            .tail_from(self.state.pushed)
            .map_err(|e| infra("reading the mirror's cache", e))?;
        if bytes.is_empty() {
            if end != self.state.pushed {
                self.state.pushed = end;
                self.save()?;
            }
            return Ok(0);
        }
        let n = bytes.len();
        let name = format!("{}.jsonl", hex::encode(Sha256::digest(&bytes)));
        let rel = format!("{SEGMENTS}/{name}");
        self.remote
            .put_new(&rel, bytes)
            .map_err(|e| infra(&rel, e))?;
        self.state.seen.insert(name);
        self.state.pushed = end;
        self.save()?;
        Ok(n)
    }
}

/// Runs `work` while a background thread pushes `sync`'s new calls every `every`
/// (nothing when `sync` is `None` or `every` is zero). A failed push is a warning,
/// said once until a push succeeds again; the next push retries it.
pub fn push_while<R>(
    sync: Option<&Mutex<CacheSync>>,
    every: Duration,
    work: impl FnOnce() -> R,
) -> R {
    let Some(sync) = sync else {
        return work();
    };
    let mut warned = false;
    let push = move || {
        let Ok(mut sync) = sync.lock() else { return };
        match sync.push() {
            Ok(_) => warned = false,
            Err(e) if !warned => {
                warned = true;
                eprintln!("otb: warning: {} (retried at the next push)", e.message);
            }
            Err(_) => {}
        }
    };
    pipeline::clock::ticking(every, push, work)
}
