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
//! before the response is returned to the caller. Each record (format
//! version 2) ends with a checksum field, `"sum"`: the first 16 hex digits
//! of the sha256 of the line's bytes before `,"sum":`. The line stays plain
//! JSON. Version-1 records (no checksum, written before checksums existed)
//! are still read, unchecked, and counted in the [`OpenReport`]; nothing is
//! converted. A version-2 line without a valid checksum is never taken for
//! a version-1 one.
//!
//! `<dir>/calls.lock` holds an exclusive advisory lock: for the cache's
//! lifetime ([`CallCache::open`], [`LockMode::Exclusive`]), or only while
//! opening and while appending one record ([`CallCache::open_per_write`],
//! [`LockMode::PerWrite`]; records other processes appended are indexed on
//! a lookup miss and before each append). The OS releases it when the
//! process dies, SIGKILL included.
//!
//! # Crash safety and repair
//!
//! A crash can only cut the last line short. `open` checks every line and
//! reports what it did ([`OpenReport`], nothing is silent):
//!
//! - a line that fails its checksum or does not parse is not indexed and is
//!   listed with its byte offset; bad lines before the last good record are
//!   left in the file;
//! - bytes after the last good record are cut off; when they hold a
//!   complete line (not just a torn last record) they are first saved to
//!   `calls.jsonl.corrupt-<n>`;
//! - a log with no good record at all is never truncated to nothing: it is
//!   moved to `calls.jsonl.corrupt-<n>` and the cache starts empty.
//!
//! A write that fails part-way is cut off at once, and if that fails too,
//! before the next record is appended, so a partial record never swallows
//! the next one. Every read checks the record's checksum again. Records
//! are only ever appended, so every good line is a call that completed.
//! Errors are never written. Records nest at most [`MAX_RECORD_DEPTH`]
//! levels (what serde_json reads back); a deeper one is refused at write.
//!
//! # Limits
//!
//! With [`LockMode::Exclusive`], one writer process per cache directory
//! (the lock enforces it); per-write caches can share a directory with each
//! other and, between its runs, with an exclusive one. Moving an unusable
//! log aside while another per-write process has it open leaves that
//! process appending to the moved file until it reopens. Two identical
//! requests in flight at once both reach the backend; the first record
//! wins.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::backend::{Backend, BoxFuture};
use crate::error::{ErrorKind, LlmError};
use crate::types::{json_depth, ChatRequest, ChatResponse, Usage, MAX_RECORD_DEPTH};

/// Format version written into every record: 2 = the line ends with a
/// checksum (`"sum"`); 1 = no checksum (still read).
pub const RECORD_VERSION: u32 = 2;
const KEY_DOMAIN: &str = "otb-llm-call-v1\n";
const LOG_FILE: &str = "calls.jsonl";
const LOCK_FILE: &str = "calls.lock";
/// The end of a sealed record: `,"sum":"` + 16 hex digits + `"}`.
const SUM_OPEN: &[u8] = b",\"sum\":\"";
const SUM_HEX: usize = 16;
const SUM_SUFFIX_LEN: usize = SUM_OPEN.len() + SUM_HEX + 2;
/// How long `open` waits for a lock that another writer holds for a moment
/// (a per-write cache appending one record) before refusing.
const OPEN_LOCK_WAIT: Duration = Duration::from_secs(2);
/// How long a per-write cache waits for the lock to append one record.
const PUT_LOCK_WAIT: Duration = Duration::from_secs(30);

/// Errors of the cache's own storage.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// A file operation on the cache failed (or its mutex was poisoned by a
    /// panic).
    #[error("call cache {path}: {source}")]
    Io {
        /// The cache directory or its log file.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Another process holds the writer lock past the wait (2 s to open,
    /// 30 s for one append of a per-write cache).
    #[error("call cache {path} is in use by another process (lock {lock} is held); wait for it or use another cache directory")]
    Locked {
        /// The cache directory (when opening) or its log file (when
        /// appending).
        path: PathBuf,
        /// The lock file, `calls.lock`.
        lock: PathBuf,
    },
    /// A record that was indexed fails its checksum or does not parse as a
    /// record when read back (e.g. the file changed after it was opened).
    #[error("call cache {path}: record at byte {offset} is unreadable: {reason}")]
    Corrupt {
        /// The log file, `calls.jsonl`.
        path: PathBuf,
        /// Byte offset of the record's line in the log.
        offset: u64,
        /// Why it is unreadable (checksum mismatch, parse error, ...).
        reason: String,
    },
    /// Refused write: the record's JSON nests deeper than the cache can
    /// read back.
    #[error("call cache {path}: a record for this call would nest {depth} levels deep, more than the {max} the cache can read back; it is not stored")]
    TooDeep {
        /// The log file, `calls.jsonl`.
        path: PathBuf,
        /// Nesting depth of the record's JSON.
        depth: usize,
        /// The limit, [`MAX_RECORD_DEPTH`].
        max: usize,
    },
}

impl From<CacheError> for LlmError {
    /// Every failure of the cache's own storage (I/O, a busy lock, a corrupt
    /// record) is `local_io`: infrastructure, not the model's answer.
    fn from(e: CacheError) -> Self {
        LlmError::new(ErrorKind::LocalIo, e.to_string())
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

/// `req` as the call cache keys it for a backend of `revision`
/// ([`Backend::revision`]): with that revision set; unchanged for a backend without.
fn with_revision(req: &ChatRequest, revision: Option<u32>) -> Cow<'_, ChatRequest> {
    match revision {
        Some(r) if req.backend_revision != Some(r) => Cow::Owned(ChatRequest {
            backend_revision: Some(r),
            ..req.clone()
        }),
        _ => Cow::Borrowed(req),
    }
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

/// One line of `calls.jsonl` (a sealed line also has `sum`, which serde
/// ignores here: it is checked on the bytes).
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

/// Only the key and version, for indexing without building the whole record.
#[derive(Deserialize)]
struct KeyOnly {
    key: String,
    #[serde(default)]
    v: u32,
}

/// One cached call as a flat row, for export (e.g. to Parquet by the CLI).
#[derive(Debug, Clone, PartialEq)]
pub struct CacheRow {
    /// The request's key ([`request_key`], sha256 hex).
    pub key: String,
    /// The stage that made the call; `None` when the client had none.
    pub stage: Option<String>,
    /// Name of the backend that answered (empty in records older than the
    /// field).
    pub backend: String,
    /// The requested model's name.
    pub model: String,
    /// When the record was written, milliseconds since the Unix epoch.
    pub created_unix_ms: u64,
    /// Wall time of the call, milliseconds.
    pub latency_ms: u64,
    /// Input tokens.
    pub prompt_tokens: u64,
    /// Output tokens.
    pub completion_tokens: u64,
    /// Reasoning tokens (part of `completion_tokens` where reported).
    pub reasoning_tokens: u64,
    /// Why generation stopped, as the backend reported it.
    pub finish_reason: Option<String>,
    /// The reply's text; `None` when it only made tool calls.
    pub content: Option<String>,
    /// Number of tool calls.
    pub n_tool_calls: u32,
    /// How many of the tool calls had arguments that are not JSON.
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

/// The checksum of a record's bytes: the first 8 bytes of their sha256, hex.
fn checksum(bytes: &[u8]) -> String {
    hex::encode(&Sha256::digest(bytes)[..SUM_HEX / 2])
}

/// Turns a serialised record (a JSON object) into a sealed line: the
/// checksum of everything before `,"sum":` is added as the last field, and
/// a newline ends the line. The line stays plain JSON (greppable, `jq`-able).
fn seal(mut json: Vec<u8>) -> Vec<u8> {
    if json.last() == Some(&b'}') {
        json.pop();
    }
    let sum = checksum(&json);
    json.extend_from_slice(SUM_OPEN);
    json.extend_from_slice(sum.as_bytes());
    json.extend_from_slice(b"\"}\n");
    json
}

/// Checks one line (without its newline) and returns its key, or why it
/// cannot be used. A sealed line must match its checksum; an unsealed one
/// must be a version-1 record that parses (the format before checksums).
/// The bool is true for an unsealed (unchecked) record.
fn check_line(line: &[u8]) -> Result<(String, bool), String> {
    let sealed = line.len() >= SUM_SUFFIX_LEN && {
        let tail = &line[line.len() - SUM_SUFFIX_LEN..];
        tail.starts_with(SUM_OPEN)
            && tail.ends_with(b"\"}")
            && tail[SUM_OPEN.len()..SUM_OPEN.len() + SUM_HEX]
                .iter()
                .all(u8::is_ascii_hexdigit)
    };
    if sealed {
        let body = &line[..line.len() - SUM_SUFFIX_LEN];
        let stored = &line[line.len() - SUM_SUFFIX_LEN + SUM_OPEN.len()..line.len() - 2];
        if checksum(body).as_bytes() != stored {
            return Err("checksum mismatch".into());
        }
    }
    let k: KeyOnly =
        serde_json::from_slice(line).map_err(|e| format!("not a cache record: {e}"))?;
    if !sealed && k.v >= 2 {
        return Err(format!("version {} record without its checksum", k.v));
    }
    Ok((k.key, !sealed))
}

/// What [`CallCache::merge`] did with a segment's lines.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct MergeReport {
    /// Records added.
    pub added: usize,
    /// Records this cache had already.
    pub present: usize,
    /// Lines refused: a failed checksum, a record that does not parse, a
    /// request that does not hash to its key, or a record without a checksum.
    pub refused: usize,
}

/// A line of the log that is not used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedLine {
    /// Byte offset of the line in the log (in the moved-aside file when the
    /// whole log was moved).
    pub offset: u64,
    /// Its length in bytes, newline included when it has one.
    pub len: u64,
    /// Why it is not used (checksum mismatch, not a record, torn, ...).
    pub reason: String,
}

/// What [`CallCache::open`] found and repaired. Nothing is repaired
/// silently: every line not used is listed in `dropped`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpenReport {
    /// Records indexed (distinct keys).
    pub records: u64,
    /// Of those lines, records in the format before checksums (version 1):
    /// read, but their integrity cannot be checked.
    pub unchecked_records: u64,
    /// Bytes cut off the end of the log (a torn last record, and any bad
    /// lines after the last good one).
    pub truncated_bytes: u64,
    /// Bad lines before the last good record: left in the file, not used.
    pub skipped_lines: u64,
    /// Every line not used (skipped, cut, or moved aside), in file order.
    pub dropped: Vec<DroppedLine>,
    /// Where cut bytes were saved when they held at least one complete line
    /// (`calls.jsonl.corrupt-<n>`); a lone torn last record is just cut.
    pub saved_tail: Option<PathBuf>,
    /// Where the log was moved when it held no usable record at all (it is
    /// never truncated to nothing); the cache then starts empty.
    pub moved_aside: Option<PathBuf>,
}

impl OpenReport {
    /// True when the log was read without dropping anything.
    pub fn is_clean(&self) -> bool {
        self.dropped.is_empty() && self.truncated_bytes == 0 && self.moved_aside.is_none()
    }
}

impl std::fmt::Display for OpenReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} record(s)", self.records)?;
        if self.unchecked_records > 0 {
            write!(f, ", {} without checksum", self.unchecked_records)?;
        }
        if !self.dropped.is_empty() {
            let at: Vec<String> = self.dropped.iter().map(|d| d.offset.to_string()).collect();
            write!(
                f,
                ", {} line(s) dropped at byte(s) {}",
                self.dropped.len(),
                at.join(", ")
            )?;
        }
        if self.truncated_bytes > 0 {
            write!(f, ", {} byte(s) cut off the end", self.truncated_bytes)?;
        }
        if let Some(p) = &self.saved_tail {
            write!(f, " (saved to {})", p.display())?;
        }
        if let Some(p) = &self.moved_aside {
            write!(
                f,
                ", no usable record: the log was moved to {}",
                p.display()
            )?;
        }
        Ok(())
    }
}

/// When the writer lock is held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockMode {
    /// From open to drop: one writer process per directory ([`CallCache::open`]).
    Exclusive,
    /// Only while opening (repair) and while appending one record
    /// ([`CallCache::open_per_write`]): several processes can share the
    /// directory, e.g. `serve` next to a run.
    PerWrite,
}

/// The log file and how far it has been indexed.
struct Log {
    file: File,
    /// End of the last complete line indexed (good or bad): where the next
    /// record goes. Bytes past it are another writer's new records
    /// (per-write mode) or a failed write, cut before the next append.
    end: u64,
}

/// Test hooks that make the next append fail.
#[cfg(test)]
#[derive(Default)]
struct Faults {
    /// Write half the record, then fail.
    fail_write: std::sync::atomic::AtomicBool,
    /// Also fail the cut right after the failed write.
    fail_cut: std::sync::atomic::AtomicBool,
}

/// The persistent call cache (see the module docs).
pub struct CallCache {
    path: PathBuf,
    lock_path: PathBuf,
    mode: LockMode,
    log: Mutex<Log>,
    index: Mutex<HashMap<String, Span>>,
    lock: File,
    report: OpenReport,
    #[cfg(test)]
    faults: Faults,
}

/// Takes the exclusive lock on `lock`, trying for up to `wait`.
fn lock_within(lock: &File, wait: Duration) -> Result<bool, std::io::Error> {
    let deadline = Instant::now() + wait;
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(true),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5));
            }
            Err(std::fs::TryLockError::WouldBlock) => return Ok(false),
            Err(std::fs::TryLockError::Error(e)) => return Err(e),
        }
    }
}

/// The first `<path>.corrupt-<n>` (n = 1, 2, ...) that does not exist.
fn corrupt_name(path: &Path) -> PathBuf {
    let mut n = 1u32;
    loop {
        let mut name = path.as_os_str().to_owned();
        name.push(format!(".corrupt-{n}"));
        let p = PathBuf::from(name);
        if !p.exists() {
            return p;
        }
        n += 1;
    }
}

impl CallCache {
    /// Opens (creating) the cache in `dir`, takes the writer lock for the
    /// cache's lifetime and repairs the log ([`OpenReport`]).
    pub fn open(dir: impl AsRef<Path>) -> Result<Self, CacheError> {
        Self::open_with(dir, LockMode::Exclusive)
    }

    /// Opens (creating) the cache in `dir` taking the writer lock only to
    /// repair the log and then once per appended record, so that other
    /// processes can use the directory meanwhile. Records they append are
    /// picked up on a lookup miss and before each append.
    pub fn open_per_write(dir: impl AsRef<Path>) -> Result<Self, CacheError> {
        Self::open_with(dir, LockMode::PerWrite)
    }

    /// Opens the cache in `dir` with the given lock mode.
    pub fn open_with(dir: impl AsRef<Path>, mode: LockMode) -> Result<Self, CacheError> {
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
        if !lock_within(&lock, OPEN_LOCK_WAIT).map_err(io)? {
            return Err(CacheError::Locked {
                path: dir.to_path_buf(),
                lock: lock_path,
            });
        }
        let path = dir.join(LOG_FILE);
        let (log, index, report) = Self::open_log(&path)?;
        if mode == LockMode::PerWrite {
            lock.unlock().map_err(io)?;
        }
        Ok(CallCache {
            path,
            lock_path,
            mode,
            log: Mutex::new(log),
            index: Mutex::new(index),
            lock,
            report,
            #[cfg(test)]
            faults: Faults::default(),
        })
    }

    /// Indexes and repairs the log (the lock is held).
    fn open_log(path: &Path) -> Result<(Log, HashMap<String, Span>, OpenReport), CacheError> {
        let io = |source| CacheError::Io {
            path: path.to_path_buf(),
            source,
        };
        let open = || {
            OpenOptions::new()
                .create(true)
                .read(true)
                .append(true)
                .open(path)
                .map_err(io)
        };
        let mut file = open()?;
        let scan = scan_from(&file, path, 0)?;
        let len = file.metadata().map_err(io)?.len();
        let mut report = OpenReport {
            unchecked_records: scan.unchecked,
            ..OpenReport::default()
        };
        report.skipped_lines = scan
            .dropped
            .iter()
            .filter(|d| d.offset < scan.good_end)
            .count() as u64;
        let tail_has_line = scan.dropped.iter().any(|d| d.offset >= scan.good_end);
        let mut dropped = scan.dropped;
        if scan.complete_end < len {
            dropped.push(DroppedLine {
                offset: scan.complete_end,
                len: len - scan.complete_end,
                reason: "incomplete last line (a torn write)".into(),
            });
        }
        let mut index = scan.index;
        if scan.good_end == 0 && len > 0 {
            // Nothing usable: keep every byte for inspection, start empty.
            let aside = corrupt_name(path);
            drop(file);
            std::fs::rename(path, &aside).map_err(io)?;
            file = open()?;
            file.sync_all().map_err(io)?;
            index.clear();
            report.moved_aside = Some(aside);
        } else if scan.good_end < len {
            if tail_has_line {
                // Complete lines are about to be cut: save them first.
                let aside = corrupt_name(path);
                let mut tail = vec![0u8; (len - scan.good_end) as usize];
                file.read_exact_at(&mut tail, scan.good_end).map_err(io)?;
                std::fs::write(&aside, &tail).map_err(io)?;
                report.saved_tail = Some(aside);
            }
            file.set_len(scan.good_end).map_err(io)?;
            file.sync_all().map_err(io)?;
            report.truncated_bytes = len - scan.good_end;
        }
        report.dropped = dropped;
        report.records = index.len() as u64;
        let end = if report.moved_aside.is_some() {
            0
        } else {
            scan.good_end
        };
        Ok((Log { file, end }, index, report))
    }

    /// What opening found and repaired.
    pub fn open_report(&self) -> OpenReport {
        self.report.clone()
    }

    /// When this cache holds the writer lock.
    pub fn lock_mode(&self) -> LockMode {
        self.mode
    }

    /// Path of the log file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of cached calls.
    pub fn len(&self) -> usize {
        self.index.lock().map(|i| i.len()).unwrap_or(0)
    }

    /// True when no call is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when a record for `key` is indexed (no re-read of the log).
    pub fn contains(&self, key: &str) -> bool {
        self.index
            .lock()
            .map(|i| i.contains_key(key))
            .unwrap_or(false)
    }

    fn span_of(&self, key: &str) -> Option<Span> {
        self.index.lock().ok().and_then(|i| i.get(key).copied())
    }

    /// The cached response for `key`, if any. A per-write cache that does
    /// not know `key` first indexes what other writers appended.
    pub fn get(&self, key: &str) -> Result<Option<ChatResponse>, CacheError> {
        let mut span = self.span_of(key);
        if span.is_none() && self.mode == LockMode::PerWrite {
            let mut log = self.log.lock().map_err(|_| self.poisoned())?;
            self.catch_up(&mut log)?;
            drop(log);
            span = self.span_of(key);
        }
        match span {
            Some(s) => Ok(Some(self.read_record(s)?.response)),
            None => Ok(None),
        }
    }

    /// Indexes complete lines appended after `log.end` (by another writer,
    /// or by a write of ours that failed after it was complete).
    fn catch_up(&self, log: &mut Log) -> Result<(), CacheError> {
        let len = log.file.metadata().map_err(|e| self.io(e))?.len();
        if len <= log.end {
            return Ok(());
        }
        let scan = scan_from(&log.file, &self.path, log.end)?;
        let mut idx = self.index.lock().map_err(|_| self.poisoned())?;
        for (k, s) in scan.index {
            idx.entry(k).or_insert(s);
        }
        log.end = scan.complete_end;
        Ok(())
    }

    fn read_record(&self, span: Span) -> Result<Record, CacheError> {
        let mut buf = vec![0u8; span.len as usize];
        {
            let log = self.log.lock().map_err(|_| self.poisoned())?;
            log.file
                .read_exact_at(&mut buf, span.offset)
                .map_err(|e| self.io(e))?;
        }
        let corrupt = |reason: String| CacheError::Corrupt {
            path: self.path.clone(),
            offset: span.offset,
            reason,
        };
        // Checked again on every read: the bytes may have changed since open.
        check_line(&buf).map_err(corrupt)?;
        serde_json::from_slice(&buf).map_err(|e| corrupt(e.to_string()))
    }

    fn io(&self, source: std::io::Error) -> CacheError {
        CacheError::Io {
            path: self.path.clone(),
            source,
        }
    }

    fn poisoned(&self) -> CacheError {
        self.io(std::io::Error::other("cache mutex poisoned by a panic"))
    }

    /// Appends a completed call and fsyncs before returning. A key that is
    /// already present is not written again. A record deeper than the cache
    /// can read back is refused ([`CacheError::TooDeep`]). A write that fails
    /// part-way is cut off before the next record is appended.
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
        let json = serde_json::to_vec(&rec).map_err(|e| self.io(std::io::Error::other(e)))?;
        let depth = json_depth(&json);
        if depth > MAX_RECORD_DEPTH {
            return Err(CacheError::TooDeep {
                path: self.path.clone(),
                depth,
                max: MAX_RECORD_DEPTH,
            });
        }
        self.append(key, &seal(json))
    }

    /// Appends a sealed `line` under the writer lock (taken per write in
    /// per-write mode).
    fn append(&self, key: &str, line: &[u8]) -> Result<(), CacheError> {
        let mut log = self.log.lock().map_err(|_| self.poisoned())?;
        if self.mode == LockMode::PerWrite
            && !lock_within(&self.lock, PUT_LOCK_WAIT).map_err(|e| self.io(e))?
        {
            return Err(CacheError::Locked {
                path: self.path.clone(),
                lock: self.lock_path.clone(),
            });
        }
        let out = self.append_locked(&mut log, key, line);
        if self.mode == LockMode::PerWrite {
            let _ = self.lock.unlock();
        }
        out
    }

    /// Where the log's last complete line ends (records other writers
    /// appended included): the offset [`CallCache::tail_from`] would stop at.
    pub fn end(&self) -> Result<u64, CacheError> {
        let mut log = self.log.lock().map_err(|_| self.poisoned())?;
        self.catch_up(&mut log)?;
        Ok(log.end)
    }

    /// The log's good records from byte `from` on, as they are on disk, and the
    /// offset where they end: what another machine's cache lacks of this one
    /// since `from` (see [`CallCache::merge`]). Lines that fail their check
    /// are left out. `from` past the end (a log that was moved aside and
    /// started again) reads from the start.
    pub fn tail_from(&self, from: u64) -> Result<(Vec<u8>, u64), CacheError> {
        let mut log = self.log.lock().map_err(|_| self.poisoned())?;
        self.catch_up(&mut log)?;
        let end = log.end;
        let from = if from > end { 0 } else { from };
        let mut buf = vec![0u8; (end - from) as usize];
        log.file
            .read_exact_at(&mut buf, from)
            .map_err(|e| self.io(e))?;
        drop(log);
        let mut out = Vec::with_capacity(buf.len());
        for line in buf.split_inclusive(|b| *b == b'\n') {
            let body = line.strip_suffix(b"\n").unwrap_or(line);
            if !body.is_empty() && check_line(body).is_ok_and(|(_, unchecked)| !unchecked) {
                out.extend_from_slice(line);
            }
        }
        Ok((out, end))
    }

    /// Adds the records of `segment` (lines of another cache's log, from
    /// [`CallCache::tail_from`]) that this cache lacks. A line is taken only
    /// when it passes its checksum and parses, and its request hashes to its
    /// key; each is appended and fsynced like [`CallCache::put`].
    pub fn merge(&self, segment: &[u8]) -> Result<MergeReport, CacheError> {
        let mut report = MergeReport::default();
        for line in segment.split(|b| *b == b'\n') {
            if line.is_empty() {
                continue;
            }
            let usable = check_line(line)
                .ok()
                .filter(|(_, unchecked)| !unchecked && json_depth(line) <= MAX_RECORD_DEPTH);
            let rec = usable.and_then(|(key, _)| {
                serde_json::from_slice::<Record>(line)
                    .ok()
                    .filter(|r| r.key == key && request_key(&r.request) == key)
            });
            let Some(rec) = rec else {
                report.refused += 1;
                continue;
            };
            if self.contains(&rec.key) {
                report.present += 1;
                continue;
            }
            let mut sealed = line.to_vec();
            sealed.push(b'\n');
            self.append(&rec.key, &sealed)?;
            report.added += 1;
        }
        Ok(report)
    }

    /// The part of `put` that runs under the writer lock.
    fn append_locked(&self, log: &mut Log, key: &str, line: &[u8]) -> Result<(), CacheError> {
        // New complete lines (another writer's) are indexed; a partial one
        // (a write that failed or a writer that died mid-record) is cut, so
        // that this record starts on a line of its own.
        self.catch_up(log)?;
        if self.contains(key) {
            return Ok(());
        }
        let len = log.file.metadata().map_err(|e| self.io(e))?.len();
        if len > log.end {
            log.file.set_len(log.end).map_err(|e| self.io(e))?;
        } else if len < log.end {
            // Another opener cut bad lines off the end (per-write mode):
            // append where the file really ends.
            log.end = len;
        }
        let offset = log.end;
        if let Err(e) = self.write_line(&mut log.file, line) {
            // Cut the partial record now; if that fails too, the next append
            // cuts it (above) before writing.
            if !self.cut_fails() {
                let _ = log.file.set_len(offset);
            }
            return Err(self.io(e));
        }
        log.end = offset + line.len() as u64;
        if let Ok(mut idx) = self.index.lock() {
            idx.entry(key.to_owned()).or_insert(Span {
                offset,
                len: line.len() as u64 - 1,
            });
        }
        Ok(())
    }

    fn write_line(&self, f: &mut File, line: &[u8]) -> std::io::Result<()> {
        #[cfg(test)]
        if self.faults.fail_write.swap(false, Ordering::SeqCst) {
            f.write_all(&line[..line.len() / 2])?;
            return Err(std::io::Error::other(
                "injected failure in the middle of a record",
            ));
        }
        f.write_all(line)?;
        f.sync_data()
    }

    #[cfg(test)]
    fn cut_fails(&self) -> bool {
        self.faults.fail_cut.swap(false, Ordering::SeqCst)
    }

    #[cfg(not(test))]
    fn cut_fails(&self) -> bool {
        false
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
/// (e.g. for `otb export` while a run is going on). Lines that fail their
/// checksum or do not parse, and a torn tail, are skipped, not repaired.
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
        if check_line(&line).is_err() {
            continue;
        }
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

/// What a scan of the log from some offset found.
struct Scan {
    /// key -> span of its first good record (in file order).
    index: HashMap<String, Span>,
    /// End of the last good record.
    good_end: u64,
    /// End of the last complete (newline-terminated) line.
    complete_end: u64,
    /// Good records without a checksum.
    unchecked: u64,
    /// Complete lines that cannot be used.
    dropped: Vec<DroppedLine>,
}

/// Scans the log from byte `start` (a line start) to its end. Streams the
/// file (the log can be large).
fn scan_from(file: &File, path: &Path, start: u64) -> Result<Scan, CacheError> {
    let io = |source| CacheError::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut reader = BufReader::with_capacity(1 << 20, file);
    reader.seek(SeekFrom::Start(start)).map_err(io)?;
    let mut scan = Scan {
        index: HashMap::new(),
        good_end: start,
        complete_end: start,
        unchecked: 0,
        dropped: Vec::new(),
    };
    let mut pos = start;
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader.read_until(b'\n', &mut line).map_err(io)? as u64;
        if n == 0 || line.last() != Some(&b'\n') {
            break; // end, or a torn tail without its newline
        }
        match check_line(&line[..line.len() - 1]) {
            Ok((key, unchecked)) => {
                scan.index.entry(key).or_insert(Span {
                    offset: pos,
                    len: n - 1,
                });
                scan.unchecked += u64::from(unchecked);
                scan.good_end = pos + n;
            }
            Err(reason) => scan.dropped.push(DroppedLine {
                offset: pos,
                len: n,
                reason,
            }),
        }
        pos += n;
        scan.complete_end = pos;
    }
    Ok(scan)
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
    /// Requests answered from the cache.
    pub hits: u64,
    /// Requests sent to the backend (failed ones included).
    pub misses: u64,
    /// Backend calls that failed (counted in `misses` too).
    pub errors: u64,
    /// Tokens of every response returned, hits included.
    pub usage: Usage,
}

/// Adds `n` to `a`, stopping at `u64::MAX` instead of wrapping.
fn saturating_add(a: &AtomicU64, n: u64) {
    // The closure always returns Some, so this cannot fail.
    let _ = a.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |v| {
        Some(v.saturating_add(n))
    });
}

impl CacheStats {
    fn add_usage(&self, u: &Usage) {
        saturating_add(&self.prompt, u.prompt);
        saturating_add(&self.completion, u.completion);
        saturating_add(&self.reasoning, u.reasoning);
    }
    /// A copy of the counters (each loaded separately: not one atomic
    /// snapshot while calls are in flight).
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

/// Calls asked of any [`CachedClient`] in this process, and how many of them the
/// cache answered (what a run's heartbeat line reports).
static CALLS: AtomicU64 = AtomicU64::new(0);
static CACHED_CALLS: AtomicU64 = AtomicU64::new(0);

/// `(calls, answered from the cache)` made through any [`CachedClient`] of this
/// process so far.
pub fn calls_so_far() -> (u64, u64) {
    (
        CALLS.load(Ordering::Relaxed),
        CACHED_CALLS.load(Ordering::Relaxed),
    )
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
    /// `backend` behind `cache`, with fresh stats and no stage label.
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

    /// This client's counters (shared with its clones, not with
    /// [`CachedClient::for_stage`] ones).
    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// The call cache in front of the backend.
    pub fn cache(&self) -> &Arc<CallCache> {
        &self.cache
    }

    /// Answers `req` from the cache or the backend. The request is keyed, and
    /// recorded, with the backend's revision ([`Backend::revision`]), so an answer
    /// the embedded model gave before its prompt layout or decoding changed is not
    /// served after.
    pub async fn chat(&self, req: &ChatRequest) -> Result<ChatResponse, LlmError> {
        CALLS.fetch_add(1, Ordering::Relaxed);
        let keyed = with_revision(req, self.backend.revision());
        let req: &ChatRequest = &keyed;
        let key = request_key(req);
        let cache = self.cache.clone();
        let k = key.clone();
        let hit = tokio::task::spawn_blocking(move || cache.get(&k))
            .await
            .map_err(|e| LlmError::new(ErrorKind::LocalIo, format!("cache task failed: {e}")))??;
        if let Some(resp) = hit {
            CACHED_CALLS.fetch_add(1, Ordering::Relaxed);
            self.stats.hits.fetch_add(1, Ordering::Relaxed);
            self.stats.add_usage(&resp.usage);
            return Ok(resp);
        }
        self.stats.misses.fetch_add(1, Ordering::Relaxed);
        // Checked again here so that no backend's reply (a scripted one
        // included) can put a record into the cache that it cannot read back.
        let resp = match self.backend.chat(req).await.and_then(ChatResponse::checked) {
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
        .map_err(|e| LlmError::new(ErrorKind::LocalIo, format!("cache task failed: {e}")))??;
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
    fn revision(&self) -> Option<u32> {
        self.backend.revision()
    }
}

/// The `replay` backend: answers only from the cache. A miss is a
/// [`ErrorKind::CacheMiss`] error naming the request hash and the stage.
pub struct Replay {
    cache: Arc<CallCache>,
    stage: String,
}

impl Replay {
    /// Answers from `cache`; `stage` is named in cache-miss errors.
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
            // A call cache the embedded model filled keys its requests with the
            // backend's revision: replayed, the same request finds those answers
            // too (of the current revision only).
            let hit = match self.cache.get(&key)? {
                None if req.backend_revision.is_none() => {
                    let embedded = with_revision(req, Some(crate::EMBEDDED_REVISION));
                    self.cache.get(&request_key(&embedded))?
                }
                hit => hit,
            };
            match hit {
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
pub(crate) mod tests {
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
        let log = dir.path().join(LOG_FILE);
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
        assert_eq!(read_entries(dir.path()).unwrap(), rows);
        assert_eq!(
            c.get(&request_key(&req("b")))
                .unwrap()
                .unwrap()
                .content
                .as_deref(),
            Some("b")
        );
    }

    /// A scripted backend that reports a revision, as the embedded one does.
    struct Revised(crate::backend::Scripted, Option<u32>);

    impl Backend for Revised {
        fn chat<'a>(
            &'a self,
            req: &'a ChatRequest,
        ) -> BoxFuture<'a, Result<ChatResponse, LlmError>> {
            self.0.chat(req)
        }
        fn name(&self) -> &str {
            "revised"
        }
        fn revision(&self) -> Option<u32> {
            self.1
        }
    }

    fn counting(
        revision: Option<u32>,
        answer: &'static str,
    ) -> (Arc<Revised>, Arc<std::sync::atomic::AtomicUsize>) {
        let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let m = n.clone();
        let b = crate::backend::Scripted::new(move |r| {
            m.fetch_add(1, Ordering::Relaxed);
            // The backend sees the request as keyed.
            Ok(ChatResponse::text(format!(
                "{answer} {:?}",
                r.backend_revision
            )))
        });
        (Arc::new(Revised(b, revision)), n)
    }

    /// An answer the backend gave at one revision (the embedded model before its
    /// prompt layout changed) is not served at another; a backend with no revision
    /// keys the request alone, as before revisions existed.
    #[tokio::test]
    async fn the_backends_revision_keys_its_answers() {
        let dir = tempdir("revision");
        let cache = Arc::new(CallCache::open(&dir).unwrap());
        let (old, n_old) = counting(Some(1), "old");
        let (new, n_new) = counting(Some(2), "new");
        let (plain, n_plain) = counting(None, "plain");
        let ask = |b: Arc<Revised>| {
            let c = CachedClient::new(b, cache.clone());
            async move { c.chat(&req("q")).await.unwrap().content.unwrap() }
        };
        assert_eq!(ask(old.clone()).await, "old Some(1)");
        assert_eq!(ask(old.clone()).await, "old Some(1)");
        assert_eq!(ask(new.clone()).await, "new Some(2)");
        assert_eq!(ask(plain.clone()).await, "plain None");
        assert_eq!(ask(new).await, "new Some(2)");
        let counts = [&n_old, &n_new, &n_plain].map(|n| n.load(Ordering::Relaxed));
        assert_eq!(counts, [1, 1, 1]);
        // The plain key is the request's own (pinned in key_is_stable_across_versions).
        let rows = read_entries(&dir).unwrap();
        let keys: Vec<&str> = rows.iter().map(|r| r.key.as_str()).collect();
        assert!(keys.contains(&request_key(&req("q")).as_str()), "{keys:?}");
        for r in &rows {
            let recorded: ChatRequest = serde_json::from_str(&r.request_json).unwrap();
            assert_eq!(request_key(&recorded), r.key);
        }
    }

    /// `replay:` finds what the embedded model answered (at the current revision).
    #[tokio::test]
    async fn replay_finds_the_embedded_models_answers() {
        let dir = tempdir("replay-embedded");
        let cache = Arc::new(CallCache::open(&dir).unwrap());
        let (emb, _) = counting(Some(crate::EMBEDDED_REVISION), "emb");
        let (older, _) = counting(Some(crate::EMBEDDED_REVISION - 1), "older");
        CachedClient::new(emb, cache.clone())
            .chat(&req("a"))
            .await
            .unwrap();
        CachedClient::new(older, cache.clone())
            .chat(&req("b"))
            .await
            .unwrap();
        let replay = Replay::new(cache.clone(), "t");
        let a = replay.chat(&req("a")).await.unwrap();
        assert_eq!(
            a.content,
            Some(format!("emb Some({})", crate::EMBEDDED_REVISION))
        );
        let e = replay.chat(&req("b")).await.unwrap_err();
        assert_eq!(e.kind, ErrorKind::CacheMiss);
    }

    #[tokio::test]
    async fn stats_usage_saturates() {
        // The largest usage a reply may report (a larger one is a malformed reply,
        // `ChatResponse::checked`); the sums themselves saturate (`Usage`'s `+=`).
        let b = crate::backend::Scripted::new(|r| {
            let mut resp = ChatResponse::text("x");
            resp.usage.prompt = crate::types::MAX_USAGE_TOKENS;
            resp.usage.completion = r.messages.len() as u64;
            Ok(resp)
        });
        let dir = tempdir("sat");
        let cache = Arc::new(CallCache::open(&dir).unwrap());
        let c = CachedClient::new(Arc::new(b), cache);
        c.chat(&req("a")).await.unwrap();
        c.chat(&req("b")).await.unwrap();
        c.chat(&req("a")).await.unwrap(); // a hit counts too
        let s = c.stats();
        assert_eq!((s.misses, s.hits), (2, 1));
        assert_eq!(
            (s.usage.prompt, s.usage.completion),
            (3 * crate::types::MAX_USAGE_TOKENS, 3)
        );
    }

    /// A cache in `dir` holding the answers "a", "b", "c"; returns the
    /// byte offsets at which the three records start and the log's length.
    fn three_records(dir: &Path) -> (Vec<u64>, u64) {
        let c = CallCache::open(dir).unwrap();
        for q in ["a", "b", "c"] {
            let r = req(q);
            c.put(&request_key(&r), &r, &ChatResponse::text(q), Some("s"), "t")
                .unwrap();
        }
        let bytes = std::fs::read(dir.join(LOG_FILE)).unwrap();
        let mut starts = vec![0u64];
        for (i, b) in bytes.iter().enumerate() {
            if *b == b'\n' && i + 1 < bytes.len() {
                starts.push(i as u64 + 1);
            }
        }
        assert_eq!(starts.len(), 3);
        (starts, bytes.len() as u64)
    }

    fn answer(c: &CallCache, q: &str) -> Option<String> {
        c.get(&request_key(&req(q)))
            .unwrap()
            .and_then(|r| r.content)
    }

    #[test]
    fn a_flipped_byte_in_a_middle_record_is_dropped_and_reported() {
        let dir = tempdir("flip");
        let (starts, len) = three_records(dir.path());
        let log = dir.path().join(LOG_FILE);
        let mut bytes = std::fs::read(&log).unwrap();
        // Inside the middle record's JSON text ("stage":"s" -> "stage":"t"):
        // still valid JSON, so only the checksum can tell.
        let at = starts[1] as usize
            + bytes[starts[1] as usize..]
                .windows(11)
                .position(|w| w == br#""stage":"s""#)
                .unwrap()
            + 9;
        bytes[at] = b't';
        std::fs::write(&log, &bytes).unwrap();
        let c = CallCache::open(&dir).unwrap();
        let rep = c.open_report();
        assert_eq!(rep.records, 2);
        assert_eq!(rep.skipped_lines, 1);
        assert_eq!(rep.truncated_bytes, 0);
        assert_eq!(rep.dropped.len(), 1);
        assert_eq!(rep.dropped[0].offset, starts[1]);
        assert_eq!(rep.dropped[0].reason, "checksum mismatch");
        assert!(rep
            .to_string()
            .contains(&format!("dropped at byte(s) {}", starts[1])));
        assert_eq!(answer(&c, "a").as_deref(), Some("a"));
        assert_eq!(answer(&c, "b"), None);
        assert_eq!(answer(&c, "c").as_deref(), Some("c"));
        // The export skips it too; the file is left as it was.
        assert_eq!(read_entries(dir.path()).unwrap().len(), 2);
        assert_eq!(std::fs::metadata(&log).unwrap().len(), len);
    }

    #[test]
    fn a_truncated_last_record_is_cut_and_reported() {
        let dir = tempdir("cut");
        let (starts, len) = three_records(dir.path());
        let log = dir.path().join(LOG_FILE);
        let f = OpenOptions::new().write(true).open(&log).unwrap();
        f.set_len(len - 10).unwrap();
        drop(f);
        let c = CallCache::open(&dir).unwrap();
        let rep = c.open_report();
        assert_eq!(rep.records, 2);
        assert_eq!(rep.truncated_bytes, len - 10 - starts[2]);
        assert_eq!(rep.dropped.len(), 1);
        assert_eq!(rep.dropped[0].offset, starts[2]);
        assert_eq!(rep.saved_tail, None, "a lone torn record is just cut");
        assert_eq!(std::fs::metadata(&log).unwrap().len(), starts[2]);
        assert_eq!(answer(&c, "c"), None);
        // The next record starts on a line of its own.
        let r = req("d");
        c.put(&request_key(&r), &r, &ChatResponse::text("d"), None, "t")
            .unwrap();
        drop(c);
        let c = CallCache::open(&dir).unwrap();
        assert!(c.open_report().is_clean(), "{}", c.open_report());
        assert_eq!(answer(&c, "d").as_deref(), Some("d"));
    }

    #[test]
    fn a_file_of_garbage_is_moved_aside_not_emptied() {
        let dir = tempdir("garbage");
        let log = dir.path().join(LOG_FILE);
        let garbage = b"\x00\x01 not a record\n{\"also\": \"not\"}\n\xff\xfe".to_vec();
        std::fs::write(&log, &garbage).unwrap();
        let c = CallCache::open(&dir).unwrap();
        let rep = c.open_report();
        let aside = dir.path().join("calls.jsonl.corrupt-1");
        assert_eq!(rep.moved_aside.as_deref(), Some(aside.as_path()));
        assert_eq!(rep.records, 0);
        assert_eq!(rep.dropped.len(), 3, "{rep:?}");
        assert_eq!(std::fs::read(&aside).unwrap(), garbage);
        assert!(c.is_empty());
        let r = req("a");
        c.put(&request_key(&r), &r, &ChatResponse::text("a"), None, "t")
            .unwrap();
        drop(c);
        // A second bad file gets the next name.
        let c = CallCache::open(&dir).unwrap();
        assert!(c.open_report().is_clean());
        assert_eq!(answer(&c, "a").as_deref(), Some("a"));
        drop(c);
        std::fs::write(&log, b"junk\n").unwrap();
        let c = CallCache::open(&dir).unwrap();
        assert_eq!(
            c.open_report().moved_aside,
            Some(dir.path().join("calls.jsonl.corrupt-2"))
        );
    }

    #[test]
    fn bad_complete_lines_at_the_end_are_saved_before_the_cut() {
        let dir = tempdir("badtail");
        let (_, len) = three_records(dir.path());
        let log = dir.path().join(LOG_FILE);
        let mut f = OpenOptions::new().append(true).open(&log).unwrap();
        f.write_all(b"{\"v\":2,\"key\":\"x\"}\npartial").unwrap();
        drop(f);
        let c = CallCache::open(&dir).unwrap();
        let rep = c.open_report();
        assert_eq!(rep.records, 3);
        assert_eq!(rep.dropped.len(), 2);
        let saved = rep.saved_tail.clone().unwrap();
        assert_eq!(
            std::fs::read(saved).unwrap(),
            b"{\"v\":2,\"key\":\"x\"}\npartial"
        );
        assert_eq!(std::fs::metadata(&log).unwrap().len(), len);
    }

    #[test]
    fn a_failed_write_is_cut_before_the_next_record() {
        for fail_cut in [false, true] {
            let dir = tempdir("failwrite");
            let c = CallCache::open(&dir).unwrap();
            let (a, b, d) = (req("a"), req("b"), req("d"));
            c.put(&request_key(&a), &a, &ChatResponse::text("a"), None, "t")
                .unwrap();
            c.faults.fail_write.store(true, Ordering::SeqCst);
            c.faults.fail_cut.store(fail_cut, Ordering::SeqCst);
            let e = c
                .put(&request_key(&b), &b, &ChatResponse::text("b"), None, "t")
                .unwrap_err();
            assert!(e.to_string().contains("injected"), "{e}");
            assert_eq!(LlmError::from(e).kind, ErrorKind::LocalIo);
            assert!(!c.contains(&request_key(&b)));
            c.put(&request_key(&d), &d, &ChatResponse::text("d"), None, "t")
                .unwrap();
            assert_eq!(answer(&c, "d").as_deref(), Some("d"));
            drop(c);
            let c = CallCache::open(&dir).unwrap();
            assert!(c.open_report().is_clean(), "{}", c.open_report());
            assert_eq!(c.len(), 2);
            assert_eq!(answer(&c, "a").as_deref(), Some("a"));
            assert_eq!(answer(&c, "d").as_deref(), Some("d"));
        }
    }

    #[test]
    fn records_without_a_checksum_are_still_read() {
        let dir = tempdir("v1");
        let r = req("old");
        // A record as the version-1 format wrote it: no `sum`.
        let rec = Record {
            v: 1,
            key: request_key(&r),
            stage: Some("explore".into()),
            backend: "openai".into(),
            created_unix_ms: 1,
            response: ChatResponse::text("old answer"),
            request: r.clone(),
        };
        let mut line = serde_json::to_vec(&rec).unwrap();
        line.push(b'\n');
        std::fs::write(dir.path().join(LOG_FILE), &line).unwrap();
        let c = CallCache::open(&dir).unwrap();
        let rep = c.open_report();
        assert_eq!((rep.records, rep.unchecked_records), (1, 1));
        assert!(rep.is_clean());
        assert_eq!(answer(&c, "old").as_deref(), Some("old answer"));
        let n = req("new");
        c.put(&request_key(&n), &n, &ChatResponse::text("new"), None, "t")
            .unwrap();
        drop(c);
        let rows = read_entries(dir.path()).unwrap();
        assert_eq!(rows.len(), 2);
        // A version-2 line that lost its checksum is not taken for an old one.
        let text = std::fs::read_to_string(dir.path().join(LOG_FILE)).unwrap();
        let second = text.lines().nth(1).unwrap();
        let cut = second.find(r#","sum":""#).unwrap();
        assert!(check_line(format!("{}}}", &second[..cut]).as_bytes())
            .unwrap_err()
            .contains("without its checksum"));
    }

    #[test]
    fn deep_arguments_within_the_limit_round_trip() {
        use crate::types::{ToolCall, MAX_JSON_DEPTH};
        let dir = tempdir("deep");
        let nested = |d: usize| "[".repeat(d) + &"]".repeat(d);
        let c = CallCache::open(&dir).unwrap();
        for d in [MAX_JSON_DEPTH - 1, MAX_JSON_DEPTH] {
            let r = req(&format!("depth {d}"));
            // The same depth in the request's history as in the reply.
            let mut r2 = r.clone();
            r2.messages.push(Message::assistant_tool_calls(
                None,
                vec![ToolCall::new("c0", "f", nested(d))],
            ));
            let resp = ChatResponse::calls(vec![ToolCall::new("c1", "f", nested(d))])
                .checked()
                .unwrap();
            c.put(&request_key(&r2), &r2, &resp, None, "t").unwrap();
        }
        drop(c);
        let c = CallCache::open(&dir).unwrap();
        assert!(c.open_report().is_clean(), "{}", c.open_report());
        assert_eq!(c.len(), 2);
        for row in c.entries().unwrap() {
            assert_eq!(row.n_malformed_arguments, 0);
        }
        // A record too deep to read back is refused, not written.
        let mut r = req("too deep");
        r.tools = vec![crate::types::ToolDef {
            name: "f".into(),
            description: None,
            parameters: Some(serde_json::from_str(&nested(125)).unwrap()),
        }];
        let e = c
            .put(&request_key(&r), &r, &ChatResponse::text("x"), None, "t")
            .unwrap_err();
        assert!(matches!(e, CacheError::TooDeep { max: 127, .. }), "{e}");
        drop(c);
        assert!(CallCache::open(&dir).unwrap().open_report().is_clean());
    }

    #[test]
    fn per_write_caches_share_a_directory() {
        let dir = tempdir("perwrite");
        let a = CallCache::open_per_write(&dir).unwrap();
        let b = CallCache::open_per_write(&dir).unwrap();
        let (x, y) = (req("x"), req("y"));
        a.put(&request_key(&x), &x, &ChatResponse::text("x"), None, "t")
            .unwrap();
        // b sees a's record on a miss, and appends after it.
        assert_eq!(answer(&b, "x").as_deref(), Some("x"));
        b.put(&request_key(&y), &y, &ChatResponse::text("y"), None, "t")
            .unwrap();
        assert_eq!(answer(&a, "y").as_deref(), Some("y"));
        // A key already written by the other is not written twice.
        a.put(&request_key(&y), &y, &ChatResponse::text("y2"), None, "t")
            .unwrap();
        // While no write is going on, an exclusive writer can open it...
        let ex = CallCache::open(&dir).unwrap();
        assert_eq!(ex.len(), 2);
        assert!(ex.open_report().is_clean());
        // ...and then a per-write append waits for it and gives up.
        assert_eq!(ex.lock_mode(), LockMode::Exclusive);
        drop((a, b));
        assert!(matches!(
            CallCache::open_per_write(&dir),
            Err(CacheError::Locked { .. })
        ));
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

    /// A fresh folder, removed when the value is dropped.
    pub(crate) fn tempdir(tag: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("otb-llm-{tag}-"))
            .tempdir()
            .unwrap()
    }
}
