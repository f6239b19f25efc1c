//! The names the store itself creates, and the tests that recognise them.
//!
//! Everything that deletes (opening a store cleans `tmp/`, `gc` removes entries) first
//! checks a path against these shapes; a path of any other shape is not the store's
//! and is left alone.

use std::fs;
use std::path::{Path, PathBuf};

/// Top-level names of the store's own files and directories (see the crate docs).
pub const RESERVED: &[&str] = &["FORMAT", ".lock", "tmp", "slots", "quarantine", "cache"];

/// Top-level names that may exist before a store's `FORMAT` is written: `.lock` (a
/// writer that stopped before writing `FORMAT`) and `cache/` (written by `otb serve`,
/// which does not open the store). A directory holding only these is still empty.
pub const PRE_FORMAT: &[&str] = &[".lock", "cache"];

/// Marker a paused publish leaves in `tmp/` (see [`crate::store::FAULT_ENV`]).
pub const PAUSED: &str = "PAUSED";

/// The journal of the stage key `key` (64 hex characters) under a store root:
/// `<root>/cache/journal/<key>/` (see [`crate::journal`]).
pub fn journal_dir(root: &Path, key: &str) -> PathBuf {
    root.join("cache").join("journal").join(key)
}

/// Written to `<store>/FORMAT`; bumped when the layout changes incompatibly.
pub const STORE_FORMAT: &str = "otb-store-1";

/// Where the leases of cooperating workers live (`crate::lease`).
pub fn lease_dir(root: &Path) -> PathBuf {
    root.join("cache").join("leases")
}

/// Where the worker records of cooperating workers live (`crate::lease`).
pub fn worker_dir(root: &Path) -> PathBuf {
    root.join("cache").join("workers")
}

/// A stage name usable as a directory name: ASCII letters, digits, `-`, `_`, `.`,
/// not starting with `.` or `-`, not a reserved name, at most 100 characters.
pub fn is_stage_name(s: &str) -> bool {
    is_table_name(s) && !RESERVED.contains(&s)
}

/// A table name usable as a file stem: like a stage name (reserved names allowed).
pub fn is_table_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 100
        && !s.starts_with(['.', '-'])
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// The file a table is stored in, inside its entry directory. Writers, readers and
/// verification all use this one function.
pub fn table_file(table: &str) -> String {
    format!("{table}.parquet")
}

fn is_hex(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn is_number(s: &str) -> bool {
    !s.is_empty() && s.len() <= 20 && s.bytes().all(|b| b.is_ascii_digit())
}

/// An entry directory name: a full key, 64 lowercase hex characters.
pub fn is_key_name(s: &str) -> bool {
    is_hex(s, 64)
}

/// `<stage>-<12 hex>-<n1>-...-<nk>` with exactly `numbers` trailing numbers.
fn is_tagged(s: &str, numbers: usize) -> bool {
    let parts: Vec<&str> = s.rsplitn(numbers + 2, '-').collect();
    parts.len() == numbers + 2
        && parts[..numbers].iter().all(|p| is_number(p))
        && is_hex(parts[numbers], 12)
        && is_stage_name(parts[numbers + 1])
}

/// A staging directory name made by [`staging_name`].
pub fn is_staging_name(s: &str) -> bool {
    is_tagged(s, 2)
}

/// `tmp/<stage>-<short key>-<pid>-<nanos>`.
pub fn staging_name(stage: &str, short: &str, pid: u32, nanos: u32) -> String {
    format!("{}{pid}-{nanos}", staging_prefix(stage, short))
}

/// What every staging directory of one stage key starts with: `<stage>-<short key>-`.
pub fn staging_prefix(stage: &str, short: &str) -> String {
    format!("{stage}-{short}-")
}

/// A quarantine directory name: `<stage>-<short key>-<unix>-<nanos>` (older stores:
/// without `-<nanos>`).
pub fn is_quarantine_name(s: &str) -> bool {
    is_tagged(s, 2) || is_tagged(s, 1)
}

/// `quarantine/<stage>-<short key>-<unix>-<nanos>`.
pub fn quarantine_name(stage: &str, short: &str, unix: u64, nanos: u32) -> String {
    format!("{stage}-{short}-{unix}-{nanos}")
}

/// Whether `dir` looks like something the store wrote as an entry: a real directory
/// (not a link) holding only regular files named `manifest.json`, `*.parquet`, or the
/// hidden temporary files of an atomic write (`.<name>.tmp<pid>`). `Err` says what
/// does not fit.
pub fn check_entry_contents(dir: &Path) -> Result<(), String> {
    let meta = fs::symlink_metadata(dir).map_err(|e| format!("unreadable: {e}"))?;
    if !meta.is_dir() {
        return Err("not a directory".into());
    }
    let rd = fs::read_dir(dir).map_err(|e| format!("unreadable: {e}"))?;
    for item in rd {
        let item = item.map_err(|e| format!("unreadable: {e}"))?;
        let name = item.file_name().to_string_lossy().into_owned();
        let ft = item.file_type().map_err(|e| format!("`{name}`: {e}"))?;
        let known_name = name == "manifest.json"
            || name.strip_suffix(".parquet").is_some_and(is_table_name)
            || (name.starts_with('.') && name.contains(".tmp"));
        if !ft.is_file() || !known_name {
            return Err(format!("holds `{name}`, which the store does not write"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_through_their_shapes() {
        let s = staging_name("bfcl-data", "0123456789ab", 4242, 17);
        assert!(is_staging_name(&s), "{s}");
        assert!(!is_quarantine_name("bfcl-data-0123456789ab"));
        let q = quarantine_name("batch-reflect", "000000000000", 1_700_000_000, 5);
        assert!(is_quarantine_name(&q), "{q}");
        assert!(is_quarantine_name("explore-abcdefabcdef-1700000000"));
        assert!(is_key_name(&"a".repeat(64)));
        assert!(!is_key_name(&"A".repeat(64)));
        assert!(!is_key_name(&"a".repeat(63)));
    }

    #[test]
    fn user_names_are_not_store_names() {
        for name in ["notes.txt", "Documents", "my-run-1", "x-0123456789ab-1-2-3"] {
            assert!(!is_staging_name(name), "{name}");
        }
        assert!(!is_staging_name("../x-0123456789ab-1-2"));
        assert!(!is_stage_name("tmp"));
        assert!(!is_stage_name("a/b"));
        assert!(!is_stage_name(".."));
        assert!(!is_table_name("../../etc/passwd"));
    }

    #[test]
    fn entry_contents_reject_foreign_files() {
        let dir = tempfile::tempdir().unwrap();
        let e = dir.path().join("e");
        fs::create_dir(&e).unwrap();
        fs::write(e.join("manifest.json"), "{}").unwrap();
        fs::write(e.join("rows.parquet"), "x").unwrap();
        assert_eq!(check_entry_contents(&e), Ok(()));
        fs::write(e.join("thesis.tex"), "x").unwrap();
        assert!(check_entry_contents(&e).unwrap_err().contains("thesis.tex"));
        assert!(check_entry_contents(&e.join("rows.parquet")).is_err());
    }
}
