//! The on-disk store: content-addressed stage outputs, published atomically.

use crate::digest::{canonical_json, Digest};
use crate::error::{StoreError, StoreErrorKind};
use crate::key::KeyComponents;
use crate::table::{read_rows, write_rows, Row, TableMeta};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Written to `<store>/FORMAT`; bumped when the layout changes incompatibly.
pub const STORE_FORMAT: &str = "otb-store-1";
/// Version of `manifest.json`.
pub const MANIFEST_VERSION: u32 = 1;
/// Fault injection for crash tests: `OTB_FAULT_PAUSE=publish` makes every publish
/// stop after the data files and manifest are written into the staging directory and
/// before the atomic rename; it creates `<store>/tmp/PAUSED` and sleeps, so a test can
/// SIGKILL the process at exactly that point.
pub const FAULT_ENV: &str = "OTB_FAULT_PAUSE";

/// Token and call accounting of one stage run (sums of its model calls).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub calls: u64,
    pub cached_calls: u64,
    pub errors: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub reasoning_tokens: u64,
}

impl Usage {
    pub fn add(&mut self, o: &Usage) {
        self.calls += o.calls;
        self.cached_calls += o.cached_calls;
        self.errors += o.errors;
        self.prompt_tokens += o.prompt_tokens;
        self.completion_tokens += o.completion_tokens;
        self.reasoning_tokens += o.reasoning_tokens;
    }

    pub fn total_tokens(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens + self.reasoning_tokens
    }
}

/// `manifest.json` of one published stage output. Written last.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub manifest_version: u32,
    pub key: Digest,
    pub components: KeyComponents,
    /// Table name -> file, digest, rows, bytes.
    pub outputs: BTreeMap<String, TableMeta>,
    /// Digest over all output tables; this is what downstream keys include.
    pub output_digest: Digest,
    /// The experiment node that produced it, e.g. `explore[names/gpt-5/r2]`.
    pub node: String,
    pub wall_ms: u64,
    pub usage: Usage,
    pub created_unix: u64,
}

/// Digest over a set of tables (name -> digest), independent of anything else.
pub fn output_digest(outputs: &BTreeMap<String, TableMeta>) -> Digest {
    let m: BTreeMap<&String, &Digest> = outputs.iter().map(|(k, v)| (k, &v.digest)).collect();
    Digest::of_bytes(canonical_json(&serde_json::json!(m)).as_bytes())
}

/// A verified, published stage output.
#[derive(Clone, Debug)]
pub struct Entry {
    pub dir: PathBuf,
    pub manifest: Manifest,
}

impl Entry {
    pub fn table_path(&self, table: &str) -> PathBuf {
        self.dir.join(format!("{table}.parquet"))
    }

    /// Read one of this entry's tables as typed rows.
    pub fn read<R: Row>(&self) -> Result<Vec<R>, StoreError> {
        if !self.manifest.outputs.contains_key(R::TABLE) {
            return Err(StoreError::new(
                StoreErrorKind::Table(format!(
                    "stage `{}` has no table `{}`",
                    self.manifest.components.stage,
                    R::TABLE
                )),
                &self.dir,
            ));
        }
        read_rows(&self.table_path(R::TABLE))
    }

    pub fn digest(&self) -> &Digest {
        &self.manifest.output_digest
    }

    pub fn rows(&self) -> u64 {
        self.manifest.outputs.values().map(|t| t.rows).sum()
    }
}

/// Outcome of looking a key up.
#[derive(Debug)]
pub enum Lookup {
    Hit(Box<Entry>),
    Miss,
    /// The entry existed but failed verification; `reason` says why. In a writable
    /// store it has been moved aside to `quarantine/`.
    Corrupt {
        reason: String,
    },
}

/// What the last run of an experiment node produced: lets `status` say why a node is
/// stale (which key component changed) without keeping every old key around.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SlotRecord {
    pub node: String,
    pub key: Digest,
    pub components: KeyComponents,
}

/// How a store is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Never writes; a missing store reads as empty (`otb status`).
    ReadOnly,
    /// Creates the store, takes the exclusive lock, cleans crash leftovers.
    ReadWrite,
}

/// The store rooted at a directory. See the crate docs for the layout.
pub struct Store {
    root: PathBuf,
    access: Access,
    _lock: Option<File>,
}

fn now_unix() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn fsync_dir(path: &Path) -> Result<(), StoreError> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| StoreError::io(path, e))
}

/// Write `bytes` to `path` atomically: temp file, fsync, rename, fsync the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp{}",
        path.file_name()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let io = |e| StoreError::io(path, e);
    let mut f = File::create(&tmp).map_err(io)?;
    f.write_all(bytes).map_err(io)?;
    f.sync_all().map_err(io)?;
    fs::rename(&tmp, path).map_err(io)?;
    fsync_dir(dir)
}

impl Store {
    /// Open (and for [`Access::ReadWrite`], create and lock) the store at `root`.
    pub fn open(root: &Path, access: Access) -> Result<Store, StoreError> {
        let root = root.to_path_buf();
        let mut store = Store {
            root: root.clone(),
            access,
            _lock: None,
        };
        if access == Access::ReadOnly {
            if root.join("FORMAT").exists() {
                store.check_format()?;
            }
            return Ok(store);
        }
        fs::create_dir_all(&root)
            .map_err(|e| StoreError::new(StoreErrorKind::NotWritable(e.to_string()), &root))?;
        let lock_path = root.join(".lock");
        let lock = fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&lock_path)
            .map_err(|e| StoreError::new(StoreErrorKind::NotWritable(e.to_string()), &root))?;
        match lock.try_lock() {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                eprintln!(
                    "otb: waiting for the store lock ({}): another otb process is using this store",
                    lock_path.display()
                );
                lock.lock().map_err(|e| StoreError::io(&lock_path, e))?;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(StoreError::io(&lock_path, e)),
        }
        store._lock = Some(lock);
        let format = root.join("FORMAT");
        if format.exists() {
            store.check_format()?;
        } else {
            write_atomic(&format, format!("{STORE_FORMAT}\n").as_bytes())?;
        }
        // Staging directories left by a crashed process are never results: drop them.
        let tmp = root.join("tmp");
        if tmp.exists() {
            fs::remove_dir_all(&tmp).map_err(|e| StoreError::io(&tmp, e))?;
        }
        for d in ["tmp", "slots", "quarantine"] {
            fs::create_dir_all(root.join(d)).map_err(|e| StoreError::io(&root.join(d), e))?;
        }
        Ok(store)
    }

    fn check_format(&self) -> Result<(), StoreError> {
        let p = self.root.join("FORMAT");
        let found = fs::read_to_string(&p).map_err(|e| StoreError::io(&p, e))?;
        if found.trim() != STORE_FORMAT {
            return Err(StoreError::new(
                StoreErrorKind::Format {
                    found: found.trim().to_string(),
                    expected: STORE_FORMAT.to_string(),
                },
                &p,
            ));
        }
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn access(&self) -> Access {
        self.access
    }

    pub fn entry_dir(&self, stage: &str, key: &Digest) -> PathBuf {
        self.root.join(stage).join(&key.0)
    }

    /// Look a key up and verify the entry: manifest parses and matches the key, every
    /// table exists with the recorded size and digest. A corrupt entry in a writable
    /// store is moved to `quarantine/` with a warning on stderr.
    pub fn lookup(&self, components: &KeyComponents) -> Lookup {
        let key = components.key();
        let dir = self.entry_dir(&components.stage, &key);
        if !dir.exists() {
            return Lookup::Miss;
        }
        match verify(&dir, &key) {
            Ok(manifest) => Lookup::Hit(Box::new(Entry { dir, manifest })),
            Err(reason) => {
                if self.access == Access::ReadWrite {
                    let dest = self.root.join("quarantine").join(format!(
                        "{}-{}-{}",
                        components.stage,
                        key.short(),
                        now_unix()
                    ));
                    match fs::rename(&dir, &dest) {
                        Ok(()) => eprintln!(
                            "otb: warning: {} failed verification ({reason}); moved to {} and recomputing",
                            dir.display(),
                            dest.display()
                        ),
                        Err(e) => eprintln!(
                            "otb: warning: {} failed verification ({reason}) and could not be moved aside: {e}",
                            dir.display()
                        ),
                    }
                }
                Lookup::Corrupt { reason }
            }
        }
    }

    /// Start writing a stage output into a private staging directory.
    pub fn begin(&self, components: &KeyComponents) -> Result<Staging, StoreError> {
        if self.access != Access::ReadWrite {
            return Err(StoreError::new(
                StoreErrorKind::NotWritable("opened read-only".into()),
                &self.root,
            ));
        }
        let key = components.key();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = self.root.join("tmp").join(format!(
            "{}-{}-{}-{nanos}",
            components.stage,
            key.short(),
            std::process::id()
        ));
        fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
        Ok(Staging {
            dir,
            key,
            components: components.clone(),
            outputs: BTreeMap::new(),
        })
    }

    /// Publish a staging directory: manifest written last (atomically), directory
    /// fsynced, renamed into place, parent fsynced.
    pub fn commit(
        &self,
        staging: Staging,
        node: &str,
        wall_ms: u64,
        usage: Usage,
    ) -> Result<Entry, StoreError> {
        let manifest = Manifest {
            manifest_version: MANIFEST_VERSION,
            key: staging.key.clone(),
            components: staging.components.clone(),
            output_digest: output_digest(&staging.outputs),
            outputs: staging.outputs,
            node: node.to_string(),
            wall_ms,
            usage,
            created_unix: now_unix(),
        };
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| StoreError::new(StoreErrorKind::Manifest(e.to_string()), &staging.dir))?;
        write_atomic(&staging.dir.join("manifest.json"), &json)?;
        fsync_dir(&staging.dir)?;
        if std::env::var(FAULT_ENV).as_deref() == Ok("publish") {
            let marker = self.root.join("tmp").join("PAUSED");
            let _ = fs::write(&marker, node);
            std::thread::sleep(std::time::Duration::from_secs(300));
        }
        let stage_dir = self.root.join(&manifest.components.stage);
        fs::create_dir_all(&stage_dir).map_err(|e| StoreError::io(&stage_dir, e))?;
        let dest = stage_dir.join(&manifest.key.0);
        if dest.exists() {
            // Someone published the same key (same inputs => same content); keep theirs.
            let _ = fs::remove_dir_all(&staging.dir);
        } else {
            fs::rename(&staging.dir, &dest).map_err(|e| StoreError::io(&dest, e))?;
            fsync_dir(&stage_dir)?;
        }
        Ok(Entry {
            dir: dest,
            manifest,
        })
    }

    /// The last key recorded for an experiment node.
    pub fn slot(&self, node: &str) -> Option<SlotRecord> {
        let p = self.slot_path(node);
        let bytes = fs::read(p).ok()?;
        serde_json::from_slice(&bytes).ok()
    }

    pub fn record_slot(&self, node: &str, components: &KeyComponents) -> Result<(), StoreError> {
        if self.access != Access::ReadWrite {
            return Ok(());
        }
        let rec = SlotRecord {
            node: node.to_string(),
            key: components.key(),
            components: components.clone(),
        };
        let p = self.slot_path(node);
        if let Some(old) = self.slot(node) {
            if old.key == rec.key {
                return Ok(());
            }
        }
        let json = serde_json::to_vec_pretty(&rec)
            .map_err(|e| StoreError::new(StoreErrorKind::Manifest(e.to_string()), &p))?;
        write_atomic(&p, &json)
    }

    fn slot_path(&self, node: &str) -> PathBuf {
        self.root.join("slots").join(format!(
            "{}.json",
            &Digest::of_bytes(node.as_bytes()).0[..32]
        ))
    }

    /// Every published entry: (stage, key dir).
    pub fn entries(&self) -> Result<Vec<(String, PathBuf)>, StoreError> {
        let mut out = Vec::new();
        let Ok(rd) = fs::read_dir(&self.root) else {
            return Ok(out);
        };
        for stage in rd.flatten() {
            let name = stage.file_name().to_string_lossy().into_owned();
            if matches!(name.as_str(), "tmp" | "slots" | "quarantine" | "cache")
                || name.starts_with('.')
                || !stage.path().is_dir()
            {
                continue;
            }
            for e in fs::read_dir(stage.path())
                .map_err(|e| StoreError::io(&stage.path(), e))?
                .flatten()
            {
                out.push((name.clone(), e.path()));
            }
        }
        out.sort();
        Ok(out)
    }

    /// Remove every entry whose key is not in `keep`, plus quarantined entries.
    /// Returns what was removed with its size in bytes. Never implicit: only `otb gc`.
    pub fn gc(&self, keep: &BTreeSet<Digest>) -> Result<Vec<(PathBuf, u64)>, StoreError> {
        let mut removed = Vec::new();
        let mut victims: Vec<PathBuf> = self
            .entries()?
            .into_iter()
            .filter(|(_, dir)| {
                let key = dir
                    .file_name()
                    .map(|s| s.to_string_lossy().into_owned())
                    .unwrap_or_default();
                !keep.contains(&Digest(key))
            })
            .map(|(_, d)| d)
            .collect();
        if let Ok(rd) = fs::read_dir(self.root.join("quarantine")) {
            victims.extend(rd.flatten().map(|e| e.path()));
        }
        for dir in victims {
            let size = dir_size(&dir);
            fs::remove_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
            removed.push((dir, size));
        }
        Ok(removed)
    }
}

fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = fs::read_dir(p) else {
        return fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    };
    rd.flatten()
        .map(|e| {
            if e.path().is_dir() {
                dir_size(&e.path())
            } else {
                e.metadata().map(|m| m.len()).unwrap_or(0)
            }
        })
        .sum()
}

fn verify(dir: &Path, key: &Digest) -> Result<Manifest, String> {
    let mp = dir.join("manifest.json");
    let bytes = fs::read(&mp).map_err(|e| format!("manifest.json unreadable: {e}"))?;
    let m: Manifest =
        serde_json::from_slice(&bytes).map_err(|e| format!("manifest.json invalid: {e}"))?;
    if m.manifest_version != MANIFEST_VERSION {
        return Err(format!(
            "manifest version {} (expected {MANIFEST_VERSION})",
            m.manifest_version
        ));
    }
    if &m.key != key || &m.components.key() != key {
        return Err("manifest key does not match its directory".into());
    }
    if output_digest(&m.outputs) != m.output_digest {
        return Err("output digest does not match the table digests".into());
    }
    for (name, t) in &m.outputs {
        let p = dir.join(&t.file);
        let len = fs::metadata(&p)
            .map_err(|e| format!("table `{name}` missing: {e}"))?
            .len();
        if len != t.bytes {
            return Err(format!(
                "table `{name}` has {len} bytes, manifest says {}",
                t.bytes
            ));
        }
        let d = Digest::of_file(&p).map_err(|e| format!("table `{name}` unreadable: {e}"))?;
        if d != t.digest {
            return Err(format!(
                "table `{name}` digest {} != manifest {}",
                d.short(),
                t.digest.short()
            ));
        }
    }
    Ok(m)
}

/// A stage output being written; invisible to readers until [`Store::commit`].
pub struct Staging {
    dir: PathBuf,
    key: Digest,
    components: KeyComponents,
    outputs: BTreeMap<String, TableMeta>,
}

impl Staging {
    /// Write one output table (fsynced).
    pub fn write<R: Row>(&mut self, rows: &[R]) -> Result<&TableMeta, StoreError> {
        let path = self.dir.join(format!("{}.parquet", R::TABLE));
        let meta = write_rows(rows, &path)?;
        self.outputs.insert(R::TABLE.to_string(), meta);
        Ok(&self.outputs[R::TABLE])
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }
}
