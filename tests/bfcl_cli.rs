//! `otb exec` and `otb released score`: the interfaces scripts depend on.

mod common;

use common::{otb, shared_bfcl as shared, stdout_ok};

fn exec(call: &str) -> (Option<i32>, String, String) {
    let out = otb().args(["exec", call]).output().unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn exec_prints_python_repr_or_error_text_on_one_line() {
    // python3 -c "print(repr(10*5/2))"
    assert_eq!(exec("calculate_triangle_area(base=10, height=5)").1, "25.0");
    // python3 -c "import math; print(math.factorial(20))"
    assert_eq!(exec("math_factorial(n=20)").1, "2432902008176640000");
    let (code, out, _) = exec("math_gcd(a=12)");
    assert_eq!(code, Some(0));
    assert_eq!(
        out,
        "TypeError: math_gcd() missing 1 required positional argument: 'b'"
    );
    let (code, _, err) = exec("math_gcd(a=12");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.starts_with("otb: error: cannot parse call"), "{err}");
}

#[test]
fn exec_recorded_backend_answers_from_the_frozen_file() {
    let Some(s) = shared() else { return };
    let rec = s.join("recorded_api_responses.json");
    let out = otb()
        .args([
            "exec",
            "convert_currency(amount=5000, from_currency='EUR', to_currency='JPY')",
            "--backend",
            "recorded",
            "--recorded",
        ])
        .arg(&rec)
        .output()
        .unwrap();
    assert_eq!(stdout_ok(&out).trim(), "859533.5");
    let out = otb()
        .args(["exec", "math_gcd(a=1, b=2)", "--backend", "recorded"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "--backend recorded without --recorded is bad input"
    );
}

/// A released-runs folder that is missing, or holds a file not in the released format,
/// is the input's fault: one error line naming it, exit code 2.
#[test]
fn released_score_refuses_a_missing_folder_and_a_malformed_file_as_bad_input() {
    let d = tempfile::tempdir().unwrap();
    let score = |dir: &std::path::Path| {
        let out = otb()
            .args(["released", "score"])
            .arg(dir)
            .args(["--backend", "simulated"])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        (out.status.code(), err)
    };
    let missing = d.path().join("missing");
    let (code, err) = score(&missing);
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("otb: error: ") && err.contains("not a directory"),
        "{err}"
    );

    let run = d
        .path()
        .join("runs/tool_observer/executable_simple_function_name/gen_seed0");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::write(
        run.join("v0_results.json"),
        "{\"id\": \"exec_simple_0\", \"resu",
    )
    .unwrap();
    let (code, err) = score(&d.path().join("runs"));
    assert_eq!(code, Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("v0_results.json:1: invalid JSON"), "{err}");
}

#[test]
fn released_score_reproduces_table2_gpt5_cells() {
    let Some(s) = shared() else { return };
    let out = otb()
        .args(["released", "score"])
        .arg(s.join("released_runs"))
        .args(["--backend", "recorded", "--recorded"])
        .arg(s.join("recorded_api_responses.json"))
        .arg("--expected")
        .arg(s.join("tool_configs"))
        .args(["--format", "csv"])
        .output()
        .unwrap();
    let text = common::stdout_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("69 run versions scored; 0 instance verdicts disagree"),
        "per-instance verdicts must agree with the released scored files: {err}"
    );
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("method,config,gen_hypers,version,E,P,A,n")
    );
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert!(rows.len() > 40, "{}", rows.len());
    // Pool simple (100) + multiple (50) for one (method, setting, version) cell.
    let pooled = |method: &str, suffix: &str, version: &str| -> (f64, f64, f64) {
        let mut acc = (0.0, 0.0, 0.0, 0.0);
        for r in &rows {
            let cfg = r[1];
            let matches = (cfg == format!("executable_simple_{suffix}")
                || cfg == format!("executable_multiple_function_{suffix}"))
                && r[0] == method
                && r[3] == version;
            if matches {
                let n: f64 = r[7].parse().unwrap();
                acc.0 += r[4].parse::<f64>().unwrap() * n;
                acc.1 += r[5].parse::<f64>().unwrap() * n;
                acc.2 += r[6].parse::<f64>().unwrap() * n;
                acc.3 += n;
            }
        }
        assert_eq!(acc.3, 150.0, "{method} {suffix} v{version}");
        (acc.0 / acc.3, acc.1 / acc.3, acc.2 / acc.3)
    };
    let r2 = |x: (f64, f64, f64)| format!("{:.2}/{:.2}/{:.2}", x.0, x.1, x.2);
    // targets.md, Table 2, GPT-5 rows (recomputed from the released runs).
    assert_eq!(r2(pooled("tool_observer", "base", "0")), "0.96/0.95/0.96");
    assert_eq!(
        r2(pooled(
            "tool_observer",
            "name[all:increasing_number]_desc[all:blank]_param[all:remove_all]",
            "0"
        )),
        "0.00/0.00/0.60"
    );
    assert_eq!(
        r2(pooled(
            "tool_observer",
            "name[all:increasing_number]_desc[all:blank]_param[all:blank_descriptions]",
            "0"
        )),
        "0.82/0.85/0.96"
    );
    assert_eq!(
        r2(pooled(
            "easytool",
            "name[all:increasing_number]_desc[all:blank]_param[all:blank_descriptions]",
            "0"
        )),
        "0.75/0.77/0.94"
    );
}

#[test]
fn table2_csv_has_the_documented_columns() {
    let dir = tempfile::tempdir().unwrap();
    let out = otb()
        .arg("--store")
        .arg(dir.path().join("store"))
        .args(["table", "table2", "--format", "csv"])
        .output()
        .unwrap();
    let text = common::stdout_ok(&out);
    assert_eq!(
        text.lines().next(),
        Some("setting,model,method,source,n,E,P,A")
    );
    assert!(
        text.contains("names,GPT-5,+TO,paper,150,0.8000,0.7800,0.8900"),
        "{text}"
    );
}

#[test]
fn table2_released_columns_match_targets() {
    let Some(s) = shared() else { return };
    let dir = tempfile::tempdir().unwrap();
    let out = otb()
        .arg("--store")
        .arg(dir.path().join("store"))
        .args(["table", "table2", "--format", "csv", "--released"])
        .arg(s.join("released_runs"))
        .arg("--recorded")
        .arg(s.join("recorded_api_responses.json"))
        .arg("--expected")
        .arg(s.join("tool_configs"))
        .output()
        .unwrap();
    let text = common::stdout_ok(&out);
    let cell = |setting: &str, method: &str| -> String {
        let row: Vec<&str> = text
            .lines()
            .find(|l| l.starts_with(&format!("{setting},GPT-5,{method},released,")))
            .unwrap_or_else(|| panic!("no released {setting} {method} row in\n{text}"))
            .split(',')
            .collect();
        let f = |i: usize| format!("{:.2}", row[i].parse::<f64>().unwrap());
        format!("{}/{}/{}/{}", row[4], f(5), f(6), f(7))
    };
    // targets.md Table 2, GPT-5 rows; +TO is the last round that has results.
    let expected = [
        ("names", "Gold", "150/0.96/0.95/0.96"),
        ("names", "Base", "150/0.00/0.00/0.60"),
        ("names", "+TO", "150/0.80/0.78/0.89"),
        ("names", "+P2P", "50/0.46/0.40/0.74"),
        ("names", "+ET", "150/0.00/0.00/0.60"),
        ("names+desc", "+TO", "150/0.86/0.82/0.91"),
        ("names+desc", "+P2P", "50/0.58/0.54/0.82"),
        ("names+params", "Base", "150/0.82/0.85/0.96"),
        ("names+params", "+TO", "150/0.83/0.86/0.95"),
        ("names+params", "+P2P", "150/0.79/0.81/0.95"),
        ("names+params", "+ET", "150/0.75/0.77/0.94"),
    ];
    for (setting, method, want) in expected {
        assert_eq!(cell(setting, method), want, "{setting} {method}");
    }
}
