//! Every reader of an `otb` command takes one located experiment: the command walks
//! the experiment's drive once (`stages::driver::locate`), however many tables or
//! report sections it reads from it. `OTB_TRACE_WALKS=1` makes `otb` print the count.

mod common;

use common::{otb, Scratch, MODELS};

/// The walk count `otb` printed on stderr for `args` (which must succeed).
fn walks(s: &Scratch, args: &[&str]) -> usize {
    let out = otb()
        .arg("--store")
        .arg(s.store())
        .args(args)
        .env("OTB_TRACE_WALKS", "1")
        .output()
        .expect("run otb");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{args:?}: {err}");
    err.lines()
        .find_map(|l| l.strip_prefix("otb: walks: "))
        .unwrap_or_else(|| panic!("{args:?}: no walk count in {err}"))
        .trim()
        .parse()
        .expect("a count")
}

#[test]
fn each_command_walks_the_experiment_once() {
    let s = Scratch::new("", MODELS);
    s.run();
    let exp = s.exp();
    let exp = exp.to_str().expect("utf8");
    let report = s.dir.path().join("report");
    let export = s.dir.path().join("export");
    let (report, export) = (report.to_str().unwrap(), export.to_str().unwrap());
    for args in [
        vec!["status", exp],
        vec!["plan", exp],
        vec!["table", "table2", "--experiment", exp],
        vec!["table", "table5", "--experiment", exp],
        vec!["table", "tokens", "--experiment", exp],
        vec!["report", exp, "--to", report],
        vec!["export", exp, "--to", export],
        vec!["gc", "--keep", exp, "--dry-run"],
        vec![
            "docs",
            exp,
            "--method",
            "gold",
            "--instance",
            "exec_simple_0",
        ],
    ] {
        assert_eq!(walks(&s, &args), 1, "{args:?}");
    }
    // A report compared against a second experiment walks each once.
    let other = s.dir.path().join("other.toml");
    std::fs::copy(s.exp(), &other).expect("copy");
    let report2 = s.dir.path().join("report2");
    let args = [
        "report",
        exp,
        "--against",
        other.to_str().unwrap(),
        "--to",
        report2.to_str().unwrap(),
    ];
    assert_eq!(walks(&s, &args), 2);
}
