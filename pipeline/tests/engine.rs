//! The stage engine on a toy two-stage pipeline: reuse, early cutoff, corruption,
//! crashes, concurrent writers and status reasons.

mod common;

use common::*;
use pipeline::{
    Access, Classify, Lookup, Mode, NodeState, Session, StageError, Store, StoreErrorKind,
};
use std::sync::Barrier;

fn open(dir: &tempfile::TempDir) -> Store {
    Store::open(&dir.path().join("store"), Access::ReadWrite).expect("open store")
}

#[test]
fn publish_then_reuse_without_calling_the_stage() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let calls = Calls::default();
    let (r1, a1, b1) = both(&store, Mode::Run, 1, &nums(&[1, 2, 3]), &calls);
    assert_eq!((calls.up.get(), calls.down.get()), (1, 1));
    assert!(r1.iter().all(|r| r.state == NodeState::Ran));
    let (r2, a2, b2) = both(&store, Mode::Run, 1, &nums(&[1, 2, 3]), &calls);
    assert_eq!(
        (calls.up.get(), calls.down.get()),
        (1, 1),
        "reused, not rerun"
    );
    assert!(r2.iter().all(|r| r.state == NodeState::Fresh));
    let (a1, a2, b2) = (a1.unwrap(), a2.unwrap(), b2.unwrap());
    assert_eq!(a1.digest(), a2.digest());
    assert_eq!(b1.unwrap().dir, b2.dir);
    let doubled: Vec<Num> = b2.read().unwrap();
    assert_eq!(doubled, nums(&[2, 4, 6]));
}

#[test]
fn early_cutoff_keeps_the_downstream_key() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let calls = Calls::default();
    let rows = nums(&[5, 6]);
    let (r1, ..) = both(&store, Mode::Run, 1, &rows, &calls);
    // v changes the upstream key but not its output bytes.
    let (r2, ..) = both(&store, Mode::Run, 2, &rows, &calls);
    assert_eq!(calls.up.get(), 2, "the upstream reruns with the new param");
    assert_ne!(r1[0].key, r2[0].key);
    assert_eq!(r2[0].state, NodeState::Ran);
    assert_eq!(calls.down.get(), 1, "the downstream is not rerun");
    assert_eq!(r1[1].key, r2[1].key, "the downstream key did not change");
    assert_eq!(r2[1].state, NodeState::Fresh);
}

/// Run both stages, damage upstream's entry with `damage`, run again: the damage is
/// detected, the entry quarantined and recomputed, and the downstream reused.
fn corrupt_then_rerun(damage: impl Fn(&std::path::Path)) {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let calls = Calls::default();
    let rows = nums(&[7, 8, 9]);
    let a = computed_up(&store, &rows, &calls);
    damage(&a.dir);
    let (r, a2, _) = both(&store, Mode::Run, 1, &rows, &calls);
    assert_eq!(calls.up.get(), 2, "the corrupt entry is recomputed");
    assert_eq!(r[0].state, NodeState::Ran);
    assert_eq!(
        r[1].state,
        NodeState::Fresh,
        "same bytes: downstream reused"
    );
    let quarantined: Vec<_> = std::fs::read_dir(store.root().join("quarantine"))
        .unwrap()
        .collect();
    assert_eq!(quarantined.len(), 1, "the corrupt entry was moved aside");
    let a2 = a2.unwrap();
    assert_eq!(a2.dir, a.dir);
    assert_eq!(a2.read::<Num>().unwrap(), rows);
}

#[test]
fn flipped_table_byte_is_detected_quarantined_and_recomputed() {
    corrupt_then_rerun(|dir| flip_byte(&dir.join("nums.parquet")));
}

#[test]
fn truncated_manifest_is_detected_quarantined_and_recomputed() {
    corrupt_then_rerun(|dir| {
        let p = dir.join("manifest.json");
        let bytes = std::fs::read(&p).unwrap();
        std::fs::write(&p, &bytes[..bytes.len() / 3]).unwrap();
    });
}

#[test]
fn a_manifest_pointing_at_another_file_fails_verification() {
    // Readers open `nums.parquet`; a manifest that has verification check a different
    // (intact) file must not pass off a damaged `nums.parquet`.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let calls = Calls::default();
    let a = computed_up(&store, &nums(&[1]), &calls);
    std::fs::copy(a.dir.join("nums.parquet"), a.dir.join("copy.parquet")).unwrap();
    flip_byte(&a.dir.join("nums.parquet"));
    let mp = a.dir.join("manifest.json");
    let text = std::fs::read_to_string(&mp).unwrap();
    let edited = text.replace("\"nums.parquet\"", "\"copy.parquet\"");
    assert_ne!(text, edited);
    std::fs::write(&mp, edited).unwrap();
    let components = a.manifest.components.clone();
    match store.inspect(&components) {
        Lookup::Corrupt { reason } => assert!(reason.contains("copy.parquet"), "{reason}"),
        other => panic!("expected Corrupt, got {other:?}"),
    }
}

#[test]
fn a_failed_quarantine_is_an_error_never_a_reuse() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let calls = Calls::default();
    let a = computed_up(&store, &nums(&[1, 2]), &calls);
    flip_byte(&a.dir.join("nums.parquet"));
    // quarantine/ replaced by a file: moving the entry aside fails.
    let q = store.root().join("quarantine");
    std::fs::remove_dir(&q).unwrap();
    std::fs::write(&q, "not a directory").unwrap();
    let mut s = Session::new(&store, Mode::Run, true);
    let err = up(&mut s, 1, &nums(&[1, 2]), &calls).expect_err("must not reuse");
    let store_err = err.store_error().expect("a store error");
    assert!(
        matches!(store_err.kind, StoreErrorKind::StuckCorrupt { .. }),
        "{err}"
    );
    assert_eq!(calls.up.get(), 1, "nothing ran on top of the corrupt entry");
    assert!(a.dir.join("manifest.json").exists(), "left for the user");
}

#[test]
fn committing_over_a_corrupt_entry_replaces_it() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let calls = Calls::default();
    let a = computed_up(&store, &nums(&[3]), &calls);
    flip_byte(&a.dir.join("nums.parquet"));
    let mut staging = store.begin(&a.manifest.components).unwrap();
    staging.write(&nums(&[3])).unwrap();
    let e = store.commit(staging, "up", 0, Default::default()).unwrap();
    assert!(matches!(
        store.inspect(&a.manifest.components),
        Lookup::Hit(_)
    ));
    assert_eq!(e.read::<Num>().unwrap(), nums(&[3]));
}

#[test]
fn a_crash_before_the_manifest_leaves_no_result_and_is_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("store");
    let components = {
        let store = Store::open(&root, Access::ReadWrite).unwrap();
        let calls = Calls::default();
        let (_, a, _) = both(&store, Mode::Run, 1, &nums(&[1]), &calls);
        let mut c = a.unwrap().manifest.components.clone();
        c.params = serde_json::json!({ "v": 99 });
        let mut staging = store.begin(&c).unwrap();
        staging.write(&nums(&[4])).unwrap();
        // The process dies here: no manifest, no rename, no cleanup.
        std::mem::forget(staging);
        assert!(matches!(store.inspect(&c), Lookup::Miss));
        c
    };
    let tmp = root.join("tmp");
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 1);
    let ro = Store::open(&root, Access::ReadOnly).unwrap();
    assert!(matches!(ro.inspect(&components), Lookup::Miss));
    drop(ro);
    let _store = Store::open(&root, Access::ReadWrite).unwrap();
    assert_eq!(
        std::fs::read_dir(&tmp).unwrap().count(),
        0,
        "the next writer deletes the staging directory"
    );
}

#[test]
fn a_failing_stage_leaves_no_staging_and_keeps_its_error_kind() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let s = Session::new(&store, Mode::Run, true);
    let err = s
        .stage("bad", UP, 1, serde_json::json!({}), &[], |ctx| {
            ctx.write(&nums(&[1]))?;
            Err(StageError::user(UP, "setting `nope` is unknown"))
        })
        .expect_err("the stage fails");
    assert!(err.is_user_error());
    assert_eq!(
        std::fs::read_dir(store.root().join("tmp")).unwrap().count(),
        0
    );
    assert!(store.entries().unwrap().is_empty());
}

#[test]
fn concurrent_writers_of_one_key_end_with_one_valid_entry() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    for round in 0..8 {
        let barrier = Barrier::new(2);
        let rows = nums(&[round, round + 1]);
        let results: Vec<_> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..2)
                .map(|_| {
                    scope.spawn(|| {
                        let s = Session::new(&store, Mode::Run, true);
                        s.stage("up", UP, 1, serde_json::json!({ "v": round }), &[], |ctx| {
                            ctx.write(&rows)?;
                            barrier.wait();
                            Ok(())
                        })
                    })
                })
                .collect();
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let entries: Vec<_> = results
            .into_iter()
            .map(|r| {
                r.expect("both writers succeed")
                    .entry()
                    .cloned()
                    .expect("run mode")
            })
            .collect();
        assert_eq!(entries[0].dir, entries[1].dir);
        assert_eq!(entries[0].digest(), entries[1].digest());
        assert!(matches!(
            store.inspect(&entries[0].manifest.components),
            Lookup::Hit(_)
        ));
    }
    assert_eq!(entry_dirs(&store, UP).len(), 8, "one entry per key");
    assert_eq!(
        std::fs::read_dir(store.root().join("tmp")).unwrap().count(),
        0
    );
}

#[test]
fn status_names_the_changed_component_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let calls = Calls::default();
    let rows = nums(&[1, 2]);
    both(&store, Mode::Run, 1, &rows, &calls);
    let (fresh, ..) = both(&store, Mode::Status, 1, &rows, &calls);
    assert!(fresh.iter().all(|r| r.state == NodeState::Fresh));
    let before = snapshot(store.root());
    let (stale, a, b) = both(&store, Mode::Status, 2, &rows, &calls);
    assert_eq!(
        (calls.up.get(), calls.down.get()),
        (1, 1),
        "status computes nothing"
    );
    assert!(a.is_none() && b.is_none());
    match &stale[0].state {
        NodeState::WouldRun { reasons } => assert_eq!(reasons, &["params.v: 1 -> 2"]),
        other => panic!("expected WouldRun, got {other:?}"),
    }
    assert!(matches!(stale[1].state, NodeState::Blocked { .. }));
    assert_eq!(before, snapshot(store.root()));
}

#[test]
fn status_on_a_writable_store_does_not_quarantine() {
    // `otb gc --dry-run` walks experiments in status mode over a writable store.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let calls = Calls::default();
    let (_, a, _) = both(&store, Mode::Run, 1, &nums(&[1]), &calls);
    flip_byte(&a.unwrap().dir.join("nums.parquet"));
    let before = snapshot(store.root());
    let (r, ..) = both(&store, Mode::Status, 1, &nums(&[1]), &calls);
    match &r[0].state {
        NodeState::WouldRun { reasons } => assert!(reasons[0].contains("corrupt"), "{reasons:?}"),
        other => panic!("expected WouldRun, got {other:?}"),
    }
    assert_eq!(before, snapshot(store.root()), "nothing moved or written");
}

#[test]
fn status_lists_what_waits_and_what_a_loop_may_skip() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let calls = Calls::default();
    let mut status = Session::new(&store, Mode::Status, true);
    let a = up(&mut status, 1, &nums(&[1]), &calls).unwrap();
    assert!(a.entry().is_none(), "not computed yet");
    let b = down(&mut status, &a, &calls).unwrap();
    assert_eq!(b.node(), "down");
    let _ = waiting_node(&status, 9, &b, Some("round 1")).unwrap();
    let r = status.reports();
    assert_eq!(r.len(), 3);
    assert!(matches!(r[0].state, NodeState::WouldRun { .. }));
    assert_eq!(
        r[1].state,
        NodeState::Blocked {
            on: "input `nums` is not computed yet".into()
        }
    );
    assert_eq!(r[1].inputs, [("nums".to_string(), "up".to_string())]);
    assert_eq!(r[1].key, None);
    assert_eq!(
        r[2].state,
        NodeState::Planned {
            after: "round 1".into()
        }
    );
    assert_eq!(
        (calls.up.get(), calls.down.get()),
        (0, 0),
        "status computes nothing"
    );
    // In a run, a pending input is a bug of the drive, never a silent skip.
    let mut run = Session::new(&store, Mode::Run, true);
    let e = down(&mut run, &pipeline::Handle::pending("up"), &calls).unwrap_err();
    assert_eq!(pipeline::Classify::class(&e), pipeline::ErrorClass::Bug);
}

/// A `toy-down` node at place `seq`, declared as planned `after` (or not), over
/// `input`: in status mode, while `input` is not computed, it is listed as waiting.
fn waiting_node(
    s: &Session<'_>,
    seq: u32,
    input: &pipeline::Handle,
    after: Option<&str>,
) -> Result<pipeline::Handle, StageError> {
    let call = pipeline::Call {
        node: "down",
        stage: DOWN,
        code_version: 1,
        params: serde_json::json!({}),
        after,
    };
    let seq = pipeline::Seq::default().child(seq);
    s.stage_at(&seq, call, &[("nums", input)], |_| {
        Err(StageError::bug(DOWN, "status mode computes nothing"))
    })
}

#[test]
fn interleaved_declarations_are_planned_or_blocked_each_by_its_own() {
    // Two chains in one session (continuations interleave): a curve's round that
    // may never run, and a node that only waits. Whether a node is planned is the
    // declaring code's word for that node, not a state of the session.
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let status = Session::new(&store, Mode::Status, true);
    let pending = pipeline::Handle::pending("up");
    let afters = [Some("round 1"), None, Some("round 2"), None];
    for (i, after) in afters.iter().enumerate() {
        let h = waiting_node(&status, i as u32, &pending, *after).unwrap();
        assert!(h.entry().is_none());
    }
    let states: Vec<NodeState> = status.reports().into_iter().map(|r| r.state).collect();
    let blocked = NodeState::Blocked {
        on: "input `nums` is not computed yet".into(),
    };
    let planned = |after: &str| NodeState::Planned {
        after: after.into(),
    };
    assert_eq!(
        states,
        [
            planned("round 1"),
            blocked.clone(),
            planned("round 2"),
            blocked
        ]
    );
}

#[test]
fn a_journal_left_by_a_stop_after_publishing_is_deleted_when_the_entry_is_reused() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(&dir);
    let calls = Calls::default();
    let (r1, _, _) = both(&store, Mode::Run, 1, &nums(&[1, 2, 3]), &calls);
    // What a run stopped between a stage's publish and its journal's deletion leaves.
    let journals: Vec<_> = r1
        .iter()
        .map(|r| {
            let key = r.key.as_ref().expect("a stage that ran has a key");
            let j = store.root().join("cache").join("journal").join(&key.0);
            std::fs::create_dir_all(&j).unwrap();
            std::fs::write(j.join("x.item"), b"record").unwrap();
            j
        })
        .collect();
    let (r2, _, _) = both(&store, Mode::Status, 1, &nums(&[1, 2, 3]), &calls);
    assert!(r2.iter().all(|r| r.state == NodeState::Fresh));
    assert!(
        journals.iter().all(|j| j.exists()),
        "status changes nothing"
    );
    let (r3, _, _) = both(&store, Mode::Run, 1, &nums(&[1, 2, 3]), &calls);
    assert!(r3.iter().all(|r| r.state == NodeState::Fresh));
    let left: Vec<_> = journals.iter().filter(|j| j.exists()).collect();
    assert!(left.is_empty(), "journals left: {left:?}");
}
