//! Crash-safe file writes, shared by the store and the journals: a file is replaced
//! atomically (temp file, fsync, rename, fsync of its directory), so a crash leaves
//! the old file or the new one, never a torn one.

use crate::error::StoreError;
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

/// Fsync a directory (so that a rename into it survives a crash).
pub(crate) fn fsync_dir(path: &Path) -> Result<(), StoreError> {
    File::open(path)
        .and_then(|f| f.sync_all())
        .map_err(|e| StoreError::io(path, e))
}

/// Write `bytes` to `path` atomically: temp file, fsync, rename, fsync the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    // Unique per process and per call: two threads may write the same file at once.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let tmp = dir.join(format!(
        ".{}.tmp{}-{seq}",
        path.file_name()
            .map(|s| s.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let io = |e| StoreError::io(path, e);
    let written = File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(io(e));
    }
    fsync_dir(dir)
}
