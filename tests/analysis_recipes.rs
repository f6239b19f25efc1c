//! Analysis outside the binary (issue #56): `otb export`'s tables carry the grid cell
//! of the node that wrote each row as columns (node, method, agent, editor, env,
//! setting, round, step, split, seed; `cell_<name>` where the table has a column of
//! that name of its own), the tables' own columns and rows are those stored, a GROUP
//! BY over the exported `scores` gives Table 2's run cells, and the polars and duckdb
//! recipes of docs/analysis.md (read from that file, so it cannot drift) give the
//! numbers of `otb table table2` and `otb table tokens` on the scripted grid (and
//! README's "Analyse a run" snippet runs).

mod common;

use common::{otb, stdout_ok};
use parquet::file::reader::{FileReader, SerializedFileReader};
use pipeline::Row;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use stages::rows::{DocCallRow, DocRow, EditRow, ScoreRow, ToolRunRow, TrajectoryRow};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

fn experiment() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/scripted.toml")
}

/// The scripted grid run into `<dir>/S` and exported to `<dir>/E`.
fn scripted_export() -> tempfile::TempDir {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("S");
    for args in [
        vec!["run", experiment().to_str().unwrap(), "--quiet"],
        vec!["export", experiment().to_str().unwrap(), "--to", "E"],
    ] {
        stdout_ok(
            &otb()
                .current_dir(d.path())
                .arg("--store")
                .arg(&store)
                .args(&args)
                .output()
                .unwrap(),
        );
    }
    d
}

/// `otb table NAME --format csv` of the scripted grid in `<dir>/S`.
fn table_csv(dir: &Path, name: &str) -> String {
    stdout_ok(
        &otb()
            .arg("--store")
            .arg(dir.join("S"))
            .args(["table", name, "--format", "csv", "--experiment"])
            .arg(experiment())
            .output()
            .unwrap(),
    )
}

/// A cell as Table 2 names it: (setting, agent, method label).
type Key = (String, String, String);

/// A GROUP BY's group: (setting, method, agent) as the export names them.
type Group = (String, String, String);

/// Groups (or cells) with their n, E, P and A.
type Cells<K> = BTreeMap<K, (i64, f64, f64, f64)>;

/// Table 2's `run` cells: key -> (n, E, P, A) as printed.
fn table2_run_cells(csv: &str) -> Cells<Key> {
    let mut cells = BTreeMap::new();
    for line in csv.lines().skip(1) {
        let f: Vec<&str> = line.split(',').collect();
        assert_eq!(f.len(), 8, "{line}");
        if f[3] != "run" {
            continue;
        }
        let num = |i: usize| f[i].parse::<f64>().unwrap();
        cells.insert(
            (f[0].to_string(), f[1].to_string(), f[2].to_string()),
            (f[4].parse().unwrap(), num(5), num(6), num(7)),
        );
    }
    assert!(!cells.is_empty(), "no run cells:\n{csv}");
    cells
}

/// The keys under which Table 2 shows a GROUP BY row (setting, method, agent): a
/// method's label; Gold's one cell (`setting = gold`) under every setting.
fn table2_keys(setting: &str, method: &str, agent: &str) -> Vec<Key> {
    let label = match method {
        "gold" => "Gold",
        "base" => "Base",
        "toolobserver" => "+TO",
        "toolobserver-guard" => "+TO guard",
        "play2prompt" => "+P2P",
        "easytool" => "+ET",
        "draft" => "+DRAFT",
        other => panic!("a method the scripted grid does not run: {other}"),
    };
    let settings: Vec<&str> = if setting == "gold" {
        vec!["names", "names+desc", "names+params"]
    } else {
        vec![setting]
    };
    settings
        .into_iter()
        .map(|s| (s.to_string(), agent.to_string(), label.to_string()))
        .collect()
}

/// `x` rounds to the value printed with 4 decimals.
fn printed(x: f64, shown: f64) -> bool {
    (x - shown).abs() <= 0.5e-4 + 1e-9
}

/// Checks GROUP BY rows `(setting, method, agent) -> (n, E, P, A)` against Table 2's
/// run cells: every row is shown, every cell is a row, the numbers as printed.
fn check_against_table2(what: &str, rows: &Cells<Group>, table: &Cells<Key>) {
    let mut seen = std::collections::BTreeSet::new();
    for ((setting, method, agent), &(n, e, p, a)) in rows {
        for key in table2_keys(setting, method, agent) {
            let Some(&(tn, te, tp, ta)) = table.get(&key) else {
                panic!("{what}: {key:?} is not a run cell of Table 2: {table:?}");
            };
            assert!(
                n == tn && printed(e, te) && printed(p, tp) && printed(a, ta),
                "{what}: {key:?}: {n} {e} {p} {a} vs the table's {tn} {te} {tp} {ta}"
            );
            seen.insert(key);
        }
    }
    let unseen: Vec<&Key> = table.keys().filter(|k| !seen.contains(*k)).collect();
    assert!(unseen.is_empty(), "{what}: no row for {unseen:?}");
}

/// The cell's columns as exported (the plain names; `round` is `cell_round` in the
/// tables read with it, which have a `round` of their own).
#[derive(Debug, Serialize, Deserialize, Row)]
#[row(table = "cell", doc = "the cell columns of an exported table")]
struct CellColumns {
    /// Node.
    node: String,
    /// Method.
    method: String,
    /// Agent.
    agent: String,
    /// Editor.
    editor: String,
    /// Environment.
    env: String,
    /// Setting.
    setting: String,
    /// Round.
    cell_round: i64,
    /// Step.
    step: String,
    /// Split.
    split: String,
    /// Seed.
    seed: i64,
}

/// What the GROUP BY of `scores` reads.
#[derive(Debug, Serialize, Deserialize, Row)]
#[row(table = "scores", doc = "exported scores")]
struct Score {
    /// Setting (the cell's).
    setting: String,
    /// Method (the cell's).
    method: String,
    /// Agent (the cell's).
    agent: String,
    /// Editor (the cell's).
    editor: String,
    /// Round (the score's own).
    round: i64,
    /// E.
    e: bool,
    /// P.
    p: f64,
    /// A.
    a: f64,
}

/// The column names of Parquet file `path`, in order.
fn column_names(path: &Path) -> Vec<String> {
    let r = SerializedFileReader::new(std::fs::File::open(path).unwrap()).unwrap();
    r.metadata()
        .file_metadata()
        .schema_descr()
        .columns()
        .iter()
        .map(|c| c.name().to_string())
        .collect()
}

/// Exported table `R` (in `export`) holds exactly the stored tables of `run`'s
/// outputs, stacked in the run's order, in its own columns; after them come the
/// cell's columns when `labelled`, named by the rule (`cell_<name>` for a name the
/// table has); returns the outputs' cells, one per row.
fn check_table<R: Row + Serialize + DeserializeOwned>(
    run: &stages::driver::RunOutput,
    export: &Path,
    labelled: bool,
) -> Vec<stages::env::Cell> {
    let path = export.join(format!("{}.parquet", R::TABLE));
    let mut stored = Vec::new();
    let mut cells = Vec::new();
    for o in run
        .outputs
        .iter()
        .filter(|o| o.entry.manifest.outputs.contains_key(R::TABLE))
    {
        let rows: Vec<R> = o.entry.read().unwrap();
        cells.extend(rows.iter().map(|_| o.cell.clone()));
        stored.extend(rows.iter().map(|r| serde_json::to_value(r).unwrap()));
    }
    let exported: Vec<serde_json::Value> = pipeline::table::read_rows::<R>(&path)
        .unwrap()
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect();
    assert!(!stored.is_empty(), "{}: nothing stored", R::TABLE);
    assert!(exported == stored, "{}: the rows differ", R::TABLE);
    let own: Vec<&str> = R::columns().iter().map(|c| c.name).collect();
    let mut want: Vec<String> = own.iter().map(ToString::to_string).collect();
    if labelled {
        for c in [
            "node", "method", "agent", "editor", "env", "setting", "round", "step", "split", "seed",
        ] {
            want.push(if own.contains(&c) {
                format!("cell_{c}")
            } else {
                c.to_string()
            });
        }
    }
    assert_eq!(column_names(&path), want, "{}", R::TABLE);
    cells
}

/// Every labelled BFCL table keeps its own columns and rows as stored and gets the
/// cell as typed columns; a GROUP BY over the exported `scores` alone (each chain's
/// last round, mean E/P/A per setting x method x agent) equals Table 2's run cells.
#[test]
fn the_export_carries_the_cell_and_its_group_by_is_table2() {
    let d = scripted_export();
    let export = d.path().join("E");
    let exp = stages::driver::load(&experiment()).unwrap();
    let store = pipeline::Store::open(&d.path().join("S"), pipeline::Access::ReadOnly).unwrap();
    let run = stages::driver::locate(&exp, &store).unwrap().run;

    check_table::<stages::rows::InstanceRow>(&run, &export, false);
    check_table::<DocRow>(&run, &export, true);
    check_table::<DocCallRow>(&run, &export, true);
    check_table::<ToolRunRow>(&run, &export, true);
    // The cell's values, row by row, where the table's own `round` makes the cell's
    // `cell_round`.
    let scores = check_table::<ScoreRow>(&run, &export, true);
    for (table, cells) in [
        ("scores", scores),
        (
            "trajectories",
            check_table::<TrajectoryRow>(&run, &export, true),
        ),
        ("edits", check_table::<EditRow>(&run, &export, true)),
    ] {
        let got: Vec<CellColumns> =
            pipeline::table::read_rows(&export.join(format!("{table}.parquet"))).unwrap();
        assert_eq!(got.len(), cells.len(), "{table}");
        let nodes: std::collections::BTreeSet<&str> =
            run.outputs.iter().map(|o| o.node.as_str()).collect();
        for (g, c) in got.iter().zip(&cells) {
            assert!(nodes.contains(g.node.as_str()), "{table}: {g:?}");
            let want = (
                c.method_name(),
                c.agent.as_str(),
                c.editor.as_str(),
                c.env,
                c.setting.as_str(),
                c.round,
                c.step_name(),
                c.split_name(),
                c.seed as i64,
            );
            let have = (
                g.method.as_str(),
                g.agent.as_str(),
                g.editor.as_str(),
                g.env.as_str(),
                g.setting.as_str(),
                g.cell_round,
                g.step.as_str(),
                g.split.as_str(),
                g.seed,
            );
            assert_eq!(have, want, "{table}: {}", g.node);
        }
        assert!(got.iter().all(|g| g.env == "bfcl" && !g.setting.is_empty()));
    }

    // GROUP BY over the export alone.
    let rows: Vec<Score> = pipeline::table::read_rows(&export.join("scores.parquet")).unwrap();
    let mut last: BTreeMap<(&str, &str, &str, &str), i64> = BTreeMap::new();
    for r in &rows {
        let l = last
            .entry((&r.setting, &r.method, &r.agent, &r.editor))
            .or_insert(r.round);
        *l = (*l).max(r.round);
    }
    let mut sums: Cells<Group> = BTreeMap::new();
    for r in rows
        .iter()
        .filter(|r| last[&(&*r.setting, &*r.method, &*r.agent, &*r.editor)] == r.round)
    {
        let s = sums
            .entry((r.setting.clone(), r.method.clone(), r.agent.clone()))
            .or_default();
        s.0 += 1;
        s.1 += if r.e { 1.0 } else { 0.0 };
        s.2 += r.p;
        s.3 += r.a;
    }
    let means = sums
        .into_iter()
        .map(|(k, (n, e, p, a))| {
            let m = n as f64;
            (k, (n, e / m, p / m, a / m))
        })
        .collect();
    check_against_table2(
        "GROUP BY in Rust",
        &means,
        &table2_run_cells(&table_csv(d.path(), "table2")),
    );
}

/// The Python with polars and duckdb (`OTB_PYTHON`, else `python3`), or `None`,
/// saying so.
fn python() -> Option<String> {
    let py = std::env::var("OTB_PYTHON").unwrap_or_else(|_| "python3".into());
    let ok = std::process::Command::new(&py)
        .args(["-c", "import polars, duckdb"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Some(py)
    } else {
        testkit::skip(
            "analysis",
            format!("no Python with polars and duckdb ({py}; set OTB_PYTHON)"),
        );
        None
    }
}

/// The Python code of the recipe `name` in docs/analysis.md: the `python` block
/// after `<!-- recipe: NAME -->`.
fn recipe(name: &str) -> String {
    let doc =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/analysis.md"))
            .unwrap();
    let marker = format!("<!-- recipe: {name} -->\n```python\n");
    let start = doc.find(&marker).unwrap_or_else(|| panic!("no {marker:?}")) + marker.len();
    let len = doc[start..].find("```").unwrap();
    doc[start..start + len].to_string()
}

/// A recipe's two CSV blocks: the GROUP BY (`setting,method,agent,n,e,p,a`) and the
/// JOIN (`setting,method,agent,n,e,tokens`).
type Blocks = (Cells<Group>, BTreeMap<Group, (i64, f64, i64)>);

fn blocks(name: &str, out: &str) -> Blocks {
    let parts: Vec<&str> = out.trim().split("\n\n").collect();
    assert_eq!(parts.len(), 2, "{name}: {out}");
    let mut lines = parts[0].lines();
    assert_eq!(lines.next(), Some("setting,method,agent,n,e,p,a"), "{name}");
    let key = |f: &[&str]| (f[0].to_string(), f[1].to_string(), f[2].to_string());
    let cells = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let x = |i: usize| f[i].parse::<f64>().unwrap();
            (key(&f), (f[3].parse().unwrap(), x(4), x(5), x(6)))
        })
        .collect();
    let mut lines = parts[1].lines();
    assert_eq!(
        lines.next(),
        Some("setting,method,agent,n,e,tokens"),
        "{name}"
    );
    let joined = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                key(&f),
                (
                    f[3].parse().unwrap(),
                    f[4].parse::<f64>().unwrap(),
                    f[5].parse().unwrap(),
                ),
            )
        })
        .collect();
    (cells, joined)
}

/// docs/analysis.md's polars and duckdb recipes, run as written on the scripted
/// grid's export: their GROUP BY is Table 2's run cells, their JOIN of trajectories
/// with scores has Table 2's n and E and the token table's evaluation tokens, and the
/// two agree.
#[test]
fn the_polars_and_duckdb_recipes_agree_with_otb_table() {
    let Some(py) = python() else {
        return;
    };
    let d = scripted_export();
    let table2 = table2_run_cells(&table_csv(d.path(), "table2"));
    // The token table's evaluation tokens per (setting, method, agent).
    let tokens_csv = table_csv(d.path(), "tokens");
    let mut lines = tokens_csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |n: &str| header.iter().position(|h| *h == n).unwrap();
    let (s, m, a, ev) = (
        col("setting"),
        col("method"),
        col("agent"),
        col("evaluation"),
    );
    let evaluation: BTreeMap<Group, i64> = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            (
                (f[s].to_string(), f[m].to_string(), f[a].to_string()),
                f[ev].parse().unwrap(),
            )
        })
        .collect();

    let mut results = Vec::new();
    for name in ["polars", "duckdb"] {
        let out = std::process::Command::new(&py)
            .current_dir(d.path())
            .arg("-c")
            .arg(recipe(name))
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let (cells, joined) = blocks(name, &String::from_utf8_lossy(&out.stdout));
        check_against_table2(name, &cells, &table2);
        assert_eq!(
            joined.keys().collect::<Vec<_>>(),
            cells.keys().collect::<Vec<_>>(),
            "{name}: the JOIN's groups"
        );
        for (k, &(n, e, tokens)) in &joined {
            let (cn, ce, ..) = cells[k];
            assert!(n == cn && printed(e, ce), "{name}: JOIN {k:?}: {n} {e}");
            assert_eq!(Some(&tokens), evaluation.get(k), "{name}: tokens of {k:?}");
        }
        results.push((cells, joined));
    }
    // README's one-liner runs too, and shows the cells.
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("README.md")).unwrap();
    let section = &readme[readme.find("## Analyse a run").unwrap()..];
    let start = section.find("```python\n").unwrap() + "```python\n".len();
    let code = &section[start..start + section[start..].find("```").unwrap()];
    let out = std::process::Command::new(&py)
        .current_dir(d.path())
        .arg("-c")
        .arg(code)
        .output()
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && shown.contains("names+params") && shown.contains("toolobserver"),
        "README: {shown}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // The two agree with each other to rounding (their sums run in other orders).
    let ((pc, pj), (dc, dj)) = (&results[0], &results[1]);
    let near = |x: f64, y: f64| (x - y).abs() < 1e-9;
    for (k, &(n, e, p, a)) in pc {
        let (dn, de, dp, da) = dc[k];
        assert!(
            n == dn && near(e, de) && near(p, dp) && near(a, da),
            "polars and duckdb: {k:?}"
        );
        let ((jn, je, jt), (kn, ke, kt)) = (pj[k], dj[k]);
        assert!(
            jn == kn && near(je, ke) && jt == kt,
            "polars and duckdb: the JOIN's {k:?}"
        );
    }
}
