//! A parser for BFCL's ground-truth Python call strings (`f(a=1, b=[2, 3])`) and for
//! Python literal expressions, so that ground truths can be executed without a Python
//! interpreter and without ever evaluating arbitrary code.
//!
//! Supported: int (decimal, `0x`/`0o`/`0b`, `_` separators) / float / str literals
//! (single, double and triple quotes, `r`/`u` prefixes, adjacent-literal concatenation,
//! all of Python's escapes except `\N{...}`), `True`/`False`/`None`, lists, tuples,
//! dicts, unary `+`/`-`, and the arithmetic operators `+ - * / // % **` with Python's
//! precedence and semantics (`-3**2 == -9`, `1/6` true division, ...). Arithmetic goes
//! through [`super::value::binop`], so results are bit-identical to CPython.
//!
//! Calls may pass arguments by position and by keyword, with Python's syntax rules
//! (no positional argument after a keyword one, no repeated keyword); binding them to
//! parameters is [`super::bind`]'s job. Positions in errors are byte offsets into the
//! input.

use num_bigint::BigInt;
use num_traits::Num;
use thiserror::Error;

use super::value::{binop, unary, BinOp, PyValue, UnaryOp};

/// A parse (or literal-evaluation) failure at byte offset `pos`.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error("{message} (at byte {pos})")]
pub struct ParseError {
    /// Byte offset into the parsed text.
    pub pos: usize,
    /// What went wrong.
    pub message: String,
}

/// A parsed call: the function name (dotted names kept whole), the positional
/// arguments and the keyword arguments, each in source order.
#[derive(Debug, Clone, Default)]
pub struct PyCall {
    /// The called name as written, dots included (`math.factorial`).
    pub name: String,
    /// Positional arguments (empty once they are bound to parameter names, see
    /// [`super::exec::parse_call`]).
    pub args: Vec<PyValue>,
    /// Keyword arguments as `(name, value)`, in source order, no name twice.
    pub kwargs: Vec<(String, PyValue)>,
}

/// Parses `name(expr, ..., kw=expr, ...)` as Python's grammar does, without binding
/// anything to a signature. A positional argument after a keyword one, a repeated
/// keyword and trailing text are errors (CPython's `SyntaxError` texts).
pub fn parse_call_syntax(s: &str) -> Result<PyCall, ParseError> {
    let mut p = Parser::new(s);
    p.skip_ws();
    let start = p.pos;
    let mut name = p.ident().ok_or_else(|| p.err("expected a function name"))?;
    loop {
        p.skip_ws();
        if p.eat(".") {
            p.skip_ws();
            let part = p
                .ident()
                .ok_or_else(|| p.err("expected a name after '.'"))?;
            name.push('.');
            name.push_str(&part);
        } else {
            break;
        }
    }
    if is_keyword(&name) {
        return Err(ParseError {
            pos: start,
            message: format!("'{name}' is a keyword, not a function name"),
        });
    }
    p.skip_ws();
    if !p.eat("(") {
        return Err(p.err("expected '(' after the function name"));
    }
    let mut args: Vec<PyValue> = Vec::new();
    let mut kwargs: Vec<(String, PyValue)> = Vec::new();
    // keywords seen so far (a set: a hostile call may carry thousands)
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    loop {
        p.skip_ws();
        if p.eat(")") {
            break;
        }
        let arg_pos = p.pos;
        let kw = p.ident();
        p.skip_ws();
        let is_kw = kw.is_some() && p.peek() == Some('=') && p.peek_at(1) != Some('=');
        match kw {
            Some(k) if is_kw => {
                if is_keyword(&k) {
                    return Err(ParseError {
                        pos: arg_pos,
                        message: format!("'{k}' is a keyword and cannot name an argument"),
                    });
                }
                p.eat("=");
                if !seen.insert(k.clone()) {
                    return Err(ParseError {
                        pos: arg_pos,
                        message: format!("keyword argument repeated: {k}"),
                    });
                }
                let v = p.expr()?;
                kwargs.push((k, v));
            }
            _ => {
                if !kwargs.is_empty() {
                    return Err(ParseError {
                        pos: arg_pos,
                        message: "positional argument follows keyword argument".to_string(),
                    });
                }
                if p.peek() == Some('*') && p.pos == arg_pos {
                    return Err(p.err("argument unpacking (* and **) is not supported"));
                }
                p.pos = arg_pos;
                args.push(p.expr()?);
            }
        }
        p.skip_ws();
        if p.eat(",") {
            continue;
        }
        p.skip_ws();
        if p.eat(")") {
            break;
        }
        return Err(p.err("expected ',' or ')' in the argument list"));
    }
    p.skip_ws();
    if p.pos != p.src.len() {
        return Err(p.err("unexpected text after the call"));
    }
    Ok(PyCall { name, args, kwargs })
}

/// Parses and evaluates a literal expression (see the module docs for the grammar).
pub fn parse_expr(s: &str) -> Result<PyValue, ParseError> {
    let mut p = Parser::new(s);
    let v = p.expr_or_tuple()?;
    p.skip_ws();
    if p.pos != p.src.len() {
        return Err(p.err("unexpected text after the expression"));
    }
    Ok(v)
}

/// Parses JSON text the way Python's `json.loads` does, into a [`PyValue`] (the crate's
/// one JSON reader, [`super::json::loads`]): object key order is preserved, integers
/// stay exact (big ints included), other numbers are correctly rounded floats, and
/// `NaN` / `Infinity` / `-Infinity` are accepted. The error message is CPython's text.
///
/// Prefer this over `serde_json::Value` + [`PyValue::from_json`] when exactness
/// matters: without serde_json's `float_roundtrip` feature its float parsing can be off
/// by one ulp (`117.60000000000001` reads as `117.6`), and without `preserve_order` its
/// objects come back sorted by key.
pub fn from_json_str(s: &str) -> Result<PyValue, ParseError> {
    super::json::loads_at(s).map_err(|(e, pos)| ParseError {
        pos: pos.unwrap_or(0),
        message: e.to_string(),
    })
}

/// Python's reserved words (which cannot be names or keyword-argument names).
pub fn is_keyword(s: &str) -> bool {
    matches!(
        s,
        "False"
            | "None"
            | "True"
            | "and"
            | "as"
            | "assert"
            | "async"
            | "await"
            | "break"
            | "class"
            | "continue"
            | "def"
            | "del"
            | "elif"
            | "else"
            | "except"
            | "finally"
            | "for"
            | "from"
            | "global"
            | "if"
            | "import"
            | "in"
            | "is"
            | "lambda"
            | "nonlocal"
            | "not"
            | "or"
            | "pass"
            | "raise"
            | "return"
            | "try"
            | "while"
            | "with"
            | "yield"
    )
}

/// Whether `s` is a valid Python identifier that is not a keyword (so `f(s=...)` is
/// valid syntax). Non-ASCII letters are accepted as Python does (approximately: Rust's
/// alphanumeric classes instead of XID_Start/XID_Continue).
pub fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    match chars.next() {
        Some(c) if c == '_' || c.is_alphabetic() => {}
        _ => return false,
    }
    chars.all(|c| c == '_' || c.is_alphanumeric()) && !is_keyword(s)
}

/// Recursion limit for nested brackets / unary operators (CPython's parser has one too).
use super::MAX_DEPTH;

pub(crate) struct Parser<'a> {
    pub(crate) src: &'a str,
    pub(crate) pos: usize,
    depth: usize,
}

impl<'a> Parser<'a> {
    pub(crate) fn new(src: &'a str) -> Self {
        Parser {
            src,
            pos: 0,
            depth: 0,
        }
    }

    pub(crate) fn err(&self, message: &str) -> ParseError {
        ParseError {
            pos: self.pos,
            message: message.to_string(),
        }
    }

    pub(crate) fn rest(&self) -> &'a str {
        &self.src[self.pos..]
    }

    pub(crate) fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    pub(crate) fn peek_at(&self, n: usize) -> Option<char> {
        self.rest().chars().nth(n)
    }

    pub(crate) fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.pos += c.len_utf8();
        Some(c)
    }

    pub(crate) fn eat(&mut self, tok: &str) -> bool {
        if self.rest().starts_with(tok) {
            self.pos += tok.len();
            true
        } else {
            false
        }
    }

    pub(crate) fn skip_ws(&mut self) {
        loop {
            match self.peek() {
                Some(' ' | '\t' | '\n' | '\r' | '\x0c') => {
                    self.pos += 1;
                }
                Some('\\') if matches!(self.peek_at(1), Some('\n')) => {
                    self.pos += 2;
                }
                _ => break,
            }
        }
    }

    /// An identifier (possibly a keyword); `None` (position unchanged) if there is none.
    pub(crate) fn ident(&mut self) -> Option<String> {
        let start = self.pos;
        match self.peek() {
            Some(c) if c == '_' || c.is_alphabetic() => {
                self.bump();
            }
            _ => return None,
        }
        while let Some(c) = self.peek() {
            if c == '_' || c.is_alphanumeric() {
                self.bump();
            } else {
                break;
            }
        }
        Some(self.src[start..self.pos].to_string())
    }

    fn enter(&mut self) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(self.err("expression nested too deeply"))
        } else {
            Ok(())
        }
    }

    fn leave(&mut self) {
        self.depth = self.depth.saturating_sub(1);
    }

    fn apply(
        &self,
        op: BinOp,
        a: &PyValue,
        b: &PyValue,
        pos: usize,
    ) -> Result<PyValue, ParseError> {
        binop(op, a, b).map_err(|e| ParseError {
            pos,
            message: format!("{}: {}", e.kind, e.message),
        })
    }

    /// `expr (',' expr)* [',']` — a bare tuple when there is a comma.
    fn expr_or_tuple(&mut self) -> Result<PyValue, ParseError> {
        let first = self.expr()?;
        self.skip_ws();
        if self.peek() != Some(',') {
            return Ok(first);
        }
        let mut items = vec![first];
        while self.eat(",") {
            self.skip_ws();
            if self.peek().is_none() || matches!(self.peek(), Some(')' | ']' | '}')) {
                break;
            }
            items.push(self.expr()?);
            self.skip_ws();
        }
        Ok(PyValue::Tuple(items))
    }

    /// A single expression: `term (('+'|'-') term)*`.
    /// (Nesting is counted where it happens: brackets, unary operators, `**`.)
    pub(crate) fn expr(&mut self) -> Result<PyValue, ParseError> {
        let mut acc = self.term()?;
        loop {
            self.skip_ws();
            let pos = self.pos;
            let op = if self.eat("+") {
                BinOp::Add
            } else if self.peek() == Some('-') && self.peek_at(1) != Some('>') {
                self.bump();
                BinOp::Sub
            } else {
                break;
            };
            let rhs = self.term()?;
            acc = self.apply(op, &acc, &rhs, pos)?;
        }
        Ok(acc)
    }

    fn term(&mut self) -> Result<PyValue, ParseError> {
        let mut acc = self.factor()?;
        loop {
            self.skip_ws();
            let pos = self.pos;
            let op = if self.rest().starts_with("**") {
                break;
            } else if self.eat("//") {
                BinOp::FloorDiv
            } else if self.eat("*") {
                BinOp::Mul
            } else if self.eat("/") {
                BinOp::Div
            } else if self.eat("%") {
                BinOp::Mod
            } else {
                break;
            };
            let rhs = self.factor()?;
            acc = self.apply(op, &acc, &rhs, pos)?;
        }
        Ok(acc)
    }

    fn factor(&mut self) -> Result<PyValue, ParseError> {
        self.skip_ws();
        let pos = self.pos;
        let op = if self.eat("-") {
            Some(UnaryOp::Neg)
        } else if self.eat("+") {
            Some(UnaryOp::Pos)
        } else {
            None
        };
        match op {
            Some(op) => {
                self.enter()?;
                let v = self.factor()?;
                self.leave();
                unary(op, &v).map_err(|e| ParseError {
                    pos,
                    message: format!("{}: {}", e.kind, e.message),
                })
            }
            None => self.power(),
        }
    }

    fn power(&mut self) -> Result<PyValue, ParseError> {
        let base = self.atom()?;
        self.skip_ws();
        let pos = self.pos;
        if self.eat("**") {
            self.enter()?;
            let exp = self.factor()?;
            self.leave();
            return self.apply(BinOp::Pow, &base, &exp, pos);
        }
        Ok(base)
    }

    fn atom(&mut self) -> Result<PyValue, ParseError> {
        self.skip_ws();
        let start = self.pos;
        let c = match self.peek() {
            Some(c) => c,
            None => return Err(self.err("unexpected end of input")),
        };
        match c {
            '(' => {
                self.bump();
                self.enter()?;
                self.skip_ws();
                if self.eat(")") {
                    self.leave();
                    return Ok(PyValue::Tuple(Vec::new()));
                }
                let v = self.expr_or_tuple()?;
                self.skip_ws();
                if !self.eat(")") {
                    return Err(self.err("expected ')'"));
                }
                self.leave();
                Ok(v)
            }
            '[' => {
                self.bump();
                self.enter()?;
                let items = self.seq_items(']')?;
                self.leave();
                Ok(PyValue::List(items))
            }
            '{' => {
                self.bump();
                self.enter()?;
                let d = self.dict_items()?;
                self.leave();
                Ok(d)
            }
            '0'..='9' => self.number(),
            '.' if matches!(self.peek_at(1), Some('0'..='9')) => self.number(),
            '\'' | '"' => self.strings(),
            c if c == '_' || c.is_alphabetic() => {
                // string prefix?
                let save = self.pos;
                let word = self.ident().unwrap_or_default();
                if matches!(self.peek(), Some('\'' | '"')) {
                    let lower = word.to_ascii_lowercase();
                    if lower == "r" || lower == "u" {
                        self.pos = save;
                        return self.strings();
                    }
                    if ["b", "br", "rb", "f", "fr", "rf"].contains(&lower.as_str()) {
                        return Err(ParseError {
                            pos: start,
                            message: format!("unsupported string prefix '{word}'"),
                        });
                    }
                }
                match word.as_str() {
                    "True" => Ok(PyValue::Bool(true)),
                    "False" => Ok(PyValue::Bool(false)),
                    "None" => Ok(PyValue::None),
                    _ => Err(ParseError {
                        pos: start,
                        message: format!("name '{word}' is not a literal"),
                    }),
                }
            }
            _ => Err(self.err(&format!("unexpected character {c:?}"))),
        }
    }

    fn seq_items(&mut self, close: char) -> Result<Vec<PyValue>, ParseError> {
        let mut items = Vec::new();
        loop {
            self.skip_ws();
            if self.peek() == Some(close) {
                self.bump();
                return Ok(items);
            }
            items.push(self.expr()?);
            self.skip_ws();
            if self.eat(",") {
                continue;
            }
            if self.peek() == Some(close) {
                self.bump();
                return Ok(items);
            }
            return Err(self.err(&format!("expected ',' or '{close}'")));
        }
    }

    fn dict_items(&mut self) -> Result<PyValue, ParseError> {
        let mut entries: Vec<(PyValue, PyValue)> = Vec::new();
        loop {
            self.skip_ws();
            if self.eat("}") {
                return Ok(PyValue::Dict(entries));
            }
            let kpos = self.pos;
            let k = self.expr()?;
            if matches!(k, PyValue::List(_) | PyValue::Dict(_)) {
                return Err(ParseError {
                    pos: kpos,
                    message: format!("TypeError: unhashable type: '{}'", k.type_name()),
                });
            }
            self.skip_ws();
            if !self.eat(":") {
                return Err(self.err("expected ':' in a dict literal (sets are not supported)"));
            }
            let v = self.expr()?;
            match entries.iter_mut().find(|(k2, _)| k2.py_eq(&k)) {
                Some(slot) => slot.1 = v,
                None => entries.push((k, v)),
            }
            self.skip_ws();
            if self.eat(",") {
                continue;
            }
            if self.eat("}") {
                return Ok(PyValue::Dict(entries));
            }
            return Err(self.err("expected ',' or '}'"));
        }
    }

    pub(crate) fn number(&mut self) -> Result<PyValue, ParseError> {
        let start = self.pos;
        let rest = self.rest();
        let lower2: String = rest
            .chars()
            .take(2)
            .collect::<String>()
            .to_ascii_lowercase();
        let radix = match lower2.as_str() {
            "0x" => 16,
            "0o" => 8,
            "0b" => 2,
            _ => 10,
        };
        if radix != 10 {
            self.pos += 2;
            let dstart = self.pos;
            while let Some(c) = self.peek() {
                if c.is_ascii_alphanumeric() || c == '_' {
                    self.bump();
                } else {
                    break;
                }
            }
            let digits = &self.src[dstart..self.pos];
            let clean = clean_underscores(digits).ok_or_else(|| ParseError {
                pos: start,
                message: "invalid number literal".to_string(),
            })?;
            return BigInt::from_str_radix(&clean, radix)
                .map(PyValue::Int)
                .map_err(|_| ParseError {
                    pos: start,
                    message: "invalid number literal".to_string(),
                });
        }
        let mut is_float = false;
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() || c == '_' {
                self.bump();
            } else {
                break;
            }
        }
        if self.peek() == Some('.') {
            is_float = true;
            self.bump();
            while let Some(c) = self.peek() {
                if c.is_ascii_digit() || c == '_' {
                    self.bump();
                } else {
                    break;
                }
            }
        }
        if matches!(self.peek(), Some('e' | 'E')) {
            let save = self.pos;
            self.bump();
            if matches!(self.peek(), Some('+' | '-')) {
                self.bump();
            }
            if matches!(self.peek(), Some('0'..='9')) {
                is_float = true;
                while let Some(c) = self.peek() {
                    if c.is_ascii_digit() || c == '_' {
                        self.bump();
                    } else {
                        break;
                    }
                }
            } else {
                self.pos = save;
            }
        }
        let bad = |msg: &str| ParseError {
            pos: start,
            message: msg.to_string(),
        };
        if let Some(c) = self.peek() {
            if c == 'j' || c == 'J' {
                return Err(bad("complex literals are not supported"));
            }
            if c.is_alphanumeric() || c == '_' {
                return Err(bad("invalid decimal literal"));
            }
        }
        let text = &self.src[start..self.pos];
        let clean = clean_underscores(text).ok_or_else(|| bad("invalid decimal literal"))?;
        if is_float {
            clean
                .parse::<f64>()
                .map(PyValue::Float)
                .map_err(|_| bad("invalid float literal"))
        } else {
            if clean.len() > 1 && clean.starts_with('0') && clean.bytes().any(|b| b != b'0') {
                return Err(bad(
                    "leading zeros in decimal integer literals are not permitted",
                ));
            }
            clean
                .parse::<BigInt>()
                .map(PyValue::Int)
                .map_err(|_| bad("invalid decimal literal"))
        }
    }

    /// One or more adjacent string literals, concatenated.
    pub(crate) fn strings(&mut self) -> Result<PyValue, ParseError> {
        let mut out = String::new();
        loop {
            self.string_literal(&mut out)?;
            let save = self.pos;
            self.skip_ws();
            let save2 = self.pos;
            let next_is_str = match self.peek() {
                Some('\'' | '"') => true,
                Some('r' | 'R' | 'u' | 'U') => matches!(self.peek_at(1), Some('\'' | '"')),
                _ => false,
            };
            if !next_is_str {
                self.pos = save;
                return Ok(PyValue::Str(out));
            }
            self.pos = save2;
        }
    }

    fn string_literal(&mut self, out: &mut String) -> Result<(), ParseError> {
        let start = self.pos;
        let mut raw = false;
        while let Some(c) = self.peek() {
            match c {
                'r' | 'R' => {
                    raw = true;
                    self.bump();
                }
                'u' | 'U' => {
                    self.bump();
                }
                _ => break,
            }
        }
        let q = match self.peek() {
            Some(q @ ('\'' | '"')) => q,
            _ => return Err(self.err("expected a string literal")),
        };
        let triple: String = std::iter::repeat_n(q, 3).collect();
        let is_triple = self.rest().starts_with(&triple);
        if is_triple {
            self.pos += 3;
        } else {
            self.pos += 1;
        }
        loop {
            if is_triple {
                if self.eat(&triple) {
                    return Ok(());
                }
            } else if self.peek() == Some(q) {
                self.bump();
                return Ok(());
            }
            let c = match self.bump() {
                Some(c) => c,
                None => {
                    return Err(ParseError {
                        pos: start,
                        message: "unterminated string literal".to_string(),
                    })
                }
            };
            if c == '\n' && !is_triple {
                return Err(ParseError {
                    pos: start,
                    message: "unterminated string literal".to_string(),
                });
            }
            if c != '\\' {
                out.push(c);
                continue;
            }
            let e = match self.bump() {
                Some(e) => e,
                None => {
                    return Err(ParseError {
                        pos: start,
                        message: "unterminated string literal".to_string(),
                    })
                }
            };
            if raw {
                out.push('\\');
                out.push(e);
                continue;
            }
            match e {
                '\n' => {}
                '\\' => out.push('\\'),
                '\'' => out.push('\''),
                '"' => out.push('"'),
                'a' => out.push('\x07'),
                'b' => out.push('\x08'),
                'f' => out.push('\x0c'),
                'n' => out.push('\n'),
                'r' => out.push('\r'),
                't' => out.push('\t'),
                'v' => out.push('\x0b'),
                '0'..='7' => {
                    let mut n = e.to_digit(8).unwrap_or(0);
                    for _ in 0..2 {
                        match self.peek().and_then(|c| c.to_digit(8)) {
                            Some(d) => {
                                n = n * 8 + d;
                                self.bump();
                            }
                            None => break,
                        }
                    }
                    out.push(char::from_u32(n).unwrap_or('\u{fffd}'));
                }
                'x' | 'u' | 'U' => {
                    let len = match e {
                        'x' => 2,
                        'u' => 4,
                        _ => 8,
                    };
                    let epos = self.pos;
                    let mut n: u32 = 0;
                    for _ in 0..len {
                        match self.peek().and_then(|c| c.to_digit(16)) {
                            Some(d) => {
                                n = n.wrapping_mul(16).wrapping_add(d);
                                self.bump();
                            }
                            None => {
                                return Err(ParseError {
                                    pos: epos,
                                    message: format!("truncated \\{e} escape"),
                                })
                            }
                        }
                    }
                    match char::from_u32(n) {
                        Some(ch) => out.push(ch),
                        None => {
                            return Err(ParseError {
                                pos: epos,
                                message: format!("illegal Unicode character \\{e}{n:x}"),
                            })
                        }
                    }
                }
                'N' => {
                    return Err(self.err("\\N{...} escapes are not supported"));
                }
                other => {
                    out.push('\\');
                    out.push(other);
                }
            }
        }
    }
}

/// Removes `_` digit separators, which Python allows only between digits.
fn clean_underscores(s: &str) -> Option<String> {
    if s.starts_with('_') || s.ends_with('_') || s.contains("__") {
        return None;
    }
    let bytes: Vec<char> = s.chars().collect();
    for (i, c) in bytes.iter().enumerate() {
        if *c == '_' {
            let prev = bytes.get(i.wrapping_sub(1)).copied().unwrap_or(' ');
            let next = bytes.get(i + 1).copied().unwrap_or(' ');
            if !prev.is_ascii_alphanumeric() || !next.is_ascii_alphanumeric() {
                return None;
            }
        }
    }
    Some(s.replace('_', ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn e(s: &str) -> String {
        match parse_expr(s) {
            Ok(v) => v.repr(),
            Err(err) => format!("ERR {}", err.message),
        }
    }

    #[test]
    fn literals_and_arithmetic() {
        assert_eq!(e("1/6"), "0.16666666666666666"); // repr(1/6)
        assert_eq!(e("2**10"), "1024"); // repr(2**10)
        assert_eq!(e("-3**2"), "-9"); // repr(-3**2)
        assert_eq!(e("2**-1"), "0.5"); // repr(2**-1)
        assert_eq!(e("2**3**2"), "512"); // repr(2**3**2)
        assert_eq!(e("(-3)**2"), "9");
        assert_eq!(e("-2**-2"), "-0.25"); // repr(-2**-2)
        assert_eq!(e("7//2*3"), "9"); // repr(7//2*3)
        assert_eq!(e("1 + 2 * 3 - 4 / 2"), "5.0"); // repr(1 + 2 * 3 - 4 / 2)
        assert_eq!(e("10 % 4 ** 2 - -1"), "11"); // repr(10 % 4 ** 2 - -1)
        assert_eq!(e("0.1+0.2"), "0.30000000000000004");
        assert_eq!(e("1e16"), "1e+16");
        assert_eq!(e("1_000_000"), "1000000");
        assert_eq!(e("0x1F + 0o17 + 0b101"), "51"); // repr(0x1F + 0o17 + 0b101)
        assert_eq!(e("90.00"), "90.0");
        assert_eq!(e(".5"), "0.5");
        assert_eq!(e("5."), "5.0");
        assert_eq!(e("1E-5"), "1e-05");
        assert_eq!(e("True + True"), "2");
        assert_eq!(e("None"), "None");
        assert_eq!(
            e("[1, 2.0, 'a', (3,), {'k': [True]}]"),
            "[1, 2.0, 'a', (3,), {'k': [True]}]"
        );
        assert_eq!(e("(45.76, 4.85)"), "(45.76, 4.85)");
        assert_eq!(e("()"), "()");
        assert_eq!(e("(1)"), "1");
        assert_eq!(e("1, 2"), "(1, 2)");
        assert_eq!(e("[1,]"), "[1]");
        assert_eq!(e("{'a': 1, 'a': 2, 'b': 3}"), "{'a': 2, 'b': 3}"); // later value wins
        assert_eq!(e("{1: 'x', 1.0: 'y'}"), "{1: 'y'}"); // repr({1:'x', 1.0:'y'})
        assert_eq!(e("1/0"), "ERR ZeroDivisionError: division by zero");
        assert_eq!(
            e("012"),
            "ERR leading zeros in decimal integer literals are not permitted"
        );
        assert_eq!(e("00"), "0");
        assert_eq!(e("1j"), "ERR complex literals are not supported");
        assert_eq!(e("4x"), "ERR invalid decimal literal");
        assert_eq!(e("x"), "ERR name 'x' is not a literal");
        assert_eq!(e("[1, 2"), "ERR expected ',' or ']'");
        assert_eq!(e("{[1]: 2}"), "ERR TypeError: unhashable type: 'list'");
        assert_eq!(e("1 2"), "ERR unexpected text after the expression");
        assert!(e(&"(".repeat(10_000)).starts_with("ERR"));
        assert!(e(&"-".repeat(10_000)).starts_with("ERR"));
    }

    #[test]
    fn strings() {
        assert_eq!(e(r#""lit""#), "'lit'");
        assert_eq!(e(r#"'it\'s'"#), "\"it's\""); // repr('it\'s')
        assert_eq!(
            e(r#"'a\nb\t\x41\u00e9\U0001F600\101\\'"#),
            "'a\\nb\\tAé\u{1F600}A\\\\'"
        );
        assert_eq!(e(r#"r'a\nb'"#), "'a\\\\nb'"); // repr(r'a\nb')
        assert_eq!(e(r#"'a' "b" 'c'"#), "'abc'");
        assert_eq!(e(r#"'''x'y"z'''"#), "'x\\'y\"z'"); // repr('''x'y"z''')
        assert_eq!(e(r#"'\q'"#), "'\\\\q'"); // repr('\q') -> '\\q'
        assert_eq!(e("'abc"), "ERR unterminated string literal");
        assert_eq!(e("b'x'"), "ERR unsupported string prefix 'b'");
        assert_eq!(e("'ab' * 2"), "'abab'");
    }

    #[test]
    fn calls() {
        let c = parse_call_syntax("calc_binomial_probability(n=20, k=5, p=1/6)").unwrap();
        assert_eq!(c.name, "calc_binomial_probability");
        let got: Vec<String> = c.kwargs.iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(got, ["n=20", "k=5", "p=0.16666666666666666"]);
        let c = parse_call_syntax("add_binary_numbers(a='0011',b='1100')").unwrap();
        assert_eq!(c.kwargs.len(), 2);
        let c = parse_call_syntax("f()").unwrap();
        assert!(c.kwargs.is_empty());
        let c = parse_call_syntax(" math.f( x = [1, 2] , ) ").unwrap();
        assert_eq!(c.name, "math.f");
        assert_eq!(c.kwargs[0].1.repr(), "[1, 2]");
        // positional arguments, in order, before the keywords
        let c = parse_call_syntax("calculate_mean([1,3,4,6,8])").unwrap();
        assert_eq!(c.args.len(), 1);
        assert_eq!(c.args[0].repr(), "[1, 3, 4, 6, 8]");
        let c = parse_call_syntax("f(1, (2, 3), True, None, b=-1)").unwrap();
        let got: Vec<String> = c.args.iter().map(PyValue::repr).collect();
        assert_eq!(got, ["1", "(2, 3)", "True", "None"]);
        assert_eq!(c.kwargs[0].0, "b");
        // CPython 3.11.7: compile("f(a=1, 2)", ...) -> SyntaxError "positional argument
        // follows keyword argument"
        let err = parse_call_syntax("f(a=1, 2)").unwrap_err();
        assert_eq!(err.pos, 7);
        assert_eq!(err.message, "positional argument follows keyword argument");
        let err = parse_call_syntax("f(1, a=1, 2)").unwrap_err();
        assert_eq!(err.message, "positional argument follows keyword argument");
        assert!(parse_call_syntax("f(*x)").is_err());
        assert!(parse_call_syntax("f(**x)").is_err());
        assert!(parse_call_syntax("f(a=1, a=2)")
            .unwrap_err()
            .message
            .contains("repeated"));
        assert!(parse_call_syntax("f(a==1)").is_err());
        assert!(parse_call_syntax("f(a=1) g").is_err());
        assert!(parse_call_syntax("f(a=1").is_err());
        assert!(parse_call_syntax("f(lambda=1)").is_err());
        assert!(parse_call_syntax("").is_err());
        assert!(is_identifier("vectorA"));
        assert!(!is_identifier("0"));
        assert!(!is_identifier("my-arg"));
        assert!(!is_identifier("class"));
    }

    #[test]
    fn json_is_exact_and_ordered() {
        let v = from_json_str(
            r#"{"b": 117.60000000000001, "a": [1, -2.5e3, 123456789012345678901234567890, true, null],
                "s": "x\"\u00e9\ud83d\ude00\/", "n": NaN}"#,
        )
        .unwrap();
        assert_eq!(
            v.repr(),
            "{'b': 117.60000000000001, 'a': [1, -2500.0, 123456789012345678901234567890, True, None], 's': 'x\"é\u{1F600}/', 'n': nan}"
        );
        assert!(from_json_str("[1,]").is_err());
        assert!(from_json_str("{} x").is_err());
    }

    /// Every ground truth of the BFCL-Opaque configs must parse.
    #[test]
    fn all_ground_truths_parse() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../shared/data/otb/bfcl/tool_configs");
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(_) => {
                testkit::skip("shared", format_args!("{} not present", dir.display()));
                return;
            }
        };
        let mut n = 0;
        for entry in entries.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            for t in v["tests"].as_array().unwrap() {
                for gt in t["ground_truth"].as_array().unwrap() {
                    let s = gt.as_str().unwrap();
                    let call = parse_call_syntax(s).unwrap_or_else(|e| panic!("{s}: {e}"));
                    assert!(!call.kwargs.is_empty() || !call.args.is_empty(), "{s}");
                    n += 1;
                }
            }
        }
        assert!(n >= 150, "only {n} ground truths found");
    }
}
