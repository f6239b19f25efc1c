//! `otb run --shard I/N`: cooperating workers on one store. Four workers make the
//! tables of one process and compute each node once; a worker killed while it holds
//! a lease is taken over once the lease expires (and `otb status` says who holds a
//! node meanwhile); bad shard arguments are one line before the store is touched.

mod common;

use common::{one_error_line, otb, otb_run, run_quiet, stdout_ok};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

fn scripted() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/scripted.toml")
}

fn worker(store: &Path, exp: &Path, shard: &str) -> Command {
    let mut c = otb_run(store, exp);
    c.args(["--shard", shard]).env("OTB_HEARTBEAT_S", "0");
    c
}

/// Run `n` workers of `exp` on `store` at once; each must succeed. Returns the
/// nodes each says it computed, asserting no node computed twice.
fn workers(store: &Path, exp: &Path, n: u32) -> Vec<Vec<String>> {
    let outs = common::run_together((1..=n).map(|i| worker(store, exp, &format!("{i}/{n}"))));
    let per: Vec<Vec<String>> = outs
        .iter()
        .map(|(stdout, stderr)| {
            assert!(stdout.contains("[shard "), "{stdout}");
            common::ran_nodes(stderr)
        })
        .collect();
    common::assert_once(&per.concat());
    per
}

/// The number of stages of a plain run's summary (`name: N stages, X ran, ...`).
fn plain_run(store: &Path, exp: &Path) -> String {
    run_quiet(store, exp)
}

#[test]
fn four_workers_make_the_tables_of_one_process_and_compute_each_node_once() {
    let d = tempfile::tempdir().unwrap();
    let exp = scripted();
    let one = d.path().join("one");
    let summary = plain_run(&one, &exp);
    let total: usize = summary
        .split(": ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .expect("stage count");

    let shared = d.path().join("shared");
    let per = workers(&shared, &exp, 4);
    assert!(
        per.iter().all(|mine| !mine.is_empty()),
        "every worker computes its share: {per:?}"
    );
    let computed = per.concat();
    assert_eq!(computed.len(), total);
    // The tables of one process, and nothing left to do.
    assert_eq!(
        common::run_table2(&shared, &exp),
        common::run_table2(&one, &exp)
    );
    assert!(
        plain_run(&shared, &exp).contains(&format!("{total} stages, 0 ran")),
        "all fresh"
    );
}

#[test]
fn a_killed_workers_nodes_are_taken_over_after_its_lease_expires() {
    let d = tempfile::tempdir().unwrap();
    let exp = scripted();
    let store = d.path().join("store");
    // Worker 1 stops at its first publish, holding that node's lease.
    let mut first = common::paused_at_publish(&mut worker(&store, &exp, "1/2"));
    let paused = store.join("tmp").join("PAUSED");
    let t = Instant::now();
    while !paused.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "worker 1 never paused"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // `otb status` says who holds the node being computed.
    let status = stdout_ok(
        &otb()
            .arg("--store")
            .arg(&store)
            .arg("status")
            .arg(&exp)
            .output()
            .unwrap(),
    );
    assert!(
        status.contains("in progress: shard 1/2 on host ") && status.contains(" since "),
        "{status}"
    );
    let mut second = common::Watched::spawn(worker(&store, &exp, "2/2").env("OTB_LEASE_S", "1"));
    // Worker 1 dies only once worker 2 has found its lease held (a fixed pause
    // was not enough on a loaded machine: worker 2 came after the lease expired).
    second.wait_for("computes it (host ", Duration::from_secs(120));
    first.kill().unwrap();
    first.wait().unwrap();
    let (_, stderr) = second.finish();
    let computed = common::ran_nodes(&stderr);
    common::assert_once(&computed);

    let one = d.path().join("one");
    let summary = plain_run(&one, &exp);
    assert_eq!(
        common::run_table2(&store, &exp),
        common::run_table2(&one, &exp)
    );
    let total = summary
        .split(": ")
        .nth(1)
        .and_then(|s| s.split(' ').next())
        .unwrap();
    assert_eq!(
        computed.len().to_string(),
        total,
        "worker 2 computed everything"
    );
    assert!(plain_run(&store, &exp).contains(" 0 ran"), "all fresh");
}

#[test]
fn bad_shards_are_one_line_before_the_store_is_touched() {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    let exp = scripted();
    for bad in ["0/4", "5/4", "two", "auto"] {
        let out = worker(&store, &exp, bad)
            .env_remove("SLURM_ARRAY_TASK_ID")
            .env_remove("JOB_COMPLETION_INDEX")
            .output()
            .unwrap();
        let err = one_error_line(&out);
        assert!(err.contains("--shard"), "{err}");
    }
    let out = worker(&store, &exp, "1/2")
        .env("OTB_LEASE_S", "soon")
        .output()
        .unwrap();
    assert!(one_error_line(&out).contains("OTB_LEASE_S"));
    assert!(!store.exists());
}

/// The search grid (scripted models, substitute corpus) with three workers: Table 4
/// and the computed nodes of one process, each node once.
#[test]
fn search_workers_make_the_table_of_one_process() {
    let d = tempfile::tempdir().unwrap();
    if !common::substitute_corpus(&d.path().join("one")) {
        return;
    }
    let exp = d.path().join("search.toml");
    std::fs::write(
        &exp,
        "name = \"search\"\n[search]\ntool_sets = [\"domains\", \"domains+all\"]\nmethods = [\"gold\", \"base\", \"toolobserver\", \"easytool\"]\ntrain_questions = 3\ntest_questions = 6\nmax_turns = 2\nrounds = 1\nbatch_size = 2\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:errors\"\n",
    )
    .unwrap();
    let one = d.path().join("one");
    let summary = plain_run(&one, &exp);
    let ran_once: usize = summary
        .split(", ")
        .find_map(|p| p.strip_suffix(" ran"))
        .and_then(|n| n.parse().ok())
        .expect("ran count");
    let shared = d.path().join("shared");
    let computed = workers(&shared, &exp, 3).concat();
    assert_eq!(computed.len(), ran_once);
    let table4 = |store: &Path| {
        stdout_ok(
            &otb()
                .arg("--store")
                .arg(store)
                .args(["table", "table4", "--format", "csv", "--experiment"])
                .arg(&exp)
                .output()
                .unwrap(),
        )
    };
    assert_eq!(table4(&shared), table4(&one));
}
