//! A store is only a store: opening refuses directories that are not stores, and `gc`
//! removes only the store's own entries, only with a complete keep set.

mod common;

use common::*;
use pipeline::{Access, KeepSet, Mode, Session, Store, StoreError, StoreErrorKind};
use std::fs;
use std::path::Path;

fn assert_not_a_store(err: StoreError, root: &Path) {
    assert!(
        matches!(err.kind, StoreErrorKind::NotAStore { .. }),
        "expected NotAStore, got {err}"
    );
    let msg = err.to_string();
    assert!(!msg.contains('\n'), "one line: {msg}");
    assert!(msg.contains(&root.display().to_string()), "{msg}");
    assert!(msg.contains("--store"), "names the fix: {msg}");
}

#[test]
fn a_directory_of_user_files_is_not_opened_or_touched() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    fs::create_dir_all(home.join("Documents/thesis")).unwrap();
    fs::write(home.join("Documents/thesis/main.tex"), "\\section{}").unwrap();
    fs::create_dir_all(home.join("tmp")).unwrap();
    fs::write(home.join("tmp/draft.txt"), "keep me").unwrap();
    let before = snapshot(&home);
    for access in [Access::ReadWrite, Access::ReadOnly] {
        let err = Store::open(&home, access).err().expect("not a store");
        assert_not_a_store(err, &home);
    }
    assert_eq!(before, snapshot(&home), "nothing written, nothing deleted");
}

#[test]
fn the_format_marker_is_checked_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("s");
    fs::create_dir(&root).unwrap();
    fs::write(root.join("FORMAT"), "my own format notes\n").unwrap();
    assert_not_a_store(Store::open(&root, Access::ReadWrite).err().unwrap(), &root);
    fs::write(root.join("FORMAT"), "otb-store-0\n").unwrap();
    let err = Store::open(&root, Access::ReadWrite).err().unwrap();
    assert!(matches!(err.kind, StoreErrorKind::Format { .. }), "{err}");
    fs::remove_file(root.join("FORMAT")).unwrap();
    fs::create_dir(root.join("FORMAT")).unwrap();
    assert_not_a_store(Store::open(&root, Access::ReadOnly).err().unwrap(), &root);
    let file = dir.path().join("plain-file");
    fs::write(&file, "x").unwrap();
    assert_not_a_store(Store::open(&file, Access::ReadWrite).err().unwrap(), &file);
}

#[test]
fn missing_empty_and_cache_only_directories_become_stores() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("new");
    Store::open(&missing, Access::ReadOnly).unwrap();
    assert!(!missing.exists(), "a read-only open creates nothing");
    Store::open(&missing, Access::ReadWrite).unwrap();
    assert_eq!(
        fs::read_to_string(missing.join("FORMAT")).unwrap().trim(),
        "otb-store-1"
    );
    Store::open(&missing, Access::ReadWrite).unwrap();
    let empty = dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    Store::open(&empty, Access::ReadWrite).unwrap();
    // `otb serve` writes the call cache before any store is opened.
    let served = dir.path().join("served");
    fs::create_dir_all(served.join("cache/llm")).unwrap();
    fs::write(served.join("cache/llm/x.json"), "{}").unwrap();
    Store::open(&served, Access::ReadWrite).unwrap();
    assert!(served.join("cache/llm/x.json").exists());
}

/// A store with toy-up and toy-down computed, plus user files in every place gc looks.
fn store_with_user_files(dir: &tempfile::TempDir) -> (Store, Vec<std::path::PathBuf>) {
    let root = dir.path().join("store");
    let store = Store::open(&root, Access::ReadWrite).unwrap();
    let calls = Calls::default();
    both(&store, Mode::Run, 1, &nums(&[1, 2]), &calls);
    let hex = "ab".repeat(32);
    let user_dir = dir.path().join("elsewhere");
    fs::create_dir_all(&user_dir).unwrap();
    fs::write(user_dir.join("precious.txt"), "x").unwrap();
    let user = vec![
        root.join("notes/a.txt"),
        root.join("toy-down/README"),
        root.join(format!("toy-down/{hex}/thesis.tex")),
        root.join("quarantine/mine.txt"),
        root.join("tmp/keep.txt"),
        root.join("todo.md"),
    ];
    for p in &user {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, "user data").unwrap();
    }
    std::os::unix::fs::symlink(
        &user_dir,
        root.join(format!("toy-down/{}", "cd".repeat(32))),
    )
    .unwrap();
    (store, user)
}

fn keep_up_only(store: &Store) -> KeepSet {
    let calls = Calls::default();
    let mut s = Session::new(store, Mode::Status, true);
    up(&mut s, 1, &nums(&[1, 2]), &calls).unwrap();
    let mut keep = KeepSet::new();
    keep.add_walk("up-only.toml", &s.reports());
    keep
}

#[test]
fn gc_removes_only_the_stores_own_entries() {
    let dir = tempfile::tempdir().unwrap();
    let (store, user) = store_with_user_files(&dir);
    let down = entry_dirs(&store, DOWN);
    let real_down: Vec<_> = down
        .iter()
        .filter(|d| d.join("manifest.json").exists() && !d.join("thesis.tex").exists())
        .cloned()
        .collect();
    assert_eq!(real_down.len(), 1);
    let keep = keep_up_only(&store);
    assert!(keep.is_complete());
    let report = store.gc(&keep, false).unwrap();
    assert_eq!(report.kept, 1);
    assert_eq!(report.removed.len(), 1, "{:?}", report.removed);
    assert_eq!(report.removed[0].0, real_down[0]);
    assert!(!real_down[0].exists());
    assert_eq!(entry_dirs(&store, UP).len(), 1);
    for p in &user {
        if !p.starts_with(store.root().join("tmp")) {
            assert!(
                report.left_alone.iter().any(|(l, _)| p.starts_with(l)),
                "{} not reported in {:?}",
                p.display(),
                report.left_alone
            );
        }
    }
    drop(store);
    // Reopening cleans tmp/, but only what the store put there.
    Store::open(&dir.path().join("store"), Access::ReadWrite).unwrap();
    for p in &user {
        assert!(p.exists(), "{} was deleted", p.display());
    }
    assert!(dir.path().join("elsewhere/precious.txt").exists());
}

#[test]
fn gc_dry_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = store_with_user_files(&dir);
    let keep = keep_up_only(&store);
    let before = snapshot(store.root());
    let report = store.gc(&keep, true).unwrap();
    assert!(report.dry_run);
    assert_eq!(report.removed.len(), 1, "says what would go");
    assert!(report.removed_bytes() > 0);
    assert_eq!(before, snapshot(store.root()));
    // A dry run needs no write access.
    let ro = Store::open(store.root(), Access::ReadOnly).unwrap();
    assert_eq!(ro.gc(&keep, true).unwrap().removed, report.removed);
    assert!(ro.gc(&keep, false).is_err());
}

#[test]
fn gc_after_upstream_corruption_refuses_and_keeps_the_experiment() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store"), Access::ReadWrite).unwrap();
    let calls = Calls::default();
    let (_, a, b) = both(&store, Mode::Run, 1, &nums(&[4, 5]), &calls);
    flip_byte(&a.unwrap().dir.join("nums.parquet"));
    // The walk stops at the corrupt upstream; the downstream key is unknown.
    let (reports, ..) = both(&store, Mode::Status, 1, &nums(&[4, 5]), &calls);
    let mut keep = KeepSet::new();
    keep.add_walk("exp.toml", &reports);
    assert!(!keep.is_complete());
    let before = snapshot(store.root());
    for dry_run in [true, false] {
        let err = store.gc(&keep, dry_run).expect_err("gc refuses");
        assert!(
            matches!(err.kind, StoreErrorKind::IncompleteKeep(_)),
            "{err}"
        );
        let msg = err.to_string();
        assert!(msg.contains("exp.toml") && msg.contains("`up`"), "{msg}");
    }
    assert_eq!(before, snapshot(store.root()));
    assert!(b.unwrap().dir.join("manifest.json").exists());
}

#[test]
fn gc_refuses_without_any_walk_or_after_a_failed_walk() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store"), Access::ReadWrite).unwrap();
    let err = store.gc(&KeepSet::new(), false).unwrap_err();
    assert!(
        matches!(err.kind, StoreErrorKind::IncompleteKeep(_)),
        "{err}"
    );
    let mut keep = KeepSet::new();
    keep.add_walk("a.toml", &[]);
    assert!(keep.is_complete());
    keep.add_failed_walk("b.toml", &"dataset row 3 is malformed");
    let err = store.gc(&keep, false).unwrap_err();
    assert!(err.to_string().contains("b.toml"), "{err}");
}
