//! Python's `json.loads` for the bodies the live REST backend receives: the values
//! CPython builds (ints of any size, `NaN`/`Infinity`, duplicate keys keeping their
//! first position and last value) and, for malformed text, the exact
//! `JSONDecodeError` texts of CPython's C scanner (3.11/3.12), e.g.
//! `Expecting value: line 1 column 1 (char 0)` for an HTML error page.
//!
//! Positions count characters (code points), as Python's do. Two deliberate
//! differences: a lone UTF-16 surrogate escape (`"\ud83d"`) becomes U+FFFD (a Rust
//! `String` cannot hold one), and nesting deeper than [`MAX_DEPTH`] raises CPython's
//! `RecursionError` text at a fixed depth rather than at the interpreter's limit.

use num_bigint::BigInt;

use super::exception::PyException;
use super::value::PyValue;

/// Deepest nesting of arrays/objects accepted (CPython stops near 1000 frames; this
/// reader at the runtime's one limit).
pub use super::MAX_DEPTH;

/// CPython's default `sys.get_int_max_str_digits()`.
const MAX_INT_DIGITS: usize = 4300;

/// `json.loads(text)`: the value, or the exception CPython raises.
pub fn loads(text: &str) -> Result<PyValue, PyException> {
    loads_at(text).map_err(|(e, _)| e)
}

/// [`loads`], with the byte offset of a decoding error (`None` for errors that have no
/// position, such as too deep nesting).
pub fn loads_at(text: &str) -> Result<PyValue, (PyException, Option<usize>)> {
    let chars: Vec<char> = text.chars().collect();
    let mut p = Parser {
        s: &chars,
        depth: 0,
    };
    let byte_at = |pos: usize| {
        Some(
            chars[..pos.min(chars.len())]
                .iter()
                .map(|c| c.len_utf8())
                .sum(),
        )
    };
    p.document().map_err(|f| match f {
        Fail::Decode(msg, pos) => (decode_error(&chars, msg, pos), byte_at(pos)),
        Fail::Stop(pos) => (decode_error(&chars, "Expecting value", pos), byte_at(pos)),
        Fail::Other(e) => (e, None),
    })
}

/// `JSONDecodeError(msg, doc, pos)`: `"<msg>: line L column C (char P)"`.
fn decode_error(doc: &[char], msg: &str, pos: usize) -> PyException {
    let before = &doc[..pos.min(doc.len())];
    let line = before.iter().filter(|&&c| c == '\n').count() + 1;
    let column = match before.iter().rposition(|&c| c == '\n') {
        Some(nl) => pos - nl,
        None => pos + 1,
    };
    PyException::new(
        "JSONDecodeError",
        format!("{msg}: line {line} column {column} (char {pos})"),
    )
}

enum Fail {
    /// A `JSONDecodeError` with its message and character position.
    Decode(&'static str, usize),
    /// The scanner's `StopIteration(pos)`: no value starts at `pos`.
    Stop(usize),
    /// Any other exception (`ValueError`, `RecursionError`).
    Other(PyException),
}

struct Parser<'a> {
    s: &'a [char],
    depth: usize,
}

fn is_ws(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\n' | '\r')
}

impl Parser<'_> {
    fn document(&mut self) -> Result<PyValue, Fail> {
        if self.s.first() == Some(&'\u{feff}') {
            return Err(Fail::Decode(
                "Unexpected UTF-8 BOM (decode using utf-8-sig)",
                0,
            ));
        }
        let start = self.skip_ws(0);
        let (value, end) = self.scan_once(start)?;
        let end = self.skip_ws(end);
        if end != self.s.len() {
            return Err(Fail::Decode("Extra data", end));
        }
        Ok(value)
    }

    fn skip_ws(&self, mut i: usize) -> usize {
        while i < self.s.len() && is_ws(self.s[i]) {
            i += 1;
        }
        i
    }

    fn at(&self, i: usize) -> Option<char> {
        self.s.get(i).copied()
    }

    /// Whether `word` is spelled out starting at `i`.
    fn literal(&self, i: usize, word: &str) -> bool {
        let n = word.chars().count();
        i + n <= self.s.len() && self.s[i..i + n].iter().copied().eq(word.chars())
    }

    fn scan_once(&mut self, idx: usize) -> Result<(PyValue, usize), Fail> {
        let Some(c) = self.at(idx) else {
            return Err(Fail::Stop(idx));
        };
        let constant = |word: &str, v: PyValue| (v, idx + word.chars().count());
        match c {
            '"' => {
                let (s, end) = self.scanstring(idx + 1)?;
                return Ok((PyValue::Str(s), end));
            }
            '{' | '[' => {
                if self.depth >= MAX_DEPTH {
                    let what = if c == '{' { "object" } else { "array" };
                    return Err(Fail::Other(PyException::new(
                        "RecursionError",
                        format!(
                            "maximum recursion depth exceeded while decoding a JSON {what} \
                             from a unicode string"
                        ),
                    )));
                }
                self.depth += 1;
                let out = if c == '{' {
                    self.object(idx + 1)
                } else {
                    self.array(idx + 1)
                };
                self.depth -= 1;
                return out;
            }
            'n' if self.literal(idx, "null") => return Ok(constant("null", PyValue::None)),
            't' if self.literal(idx, "true") => return Ok(constant("true", PyValue::Bool(true))),
            'f' if self.literal(idx, "false") => {
                return Ok(constant("false", PyValue::Bool(false)))
            }
            'N' if self.literal(idx, "NaN") => {
                return Ok(constant("NaN", PyValue::Float(f64::NAN)))
            }
            'I' if self.literal(idx, "Infinity") => {
                return Ok(constant("Infinity", PyValue::Float(f64::INFINITY)))
            }
            '-' if self.literal(idx, "-Infinity") => {
                return Ok(constant("-Infinity", PyValue::Float(f64::NEG_INFINITY)))
            }
            _ => {}
        }
        self.number(idx)
    }

    fn number(&self, start: usize) -> Result<(PyValue, usize), Fail> {
        let s = self.s;
        let n = s.len();
        let digit = |i: usize| s.get(i).is_some_and(char::is_ascii_digit);
        let mut i = start;
        if s[i] == '-' {
            i += 1;
            if i >= n {
                return Err(Fail::Stop(start));
            }
        }
        match s[i] {
            '1'..='9' => {
                i += 1;
                while digit(i) {
                    i += 1;
                }
            }
            '0' => i += 1,
            _ => return Err(Fail::Stop(start)),
        }
        let mut is_float = false;
        if i + 1 < n && s[i] == '.' && digit(i + 1) {
            is_float = true;
            i += 2;
            while digit(i) {
                i += 1;
            }
        }
        if i + 1 < n && matches!(s[i], 'e' | 'E') {
            let e_start = i;
            i += 1;
            if i + 1 < n && matches!(s[i], '-' | '+') {
                i += 1;
            }
            while digit(i) {
                i += 1;
            }
            if digit(i - 1) {
                is_float = true;
            } else {
                i = e_start;
            }
        }
        let text: String = s[start..i].iter().collect();
        let value = if is_float {
            // Rust's parser is correctly rounded like CPython's; overflow gives inf.
            PyValue::Float(text.parse::<f64>().unwrap_or(f64::NAN))
        } else {
            let digits = text.trim_start_matches('-').len();
            if digits > MAX_INT_DIGITS {
                return Err(Fail::Other(PyException::new(
                    "ValueError",
                    format!(
                        "Exceeds the limit ({MAX_INT_DIGITS} digits) for integer string \
                         conversion: value has {digits} digits; use \
                         sys.set_int_max_str_digits() to increase the limit"
                    ),
                )));
            }
            match text.parse::<BigInt>() {
                Ok(v) => PyValue::Int(v),
                Err(_) => return Err(Fail::Stop(start)),
            }
        };
        Ok((value, i))
    }

    /// The string whose opening quote is just before `end`; returns it and the index
    /// after its closing quote.
    fn scanstring(&self, mut end: usize) -> Result<(String, usize), Fail> {
        let s = self.s;
        let n = s.len();
        let begin = end - 1;
        let mut out = String::new();
        loop {
            let mut next = end;
            let mut terminator = None;
            while next < n {
                let c = s[next];
                if c == '"' || c == '\\' {
                    terminator = Some(c);
                    break;
                }
                if (c as u32) <= 0x1f {
                    return Err(Fail::Decode("Invalid control character at", next));
                }
                next += 1;
            }
            let Some(t) = terminator else {
                return Err(Fail::Decode("Unterminated string starting at", begin));
            };
            out.extend(&s[end..next]);
            next += 1;
            if t == '"' {
                return Ok((out, next));
            }
            let Some(c) = self.at(next) else {
                return Err(Fail::Decode("Unterminated string starting at", begin));
            };
            if c != 'u' {
                end = next + 1;
                out.push(match c {
                    '"' => '"',
                    '\\' => '\\',
                    '/' => '/',
                    'b' => '\u{8}',
                    'f' => '\u{c}',
                    'n' => '\n',
                    'r' => '\r',
                    't' => '\t',
                    _ => return Err(Fail::Decode("Invalid \\escape", end - 2)),
                });
                continue;
            }
            next += 1;
            end = next + 4;
            if end >= n {
                return Err(Fail::Decode("Invalid \\uXXXX escape", next - 1));
            }
            let mut code =
                hex4(&s[next..end]).ok_or(Fail::Decode("Invalid \\uXXXX escape", end - 5))?;
            if (0xd800..0xdc00).contains(&code)
                && end + 6 < n
                && s[end] == '\\'
                && s[end + 1] == 'u'
            {
                let end2 = end + 6;
                let low = hex4(&s[end + 2..end2])
                    .ok_or(Fail::Decode("Invalid \\uXXXX escape", end2 - 5))?;
                if (0xdc00..0xe000).contains(&low) {
                    code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
                    end = end2;
                }
            }
            out.push(char::from_u32(code).unwrap_or('\u{fffd}'));
        }
    }

    fn object(&mut self, idx: usize) -> Result<(PyValue, usize), Fail> {
        let mut pairs: Vec<(PyValue, PyValue)> = Vec::new();
        // key -> position in `pairs` (a repeated key keeps its first position)
        let mut index: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
        let mut i = self.skip_ws(idx);
        if self.at(i) != Some('}') {
            loop {
                if self.at(i) != Some('"') {
                    return Err(Fail::Decode(
                        "Expecting property name enclosed in double quotes",
                        i,
                    ));
                }
                let (key, next) = self.scanstring(i + 1)?;
                i = self.skip_ws(next);
                if self.at(i) != Some(':') {
                    return Err(Fail::Decode("Expecting ':' delimiter", i));
                }
                i = self.skip_ws(i + 1);
                let (value, next) = self.scan_once(i)?;
                match index.get(&key) {
                    Some(&at) => pairs[at].1 = value,
                    None => {
                        index.insert(key.clone(), pairs.len());
                        pairs.push((PyValue::Str(key), value));
                    }
                }
                i = self.skip_ws(next);
                match self.at(i) {
                    Some('}') => break,
                    Some(',') => i = self.skip_ws(i + 1),
                    _ => return Err(Fail::Decode("Expecting ',' delimiter", i)),
                }
            }
        }
        Ok((PyValue::Dict(pairs), i + 1))
    }

    fn array(&mut self, idx: usize) -> Result<(PyValue, usize), Fail> {
        let mut items = Vec::new();
        let mut i = self.skip_ws(idx);
        if self.at(i) != Some(']') {
            loop {
                let (value, next) = self.scan_once(i)?;
                items.push(value);
                i = self.skip_ws(next);
                match self.at(i) {
                    Some(']') => break,
                    Some(',') => i = self.skip_ws(i + 1),
                    _ => return Err(Fail::Decode("Expecting ',' delimiter", i)),
                }
            }
        }
        Ok((PyValue::List(items), i + 1))
    }
}

fn hex4(digits: &[char]) -> Option<u32> {
    digits
        .iter()
        .try_fold(0u32, |acc, c| Some((acc << 4) | c.to_digit(16)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(text: &str) -> String {
        loads(text)
            .unwrap_or_else(|e| panic!("{text:?}: {e}"))
            .repr()
    }

    fn err(text: &str) -> String {
        match loads(text) {
            Ok(v) => panic!("{text:?} parsed as {}", v.repr()),
            Err(e) => e.to_string(),
        }
    }

    /// Expected values: `python3 -c "import json; print(repr(json.loads(TEXT)))"`
    /// (CPython 3.11).
    #[test]
    fn values_are_those_python_builds() {
        let cases = [
            (
                " {\"a\": [1, 2.5, -0.0, 1e400, true, null]} ",
                "{'a': [1, 2.5, -0.0, inf, True, None]}",
            ),
            ("[NaN, Infinity, -Infinity]", "[nan, inf, -inf]"),
            (
                "123456789012345678901234567890",
                "123456789012345678901234567890",
            ),
            ("{\"a\":1,\"a\":2,\"b\":3}", "{'a': 2, 'b': 3}"),
            ("\"\\ud83d\\ude00 \\u00e9\\n\\/\"", "'😀 é\\n/'"),
            ("\"\\ud83d\\u0041\"", "'\u{fffd}A'"),
            ("1E2", "100.0"),
            ("[]", "[]"),
            ("{ }", "{}"),
        ];
        for (text, repr) in cases {
            assert_eq!(ok(text), repr, "{text:?}");
        }
    }

    /// Expected texts: `python3 -c "import json; json.loads(TEXT)"` (CPython 3.11).
    #[test]
    fn errors_are_cpython_texts() {
        let cases = [
            ("", "Expecting value: line 1 column 1 (char 0)"),
            ("<html>", "Expecting value: line 1 column 1 (char 0)"),
            (
                "{\"a\": 1,}",
                "Expecting property name enclosed in double quotes: line 1 column 9 (char 8)",
            ),
            ("[1, 2", "Expecting ',' delimiter: line 1 column 6 (char 5)"),
            (
                "{\"a\" 1}",
                "Expecting ':' delimiter: line 1 column 6 (char 5)",
            ),
            ("[1] x", "Extra data: line 1 column 5 (char 4)"),
            (
                "\"abc",
                "Unterminated string starting at: line 1 column 1 (char 0)",
            ),
            (
                "{\"a\":\n tru}",
                "Expecting value: line 2 column 2 (char 7)",
            ),
            (
                "\"\\u12",
                "Invalid \\uXXXX escape: line 1 column 3 (char 2)",
            ),
            (
                "\"\\u12x4\"",
                "Invalid \\uXXXX escape: line 1 column 3 (char 2)",
            ),
            (
                "\"\\ud83d\\uzzzz\"",
                "Invalid \\uXXXX escape: line 1 column 9 (char 8)",
            ),
            ("\"\\x\"", "Invalid \\escape: line 1 column 2 (char 1)"),
            (
                "\"a\u{1}\"",
                "Invalid control character at: line 1 column 3 (char 2)",
            ),
            ("[1,]", "Expecting value: line 1 column 4 (char 3)"),
            (
                "{",
                "Expecting property name enclosed in double quotes: line 1 column 2 (char 1)",
            ),
            ("[", "Expecting value: line 1 column 2 (char 1)"),
            ("-", "Expecting value: line 1 column 1 (char 0)"),
            ("1.", "Extra data: line 1 column 2 (char 1)"),
            ("1e+", "Extra data: line 1 column 2 (char 1)"),
            ("nul", "Expecting value: line 1 column 1 (char 0)"),
            (
                "\u{feff}1",
                "Unexpected UTF-8 BOM (decode using utf-8-sig): line 1 column 1 (char 0)",
            ),
            ("[\"é\", x]", "Expecting value: line 1 column 7 (char 6)"),
        ];
        for (text, message) in cases {
            assert_eq!(err(text), format!("JSONDecodeError: {message}"), "{text:?}");
        }
        assert!(err(&"1".repeat(5000)).starts_with(
            "ValueError: Exceeds the limit (4300 digits) for integer string conversion: \
             value has 5000 digits"
        ));
        let deep = "[".repeat(MAX_DEPTH + 1);
        assert!(err(&deep).starts_with("RecursionError: maximum recursion depth exceeded"));
    }
}
