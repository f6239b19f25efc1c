//! A toy two-stage pipeline for the engine and store tests (no datasets, no models):
//! `toy-up` writes the rows it is given, `toy-down` doubles every value it reads.

#![allow(dead_code)]

use pipeline::{Entry, Handle, Mode, Row, Session, StageError, Store};
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::path::{Path, PathBuf};

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, Row)]
#[row(table = "nums", doc = "one toy value")]
pub struct Num {
    /// Row id.
    pub id: String,
    /// Value.
    pub x: i64,
}

pub fn nums(xs: &[i64]) -> Vec<Num> {
    xs.iter()
        .enumerate()
        .map(|(i, &x)| Num {
            id: format!("r{i}"),
            x,
        })
        .collect()
}

pub const UP: &str = "toy-up";
pub const DOWN: &str = "toy-down";

/// Counts how often each stage's closure ran.
#[derive(Default)]
pub struct Calls {
    pub up: Cell<u32>,
    pub down: Cell<u32>,
}

/// The upstream node: param `v`, output `rows` (independent of `v`, so a changed `v`
/// reruns it with a byte-identical output).
pub fn up(s: &mut Session<'_>, v: i64, rows: &[Num], calls: &Calls) -> Result<Handle, StageError> {
    s.stage("up", UP, 1, serde_json::json!({ "v": v }), &[], |ctx| {
        calls.up.set(calls.up.get() + 1);
        ctx.write(rows)?;
        Ok(())
    })
}

/// The downstream node: doubles every value of `input`.
pub fn down(s: &mut Session<'_>, input: &Handle, calls: &Calls) -> Result<Handle, StageError> {
    s.stage(
        "down",
        DOWN,
        1,
        serde_json::json!({}),
        &[("nums", input)],
        |ctx| {
            calls.down.set(calls.down.get() + 1);
            let rows: Vec<Num> = input.read()?;
            let doubled: Vec<Num> = rows.into_iter().map(|r| Num { x: 2 * r.x, ..r }).collect();
            ctx.write(&doubled)?;
            Ok(())
        },
    )
}

/// Run (or plan) both nodes once; returns both sessions' results.
pub fn both(
    store: &Store,
    mode: Mode,
    v: i64,
    rows: &[Num],
    calls: &Calls,
) -> (Vec<pipeline::NodeReport>, Option<Entry>, Option<Entry>) {
    let mut s = Session::new(store, mode, true);
    let a = up(&mut s, v, rows, calls).expect("toy-up");
    let b = down(&mut s, &a, calls).expect("toy-down");
    (s.reports().to_vec(), a.entry().cloned(), b.entry().cloned())
}

/// Run both nodes on `rows` (param 1) and return the upstream entry.
pub fn computed_up(store: &Store, rows: &[Num], calls: &Calls) -> Entry {
    both(store, Mode::Run, 1, rows, calls).1.expect("run mode")
}

/// Every path under `root` with its size and (for files) content, sorted: two equal
/// snapshots mean nothing was created, removed or changed.
pub fn snapshot(root: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

fn walk(root: &Path, p: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    let Ok(rd) = std::fs::read_dir(p) else {
        return;
    };
    for e in rd.flatten() {
        let path = e.path();
        let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
        let ft = e.file_type().expect("file type");
        if ft.is_dir() {
            out.push((rel, b"<dir>".to_vec()));
            walk(root, &path, out);
        } else if ft.is_symlink() {
            out.push((rel, b"<link>".to_vec()));
        } else {
            out.push((rel, std::fs::read(&path).expect("read")));
        }
    }
}

/// The single published entry directory of `stage`.
pub fn entry_dirs(store: &Store, stage: &str) -> Vec<PathBuf> {
    store
        .entries()
        .expect("entries")
        .into_iter()
        .filter(|(s, _)| s == stage)
        .map(|(_, d)| d)
        .collect()
}

/// Flip one byte in the middle of a file.
pub fn flip_byte(path: &Path) {
    let mut bytes = std::fs::read(path).expect("read");
    let i = bytes.len() / 2;
    bytes[i] ^= 0x01;
    std::fs::write(path, bytes).expect("write");
}
