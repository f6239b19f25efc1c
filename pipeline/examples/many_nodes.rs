//! A grid of many ready nodes through the executor (issue #59's load figure): N
//! independent nodes (default 5,000; `OTB_NODES`), each writing one row, run by one
//! `Schedule` into a fresh store; prints the wall time, the most threads the process had
//! at once and its peak resident memory (Linux `/proc/self/status`).
//!
//! `cargo run --release -p pipeline --example many_nodes` (`OTB_NODE_THREADS` sets
//! the executor's cap).

use pipeline::{Mode, Node, Params, Row, Schedule, Seq, Session, StageCtx, StageError, Store};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize, Row)]
#[row(table = "nums", doc = "numbers")]
struct Num {
    /// A number.
    x: i64,
}

/// A field of `/proc/self/status` (`Threads`, `VmHWM`), as a number.
fn status(field: &str) -> usize {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn main() {
    let n: u32 = std::env::var("OTB_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5000);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(dir.path(), pipeline::Access::ReadWrite).expect("store");
    let session = Session::new(&store, Mode::Run, true);
    let plan: Schedule<'_, StageError> = Schedule::default();
    let (done, most) = (AtomicBool::new(false), AtomicUsize::new(0));
    let t0 = std::time::Instant::now();
    std::thread::scope(|scope| {
        scope.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                most.fetch_max(status("Threads"), Ordering::Relaxed);
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        });
        for i in 0..n {
            let node = Node {
                seq: Seq::default().child(i),
                node: format!("n{i}"),
                stage: "num",
                code_version: 1,
                params: Params::Known(serde_json::json!({ "i": i })),
                inputs: Vec::new(),
                after: None,
            };
            plan.node(&session, node, move |ctx: &mut StageCtx<'_>| {
                ctx.write(&[Num { x: i64::from(i) }])?;
                Ok(())
            });
        }
        let errors = plan.run();
        done.store(true, Ordering::Relaxed);
        assert!(errors.is_empty(), "{errors:?}");
    });
    println!(
        "{n} ready nodes, executor cap {}: {:.1} s, at most {} threads in the process, peak RSS {} MiB",
        plan.threads(),
        t0.elapsed().as_secs_f64(),
        most.load(Ordering::Relaxed),
        status("VmHWM") / 1024
    );
}
