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
}

impl Holder {
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

    /// Create `rel` holding `h` unless it exists: whether this call created it.
    fn create(&self, rel: &str, h: &Holder) -> Result<bool, StoreError> {
        match self {
            Board::Dir(root) => {
                let path = Self::path(root, rel);
                match fs::OpenOptions::new()
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
}

impl Drop for LeaseGuard {
    fn drop(&mut self) {
        if let Ok(mut h) = self.held.lock() {
            h.remove(&self.key);
        }
        let rel = lease_rel(&self.key);
        // Only this worker's lease: one taken over meanwhile is the taker's.
        if let Some((l, _)) = self.board.read(&rel) {
            if l.pid == self.me.pid && l.host == self.me.host {
                self.board.remove(&rel);
            }
        }
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
        let held: Vec<Digest> = self
            .held
            .lock()
            .map(|h| h.iter().cloned().collect())
            .unwrap_or_default();
        for key in held {
            let rel = lease_rel(&key);
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
            let held = if self.board.create(&rel, &mine)? {
                true
            } else {
                match self.board.read(&rel) {
                    // Being written by its creator this instant: busy.
                    None => {
                        return Ok(Claim::Busy(Holder {
                            node: node.to_string(),
                            ..mine
                        }))
                    }
                    Some((h, _)) if !h.expired(self.timeout) => return Ok(Claim::Busy(h)),
                    // Dead holder: take it over (one worker wins), or try again.
                    Some((_, v)) => self.board.take_over(&rel, &v, &mine)?,
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
                }));
            }
        }
        Ok(Claim::Busy(Holder {
            node: node.to_string(),
            ..self.me.clone()
        }))
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
/// (`SLURM_ARRAY_TASK_ID` with `SLURM_ARRAY_TASK_MIN` and `SLURM_ARRAY_TASK_COUNT`;
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
            let min = num("SLURM_ARRAY_TASK_MIN")?.unwrap_or(0);
            Shard {
                index: id
                    .checked_sub(min)
                    .ok_or("SLURM_ARRAY_TASK_ID is below SLURM_ARRAY_TASK_MIN")?
                    + 1,
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
        // Taken once: a second taker finds the new holder alive.
        assert!(matches!(c.claim("n", &key).unwrap(), Claim::Busy(_)));
        drop(taken);
        assert!(lease_of(&board, &key).is_none());
        b.leave();
        c.leave();
    }
}
