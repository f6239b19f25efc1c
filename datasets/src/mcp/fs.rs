//! A generated folder tree for npm `@modelcontextprotocol/server-filesystem`, and
//! tasks on it (find a file by name or by contents, read a value, compare two files,
//! count files, the largest file, ...), answered from the generator's own list of
//! files.
//!
//! The tree: `README.txt`; `projects/<name>/` (README.md, settings.ini, docs/);
//! `notes/` (dated meeting notes, `ideas/`); `archive/old-notes/` (exact and near
//! copies of some notes); `data/` (CSV tables); `logs/` (logs by month, an archive);
//! `config/` (INI files). Paths in tasks are relative to the tree's root, which the
//! agent sees as `/workspace` (the experiment's alias), so each path answer also
//! accepts `/workspace/<path>`.

use super::{choose, write_file, ymd, Draft, Error};
use crate::rng::SplitMix64;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The folder the agent sees as the tree's root.
pub const ALIAS: &str = "/workspace";

const PROJECTS: [&str; 8] = [
    "atlas", "borealis", "cobalt", "dune", "ember", "fjord", "granite", "harbor",
];
const PEOPLE: [&str; 10] = [
    "Amara Diallo",
    "Bastian Kohl",
    "Chiara Bianchi",
    "Declan Walsh",
    "Esme Laurent",
    "Fumiko Sato",
    "Gustavo Reyes",
    "Hanna Virtanen",
    "Idris Okoye",
    "Jana Horak",
];
const TEAMS: [&str; 5] = ["platform", "data", "mobile", "security", "support"];
const STATUSES: [&str; 4] = ["active", "paused", "planning", "done"];
const REGIONS: [&str; 4] = ["eu-west", "eu-north", "us-east", "ap-south"];
const ITEMS: [&str; 10] = [
    "widget", "gear", "bolt", "bracket", "cable", "sensor", "valve", "spring", "hinge", "panel",
];
const PLACES: [&str; 4] = ["shelf-a", "shelf-b", "cage-1", "yard"];
const BULLETS: [&str; 14] = [
    "agreed to move the release by one week",
    "the staging database needs more disk",
    "on-call rota changes next month",
    "budget review is due on Friday",
    "new laptops arrive in two weeks",
    "the vendor contract renews in June",
    "customer feedback on search is mixed",
    "two interns start on Monday",
    "the build cache saves about ten minutes",
    "we retire the old dashboard this quarter",
    "security audit found three minor issues",
    "documentation sprint planned for April",
    "latency goal is 200 ms at the 95th percentile",
    "the offsite is moved to the autumn",
];
const WORDS: [&str; 8] = [
    "ORCHID", "MAPLE", "COMET", "FALCON", "QUARTZ", "TUNDRA", "LOTUS", "EMBER",
];
const LEVELS: [&str; 3] = ["INFO", "WARN", "ERROR"];
const EVENTS: [&str; 6] = [
    "request served",
    "cache miss",
    "retrying upstream call",
    "worker started",
    "job finished",
    "slow query",
];

/// The generated tree: relative path to contents.
#[derive(Debug, Clone, Default)]
pub struct Tree {
    /// Relative path (with `/`) to the file's text.
    pub files: BTreeMap<String, String>,
    /// Settings per INI file: key to value.
    settings: BTreeMap<String, Vec<(String, String)>>,
    /// Tokens placed in exactly one file: token to path.
    tokens: Vec<(String, String)>,
    /// Pairs (note, archived copy) with the same contents.
    same: Vec<(String, String)>,
    /// Pairs (note, archived near copy) whose contents differ in one line.
    near: Vec<(String, String)>,
    /// CSV tables: path, header, rows.
    tables: Vec<(String, Vec<String>, Vec<Vec<String>>)>,
}

impl Tree {
    fn ini(&mut self, path: String, section: &str, kv: Vec<(String, String)>) {
        let mut text = format!("[{section}]\n");
        for (k, v) in &kv {
            text.push_str(&format!("{k} = {v}\n"));
        }
        self.files.insert(path.clone(), text);
        self.settings.insert(path, kv);
    }

    fn table(&mut self, path: &str, header: &[&str], rows: Vec<Vec<String>>) {
        let mut text = header.join(",");
        text.push('\n');
        for r in &rows {
            text.push_str(&r.join(","));
            text.push('\n');
        }
        self.files.insert(path.to_string(), text);
        self.tables.push((
            path.to_string(),
            header.iter().map(|h| h.to_string()).collect(),
            rows,
        ));
    }
}

fn version(rng: &mut SplitMix64) -> String {
    format!("{}.{}.{}", 1 + rng.below(4), rng.below(10), rng.below(20))
}

/// The seeded tree (nothing written).
pub fn tree(seed: u64) -> Tree {
    let mut rng = SplitMix64::derived(seed, 0x6673_0001);
    let mut t = Tree::default();
    let owner = PEOPLE[rng.below(PEOPLE.len())];
    t.files.insert(
        "README.txt".into(),
        format!("Team share. Ask {owner} before deleting anything.\nProjects live in projects/, meeting notes in notes/.\n"),
    );

    for p in choose(&mut rng, &PROJECTS, 5) {
        let lead = PEOPLE[rng.below(PEOPLE.len())];
        let status = STATUSES[rng.below(STATUSES.len())];
        t.files.insert(
            format!("projects/{p}/README.md"),
            format!("# {p}\n\nLead: {lead}\nStatus: {status}\n"),
        );
        let kv = vec![
            ("port".to_string(), (8000 + rng.below(1000)).to_string()),
            ("max_workers".to_string(), (1 + rng.below(32)).to_string()),
            ("version".to_string(), version(&mut rng)),
            (
                "region".to_string(),
                REGIONS[rng.below(REGIONS.len())].to_string(),
            ),
            ("owner".to_string(), lead.to_string()),
        ];
        t.ini(format!("projects/{p}/settings.ini"), p, kv);
        let mut overview = format!("{p} overview\n");
        let k = 2 + rng.below(3);
        for b in choose(&mut rng, &BULLETS, k) {
            overview.push_str(&format!("- {b}\n"));
        }
        t.files
            .insert(format!("projects/{p}/docs/overview-{p}.txt"), overview);
    }

    // Meeting notes on distinct days of March 2024.
    let mut days: Vec<i64> = (0..31).collect();
    rng.shuffle(&mut days);
    let mut days: Vec<i64> = days.into_iter().take(10).collect();
    days.sort_unstable();
    let mut notes = Vec::new();
    for d in days {
        let date = ymd(19_783 + d);
        let path = format!("notes/{date}.txt");
        let k = 2 + rng.below(3);
        let attendees = choose(&mut rng, &PEOPLE, k).join(", ");
        let mut text = format!("Meeting notes {date}\nAttendees: {attendees}\n");
        let k = 2 + rng.below(4);
        for b in choose(&mut rng, &BULLETS, k) {
            text.push_str(&format!("- {b}\n"));
        }
        t.files.insert(path.clone(), text);
        notes.push(path);
    }
    for topic in ["search", "onboarding", "billing"] {
        let mut text = format!("Ideas: {topic}\n");
        let k = 1 + rng.below(3);
        for b in choose(&mut rng, &BULLETS, k) {
            text.push_str(&format!("* {b}\n"));
        }
        t.files.insert(format!("notes/ideas/{topic}.txt"), text);
    }

    // Archived copies: three exact, three with one line changed, under names that do
    // not reveal which note they copy.
    let picked = choose(&mut rng, &notes, 6);
    let mut slots: Vec<usize> = (1..=6).collect();
    rng.shuffle(&mut slots);
    for (j, note) in picked.iter().enumerate() {
        let copy = format!("archive/old-notes/meeting-{:02}.txt", slots[j]);
        let text = t.files[note].clone();
        if j < 3 {
            t.files.insert(copy.clone(), text);
            t.same.push((note.clone(), copy));
        } else {
            let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
            let last = lines.len() - 1;
            let used: BTreeSet<&str> = lines.iter().map(String::as_str).collect();
            let other = BULLETS
                .iter()
                .map(|b| format!("- {b}"))
                .find(|b| !used.contains(b.as_str()))
                .unwrap_or_else(|| "- (no further items)".to_string());
            lines[last] = other;
            t.files.insert(copy.clone(), lines.join("\n") + "\n");
            t.near.push((note.clone(), copy));
        }
    }

    // Tables.
    let mut rows = Vec::new();
    for (n, item) in ITEMS.iter().enumerate() {
        for k in 1..=(1 + rng.below(3)) {
            rows.push(vec![
                format!("{item}-{:02}", n * 3 + k),
                rng.below(500).to_string(),
                PLACES[rng.below(PLACES.len())].to_string(),
            ]);
        }
    }
    t.table(
        "data/inventory.csv",
        &["item", "quantity", "location"],
        rows,
    );
    let mut rows = Vec::new();
    for person in choose(&mut rng, &PEOPLE, 8) {
        rows.push(vec![
            person.to_string(),
            TEAMS[rng.below(TEAMS.len())].to_string(),
            (2015 + rng.below(10)).to_string(),
        ]);
    }
    t.table("data/staff.csv", &["name", "team", "start_year"], rows);
    for q in ["q1", "q2"] {
        let mut rows = Vec::new();
        for m in 0..(4 + rng.below(12)) {
            rows.push(vec![
                format!("2024-{q}-{:02}", m + 1),
                REGIONS[rng.below(REGIONS.len())].to_string(),
                (100 + rng.below(99_900)).to_string(),
            ]);
        }
        t.table(
            &format!("data/sales-{q}.csv"),
            &["entry", "region", "amount"],
            rows,
        );
    }

    // Logs.
    let log = |rng: &mut SplitMix64, date: &str, lines: usize| {
        let mut text = String::new();
        for i in 0..lines {
            text.push_str(&format!(
                "{date}T{:02}:{:02}:00Z {} {}\n",
                8 + i * 10 / lines.max(1),
                rng.below(60),
                LEVELS[rng.below(LEVELS.len())],
                EVENTS[rng.below(EVENTS.len())]
            ));
        }
        text
    };
    for (path, date, least) in [
        ("logs/app.log", "2024-06-30", 5),
        ("logs/worker.log", "2024-06-30", 5),
    ] {
        let lines = least + rng.below(30);
        let text = log(&mut rng, date, lines);
        t.files.insert(path.to_string(), text);
    }
    for month in choose(&mut rng, &["01", "02", "03", "04", "05"], 3) {
        let k = 1 + rng.below(3);
        for day in choose(&mut rng, &["03", "11", "19", "27"], k) {
            let date = format!("2024-{month}-{day}");
            let lines = 3 + rng.below(20);
            let text = log(&mut rng, &date, lines);
            t.files
                .insert(format!("logs/2024/{month}/app-{date}.log"), text);
        }
    }
    let lines = 10 + rng.below(20);
    let text = log(&mut rng, "2023-12-31", lines);
    t.files.insert("logs/archive/app-2023.log".into(), text);
    t.files.insert(
        "logs/archive/readme.txt".into(),
        "Logs older than 2024, kept for one year.\n".into(),
    );

    // Configuration.
    let kv = vec![
        ("name".to_string(), "team-share".to_string()),
        (
            "log_level".to_string(),
            ["debug", "info", "warning"][rng.below(3)].to_string(),
        ),
        (
            "timeout_s".to_string(),
            (5 * (1 + rng.below(24))).to_string(),
        ),
    ];
    t.ini("config/app.ini".into(), "app", kv);
    let kv = vec![
        ("host".to_string(), format!("db-{}.internal", rng.below(10))),
        ("port".to_string(), (5400 + rng.below(100)).to_string()),
        (
            "max_connections".to_string(),
            (10 * (1 + rng.below(20))).to_string(),
        ),
    ];
    t.ini("config/db.ini".into(), "database", kv);
    let kv = vec![
        (
            "size_mb".to_string(),
            (64 * (1 + rng.below(16))).to_string(),
        ),
        ("ttl_s".to_string(), (60 * (1 + rng.below(30))).to_string()),
    ];
    t.ini("config/cache.ini".into(), "cache", kv);

    // Tokens: each appended to one text file that has no copy elsewhere.
    let copied: BTreeSet<&String> = t
        .same
        .iter()
        .chain(&t.near)
        .flat_map(|(a, b)| [a, b])
        .collect();
    let hosts: Vec<String> = t
        .files
        .keys()
        .filter(|p| {
            (p.ends_with(".txt") || p.ends_with(".md") || p.ends_with(".log"))
                && !copied.contains(p)
        })
        .cloned()
        .collect();
    let mut used = BTreeSet::new();
    for host in choose(&mut rng, &hosts, 6) {
        let token = loop {
            let tk = format!(
                "{}-{}",
                WORDS[rng.below(WORDS.len())],
                1000 + rng.below(9000)
            );
            if used.insert(tk.clone()) {
                break tk;
            }
        };
        if let Some(text) = t.files.get_mut(&host) {
            text.push_str(&format!("Reference: {token}\n"));
        }
        t.tokens.push((token, host));
    }
    t
}

/// Writes the tree of `seed` under `root` and returns the tasks.
pub fn generate(root: &Path, seed: u64) -> Result<Vec<Draft>, Error> {
    let t = tree(seed);
    std::fs::create_dir_all(root).map_err(|e| Error::io(root, e))?;
    for (path, text) in &t.files {
        write_file(&root.join(path), text.as_bytes())?;
    }
    Ok(tasks(&t, seed))
}

/// A path answer: relative, with `/workspace/<path>` as an alias.
fn path_answer(kind: &'static str, question: String, path: &str) -> Draft {
    Draft {
        kind,
        question,
        answer: path.to_string(),
        answers: vec![format!("{ALIAS}/{path}")],
        oracle: Vec::new(),
    }
}

/// The folder part of a relative path (`""` at the root).
fn parent(path: &str) -> &str {
    path.rsplit_once('/').map_or("", |(d, _)| d)
}

/// The tasks on tree `t`.
fn tasks(t: &Tree, seed: u64) -> Vec<Draft> {
    let mut rng = SplitMix64::derived(seed, 0x6673_0002);
    let mut out = Vec::new();
    let name = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    // The oracle's arguments: a path as the agent sees it.
    let at = |p: &str| json!({"path": format!("{ALIAS}/{p}")});
    let search = |p: &str| json!({"path": ALIAS, "pattern": format!("**/{}", name(p))});

    let mut by_name: BTreeMap<String, Vec<&String>> = BTreeMap::new();
    for p in t.files.keys() {
        by_name.entry(name(p)).or_default().push(p);
    }
    let unique: Vec<String> = by_name
        .iter()
        .filter(|(_, ps)| ps.len() == 1 && ps[0].contains('/'))
        .map(|(_, ps)| ps[0].clone())
        .collect();
    for p in choose(&mut rng, &unique, 6) {
        out.push(
            path_answer(
                "find-by-name",
                format!(
                    "Where is the file named `{}`? Give its path relative to {ALIAS}.",
                    name(&p)
                ),
                &p,
            )
            .call("search_files", search(&p)),
        );
    }
    for (token, host) in choose(&mut rng, &t.tokens, 6) {
        out.push(
            path_answer(
                "find-by-content",
                format!(
                    "Which file contains the text `{token}`? Give its path relative to {ALIAS}."
                ),
                &host,
            )
            .call(
                "read_multiple_files",
                json!({"paths": [format!("{ALIAS}/{host}")]}),
            ),
        );
    }
    let settings: Vec<(String, String, String)> = t
        .settings
        .iter()
        .flat_map(|(p, kv)| {
            kv.iter()
                .map(move |(k, v)| (p.clone(), k.clone(), v.clone()))
        })
        .collect();
    for (path, key, v) in choose(&mut rng, &settings, 8) {
        out.push(
            Draft::new(
                "read-value",
                format!("In the file `{path}`, what is the value of `{key}`?"),
                v,
            )
            .call("read_text_file", at(&path)),
        );
    }
    let mut pairs: Vec<(String, String, &str)> = Vec::new();
    for (a, b) in &t.same {
        pairs.push((a.clone(), b.clone(), "yes"));
    }
    for (a, b) in &t.near {
        pairs.push((a.clone(), b.clone(), "no"));
    }
    rng.shuffle(&mut pairs);
    for (a, b, same) in pairs {
        let (a, b) = if rng.below(2) == 0 { (a, b) } else { (b, a) };
        out.push(
            Draft::new(
                "compare-files",
                format!(
                "Do the files `{a}` and `{b}` have exactly the same contents? Answer yes or no."
            ),
                same,
            )
            .call(
                "read_multiple_files",
                json!({"paths": [format!("{ALIAS}/{a}"), format!("{ALIAS}/{b}")]}),
            ),
        );
    }
    let counts = [
        ("logs", ".log"),
        ("notes", ".txt"),
        ("", ".ini"),
        ("", ".csv"),
        ("projects", ".md"),
        ("archive", ".txt"),
        ("", ".txt"),
    ];
    for (folder, ext) in choose(&mut rng, &counts, 4) {
        let n = t
            .files
            .keys()
            .filter(|p| {
                p.ends_with(ext) && (folder.is_empty() || p.starts_with(&format!("{folder}/")))
            })
            .count();
        let place = if folder.is_empty() {
            ALIAS.to_string()
        } else {
            format!("{folder}/")
        };
        out.push(Draft::new(
            "count-files",
            format!("How many files with names ending in `{ext}` are there under `{place}`, counting all subfolders?"),
            n.to_string(),
        ).call("search_files", json!({
            "path": if folder.is_empty() { ALIAS.to_string() } else { format!("{ALIAS}/{folder}") },
            "pattern": format!("**/*{ext}"),
        })));
    }
    for folder in ["data", "notes", "logs", "config"] {
        let sizes: Vec<(String, usize)> = t
            .files
            .iter()
            .filter(|(p, _)| parent(p) == folder)
            .map(|(p, text)| (p.clone(), text.len()))
            .collect();
        let best = sizes.iter().map(|(_, n)| *n).max().unwrap_or(0);
        let at: Vec<&(String, usize)> = sizes.iter().filter(|(_, n)| *n == best).collect();
        if at.len() == 1 && out.iter().filter(|d| d.kind == "largest-file").count() < 3 {
            out.push(path_answer(
                "largest-file",
                format!("Which file directly inside `{folder}/` is the largest? Give its path relative to {ALIAS}."),
                &at[0].0,
            )
            .call("list_directory_with_sizes", json!({"path": format!("{ALIAS}/{folder}"), "sortBy": "size"}))
            .call("search_files", search(&at[0].0)));
        }
    }
    let lined: Vec<String> = t
        .files
        .keys()
        .filter(|p| p.starts_with("data/") || p.ends_with(".log"))
        .cloned()
        .collect();
    for p in choose(&mut rng, &lined, 3) {
        let n = t.files[&p].matches('\n').count();
        out.push(
            Draft::new(
                "line-count",
                format!("How many lines does the file `{p}` have, counting every line?"),
                n.to_string(),
            )
            .call("read_text_file", at(&p)),
        );
    }
    let mut lookups = Vec::new();
    for (path, header, rows) in &t.tables {
        for r in rows {
            for (column, v) in header.iter().zip(r).skip(1) {
                lookups.push((path.clone(), column.clone(), r[0].clone(), v.clone()));
            }
        }
    }
    for (path, column, key, v) in choose(&mut rng, &lookups, 4) {
        out.push(
            Draft::new(
                "csv-lookup",
                format!(
                "In `{path}`, what is the value in the column `{column}` of the row for `{key}`?"
            ),
                v,
            )
            .call("read_text_file", at(&path)),
        );
    }
    for folder in choose(
        &mut rng,
        &["projects", "logs", "notes", "archive", "logs/2024"],
        2,
    ) {
        let prefix = format!("{folder}/");
        let dirs: BTreeSet<&str> = t
            .files
            .keys()
            .filter_map(|p| p.strip_prefix(&prefix))
            .filter_map(|rest| rest.split_once('/').map(|(d, _)| d))
            .collect();
        out.push(
            Draft::new(
                "count-folders",
                format!("How many folders are directly inside `{folder}/`?"),
                dirs.len().to_string(),
            )
            .call("list_directory", at(folder)),
        );
    }
    for (note, copy) in choose(&mut rng, &t.same, 2) {
        let (ask, other) = if rng.below(2) == 0 {
            (note, copy)
        } else {
            (copy, note)
        };
        out.push(path_answer(
            "duplicate-of",
            format!("Which other file has exactly the same contents as `{ask}`? Give its path relative to {ALIAS}."),
            &other,
        ).call("read_multiple_files", json!({"paths": [format!("{ALIAS}/{ask}"), format!("{ALIAS}/{other}")]})));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tree_is_seeded_and_its_tokens_unique() {
        let a = tree(0);
        assert_eq!(a.files, tree(0).files);
        assert_ne!(a.files, tree(1).files);
        for (token, host) in &a.tokens {
            let holders: Vec<&String> = a
                .files
                .iter()
                .filter(|(_, text)| text.contains(token.as_str()))
                .map(|(p, _)| p)
                .collect();
            assert_eq!(holders, vec![host], "{token}");
        }
        for (x, y) in &a.same {
            assert_eq!(a.files[x], a.files[y]);
        }
        for (x, y) in &a.near {
            assert_ne!(a.files[x], a.files[y]);
        }
        let t = tasks(&a, 0);
        assert!(t.len() >= 35, "{}", t.len());
        assert_eq!(parent("a/b/c.txt"), "a/b");
        assert_eq!(parent("c.txt"), "");
    }
}
