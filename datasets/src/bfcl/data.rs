//! The 150 BFCL-Opaque instances (`exec_simple` 100 + `exec_multiple` 50), read straight
//! out of the pinned PyPI wheel `bfcl-eval==2026.3.23` (`../shared/spec/bfcl-opaque.md`,
//! "Data").
//!
//! The wheel is fetched with pip ([`ensure_wheel`]), verified against a pinned sha256 and
//! read with the `zip` crate ([`load_instances`]); nothing from it is vendored. Users'
//! own data in the same JSON-lines format loads through [`load_jsonl`].
//!
//! Row format (one JSON object per line):
//!
//! | file | fields |
//! |---|---|
//! | `question/BFCL_v4_exec_*.json` | `id`, `question` (`[[{"role": "user", "content": ..}]]`), `function` (docs) |
//! | `possible_answer/BFCL_v4_exec_*.json` | `id`, `ground_truth` (Python call strings), `execution_result_type` |

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// The pinned `bfcl-eval` release.
pub const WHEEL_VERSION: &str = "2026.3.23";
/// The wheel's file name as pip saves it.
pub const WHEEL_FILE: &str = "bfcl_eval-2026.3.23-py3-none-any.whl";
/// sha256 of [`WHEEL_FILE`].
pub const WHEEL_SHA256: &str = "3bb6dfa5f0c68ad403c9ec50b00db2bb3b4cc9b38ab1ff33f48fe30d853d3a0a";

/// How many function docs each instance of the pinned wheel shows, in the wheel's
/// order, per category (one digit an instance): what a plan counts before the wheel
/// is downloaded (checked against the wheel by a test).
pub const WHEEL_TOOLS: [(Category, &str); 2] = [
    (
        Category::Simple,
        "1111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111111",
    ),
    (
        Category::Multiple,
        "22422332323324224234323444433332234434243433333433",
    ),
];

const QUESTION_DIR: &str = "bfcl_eval/data/unused_datasets/question";
const ANSWER_DIR: &str = "bfcl_eval/data/unused_datasets/possible_answer";

/// The two executable categories.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// `exec_simple`: one function doc, one call.
    Simple,
    /// `exec_multiple`: 2-4 function docs (the rest are decoys), one call.
    Multiple,
}

impl Category {
    /// Both categories, in table order.
    pub const ALL: [Category; 2] = [Category::Simple, Category::Multiple];

    /// BFCL's id prefix: `exec_simple` / `exec_multiple`.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::Simple => "exec_simple",
            Category::Multiple => "exec_multiple",
        }
    }

    /// The name the authors' release uses: `executable_simple` /
    /// `executable_multiple_function`.
    pub fn reference_name(self) -> &'static str {
        match self {
            Category::Simple => "executable_simple",
            Category::Multiple => "executable_multiple_function",
        }
    }

    /// Inverse of [`Category::reference_name`].
    pub fn from_reference_name(name: &str) -> Option<Category> {
        Category::ALL
            .into_iter()
            .find(|c| c.reference_name() == name)
    }

    /// File name of this category inside `question/` and `possible_answer/`.
    pub fn file_name(self) -> String {
        format!("BFCL_v4_{}.json", self.as_str())
    }

    /// Number of instances in the pinned release.
    pub fn expected_len(self) -> usize {
        match self {
            Category::Simple => 100,
            Category::Multiple => 50,
        }
    }
}

/// One benchmark instance with its original (transparent) tool docs.
#[derive(Debug, Clone, PartialEq)]
pub struct Instance {
    /// BFCL id, e.g. `exec_simple_0`.
    pub id: String,
    /// Which category.
    pub category: Category,
    /// Position within the category (the reference configs' `test_id`).
    pub index: usize,
    /// The user's question.
    pub question: String,
    /// The original function docs, BFCL's JSON-schema dialect (`dict`, `float`, ...).
    pub functions: Vec<Value>,
    /// Ground-truth calls as Python call strings.
    pub ground_truth: Vec<String>,
    /// Per ground-truth call: `exact_match`, `real_time_match` or `structural_match`.
    pub execution_result_type: Vec<String>,
}

impl Instance {
    /// The original function names, in doc order.
    pub fn function_names(&self) -> Vec<&str> {
        self.functions
            .iter()
            .filter_map(|f| f.get("name").and_then(Value::as_str))
            .collect()
    }
}

/// Errors of this module; each names the file (and line) it is about.
#[derive(Debug, thiserror::Error)]
pub enum DataError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Downloading or verifying the wheel failed (pip could not be run or
    /// failed; the sha256 is not the pinned one).
    #[error("bfcl-eval=={WHEEL_VERSION}: {0}")]
    Fetch(#[from] wheels::WheelError),
    /// The zip archive could not be read.
    #[error("{path}: bad zip archive: {source}")]
    Zip {
        /// The wheel.
        path: PathBuf,
        /// The cause.
        source: zip::result::ZipError,
    },
    /// An expected member is not in the wheel.
    #[error("{path}: no member {entry}")]
    MissingEntry {
        /// The wheel.
        path: PathBuf,
        /// The member path.
        entry: String,
    },
    /// A row is not in the expected format.
    #[error("{file}:{line}: {message}")]
    Malformed {
        /// The file (for wheel members: `wheel!member`).
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Questions and answers do not line up.
    #[error("{file}: {message}")]
    Inconsistent {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> DataError + '_ {
    move |source| DataError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Hex sha256 of a file.
pub fn sha256_file(path: &Path) -> Result<String, DataError> {
    Ok(wheels::sha256_file(path)?)
}

fn verify_sha(path: &Path) -> Result<(), DataError> {
    Ok(wheels::check_sha256(path, WHEEL_SHA256)?)
}

/// Returns the path of the verified wheel in `cache_dir`, downloading it with
/// `python3 -m pip download --no-deps bfcl-eval==2026.3.23` first if it is absent.
///
/// The download goes to a private temporary directory inside `cache_dir` and is moved
/// into place only after its sha256 checks out, so a half-written or tampered file is
/// never left under the final name. An existing file with the wrong hash is an error
/// (it is not silently replaced).
pub fn ensure_wheel(cache_dir: &Path) -> Result<PathBuf, DataError> {
    let target = cache_dir.join(WHEEL_FILE);
    if target.is_file() {
        verify_sha(&target)?;
        return Ok(target);
    }
    let work = wheels::WorkDir::new(cache_dir, "bfcl-eval")?;
    let downloaded = wheels::download(&format!("bfcl-eval=={WHEEL_VERSION}"), work.path())?;
    verify_sha(&downloaded)?;
    fs::rename(&downloaded, &target).map_err(io_err(&target))?;
    Ok(target)
}

/// Reads the 150 instances (simple first, then multiple) out of the wheel.
pub fn load_instances(wheel: &Path) -> Result<Vec<Instance>, DataError> {
    let file = fs::File::open(wheel).map_err(io_err(wheel))?;
    let mut archive = zip::ZipArchive::new(file).map_err(|source| DataError::Zip {
        path: wheel.to_path_buf(),
        source,
    })?;
    let mut read_member = |entry: String| -> Result<(String, String), DataError> {
        let mut member = archive.by_name(&entry).map_err(|source| match source {
            zip::result::ZipError::FileNotFound => DataError::MissingEntry {
                path: wheel.to_path_buf(),
                entry: entry.clone(),
            },
            source => DataError::Zip {
                path: wheel.to_path_buf(),
                source,
            },
        })?;
        let mut text = String::new();
        let label = format!("{}!{}", wheel.display(), entry);
        member
            .read_to_string(&mut text)
            .map_err(|source| DataError::Io {
                path: PathBuf::from(&label),
                source,
            })?;
        Ok((label, text))
    };
    let mut out = Vec::new();
    for category in Category::ALL {
        let questions = read_member(format!("{QUESTION_DIR}/{}", category.file_name()))?;
        let answers = read_member(format!("{ANSWER_DIR}/{}", category.file_name()))?;
        let rows = parse_instances(&questions.0, &questions.1, Some((&answers.0, &answers.1)))?;
        if rows.len() != category.expected_len() || rows.iter().any(|r| r.category != category) {
            return Err(DataError::Inconsistent {
                file: questions.0,
                message: format!(
                    "expected {} {} instances, found {}",
                    category.expected_len(),
                    category.as_str(),
                    rows.len()
                ),
            });
        }
        out.extend(rows);
    }
    Ok(out)
}

/// Loads instances from local JSON-lines files in BFCL's format: `questions` rows carry
/// `id`, `question`, `function`; the answers come from `answers` (rows with `id`,
/// `ground_truth`, `execution_result_type`) or, when that is `None`, from the same
/// fields on the question rows themselves.
pub fn load_jsonl(questions: &Path, answers: Option<&Path>) -> Result<Vec<Instance>, DataError> {
    let q_text =
        crate::files::read_text(questions, crate::files::DATA).map_err(io_err(questions))?;
    let q_label = questions.display().to_string();
    match answers {
        Some(a) => {
            let a_text = crate::files::read_text(a, crate::files::DATA).map_err(io_err(a))?;
            let a_label = a.display().to_string();
            parse_instances(&q_label, &q_text, Some((&a_label, &a_text)))
        }
        None => parse_instances(&q_label, &q_text, None),
    }
}

struct Answer {
    ground_truth: Vec<String>,
    execution_result_type: Vec<String>,
}

/// Parses question rows (and optionally answer rows) given as text; `q_file`/`a_file`
/// label the sources in errors.
pub fn parse_instances(
    q_file: &str,
    q_text: &str,
    answers: Option<(&str, &str)>,
) -> Result<Vec<Instance>, DataError> {
    let mut answer_rows: Vec<(String, usize, Answer)> = Vec::new();
    if let Some((a_file, a_text)) = answers {
        for (line, row) in json_lines(a_file, a_text)? {
            let id = str_field(a_file, line, &row, "id")?;
            let answer = answer_fields(a_file, line, &row)?;
            answer_rows.push((id, line, answer));
        }
    }
    let mut out = Vec::new();
    for (line, row) in json_lines(q_file, q_text)? {
        let malformed = |message: String| DataError::Malformed {
            file: q_file.to_string(),
            line,
            message,
        };
        let id = str_field(q_file, line, &row, "id")?;
        let (category, index) = parse_id(&id).ok_or_else(|| {
            malformed(format!(
                "id {id:?} is not exec_simple_<n> or exec_multiple_<n>"
            ))
        })?;
        let question = question_text(&row).ok_or_else(|| {
            malformed("`question` is not [[{\"role\": \"user\", \"content\": ...}]]".into())
        })?;
        let functions = match row.get("function") {
            Some(Value::Array(fs)) if !fs.is_empty() => fs.clone(),
            _ => return Err(malformed("`function` is not a non-empty list".into())),
        };
        for f in &functions {
            if f.get("name").and_then(Value::as_str).is_none() {
                return Err(malformed("a function doc has no string `name`".into()));
            }
        }
        let answer = if answers.is_some() {
            let pos = answer_rows
                .iter()
                .position(|(aid, _, _)| *aid == id)
                .ok_or_else(|| DataError::Inconsistent {
                    file: answers.map(|a| a.0).unwrap_or(q_file).to_string(),
                    message: format!("no answer row for {id}"),
                })?;
            answer_rows.remove(pos).2
        } else {
            answer_fields(q_file, line, &row)?
        };
        out.push(Instance {
            id,
            category,
            index,
            question,
            functions,
            ground_truth: answer.ground_truth,
            execution_result_type: answer.execution_result_type,
        });
    }
    if let (Some((a_file, _)), Some((id, line, _))) = (answers, answer_rows.first()) {
        return Err(DataError::Malformed {
            file: a_file.to_string(),
            line: *line,
            message: format!("answer for {id} has no question row"),
        });
    }
    Ok(out)
}

fn json_lines(file: &str, text: &str) -> Result<Vec<(usize, Value)>, DataError> {
    let mut rows = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() {
            continue;
        }
        let value: Value = serde_json::from_str(raw).map_err(|e| DataError::Malformed {
            file: file.to_string(),
            line: i + 1,
            message: format!("invalid JSON: {e}"),
        })?;
        if !value.is_object() {
            return Err(DataError::Malformed {
                file: file.to_string(),
                line: i + 1,
                message: "row is not a JSON object".into(),
            });
        }
        rows.push((i + 1, value));
    }
    Ok(rows)
}

fn str_field(file: &str, line: usize, row: &Value, key: &str) -> Result<String, DataError> {
    row.get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| DataError::Malformed {
            file: file.to_string(),
            line,
            message: format!("missing string field `{key}`"),
        })
}

fn str_list(file: &str, line: usize, row: &Value, key: &str) -> Result<Vec<String>, DataError> {
    let bad = || DataError::Malformed {
        file: file.to_string(),
        line,
        message: format!("`{key}` is not a list of strings"),
    };
    row.get(key)
        .and_then(Value::as_array)
        .ok_or_else(bad)?
        .iter()
        .map(|v| v.as_str().map(str::to_string).ok_or_else(bad))
        .collect()
}

fn answer_fields(file: &str, line: usize, row: &Value) -> Result<Answer, DataError> {
    let ground_truth = str_list(file, line, row, "ground_truth")?;
    let execution_result_type = str_list(file, line, row, "execution_result_type")?;
    if ground_truth.is_empty() || ground_truth.len() != execution_result_type.len() {
        return Err(DataError::Malformed {
            file: file.to_string(),
            line,
            message: format!(
                "{} ground-truth calls but {} execution_result_type entries",
                ground_truth.len(),
                execution_result_type.len()
            ),
        });
    }
    Ok(Answer {
        ground_truth,
        execution_result_type,
    })
}

fn question_text(row: &Value) -> Option<String> {
    let turn = row.get("question")?.as_array()?.first()?.as_array()?;
    let message = turn
        .iter()
        .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))?;
    message.get("content")?.as_str().map(str::to_string)
}

/// Splits `exec_simple_12` into (Simple, 12).
pub fn parse_id(id: &str) -> Option<(Category, usize)> {
    Category::ALL.into_iter().find_map(|c| {
        let rest = id.strip_prefix(c.as_str())?.strip_prefix('_')?;
        if rest.is_empty() || !rest.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        Some((c, rest.parse().ok()?))
    })
}

/// The shared reference-data directory (`<repo>/../shared/data`), if present.
pub fn shared_data_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data");
    dir.is_dir().then_some(dir)
}

/// Where tests cache the wheel: `<repo>/target/bfcl-wheel`.
pub fn default_wheel_cache() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/bfcl-wheel")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The wheel's instances, downloading the wheel into `target/` on first use; `None`
    /// (with a note on stderr) when pip cannot fetch it.
    pub(crate) fn wheel_instances() -> Option<Vec<Instance>> {
        static CACHE: std::sync::OnceLock<Option<Vec<Instance>>> = std::sync::OnceLock::new();
        let cached = CACHE.get_or_init(|| match ensure_wheel(&default_wheel_cache()) {
            Ok(path) => Some(load_instances(&path).expect("pinned wheel loads")),
            Err(e) => {
                eprintln!("bfcl-eval wheel unavailable ({e})");
                None
            }
        });
        if cached.is_none() {
            testkit::skip(
                "wheels",
                "bfcl-eval wheel unavailable (pip download failed)",
            );
        }
        cached.clone()
    }

    #[test]
    fn the_known_tool_counts_are_the_wheels() {
        let Some(all) = wheel_instances() else {
            return;
        };
        for (cat, digits) in WHEEL_TOOLS {
            let counts: String = all
                .iter()
                .filter(|i| i.category == cat)
                .map(|i| char::from_digit(i.functions.len() as u32, 10).unwrap_or('?'))
                .collect();
            assert_eq!(counts, digits, "{cat:?}");
        }
    }

    const Q: &str = r#"{"id": "exec_simple_0", "question": [[{"role": "user", "content": "hi"}]], "function": [{"name": "f", "description": "d", "parameters": {"type": "dict", "properties": {}, "required": []}}]}
{"id": "exec_multiple_3", "question": [[{"role": "user", "content": "yo"}]], "function": [{"name": "g"}, {"name": "h"}]}
"#;
    const A: &str = r#"{"id": "exec_multiple_3", "ground_truth": ["g(x=1)"], "execution_result_type": ["real_time_match"]}
{"id": "exec_simple_0", "ground_truth": ["f()"], "execution_result_type": ["exact_match"]}
"#;

    #[test]
    fn parses_questions_and_answers_by_id() {
        let rows = parse_instances("q", Q, Some(("a", A))).unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0].category, Category::Simple);
        assert_eq!(rows[1].index, 3);
        assert_eq!(rows[1].question, "yo");
        assert_eq!(rows[1].ground_truth, vec!["g(x=1)"]);
        assert_eq!(rows[1].function_names(), vec!["g", "h"]);
    }

    #[test]
    fn malformed_row_names_file_and_line() {
        let bad = Q.replace(
            "\"function\": [{\"name\": \"g\"}",
            "\"function\": [{\"nome\": \"g\"}",
        );
        let err = parse_instances("q.json", &bad, Some(("a", A))).unwrap_err();
        assert!(err.to_string().starts_with("q.json:2:"), "{err}");
        let err = parse_instances("q.json", "{\"id\": ", None).unwrap_err();
        assert!(
            err.to_string().starts_with("q.json:1: invalid JSON"),
            "{err}"
        );
        let err = parse_instances("q.json", Q, None).unwrap_err();
        assert!(err.to_string().contains("ground_truth"), "{err}");
        let err = parse_instances(
            "q",
            Q,
            Some(("a.json", &A.replace("multiple_3", "multiple_4"))),
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .contains("no answer row for exec_multiple_3"),
            "{err}"
        );
    }

    #[test]
    fn ids() {
        assert_eq!(parse_id("exec_simple_12"), Some((Category::Simple, 12)));
        assert_eq!(parse_id("exec_multiple_0"), Some((Category::Multiple, 0)));
        assert_eq!(parse_id("exec_simple_"), None);
        assert_eq!(parse_id("exec_parallel_1"), None);
    }

    #[test]
    fn local_jsonl_with_inline_answers() {
        let dir = std::env::temp_dir().join(format!("otb-data-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("mine.jsonl");
        let row = r#"{"id": "exec_simple_5", "question": [[{"role": "user", "content": "q"}]], "function": [{"name": "f"}], "ground_truth": ["f(a=1)"], "execution_result_type": ["exact_match"]}"#;
        fs::write(&path, row).unwrap();
        let rows = load_jsonl(&path, None).unwrap();
        assert_eq!(rows[0].index, 5);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn sha_mismatch_names_both_hashes() {
        let dir = std::env::temp_dir().join(format!("otb-sha-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join(WHEEL_FILE), b"not a wheel").unwrap();
        let err = ensure_wheel(&dir).unwrap_err().to_string();
        assert!(err.contains(WHEEL_SHA256), "{err}");
        assert!(
            err.contains(&sha256_file(&dir.join(WHEEL_FILE)).unwrap()),
            "{err}"
        );
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn wheel_has_150_instances() {
        let Some(rows) = wheel_instances() else {
            return;
        };
        assert_eq!(rows.len(), 150);
        assert_eq!(rows[0].id, "exec_simple_0");
        assert_eq!(rows[100].id, "exec_multiple_0");
        assert!(rows.iter().all(|r| r.ground_truth.len() == 1));
        let mut names: Vec<&str> = rows.iter().flat_map(|r| r.function_names()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), 71, "spec: 71 distinct function names");
    }
}
