//! The on-disk store: content-addressed stage outputs, published atomically.

use crate::digest::Digest;
use crate::error::{StoreError, StoreErrorKind};
use crate::fsio::fsync_dir;
/// Atomic file writes (temp file, fsync, rename, fsync the directory).
pub use crate::fsio::write_atomic;
use crate::key::KeyComponents;
use crate::layout;
pub use crate::manifest::{output_digest, Manifest, Usage, MANIFEST_VERSION};
use crate::remote::Remote;
use crate::table::{read_rows, write_rows, Row, TableMeta};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Written to `<store>/FORMAT`; bumped when the layout changes incompatibly.
pub use crate::layout::STORE_FORMAT;
/// Fault injection for crash tests: `OTB_FAULT_PAUSE=publish` makes every publish
/// stop after the data files and manifest are written into the staging directory and
/// before the atomic rename; it creates `<store>/tmp/PAUSED` and sleeps, so a test can
/// SIGKILL the process at exactly that point.
pub const FAULT_ENV: &str = "OTB_FAULT_PAUSE";

/// Create and remove a file in `dir`: whether new files can be made there (what
/// publishing needs), which permission bits alone do not tell (root, read-only
/// mounts, immutable directories).
fn probe_writable(dir: &Path) -> Result<(), StoreError> {
    let probe = dir.join(format!(".probe-{}", std::process::id()));
    let made = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&probe);
    match made {
        Ok(_) => fs::remove_file(&probe)
            .map_err(|e| StoreError::new(StoreErrorKind::NotWritable(e.to_string()), dir)),
        Err(e) => Err(StoreError::new(
            StoreErrorKind::NotWritable(e.to_string()),
            dir,
        )),
    }
}

/// A verified, published stage output.
#[derive(Clone, Debug)]
pub struct Entry {
    /// The entry's directory, `<store>/<stage>/<key>`.
    pub dir: PathBuf,
    /// Its parsed `manifest.json`.
    pub manifest: Manifest,
}

impl Entry {
    /// The file of one of this entry's tables (the file verification checked).
    pub fn table_path(&self, table: &str) -> PathBuf {
        self.dir.join(layout::table_file(table))
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

    /// The output digest, which downstream keys include.
    pub fn digest(&self) -> &Digest {
        &self.manifest.output_digest
    }

    /// Rows over all of its tables.
    pub fn rows(&self) -> u64 {
        self.manifest.outputs.values().map(|t| t.rows).sum()
    }
}

/// Outcome of looking a key up.
#[derive(Debug)]
pub enum Lookup {
    /// The entry exists and passed verification.
    Hit(Box<Entry>),
    /// No entry has this key.
    Miss,
    /// The entry existed but failed verification; `reason` says why. In a writable
    /// store it has been moved aside to `quarantine/`.
    Corrupt {
        /// What verification found wrong.
        reason: String,
    },
}

/// What the last run of an experiment node produced: lets `status` say why a node is
/// stale (which key component changed) without keeping every old key around.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SlotRecord {
    /// The experiment node.
    pub node: String,
    /// The key of its last run.
    pub key: Digest,
    /// What that key was computed from (compared against the current components).
    pub components: KeyComponents,
}

/// How a store is opened.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// Never writes; a missing store reads as empty (`otb status`).
    ReadOnly,
    /// Creates the store, takes the exclusive lock, cleans crash leftovers.
    ReadWrite,
    /// One of several cooperating writers (`otb run --shard`): creates the store,
    /// takes the lock shared (an exclusive opener such as `gc` or a plain `otb run`
    /// waits for every worker), leaves `tmp/` alone (it may hold other workers'
    /// staging directories). Who computes a node is decided by leases
    /// ([`crate::lease`]); a key published twice keeps its first entry.
    Shared,
}

impl Access {
    /// Whether this access may write.
    pub fn writes(self) -> bool {
        self != Access::ReadOnly
    }
}

/// `p` as an absolute path with what exists of it resolved (symbolic links, `..`)
/// and the rest kept as written: where a file written at `p` would land.
pub fn resolved(p: &Path) -> PathBuf {
    let p = if p.is_absolute() {
        p.to_path_buf()
    } else {
        std::env::current_dir().unwrap_or_default().join(p)
    };
    let mut base = p.clone();
    let mut rest = Vec::new();
    while !base.exists() {
        match (base.file_name().map(|n| n.to_owned()), base.parent()) {
            (Some(n), Some(parent)) => {
                rest.push(n);
                base = parent.to_path_buf();
            }
            _ => break,
        }
    }
    let mut out = base.canonicalize().unwrap_or(base);
    for n in rest.into_iter().rev() {
        out.push(n);
    }
    out
}

/// Whether writing at `p` would write inside the store rooted at `root` (the root
/// itself, an entry, a cache): nothing but the store may write there.
pub fn is_inside(p: &Path, root: &Path) -> bool {
    resolved(p).starts_with(resolved(root))
}

/// The store rooted at a directory. See the crate docs for the layout.
pub struct Store {
    root: PathBuf,
    access: Access,
    _lock: Option<File>,
    /// A store on object storage, which this one mirrors (see [`crate::remote`]).
    remote: Option<Remote>,
}

/// What is at a store root before anything is written there.
#[derive(Debug, PartialEq, Eq)]
enum RootState {
    /// Nothing: a read-write open creates it.
    Missing,
    /// An empty directory (or one holding only [`layout::PRE_FORMAT`] names).
    Empty,
    /// A directory whose `FORMAT` file says [`STORE_FORMAT`].
    Store,
}

/// Largest `FORMAT` file that is read; a real one is a dozen bytes.
const FORMAT_MAX_BYTES: u64 = 256;

/// Look at `root` without changing anything: a store, an empty directory, nothing, or
/// (an error) something that is not a store.
fn classify(root: &Path) -> Result<RootState, StoreError> {
    let not_a_store = || {
        StoreError::new(
            StoreErrorKind::NotAStore {
                expected: STORE_FORMAT.to_string(),
            },
            root,
        )
    };
    let meta = match fs::metadata(root) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RootState::Missing),
        // A path that cannot be a directory (below a regular file, no permission).
        Err(e) => {
            return Err(StoreError::new(
                StoreErrorKind::NotWritable(e.to_string()),
                root,
            ))
        }
    };
    if !meta.is_dir() {
        return Err(not_a_store());
    }
    let format = root.join("FORMAT");
    match fs::symlink_metadata(&format) {
        Ok(m) if m.is_file() && m.len() <= FORMAT_MAX_BYTES => {
            let bytes = fs::read(&format).map_err(|e| StoreError::io(&format, e))?;
            let found = String::from_utf8_lossy(&bytes).trim().to_string();
            if found == STORE_FORMAT {
                return Ok(RootState::Store);
            }
            if found.starts_with("otb-store-") && !found.contains(char::is_whitespace) {
                return Err(StoreError::new(
                    StoreErrorKind::Format {
                        found,
                        expected: STORE_FORMAT.to_string(),
                    },
                    &format,
                ));
            }
            return Err(not_a_store());
        }
        Ok(_) => return Err(not_a_store()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(StoreError::io(&format, e)),
    }
    let rd = fs::read_dir(root).map_err(|e| StoreError::io(root, e))?;
    for item in rd {
        let item = item.map_err(|e| StoreError::io(root, e))?;
        let name = item.file_name();
        // `.FORMAT.tmp*`: a first open that stopped while writing `FORMAT`.
        let format_tmp = name.to_string_lossy().starts_with(".FORMAT.tmp");
        if !format_tmp && !layout::PRE_FORMAT.iter().any(|p| name == *p) {
            // Another writer may have written `FORMAT` (and then `tmp/` and the rest)
            // between the look at `FORMAT` above and this listing: look again.
            if fs::symlink_metadata(&format).is_ok() {
                return classify(root);
            }
            return Err(not_a_store());
        }
    }
    Ok(RootState::Empty)
}

impl Store {
    /// Open (and for [`Access::ReadWrite`], create and lock) the store at `root`.
    ///
    /// Only a missing directory, an empty one, or one whose `FORMAT` file names this
    /// store format is opened; anything else is [`StoreErrorKind::NotAStore`] (or
    /// [`StoreErrorKind::Format`] for another store version) and nothing is touched.
    /// A read-write open then deletes the staging directories a crashed writer left
    /// in `tmp/` (only names of the store's own shape; anything else there is left
    /// alone with a warning).
    pub fn open(root: &Path, access: Access) -> Result<Store, StoreError> {
        let root = root.to_path_buf();
        let mut store = Store {
            root: root.clone(),
            access,
            _lock: None,
            remote: None,
        };
        classify(&root)?;
        if access == Access::ReadOnly {
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
        let tried = if access == Access::Shared {
            lock.try_lock_shared()
        } else {
            lock.try_lock()
        };
        match tried {
            Ok(()) => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                eprintln!(
                    "otb: waiting for the store lock ({}): another otb process is using this store",
                    lock_path.display()
                );
                if access == Access::Shared {
                    lock.lock_shared()
                } else {
                    lock.lock()
                }
                .map_err(|e| StoreError::io(&lock_path, e))?;
            }
            Err(std::fs::TryLockError::Error(e)) => return Err(StoreError::io(&lock_path, e)),
        }
        store._lock = Some(lock);
        // Under the lock, look again: another writer may have initialised it meanwhile.
        if classify(&root)? != RootState::Store {
            write_atomic(&root.join("FORMAT"), format!("{STORE_FORMAT}\n").as_bytes())?;
        }
        // A store whose directory cannot take a new file is unwritable, even when its
        // `.lock` can be opened: refused here, before any work (nothing could be
        // published, and a run would find out only at its first publish).
        probe_writable(&root)?;
        for d in ["tmp", "slots", "quarantine"] {
            fs::create_dir_all(root.join(d)).map_err(|e| StoreError::io(&root.join(d), e))?;
        }
        // Other workers' staging directories are in `tmp/` while they run: only an
        // exclusive opener cleans it, and the leases and worker records that dead
        // workers left (no worker is alive while the lock is held exclusively).
        let left = if access == Access::Shared {
            Vec::new()
        } else {
            for d in [
                crate::layout::lease_dir(&root),
                crate::layout::worker_dir(&root),
            ] {
                for item in fs::read_dir(&d).into_iter().flatten().flatten() {
                    if item.file_type().is_ok_and(|t| t.is_file()) {
                        let _ = fs::remove_file(item.path());
                    }
                }
            }
            store.clean_tmp()?
        };
        for (path, why) in left {
            eprintln!(
                "otb: warning: left {} alone in the store's tmp/: {why}",
                path.display()
            );
        }
        Ok(store)
    }

    /// Delete what a crashed writer left in `tmp/`: staging directories (never
    /// results) and the fault-injection marker. Returns what was left alone, and why.
    fn clean_tmp(&self) -> Result<Vec<(PathBuf, String)>, StoreError> {
        let tmp = self.root.join("tmp");
        let mut left = Vec::new();
        let rd = fs::read_dir(&tmp).map_err(|e| StoreError::io(&tmp, e))?;
        for item in rd {
            let item = item.map_err(|e| StoreError::io(&tmp, e))?;
            let path = item.path();
            let name = item.file_name().to_string_lossy().into_owned();
            let ft = item.file_type().map_err(|e| StoreError::io(&path, e))?;
            if name == layout::PAUSED && ft.is_file() {
                fs::remove_file(&path).map_err(|e| StoreError::io(&path, e))?;
            } else if !layout::is_staging_name(&name) {
                left.push((
                    path,
                    "not a name the store gives a staging directory".into(),
                ));
            } else if let Err(why) = layout::check_entry_contents(&path) {
                left.push((path, why));
            } else {
                fs::remove_dir_all(&path).map_err(|e| StoreError::io(&path, e))?;
            }
        }
        Ok(left)
    }

    /// The store on object storage `remote`, through its local mirror `mirror` (a
    /// store directory of its own, see [`crate::remote::mirror_dir`]). The remote's
    /// `FORMAT` is checked (and written by a writer when there is none). The mirror
    /// is a cache that every access fills: a read-only open opens it
    /// [`Access::Shared`] (the remote is never written then).
    pub fn open_remote(mirror: &Path, remote: Remote, access: Access) -> Result<Store, StoreError> {
        remote.check_format(access.writes())?;
        let mirror_access = match access {
            Access::ReadOnly => Access::Shared,
            a => a,
        };
        let mut store = Store::open(mirror, mirror_access)?;
        store.remote = Some(remote);
        Ok(store)
    }

    /// The store on object storage this one mirrors, if any.
    pub fn remote(&self) -> Option<&Remote> {
        self.remote.as_ref()
    }

    /// A staging directory in `tmp/` for `stage`/`key`.
    fn staging_dir(&self, stage: &str, key: &Digest) -> PathBuf {
        static SEQ: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0)
            .wrapping_add(SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
        self.root.join("tmp").join(layout::staging_name(
            stage,
            key.short(),
            std::process::id(),
            nanos,
        ))
    }

    /// Download the remote's entry `p` into a verified staging directory (removed
    /// again when it does not verify: `Err` says why).
    fn download(
        &self,
        remote: &Remote,
        p: &crate::remote::Published,
    ) -> Result<Result<PathBuf, String>, StoreError> {
        let m = &p.manifest;
        let dir = self.staging_dir(&m.components.stage, &m.key);
        fs::create_dir_all(&dir).map_err(|e| StoreError::io(&dir, e))?;
        let got = remote
            .download(p, &dir)
            .and_then(|()| fsync_dir(&dir))
            .map(|()| verify(&dir, &m.key));
        match got {
            Ok(Ok(_)) => Ok(Ok(dir)),
            Ok(Err(reason)) => {
                let _ = fs::remove_dir_all(&dir);
                Ok(Err(reason))
            }
            Err(e) => {
                let _ = fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// On a local miss: the remote's entry of `stage`/`key`, fetched into the
    /// mirror (`None`: the remote has none, or none that verifies).
    fn fetch(&self, stage: &str, key: &Digest) -> Result<Option<Entry>, StoreError> {
        let Some(remote) = &self.remote else {
            return Ok(None);
        };
        let p = match remote.published(stage, key)? {
            None => return Ok(None),
            Some(Ok(p)) => p,
            Some(Err(reason)) => {
                eprintln!(
                    "otb: warning: {}/{stage}/{}: {reason}; not used",
                    remote.url(),
                    key.0
                );
                return Ok(None);
            }
        };
        let staged = match self.download(remote, &p)? {
            Ok(d) => d,
            Err(reason) => {
                eprintln!(
                    "otb: warning: {}/{stage}/{} failed verification ({reason}); not used",
                    remote.url(),
                    key.0
                );
                return Ok(None);
            }
        };
        let stage_dir = self.root.join(stage);
        fs::create_dir_all(&stage_dir).map_err(|e| StoreError::io(&stage_dir, e))?;
        let dest = stage_dir.join(&key.0);
        if fs::rename(&staged, &dest).is_err() {
            // Fetched by another thread or process of this mirror meanwhile.
            let _ = fs::remove_dir_all(&staged);
        }
        let _ = fsync_dir(&stage_dir);
        Ok(verify(&dest, key).ok().map(|manifest| Entry {
            dir: dest,
            manifest,
        }))
    }

    /// After a local commit of `ours`: publish it to the remote. When another
    /// writer published the key first, its entry replaces ours in the mirror (the
    /// same tables when the stage is deterministic) and is returned. When the
    /// publish fails, ours is moved out of the mirror (a rerun computes it again,
    /// resuming from its journal) and the error returned.
    fn publish(&self, ours: Entry) -> Result<Entry, StoreError> {
        let Some(remote) = &self.remote else {
            return Ok(ours);
        };
        let stage = ours.manifest.components.stage.clone();
        let key = ours.manifest.key.clone();
        let theirs = match remote.publish(&ours.dir, &ours.manifest) {
            Ok(None) => return Ok(ours),
            Ok(Some(Ok(theirs))) => theirs,
            Ok(Some(Err(reason))) => {
                eprintln!(
                    "otb: warning: {}/{stage}/{}: {reason}; keeping this run's output",
                    remote.url(),
                    key.0
                );
                return Ok(ours);
            }
            Err(e) => {
                let aside = self.staging_dir(&stage, &key);
                if fs::rename(&ours.dir, &aside).is_ok() {
                    let _ = fs::remove_dir_all(&aside);
                }
                return Err(e);
            }
        };
        if theirs.manifest.output_digest == ours.manifest.output_digest {
            return Ok(ours);
        }
        let staged = match self.download(remote, &theirs)? {
            Ok(d) => d,
            Err(reason) => {
                eprintln!(
                    "otb: warning: {}/{stage}/{} failed verification ({reason}); keeping this run's output",
                    remote.url(),
                    key.0
                );
                return Ok(ours);
            }
        };
        let aside = self.staging_dir(&stage, &key);
        fs::rename(&ours.dir, &aside).map_err(|e| StoreError::io(&ours.dir, e))?;
        fs::rename(&staged, &ours.dir).map_err(|e| StoreError::io(&ours.dir, e))?;
        let _ = fs::remove_dir_all(&aside);
        if let Some(parent) = ours.dir.parent() {
            fsync_dir(parent)?;
        }
        Ok(Entry {
            dir: ours.dir,
            manifest: theirs.manifest,
        })
    }

    /// The store's root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// How the store was opened.
    pub fn access(&self) -> Access {
        self.access
    }

    /// Where the entry of `stage` with `key` lives, `<root>/<stage>/<key>` (whether or
    /// not it exists).
    pub fn entry_dir(&self, stage: &str, key: &Digest) -> PathBuf {
        self.root.join(stage).join(&key.0)
    }

    /// Look a key up and verify the entry (manifest parses and matches the key, every
    /// table exists with the recorded file name, size and digest). Changes nothing:
    /// a corrupt entry stays where it is (see [`Store::quarantine`]).
    pub fn inspect(&self, components: &KeyComponents) -> Lookup {
        if !layout::is_stage_name(&components.stage) {
            // Not a directory name the store can hold (see `begin`).
            return Lookup::Miss;
        }
        let key = components.key();
        let dir = self.entry_dir(&components.stage, &key);
        if !dir.exists() {
            return match self.fetch(&components.stage, &key) {
                Ok(Some(entry)) => Lookup::Hit(Box::new(entry)),
                Ok(None) => Lookup::Miss,
                Err(e) => {
                    eprintln!(
                        "otb: warning: looking {} up in the remote store: {e}",
                        key.short()
                    );
                    Lookup::Miss
                }
            };
        }
        match verify(&dir, &key) {
            Ok(manifest) => Lookup::Hit(Box::new(Entry { dir, manifest })),
            Err(reason) => Lookup::Corrupt { reason },
        }
    }

    /// [`Store::inspect`], and in a writable store a corrupt entry is then moved to
    /// `quarantine/` with a warning on stderr. If it cannot be moved, the warning says
    /// so and the entry stays; [`Store::commit`] never reuses it (it refuses to publish
    /// over an entry it cannot move aside). Prefer [`Store::inspect`] plus
    /// [`Store::quarantine`], which returns that failure as an error.
    pub fn lookup(&self, components: &KeyComponents) -> Lookup {
        let found = self.inspect(components);
        if let Lookup::Corrupt { reason } = &found {
            if self.access.writes() {
                let key = components.key();
                if let Err(e) = self.quarantine(&components.stage, &key, reason) {
                    eprintln!("otb: warning: {e}");
                }
            }
        }
        found
    }

    /// Move the entry `<stage>/<key>` aside to `quarantine/` (after it failed
    /// verification for `reason`), with a warning on stderr. Returns where it went.
    /// An entry that cannot be moved is an error ([`StoreErrorKind::StuckCorrupt`]):
    /// it must be neither reused nor written over.
    pub fn quarantine(
        &self,
        stage: &str,
        key: &Digest,
        reason: &str,
    ) -> Result<PathBuf, StoreError> {
        let dir = self.entry_dir(stage, key);
        let stuck = |error: String| {
            StoreError::new(
                StoreErrorKind::StuckCorrupt {
                    reason: reason.to_string(),
                    error,
                },
                &dir,
            )
        };
        if !self.access.writes() {
            return Err(stuck("the store is opened read-only".into()));
        }
        if !layout::is_stage_name(stage) || !layout::is_key_name(&key.0) {
            return Err(stuck("not an entry directory of the store".into()));
        }
        let qdir = self.root.join("quarantine");
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default();
        let dest = qdir.join(layout::quarantine_name(
            stage,
            key.short(),
            now.as_secs(),
            now.subsec_nanos(),
        ));
        fs::create_dir_all(&qdir)
            .and_then(|()| fs::rename(&dir, &dest))
            .map_err(|e| stuck(e.to_string()))?;
        eprintln!(
            "otb: warning: {} failed verification ({reason}); moved to {} and recomputing",
            dir.display(),
            dest.display()
        );
        Ok(dest)
    }

    /// Start writing a stage output into a private staging directory. The staging
    /// directory is deleted when the [`Staging`] is dropped without being committed.
    pub fn begin(&self, components: &KeyComponents) -> Result<Staging, StoreError> {
        if !self.access.writes() {
            return Err(StoreError::new(
                StoreErrorKind::NotWritable("opened read-only".into()),
                &self.root,
            ));
        }
        if !layout::is_stage_name(&components.stage) {
            return Err(StoreError::new(
                StoreErrorKind::Manifest(format!(
                    "stage name `{}` cannot name a store directory (use ASCII letters, digits, `-`, `_`, `.`)",
                    components.stage
                )),
                &self.root,
            ));
        }
        let key = components.key();
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = self.root.join("tmp").join(layout::staging_name(
            &components.stage,
            key.short(),
            std::process::id(),
            nanos,
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
    /// fsynced, renamed into place, parent fsynced. A store on object storage then
    /// publishes the entry there (see [`crate::remote`]); when another writer
    /// published the key first, its entry is returned instead.
    ///
    /// If the key is already published (another writer got there first), a verified
    /// existing entry is kept and returned; a corrupt one is moved to quarantine and
    /// replaced, and if it cannot be moved the commit fails. A corrupt entry is never
    /// returned.
    pub fn commit(
        &self,
        staging: Staging,
        node: &str,
        wall_ms: u64,
        usage: Usage,
    ) -> Result<Entry, StoreError> {
        let entry = self.commit_local(staging, node, wall_ms, usage)?;
        self.publish(entry)
    }

    /// [`Store::commit`] into the local directory only.
    fn commit_local(
        &self,
        mut staging: Staging,
        node: &str,
        wall_ms: u64,
        usage: Usage,
    ) -> Result<Entry, StoreError> {
        let outputs = std::mem::take(&mut staging.outputs);
        let manifest = Manifest {
            manifest_version: MANIFEST_VERSION,
            key: staging.key.clone(),
            components: staging.components.clone(),
            output_digest: output_digest(&outputs),
            outputs,
            node: node.to_string(),
            wall_ms,
            usage,
            created_unix: crate::clock::now_unix(),
        };
        let json = serde_json::to_vec_pretty(&manifest)
            .map_err(|e| StoreError::new(StoreErrorKind::Manifest(e.to_string()), &staging.dir))?;
        write_atomic(&staging.dir.join("manifest.json"), &json)?;
        fsync_dir(&staging.dir)?;
        if std::env::var(FAULT_ENV).as_deref() == Ok("publish") {
            let marker = self.root.join("tmp").join(layout::PAUSED);
            let _ = fs::write(&marker, node);
            std::thread::sleep(std::time::Duration::from_secs(300));
        }
        let stage = &manifest.components.stage;
        let stage_dir = self.root.join(stage);
        fs::create_dir_all(&stage_dir).map_err(|e| StoreError::io(&stage_dir, e))?;
        let dest = stage_dir.join(&manifest.key.0);
        if dest.exists() {
            match verify(&dest, &manifest.key) {
                // Same key => same inputs => the same content; keep theirs.
                Ok(theirs) => {
                    return Ok(Entry {
                        dir: dest,
                        manifest: theirs,
                    })
                }
                Err(reason) => {
                    self.quarantine(stage, &manifest.key, &reason)?;
                }
            }
        }
        if let Err(e) = fs::rename(&staging.dir, &dest) {
            // A concurrent writer may have published the same key between the check
            // above and the rename: its entry wins if it verifies.
            return match verify(&dest, &manifest.key) {
                Ok(theirs) => Ok(Entry {
                    dir: dest,
                    manifest: theirs,
                }),
                Err(_) => Err(StoreError::io(&dest, e)),
            };
        }
        staging.dir = PathBuf::new();
        fsync_dir(&stage_dir)?;
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

    /// Remember the components `node` was last keyed with (for `status` reasons).
    /// Does nothing in a read-only store.
    pub fn record_slot(&self, node: &str, components: &KeyComponents) -> Result<(), StoreError> {
        if !self.access.writes() {
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

    /// Whether work on `stage`'s output `key` is under way or was stopped part-way:
    /// a run is staging it now (or was killed while staging it), or its journal
    /// holds finished items.
    pub fn in_progress(&self, stage: &str, key: &Digest) -> bool {
        if layout::journal_dir(&self.root, &key.0).is_dir() {
            return true;
        }
        let prefix = layout::staging_prefix(stage, key.short());
        fs::read_dir(self.root.join("tmp")).is_ok_and(|rd| {
            rd.flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        })
    }

    fn slot_path(&self, node: &str) -> PathBuf {
        self.root.join("slots").join(format!(
            "{}.json",
            &Digest::of_bytes(node.as_bytes()).0[..32]
        ))
    }

    /// Every published entry: (stage, key dir). Only directories of the store's own
    /// shape (`<stage>/<64 hex key>/`) are listed.
    pub fn entries(&self) -> Result<Vec<(String, PathBuf)>, StoreError> {
        Ok(self.scan()?.entries)
    }

    /// Walk the store's top level: entries, and everything that is not the store's.
    pub(crate) fn scan(&self) -> Result<Scan, StoreError> {
        let mut scan = Scan::default();
        let rd = match fs::read_dir(&self.root) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(scan),
            Err(e) => return Err(StoreError::io(&self.root, e)),
        };
        for item in rd {
            let item = item.map_err(|e| StoreError::io(&self.root, e))?;
            let path = item.path();
            let name = item.file_name().to_string_lossy().into_owned();
            if layout::RESERVED.contains(&name.as_str()) || name.starts_with(".FORMAT.tmp") {
                continue;
            }
            let ft = item.file_type().map_err(|e| StoreError::io(&path, e))?;
            if !ft.is_dir() || !layout::is_stage_name(&name) {
                scan.foreign
                    .push((path, "not a stage directory of the store".into()));
                continue;
            }
            for e in fs::read_dir(&path).map_err(|e| StoreError::io(&path, e))? {
                let e = e.map_err(|e| StoreError::io(&path, e))?;
                let key = e.file_name().to_string_lossy().into_owned();
                let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
                if is_dir && layout::is_key_name(&key) {
                    scan.entries.push((name.clone(), e.path()));
                } else {
                    scan.foreign
                        .push((e.path(), "not an entry directory of the store".into()));
                }
            }
        }
        scan.entries.sort();
        scan.foreign.sort();
        Ok(scan)
    }
}

/// The store's top level, sorted into entries and things that are not the store's.
#[derive(Default)]
pub(crate) struct Scan {
    pub entries: Vec<(String, PathBuf)>,
    pub foreign: Vec<(PathBuf, String)>,
}

pub(crate) fn dir_size(p: &Path) -> u64 {
    let Ok(rd) = fs::read_dir(p) else {
        return fs::metadata(p).map(|m| m.len()).unwrap_or(0);
    };
    rd.flatten()
        .map(|e| {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                dir_size(&e.path())
            } else {
                e.metadata().map(|m| m.len()).unwrap_or(0)
            }
        })
        .sum()
}

pub(crate) fn verify(dir: &Path, key: &Digest) -> Result<Manifest, String> {
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
        // Readers open `layout::table_file(name)`; verify exactly that file.
        if !layout::is_table_name(name) || t.file != layout::table_file(name) {
            return Err(format!(
                "table `{name}` is recorded in file `{}`, not `{}`",
                t.file,
                layout::table_file(name)
            ));
        }
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
/// Dropping it uncommitted (an error or panic in the stage) deletes its directory.
pub struct Staging {
    dir: PathBuf,
    key: Digest,
    components: KeyComponents,
    outputs: BTreeMap<String, TableMeta>,
}

impl Staging {
    /// Write one output table (fsynced).
    pub fn write<R: Row>(&mut self, rows: &[R]) -> Result<&TableMeta, StoreError> {
        use std::collections::btree_map::Entry as Slot;
        if !layout::is_table_name(R::TABLE) {
            return Err(StoreError::new(
                StoreErrorKind::Table(format!(
                    "table name `{}` cannot name a file (use ASCII letters, digits, `-`, `_`, `.`)",
                    R::TABLE
                )),
                &self.dir,
            ));
        }
        let path = self.dir.join(layout::table_file(R::TABLE));
        let meta = write_rows(rows, &path)?;
        Ok(match self.outputs.entry(R::TABLE.to_string()) {
            Slot::Vacant(v) => v.insert(meta),
            Slot::Occupied(mut o) => {
                o.insert(meta);
                o.into_mut()
            }
        })
    }

    /// The staging directory the tables are written into (deleted on drop unless
    /// published).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        if !self.dir.as_os_str().is_empty() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_sums_saturate_instead_of_wrapping() {
        let mut u = Usage {
            calls: 1,
            prompt_tokens: u64::MAX - 1,
            ..Usage::default()
        };
        u.add(&Usage {
            calls: u64::MAX,
            prompt_tokens: 5,
            completion_tokens: 3,
            ..Usage::default()
        });
        assert_eq!(u.calls, u64::MAX);
        assert_eq!(u.prompt_tokens, u64::MAX);
        assert_eq!(u.completion_tokens, 3);
        assert_eq!(u.total_tokens(), u64::MAX);
    }
}
