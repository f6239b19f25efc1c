//! Adversarial runs of the scripted grid (`experiments/scripted.toml`): killed with
//! SIGKILL at 20 points, two runs at once on one store, writes failing under a file
//! size limit. Every case ends with the tables of an uninterrupted run, and no
//! corrupt entry survives (a rerun finds every stage fresh).

mod common;

use common::{otb, stdout_ok};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn experiment() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/scripted.toml")
}

fn run(store: &Path) -> std::process::Command {
    let mut c = otb();
    c.arg("--store")
        .arg(store)
        .arg("run")
        .arg(experiment())
        .arg("--quiet");
    c
}

fn table2(store: &Path) -> String {
    stdout_ok(
        &otb()
            .arg("--store")
            .arg(store)
            .args(["table", "table2", "--format", "csv", "--experiment"])
            .arg(experiment())
            .output()
            .unwrap(),
    )
}

/// Rerun to the end; then every stage must be fresh on one more run.
fn finish_and_check(store: &Path) -> String {
    stdout_ok(&run(store).output().unwrap());
    let again = stdout_ok(&run(store).output().unwrap());
    assert!(again.contains(" 0 ran,"), "{again}");
    table2(store)
}

#[test]
fn kills_concurrent_runs_and_write_errors_end_with_the_uninterrupted_tables() {
    let d = tempfile::tempdir().unwrap();
    // The reference: one uninterrupted run, timed.
    let reference_store = d.path().join("reference");
    let t0 = Instant::now();
    stdout_ok(&run(&reference_store).output().unwrap());
    let full = t0.elapsed();
    let reference = table2(&reference_store);

    // 20 kills at points spread over the run's length (some before the first stage
    // ends, some deep in the grid), each followed by a restart that is killed again.
    let store = d.path().join("killed");
    for i in 0..20u32 {
        let at = full.mul_f64(f64::from(i % 10 + 1) / 11.0);
        let mut child = run(&store)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at.min(Duration::from_secs(20)));
        let _ = child.kill();
        let _ = child.wait();
    }
    assert_eq!(finish_and_check(&store), reference);

    // Two runs at once on one store: the store lock serialises them; both succeed.
    let store = d.path().join("concurrent");
    let a = run(&store).spawn().unwrap();
    let b = run(&store).spawn().unwrap();
    for c in [a, b] {
        let out = c.wait_with_output().unwrap();
        assert!(out.status.success());
    }
    assert_eq!(finish_and_check(&store), reference);

    // Writes that fail (a 64 KiB file size limit): the run stops with one error line
    // and publishes nothing broken; without the limit it finishes.
    let store = d.path().join("limited");
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg("ulimit -f 64; exec \"$0\" --store \"$1\" run \"$2\" --quiet")
        .arg(env!("CARGO_BIN_EXE_otb"))
        .arg(&store)
        .arg(experiment())
        .env_remove("OTB_STORE")
        .output()
        .unwrap();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let last = stderr.lines().last().unwrap_or("");
        assert!(last.starts_with("otb: error: "), "{stderr}");
        assert_eq!(out.status.code(), Some(1), "{stderr}");
    }
    assert_eq!(finish_and_check(&store), reference);
}
