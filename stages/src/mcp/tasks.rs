//! The tasks file (JSON lines, one user request each) and stage `mcp-tasks`: one
//! server's tasks split into training and test, by each task's `split` field, else
//! by a seeded fraction.
//!
//! ```json
//! {"id": "git-001", "server": "git", "question": "...", "answer": "...",
//!  "answers": ["..."], "split": "train", "judge": "rubric", "kind": "last-author"}
//! ```

use super::config::{McpExperiment, MAX_TASKS_BYTES};
use super::rows::TaskRow;
use crate::InputError;
use pipeline::{StageCtx, StageError};
use serde::Deserialize;
use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

/// The stage name.
pub const TASKS_STAGE: &str = "mcp-tasks";
/// The stage version.
pub const TASKS_VERSION: u32 = 1;

/// The longest line of a tasks file (bytes).
pub const MAX_LINE_BYTES: usize = 64 << 10;
/// The most tasks a file may hold.
pub const MAX_TASKS: usize = 100_000;

/// Mixed into the split's seed so that it does not repeat another stream.
const SPLIT_SALT: u64 = 0x6d63_705f_7370_6c69;

/// One line of a tasks file.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Task {
    /// A unique id.
    pub id: String,
    /// The server (its name in the experiment) whose tools serve it.
    pub server: String,
    /// The user's request.
    pub question: String,
    /// The expected answer.
    #[serde(default)]
    pub answer: Option<String>,
    /// Other accepted answers.
    #[serde(default)]
    pub answers: Vec<String>,
    /// `train` or `test`; absent: a seeded fraction decides.
    #[serde(default)]
    pub split: Option<String>,
    /// A rubric for an LLM judge.
    #[serde(default)]
    pub judge: Option<String>,
    /// The task's kind (for reports).
    #[serde(default)]
    pub kind: Option<String>,
}

/// Read and check a tasks file: at most [`MAX_TASKS_BYTES`], lines of at most
/// [`MAX_LINE_BYTES`], every task with a unique id, a non-empty question, a server of
/// `servers` and a valid split. A fault is one line naming the file and the line.
pub fn load(path: &Path, servers: &[&str]) -> Result<Vec<Task>, InputError> {
    let bad = |why: String| InputError(format!("mcp tasks {}: {why}", path.display()));
    let f = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
    let mut bytes = Vec::new();
    f.take(MAX_TASKS_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(e.to_string()))?;
    if bytes.len() as u64 > MAX_TASKS_BYTES {
        return Err(bad(format!("is larger than {MAX_TASKS_BYTES} bytes")));
    }
    let text = String::from_utf8(bytes).map_err(|_| bad("is not UTF-8".into()))?;
    let mut tasks = Vec::new();
    let mut ids = HashSet::new();
    for (i, line) in text.lines().enumerate() {
        let n = i + 1;
        if line.trim().is_empty() {
            continue;
        }
        if line.len() > MAX_LINE_BYTES {
            return Err(bad(format!(
                "line {n} is longer than {MAX_LINE_BYTES} bytes"
            )));
        }
        let t: Task =
            serde_json::from_str(line).map_err(|e| bad(format!("line {n} is not a task ({e})")))?;
        if t.id.trim().is_empty() {
            return Err(bad(format!("line {n}: `id` is empty")));
        }
        if !ids.insert(t.id.clone()) {
            return Err(bad(format!("line {n}: id `{}` is used twice", t.id)));
        }
        if t.question.trim().is_empty() {
            return Err(bad(format!("line {n}: `question` is empty")));
        }
        if !servers.contains(&t.server.as_str()) {
            return Err(bad(format!(
                "line {n}: server `{}` is not one of the experiment's ({})",
                t.server,
                servers.join(", ")
            )));
        }
        if let Some(s) = &t.split {
            if s != "train" && s != "test" {
                return Err(bad(format!("line {n}: split `{s}` (valid: train, test)")));
            }
        }
        tasks.push(t);
        if tasks.len() > MAX_TASKS {
            return Err(bad(format!("holds more than {MAX_TASKS} tasks")));
        }
    }
    Ok(tasks)
}

/// The tasks of `server` split into training and test: a task's `split` field
/// decides; the others are shuffled with `seed` and the first
/// `round(n * train_fraction)` go to training. Both keep the file's order.
pub fn split(tasks: &[Task], server: &str, seed: u64, train_fraction: f64) -> Vec<TaskRow> {
    let mine: Vec<&Task> = tasks.iter().filter(|t| t.server == server).collect();
    let free: Vec<usize> = (0..mine.len())
        .filter(|&i| mine[i].split.is_none())
        .collect();
    let mut order = free.clone();
    datasets::rng::SplitMix64::new(seed ^ SPLIT_SALT).shuffle(&mut order);
    let n_train = ((free.len() as f64) * train_fraction).round() as usize;
    let train: HashSet<usize> = order[..n_train.min(order.len())].iter().copied().collect();
    mine.iter()
        .enumerate()
        .map(|(i, t)| {
            let split = match t.split.as_deref() {
                Some(s) => s.to_string(),
                None if train.contains(&i) => "train".into(),
                None => "test".into(),
            };
            TaskRow {
                split,
                task_id: t.id.clone(),
                server: t.server.clone(),
                question: t.question.clone(),
                answer: t.answer.clone().unwrap_or_default(),
                answers: t.answers.clone(),
                judge: t.judge.clone(),
                kind: t.kind.clone(),
            }
        })
        .collect()
}

/// Stage `mcp-tasks[<server>]`: the server's tasks with their splits (none without a
/// tasks file).
pub(super) fn build(
    ctx: &mut StageCtx<'_>,
    m: &McpExperiment,
    server: &str,
) -> Result<(), StageError> {
    let rows = match &m.tasks {
        None => Vec::new(),
        Some(p) => {
            let names: Vec<&str> = m.servers.iter().map(|s| s.name.as_str()).collect();
            let tasks = load(p, &names).map_err(|e| StageError::user(TASKS_STAGE, e.0))?;
            split(&tasks, server, m.seed, m.train_fraction)
        }
    };
    ctx.write(&rows)?;
    Ok(())
}

/// The sha256 of a file's bytes (empty when it cannot be read: the stage then says
/// why).
pub fn file_digest(p: &Path) -> String {
    use sha2::Digest;
    match std::fs::read(p) {
        Ok(b) => hex::encode(sha2::Sha256::digest(&b)),
        Err(_) => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> (tempfile::TempDir, std::path::PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("tasks.jsonl");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    #[test]
    fn tasks_load_split_by_field_or_seeded_fraction() {
        let mut text = String::new();
        for i in 0..10 {
            text.push_str(&format!(
                "{{\"id\": \"t{i}\", \"server\": \"git\", \"question\": \"q{i}\", \"answer\": \"a\"}}\n"
            ));
        }
        text.push_str("{\"id\": \"f\", \"server\": \"git\", \"question\": \"q\", \"split\": \"train\", \"extra\": 1}\n\n");
        text.push_str("{\"id\": \"o\", \"server\": \"other\", \"question\": \"q\"}\n");
        let (_d, p) = file(&text);
        let tasks = load(&p, &["git", "other"]).unwrap();
        assert_eq!(tasks.len(), 12);
        let rows = split(&tasks, "git", 0, 0.3);
        assert_eq!(rows.len(), 11);
        let train: Vec<&str> = rows
            .iter()
            .filter(|r| r.split == "train")
            .map(|r| r.task_id.as_str())
            .collect();
        // 3 of the 10 free tasks, and the one with its own split.
        assert_eq!(train.len(), 4, "{train:?}");
        assert!(train.contains(&"f"));
        assert_eq!(split(&tasks, "git", 0, 0.3), rows, "seeded");
        assert!((1..20).any(|s| split(&tasks, "git", s, 0.3) != rows));
        assert_eq!(split(&tasks, "other", 0, 0.3).len(), 1);
    }

    #[test]
    fn a_bad_line_is_one_error_naming_it() {
        for (text, says) in [
            ("{\"id\": \"a\", \"server\": \"git\"}\n", "line 1 is not a task"),
            ("\nnot json\n", "line 2 is not a task"),
            (
                "{\"id\": \"a\", \"server\": \"git\", \"question\": \"q\"}\n{\"id\": \"a\", \"server\": \"git\", \"question\": \"q\"}\n",
                "line 2: id `a` is used twice",
            ),
            (
                "{\"id\": \"a\", \"server\": \"svn\", \"question\": \"q\"}\n",
                "server `svn`",
            ),
            (
                "{\"id\": \"a\", \"server\": \"git\", \"question\": \"q\", \"split\": \"dev\"}\n",
                "split `dev`",
            ),
            (
                "{\"id\": \"a\", \"server\": \"git\", \"question\": \" \"}\n",
                "`question` is empty",
            ),
        ] {
            let (_d, p) = file(text);
            let e = load(&p, &["git"]).unwrap_err().0;
            assert!(e.contains(says), "{text}: {e}");
            assert!(!e.contains('\n'), "{e}");
        }
        let long = format!("{}\n", "x".repeat(MAX_LINE_BYTES + 1));
        let (_d, p) = file(&long);
        assert!(load(&p, &["git"]).unwrap_err().0.contains("longer than"));
    }
}
