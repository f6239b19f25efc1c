//! A store on object storage, without a server: an in-memory object store and a
//! `file://` one. An entry published by one mirror is found by another; of two
//! writers of one key exactly one wins and the other takes the winner's entry;
//! a remote entry that does not verify is not used.

mod common;

use common::*;
use pipeline::remote::Remote;
use pipeline::{Access, KeyComponents, Lookup, Store, Usage};
use std::sync::Arc;

fn comps() -> KeyComponents {
    KeyComponents {
        stage: "up".into(),
        code_version: 1,
        params: serde_json::json!({"v": 1}),
        inputs: Default::default(),
    }
}

fn mirror(d: &tempfile::TempDir, name: &str, remote: &Remote) -> Store {
    Store::open_remote(&d.path().join(name), remote.clone(), Access::ReadWrite).unwrap()
}

fn publish(store: &Store, xs: &[i64]) -> pipeline::Entry {
    let mut s = store.begin(&comps()).unwrap();
    s.write(&nums(xs)).unwrap();
    store.commit(s, "up[v1]", 1, Usage::default()).unwrap()
}

#[test]
fn one_mirror_publishes_and_another_fetches() {
    let d = tempfile::tempdir().unwrap();
    let remote_dir = d.path().join("remote");
    let url = format!("file://{}", remote_dir.display());
    let remote = Remote::open(&url).unwrap();
    let a = mirror(&d, "a", &remote);
    let b = mirror(&d, "b", &remote);
    assert!(matches!(b.inspect(&comps()), Lookup::Miss));
    let ours = publish(&a, &[1, 2, 3]);
    let key = comps().key();
    assert!(remote_dir
        .join("up")
        .join(&key.0)
        .join("manifest.json")
        .is_file());
    let Lookup::Hit(got) = b.inspect(&comps()) else {
        panic!("fetched from the remote")
    };
    assert_eq!(got.digest(), ours.digest());
    assert!(got.dir.starts_with(d.path().join("b")));
    assert_eq!(got.read::<Num>().unwrap(), nums(&[1, 2, 3]));
}

#[test]
fn of_two_writers_of_one_key_the_first_wins_and_the_second_takes_its_entry() {
    let d = tempfile::tempdir().unwrap();
    let mem = Arc::new(object_store::memory::InMemory::new());
    let remote = Remote::with_store(mem.clone(), "bucket/prefix").unwrap();
    let a = mirror(&d, "a", &remote);
    let b = mirror(&d, "b", &remote);
    // Not deterministic: the two writers computed different tables for one key.
    let first = publish(&a, &[1]);
    let second = publish(&b, &[2]);
    assert_eq!(second.digest(), first.digest(), "the first manifest wins");
    assert_eq!(second.read::<Num>().unwrap(), nums(&[1]));
    assert!(second.dir.starts_with(d.path().join("b")));
    // Only the winner's tables stay on the remote.
    let mut tables = 0;
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    rt.block_on(async {
        use futures_util::StreamExt;
        use object_store::ObjectStore;
        let mut l = mem.list(None);
        while let Some(m) = l.next().await {
            if m.unwrap().location.as_ref().ends_with(".parquet") {
                tables += 1;
            }
        }
    });
    assert_eq!(tables, 1);
    // A third mirror finds the winner's.
    let c = mirror(&d, "c", &remote);
    let Lookup::Hit(got) = c.inspect(&comps()) else {
        panic!("fetched")
    };
    assert_eq!(got.digest(), first.digest());
}

#[test]
fn a_remote_entry_that_does_not_verify_is_not_used() {
    let d = tempfile::tempdir().unwrap();
    let remote_dir = d.path().join("remote");
    let remote = Remote::open(&format!("file://{}", remote_dir.display())).unwrap();
    let a = mirror(&d, "a", &remote);
    publish(&a, &[1, 2]);
    let key = comps().key();
    let entry = remote_dir.join("up").join(&key.0);
    let writer = std::fs::read_dir(&entry)
        .unwrap()
        .flatten()
        .find(|e| e.path().is_dir())
        .unwrap()
        .path();
    std::fs::write(writer.join("nums.parquet"), b"not parquet").unwrap();
    let b = mirror(&d, "b", &remote);
    assert!(matches!(b.inspect(&comps()), Lookup::Miss));
    // Nothing of it was left in b's mirror.
    assert!(!d.path().join("b").join("up").join(&key.0).exists());
    assert_eq!(
        std::fs::read_dir(d.path().join("b").join("tmp"))
            .unwrap()
            .count(),
        0
    );
}

#[test]
fn a_prefix_of_another_store_format_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let remote_dir = d.path().join("remote");
    std::fs::create_dir_all(&remote_dir).unwrap();
    std::fs::write(remote_dir.join("FORMAT"), "otb-store-9\n").unwrap();
    let remote = Remote::open(&format!("file://{}", remote_dir.display())).unwrap();
    let e = Store::open_remote(&d.path().join("m"), remote, Access::ReadWrite)
        .err()
        .expect("refused");
    assert!(
        matches!(e.kind, pipeline::StoreErrorKind::Format { .. }),
        "{e}"
    );
    assert!(!d.path().join("m").exists(), "nothing written");
}
