//! Cooperative workers on one store (`otb run --shard I/N`): who computes a node.
//!
//! Every worker walks the whole plan; a node missing from the store is computed by
//! the worker that holds its **lease**, a file `cache/leases/<key>.json` created with
//! `create_new` (so exactly one worker gets it) and refreshed by a heartbeat while
//! the node is computed. A lease whose heartbeat is older than the timeout belongs
//! to a worker that died: it is taken over (renamed away -- only one worker's rename
//! succeeds -- and created anew). Each node has an **owner shard** (chains spread
//! over the shards in plan order); a worker leaves another shard's node to it while
//! that shard's **worker record** (`cache/workers/shard-I-of-N.json`, also
//! heartbeated) is alive, and polls the store for the node's output meanwhile. So a
//! node is computed once on purpose; should two workers compute one anyway, the
//! store's publish keeps the first entry and drops the other without error.
//!
//! Leases and worker records live on a [`Board`]: the store's directory, or for a
//! store on object storage the object store itself (a lease created with a
//! create-only write, refreshed and taken over with writes conditional on the
//! version read, so of two takers only one wins).

use crate::digest::Digest;
use crate::error::StoreError;
use crate::fsio::write_atomic;
use crate::remote::{Put, Remote, Version};
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Which of `count` cooperating workers this is (`index` counts from 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    /// This worker, 1..=count.
    pub index: u32,
    /// Workers in all.
    pub count: u32,
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What a lease or worker record says (the file's JSON).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Holder {
    /// `shard I/N`, or `otb run` for a worker without a shard.
    pub worker: String,
    /// Host name.
    pub host: String,
    /// Process id.
    pub pid: u32,
    /// The node (leases only).
    #[serde(default)]
    pub node: String,
    /// When it was taken (Unix milliseconds).
    pub started_ms: u64,
    /// Last heartbeat (Unix milliseconds).
    pub heartbeat_ms: u64,
    /// Which join of the worker wrote it (drawn when it joined), so that a worker
    /// knows its own leases from those of another worker of the same process; 0 in
    /// records written before this field.
    #[serde(default)]
    pub session: u64,
}

impl Holder {
    /// A lease of `node` whose holder is not known yet (its file is being written):
    /// pid 0, no host.
    pub fn unknown(node: &str) -> Holder {
        Holder {
            worker: "another worker".into(),
            host: String::new(),
            pid: 0,
            node: node.to_string(),
            started_ms: 0,
            heartbeat_ms: 0,
            session: 0,
        }
    }

    /// Whether its heartbeat is older than `timeout`.
    pub fn expired(&self, timeout: Duration) -> bool {
        crate::clock::now_ms().saturating_sub(self.heartbeat_ms) > timeout.as_millis() as u64
    }
}

/// Where the leases of a store live.
pub fn lease_dir(root: &Path) -> PathBuf {
    crate::layout::lease_dir(root)
}

/// Where the worker records of a store live.
pub fn worker_dir(root: &Path) -> PathBuf {
    crate::layout::worker_dir(root)
}

fn lease_rel(key: &Digest) -> String {
    format!("cache/leases/{}.json", key.0)
}

fn worker_rel(shard: Shard) -> String {
    format!(
        "cache/workers/shard-{}-of-{}.json",
        shard.index, shard.count
    )
}

/// Where the leases and worker records of a store live.
#[derive(Clone, Debug)]
pub enum Board {
    /// Files below the store's directory (a shared filesystem).
    Dir(PathBuf),
    /// Objects below the prefix of a store on object storage.
    Remote(Remote),
}

impl Board {
    /// Where the leases and worker records of `store`'s cooperating workers live:
    /// the store's directory, or the object store of a remote store.
    pub fn of(store: &crate::store::Store) -> Board {
        match store.remote() {
            None => Board::Dir(store.root().to_path_buf()),
            Some(r) => match r.local_dir() {
                Some(dir) => Board::Dir(dir.to_path_buf()),
                None => Board::Remote(r.clone()),
            },
        }
    }
}

impl Board {
    fn path(root: &Path, rel: &str) -> PathBuf {
        root.join(rel)
    }

    /// The holder written at `rel` and its version (a conditional update's
    /// precondition); `None` when there is none or it does not parse yet.
    fn read(&self, rel: &str) -> Option<(Holder, Version)> {
        match self {
            Board::Dir(root) => {
                let bytes = fs::read(Self::path(root, rel)).ok()?;
                Some((serde_json::from_slice(&bytes).ok()?, Version::default()))
            }
            Board::Remote(r) => {
                let (bytes, v) = r.get(rel).ok()??;
                Some((serde_json::from_slice(&bytes).ok()?, v))
            }
        }
    }

    /// Create `rel` holding `h` unless it exists: whether this call created it. The
    /// file appears with its holder or not at all: it is written whole under a name of
    /// its own, then hard-linked to `rel` (which fails when `rel` exists). A file
    /// created empty and written after could be left empty by a worker killed in
    /// between, and every other worker would wait for it forever.
    fn create(&self, rel: &str, h: &Holder) -> Result<bool, StoreError> {
        match self {
            Board::Dir(root) => {
                let path = Self::path(root, rel);
                static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let whole = path.with_extension(format!("new{}-{seq}", std::process::id()));
                write_holder(&whole, h)?;
                let linked = fs::hard_link(&whole, &path);
                let _ = fs::remove_file(&whole);
                match linked {
                    Ok(()) => Ok(true),
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                    // A filesystem without hard links: created empty, then written (a
                    // lease left unreadable by a death in between is taken over after
                    // the timeout: `unreadable_for`).
                    Err(_) => match fs::OpenOptions::new()
                        .write(true)
                        .create_new(true)
                        .open(&path)
                    {
                        Ok(f) => {
                            drop(f);
                            write_holder(&path, h)?;
                            Ok(true)
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                        Err(e) => Err(StoreError::io(&path, e)),
                    },
                }
            }
            Board::Remote(r) => Ok(matches!(
                r.put(rel, holder_json(h)?, true, None)?,
                Put::Done(_)
            )),
        }
    }

    /// Write `h` at `rel`: over anything (`old` `None`), or only over the version
    /// `old` that was read (whether it was written).
    fn write(&self, rel: &str, h: &Holder, old: Option<&Version>) -> Result<bool, StoreError> {
        match self {
            Board::Dir(root) => write_holder(&Self::path(root, rel), h).map(|()| true),
            Board::Remote(r) => Ok(matches!(
                r.put(rel, holder_json(h)?, false, old)?,
                Put::Done(_)
            )),
        }
    }

    /// Take over the expired lease at `rel` (read at version `old`) for `h`: of
    /// several workers trying at once, exactly one gets `true`.
    fn take_over(&self, rel: &str, old: &Version, h: &Holder) -> Result<bool, StoreError> {
        match self {
            Board::Dir(root) => {
                // Move the dead holder's lease away (one worker's rename wins), then
                // create it anew (one worker's create wins).
                let path = Self::path(root, rel);
                let aside = path.with_extension(format!(
                    "expired-{}-{}",
                    std::process::id(),
                    crate::clock::now_ms()
                ));
                if fs::rename(&path, &aside).is_ok() {
                    let _ = fs::remove_file(&aside);
                }
                self.create(rel, h)
            }
            Board::Remote(_) => self.write(rel, h, Some(old)),
        }
    }

    /// Whether `rel` exists, does not parse and was last written more than
    /// `timeout` ago: a lease file left empty or cut by a worker that died writing
    /// it (an older otb created it empty, then wrote it), which no heartbeat will
    /// ever refresh. Object stores write an object whole: never there.
    fn unreadable_for(&self, rel: &str, timeout: Duration) -> bool {
        match self {
            Board::Dir(root) => fs::metadata(Self::path(root, rel))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > timeout),
            Board::Remote(_) => false,
        }
    }

    fn remove(&self, rel: &str) {
        match self {
            Board::Dir(root) => {
                let _ = fs::remove_file(Self::path(root, rel));
            }
            Board::Remote(r) => {
                let _ = r.delete(rel);
            }
        }
    }

    fn prepare(&self) -> Result<(), StoreError> {
        if let Board::Dir(root) = self {
            for d in [lease_dir(root), worker_dir(root)] {
                fs::create_dir_all(&d).map_err(|e| StoreError::io(&d, e))?;
            }
        }
        Ok(())
    }
}

/// The lease on `key`, if a worker holds one (expired or not).
pub fn lease_of(board: &Board, key: &Digest) -> Option<Holder> {
    board.read(&lease_rel(key)).map(|(h, _)| h)
}

/// The outcome of asking for a lease.
pub enum Claim {
    /// This worker holds it now (released when dropped).
    Held(LeaseGuard),
    /// Another worker holds a live lease.
    Busy(Holder),
}

/// A held lease: removed when dropped (the node published, or failed).
pub struct LeaseGuard {
    board: Board,
    key: Digest,
    me: Holder,
    held: Arc<Mutex<HashSet<Digest>>>,
    taken_from: Option<Box<Holder>>,
}

impl LeaseGuard {
    /// The dead worker whose expired lease this one took over (its work on the
    /// node is done again here); `None` when the node was free.
    pub fn taken_from(&self) -> Option<&Holder> {
        self.taken_from.as_deref()
    }
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        // Held while the lease is removed: the heartbeat (which holds it while it
        // refreshes the held leases) cannot write this lease back after its removal.
        let mut held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        held.remove(&self.key);
        let rel = lease_rel(&self.key);
        // Only this worker's lease: one taken over meanwhile is the taker's.
        if let Some((l, _)) = self.board.read(&rel) {
            if l.pid == self.me.pid && l.host == self.me.host {
                self.board.remove(&rel);
            }
        }
        drop(held);
    }
}

/// One worker's part in cooperating: its shard, the owner of each node, its
/// leases, and the heartbeat that keeps them and its worker record alive.
pub struct Coop {
    board: Board,
    /// This worker's shard.
    pub shard: Shard,
    /// A lease or record older than this belongs to a dead worker.
    pub timeout: Duration,
    owners: HashMap<String, u32>,
    me: Holder,
    held: Arc<Mutex<HashSet<Digest>>>,
    started: std::time::Instant,
    stop: Arc<std::sync::atomic::AtomicBool>,
}

impl Coop {
    /// Join the workers of the store whose leases are on `board` as `shard`;
    /// `owners` gives each node's owner shard (a node not in it is anyone's: the
    /// first worker to lease it computes it). Writes this worker's record and starts
    /// its heartbeat thread.
    pub fn join(
        board: Board,
        shard: Shard,
        timeout: Duration,
        owners: HashMap<String, u32>,
    ) -> Result<Arc<Coop>, StoreError> {
        board.prepare()?;
        let now = crate::clock::now_ms();
        let me = Holder {
            worker: format!("shard {shard}"),
            host: crate::remote::host(),
            pid: std::process::id(),
            node: String::new(),
            started_ms: now,
            heartbeat_ms: now,
            session: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_nanos() as u64)
                .rotate_left(17)
                ^ u64::from(std::process::id())
                | 1,
        };
        let coop = Arc::new(Coop {
            board,
            shard,
            timeout,
            owners,
            me,
            held: Arc::default(),
            started: std::time::Instant::now(),
            stop: Arc::default(),
        });
        coop.beat()?;
        let c = coop.clone();
        std::thread::spawn(move || {
            let every = (c.timeout / 4).max(Duration::from_millis(50));
            while !c.stop.load(std::sync::atomic::Ordering::Relaxed) {
                std::thread::sleep(every);
                let _ = c.beat();
            }
        });
        Ok(coop)
    }

    /// Refresh the worker record and every held lease.
    fn beat(&self) -> Result<(), StoreError> {
        let now = crate::clock::now_ms();
        let me = Holder {
            heartbeat_ms: now,
            ..self.me.clone()
        };
        self.board.write(&worker_rel(self.shard), &me, None)?;
        // Held while the leases are refreshed, so that a lease released meanwhile
        // (its guard dropped) is not written back: the guard waits for this beat, or
        // this beat no longer lists it.
        let held = self.held.lock().unwrap_or_else(|e| e.into_inner());
        for key in held.iter() {
            let rel = lease_rel(key);
            if let Some((mut l, v)) = self.board.read(&rel) {
                if l.pid == self.me.pid && l.host == self.me.host {
                    l.heartbeat_ms = now;
                    // Only over the version read: a lease taken over meanwhile stays
                    // the taker's.
                    self.board.write(&rel, &l, Some(&v))?;
                }
            }
        }
        Ok(())
    }

    /// Stop the heartbeat and remove this worker's record (a clean end).
    pub fn leave(&self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        self.board.remove(&worker_rel(self.shard));
    }

    /// The shard that owns `node`, when it is not this worker's and that worker is
    /// alive (its record's heartbeat is fresh; a record not written yet counts as
    /// alive for one timeout after this worker started): then this worker waits for
    /// the node instead of computing it.
    pub fn other_owner(&self, node: &str) -> Option<Shard> {
        let owner = *self.owners.get(node)?;
        if owner == self.shard.index {
            return None;
        }
        let other = Shard {
            index: owner,
            count: self.shard.count,
        };
        match self.board.read(&worker_rel(other)).map(|(h, _)| h) {
            Some(h) if !h.expired(self.timeout) => Some(other),
            None if self.started.elapsed() < self.timeout => Some(other),
            _ => None,
        }
    }

    /// Try to lease `key` for `node`: held, or busy with another worker's live lease.
    /// An expired lease is taken over.
    pub fn claim(&self, node: &str, key: &Digest) -> Result<Claim, StoreError> {
        let rel = lease_rel(key);
        for _ in 0..3 {
            let now = crate::clock::now_ms();
            let mine = Holder {
                node: node.to_string(),
                started_ms: now,
                heartbeat_ms: now,
                ..self.me.clone()
            };
            let mut taken_from = None;
            let held = if self.board.create(&rel, &mine)? {
                true
            } else {
                match self.board.read(&rel) {
                    // Unreadable for longer than a heartbeat may take: its writer
                    // died writing it; take it over.
                    None if self.board.unreadable_for(&rel, self.timeout) => {
                        let won = self.board.take_over(&rel, &Version::default(), &mine)?;
                        taken_from = won.then(|| Box::new(Holder::unknown(node)));
                        won
                    }
                    // Being written by its creator this instant: busy, by a worker
                    // not yet known (never this one: it did not write it).
                    None => return Ok(Claim::Busy(Holder::unknown(node))),
                    // This worker's own lease that none of its threads holds (left by
                    // an attempt of this process that ended): it computes the node
                    // instead of waiting for itself.
                    Some((h, v)) if self.is_mine(&h) && !self.holds(key) => {
                        self.board.take_over(&rel, &v, &mine)?
                    }
                    Some((h, _)) if !h.expired(self.timeout) => return Ok(Claim::Busy(h)),
                    // Dead holder: take it over (one worker wins), or try again.
                    Some((h, v)) => {
                        let won = self.board.take_over(&rel, &v, &mine)?;
                        taken_from = won.then(|| Box::new(h));
                        won
                    }
                }
            };
            if held {
                if let Ok(mut h) = self.held.lock() {
                    h.insert(key.clone());
                }
                return Ok(Claim::Held(LeaseGuard {
                    board: self.board.clone(),
                    key: key.clone(),
                    me: self.me.clone(),
                    held: self.held.clone(),
                    taken_from,
                }));
            }
        }
        Ok(Claim::Busy(Holder::unknown(node)))
    }

    /// Whether `h` names this worker (worker name, host and process).
    fn is_mine(&self, h: &Holder) -> bool {
        h.session != 0
            && h.session == self.me.session
            && h.host == self.me.host
            && h.pid == self.me.pid
    }

    /// Whether a thread of this worker holds the lease of `key` now.
    fn holds(&self, key: &Digest) -> bool {
        self.held.lock().map_or(true, |h| h.contains(key))
    }
}

impl Drop for Coop {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn holder_json(h: &Holder) -> Result<Vec<u8>, StoreError> {
    serde_json::to_vec(h).map_err(|e| {
        StoreError::new(
            crate::error::StoreErrorKind::Manifest(e.to_string()),
            Path::new(&h.node),
        )
    })
}

fn write_holder(path: &Path, h: &Holder) -> Result<(), StoreError> {
    write_atomic(path, &holder_json(h)?)
}

/// `I/N` (I counts from 1), or `auto`: the scheduler's array index and count
/// (`SLURM_ARRAY_TASK_ID` with `SLURM_ARRAY_TASK_MIN`, `SLURM_ARRAY_TASK_STEP` and
/// `SLURM_ARRAY_TASK_COUNT`;
/// a Kubernetes Indexed Job's `JOB_COMPLETION_INDEX`, counted from 0, with
/// `OTB_SHARDS`). `env` reads a variable.
pub fn parse_shard(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Shard, String> {
    let num = |name: &str| -> Result<Option<u32>, String> {
        match env(name) {
            None => Ok(None),
            Some(v) => v
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| format!("{name}={v:?} is not a whole number")),
        }
    };
    let shard = if text.trim() == "auto" {
        if let (Some(id), Some(count)) =
            (num("SLURM_ARRAY_TASK_ID")?, num("SLURM_ARRAY_TASK_COUNT")?)
        {
            // An array with a step (`--array=1-7:2`: ids 1, 3, 5, 7) maps id to its
            // position in the array.
            let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            let step = num("SLURM_ARRAY_TASK_STEP")?.unwrap_or(1).max(1);
            let offset = id
                .checked_sub(min)
                .ok_or("SLURM_ARRAY_TASK_ID is below SLURM_ARRAY_TASK_MIN")?;
            if offset % step != 0 {
                return Err(format!(
                    "SLURM_ARRAY_TASK_ID {id} is not in the array {min}, {min}+{step}, ... (SLURM_ARRAY_TASK_MIN, SLURM_ARRAY_TASK_STEP); --shard auto needs an evenly stepped array"
                ));
            }
            Shard {
                index: offset / step + 1,
                count,
            }
        } else if let Some(idx) = num("JOB_COMPLETION_INDEX")? {
            let count = num("OTB_SHARDS")?.ok_or(
                "JOB_COMPLETION_INDEX is set but OTB_SHARDS (the Job's completions) is not",
            )?;
            Shard {
                index: idx + 1,
                count,
            }
        } else {
            return Err("--shard auto: no SLURM_ARRAY_TASK_ID / SLURM_ARRAY_TASK_COUNT nor JOB_COMPLETION_INDEX / OTB_SHARDS in the environment".into());
        }
    } else {
        let (i, n) = text
            .split_once('/')
            .ok_or_else(|| format!("--shard {text:?}: expected I/N (e.g. 2/4) or auto"))?;
        let parse = |s: &str| {
            s.trim()
                .parse::<u32>()
                .map_err(|_| format!("--shard {text:?}: expected I/N (e.g. 2/4) or auto"))
        };
        Shard {
            index: parse(i)?,
            count: parse(n)?,
        }
    };
    if shard.count == 0 || shard.index == 0 || shard.index > shard.count {
        return Err(format!(
            "--shard {shard}: the index counts from 1 and is at most the count"
        ));
    }
    Ok(shard)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_parse_from_text_and_schedulers() {
        let none = |_: &str| None;
        assert_eq!(parse_shard("2/4", &none), Ok(Shard { index: 2, count: 4 }));
        for bad in ["0/4", "5/4", "1/0", "x", "1-4", "auto"] {
            assert!(parse_shard(bad, &none).is_err(), "{bad}");
        }
        let slurm = |k: &str| match k {
            "SLURM_ARRAY_TASK_ID" => Some("3".into()),
            "SLURM_ARRAY_TASK_MIN" => Some("1".into()),
            "SLURM_ARRAY_TASK_COUNT" => Some("4".into()),
            _ => None,
        };
        assert_eq!(
            parse_shard("auto", &slurm),
            Ok(Shard { index: 3, count: 4 })
        );
        // `--array=1-7:2`: ids 1, 3, 5, 7 are shards 1-4 of 4 (id 5 was "5/4").
        for (id, index) in [("1", 1), ("3", 2), ("5", 3), ("7", 4)] {
            let stepped = |k: &str| match k {
                "SLURM_ARRAY_TASK_ID" => Some(id.into()),
                "SLURM_ARRAY_TASK_MIN" => Some("1".into()),
                "SLURM_ARRAY_TASK_MAX" => Some("7".into()),
                "SLURM_ARRAY_TASK_STEP" => Some("2".into()),
                "SLURM_ARRAY_TASK_COUNT" => Some("4".into()),
                _ => None,
            };
            assert_eq!(parse_shard("auto", &stepped), Ok(Shard { index, count: 4 }));
        }
        let off = |k: &str| match k {
            "SLURM_ARRAY_TASK_ID" => Some("4".into()),
            "SLURM_ARRAY_TASK_MIN" => Some("1".into()),
            "SLURM_ARRAY_TASK_STEP" => Some("2".into()),
            "SLURM_ARRAY_TASK_COUNT" => Some("4".into()),
            _ => None,
        };
        assert!(parse_shard("auto", &off)
            .unwrap_err()
            .contains("not in the array"));
        let k8s = |k: &str| match k {
            "JOB_COMPLETION_INDEX" => Some("0".into()),
            "OTB_SHARDS" => Some("8".into()),
            _ => None,
        };
        assert_eq!(parse_shard("auto", &k8s), Ok(Shard { index: 1, count: 8 }));
        let half = |k: &str| (k == "JOB_COMPLETION_INDEX").then(|| "0".to_string());
        assert!(parse_shard("auto", &half)
            .unwrap_err()
            .contains("OTB_SHARDS"));
    }

    /// A worker never waits for itself: its own lease that none of its threads holds
    /// (an attempt of this worker that ended) is its to compute; another worker of
    /// the same process (another join) still waits for it.
    #[test]
    fn a_workers_own_lease_left_by_an_ended_attempt_is_its_to_compute() {
        let d = std::env::temp_dir().join(format!("otb-own-lease-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        let key = Digest("cd".repeat(32));
        let shard = Shard { index: 1, count: 1 };
        let long = Duration::from_secs(60);
        let a = Coop::join(Board::Dir(d.clone()), shard, long, HashMap::new()).unwrap();
        let Claim::Held(guard) = a.claim("n", &key).unwrap() else {
            panic!("the first claim holds")
        };
        // The attempt ends without removing its lease file.
        a.held.lock().unwrap().remove(&key);
        std::mem::forget(guard);
        let b = Coop::join(Board::Dir(d.clone()), shard, long, HashMap::new()).unwrap();
        assert!(
            matches!(b.claim("n", &key).unwrap(), Claim::Busy(h) if h.pid == std::process::id())
        );
        assert!(matches!(a.claim("n", &key).unwrap(), Claim::Held(_)));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn one_worker_gets_a_lease_and_a_dead_workers_lease_is_taken_over() {
        let d = std::env::temp_dir().join(format!("otb-lease-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        fs::create_dir_all(&d).unwrap();
        takes_over(Board::Dir(d.clone()));
        let _ = fs::remove_dir_all(&d);
    }

    #[test]
    fn leases_on_an_object_store_work_alike() {
        let mem = Arc::new(object_store::memory::InMemory::new());
        takes_over(Board::Remote(Remote::with_store(mem, "leases").unwrap()));
    }

    /// A lease file left empty (a worker of an older otb killed between creating and
    /// writing it) is taken over once it is older than the timeout, not waited for
    /// forever; a fresh unreadable one is busy (its writer may be writing it).
    #[test]
    fn a_lease_left_empty_by_a_dead_writer_is_taken_over() {
        let d = tempfile::tempdir().unwrap();
        let board = Board::Dir(d.path().to_path_buf());
        let key = Digest("cd".repeat(32));
        let coop = Coop::join(
            board.clone(),
            Shard { index: 1, count: 2 },
            Duration::from_millis(300),
            HashMap::new(),
        )
        .unwrap();
        let path = d.path().join(lease_rel(&key));
        fs::write(&path, b"").unwrap();
        assert!(matches!(coop.claim("n", &key).unwrap(), Claim::Busy(h) if h.pid == 0));
        let old = std::time::SystemTime::now() - Duration::from_secs(5);
        fs::File::options()
            .write(true)
            .open(&path)
            .unwrap()
            .set_modified(old)
            .unwrap();
        let Claim::Held(guard) = coop.claim("n", &key).unwrap() else {
            panic!("an empty lease of a dead writer is taken over")
        };
        assert_eq!(guard.taken_from().map(|h| h.pid), Some(0));
        assert_eq!(
            lease_of(&board, &key).map(|h| h.pid),
            Some(std::process::id())
        );
        drop(guard);
        assert!(lease_of(&board, &key).is_none());
        // A lease is created whole: nothing but the lease file is left beside it.
        let Claim::Held(again) = coop.claim("n", &key).unwrap() else {
            panic!("a free lease is held")
        };
        let names: Vec<_> = fs::read_dir(lease_dir(d.path()))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names.len(), 1, "{names:?}");
        drop(again);
        coop.leave();
    }

    /// A lease is held by one worker, kept alive by its heartbeat, and taken over
    /// by one worker once its holder is dead.
    fn takes_over(board: Board) {
        let key = Digest("ab".repeat(32));
        let shard = Shard { index: 1, count: 2 };
        let a = Coop::join(
            board.clone(),
            shard,
            Duration::from_millis(300),
            HashMap::new(),
        )
        .unwrap();
        let b = Coop::join(
            board.clone(),
            Shard { index: 2, count: 2 },
            Duration::from_millis(300),
            HashMap::new(),
        )
        .unwrap();
        let Claim::Held(guard) = a.claim("n", &key).unwrap() else {
            panic!("the first claim holds")
        };
        assert!(
            guard.taken_from().is_none(),
            "a free node is taken from no one"
        );
        assert!(matches!(b.claim("n", &key).unwrap(), Claim::Busy(h) if h.node == "n"));
        // a's heartbeat keeps it alive past the timeout.
        std::thread::sleep(Duration::from_millis(600));
        assert!(matches!(b.claim("n", &key).unwrap(), Claim::Busy(_)));
        // a dies (its heartbeat stops, the lease stays): b takes it over.
        a.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        std::mem::forget(guard);
        std::thread::sleep(Duration::from_millis(700));
        let c = Coop::join(
            board.clone(),
            Shard { index: 2, count: 2 },
            Duration::from_millis(300),
            HashMap::new(),
        )
        .unwrap();
        let Claim::Held(taken) = b.claim("n", &key).unwrap() else {
            panic!("a dead worker's lease is taken over")
        };
        // The taker knows whose work it does again.
        let from = taken.taken_from().expect("taken from the dead worker");
        assert_eq!(
            (from.worker.as_str(), from.node.as_str()),
            ("shard 1/2", "n")
        );
        // Taken once: a second taker finds the new holder alive.
        assert!(matches!(c.claim("n", &key).unwrap(), Claim::Busy(_)));
        drop(taken);
        assert!(lease_of(&board, &key).is_none());
        b.leave();
        c.leave();
    }
}
