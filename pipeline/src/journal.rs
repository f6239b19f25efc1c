//! A stage's journal: finished items of a long stage (a chess game, ...) kept while the
//! stage runs, so a crash or a kill loses only the items in flight. It lives under
//! `<store>/cache/journal/<key>/`, one file per item written atomically (temp, fsync,
//! rename) with a sha256 of its bytes; a file whose checksum fails is ignored (the
//! item is computed again). The engine deletes the journal once the stage's output is
//! published: the store entry is the result, the journal only a way to get there.

use crate::digest::Digest;
use crate::error::StoreError;
use crate::fsio::write_atomic;
use crate::layout;
use std::fs;
use std::path::{Path, PathBuf};

/// The journal of one stage key.
#[derive(Debug, Clone)]
pub struct Journal {
    dir: PathBuf,
}

/// File names are the item ids' digests (ids may hold any character).
fn file_name(id: &str) -> String {
    format!("{}.item", &Digest::of_bytes(id.as_bytes()).0[..32])
}

impl Journal {
    /// The journal directory of `key` under a store root (created on first write).
    pub(crate) fn new(root: &Path, key: &Digest) -> Journal {
        Journal {
            dir: layout::journal_dir(root, &key.0),
        }
    }

    /// The journal's directory (it may not exist yet).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The bytes recorded for `id`, when a complete, uncorrupted record exists.
    pub fn get(&self, id: &str) -> Option<Vec<u8>> {
        let bytes = fs::read(self.dir.join(file_name(id))).ok()?;
        // Layout: 64 hex chars of sha256, '\n', then the payload.
        let (sum, payload) = (bytes.get(..64)?, bytes.get(65..)?);
        (bytes.get(64) == Some(&b'\n') && Digest::of_bytes(payload).0.as_bytes() == sum)
            .then(|| payload.to_vec())
    }

    /// Record `bytes` for `id` (atomically; a crash leaves the old record or none).
    pub fn put(&self, id: &str, bytes: &[u8]) -> Result<(), StoreError> {
        fs::create_dir_all(&self.dir).map_err(|e| StoreError::io(&self.dir, e))?;
        let mut data = Digest::of_bytes(bytes).0.into_bytes();
        data.push(b'\n');
        data.extend_from_slice(bytes);
        write_atomic(&self.dir.join(file_name(id)), &data)
    }

    /// Number of records on disk (complete or not).
    pub fn len(&self) -> usize {
        fs::read_dir(&self.dir)
            .map(|r| {
                r.filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().ends_with(".item"))
                    .count()
            })
            .unwrap_or(0)
    }

    /// True when no record is on disk.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Delete the journal (after the stage published its output).
    pub(crate) fn remove(&self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_survive_reopening_and_corruption_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        let key = Digest::of_bytes(b"key");
        let j = Journal::new(d.path(), &key);
        assert!(j.get("game 1").is_none());
        j.put("game 1", b"{\"score\": 1}").unwrap();
        j.put("game/2", b"second").unwrap();
        let again = Journal::new(d.path(), &key);
        assert_eq!(again.get("game 1").as_deref(), Some(&b"{\"score\": 1}"[..]));
        assert_eq!(again.get("game/2").as_deref(), Some(&b"second"[..]));
        assert_eq!(again.len(), 2);
        // A torn or altered record reads as absent.
        let path = j.dir().join(file_name("game/2"));
        let mut bytes = fs::read(&path).unwrap();
        let last = bytes.len() - 1;
        bytes[last] ^= 1;
        fs::write(&path, &bytes).unwrap();
        assert!(again.get("game/2").is_none());
        fs::write(&path, b"short").unwrap();
        assert!(again.get("game/2").is_none());
        // Another key has its own journal.
        assert!(Journal::new(d.path(), &Digest::of_bytes(b"other"))
            .get("game 1")
            .is_none());
        j.remove();
        assert!(j.get("game 1").is_none() && j.is_empty());
    }
}
