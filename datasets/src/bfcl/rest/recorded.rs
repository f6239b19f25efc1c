//! The recorded backend: the paper's frozen responses, keyed by [`call_key`].

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use num_bigint::BigInt;

use super::backend::{call_key, RestBackend, RestError};
use crate::bfcl::python::exception::PyException;
use crate::bfcl::python::value::PyValue;

/// Frozen responses keyed by [`call_key`] (the paper's `recorded_api_responses.json`:
/// `{md5: {"output": ..., "error": null | "..."}}`). Answers any call whose key is
/// present, whatever the function; a miss is `None`.
#[derive(Debug, Clone)]
pub struct RecordedBackend {
    source: PathBuf,
    entries: HashMap<String, Recorded>,
}

#[derive(Debug, Clone)]
enum Recorded {
    Output(PyValue),
    Error(String),
}

impl RecordedBackend {
    /// Loads a recorded responses file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, RestError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| RestError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::from_json_str(&text, path)
    }

    /// Parses the contents of a recorded responses file; `source` names it in errors.
    pub fn from_json_str(text: &str, source: impl AsRef<Path>) -> Result<Self, RestError> {
        let path = source.as_ref().to_path_buf();
        let protected = protect_big_numbers(text);
        let json: serde_json::Value =
            serde_json::from_str(&protected).map_err(|e| RestError::Json {
                path: path.clone(),
                source: e,
            })?;
        let format = |detail: String| RestError::Format {
            path: path.clone(),
            detail,
        };
        let map = json
            .as_object()
            .ok_or_else(|| format("top level is not an object of md5 -> entry".into()))?;
        let mut entries = HashMap::with_capacity(map.len());
        for (key, entry) in map {
            let obj = entry
                .as_object()
                .ok_or_else(|| format(format!("entry {key} is not an object")))?;
            let recorded = match obj.get("error") {
                Some(serde_json::Value::Null) | None => {
                    let out = obj
                        .get("output")
                        .ok_or_else(|| format(format!("entry {key} has no \"output\"")))?;
                    Recorded::Output(restore_big_numbers(PyValue::from_json(out)))
                }
                Some(serde_json::Value::String(e)) => Recorded::Error(e.clone()),
                Some(other) => Recorded::Error(other.to_string()),
            };
            entries.insert(key.to_ascii_lowercase(), recorded);
        }
        Ok(RecordedBackend {
            source: path,
            entries,
        })
    }

    /// The file the responses came from.
    pub fn source(&self) -> &Path {
        &self.source
    }

    /// Number of recorded calls.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no call is recorded.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Whether the call has a recorded response.
    pub fn contains(&self, real_name: &str, kwargs: &[(String, PyValue)]) -> bool {
        self.entries.contains_key(&call_key(real_name, kwargs))
    }
}

/// Marks a number literal that serde_json (without `arbitrary_precision`) cannot hold.
const BIG_NUMBER_MARK: &str = "\u{0}pynumber:";

/// Python's `json.loads` reads integers of any size and overflowing floats as `inf`;
/// serde_json refuses both ("number out of range"). The recorded file holds such
/// outputs (big factorials), so before parsing, every integer literal of more than 18
/// digits and every float literal that overflows is wrapped in a marked string, which
/// [`restore_big_numbers`] turns back into an `int` / `float`.
fn protect_big_numbers(text: &str) -> std::borrow::Cow<'_, str> {
    let bytes = text.as_bytes();
    let mut out: Option<String> = None;
    let (mut i, mut copied, mut in_string, mut escaped) = (0, 0, false, false);
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            i += 1;
            continue;
        }
        if b == b'"' {
            in_string = true;
            i += 1;
            continue;
        }
        if b == b'-' || b.is_ascii_digit() {
            let start = i;
            while i < bytes.len()
                && matches!(bytes[i], b'-' | b'+' | b'.' | b'e' | b'E' | b'0'..=b'9')
            {
                i += 1;
            }
            let token = &text[start..i];
            let is_int = !token.contains(['.', 'e', 'E']);
            let digits = token.bytes().filter(u8::is_ascii_digit).count();
            let too_big = if is_int {
                digits > 18
            } else {
                token.parse::<f64>().is_ok_and(f64::is_infinite)
            };
            if too_big {
                let o = out.get_or_insert_with(|| String::with_capacity(text.len() + 64));
                o.push_str(&text[copied..start]);
                o.push_str("\"\\u0000pynumber:");
                o.push_str(token);
                o.push('"');
                copied = i;
            }
            continue;
        }
        i += 1;
    }
    match out {
        Some(mut o) => {
            o.push_str(&text[copied..]);
            std::borrow::Cow::Owned(o)
        }
        None => std::borrow::Cow::Borrowed(text),
    }
}

/// Undoes [`protect_big_numbers`] inside a converted value.
fn restore_big_numbers(v: PyValue) -> PyValue {
    match v {
        PyValue::Str(s) => match s.strip_prefix(BIG_NUMBER_MARK) {
            Some(token) => match token.parse::<BigInt>() {
                Ok(n) => PyValue::Int(n),
                Err(_) => token
                    .parse::<f64>()
                    .map_or(PyValue::Str(s.clone()), PyValue::Float),
            },
            None => PyValue::Str(s),
        },
        PyValue::List(items) => PyValue::List(items.into_iter().map(restore_big_numbers).collect()),
        PyValue::Tuple(items) => {
            PyValue::Tuple(items.into_iter().map(restore_big_numbers).collect())
        }
        PyValue::Dict(entries) => PyValue::Dict(
            entries
                .into_iter()
                .map(|(k, v)| (k, restore_big_numbers(v)))
                .collect(),
        ),
        other => other,
    }
}

/// A recorded error text `"KeyError: 'Rated'"` -> `KeyError` / `'Rated'`; text without
/// an exception class prefix becomes an `Exception`.
pub(crate) fn recorded_exception(text: &str) -> PyException {
    if let Some((kind, message)) = text.split_once(": ") {
        let is_class = kind.chars().next().is_some_and(|c| c.is_ascii_uppercase())
            && kind.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if is_class {
            return PyException::new(kind, message);
        }
    }
    PyException::new("Exception", text)
}

impl RestBackend for RecordedBackend {
    fn name(&self) -> &str {
        "recorded"
    }

    fn call(
        &self,
        real_name: &str,
        kwargs: &[(String, PyValue)],
    ) -> Option<Result<PyValue, PyException>> {
        match self.entries.get(&call_key(real_name, kwargs))? {
            Recorded::Output(v) => Some(Ok(v.clone())),
            Recorded::Error(e) => Some(Err(recorded_exception(e))),
        }
    }
}
