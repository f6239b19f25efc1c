//! The MCP benchmark's fixtures (`datasets::mcp::generate`), checked from the outside:
//! every task's answer is recomputed from the written fixture by another route than
//! the generator's -- git tasks with `git log` / `git show` / `git branch` on the
//! generated repository, sqlite tasks with the SQL the task implies run by python3's
//! `sqlite3`, filesystem tasks by reading the files, memory tasks by parsing
//! memory.jsonl (and applying the change a task states) -- and must equal the stored
//! answer; generating twice gives the same bytes (tasks, commit hashes, the database's
//! dump, the tree, the graph). Needs git and python3 (skips otherwise, unless
//! `OTB_REQUIRE` names `mcp`).

use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// HEAD of the generated repository for seed 0: the same on every machine.
const HEAD_SEED_0: &str = "4f21e8c0ed3c0b3137f171f26f9ea117169a0a6d";

/// A fresh temporary folder (removed on drop).
struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        let p = std::env::temp_dir().join(format!("otb-mcp-fixtures-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).expect("mkdir");
        Tmp(p)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// git and python3's sqlite3 run, or the test skips.
fn tools() -> bool {
    let runs = |cmd: &str, args: &[&str]| {
        Command::new(cmd)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !runs("git", &["--version"]) {
        testkit::skip("mcp", "no git for the generated repository");
        return false;
    }
    if !runs("python3", &["-c", "import sqlite3"]) {
        testkit::skip("mcp", "no python3 with sqlite3 for the generated database");
        return false;
    }
    true
}

fn generate(out: &Path, seed: u64) -> datasets::mcp::Summary {
    datasets::mcp::generate(out, seed).expect("generate")
}

fn read_tasks(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .expect("tasks")
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

fn s<'a>(t: &'a Value, key: &str) -> &'a str {
    t[key].as_str().unwrap_or_else(|| panic!("{key} of {t}"))
}

/// The pieces of `q` between pairs of `d`.
fn between(q: &str, d: char) -> Vec<String> {
    q.split(d)
        .enumerate()
        .filter(|(i, _)| i % 2 == 1)
        .map(|(_, p)| p.to_string())
        .collect()
}

fn quoted(t: &Value) -> Vec<String> {
    between(s(t, "question"), '"')
}

fn ticked(t: &Value) -> Vec<String> {
    between(s(t, "question"), '`')
}

// ------------------------------------------------------------------------- git

fn git(repo: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .current_dir(repo)
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// The value `git` tools give for one git task.
fn git_answer(repo: &Path, t: &Value, hashes: &BTreeMap<String, String>) -> String {
    let q = quoted(t);
    let k = ticked(t);
    let hash = |msg: &str| {
        hashes
            .get(msg)
            .unwrap_or_else(|| panic!("no commit {msg:?}"))
            .clone()
    };
    let lines = |out: String| -> Vec<String> { out.lines().map(str::to_string).collect() };
    let pick = |format: &str, key: &str| -> Vec<String> {
        lines(git(repo, &["log", &format!("--format={format}")]))
            .into_iter()
            .filter_map(|l| {
                l.split_once('\t')
                    .and_then(|(a, b)| (a == key).then(|| b.to_string()))
            })
            .collect()
    };
    match s(t, "kind") {
        "last-author" => git(repo, &["log", "-1", "--format=%an", "--", &k[0]])
            .trim()
            .into(),
        "introduced-by" => lines(git(
            repo,
            &["log", &format!("-S{}", k[0]), "--reverse", "--format=%s"],
        ))[0]
            .clone(),
        "folder-commits" => lines(git(repo, &["log", "--format=%H", "--", &k[0]]))
            .len()
            .to_string(),
        "author-commits" => lines(git(repo, &["log", "--format=%an"]))
            .iter()
            .filter(|a| **a == q[0])
            .count()
            .to_string(),
        "commit-on-date" => {
            let on: Vec<String> = lines(git(repo, &["log", "--date=short", "--format=%ad%x09%s"]))
                .into_iter()
                .filter_map(|l| {
                    l.split_once('\t')
                        .and_then(|(a, b)| (a == k[0]).then(|| b.to_string()))
                })
                .collect();
            assert_eq!(on.len(), 1, "{t}");
            on[0].clone()
        }
        "author-of-commit" => pick("%s%x09%an", &q[0])[0].clone(),
        "files-in-commit" => lines(git(
            repo,
            &["show", "--format=", "--name-only", &hash(&q[0])],
        ))
        .iter()
        .filter(|l| !l.is_empty())
        .count()
        .to_string(),
        "value-at-head" => {
            let text = git(repo, &["show", &format!("HEAD:{}", k[1])]);
            let prefix = format!("{} = ", k[0]);
            let v: Vec<&str> = text
                .lines()
                .filter_map(|l| l.strip_prefix(&prefix))
                .collect();
            assert_eq!(v.len(), 1, "{t}");
            v[0].to_string()
        }
        "latest-by-author" => pick("%an%x09%s", &q[0])[0].clone(),
        "first-commit" => lines(git(repo, &["log", "--reverse", "--format=%s"]))[0].clone(),
        "branch-contains" => {
            let h = hash(&q[0]);
            let branches = lines(git(
                repo,
                &["branch", "--contains", &h, "--format=%(refname:short)"],
            ));
            (if branches.contains(&k[0]) {
                "yes"
            } else {
                "no"
            })
            .into()
        }
        "author-email" => pick("%s%x09%ae", &q[0])[0].clone(),
        other => panic!("git task of unknown kind {other}: {t}"),
    }
}

// ---------------------------------------------------------------------- sqlite

/// The SQL a sqlite task implies, its parameters, and whether the answer must be a
/// strict maximum (the first of two rows, its second column above the other's;
/// `Some(false)`: a strict minimum).
fn sql_of(t: &Value) -> (&'static str, Vec<String>, Option<bool>) {
    let q = quoted(t);
    let k = ticked(t);
    let first = || vec![q[0].clone()];
    match s(t, "kind") {
        "customers-in-city" => ("SELECT COUNT(*) FROM customers WHERE city = ?", first(), None),
        "orders-of-customer" => (
            "SELECT COUNT(*) FROM orders o JOIN customers c ON c.id = o.customer_id WHERE c.name = ?",
            first(),
            None,
        ),
        "priciest-in-category" => (
            "SELECT name, price FROM products WHERE category = ? ORDER BY price DESC LIMIT 2",
            first(),
            Some(true),
        ),
        "cheapest-in-category" => (
            "SELECT name, price FROM products WHERE category = ? ORDER BY price ASC LIMIT 2",
            first(),
            Some(false),
        ),
        "category-revenue" => (
            "SELECT printf('%.2f', COALESCE(SUM(i.quantity * p.price), 0)) FROM order_items i \
             JOIN products p ON p.id = i.product_id JOIN orders o ON o.id = i.order_id \
             WHERE p.category = ? AND o.status <> 'cancelled'",
            first(),
            None,
        ),
        "customer-spend" => (
            "SELECT printf('%.2f', COALESCE(SUM(i.quantity * p.price), 0)) FROM order_items i \
             JOIN products p ON p.id = i.product_id JOIN orders o ON o.id = i.order_id \
             JOIN customers c ON c.id = o.customer_id WHERE c.name = ? AND o.status <> 'cancelled'",
            first(),
            None,
        ),
        "status-count" => ("SELECT COUNT(*) FROM orders WHERE status = ?", first(), None),
        "month-orders" => (
            "SELECT COUNT(*) FROM orders WHERE substr(order_date, 1, 7) = ?",
            vec![k[0].clone()],
            None,
        ),
        "units-sold" => (
            "SELECT COALESCE(SUM(i.quantity), 0) FROM order_items i JOIN products p ON p.id = i.product_id WHERE p.name = ?",
            first(),
            None,
        ),
        "best-seller-in-category" => (
            "SELECT p.name, SUM(i.quantity) AS n FROM products p JOIN order_items i ON i.product_id = p.id \
             WHERE p.category = ? GROUP BY p.id ORDER BY n DESC LIMIT 2",
            first(),
            Some(true),
        ),
        "distinct-products" => (
            "SELECT COUNT(DISTINCT i.product_id) FROM order_items i JOIN orders o ON o.id = i.order_id \
             JOIN customers c ON c.id = o.customer_id WHERE c.name = ?",
            first(),
            None,
        ),
        "top-city" => (
            "SELECT city, COUNT(*) AS n FROM customers GROUP BY city ORDER BY n DESC LIMIT 2",
            vec![],
            Some(true),
        ),
        "average-price" => (
            "SELECT printf('%.2f', AVG(price)) FROM products WHERE category = ?",
            first(),
            None,
        ),
        "largest-order" => (
            "SELECT order_id, SUM(quantity) AS n FROM order_items GROUP BY order_id ORDER BY n DESC LIMIT 2",
            vec![],
            Some(true),
        ),
        "priciest-order" => (
            "SELECT i.order_id, SUM(i.quantity * p.price) AS v FROM order_items i \
             JOIN products p ON p.id = i.product_id GROUP BY i.order_id ORDER BY v DESC LIMIT 2",
            vec![],
            Some(true),
        ),
        "customers-without-orders" => (
            "SELECT COUNT(*) FROM customers WHERE id NOT IN (SELECT customer_id FROM orders)",
            vec![],
            None,
        ),
        other => panic!("sqlite task of unknown kind {other}: {t}"),
    }
}

/// Runs each (id, sql, params) through python3's sqlite3 on `db` (read-only): rows per id.
fn run_sql(
    db: &Path,
    queries: &[(String, &str, Vec<String>)],
) -> BTreeMap<String, Vec<Vec<Value>>> {
    const RUN: &str = "import json, sqlite3, sys\n\
        con = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True)\n\
        out = {q['id']: [list(r) for r in con.execute(q['sql'], q['params']).fetchall()] for q in json.load(sys.stdin)}\n\
        print(json.dumps(out))\n";
    let input: Vec<Value> = queries
        .iter()
        .map(|(id, sql, params)| json!({"id": id, "sql": sql, "params": params}))
        .collect();
    python(RUN, db, &serde_json::to_string(&input).expect("json"))
}

fn python<T: serde::de::DeserializeOwned>(program: &str, arg: &Path, stdin: &str) -> T {
    use std::io::Write;
    let mut child = Command::new("python3")
        .arg("-c")
        .arg(program)
        .arg(arg)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect("python3");
    assert!(
        out.status.success(),
        "python3: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("python3's JSON")
}

fn plain(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The database's dump (`iterdump`), one statement a line.
fn dump(db: &Path) -> String {
    const DUMP: &str = "import json, sqlite3, sys\n\
        con = sqlite3.connect('file:' + sys.argv[1] + '?mode=ro', uri=True)\n\
        print(json.dumps('\\n'.join(con.iterdump())))\n";
    python(DUMP, db, "")
}

// -------------------------------------------------------------------------- fs

/// Every file under `root`: relative path (with `/`) to bytes; and every folder.
fn walk(root: &Path) -> (BTreeMap<String, Vec<u8>>, BTreeSet<String>) {
    let mut files = BTreeMap::new();
    let mut dirs = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            let rel = p
                .strip_prefix(root)
                .expect("under root")
                .to_string_lossy()
                .replace('\\', "/");
            if p.is_dir() {
                dirs.insert(rel);
                stack.push(p);
            } else {
                files.insert(rel, std::fs::read(&p).expect("read"));
            }
        }
    }
    (files, dirs)
}

fn fs_answer(root: &Path, t: &Value) -> String {
    let (files, dirs) = walk(root);
    let k = ticked(t);
    let text = |p: &str| String::from_utf8(files[p].clone()).expect("utf-8");
    let one = |found: Vec<&String>| -> String {
        assert_eq!(found.len(), 1, "{t}: {found:?}");
        found[0].clone()
    };
    let answer = s(t, "answer");
    let is_path = matches!(
        s(t, "kind"),
        "find-by-name" | "find-by-content" | "largest-file" | "duplicate-of"
    );
    if is_path {
        let aliases: Vec<&str> = t["answers"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        assert_eq!(aliases, vec![format!("/workspace/{answer}")], "{t}");
    }
    match s(t, "kind") {
        "find-by-name" => one(files
            .keys()
            .filter(|p| p.rsplit('/').next() == Some(k[0].as_str()))
            .collect()),
        "find-by-content" => one(files
            .iter()
            .filter(|(_, b)| String::from_utf8_lossy(b).contains(&k[0]))
            .map(|(p, _)| p)
            .collect()),
        "read-value" => {
            let prefix = format!("{} = ", k[1]);
            let v: Vec<String> = text(&k[0])
                .lines()
                .filter_map(|l| l.strip_prefix(&prefix).map(str::to_string))
                .collect();
            assert_eq!(v.len(), 1, "{t}");
            v[0].clone()
        }
        "compare-files" => (if files[&k[0]] == files[&k[1]] {
            "yes"
        } else {
            "no"
        })
        .into(),
        "count-files" => {
            let place = k[1].trim_end_matches('/');
            files
                .keys()
                .filter(|p| p.ends_with(&k[0]))
                .filter(|p| place == "/workspace" || p.starts_with(&format!("{place}/")))
                .count()
                .to_string()
        }
        "largest-file" => {
            let folder = k[0].trim_end_matches('/');
            let inside: Vec<(&String, usize)> = files
                .iter()
                .filter(|(p, _)| p.rsplit_once('/').map(|(d, _)| d) == Some(folder))
                .map(|(p, b)| (p, b.len()))
                .collect();
            let max = inside.iter().map(|(_, n)| *n).max().expect("files");
            one(inside
                .iter()
                .filter(|(_, n)| *n == max)
                .map(|(p, _)| *p)
                .collect())
        }
        "line-count" => files[&k[0]]
            .iter()
            .filter(|b| **b == b'\n')
            .count()
            .to_string(),
        "csv-lookup" => {
            let body = text(&k[0]);
            let mut rows = body.lines().map(|l| l.split(',').collect::<Vec<_>>());
            let header = rows.next().expect("header");
            let col = header.iter().position(|h| *h == k[1]).expect("column");
            let hits: Vec<String> = rows
                .filter(|r| r[0] == k[2])
                .map(|r| r[col].to_string())
                .collect();
            assert_eq!(hits.len(), 1, "{t}");
            hits[0].clone()
        }
        "count-folders" => {
            let folder = k[0].trim_end_matches('/');
            dirs.iter()
                .filter(|d| d.rsplit_once('/').map(|(p, _)| p) == Some(folder))
                .count()
                .to_string()
        }
        "duplicate-of" => one(files
            .iter()
            .filter(|(p, b)| **p != k[0] && **b == files[&k[0]])
            .map(|(p, _)| p)
            .collect()),
        other => panic!("filesystem task of unknown kind {other}: {t}"),
    }
}

// ---------------------------------------------------------------------- memory

#[derive(Debug, Clone, Default)]
struct Graph {
    /// name -> (type, observations)
    entities: BTreeMap<String, (String, Vec<String>)>,
    /// (from, type, to)
    relations: Vec<(String, String, String)>,
}

impl Graph {
    fn read(path: &Path) -> Graph {
        let text = std::fs::read_to_string(path).expect("memory.jsonl");
        assert!(!text.ends_with('\n'), "the server writes no final newline");
        let mut g = Graph::default();
        for line in text.split('\n') {
            let v: Value = serde_json::from_str(line).expect("a JSON line");
            let keys: Vec<&str> = v
                .as_object()
                .expect("object")
                .keys()
                .map(String::as_str)
                .collect();
            match s(&v, "type") {
                "entity" => {
                    assert_eq!(keys, ["type", "name", "entityType", "observations"]);
                    assert!(g.relations.is_empty(), "an entity after a relation: {line}");
                    let obs = v["observations"]
                        .as_array()
                        .expect("observations")
                        .iter()
                        .map(|o| o.as_str().expect("text").to_string())
                        .collect();
                    let old = g
                        .entities
                        .insert(s(&v, "name").into(), (s(&v, "entityType").into(), obs));
                    assert!(old.is_none(), "{line}");
                }
                "relation" => {
                    assert_eq!(keys, ["type", "from", "to", "relationType"]);
                    g.relations.push((
                        s(&v, "from").into(),
                        s(&v, "relationType").into(),
                        s(&v, "to").into(),
                    ));
                }
                other => panic!("line of type {other}"),
            }
        }
        g
    }

    fn to(&self, from: &str, t: &str) -> Vec<String> {
        self.relations
            .iter()
            .filter(|(f, r, _)| f == from && r == t)
            .map(|(_, _, x)| x.clone())
            .collect()
    }

    fn from(&self, to: &str, t: &str) -> Vec<String> {
        self.relations
            .iter()
            .filter(|(_, r, x)| x == to && r == t)
            .map(|(f, _, _)| f.clone())
            .collect()
    }

    fn observation(&self, name: &str, prefix: &str) -> String {
        let hits: Vec<String> = self.entities[name]
            .1
            .iter()
            .filter_map(|o| o.strip_prefix(prefix).map(str::to_string))
            .collect();
        assert_eq!(hits.len(), 1, "{name} {prefix}");
        hits[0].clone()
    }
}

fn single(v: Vec<String>, t: &Value) -> String {
    assert_eq!(v.len(), 1, "{t}: {v:?}");
    v[0].clone()
}

fn memory_answer(g0: &Graph, t: &Value) -> String {
    let q = quoted(t);
    let k = ticked(t);
    let mut g = g0.clone();
    match s(t, "kind") {
        "works-at" => single(g.to(&q[0], "works_at"), t),
        "job-title" => g.observation(&q[0], "Job title: "),
        "company-city" => {
            let c = single(g.to(&q[0], "works_at"), t);
            single(g.to(&c, "located_in"), t)
        }
        "manager" => single(g.from(&q[0], "manages"), t),
        "project-lead" => single(g.from(&q[0], "leads"), t),
        "headcount" => g.from(&q[0], "works_at").len().to_string(),
        "count-type" => g
            .entities
            .values()
            .filter(|(ty, _)| *ty == k[0])
            .count()
            .to_string(),
        "founded" => g.observation(&q[0], "Founded in "),
        "reports" => g.to(&q[0], "manages").len().to_string(),
        "sponsor" => single(g.to(&q[0], "sponsored_by"), t),
        "build-works-at" => {
            assert!(!g.entities.contains_key(&q[0]), "{t}");
            assert!(g.entities.contains_key(&q[1]), "{t}");
            g.entities.insert(q[0].clone(), ("person".into(), vec![]));
            g.relations
                .push((q[0].clone(), "works_at".into(), q[1].clone()));
            g.from(&q[2], "works_at").len().to_string()
        }
        "build-observation" => {
            let e = g.entities.get_mut(&q[1]).expect("entity");
            if !e.1.contains(&q[0]) {
                e.1.push(q[0].clone());
            }
            g.entities[&q[2]].1.len().to_string()
        }
        "build-manages" => {
            let r = (q[0].clone(), "manages".to_string(), q[1].clone());
            if !g.relations.contains(&r) {
                g.relations.push(r);
            }
            g.to(&q[2], "manages").len().to_string()
        }
        "build-delete" => {
            assert!(g.entities.remove(&q[0]).is_some(), "{t}");
            g.relations.retain(|(f, _, x)| *f != q[0] && *x != q[0]);
            g.from(&q[1], "works_at").len().to_string()
        }
        other => panic!("memory task of unknown kind {other}: {t}"),
    }
}

// ----------------------------------------------------------------------- tests

#[test]
fn every_answer_is_recomputed_from_the_written_fixture() {
    if !tools() {
        return;
    }
    let tmp = Tmp::new("answers");
    let out = tmp.0.join("fixtures");
    let summary = generate(&out, 0);
    let tasks = read_tasks(&out.join("tasks.jsonl"));

    // The set: at least 150 tasks, 30 per server, ids in order, about 30% train.
    assert!(tasks.len() >= 150, "{} tasks", tasks.len());
    assert_eq!(summary.total(), tasks.len());
    let mut per: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &tasks {
        let server = s(t, "server");
        let n = per.entry(server).or_default();
        *n += 1;
        assert_eq!(s(t, "id"), format!("{server}-{n:03}"));
        assert!(matches!(s(t, "split"), "train" | "test"), "{t}");
        assert!(
            !s(t, "answer").is_empty() && !s(t, "question").is_empty(),
            "{t}"
        );
    }
    assert_eq!(
        per.keys().copied().collect::<Vec<_>>(),
        ["filesystem", "git", "memory", "sqlite"]
    );
    assert!(per.values().all(|n| *n >= 30), "{per:?}");
    let train = tasks.iter().filter(|t| s(t, "split") == "train").count() as f64;
    let share = train / tasks.len() as f64;
    assert!((0.25..=0.35).contains(&share), "train share {share}");
    let ids: BTreeSet<&str> = tasks.iter().map(|t| s(t, "id")).collect();
    let sample = read_tasks(&out.join("tasks-sample.jsonl"));
    assert_eq!(sample.len(), summary.sample);
    assert!(sample.len() >= 4 * 4);
    for t in &sample {
        assert!(tasks.contains(t), "a sample task that is not a task: {t}");
    }
    assert!(ids.len() == tasks.len());

    // git: the repository is clean, on main, with its HEAD and the release branches.
    let repo = out.join("git-repo");
    assert_eq!(git(&repo, &["status", "--porcelain"]), "");
    assert_eq!(
        git(&repo, &["rev-parse", "--abbrev-ref", "HEAD"]).trim(),
        "main"
    );
    assert_eq!(git(&repo, &["rev-parse", "HEAD"]).trim(), summary.git_head);
    let mut hashes = BTreeMap::new();
    for l in git(&repo, &["log", "--format=%H%x09%s"]).lines() {
        let (h, m) = l.split_once('\t').expect("hash and subject");
        assert!(
            hashes.insert(m.to_string(), h.to_string()).is_none(),
            "message twice: {m}"
        );
    }
    let authors: BTreeSet<String> = git(&repo, &["log", "--format=%an <%ae>"])
        .lines()
        .map(str::to_string)
        .collect();
    assert!((5..=8).contains(&authors.len()), "{authors:?}");
    assert!(
        (30..=60).contains(&hashes.len()),
        "{} commits",
        hashes.len()
    );

    // sqlite: every query in one python3.
    let mut queries = Vec::new();
    let mut shapes = BTreeMap::new();
    for t in tasks.iter().filter(|t| s(t, "server") == "sqlite") {
        let (sql, params, extreme) = sql_of(t);
        queries.push((s(t, "id").to_string(), sql, params));
        shapes.insert(s(t, "id").to_string(), extreme);
    }
    let rows = run_sql(&out.join("sqlite/db.sqlite"), &queries);
    let graph = Graph::read(&out.join("memory/memory.jsonl"));

    let mut kinds: BTreeMap<(String, String), usize> = BTreeMap::new();
    for t in &tasks {
        let id = s(t, "id");
        let got = match s(t, "server") {
            "git" => git_answer(&repo, t, &hashes),
            "sqlite" => {
                let r = &rows[id];
                match shapes[id] {
                    None => {
                        assert_eq!(r.len(), 1, "{t}: {r:?}");
                        plain(&r[0][0])
                    }
                    Some(max) => {
                        assert_eq!(r.len(), 2, "{t}: {r:?}");
                        let (a, b) = (
                            r[0][1].as_f64().expect("number"),
                            r[1][1].as_f64().expect("number"),
                        );
                        assert!(
                            if max { a > b } else { a < b },
                            "{t}: not a strict extreme: {r:?}"
                        );
                        plain(&r[0][0])
                    }
                }
            }
            "filesystem" => fs_answer(&out.join("fs"), t),
            "memory" => memory_answer(&graph, t),
            other => panic!("unknown server {other}"),
        };
        assert_eq!(got, s(t, "answer"), "{t}");
        *kinds
            .entry((s(t, "server").to_string(), s(t, "kind").to_string()))
            .or_default() += 1;
    }
    // Each server's tasks are of several kinds.
    for server in ["git", "sqlite", "filesystem", "memory"] {
        let n = kinds.keys().filter(|(s, _)| s == server).count();
        assert!(n >= 8, "{server}: {n} kinds");
    }

    // Every task has oracle calls: tools the server lists, paths as the agent sees
    // them (tests/mcp_bench.rs makes them through the real servers); a sqlite
    // oracle's query gives the answer in its first row and column.
    let listed: BTreeMap<&str, &[&str]> = BTreeMap::from([
        ("git", &["git_show", "git_log", "git_branch"][..]),
        ("sqlite", &["read_query"][..]),
        (
            "filesystem",
            &[
                "read_text_file",
                "read_multiple_files",
                "search_files",
                "list_directory",
                "list_directory_with_sizes",
            ][..],
        ),
        (
            "memory",
            &[
                "open_nodes",
                "create_entities",
                "create_relations",
                "add_observations",
                "delete_entities",
            ][..],
        ),
    ]);
    let mut oracle_sql = Vec::new();
    for t in &tasks {
        let calls = t["oracle"]
            .as_array()
            .unwrap_or_else(|| panic!("no oracle: {t}"));
        assert!(!calls.is_empty(), "{t}");
        for c in calls {
            assert!(
                listed[s(t, "server")].contains(&c["tool"].as_str().unwrap_or("")),
                "{t}"
            );
            let args = c["arguments"].to_string();
            assert!(c["arguments"].is_object(), "{t}");
            assert!(
                !args.contains(&out.display().to_string()),
                "a real path: {t}"
            );
            if s(t, "server") == "sqlite" {
                let q = c["arguments"]["query"].as_str().expect("a query");
                oracle_sql.push((s(t, "id").to_string(), q.to_string()));
            }
        }
    }
    let q: Vec<(String, &str, Vec<String>)> = oracle_sql
        .iter()
        .map(|(id, q)| (id.clone(), q.as_str(), vec![]))
        .collect();
    let rows = run_sql(&out.join("sqlite/db.sqlite"), &q);
    for t in tasks.iter().filter(|t| s(t, "server") == "sqlite") {
        assert_eq!(plain(&rows[s(t, "id")][0][0]), s(t, "answer"), "{t}");
    }
}

#[test]
fn generating_twice_gives_the_same_bytes() {
    if !tools() {
        return;
    }
    let tmp = Tmp::new("twice");
    let (a, b, c) = (tmp.0.join("a"), tmp.0.join("b"), tmp.0.join("c"));
    let sa = generate(&a, 0);
    let sb = generate(&b, 0);
    assert_eq!(sa.git_head, sb.git_head);
    assert_eq!(sa.git_head, HEAD_SEED_0, "the commit hashes changed");
    for f in ["tasks.jsonl", "tasks-sample.jsonl", "memory/memory.jsonl"] {
        assert_eq!(
            std::fs::read(a.join(f)).expect("a"),
            std::fs::read(b.join(f)).expect("b"),
            "{f}"
        );
    }
    let refs = |d: &Path| {
        git(
            &d.join("git-repo"),
            &["for-each-ref", "--format=%(objectname) %(refname)"],
        )
    };
    assert_eq!(refs(&a), refs(&b));
    assert_eq!(refs(&a).lines().count(), 3, "{}", refs(&a));
    // The index holds no file times or inodes, the reflogs no clock: the working
    // folder's bytes, whose digest is in the keys, are the same at every generation.
    for f in [".git/index", ".git/logs/HEAD", ".git/logs/refs/heads/main"] {
        assert_eq!(
            std::fs::read(a.join("git-repo").join(f)).expect("a"),
            std::fs::read(b.join("git-repo").join(f)).expect("b"),
            "{f}"
        );
    }
    assert_eq!(
        dump(&a.join("sqlite/db.sqlite")),
        dump(&b.join("sqlite/db.sqlite"))
    );
    assert_eq!(walk(&a.join("fs")), walk(&b.join("fs")));

    // Another seed, other fixtures.
    let sc = generate(&c, 1);
    assert_ne!(sa.git_head, sc.git_head);
    assert_ne!(
        std::fs::read(a.join("tasks.jsonl")).expect("a"),
        std::fs::read(c.join("tasks.jsonl")).expect("c")
    );
    assert_ne!(
        dump(&a.join("sqlite/db.sqlite")),
        dump(&c.join("sqlite/db.sqlite"))
    );

    // A previous generation is replaced; a folder with anything else is refused.
    let again = generate(&c, 0);
    assert_eq!(again.git_head, sa.git_head);
    assert_eq!(
        std::fs::read(a.join("tasks.jsonl")).expect("a"),
        std::fs::read(c.join("tasks.jsonl")).expect("c")
    );
    std::fs::write(c.join("mine.txt"), "keep").expect("write");
    let e = datasets::mcp::generate(&c, 0).expect_err("a foreign file");
    assert!(matches!(e, datasets::mcp::Error::Input(_)), "{e}");
    assert!(e.to_string().contains("mine.txt"), "{e}");
    assert!(c.join("tasks.jsonl").exists() && c.join("mine.txt").exists());
}
