//! A generated git repository with a seeded history, for PyPI `mcp-server-git`, and
//! tasks on it (who changed a file last, which commit added a string, how many commits
//! touch a folder, ...), answered from the generator's own model of the history.
//!
//! The history (40 to 55 commits by 7 authors with fixed names, emails and dates, over
//! 17 files in 7 folders, plus two release branches) is written by running `git` with
//! every input of a commit's hash fixed (author, committer, dates, messages, file
//! contents) and no system or user configuration read, so the hashes are the same on
//! every machine.

use super::{choose, write_file, ymd, Draft, Error};
use crate::rng::SplitMix64;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

/// The authors: name and email.
pub const AUTHORS: [(&str, &str); 7] = [
    ("Alice Moreau", "alice.moreau@example.org"),
    ("Bruno Tanaka", "bruno.tanaka@example.org"),
    ("Chloe Okafor", "chloe.okafor@example.org"),
    ("Dmitri Volkov", "dmitri.volkov@example.org"),
    ("Elena Rossi", "elena.rossi@example.org"),
    ("Farid Haddad", "farid.haddad@example.org"),
    ("Greta Lindqvist", "greta.lindqvist@example.org"),
];

/// The repository's files.
const FILES: [&str; 17] = [
    "README.md",
    "src/app.py",
    "src/config.py",
    "src/net/client.py",
    "src/net/retry.py",
    "src/storage/cache.py",
    "src/storage/db.py",
    "docs/setup.md",
    "docs/api.md",
    "docs/faq.md",
    "tests/test_client.py",
    "tests/test_cache.py",
    "config/defaults.ini",
    "config/production.ini",
    "config/staging.ini",
    "scripts/deploy.sh",
    "scripts/backup.sh",
];

/// The folders tasks ask about.
const FOLDERS: [&str; 7] = [
    "src/",
    "src/net/",
    "src/storage/",
    "docs/",
    "tests/",
    "config/",
    "scripts/",
];

/// Settings a file may hold.
const KEYS: [&str; 12] = [
    "timeout_s",
    "max_retries",
    "pool_size",
    "cache_ttl",
    "log_level",
    "port",
    "workers",
    "batch_size",
    "backoff_ms",
    "region",
    "replicas",
    "queue_depth",
];

const VERBS: [&str; 10] = [
    "Fix", "Tidy", "Refine", "Extend", "Clarify", "Adjust", "Rework", "Harden", "Simplify",
    "Polish",
];

const TOPICS: [&str; 12] = [
    "error handling",
    "logging",
    "retry logic",
    "cache eviction",
    "startup",
    "shutdown",
    "timeouts",
    "input checks",
    "the defaults",
    "connection pooling",
    "wording",
    "test coverage",
];

const PHRASES: [&str; 8] = [
    "follow up with the platform team",
    "revisit after the load test",
    "keep in sync with the runbook",
    "reported by a customer",
    "needs a second review",
    "temporary until the next release",
    "measured on the staging cluster",
    "agreed in the weekly sync",
];

/// The release branches: name and the share of the history they stop at.
const BRANCHES: [(&str, f64); 2] = [("release-1.0", 0.4), ("release-2.0", 0.75)];

/// The first commit's day: 2024-01-08 (days since 1970-01-01).
const FIRST_DAY: i64 = 19_730;

/// One file's content in the model.
#[derive(Debug, Clone, Default)]
struct FileModel {
    /// Settings in the order they were added, with their current values.
    settings: Vec<(String, String)>,
    /// Note lines: token and phrase.
    notes: Vec<(String, String)>,
}

/// One commit in the model.
#[derive(Debug, Clone)]
pub struct Commit {
    /// Index into [`AUTHORS`].
    pub author: usize,
    /// Seconds since 1970-01-01 UTC (author and committer date, time zone +0000).
    pub time: i64,
    /// The message (one line, unique in the history).
    pub message: String,
    /// The files it changes.
    pub files: BTreeSet<String>,
    /// The tokens it adds.
    pub tokens: Vec<String>,
    /// Its hash, once written.
    pub hash: String,
}

impl Commit {
    /// Its author's name.
    pub fn author_name(&self) -> &'static str {
        AUTHORS[self.author].0
    }

    /// `YYYY-MM-DD` of its date.
    pub fn date(&self) -> String {
        ymd(self.time.div_euclid(86_400))
    }
}

/// The generated history: commits oldest first, the final files, the branches.
#[derive(Debug, Clone)]
pub struct History {
    /// Oldest first.
    pub commits: Vec<Commit>,
    files: BTreeMap<String, FileModel>,
    /// Per commit, the text of each file it changes, after it.
    snapshots: Vec<BTreeMap<String, String>>,
    /// Branch name and the index of the commit it points at.
    pub branches: Vec<(String, usize)>,
}

/// The text of a file from its model.
fn render(path: &str, f: &FileModel) -> String {
    let mut out = String::new();
    let ext = path.rsplit('.').next().unwrap_or("");
    match ext {
        "md" => out.push_str(&format!("# {path}\n\n")),
        "sh" => out.push_str("#!/bin/sh\n"),
        _ => out.push_str(&format!("# {path}\n")),
    }
    for (k, v) in &f.settings {
        match ext {
            "md" => out.push_str(&format!("- {k}: {v}\n")),
            "sh" => out.push_str(&format!("{}={v}\n", k.to_uppercase())),
            _ => out.push_str(&format!("{k} = {v}\n")),
        }
    }
    for (token, phrase) in &f.notes {
        match ext {
            "md" => out.push_str(&format!("\n{token}: {phrase}.\n")),
            _ => out.push_str(&format!("# {token}: {phrase}\n")),
        }
    }
    out
}

/// A value for setting `key`.
fn value(rng: &mut SplitMix64, key: &str) -> String {
    match key {
        "log_level" => ["debug", "info", "warning", "error"][rng.below(4)].to_string(),
        "region" => ["eu-west", "eu-north", "us-east", "ap-south"][rng.below(4)].to_string(),
        "timeout_s" | "cache_ttl" => (5 * (1 + rng.below(60))).to_string(),
        "port" => (8000 + rng.below(1000)).to_string(),
        "backoff_ms" => (50 * (1 + rng.below(40))).to_string(),
        _ => (1 + rng.below(64)).to_string(),
    }
}

/// The seeded history (no git involved).
pub fn history(seed: u64) -> History {
    let mut rng = SplitMix64::derived(seed, 0x6769_7401);
    let n = 40 + rng.below(16);
    let mut files: BTreeMap<String, FileModel> = BTreeMap::new();
    let mut snapshots = Vec::with_capacity(n);
    let mut commits: Vec<Commit> = Vec::with_capacity(n);
    let mut messages = BTreeSet::new();
    let mut tokens = BTreeSet::new();
    let mut day = FIRST_DAY;
    for i in 0..n {
        let mut uncreated: Vec<&str> = FILES
            .iter()
            .copied()
            .filter(|f| !files.contains_key(*f))
            .collect();
        // The files this commit changes, and how.
        let mut ops: Vec<(String, char)> = Vec::new();
        if i == 0 {
            for f in ["README.md", "src/app.py", "config/defaults.ini"] {
                ops.push((f.to_string(), 'c'));
            }
        } else {
            let k = 1 + usize::from(rng.below(10) < 3) + usize::from(rng.below(10) < 1);
            let must_create = uncreated.len() >= n - i;
            for j in 0..k {
                let create =
                    !uncreated.is_empty() && ((j == 0 && must_create) || rng.below(3) == 0);
                if create {
                    let f = uncreated.remove(rng.below(uncreated.len()));
                    ops.push((f.to_string(), 'c'));
                } else {
                    let existing: Vec<&String> = files
                        .keys()
                        .filter(|f| !ops.iter().any(|(o, _)| o == *f))
                        .collect();
                    if existing.is_empty() {
                        continue;
                    }
                    let f = existing[rng.below(existing.len())].clone();
                    ops.push((f, if rng.below(10) < 4 { 'n' } else { 's' }));
                }
            }
        }
        let mut added = Vec::new();
        for (path, op) in &ops {
            let f = files.entry(path.clone()).or_default();
            match op {
                'c' => {
                    let mut keys = KEYS.to_vec();
                    rng.shuffle(&mut keys);
                    for key in keys.into_iter().take(2 + rng.below(2)) {
                        let v = value(&mut rng, key);
                        f.settings.push((key.to_string(), v));
                    }
                }
                'n' => {
                    let token = loop {
                        let t = format!("TICKET-{}", 1000 + rng.below(9000));
                        if tokens.insert(t.clone()) {
                            break t;
                        }
                    };
                    added.push(token.clone());
                    f.notes
                        .push((token, PHRASES[rng.below(PHRASES.len())].to_string()));
                }
                _ => {
                    let unused: Vec<&str> = KEYS
                        .iter()
                        .copied()
                        .filter(|k| !f.settings.iter().any(|(s, _)| s.as_str() == *k))
                        .collect();
                    if !unused.is_empty() && rng.below(4) == 0 {
                        let key = unused[rng.below(unused.len())];
                        let v = value(&mut rng, key);
                        f.settings.push((key.to_string(), v));
                    } else {
                        let at = rng.below(f.settings.len());
                        let key = f.settings[at].0.clone();
                        let old = f.settings[at].1.clone();
                        let v = loop {
                            let v = value(&mut rng, &key);
                            if v != old {
                                break v;
                            }
                        };
                        f.settings[at].1 = v;
                    }
                }
            }
        }
        let message = if i == 0 {
            "Initial import".to_string()
        } else if ops[0].1 == 'c' {
            format!("Add {}", ops[0].0)
        } else {
            let base = ops[0].0.rsplit('/').next().unwrap_or(&ops[0].0).to_string();
            loop {
                let m = format!(
                    "{} {} in {base}",
                    VERBS[rng.below(VERBS.len())],
                    TOPICS[rng.below(TOPICS.len())]
                );
                if !messages.contains(&m) {
                    break m;
                }
            }
        };
        messages.insert(message.clone());
        day += 1 + rng.below(3) as i64;
        let time = day * 86_400 + (9 + rng.below(9) as i64) * 3600 + rng.below(60) as i64 * 60;
        let changed: BTreeSet<String> = ops.iter().map(|(p, _)| p.clone()).collect();
        snapshots.push(
            changed
                .iter()
                .map(|p| (p.clone(), render(p, &files[p])))
                .collect(),
        );
        commits.push(Commit {
            author: rng.below(AUTHORS.len()),
            time,
            message,
            files: changed,
            tokens: added,
            hash: String::new(),
        });
    }
    let branches = BRANCHES
        .iter()
        .map(|(name, share)| (name.to_string(), ((n as f64) * share) as usize))
        .collect();
    History {
        commits,
        files,
        snapshots,
        branches,
    }
}

/// Writes the repository of `seed` into `repo` (which must not exist) and returns the
/// tasks and the `HEAD` hash. `home` is a folder given to git as `HOME` (nothing is
/// read or written there: no user configuration is read).
pub fn generate(repo: &Path, home: &Path, seed: u64) -> Result<(Vec<Draft>, String), Error> {
    let mut h = history(seed);
    std::fs::create_dir_all(repo).map_err(|e| Error::io(repo, e))?;
    let git = Git { repo, home };
    git.run(&["init", "-q"], None)?;
    git.run(&["symbolic-ref", "HEAD", "refs/heads/main"], None)?;
    for (c, changed) in h.commits.iter_mut().zip(&h.snapshots) {
        for (path, text) in changed {
            write_file(&repo.join(path), text.as_bytes())?;
        }
        git.run(&["add", "-A"], None)?;
        git.run(&["commit", "-q", "-m", &c.message], Some(c))?;
        c.hash = git.run(&["rev-parse", "HEAD"], None)?.trim().to_string();
    }
    // As the last commit's author and time, so the branches' reflogs hold no clock.
    let last = h.commits.last();
    for (name, at) in &h.branches {
        git.run(&["branch", name, &h.commits[*at].hash], last)?;
    }
    // The index as `read-tree` writes it, without the files' times: the folder's
    // bytes (its digest is in the keys) are the same at every generation.
    git.run(&["read-tree", "HEAD"], last)?;
    let head = last.map(|c| c.hash.clone()).unwrap_or_default();
    Ok((tasks(&h, seed), head))
}

/// Runs git in one repository with a fixed environment.
struct Git<'a> {
    repo: &'a Path,
    home: &'a Path,
}

impl Git<'_> {
    /// `git args` (as commit `c`'s author and committer when given): its stdout.
    fn run(&self, args: &[&str], c: Option<&Commit>) -> Result<String, Error> {
        let mut cmd = Command::new("git");
        cmd.current_dir(self.repo)
            .args([
                "-c",
                "commit.gpgsign=false",
                "-c",
                "core.autocrlf=false",
                "-c",
                "core.fileMode=true",
                "-c",
                "gc.auto=0",
            ])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("HOME", self.home)
            .env("XDG_CONFIG_HOME", self.home.join(".no-xdg-config"))
            .env("GIT_TERMINAL_PROMPT", "0");
        for v in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_OBJECT_DIRECTORY",
            "GIT_CONFIG",
            "GIT_CONFIG_PARAMETERS",
            "GIT_CONFIG_COUNT",
            "GIT_TEMPLATE_DIR",
        ] {
            cmd.env_remove(v);
        }
        if let Some(c) = c {
            let (name, email) = AUTHORS[c.author];
            let date = format!("{} +0000", c.time);
            cmd.env("GIT_AUTHOR_NAME", name)
                .env("GIT_AUTHOR_EMAIL", email)
                .env("GIT_AUTHOR_DATE", &date)
                .env("GIT_COMMITTER_NAME", name)
                .env("GIT_COMMITTER_EMAIL", email)
                .env("GIT_COMMITTER_DATE", &date);
        }
        let out = cmd
            .output()
            .map_err(|e| Error::Tool(format!("running git (is it installed?): {e}")))?;
        if !out.status.success() {
            let err = String::from_utf8_lossy(&out.stderr);
            return Err(Error::Tool(format!(
                "git {} failed in {}: {}",
                args.join(" "),
                self.repo.display(),
                err.trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// The tasks on history `h`.
fn tasks(h: &History, seed: u64) -> Vec<Draft> {
    let mut rng = SplitMix64::derived(seed, 0x6769_7402);
    let cs = &h.commits;
    let mut out = Vec::new();
    let all: Vec<usize> = (0..cs.len()).collect();
    // The oracle's calls: `git_show` of a commit (its author, date, message and
    // diff), `git_log` of the whole history.
    let show = |i: usize| json!({"repo_path": "/workspace", "revision": cs[i].hash});
    let log = json!({"repo_path": "/workspace", "max_count": cs.len()});

    let paths: Vec<String> = h.files.keys().cloned().collect();
    for path in choose(&mut rng, &paths, 6) {
        let last = cs.iter().rev().find(|c| c.files.contains(&path));
        if let Some(c) = last {
            out.push(Draft::new(
                "last-author",
                format!("Who was the last person to change the file `{path}`? Answer with the author's name."),
                c.author_name(),
            ).call("git_show", json!({"repo_path": "/workspace", "revision": c.hash})));
        }
    }
    let tokens: Vec<(String, usize)> = cs
        .iter()
        .enumerate()
        .flat_map(|(i, c)| c.tokens.iter().map(move |t| (t.clone(), i)))
        .collect();
    for (token, i) in choose(&mut rng, &tokens, 6) {
        out.push(Draft::new(
            "introduced-by",
            format!("Which commit added the text `{token}` to the repository? Answer with the commit's message."),
            cs[i].message.clone(),
        ).call("git_show", show(i)));
    }
    for folder in choose(&mut rng, &FOLDERS, 4) {
        let n = cs
            .iter()
            .filter(|c| c.files.iter().any(|f| f.starts_with(folder)))
            .count();
        out.push(
            Draft::new(
                "folder-commits",
                format!("How many commits changed at least one file under the folder `{folder}`?"),
                n.to_string(),
            )
            .call("git_log", log.clone()),
        );
    }
    let authors: Vec<usize> = (0..AUTHORS.len())
        .filter(|a| cs.iter().any(|c| c.author == *a))
        .collect();
    for a in choose(&mut rng, &authors, 4) {
        let n = cs.iter().filter(|c| c.author == a).count();
        out.push(
            Draft::new(
                "author-commits",
                format!(
                    "How many commits has \"{}\" authored in this repository?",
                    AUTHORS[a].0
                ),
                n.to_string(),
            )
            .call("git_log", log.clone()),
        );
    }
    for i in choose(&mut rng, &all, 4) {
        out.push(
            Draft::new(
                "commit-on-date",
                format!(
                    "What is the message of the commit made on `{}`?",
                    cs[i].date()
                ),
                cs[i].message.clone(),
            )
            .call("git_show", show(i)),
        );
    }
    for i in choose(&mut rng, &all, 4) {
        out.push(
            Draft::new(
                "author-of-commit",
                format!(
                "Who authored the commit with the message \"{}\"? Answer with the author's name.",
                cs[i].message
            ),
                cs[i].author_name(),
            )
            .call("git_show", show(i)),
        );
    }
    for i in choose(&mut rng, &all, 3) {
        out.push(
            Draft::new(
                "files-in-commit",
                format!(
                    "How many files did the commit with the message \"{}\" change?",
                    cs[i].message
                ),
                cs[i].files.len().to_string(),
            )
            .call("git_show", show(i)),
        );
    }
    let settings: Vec<(String, String, String)> = h
        .files
        .iter()
        .filter(|(p, _)| p.ends_with(".py") || p.ends_with(".ini"))
        .flat_map(|(p, f)| {
            f.settings
                .iter()
                .map(move |(k, v)| (p.clone(), k.clone(), v.clone()))
        })
        .collect();
    for (path, key, v) in choose(&mut rng, &settings, 5) {
        out.push(
            Draft::new(
                "value-at-head",
                format!("In the latest commit, what is the value of `{key}` in the file `{path}`?"),
                v,
            )
            .call(
                "git_show",
                json!({"repo_path": "/workspace", "revision": format!("HEAD:{path}")}),
            ),
        );
    }
    for a in choose(&mut rng, &authors, 3) {
        if let Some(c) = cs.iter().rev().find(|c| c.author == a) {
            out.push(
                Draft::new(
                    "latest-by-author",
                    format!(
                        "What is the message of the most recent commit by \"{}\"?",
                        AUTHORS[a].0
                    ),
                    c.message.clone(),
                )
                .call(
                    "git_show",
                    json!({"repo_path": "/workspace", "revision": c.hash}),
                ),
            );
        }
    }
    out.push(
        Draft::new(
            "first-commit",
            "What is the message of the very first commit of the repository?".to_string(),
            cs[0].message.clone(),
        )
        .call("git_show", show(0)),
    );
    for i in choose(&mut rng, &all, 4) {
        let (branch, at) = &h.branches[rng.below(h.branches.len())];
        out.push(Draft::new(
            "branch-contains",
            format!(
                "Does the branch `{branch}` contain the commit with the message \"{}\"? Answer yes or no.",
                cs[i].message
            ),
            if i <= *at { "yes" } else { "no" },
        ).call("git_branch", json!({"repo_path": "/workspace", "branch_type": "local", "contains": cs[i].hash})));
    }
    for i in choose(&mut rng, &all, 2) {
        out.push(
            Draft::new(
                "author-email",
                format!(
                "What is the email address of the author of the commit with the message \"{}\"?",
                cs[i].message
            ),
                AUTHORS[cs[i].author].1,
            )
            .call("git_show", show(i)),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_history_is_seeded_and_well_formed() {
        let a = history(0);
        let b = history(0);
        assert_eq!(
            a.commits.iter().map(|c| &c.message).collect::<Vec<_>>(),
            b.commits.iter().map(|c| &c.message).collect::<Vec<_>>()
        );
        assert!((40..=55).contains(&a.commits.len()));
        // Every file exists at the end, every message and day is unique, dates rise.
        assert_eq!(a.files.len(), FILES.len());
        let msgs: BTreeSet<&String> = a.commits.iter().map(|c| &c.message).collect();
        assert_eq!(msgs.len(), a.commits.len());
        let days: BTreeSet<String> = a.commits.iter().map(Commit::date).collect();
        assert_eq!(days.len(), a.commits.len());
        assert!(a.commits.windows(2).all(|w| w[0].time < w[1].time));
        assert!(a.commits.iter().all(|c| !c.files.is_empty()));
        let c = history(1);
        assert_ne!(
            a.commits.iter().map(|c| &c.message).collect::<Vec<_>>(),
            c.commits.iter().map(|c| &c.message).collect::<Vec<_>>()
        );
        let t = tasks(&a, 0);
        assert!(t.len() >= 40, "{}", t.len());
        assert!(t
            .iter()
            .all(|d| !d.answer.is_empty() && !d.question.is_empty()));
    }

    #[test]
    fn files_render_by_kind() {
        let f = FileModel {
            settings: vec![("port".into(), "8080".into())],
            notes: vec![("TICKET-1234".into(), "later".into())],
        };
        assert_eq!(
            render("config/a.ini", &f),
            "# config/a.ini\nport = 8080\n# TICKET-1234: later\n"
        );
        assert_eq!(
            render("docs/a.md", &f),
            "# docs/a.md\n\n- port: 8080\n\nTICKET-1234: later.\n"
        );
        assert_eq!(
            render("s/x.sh", &f),
            "#!/bin/sh\nPORT=8080\n# TICKET-1234: later\n"
        );
    }
}
