//! The fourth benchmark's fixtures: seeded working folders for four real MCP servers
//! and tasks whose answers are computed here, from the generator's own model of each
//! fixture (never by a model), issue #57 section 3.
//!
//! [`generate`] writes, into one folder:
//!
//! - `git-repo/`: a git repository with a seeded history ([`git`]), the working
//!   folder of PyPI `mcp-server-git` (`--repository`);
//! - `sqlite/db.sqlite`: a database of customers, products, orders and order items
//!   ([`sqlite`]), for PyPI `mcp-server-sqlite` (`--db-path`);
//! - `fs/`: a folder tree of text files ([`fs`]), the allowed folder of npm
//!   `@modelcontextprotocol/server-filesystem`;
//! - `memory/memory.jsonl`: a knowledge graph in the file format of npm
//!   `@modelcontextprotocol/server-memory` (`MEMORY_FILE_PATH`) ([`memory`]);
//! - `tasks.jsonl`: the tasks, one JSON object a line (`id`, `server`, `question`,
//!   `answer`, optional `answers` aliases, `split`, `kind`), ids `git-001`, ...;
//! - `tasks-sample.jsonl`: a seeded sample of them (a few train and test tasks per
//!   server), what an experiment sized for a small machine runs.
//!
//! Everything is a function of the seed: the same seed gives the same bytes (the
//! repository's commit hashes included) on every machine. The repository is written by
//! running `git`, and the database by running `python3` with its standard library's
//! `sqlite3` (python3 is on every machine the project supports); both must be on
//! `PATH`. `datasets/tests/mcp_fixtures.rs` recomputes every task's answer from the
//! written fixture by another route (git commands, SQL, reading the files, parsing the
//! graph).

pub mod fs;
pub mod git;
pub mod memory;
pub mod sqlite;

use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The file that marks a folder as a generation of [`generate`].
pub const MARKER: &str = ".otb-mcp-fixtures";

/// What the marker file holds (a change of the format changes it).
const MARKER_TEXT: &str = "opaquetools MCP fixtures, format 1\n";

/// The entries a generation writes (besides [`MARKER`]).
const ENTRIES: [&str; 6] = [
    "git-repo",
    "sqlite",
    "fs",
    "memory",
    "tasks.jsonl",
    "tasks-sample.jsonl",
];

/// The share of each server's tasks that is train.
pub const TRAIN_SHARE: f64 = 0.3;

/// Tasks per server in `tasks-sample.jsonl`: train, then test.
pub const SAMPLE: (usize, usize) = (2, 3);

/// Why a generation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The output folder cannot take a generation (the caller's input).
    #[error("{0}")]
    Input(String),
    /// Reading or writing a file.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A program the generation runs (`git`, `python3`) is absent or failed.
    #[error("{0}")]
    Tool(String),
}

impl Error {
    /// An I/O error on `path`.
    pub(crate) fn io(path: &Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// One task: a user request to one server with the answer the fixture implies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Task {
    /// `git-001`, `sqlite-014`, ...: the server's name and a number.
    pub id: String,
    /// The server's name in the experiment (`git`, `sqlite`, `filesystem`, `memory`).
    pub server: String,
    /// The request, as the agent reads it.
    pub question: String,
    /// The expected answer.
    pub answer: String,
    /// Other spellings of the answer that count as right.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<String>,
    /// `train` or `test`.
    pub split: String,
    /// What the task asks (`last-author`, `category-revenue`, ...), for reports.
    pub kind: String,
    /// The oracle's calls (`{"tool": <the server's tool>, "arguments": {...}}`, paths
    /// as the agent sees them, under `/workspace`): made in order on the fixture
    /// through the real server, they return text that holds the answer (normalised as
    /// `datasets::search::judge` does), or, for a count or a yes/no answer, the
    /// evidence it is read from. A task that changes the graph lists the change first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub oracle: Vec<serde_json::Value>,
}

/// A task before its id, server and split are given.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Draft {
    /// What the task asks.
    pub kind: &'static str,
    /// The request.
    pub question: String,
    /// The expected answer.
    pub answer: String,
    /// Other spellings of the answer.
    pub answers: Vec<String>,
    /// The oracle's calls (see [`Task::oracle`]).
    pub oracle: Vec<serde_json::Value>,
}

impl Draft {
    /// A draft without aliases.
    pub fn new(kind: &'static str, question: String, answer: impl Into<String>) -> Draft {
        Draft {
            kind,
            question,
            answer: answer.into(),
            answers: Vec::new(),
            oracle: Vec::new(),
        }
    }

    /// The draft with one more oracle call: `tool` (the server's name for it) with
    /// `arguments`.
    pub fn call(mut self, tool: &str, arguments: serde_json::Value) -> Draft {
        self.oracle
            .push(serde_json::json!({"tool": tool, "arguments": arguments}));
        self
    }
}

/// What [`generate`] wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// The output folder.
    pub out: PathBuf,
    /// Tasks per server name.
    pub tasks: BTreeMap<String, usize>,
    /// Train tasks in all.
    pub train: usize,
    /// Tasks in `tasks-sample.jsonl`.
    pub sample: usize,
    /// The repository's `HEAD` commit hash.
    pub git_head: String,
}

impl Summary {
    /// Tasks in all.
    pub fn total(&self) -> usize {
        self.tasks.values().sum()
    }
}

/// Writes the four fixtures and the tasks into `out` (made if absent) from `seed`.
///
/// `out` must be absent, empty, or hold a previous generation (its marker file and
/// only the entries a generation writes), which is replaced; anything else is refused
/// with [`Error::Input`] before anything is written.
pub fn generate(out: &Path, seed: u64) -> Result<Summary, Error> {
    prepare(out)?;
    let marker = out.join(MARKER);
    std::fs::write(&marker, MARKER_TEXT).map_err(|e| Error::io(&marker, e))?;

    let (git_drafts, git_head) = git::generate(&out.join("git-repo"), out, seed)?;
    let sqlite_drafts = sqlite::generate(&out.join("sqlite"), seed)?;
    let fs_drafts = fs::generate(&out.join("fs"), seed)?;
    let memory_drafts = memory::generate(&out.join("memory"), seed)?;

    let mut tasks = Vec::new();
    let mut sample = Vec::new();
    let mut per_server = BTreeMap::new();
    for (i, (server, drafts)) in [
        ("git", git_drafts),
        ("sqlite", sqlite_drafts),
        ("filesystem", fs_drafts),
        ("memory", memory_drafts),
    ]
    .into_iter()
    .enumerate()
    {
        per_server.insert(server.to_string(), drafts.len());
        let own = assign(server, drafts, seed, i as u64);
        sample.extend(pick_sample(&own, seed, i as u64));
        tasks.extend(own);
    }
    let train = tasks.iter().filter(|t| t.split == "train").count();
    write_jsonl(&out.join("tasks.jsonl"), &tasks)?;
    write_jsonl(&out.join("tasks-sample.jsonl"), &sample)?;
    Ok(Summary {
        out: out.to_path_buf(),
        tasks: per_server,
        train,
        sample: sample.len(),
        git_head,
    })
}

/// Checks `out` and clears a previous generation from it.
fn prepare(out: &Path) -> Result<(), Error> {
    match std::fs::symlink_metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return std::fs::create_dir_all(out).map_err(|e| Error::io(out, e));
        }
        Err(e) => return Err(Error::io(out, e)),
        Ok(m) if !m.is_dir() => {
            return Err(Error::Input(format!(
                "{} is not a folder; name a new or empty folder, or one a previous `otb mcp fixtures` wrote",
                out.display()
            )))
        }
        Ok(_) => {}
    }
    let mut names = Vec::new();
    for entry in std::fs::read_dir(out).map_err(|e| Error::io(out, e))? {
        let entry = entry.map_err(|e| Error::io(out, e))?;
        names.push(entry.file_name().to_string_lossy().into_owned());
    }
    if names.is_empty() {
        return Ok(());
    }
    names.sort();
    let ours = |n: &str| n == MARKER || ENTRIES.contains(&n);
    let marked = std::fs::read_to_string(out.join(MARKER)).is_ok_and(|t| t == MARKER_TEXT);
    if !marked {
        let more = match names.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        return Err(Error::Input(format!(
            "{} is not empty (it holds `{}`{more}) and holds no previous MCP fixtures; name a new or empty folder",
            out.display(),
            names[0]
        )));
    }
    if let Some(foreign) = names.iter().find(|n| !ours(n)) {
        return Err(Error::Input(format!(
            "{} holds MCP fixtures and also `{foreign}`, which a generation does not write; move it or name another folder",
            out.display()
        )));
    }
    for n in &names {
        let p = out.join(n);
        let m = std::fs::symlink_metadata(&p).map_err(|e| Error::io(&p, e))?;
        if m.is_dir() {
            std::fs::remove_dir_all(&p).map_err(|e| Error::io(&p, e))?;
        } else {
            std::fs::remove_file(&p).map_err(|e| Error::io(&p, e))?;
        }
    }
    Ok(())
}

/// Ids, server and a seeded split (a [`TRAIN_SHARE`] of the tasks, rounded) for one
/// server's drafts.
fn assign(server: &str, drafts: Vec<Draft>, seed: u64, label: u64) -> Vec<Task> {
    let n = drafts.len();
    let n_train = (n as f64 * TRAIN_SHARE).round() as usize;
    let mut order: Vec<usize> = (0..n).collect();
    SplitMix64::derived(seed, 0x5917_0000 + label).shuffle(&mut order);
    let mut train = vec![false; n];
    for &i in &order[..n_train] {
        train[i] = true;
    }
    drafts
        .into_iter()
        .enumerate()
        .map(|(i, d)| Task {
            id: format!("{server}-{:03}", i + 1),
            server: server.to_string(),
            question: d.question,
            answer: d.answer,
            answers: d.answers,
            split: if train[i] { "train" } else { "test" }.to_string(),
            kind: d.kind.to_string(),
            oracle: d.oracle,
        })
        .collect()
}

/// [`SAMPLE`]'s train and test tasks of one server, drawn by the seed, in id order.
fn pick_sample(tasks: &[Task], seed: u64, label: u64) -> Vec<Task> {
    let mut rng = SplitMix64::derived(seed, 0x5a3b_0000 + label);
    let mut chosen = Vec::new();
    for (split, k) in [("train", SAMPLE.0), ("test", SAMPLE.1)] {
        let mut of: Vec<&Task> = tasks.iter().filter(|t| t.split == split).collect();
        rng.shuffle(&mut of);
        chosen.extend(of.into_iter().take(k).cloned());
    }
    chosen.sort_by(|a, b| a.id.cmp(&b.id));
    chosen
}

/// Writes tasks as JSON lines (through a temporary file).
fn write_jsonl(path: &Path, tasks: &[Task]) -> Result<(), Error> {
    let mut text = String::new();
    for t in tasks {
        let line = serde_json::to_string(t)
            .map_err(|e| Error::io(path, std::io::Error::other(e.to_string())))?;
        text.push_str(&line);
        text.push('\n');
    }
    write_file(path, text.as_bytes())
}

/// Writes `bytes` into `path` (its folder made first) through a temporary file.
pub(crate) fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, bytes).map_err(|e| Error::io(&tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))
}

/// `k` distinct items of `items`, drawn by `rng` (all of them when fewer).
pub(crate) fn choose<T: Clone>(rng: &mut SplitMix64, items: &[T], k: usize) -> Vec<T> {
    let mut idx: Vec<usize> = (0..items.len()).collect();
    rng.shuffle(&mut idx);
    idx.into_iter().take(k).map(|i| items[i].clone()).collect()
}

/// The calendar date (year, month, day) of a day number (days since 1970-01-01).
pub(crate) fn civil(days: i64) -> (i64, u32, u32) {
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = (if mp < 10 { mp + 3 } else { mp - 9 }) as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// `YYYY-MM-DD` of a day number.
pub(crate) fn ymd(days: i64) -> String {
    let (y, m, d) = civil(days);
    format!("{y:04}-{m:02}-{d:02}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates_match_known_days() {
        assert_eq!(ymd(0), "1970-01-01");
        assert_eq!(ymd(19_730), "2024-01-08");
        assert_eq!(ymd(19_782), "2024-02-29");
        assert_eq!(ymd(19_783), "2024-03-01");
        assert_eq!(ymd(20_088), "2024-12-31");
    }

    fn drafts(n: usize) -> Vec<Draft> {
        (0..n)
            .map(|i| Draft::new("k", format!("q{i}"), i.to_string()))
            .collect()
    }

    #[test]
    fn splits_are_seeded_and_about_thirty_percent_train() {
        let a = assign("git", drafts(40), 7, 0);
        let b = assign("git", drafts(40), 7, 0);
        assert_eq!(a, b);
        assert_eq!(a.iter().filter(|t| t.split == "train").count(), 12);
        assert_eq!(a[0].id, "git-001");
        assert_eq!(a[39].id, "git-040");
        let c = assign("git", drafts(40), 8, 0);
        assert_ne!(
            a.iter().map(|t| &t.split).collect::<Vec<_>>(),
            c.iter().map(|t| &t.split).collect::<Vec<_>>()
        );
        let s = pick_sample(&a, 7, 0);
        assert_eq!(s.len(), SAMPLE.0 + SAMPLE.1);
        assert_eq!(s.iter().filter(|t| t.split == "train").count(), SAMPLE.0);
    }

    #[test]
    fn a_foreign_folder_is_refused_and_a_marked_one_cleared() {
        let dir = std::env::temp_dir().join(format!("otb-mcp-prepare-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("notes.txt"), "mine").unwrap();
        let e = prepare(&dir).unwrap_err();
        assert!(matches!(e, Error::Input(_)), "{e}");
        assert!(e.to_string().contains("not empty"), "{e}");
        assert!(dir.join("notes.txt").exists());
        std::fs::write(dir.join(MARKER), MARKER_TEXT).unwrap();
        let e = prepare(&dir).unwrap_err();
        assert!(e.to_string().contains("`notes.txt`"), "{e}");
        std::fs::remove_file(dir.join("notes.txt")).unwrap();
        std::fs::create_dir_all(dir.join("fs/a")).unwrap();
        std::fs::write(dir.join("tasks.jsonl"), "{}\n").unwrap();
        prepare(&dir).unwrap();
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let file = dir.join("f");
        std::fs::write(&file, "x").unwrap();
        let e = prepare(&file).unwrap_err();
        assert!(e.to_string().contains("is not a folder"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
