//! Cached-rerun benchmark: N stages whose outputs are all in the store. Reports the
//! time per stage lookup (key + manifest + verification) and how it compares with
//! just reading the stored bytes, which is the floor for a verified cached rerun.
//!
//! Run with `cargo run --release -p pipeline --example bench_store [N] [ROWS]`.

use pipeline::{Access, Digest, Mode, Row, Session, Store};
use serde::{Deserialize, Serialize};
use std::time::Instant;

#[derive(Serialize, Deserialize, Row)]
#[row(table = "rows", doc = "bench row")]
struct R {
    /// Id.
    id: String,
    /// X.
    x: f64,
    /// Args.
    args: serde_json::Value,
}

fn rows(stage: usize, n: usize) -> Vec<R> {
    (0..n)
        .map(|i| R {
            id: format!("exec_simple_{stage}_{i}"),
            x: (i * stage) as f64 / 7.0,
            args: serde_json::json!({"n": i, "k": stage, "note": "the quick brown fox jumps over the lazy dog"}),
        })
        .collect()
}

fn drive(s: &mut Session<'_>, n: usize, rows_per: usize) -> Result<(), Box<dyn std::error::Error>> {
    let mut prev: Option<pipeline::Handle> = None;
    for i in 0..n {
        let inputs: Vec<(&str, &pipeline::Handle)> = match &prev {
            Some(h) => vec![("prev", h)],
            None => vec![],
        };
        let e = s.stage(
            &format!("bench[{i}]"),
            "bench",
            1,
            serde_json::json!({"i": i}),
            &inputs,
            |ctx| {
                ctx.write(&rows(i, rows_per))?;
                Ok(())
            },
        )?;
        prev = Some(e);
    }
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = args.first().copied().unwrap_or(200);
    let rows_per = args.get(1).copied().unwrap_or(2000);
    let dir = tempfile::tempdir()?;
    let store = Store::open(dir.path(), Access::ReadWrite)?;
    let t = Instant::now();
    drive(&mut Session::new(&store, Mode::Run, true), n, rows_per)?;
    let populate = t.elapsed();
    let files: Vec<_> = store
        .entries()?
        .into_iter()
        .map(|(_, d)| d.join("rows.parquet"))
        .collect();
    let bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();

    let reps = 5;
    let mut lookup = f64::MAX;
    let mut read = f64::MAX;
    let mut hash = f64::MAX;
    for _ in 0..reps {
        let t = Instant::now();
        let mut s = Session::new(&store, Mode::Run, true);
        drive(&mut s, n, rows_per)?;
        assert_eq!(s.executed(), 0);
        lookup = lookup.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut total = 0usize;
        for f in &files {
            total += std::fs::read(f)?.len();
        }
        assert_eq!(total as u64, bytes);
        read = read.min(t.elapsed().as_secs_f64());
        let t = Instant::now();
        for f in &files {
            Digest::of_file(f)?;
        }
        hash = hash.min(t.elapsed().as_secs_f64());
    }
    println!(
        "bench_store: {n} stages x {rows_per} rows, {:.1} MiB of Parquet (populate {:.2}s)",
        bytes as f64 / 1048576.0,
        populate.as_secs_f64()
    );
    println!(
        "  cached rerun (all fresh):   {:8.3} ms total, {:7.1} us per stage lookup",
        lookup * 1e3,
        lookup * 1e6 / n as f64
    );
    println!(
        "  read the stored bytes:      {:8.3} ms  ({:.0}% of the rerun)",
        read * 1e3,
        100.0 * read / lookup
    );
    println!(
        "  sha256 of the stored bytes: {:8.3} ms  ({:.0}% of the rerun)",
        hash * 1e3,
        100.0 * hash / lookup
    );
    println!(
        "  ratio rerun / hash-the-bytes = {:.2} (1.0 = bounded by reading + hashing the bytes)",
        lookup / hash
    );
    Ok(())
}
