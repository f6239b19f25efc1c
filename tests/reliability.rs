//! Reliability, round two (#37): each case is a promise README makes, tried as a
//! careless or hostile user would, and the line that keeps it.

mod common;

use common::{one_error_line, Scratch, MODELS};
use std::path::{Path, PathBuf};

/// A published entry of the store (`<store>/<stage>/<key>/` with its manifest).
fn an_entry(store: &Path) -> PathBuf {
    for stage in std::fs::read_dir(store).unwrap().flatten() {
        for key in std::fs::read_dir(stage.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if key.path().join("manifest.json").is_file() {
                return key.path();
            }
        }
    }
    panic!("no published entry under {}", store.display());
}

/// `otb export --to` a folder inside a store entry wrote into the entry, which then
/// failed its verification and was recomputed. Any destination inside the store is
/// refused before anything is written.
#[test]
fn export_refuses_a_destination_inside_the_store() {
    let s = Scratch::new("", MODELS);
    s.run();
    let entry = an_entry(&s.store());
    let before: Vec<_> = std::fs::read_dir(&entry)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    for dest in [entry.join("export"), s.store(), s.store().join("elsewhere")] {
        let out = s.otb(&[
            "export",
            s.exp().to_str().unwrap(),
            "--to",
            dest.to_str().unwrap(),
        ]);
        let line = one_error_line(&out);
        assert!(line.contains("inside the store"), "{line}");
        assert!(!dest.join("SCHEMA.md").exists());
    }
    let after: Vec<_> = std::fs::read_dir(&entry)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(before, after);
    let status = s.status();
    assert!(status.contains(" 0 would run"), "{status}");
    // Outside the store it still works.
    let ok = s.otb(&[
        "export",
        s.exp().to_str().unwrap(),
        "--to",
        s.dir.path().join("out").to_str().unwrap(),
    ]);
    common::stdout_ok(&ok);
}

/// A call whose arguments build a huge nested value (`[[0]*4194304]*4194304`: the
/// inner list is copied 4M times here, where CPython shares it) aborted the process on
/// a failed allocation (exit 134). Every construction is bounded by its whole size:
/// a `MemoryError` result, and the process goes on.
#[test]
fn a_huge_nested_value_is_a_memory_error_not_an_abort() {
    let out = common::otb()
        .args([
            "exec",
            "estimate_derivative(function=\"lambda x: [[0]*4194304]*4194304\", x=1)",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(text.starts_with("MemoryError"), "{text}");
    // In an argument literal it is refused as the call's parse error (exit 2).
    let out = common::otb()
        .args([
            "exec",
            "calculate_triangle_area(base=[[0]*4194304]*4194304, height=2)",
        ])
        .output()
        .unwrap();
    let line = one_error_line(&out);
    assert!(line.contains("MemoryError"), "{line}");
}

/// A model the user configured wrongly (here `OTB_LLM_MAX_CONCURRENCY=0` for an
/// `openai:` agent) is the user's to fix: one line naming the variable, exit 2, before
/// the store is touched (it used to be found by the first stage that opened the
/// model, after other stages had run, and reported as an infrastructure failure).
#[test]
fn a_misconfigured_model_is_the_users_error_before_the_store_is_touched() {
    let s = Scratch::new(
        "",
        "agent = \"openai:gpt-4o\"\neditor = \"scripted:errors\"",
    );
    let out = common::otb()
        .arg("--store")
        .arg(s.store())
        .args(["run", s.exp().to_str().unwrap()])
        .env("OTB_LLM_BASE_URL", "http://127.0.0.1:9")
        .env("OTB_LLM_MAX_CONCURRENCY", "0")
        .output()
        .expect("run otb");
    let line = one_error_line(&out);
    assert!(line.contains("OTB_LLM_MAX_CONCURRENCY"), "{line}");
    assert!(line.contains("openai:gpt-4o"), "{line}");
    assert!(!s.store().exists(), "nothing may be written");
}

/// Make `dir` refuse new files: read-only permission bits where they bind (not
/// root), else the immutable attribute (which binds root too). `None` when neither
/// can be had here (said on stderr).
fn lock_down(dir: &Path) -> Option<&'static str> {
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o555)).unwrap();
    let probe = dir.join("probe");
    if std::fs::write(&probe, b"x").is_err() {
        return Some("mode");
    }
    std::fs::remove_file(&probe).unwrap();
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let ok = std::process::Command::new("chattr")
        .arg("+i")
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success());
    if ok && std::fs::write(&probe, b"x").is_err() {
        return Some("immutable");
    }
    if ok {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(dir)
            .status();
    }
    eprintln!("skipping: neither permission bits nor chattr +i make a directory read-only here");
    None
}

fn unlock(dir: &Path, how: &str) {
    use std::os::unix::fs::PermissionsExt;
    if how == "immutable" {
        let _ = std::process::Command::new("chattr")
            .arg("-i")
            .arg(dir)
            .status();
    }
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755));
}

/// A store whose directory takes no new file, though its `.lock` can still be opened
/// for writing, ran and exited 0. README promises an unwritable store is one error
/// line and exit 2 before any work.
#[test]
fn an_unwritable_store_with_a_writable_lock_is_refused_before_work() {
    let s = Scratch::new("", MODELS);
    s.run();
    // Another experiment over the same store: work to do.
    s.write_exp("seeds = [1]", MODELS);
    let store = s.store();
    assert!(std::fs::metadata(store.join(".lock")).is_ok());
    let Some(how) = lock_down(&store) else {
        return;
    };
    let out = s.otb(&["run", s.exp().to_str().unwrap()]);
    unlock(&store, how);
    let err = one_error_line(&out);
    assert!(err.contains("not writable"), "{err}");
    // Nothing ran: the store is as the first run left it.
    assert!(
        s.status().lines().any(|l| l.starts_with("would run")),
        "{}",
        s.status()
    );
}

/// `otb report --to <a folder that takes no new entry>/rep` failed after the work
/// with "Operation not permitted" (exit 1): the destination is checked first, one
/// line, exit 2 (#59).
#[test]
fn a_report_into_a_folder_that_takes_no_entry_is_refused_first() {
    let s = Scratch::new("", MODELS);
    s.run();
    let locked = s.dir.path().join("locked");
    std::fs::create_dir(&locked).unwrap();
    let Some(how) = lock_down(&locked) else {
        return;
    };
    let dest = locked.join("rep");
    let out = s.otb(&[
        "report",
        s.exp().to_str().unwrap(),
        "--to",
        dest.to_str().unwrap(),
    ]);
    unlock(&locked, how);
    let line = one_error_line(&out);
    assert!(line.contains("not writable"), "{line}");
    assert!(!dest.exists());
}
