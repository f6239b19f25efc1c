//! `otb cache stats` / `otb cache export`: what the LLM call cache holds.

use crate::Failure;
use pipeline::Row;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One cached model call, as exported to Parquet.
#[derive(Clone, Debug, Serialize, Deserialize, Row)]
#[row(
    table = "llm_calls",
    doc = "one completed model call from the call cache"
)]
pub struct CallRow {
    /// SHA-256 of the canonical request.
    pub key: String,
    /// Stage that made the call.
    pub stage: Option<String>,
    /// Backend that answered: `openai`, `embedded`, ...
    pub backend: String,
    /// Model name.
    pub model: String,
    /// When the call completed (Unix time, milliseconds).
    pub created_unix_ms: i64,
    /// Wall time of the call.
    pub latency_ms: i64,
    /// Prompt tokens.
    pub prompt_tokens: i64,
    /// Completion tokens.
    pub completion_tokens: i64,
    /// Reasoning tokens.
    pub reasoning_tokens: i64,
    /// Finish reason.
    pub finish_reason: Option<String>,
    /// Assistant text.
    pub content: Option<String>,
    /// Tool calls in the reply.
    pub n_tool_calls: i64,
    /// Tool calls whose arguments were not JSON.
    pub n_malformed_arguments: i64,
    /// Tool calls as a JSON array.
    pub tool_calls: String,
    /// The full request as JSON.
    pub request: String,
}

/// The call cache directory of the store at `store`: `<store>/cache/llm`.
pub fn cache_dir(store: &Path) -> PathBuf {
    store.join("cache").join("llm")
}

fn rows(store: &Path) -> Result<Vec<CallRow>, Failure> {
    let dir = cache_dir(store);
    if !dir.exists() {
        return Ok(Vec::new());
    }
    let entries = llm::read_entries(&dir)
        .map_err(|e| Failure::infra(format!("call cache {}: {e}", dir.display())))?;
    Ok(entries
        .into_iter()
        .map(|r| CallRow {
            key: r.key,
            stage: r.stage,
            backend: r.backend,
            model: r.model,
            created_unix_ms: r.created_unix_ms as i64,
            latency_ms: r.latency_ms as i64,
            prompt_tokens: r.prompt_tokens as i64,
            completion_tokens: r.completion_tokens as i64,
            reasoning_tokens: r.reasoning_tokens as i64,
            finish_reason: r.finish_reason,
            content: r.content,
            n_tool_calls: r.n_tool_calls as i64,
            n_malformed_arguments: r.n_malformed_arguments as i64,
            tool_calls: r.tool_calls_json,
            request: r.request_json,
        })
        .collect())
}

/// (calls, prompt, completion, reasoning tokens, malformed arguments).
type Totals = (u64, i64, i64, i64, i64);

/// Calls and tokens per (stage, model).
pub fn stats_text(store: &Path) -> Result<String, Failure> {
    let rows = rows(store)?;
    let mut by: BTreeMap<(String, String), Totals> = BTreeMap::new();
    for r in &rows {
        let e = by
            .entry((
                r.stage.clone().unwrap_or_else(|| "-".into()),
                r.model.clone(),
            ))
            .or_default();
        e.0 += 1;
        e.1 += r.prompt_tokens;
        e.2 += r.completion_tokens;
        e.3 += r.reasoning_tokens;
        e.4 += r.n_malformed_arguments;
    }
    let mut out = format!(
        "call cache {}: {} calls\n",
        cache_dir(store).display(),
        rows.len()
    );
    out.push_str("stage            model                            calls  prompt_tok  completion_tok  reasoning_tok  malformed_args\n");
    for ((stage, model), (n, p, c, r, m)) in by {
        out.push_str(&format!(
            "{stage:<16} {model:<32} {n:>5}  {p:>10}  {c:>14}  {r:>13}  {m:>14}\n"
        ));
    }
    Ok(out)
}

/// `otb cache export`: writes every cached call of `store` to the Parquet file `to`
/// (which must be outside the store); returns how many rows were written.
pub fn export(store: &Path, to: &Path) -> Result<usize, Failure> {
    // Never write into the store: it holds only what the store itself wrote.
    if pipeline::store::is_inside(to, store) {
        return Err(Failure::user(format!(
            "{}: is inside the store {}; export the cache to a path outside it",
            to.display(),
            store.display()
        )));
    }
    let rows = rows(store)?;
    pipeline::table::write_rows(&rows, to).map_err(|e| Failure::user(e.to_string()))?;
    Ok(rows.len())
}

/// What `otb cache import` did.
#[derive(Debug, Default, PartialEq)]
pub struct ImportReport {
    /// Calls added to the cache.
    pub added: usize,
    /// Calls the cache had already.
    pub present: usize,
    /// Rows refused: their request does not hash to their key, or a field does not
    /// parse (the file was edited or is not an export of this project).
    pub refused: usize,
}

/// `otb cache import FILE.parquet`: seed this store's call cache from a file written
/// by `otb cache export`, so a published run replays without a model. Every row's
/// request is hashed again and must equal its key.
pub fn import(store: &Path, from: &Path) -> Result<ImportReport, Failure> {
    if !from.is_file() {
        return Err(Failure::user(format!(
            "{}: no such file (expected a file written by `otb cache export`)",
            from.display()
        )));
    }
    let rows: Vec<CallRow> = pipeline::table::read_rows(from)
        .map_err(|e| Failure::user(format!("{}: not a call-cache export ({e})", from.display())))?;
    let dir = cache_dir(store);
    let cache = llm::CallCache::open(&dir)
        .map_err(|e| Failure::infra(format!("call cache {}: {e}", dir.display())))?;
    let mut report = ImportReport::default();
    for r in rows {
        let Ok(req) = serde_json::from_str::<llm::ChatRequest>(&r.request) else {
            report.refused += 1;
            continue;
        };
        if llm::request_key(&req) != r.key {
            report.refused += 1;
            continue;
        }
        let Ok(tool_calls) = serde_json::from_str::<Vec<llm::ToolCall>>(&r.tool_calls) else {
            report.refused += 1;
            continue;
        };
        if cache.contains(&r.key) {
            report.present += 1;
            continue;
        }
        let resp = llm::ChatResponse {
            content: r.content,
            tool_calls,
            usage: llm::Usage {
                prompt: r.prompt_tokens.max(0) as u64,
                completion: r.completion_tokens.max(0) as u64,
                reasoning: r.reasoning_tokens.max(0) as u64,
            },
            latency_ms: r.latency_ms.max(0) as u64,
            finish_reason: r.finish_reason,
        };
        let Ok(resp) = resp.checked() else {
            report.refused += 1;
            continue;
        };
        cache
            .put(&r.key, &req, &resp, r.stage.as_deref(), &r.backend)
            .map_err(|e| Failure::infra(format!("call cache {}: {e}", dir.display())))?;
        report.added += 1;
    }
    Ok(report)
}
