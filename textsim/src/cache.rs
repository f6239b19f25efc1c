//! A crash-safe on-disk cache of embeddings, keyed by the sha256 of the text.
//!
//! One append-only binary file per model (the caller chooses the path, e.g.
//! `<store>/cache/embed/minilm.bin`). Layout, all integers little-endian:
//!
//! ```text
//! header  "OTBEMB01" (8 bytes) + model id (64 ASCII hex bytes, Embedder::model_id)
//! record  sha256(text) (32) | dim: u32 | dim × f32 | check (8)
//! ```
//!
//! `check` is the first 8 bytes of the sha256 of the record's preceding
//! bytes. Vectors are stored bit-exactly (no decimal round trip).
//!
//! Writes: every [`CachedEmbedder::embed`] that computes something appends
//! all its new records with one `write` on an `O_APPEND` handle, then
//! `fdatasync`, under an exclusive advisory lock (`flock`), so several
//! processes may share a file. Opening reads every complete record whose check
//! holds (a corrupt record in the middle is skipped, the ones after it are kept);
//! a torn or corrupt tail (a writer that died mid-append) is cut off under the
//! same lock, so later appends start on a record boundary. A file with another
//! model's id is refused rather than mixed.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::{io, Embedder, TextSimError};

const MAGIC: &[u8; 8] = b"OTBEMB01";
const ID_LEN: usize = 64;
const HEADER_LEN: usize = MAGIC.len() + ID_LEN;
const KEY_LEN: usize = 32;
const CHECK_LEN: usize = 8;

type Key = [u8; KEY_LEN];
type Records = Vec<(Key, Vec<f32>)>;

/// Hits and misses since the cache was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Texts answered from the cache (duplicates within a call count).
    pub hits: u64,
    /// Distinct texts the model had to embed.
    pub misses: u64,
    /// Bytes of a torn or corrupt tail dropped when the file was opened.
    pub dropped_tail_bytes: u64,
}

/// An [`Embedder`] in front of an on-disk cache.
pub struct CachedEmbedder {
    embedder: Embedder,
    path: PathBuf,
    file: Mutex<File>,
    map: Mutex<HashMap<Key, Vec<f32>>>,
    hits: AtomicU64,
    misses: AtomicU64,
    dropped: u64,
}

impl std::fmt::Debug for CachedEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CachedEmbedder")
            .field("path", &self.path)
            .field("embedder", &self.embedder)
            .field("len", &self.len())
            .field("stats", &self.stats())
            .finish()
    }
}

fn key(text: &str) -> Key {
    Sha256::digest(text.as_bytes()).into()
}

fn check_bytes(bytes: &[u8]) -> [u8; CHECK_LEN] {
    let d = Sha256::digest(bytes);
    let mut c = [0u8; CHECK_LEN];
    c.copy_from_slice(&d[..CHECK_LEN]);
    c
}

fn encode_record(key: &Key, v: &[f32], out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(key);
    out.extend_from_slice(&(v.len() as u32).to_le_bytes());
    for x in v {
        out.extend_from_slice(&x.to_le_bytes());
    }
    let c = check_bytes(&out[start..]);
    out.extend_from_slice(&c);
}

/// Parses records from `data` (after the header); returns them and the
/// length of the valid prefix.
fn decode_records(data: &[u8], dim: usize) -> (Records, usize) {
    let body = KEY_LEN + 4 + 4 * dim;
    let len = body + CHECK_LEN;
    let mut out = Vec::new();
    let mut pos = 0;
    // Records have one size: a corrupt record in the middle is skipped and the
    // records after it are still read; the valid part ends after the last good one
    // (a torn or corrupt tail is cut there).
    let mut valid = 0;
    while data.len() - pos >= len {
        let rec = &data[pos..pos + len];
        let mut d = [0u8; 4];
        d.copy_from_slice(&rec[KEY_LEN..KEY_LEN + 4]);
        pos += len;
        if u32::from_le_bytes(d) as usize != dim || check_bytes(&rec[..body]) != rec[body..] {
            continue;
        }
        let mut k = [0u8; KEY_LEN];
        k.copy_from_slice(&rec[..KEY_LEN]);
        let v = rec[KEY_LEN + 4..body]
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        out.push((k, v));
        valid = pos;
    }
    (out, valid)
}

/// Releases an advisory lock when dropped.
struct Locked<'a>(&'a File);

impl<'a> Locked<'a> {
    fn new(f: &'a File, path: &Path) -> Result<Self, TextSimError> {
        f.lock()
            .map_err(io(format!("locking {}", path.display())))?;
        Ok(Self(f))
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        let _ = self.0.unlock();
    }
}

impl CachedEmbedder {
    /// Opens (or creates) the cache file at `path` for `embedder`'s model and
    /// loads its records. Fails when the file belongs to another model or is
    /// not an embedding cache.
    pub fn new(embedder: Embedder, path: impl AsRef<Path>) -> Result<Self, TextSimError> {
        let path = path.as_ref().to_owned();
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            std::fs::create_dir_all(parent)
                .map_err(io(format!("creating {}", parent.display())))?;
        }
        let file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)
            .map_err(io(format!("opening {}", path.display())))?;
        let (records, dropped) = {
            let _lock = Locked::new(&file, &path)?;
            let mut data = Vec::new();
            (&file)
                .read_to_end(&mut data)
                .map_err(io(format!("reading {}", path.display())))?;
            load(&file, &path, &data, &embedder)?
        };
        let mut map = HashMap::with_capacity(records.len());
        for (k, v) in records {
            map.insert(k, v);
        }
        Ok(Self {
            embedder,
            path,
            file: Mutex::new(file),
            map: Mutex::new(map),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            dropped,
        })
    }

    /// The wrapped model.
    pub fn embedder(&self) -> &Embedder {
        &self.embedder
    }

    /// The cache file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of cached texts.
    pub fn len(&self) -> usize {
        self.map.lock().map(|m| m.len()).unwrap_or(0)
    }

    /// True when nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Hits and misses so far.
    pub fn stats(&self) -> CacheStats {
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            dropped_tail_bytes: self.dropped,
        }
    }

    /// Like [`Embedder::embed`]; texts already in the cache are not run
    /// through the model, new ones are embedded in one batch and appended
    /// (durably) before this returns.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, TextSimError> {
        let keys: Vec<Key> = texts.iter().map(|t| key(t)).collect();
        let mut missing: Vec<(Key, &str)> = Vec::new();
        {
            let map = self.map.lock().map_err(|_| self.poisoned())?;
            for (k, t) in keys.iter().zip(texts) {
                if !map.contains_key(k) && !missing.iter().any(|(m, _)| m == k) {
                    missing.push((*k, t));
                }
            }
        }
        self.misses
            .fetch_add(missing.len() as u64, Ordering::Relaxed);
        self.hits
            .fetch_add((texts.len() - missing.len()) as u64, Ordering::Relaxed);
        if !missing.is_empty() {
            let new_texts: Vec<&str> = missing.iter().map(|(_, t)| *t).collect();
            let vectors = self.embedder.embed(&new_texts)?;
            let mut bytes = Vec::new();
            for ((k, _), v) in missing.iter().zip(&vectors) {
                encode_record(k, v, &mut bytes);
            }
            self.append(&bytes)?;
            let mut map = self.map.lock().map_err(|_| self.poisoned())?;
            for ((k, _), v) in missing.into_iter().zip(vectors) {
                map.insert(k, v);
            }
        }
        let map = self.map.lock().map_err(|_| self.poisoned())?;
        keys.iter()
            .map(|k| {
                map.get(k).cloned().ok_or_else(|| TextSimError::Cache {
                    path: self.path.clone(),
                    detail: "a vector vanished from the cache".into(),
                })
            })
            .collect()
    }

    fn append(&self, bytes: &[u8]) -> Result<(), TextSimError> {
        let file = self.file.lock().map_err(|_| self.poisoned())?;
        let _lock = Locked::new(&file, &self.path)?;
        (&*file)
            .write_all(bytes)
            .and_then(|()| file.sync_data())
            .map_err(io(format!("appending to {}", self.path.display())))
    }

    fn poisoned(&self) -> TextSimError {
        TextSimError::Cache {
            path: self.path.clone(),
            detail: "a thread panicked while using the cache".into(),
        }
    }
}

/// Validates the header (writing it into a new file) and reads the records,
/// cutting off a torn tail. Runs under the file lock.
fn load(
    file: &File,
    path: &Path,
    data: &[u8],
    embedder: &Embedder,
) -> Result<(Records, u64), TextSimError> {
    let id = embedder.model_id().as_bytes();
    let mut header = Vec::with_capacity(HEADER_LEN);
    header.extend_from_slice(MAGIC);
    header.extend_from_slice(id);
    let bad = |detail: String| TextSimError::Cache {
        path: path.to_owned(),
        detail,
    };
    if id.len() != ID_LEN {
        return Err(bad(format!(
            "model id {:?} is not a sha256",
            embedder.model_id()
        )));
    }
    if data.len() < HEADER_LEN {
        // New, or a header torn by a crash while the file was created.
        if !header.starts_with(data) {
            return Err(bad("not an opaquetools embedding cache".into()));
        }
        let mut w = file;
        file.set_len(0)
            .and_then(|()| w.write_all(&header))
            .and_then(|()| file.sync_all())
            .map_err(io(format!("writing {}", path.display())))?;
        return Ok((Vec::new(), data.len() as u64));
    }
    if &data[..MAGIC.len()] != MAGIC {
        return Err(bad("not an opaquetools embedding cache".into()));
    }
    if &data[MAGIC.len()..HEADER_LEN] != id {
        return Err(bad(format!(
            "it holds embeddings of model {}, not of {} (use another file per model)",
            String::from_utf8_lossy(&data[MAGIC.len()..HEADER_LEN]),
            embedder.model_id()
        )));
    }
    let (records, valid) = decode_records(&data[HEADER_LEN..], embedder.dim());
    let end = HEADER_LEN + valid;
    let dropped = (data.len() - end) as u64;
    if dropped > 0 {
        file.set_len(end as u64)
            .and_then(|()| file.sync_all())
            .map_err(io(format!(
                "truncating the torn tail of {}",
                path.display()
            )))?;
    }
    Ok((records, dropped))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_bit_exactly() {
        let k = key("hello");
        let v = vec![0.1f32, -0.0, f32::MIN_POSITIVE, 1.0 / 3.0];
        let mut bytes = Vec::new();
        encode_record(&k, &v, &mut bytes);
        encode_record(&key("x"), &[1.0, 2.0, 3.0, 4.0], &mut bytes);
        let (recs, valid) = decode_records(&bytes, 4);
        assert_eq!(valid, bytes.len());
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[0].0, k);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&recs[0].1), bits(&v));
    }

    #[test]
    fn a_corrupt_record_in_the_middle_does_not_lose_the_ones_after_it() {
        let mut bytes = Vec::new();
        encode_record(&key("a"), &[1.0, 2.0], &mut bytes);
        let one = bytes.len();
        encode_record(&key("b"), &[3.0, 4.0], &mut bytes);
        encode_record(&key("c"), &[5.0, 6.0], &mut bytes);
        bytes[one + KEY_LEN + 5] ^= 1;
        let (recs, valid) = decode_records(&bytes, 2);
        assert_eq!(recs.len(), 2);
        assert_eq!(recs[1].0, key("c"));
        assert_eq!(valid, bytes.len());
    }

    #[test]
    fn a_torn_or_corrupt_tail_is_not_read() {
        let mut bytes = Vec::new();
        encode_record(&key("a"), &[1.0, 2.0], &mut bytes);
        let one = bytes.len();
        encode_record(&key("b"), &[3.0, 4.0], &mut bytes);
        for cut in one..bytes.len() {
            let (recs, valid) = decode_records(&bytes[..cut], 2);
            assert_eq!((recs.len(), valid), (1, one), "cut at {cut}");
        }
        let mut corrupt = bytes.clone();
        corrupt[one + KEY_LEN + 5] ^= 1;
        assert_eq!(decode_records(&corrupt, 2).1, one);
        // Zeros (a crash after the size grew but before the data landed).
        let mut zeros = bytes[..one].to_vec();
        zeros.extend(std::iter::repeat_n(0u8, bytes.len() - one));
        assert_eq!(decode_records(&zeros, 2).1, one);
        // A record of another dimension ends the valid prefix too.
        assert_eq!(decode_records(&bytes, 3).1, 0);
    }
}
