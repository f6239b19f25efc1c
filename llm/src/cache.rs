//! The call cache: every completed call, persisted the moment it completes.
//!
//! # Key
//!
//! `key = sha256("otb-llm-call-v1\n" || canonical_json(request))` where the
//! request is the whole [`ChatRequest`]:
//!
//! | in the key | not in the key |
//! |---|---|
//! | model, messages (incl. tool calls and results), tools (name, description, schema), tool_choice, sampling (temperature/top_p/max_tokens or reasoning_effort/max_completion_tokens), seed, sample_index | base URL, API key, timeout, retries, concurrency, backend kind, the stage label |
//!
//! `canonical_json` sorts object keys at every depth (independently of
//! serde_json's `preserve_order` feature) and writes no whitespace.
//!
//! # On disk
//!
//! `<dir>/calls.jsonl`: one JSON record per line, appended and `fdatasync`ed
//! before the response is returned to the caller. `<dir>/calls.lock` holds an
//! exclusive advisory lock while a [`CallCache`] is open (released by the OS
//! when the process dies, SIGKILL included).
//!
//! # Crash safety
//!
//! A crash can only cut the last line short. On open, a last line without its
//! newline, or one that does not parse, is cut off (the file is truncated to
//! the end of the last good record). Records are only ever appended, so every
//! complete line is a call that completed. Errors are never written.
//!
//! # Limits
//!
//! One writer process per cache directory (the lock enforces it). Two
//! identical requests in flight at once both reach the backend; the first
//! record wins.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::backend::{Backend, BoxFuture};
use crate::error::{ErrorKind, LlmError};
use crate::types::{ChatRequest, ChatResponse, Usage};

/// Format version written into every record.
pub const RECORD_VERSION: u32 = 1;
const KEY_DOMAIN: &str = "otb-llm-call-v1\n";
const LOG_FILE: &str = "calls.jsonl";
const LOCK_FILE: &str = "calls.lock";

/// Errors of the cache's own storage.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    #[error("call cache {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("call cache {path} is in use by another process (lock {lock} is held); wait for it or use another cache directory")]
    Locked { path: PathBuf, lock: PathBuf },
    #[error("call cache {path}: record at byte {offset} is unreadable: {reason}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        reason: String,
    },
}

impl From<CacheError> for LlmError {
    fn from(e: CacheError) -> Self {
        LlmError::new(ErrorKind::Fatal, e.to_string())
    }
}

/// The sha256 key of a request (hex).
pub fn request_key(req: &ChatRequest) -> String {
    let v = serde_json::to_value(req).unwrap_or(Value::Null);
    let mut s = String::with_capacity(1024);
    s.push_str(KEY_DOMAIN);
    canonical_json(&v, &mut s);
    hex::encode(Sha256::digest(s.as_bytes()))
}

/// Writes `v` as JSON with object keys sorted at every depth.
pub fn canonical_json(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                canonical_json(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                canonical_json(x, out);
            }
            out.push(']');
        }
        other => out.push_str(&other.to_string()),
    }
}

/// One line of `calls.jsonl`.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Record {
    v: u32,
    key: String,
    #[serde(default)]
    stage: Option<String>,
    #[serde(default)]
    backend: String,
    created_unix_ms: u64,
    response: ChatResponse,
    request: ChatRequest,
}

/// Only the key, for indexing without building the whole record.
#[derive(Deserialize)]
struct KeyOnly {
    key: String,
}

/// One cached call as a flat row, for export (e.g. to Parquet by the CLI).
#[derive(Debug, Clone, PartialEq)]
pub struct CacheRow {
    pub key: String,
    pub stage: Option<String>,
    pub backend: String,
    pub model: String,
    pub created_unix_ms: u64,
    pub latency_ms: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub reasoning_tokens: u64,
    pub finish_reason: Option<String>,
    pub content: Option<String>,
    /// Number of tool calls, and how many had arguments that are not JSON.
    pub n_tool_calls: u32,
    pub n_malformed_arguments: u32,
    /// The tool calls as a JSON array.
    pub tool_calls_json: String,
    /// The full request as JSON.
    pub request_json: String,
}

/// Where a record sits in the log.
#[derive(Debug, Clone, Copy)]
struct Span {
    offset: u64,
    len: u64,
}

/// What [`CallCache::open`] found and repaired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenReport {
    pub records: u64,
    /// Bytes cut off a torn last record.
    pub truncated_bytes: u64,
    /// Complete lines that did not parse (skipped; should never happen).
    pub skipped_lines: u64,
}

/// The persistent call cache (see the module docs).
pub struct CallCache {
    path: PathBuf,
    file: Mutex<File>,
    index: Mutex<HashMap<String, Span>>,
    _lock: File,
    report: OpenReport,
}

impl CallCache {
    /// Opens (creating) the cache in `dir`, takes the writer lock and repairs
    /// a torn tail.
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, CacheError> {
        let dir = dir.as_ref();
        let io = |source| CacheError::Io {
            path: dir.to_path_buf(),
            source,
        };
        std::fs::create_dir_all(dir).map_err(io)?;
        let lock_path = dir.join(LOCK_FILE);
        let lock = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(io)?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(CacheError::Locked {
                    path: dir.to_path_buf(),
                    lock: lock_path,
                })
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(io(e)),
        }
        let path = dir.join(LOG_FILE);
        let mut file = OpenOptions::new()
            .create(true)
            .read(true)
            .append(true)
            .open(&path)
            .map_err(io)?;
        let (index, good_end, mut report) = scan(&mut file, &path)?;
        let len = file.metadata().map_err(io)?.len();
        if good_end < len {
            // A torn last record: cut it off so the next append starts clean.
            file.set_len(good_end).map_err(io)?;
            file.sync_all().map_err(io)?;
            report.truncated_bytes = len - good_end;
        }
        report.records = index.len() as u64;
        Ok(CallCache {
            path,
            file: Mutex::new(file),
            index: Mutex::new(index),
            _lock: lock,
            report,
        })
    }

    /// What opening found.
    pub fn open_report(&self) -> OpenReport {
        self.report
    }

    /// Path of the log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of cached calls.
    pub fn len(&self) -> usize {
        self.index.lock().map(|i| i.len()).unwrap_or(0)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn contains(&self, key: &str) -> bool {
        self.index
            .lock()
            .map(|i| i.contains_key(key))
            .unwrap_or(false)
    }

    /// The cached response for `key`, if any.
    pub fn get(&self, key: &str) -> Result<Option<ChatResponse>, CacheError> {
        let span = match self.index.lock().ok().and_then(|i| i.get(key).copied()) {
            Some(s) => s,
            None => return Ok(None),
        };
        Ok(Some(self.read_record(span)?.response))
    }

    fn read_record(&self, span: Span) -> Result<Record, CacheError> {
        let mut buf = vec![0u8; span.len as usize];
        {
            let f = self.file.lock().map_err(|_| self.poisoned())?;
            f.read_exact_at(&mut buf, span.offset)
                .map_err(|source| CacheError::Io {
                    path: self.path.clone(),
                    source,
                })?;
        }
        serde_json::from_slice(&buf).map_err(|e| CacheError::Corrupt {
            path: self.path.clone(),
            offset: span.offset,
            reason: e.to_string(),
        })
    }

    fn poisoned(&self) -> CacheError {
        CacheError::Io {
            path: self.path.clone(),
            source: std::io::Error::other("cache mutex poisoned by a panic"),
        }
    }

    /// Appends a completed call and fsyncs before returning. A key that is
    /// already present is not written again.
    pub fn put(
        &self,
        key: &str,
        req: &ChatRequest,
        resp: &ChatResponse,
        stage: Option<&str>,
        backend: &str,
    ) -> Result<(), CacheError> {
        if self.contains(key) {
            return Ok(());
        }
        let rec = Record {
            v: RECORD_VERSION,
            key: key.to_owned(),
            stage: stage.map(str::to_owned),
            backend: backend.to_owned(),
            created_unix_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_millis() as u64)
                .unwrap_or(0),
            response: resp.clone(),
            request: req.clone(),
        };
        let mut line = serde_json::to_vec(&rec).map_err(|e| CacheError::Io {
            path: self.path.clone(),
            source: std::io::Error::other(e),
        })?;
        line.push(b'\n');
        let io = |source| CacheError::Io {
            path: self.path.clone(),
            source,
        };
        let mut f = self.file.lock().map_err(|_| self.poisoned())?;
        let offset = f.seek(SeekFrom::End(0)).map_err(io)?;
        f.write_all(&line).map_err(io)?;
        f.sync_data().map_err(io)?;
        drop(f);
        if let Ok(mut idx) = self.index.lock() {
            idx.entry(key.to_owned()).or_insert(Span {
                offset,
                len: line.len() as u64 - 1,
            });
        }
        Ok(())
    }

    /// All cached calls as flat rows, in the order they were completed.
    pub fn entries(&self) -> Result<Vec<CacheRow>, CacheError> {
        let mut spans: Vec<Span> = self
            .index
            .lock()
            .map_err(|_| self.poisoned())?
            .values()
            .copied()
            .collect();
        spans.sort_by_key(|s| s.offset);
        spans
            .into_iter()
            .map(|s| self.read_record(s).map(row_of))
            .collect()
    }
}

/// Reads the rows of the cache in `dir` without taking the writer lock
/// (e.g. for `otb export` while a run is going on). A torn tail is ignored,
/// not repaired.
pub fn read_entries(dir: impl AsRef<Path>) -> Result<Vec<CacheRow>, CacheError> {
    let path = dir.as_ref().join(LOG_FILE);
    let file = File::open(&path).map_err(|source| CacheError::Io {
        path: path.clone(),
        source,
    })?;
    let mut rows = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|source| CacheError::Io {
            path: path.clone(),
            source,
        })?;
        if let Ok(rec) = serde_json::from_slice::<Record>(&line) {
            if seen.insert(rec.key.clone()) {
                rows.push(row_of(rec));
            }
        }
    }
    Ok(rows)
}

fn row_of(r: Record) -> CacheRow {
    let resp = r.response;
    CacheRow {
        model: r.request.model.clone(),
        request_json: serde_json::to_string(&r.request).unwrap_or_default(),
        key: r.key,
        stage: r.stage,
        backend: r.backend,
        created_unix_ms: r.created_unix_ms,
        latency_ms: resp.latency_ms,
        prompt_tokens: resp.usage.prompt,
        completion_tokens: resp.usage.completion,
        reasoning_tokens: resp.usage.reasoning,
        finish_reason: resp.finish_reason,
        content: resp.content,
        n_tool_calls: resp.tool_calls.len() as u32,
        n_malformed_arguments: resp
            .tool_calls
            .iter()
            .filter(|c| c.arguments_malformed())
            .count() as u32,
        tool_calls_json: serde_json::to_string(&resp.tool_calls).unwrap_or_default(),
    }
}

/// Indexes the log: key -> span of its first complete record. Returns the
/// index and the end of the last good record. Streams the file (the log can
/// be large).
fn scan(
    file: &mut File,
    path: &Path,
) -> Result<(HashMap<String, Span>, u64, OpenReport), CacheError> {
    let io = |source| CacheError::Io {
        path: path.to_path_buf(),
        source,
    };
    file.seek(SeekFrom::Start(0)).map_err(io)?;
    let mut reader = BufReader::with_capacity(1 << 20, &*file);
    let mut index = HashMap::new();
    let mut report = OpenReport::default();
    let mut pos = 0u64;
    let mut good_end = 0u64;
    let mut line = Vec::new();
    let mut bad_since_good = 0u64;
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io)? as u64;
        if n == 0 {
            break;
        }
        if line.last() != Some(&b'\n') {
            break; // torn tail: no newline
        }
        let body = &line[..line.len() - 1];
        match serde_json::from_slice::<KeyOnly>(body) {
            Ok(k) => {
                index.entry(k.key).or_insert(Span {
                    offset: pos,
                    len: n - 1,
                });
                good_end = pos + n;
                // Bad lines followed by good ones are skipped, not cut.
                report.skipped_lines += bad_since_good;
                bad_since_good = 0;
            }
            // Bad lines after the last good one are the torn tail (cut by the caller).
            Err(_) => bad_since_good += 1,
        }
        pos += n;
    }
    Ok((index, good_end, report))
}

/// Counters of a [`CachedClient`] (shared by its clones).
#[derive(Debug, Default)]
pub struct CacheStats {
    hits: AtomicU64,
    misses: AtomicU64,
    errors: AtomicU64,
    prompt: AtomicU64,
    completion: AtomicU64,
    reasoning: AtomicU64,
}

/// A snapshot of [`CacheStats`]. Token counts cover every response returned
/// (hits and fresh calls), i.e. what the stage consumed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StatsSnapshot {
    pub hits: u64,
    pub misses: u64,
    pub errors: u64,
    pub usage: Usage,
}

impl CacheStats {
    fn add_usage(&self, u: &Usage) {
        self.prompt.fetch_add(u.prompt, Ordering::Relaxed);
        self.completion.fetch_add(u.completion, Ordering::Relaxed);
        self.reasoning.fetch_add(u.reasoning, Ordering::Relaxed);
    }
    pub fn snapshot(&self) -> StatsSnapshot {
        StatsSnapshot {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            errors: self.errors.load(Ordering::Relaxed),
            usage: Usage {
                prompt: self.prompt.load(Ordering::Relaxed),
                completion: self.completion.load(Ordering::Relaxed),
                reasoning: self.reasoning.load(Ordering::Relaxed),
            },
        }
    }
}

/// A backend behind the call cache: hit -> the stored response (no call);
/// miss -> call, persist, return. Errors pass through and are not stored.
/// Clones share the cache, the backend and the stats.
#[derive(Clone)]
pub struct CachedClient {
    backend: Arc<dyn Backend>,
    cache: Arc<CallCache>,
    stats: Arc<CacheStats>,
    stage: Option<Arc<str>>,
}

impl CachedClient {
    pub fn new(backend: Arc<dyn Backend>, cache: Arc<CallCache>) -> Self {
        CachedClient {
            backend,
            cache,
            stats: Arc::new(CacheStats::default()),
            stage: None,
        }
    }

    /// A clone that labels new records with `stage` and counts into fresh
    /// stats (so per-stage usage is `client.for_stage(..).stats()`).
    pub fn for_stage(&self, stage: &str) -> Self {
        CachedClient {
            backend: self.backend.clone(),
            cache: self.cache.clone(),
            stats: Arc::new(CacheStats::default()),
            stage: Some(stage.into()),
        }
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    pub fn cache(&self) -> &Arc<CallCache> {
        &self.cache
    }

    /// Answers `req` from the cache or the backend.
    pub async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let key = request_key(req);
        let cache = self.cache.clone();
        let k = key.clone();
        let hit = tokio::task::spawn_blocking(move || cache.get(&k))
            .await
            .map_err(|e| LlmError::new(ErrorKind::Fatal, format!("cache task failed: {e}")))??;
        if let Some(resp) = hit {
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
            self.stats.add_usage(&resp.usage);
            return Ok(resp);
        }
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        let resp = match self.backend.chat(req).await {
            Ok(r) => r,
            Err(e) => {
                self.stats.errors.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        };
        self.stats.add_usage(&resp.usage);
        let cache = self.cache.clone();
        let (req2, resp2) = (req.clone(), resp.clone());
        let stage = self.stage.clone();
        let backend = self.backend.name().to_owned();
        tokio::task::spawn_blocking(move || {
            cache.put(&key, &req2, &resp2, stage.as_deref(), &backend)
        })
        .await
        .map_err(|e| LlmError::new(ErrorKind::Fatal, format!("cache task failed: {e}")))??;
        Ok(resp)
    }
}

impl Backend for CachedClient {
    fn chat<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(CachedClient::chat(self, req))
    }
    fn name(&self) -> &str {
        self.backend.name()
    }
}

/// The `replay` backend: answers only from the cache. A miss is a
/// [`ErrorKind::CacheMiss`] error naming the request hash and the stage.
pub struct Replay {
    cache: Arc<CallCache>,
    stage: String,
}

impl Replay {
    pub fn new(cache: Arc<CallCache>, stage: impl Into<String>) -> Self {
        Replay {
            cache,
            stage: stage.into(),
        }
    }
}

impl Backend for Replay {
    fn chat<'a>(&'a self, req: &'a ChatRequest) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
        Box::pin(async move {
            let key = request_key(req);
            match self.cache.get(&key)? {
                Some(r) => Ok(r),
                None => Err(LlmError::new(
                    ErrorKind::CacheMiss,
                    format!(
                        "replay: no cached response for request {key} (stage {}, model {}, sample {}) in {}",
                        self.stage,
                        req.model,
                        req.sample_index,
                        self.cache.path().display()
                    ),
                )),
            }
        })
    }
    fn name(&self) -> &str {
        "replay"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{Message, Sampling, ToolChoice};

    fn req(q: &str) -> ChatRequest {
        ChatRequest::new("m", vec![Message::user(q)])
    }

    #[test]
    fn key_covers_request_fields_but_not_key_order() {
        let base = req("hi");
        let k = request_key(&base);
        let mut r = base.clone();
        r.sample_index = 1;
        assert_ne!(request_key(&r), k);
        let mut r = base.clone();
        r.seed = Some(1);
        assert_ne!(request_key(&r), k);
        let mut r = base.clone();
        r.tool_choice = ToolChoice::Required;
        assert_ne!(request_key(&r), k);
        let mut r = base.clone();
        r.sampling = Sampling::Standard {
            temperature: Some(0.7),
            top_p: None,
            max_tokens: None,
        };
        assert_ne!(request_key(&r), k);
        let a: Value = serde_json::from_str(r#"{"b":1,"a":{"d":2,"c":3}}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":{"c":3,"d":2},"b":1}"#).unwrap();
        let (mut sa, mut sb) = (String::new(), String::new());
        canonical_json(&a, &mut sa);
        canonical_json(&b, &mut sb);
        assert_eq!(sa, sb);
        assert_eq!(sa, r#"{"a":{"c":3,"d":2},"b":1}"#);
    }

    #[test]
    fn key_is_stable_across_versions() {
        // Pinned: changing it invalidates every cache on disk.
        assert_eq!(
            request_key(&req("hi")),
            "f9ee5f00187817728f915c758ebf354110fa905444196aeeadad1bc2b854fb32"
        );
    }

    #[test]
    fn torn_tail_is_cut_and_records_survive() {
        let dir = tempdir("torn");
        {
            let c = CallCache::open(&dir).unwrap();
            for q in ["a", "b"] {
                let r = req(q);
                c.put(&request_key(&r), &r, &ChatResponse::text(q), Some("s"), "t")
                    .unwrap();
            }
        }
        let log = dir.join(LOG_FILE);
        let mut f = OpenOptions::new().append(true).open(&log).unwrap();
        f.write_all(br#"{"v":1,"key":"abc","stag"#).unwrap();
        drop(f);
        let c = CallCache::open(&dir).unwrap();
        assert_eq!(c.open_report().records, 2);
        assert!(c.open_report().truncated_bytes > 0);
        let r = req("c");
        c.put(&request_key(&r), &r, &ChatResponse::text("c"), None, "t")
            .unwrap();
        drop(c);
        let c = CallCache::open(&dir).unwrap();
        assert_eq!(c.open_report().truncated_bytes, 0);
        let rows = c.entries().unwrap();
        let contents: Vec<_> = rows.iter().map(|r| r.content.clone().unwrap()).collect();
        assert_eq!(contents, ["a", "b", "c"]);
        assert_eq!(read_entries(&dir).unwrap(), rows);
        assert_eq!(
            c.get(&request_key(&req("b")))
                .unwrap()
                .unwrap()
                .content
                .as_deref(),
            Some("b")
        );
    }

    #[test]
    fn second_writer_is_refused() {
        let dir = tempdir("lock");
        let _a = CallCache::open(&dir).unwrap();
        assert!(matches!(
            CallCache::open(&dir),
            Err(CacheError::Locked { .. })
        ));
    }

    pub(crate) fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "otb-llm-{tag}-{}-{}",
            std::process::id(),
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
