//! A model of the Python values that BFCL tools take and return, with Python's `==`,
//! `repr` and type names, so that grading compares outputs exactly as CPython would.
//!
//! Besides the value type this module holds the Python *number semantics* every other
//! part of the executor relies on: correctly rounded int -> float conversion and
//! `int / int` true division (even for big ints), exact int/float comparison, CPython's
//! shortest float `repr`, and the binary / unary operators with CPython's results and
//! error texts ([`binop`], [`unary`], [`py_lt`]). Float arithmetic is plain IEEE-754;
//! float `**` goes through libm `pow` (`f64::powf`), like CPython's `float_pow`.

use std::cmp::Ordering;
use std::fmt;

use num_bigint::{BigInt, Sign};
use num_integer::Integer;
use num_traits::{FromPrimitive, One, Signed, ToPrimitive, Zero};

use super::exception::PyException;

/// A Python value. Dicts keep insertion order (Python 3.7+ semantics).
#[derive(Debug, Clone)]
pub enum PyValue {
    /// `None`.
    None,
    /// `True` / `False`; a number in arithmetic and `==` (`True == 1`).
    Bool(bool),
    /// An int of any size.
    Int(BigInt),
    /// A float (IEEE-754 double).
    Float(f64),
    /// A str.
    Str(String),
    /// A list; never equal to a tuple with the same items.
    List(Vec<PyValue>),
    /// A tuple.
    Tuple(Vec<PyValue>),
    /// A dict as `(key, value)` pairs in insertion order; `==` ignores the
    /// order.
    Dict(Vec<(PyValue, PyValue)>),
}

/// Results larger than this many bits (big-int `**`, `*`, sequence repetition) are
/// refused with a `MemoryError` instead of being computed: CPython would grind on, but
/// an agent-supplied `10**10**10` must not stall the executor.
pub const MAX_INT_BITS: u64 = 1 << 22;
/// Longest sequence (list / tuple length, str length in bytes) that `*` repetition or
/// `+` concatenation may build; longer results raise `MemoryError` (empty text, as
/// CPython prints a failed allocation) instead of being allocated.
pub const MAX_SEQ_LEN: usize = 1 << 22;
/// Most memory (estimated by [`footprint`]) that one `*` repetition or `+`
/// concatenation may build. Values here are copied where CPython shares references
/// (`[[0] * 4194304] * 4194304` is 32 MB in CPython and 4 PB copied), so the bound is
/// on the whole result, nested sequences included; past it the result is a
/// `MemoryError`, never an allocation that aborts the process.
pub const MAX_FOOTPRINT: u64 = 512 << 20;

/// Estimated bytes a value occupies, nested values and text included (saturating).
pub fn footprint(v: &PyValue) -> u64 {
    let own = std::mem::size_of::<PyValue>() as u64;
    let inner = match v {
        PyValue::Str(s) => s.len() as u64,
        PyValue::Int(n) => n.bits() / 8,
        PyValue::List(v) | PyValue::Tuple(v) => v
            .iter()
            .fold(0u64, |acc, x| acc.saturating_add(footprint(x))),
        PyValue::Dict(d) => d.iter().fold(0u64, |acc, (k, x)| {
            acc.saturating_add(footprint(k))
                .saturating_add(footprint(x))
        }),
        PyValue::None | PyValue::Bool(_) | PyValue::Float(_) => 0,
    };
    own.saturating_add(inner)
}

/// Refuses a result whose [`footprint`] would pass [`MAX_FOOTPRINT`].
fn check_footprint(bytes: u64) -> Result<(), PyException> {
    if bytes > MAX_FOOTPRINT {
        Err(seq_memory_error())
    } else {
        Ok(())
    }
}

impl PyValue {
    /// Shorthand for an int value.
    pub fn int(n: i64) -> PyValue {
        PyValue::Int(BigInt::from(n))
    }

    /// Shorthand for a str value.
    pub fn str(s: &str) -> PyValue {
        PyValue::Str(s.to_string())
    }

    /// Python's `type(x).__name__`.
    pub fn type_name(&self) -> &'static str {
        match self {
            PyValue::None => "NoneType",
            PyValue::Bool(_) => "bool",
            PyValue::Int(_) => "int",
            PyValue::Float(_) => "float",
            PyValue::Str(_) => "str",
            PyValue::List(_) => "list",
            PyValue::Tuple(_) => "tuple",
            PyValue::Dict(_) => "dict",
        }
    }

    /// Python truthiness (`bool(x)`).
    pub fn truthy(&self) -> bool {
        match self {
            PyValue::None => false,
            PyValue::Bool(b) => *b,
            PyValue::Int(n) => !n.is_zero(),
            PyValue::Float(x) => *x != 0.0,
            PyValue::Str(s) => !s.is_empty(),
            PyValue::List(v) | PyValue::Tuple(v) => !v.is_empty(),
            PyValue::Dict(d) => !d.is_empty(),
        }
    }

    /// True for `bool`, `int` and `float` (the values Python arithmetic accepts).
    pub fn is_number(&self) -> bool {
        matches!(self, PyValue::Bool(_) | PyValue::Int(_) | PyValue::Float(_))
    }

    /// The value as an exact integer: `int` and `bool` only (floats are not ints).
    pub fn as_bigint(&self) -> Option<BigInt> {
        match self {
            PyValue::Bool(b) => Some(BigInt::from(u8::from(*b))),
            PyValue::Int(n) => Some(n.clone()),
            _ => None,
        }
    }

    /// The value as `float(x)` would give it for numbers (ints correctly rounded);
    /// `None` for non-numbers and for ints too large for a float.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            PyValue::Bool(b) => Some(f64::from(u8::from(*b))),
            PyValue::Int(n) => int_to_f64(n).ok(),
            PyValue::Float(x) => Some(*x),
            _ => None,
        }
    }

    /// Python `==`.
    pub fn py_eq(&self, other: &PyValue) -> bool {
        use PyValue as P;
        match (self, other) {
            (P::None, P::None) => true,
            (a, b) if a.is_number() && b.is_number() => num_cmp(a, b) == Some(Ordering::Equal),
            (P::Str(a), P::Str(b)) => a == b,
            (P::List(a), P::List(b)) | (P::Tuple(a), P::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.py_eq(y))
            }
            (P::Dict(a), P::Dict(b)) => {
                a.len() == b.len()
                    && a.iter().all(|(k, v)| {
                        b.iter()
                            .find(|(k2, _)| k.py_eq(k2))
                            .is_some_and(|(_, v2)| v.py_eq(v2))
                    })
            }
            _ => false,
        }
    }

    /// Python `repr(x)`.
    pub fn repr(&self) -> String {
        let mut out = String::new();
        self.write_repr(&mut out);
        out
    }

    /// Python `str(x)`: like `repr` except that a top-level string is itself.
    pub fn py_str(&self) -> String {
        match self {
            PyValue::Str(s) => s.clone(),
            other => other.repr(),
        }
    }

    fn write_repr(&self, out: &mut String) {
        match self {
            PyValue::None => out.push_str("None"),
            PyValue::Bool(true) => out.push_str("True"),
            PyValue::Bool(false) => out.push_str("False"),
            PyValue::Int(n) => out.push_str(&n.to_string()),
            PyValue::Float(x) => out.push_str(&float_repr(*x)),
            PyValue::Str(s) => out.push_str(&str_repr(s)),
            PyValue::List(items) => {
                out.push('[');
                write_items(items, out);
                out.push(']');
            }
            PyValue::Tuple(items) => {
                out.push('(');
                write_items(items, out);
                if items.len() == 1 {
                    out.push(',');
                }
                out.push(')');
            }
            PyValue::Dict(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    k.write_repr(out);
                    out.push_str(": ");
                    v.write_repr(out);
                }
                out.push('}');
            }
        }
    }

    /// Converts a JSON value the way Python's `json.loads` would: integers -> `int`,
    /// other numbers -> `float`, arrays -> `list`, objects -> `dict` with `str` keys.
    /// (Without serde_json's `arbitrary_precision`, integers beyond u64 arrive as f64 and
    /// become `float`.)
    pub fn from_json(v: &serde_json::Value) -> PyValue {
        use serde_json::Value as J;
        match v {
            J::Null => PyValue::None,
            J::Bool(b) => PyValue::Bool(*b),
            J::Number(n) => {
                if let Some(i) = n.as_i64() {
                    PyValue::Int(BigInt::from(i))
                } else if let Some(u) = n.as_u64() {
                    PyValue::Int(BigInt::from(u))
                } else {
                    PyValue::Float(n.as_f64().unwrap_or(f64::NAN))
                }
            }
            J::String(s) => PyValue::Str(s.clone()),
            J::Array(items) => PyValue::List(items.iter().map(PyValue::from_json).collect()),
            J::Object(map) => PyValue::Dict(
                map.iter()
                    .map(|(k, v)| (PyValue::Str(k.clone()), PyValue::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// Converts to JSON. Choices where JSON has no exact counterpart:
    /// tuples become arrays; non-finite floats become the strings `"inf"`, `"-inf"`,
    /// `"nan"` (their Python `repr`); ints beyond i64/u64 become a JSON number (an f64,
    /// so lossy) when finite as a float, otherwise their decimal digits as a string;
    /// non-string dict keys become their Python `str()`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::Value as J;
        match self {
            PyValue::None => J::Null,
            PyValue::Bool(b) => J::Bool(*b),
            PyValue::Int(n) => {
                if let Some(i) = n.to_i64() {
                    J::from(i)
                } else if let Some(u) = n.to_u64() {
                    J::from(u)
                } else {
                    match int_to_f64(n).ok().and_then(serde_json::Number::from_f64) {
                        Some(num) => J::Number(num),
                        None => J::String(n.to_string()),
                    }
                }
            }
            PyValue::Float(x) => match serde_json::Number::from_f64(*x) {
                Some(num) => J::Number(num),
                None => J::String(float_repr(*x)),
            },
            PyValue::Str(s) => J::String(s.clone()),
            PyValue::List(items) | PyValue::Tuple(items) => {
                J::Array(items.iter().map(PyValue::to_json).collect())
            }
            PyValue::Dict(entries) => J::Object(
                entries
                    .iter()
                    .map(|(k, v)| (k.py_str(), v.to_json()))
                    .collect(),
            ),
        }
    }
}

impl fmt::Display for PyValue {
    /// Displays the Python `repr`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr())
    }
}

impl From<bool> for PyValue {
    fn from(b: bool) -> Self {
        PyValue::Bool(b)
    }
}

impl From<i64> for PyValue {
    fn from(n: i64) -> Self {
        PyValue::Int(BigInt::from(n))
    }
}

impl From<BigInt> for PyValue {
    fn from(n: BigInt) -> Self {
        PyValue::Int(n)
    }
}

impl From<f64> for PyValue {
    fn from(x: f64) -> Self {
        PyValue::Float(x)
    }
}

impl From<&str> for PyValue {
    fn from(s: &str) -> Self {
        PyValue::Str(s.to_string())
    }
}

impl From<String> for PyValue {
    fn from(s: String) -> Self {
        PyValue::Str(s)
    }
}

fn write_items(items: &[PyValue], out: &mut String) {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(", ");
        }
        item.write_repr(out);
    }
}

// ---------------------------------------------------------------------------------------
// repr helpers
// ---------------------------------------------------------------------------------------

/// CPython's `repr(float)`: the shortest round-tripping digits, in fixed notation when
/// the decimal exponent is in `-4 <= e < 16`, else `d.ddde+XX`.
pub fn float_repr(x: f64) -> String {
    if x.is_nan() {
        return "nan".to_string();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_string();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x == 0.0 {
        return format!("{sign}0.0");
    }
    // Rust's `{:e}` gives the shortest round-trip digits, e.g. "1.2345e-7".
    let sci = format!("{:e}", x.abs());
    let (mant, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i64 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| *c != '.').collect();
    let ndigits = digits.len() as i64;
    let decpt = exp + 1;
    let body = if decpt <= -4 || decpt > 16 {
        let (first, rest) = digits.split_at(1);
        let e = decpt - 1;
        let esign = if e < 0 { '-' } else { '+' };
        if rest.is_empty() {
            format!("{first}e{esign}{:02}", e.abs())
        } else {
            format!("{first}.{rest}e{esign}{:02}", e.abs())
        }
    } else if decpt <= 0 {
        format!("0.{}{digits}", "0".repeat((-decpt) as usize))
    } else if decpt >= ndigits {
        format!("{digits}{}.0", "0".repeat((decpt - ndigits) as usize))
    } else {
        let (a, b) = digits.split_at(decpt as usize);
        format!("{a}.{b}")
    };
    format!("{sign}{body}")
}

/// Python's printable test (`str.isprintable` per character): false for the Unicode
/// categories Cc, Cf, Cs, Co, Cn, Zl, Zp and Zs other than the space. Rust's
/// `escape_debug` uses the same category set for its non-grapheme-extend escapes, so a
/// character is printable exactly when it comes out unescaped after a leading `a`.
fn is_printable(c: char) -> bool {
    if c == ' ' {
        return true;
    }
    if (c as u32) < 0x20 || (0x7f..0xa0).contains(&(c as u32)) {
        return false;
    }
    if c.is_ascii() {
        return true;
    }
    let probe: String = ['a', c].iter().collect();
    !probe.escape_debug().to_string().contains('\\')
}

/// CPython's `repr(str)`: single quotes unless the text has `'` and no `"`.
pub fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if is_printable(c) => out.push(c),
            c => {
                let n = c as u32;
                if n < 0x100 {
                    out.push_str(&format!("\\x{n:02x}"));
                } else if n < 0x10000 {
                    out.push_str(&format!("\\u{n:04x}"));
                } else {
                    out.push_str(&format!("\\U{n:08x}"));
                }
            }
        }
    }
    out.push(quote);
    out
}

// ---------------------------------------------------------------------------------------
// exact number conversions and comparisons
// ---------------------------------------------------------------------------------------

fn exc(kind: &str, message: impl Into<String>) -> PyException {
    PyException {
        kind: kind.to_string(),
        message: message.into(),
    }
}

/// `2.0 ** e` for `-1074 <= e <= 1023`, exactly.
fn pow2(e: i64) -> f64 {
    if e >= -1022 {
        f64::from_bits(((e + 1023) as u64) << 52)
    } else {
        f64::from_bits(1u64 << (e + 1074))
    }
}

/// `num / den` correctly rounded to the nearest float (ties to even), the way CPython's
/// `int / int` and `float(int)` round. Errors with `None` when the result is too large.
fn ratio_to_f64_abs(num: &BigInt, den: &BigInt) -> Option<f64> {
    // num >= 0, den > 0
    if num.is_zero() {
        return Some(0.0);
    }
    let limit = BigInt::one() << 53u32;
    if num <= &limit && den <= &limit {
        return Some(num.to_f64()? / den.to_f64()?);
    }
    let na = num.bits() as i64;
    let nb = den.bits() as i64;
    // e such that 2^(e-1) <= num/den < 2^e
    let d = na - nb;
    let ge = if d >= 0 {
        num >= &(den << (d as u64))
    } else {
        (num << ((-d) as u64)) >= *den
    };
    let e = if ge { d + 1 } else { d };
    if e > 1024 {
        return None;
    }
    // exponent of the last kept bit, one extra bit for rounding
    let lsb = (e - 53).max(-1074);
    let s = lsb - 1;
    let (q2, r) = if s >= 0 {
        num.div_rem(&(den << (s as u64)))
    } else {
        (num << ((-s) as u64)).div_rem(den)
    };
    let round_bit = q2.bit(0);
    let mut q: BigInt = q2 >> 1u32;
    if round_bit && (!r.is_zero() || q.bit(0)) {
        q += 1;
    }
    // q <= 2^53 now, exactly representable
    let qf = q.to_f64()?;
    if lsb > 971 || (lsb == 971 && q.bits() > 53) {
        return None;
    }
    Some(qf * pow2(lsb))
}

/// `float(n)` (correctly rounded), or CPython's OverflowError.
pub fn int_to_f64(n: &BigInt) -> Result<f64, PyException> {
    let mag = BigInt::from_biguint(Sign::Plus, n.magnitude().clone());
    match ratio_to_f64_abs(&mag, &BigInt::one()) {
        Some(x) if n.is_negative() => Ok(-x),
        Some(x) => Ok(x),
        None => Err(exc("OverflowError", "int too large to convert to float")),
    }
}

/// `a / b` for ints: true division, correctly rounded (CPython's `long_true_divide`).
pub fn int_truediv(a: &BigInt, b: &BigInt) -> Result<f64, PyException> {
    if b.is_zero() {
        return Err(exc("ZeroDivisionError", "division by zero"));
    }
    let na = BigInt::from_biguint(Sign::Plus, a.magnitude().clone());
    let nb = BigInt::from_biguint(Sign::Plus, b.magnitude().clone());
    let x = ratio_to_f64_abs(&na, &nb).ok_or_else(|| {
        exc(
            "OverflowError",
            "integer division result too large for a float",
        )
    })?;
    let negative = a.is_negative() != b.is_negative();
    Ok(if negative { -x } else { x })
}

/// Exact comparison of an int with a float (CPython compares these without rounding).
/// `None` when `x` is NaN.
pub fn cmp_int_float(n: &BigInt, x: f64) -> Option<Ordering> {
    if x.is_nan() {
        return None;
    }
    if x.is_infinite() {
        return Some(if x > 0.0 {
            Ordering::Less
        } else {
            Ordering::Greater
        });
    }
    let fl = x.floor();
    let fi = BigInt::from_f64(fl)?;
    Some(match n.cmp(&fi) {
        Ordering::Less => Ordering::Less,
        Ordering::Greater => Ordering::Greater,
        Ordering::Equal if x == fl => Ordering::Equal,
        Ordering::Equal => Ordering::Less,
    })
}

/// Compares two numbers (`bool`/`int`/`float`) exactly; `None` for NaN or non-numbers.
pub fn num_cmp(a: &PyValue, b: &PyValue) -> Option<Ordering> {
    match (a, b) {
        (PyValue::Float(x), PyValue::Float(y)) => x.partial_cmp(y),
        (PyValue::Float(x), other) => Some(cmp_int_float(&other.as_bigint()?, *x)?.reverse()),
        (other, PyValue::Float(y)) => cmp_int_float(&other.as_bigint()?, *y),
        (x, y) => Some(x.as_bigint()?.cmp(&y.as_bigint()?)),
    }
}

/// Python `a < b` for the types BFCL values use, with CPython's TypeError text.
pub fn py_lt(a: &PyValue, b: &PyValue) -> Result<bool, PyException> {
    use PyValue as P;
    match (a, b) {
        (x, y) if x.is_number() && y.is_number() => Ok(num_cmp(x, y) == Some(Ordering::Less)),
        (P::Str(x), P::Str(y)) => Ok(x < y),
        (P::List(x), P::List(y)) | (P::Tuple(x), P::Tuple(y)) => {
            for (p, q) in x.iter().zip(y) {
                if !p.py_eq(q) {
                    return py_lt(p, q);
                }
            }
            Ok(x.len() < y.len())
        }
        _ => Err(exc(
            "TypeError",
            format!(
                "'<' not supported between instances of '{}' and '{}'",
                a.type_name(),
                b.type_name()
            ),
        )),
    }
}

// ---------------------------------------------------------------------------------------
// operators
// ---------------------------------------------------------------------------------------

/// A Python binary arithmetic operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinOp {
    /// `+`: numbers, or concatenation of two strs, lists or tuples.
    Add,
    /// `-`.
    Sub,
    /// `*`: numbers, or repetition of a str, list or tuple by an int.
    Mul,
    /// `/`: true division, always a float.
    Div,
    /// `//`: floor division.
    FloorDiv,
    /// `%` on numbers: modulo with the sign of the divisor (Python's, not
    /// Rust's `%`); `str %` formatting is not supported.
    Mod,
    /// `**`.
    Pow,
}

impl BinOp {
    /// The operator's source text (`"+"`, `"//"`, ...).
    pub fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::FloorDiv => "//",
            BinOp::Mod => "%",
            BinOp::Pow => "**",
        }
    }
}

/// A Python unary operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `+x` (turns a bool into an int).
    Pos,
}

fn unsupported(op: BinOp, a: &PyValue, b: &PyValue) -> PyException {
    let sym = if op == BinOp::Pow {
        "** or pow()"
    } else {
        op.symbol()
    };
    exc(
        "TypeError",
        format!(
            "unsupported operand type(s) for {sym}: '{}' and '{}'",
            a.type_name(),
            b.type_name()
        ),
    )
}

fn memory_error() -> PyException {
    exc("MemoryError", "result too large")
}

/// What CPython raises when an allocation fails: `MemoryError` with an empty text.
fn seq_memory_error() -> PyException {
    exc("MemoryError", "")
}

/// Refuses a sequence result longer than [`MAX_SEQ_LEN`].
fn check_seq_len(len: usize) -> Result<(), PyException> {
    if len > MAX_SEQ_LEN {
        Err(seq_memory_error())
    } else {
        Ok(())
    }
}

/// Python's unary `-x` / `+x`.
pub fn unary(op: UnaryOp, v: &PyValue) -> Result<PyValue, PyException> {
    match (op, v) {
        (UnaryOp::Neg, PyValue::Float(x)) => Ok(PyValue::Float(-x)),
        (UnaryOp::Pos, PyValue::Float(x)) => Ok(PyValue::Float(*x)),
        (UnaryOp::Neg, PyValue::Int(_) | PyValue::Bool(_)) => {
            Ok(PyValue::Int(-v.as_bigint().unwrap_or_default()))
        }
        (UnaryOp::Pos, PyValue::Int(_) | PyValue::Bool(_)) => {
            Ok(PyValue::Int(v.as_bigint().unwrap_or_default()))
        }
        _ => Err(exc(
            "TypeError",
            format!(
                "bad operand type for unary {}: '{}'",
                if op == UnaryOp::Neg { "-" } else { "+" },
                v.type_name()
            ),
        )),
    }
}

/// Python's binary operator `a <op> b` with CPython's results and error texts for
/// numbers, plus sequence concatenation / repetition and `str %`-free behaviour.
pub fn binop(op: BinOp, a: &PyValue, b: &PyValue) -> Result<PyValue, PyException> {
    use PyValue as P;
    if a.is_number() && b.is_number() {
        return num_binop(op, a, b);
    }
    match (op, a, b) {
        (BinOp::Add, P::Str(x), P::Str(y)) => {
            check_seq_len(x.len().saturating_add(y.len()))?;
            Ok(P::Str(format!("{x}{y}")))
        }
        (BinOp::Add, P::List(x), P::List(y)) => {
            check_seq_len(x.len().saturating_add(y.len()))?;
            check_footprint(footprint(a).saturating_add(footprint(b)))?;
            Ok(P::List(x.iter().chain(y).cloned().collect()))
        }
        (BinOp::Add, P::Tuple(x), P::Tuple(y)) => {
            check_seq_len(x.len().saturating_add(y.len()))?;
            check_footprint(footprint(a).saturating_add(footprint(b)))?;
            Ok(P::Tuple(x.iter().chain(y).cloned().collect()))
        }
        (BinOp::Add, P::Str(_) | P::List(_) | P::Tuple(_), other) => Err(exc(
            "TypeError",
            format!(
                "can only concatenate {} (not \"{}\") to {}",
                a.type_name(),
                other.type_name(),
                a.type_name()
            ),
        )),
        (BinOp::Mul, P::Str(_) | P::List(_) | P::Tuple(_), n) => repeat(a, n),
        (BinOp::Mul, n, P::Str(_) | P::List(_) | P::Tuple(_)) => repeat(b, n),
        (BinOp::Mod, P::Str(_), _) => Err(exc(
            "TypeError",
            "not all arguments converted during string formatting",
        )),
        _ => Err(unsupported(op, a, b)),
    }
}

fn repeat(seq: &PyValue, n: &PyValue) -> Result<PyValue, PyException> {
    let count = match n {
        PyValue::Int(_) | PyValue::Bool(_) => n.as_bigint().unwrap_or_default(),
        other => {
            return Err(exc(
                "TypeError",
                format!(
                    "can't multiply sequence by non-int of type '{}'",
                    other.type_name()
                ),
            ))
        }
    };
    // CPython converts the count to a Py_ssize_t first (either sign), then refuses a
    // result whose size overflows one: OverflowError for str, MemoryError for sequences.
    let count = count.to_i64().ok_or_else(|| {
        exc(
            "OverflowError",
            "cannot fit 'int' into an index-sized integer",
        )
    })?;
    let count = usize::try_from(count).unwrap_or(0);
    let len = match seq {
        PyValue::Str(s) => s.len(),
        PyValue::List(v) | PyValue::Tuple(v) => v.len(),
        _ => 0,
    };
    let total = (len as u128) * (count as u128);
    if total > i64::MAX as u128 {
        return Err(match seq {
            PyValue::Str(_) => exc("OverflowError", "repeated string is too long"),
            _ => seq_memory_error(),
        });
    }
    check_seq_len(total as usize)?;
    check_footprint(footprint(seq).saturating_mul(count as u64))?;
    Ok(match seq {
        PyValue::Str(s) => PyValue::Str(s.repeat(count)),
        PyValue::List(v) => PyValue::List(repeat_vec(v, count)),
        PyValue::Tuple(v) => PyValue::Tuple(repeat_vec(v, count)),
        other => other.clone(),
    })
}

fn repeat_vec(v: &[PyValue], count: usize) -> Vec<PyValue> {
    let mut out = Vec::with_capacity(v.len() * count);
    for _ in 0..count {
        out.extend_from_slice(v);
    }
    out
}

fn num_binop(op: BinOp, a: &PyValue, b: &PyValue) -> Result<PyValue, PyException> {
    match (a.as_bigint(), b.as_bigint()) {
        (Some(x), Some(y)) => int_binop(op, &x, &y),
        _ => {
            let x = to_float(a)?;
            let y = to_float(b)?;
            float_binop(op, x, y).map(PyValue::Float)
        }
    }
}

fn to_float(v: &PyValue) -> Result<f64, PyException> {
    match v {
        PyValue::Float(x) => Ok(*x),
        other => int_to_f64(&other.as_bigint().unwrap_or_default()),
    }
}

fn int_binop(op: BinOp, x: &BigInt, y: &BigInt) -> Result<PyValue, PyException> {
    let check = |n: BigInt| -> Result<PyValue, PyException> {
        if n.bits() > MAX_INT_BITS {
            Err(memory_error())
        } else {
            Ok(PyValue::Int(n))
        }
    };
    match op {
        BinOp::Add => Ok(PyValue::Int(x + y)),
        BinOp::Sub => Ok(PyValue::Int(x - y)),
        BinOp::Mul => {
            if x.bits() + y.bits() > MAX_INT_BITS + 1 {
                return Err(memory_error());
            }
            check(x * y)
        }
        BinOp::Div => int_truediv(x, y).map(PyValue::Float),
        BinOp::FloorDiv => {
            if y.is_zero() {
                return Err(exc(
                    "ZeroDivisionError",
                    "integer division or modulo by zero",
                ));
            }
            Ok(PyValue::Int(x.div_floor(y)))
        }
        BinOp::Mod => {
            if y.is_zero() {
                return Err(exc("ZeroDivisionError", "integer modulo by zero"));
            }
            Ok(PyValue::Int(x.mod_floor(y)))
        }
        BinOp::Pow => {
            if y.is_negative() {
                // CPython hands negative exponents to float pow.
                let fx = int_to_f64(x)?;
                let fy = int_to_f64(y)?;
                return float_pow(fx, fy).map(PyValue::Float);
            }
            if x.is_zero() || x.is_one() || y.is_zero() {
                return Ok(PyValue::Int(if y.is_zero() {
                    BigInt::one()
                } else {
                    x.clone()
                }));
            }
            if *x == BigInt::from(-1) {
                return Ok(PyValue::Int(if y.bit(0) {
                    x.clone()
                } else {
                    BigInt::one()
                }));
            }
            let e = y.to_u32().ok_or_else(memory_error)?;
            if (x.bits() - 1).saturating_mul(u64::from(e)) > MAX_INT_BITS {
                return Err(memory_error());
            }
            check(x.pow(e))
        }
    }
}

/// Python's float binary operators (CPython `floatobject.c` semantics).
pub fn float_binop(op: BinOp, x: f64, y: f64) -> Result<f64, PyException> {
    match op {
        BinOp::Add => Ok(x + y),
        BinOp::Sub => Ok(x - y),
        BinOp::Mul => Ok(x * y),
        BinOp::Div => {
            if y == 0.0 {
                Err(exc("ZeroDivisionError", "float division by zero"))
            } else {
                Ok(x / y)
            }
        }
        BinOp::FloorDiv => {
            if y == 0.0 {
                return Err(exc("ZeroDivisionError", "float floor division by zero"));
            }
            Ok(float_divmod(x, y).0)
        }
        BinOp::Mod => {
            if y == 0.0 {
                return Err(exc("ZeroDivisionError", "float modulo"));
            }
            Ok(float_divmod(x, y).1)
        }
        BinOp::Pow => float_pow(x, y),
    }
}

/// CPython's `float_divmod` (y != 0): returns (floor quotient, modulo).
fn float_divmod(vx: f64, wx: f64) -> (f64, f64) {
    let mut m = vx % wx; // fmod
    let mut div = (vx - m) / wx;
    if m != 0.0 {
        if (wx < 0.0) != (m < 0.0) {
            m += wx;
            div -= 1.0;
        }
    } else {
        m = 0.0f64.copysign(wx);
    }
    let floordiv = if div != 0.0 {
        let mut f = div.floor();
        if div - f > 0.5 {
            f += 1.0;
        }
        f
    } else {
        0.0f64.copysign(vx / wx)
    };
    (floordiv, m)
}

/// CPython's `float_pow`: the special cases of `floatobject.c`, then libm `pow`.
/// A negative base with a non-integer exponent gives a complex number in Python, which
/// this value model cannot hold: that case raises `ValueError("math domain error")`.
pub fn float_pow(iv: f64, iw: f64) -> Result<f64, PyException> {
    if iw == 0.0 {
        return Ok(1.0);
    }
    if iv.is_nan() {
        return Ok(if iv == 1.0 { 1.0 } else { iv });
    }
    if iw.is_nan() {
        return Ok(if iv == 1.0 { 1.0 } else { iw });
    }
    if iw.is_infinite() {
        let a = iv.abs();
        return Ok(if a == 1.0 {
            1.0
        } else if (iw > 0.0) == (a > 1.0) {
            f64::INFINITY
        } else {
            0.0
        });
    }
    let iw_is_odd = iw.rem_euclid(2.0) == 1.0;
    if iv.is_infinite() {
        return Ok(if iw > 0.0 {
            if iw_is_odd {
                iv
            } else {
                iv.abs()
            }
        } else if iw_is_odd {
            0.0f64.copysign(iv)
        } else {
            0.0
        });
    }
    if iv == 0.0 {
        if iw < 0.0 {
            return Err(exc(
                "ZeroDivisionError",
                "0.0 cannot be raised to a negative power",
            ));
        }
        return Ok(if iw_is_odd { iv } else { 0.0 });
    }
    let mut base = iv;
    let mut negate = false;
    if base < 0.0 {
        if iw != iw.floor() {
            return Err(exc("ValueError", "math domain error"));
        }
        base = -base;
        negate = iw_is_odd;
    }
    if base == 1.0 {
        return Ok(if negate { -1.0 } else { 1.0 });
    }
    let r = base.powf(iw);
    if r.is_infinite() {
        return Err(exc(
            "OverflowError",
            "(34, 'Numerical result out of range')",
        ));
    }
    Ok(if negate { -r } else { r })
}

/// An estimate of `v.repr().len()` that stops counting once it passes `limit` (the
/// result is then some number above `limit`), without building the text: ints count
/// their decimal digits from their bit length, strings their UTF-8 length.
pub fn repr_len_estimate(v: &PyValue, limit: usize) -> usize {
    fn walk(v: &PyValue, limit: usize, acc: &mut usize) {
        if *acc > limit {
            return;
        }
        match v {
            PyValue::None | PyValue::Bool(_) => *acc += 5,
            PyValue::Float(_) => *acc += 24,
            // decimal digits from the bit length, plus sign and rounding
            PyValue::Int(n) => *acc += (n.bits() as f64 * std::f64::consts::LOG10_2) as usize + 2,
            // UTF-8 length plus quotes (escapes can make the repr a little longer)
            PyValue::Str(s) => *acc += s.len() + 2,
            PyValue::List(items) | PyValue::Tuple(items) => {
                *acc += 2;
                for item in items {
                    *acc += 2;
                    walk(item, limit, acc);
                    if *acc > limit {
                        return;
                    }
                }
            }
            PyValue::Dict(entries) => {
                *acc += 2;
                for (k, item) in entries {
                    *acc += 4;
                    walk(k, limit, acc);
                    walk(item, limit, acc);
                    if *acc > limit {
                        return;
                    }
                }
            }
        }
    }
    let mut acc = 0;
    walk(v, limit, &mut acc);
    acc
}

/// `d[key]` for a dict `d` and a str `key`; `None` when `v` is not a dict or has no
/// such key.
pub fn dict_get<'a>(v: &'a PyValue, key: &str) -> Option<&'a PyValue> {
    match v {
        PyValue::Dict(entries) => entries
            .iter()
            .find(|(k, _)| matches!(k, PyValue::Str(s) if s == key))
            .map(|(_, v)| v),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Nested repetition copies every inner list: bounded by the whole result, a
    /// `MemoryError` (as an allocation CPython could not make), never an abort.
    #[test]
    fn nested_repetition_is_bounded_by_the_whole_result() {
        let inner = repeat(
            &PyValue::List(vec![PyValue::int(0)]),
            &PyValue::int(4_194_304),
        )
        .expect("4M items fit");
        let e = binop(
            BinOp::Mul,
            &PyValue::List(vec![inner.clone()]),
            &PyValue::int(4_194_304),
        )
        .unwrap_err();
        assert_eq!(e.kind, "MemoryError");
        let e = binop(
            BinOp::Mul,
            &PyValue::int(1000),
            &PyValue::List(vec![inner.clone()]),
        )
        .unwrap_err();
        assert_eq!(e.kind, "MemoryError");
        let big = PyValue::Str("a".repeat(4_000_000));
        let e = binop(
            BinOp::Mul,
            &PyValue::List(vec![big]),
            &PyValue::int(4_000_000),
        )
        .unwrap_err();
        assert_eq!(e.kind, "MemoryError");
        let e = binop(BinOp::Add, &inner, &inner).unwrap_err();
        assert_eq!(e.kind, "MemoryError");
        // Small nested values still build.
        let small = binop(
            BinOp::Mul,
            &PyValue::List(vec![PyValue::List(vec![PyValue::int(0); 3])]),
            &PyValue::int(4),
        )
        .unwrap();
        assert_eq!(small.repr(), "[[0, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 0]]");
    }

    fn int(s: &str) -> PyValue {
        PyValue::Int(s.parse().unwrap())
    }

    #[test]
    fn float_repr_matches_cpython() {
        let cases: &[(f64, &str)] = &[
            (1e-05, "1e-05"),                                    // repr(1e-05)
            (0.1 + 0.2, "0.30000000000000004"),                  // repr(0.1+0.2)
            (1e16, "1e+16"),                                     // repr(1e16)
            (123456789012345678.0, "1.2345678901234568e+17"),    // repr(123456789012345678.0)
            (-0.0, "-0.0"),                                      // repr(-0.0)
            (5e-324, "5e-324"),                                  // repr(5e-324)
            (0.0001, "0.0001"),                                  // repr(0.0001)
            (9999999999999998.0, "9999999999999998.0"),          // repr(9999999999999998.0)
            (1.5e300, "1.5e+300"),                               // repr(1.5e300)
            (72.0, "72.0"),                                      // repr(72.0)
            (1e15, "1000000000000000.0"),                        // repr(1e15)
            (f64::INFINITY, "inf"),                              // repr(float('inf'))
            (f64::NEG_INFINITY, "-inf"),                         // repr(float('-inf'))
            (f64::NAN, "nan"),                                   // repr(float('nan'))
            (-1.25e-7, "-1.25e-07"),                             // repr(-1.25e-7)
            (32.00000264769187, "32.00000264769187"),            // repr(32.00000264769187)
            (0.5, "0.5"),                                        // repr(0.5)
            (1.7976931348623157e308, "1.7976931348623157e+308"), // repr(sys.float_info.max)
        ];
        for (x, want) in cases {
            assert_eq!(float_repr(*x), *want, "{x:?}");
        }
    }

    #[test]
    fn str_repr_matches_cpython() {
        // python3 -c "print(repr(\"it's\"))" -> "it's"
        assert_eq!(str_repr("it's"), "\"it's\"");
        // python3 -c "print(repr('say \"hi\"'))" -> 'say "hi"'
        assert_eq!(str_repr("say \"hi\""), "'say \"hi\"'");
        // python3 -c "print(repr('it\'s \"x\"'))" -> 'it\'s "x"'
        assert_eq!(str_repr("it's \"x\""), "'it\\'s \"x\"'");
        // python3 -c "print(repr('a\nb\tc\\\\d\x01\x7f'))" -> 'a\nb\tc\\d\x01\x7f'
        assert_eq!(str_repr("a\nb\tc\\d\x01\x7f"), "'a\\nb\\tc\\\\d\\x01\\x7f'");
        // python3 -c "print(repr('Fête é 日本 \u00a0 \u200b \U0001F600 \u0301'))"
        //   -> 'Fête é 日本 \xa0 \u200b 😀 ́'
        assert_eq!(
            str_repr("Fête é 日本 \u{a0} \u{200b} \u{1F600} \u{301}"),
            "'Fête é 日本 \\xa0 \\u200b \u{1F600} \u{301}'"
        );
        // python3 -c "print(repr('\U000e0001'))" -> '\U000e0001'
        assert_eq!(str_repr("\u{e0001}"), "'\\U000e0001'");
    }

    #[test]
    fn container_repr() {
        let t = PyValue::Tuple(vec![PyValue::int(1)]);
        assert_eq!(t.repr(), "(1,)"); // repr((1,))
        let t2 = PyValue::Tuple(vec![PyValue::int(1), PyValue::Float(2.0)]);
        assert_eq!(t2.repr(), "(1, 2.0)"); // repr((1, 2.0))
        assert_eq!(PyValue::Tuple(vec![]).repr(), "()");
        let d = PyValue::Dict(vec![
            (PyValue::str("a"), PyValue::int(1)),
            (
                PyValue::str("b"),
                PyValue::List(vec![PyValue::None, PyValue::Bool(true)]),
            ),
        ]);
        assert_eq!(d.repr(), "{'a': 1, 'b': [None, True]}"); // repr({'a':1,'b':[None,True]})
        assert_eq!(d.py_str(), d.repr());
        assert_eq!(PyValue::str("x").py_str(), "x");
        assert_eq!(PyValue::str("x").to_string(), "'x'");
    }

    #[test]
    fn equality_is_python_equality() {
        assert!(PyValue::int(5040).py_eq(&PyValue::Float(5040.0))); // 5040 == 5040.0
        assert!(PyValue::Bool(true).py_eq(&PyValue::int(1))); // True == 1
        assert!(PyValue::Float(1.0).py_eq(&PyValue::Bool(true))); // 1.0 == True
        assert!(!PyValue::Float(f64::NAN).py_eq(&PyValue::Float(f64::NAN))); // nan != nan
        let l = PyValue::List(vec![PyValue::int(1)]);
        let t = PyValue::Tuple(vec![PyValue::int(1)]);
        assert!(!l.py_eq(&t)); // [1] == (1,) -> False
        let d1 = PyValue::Dict(vec![
            (PyValue::str("a"), PyValue::int(1)),
            (PyValue::str("b"), PyValue::int(2)),
        ]);
        let d2 = PyValue::Dict(vec![
            (PyValue::str("b"), PyValue::Float(2.0)),
            (PyValue::str("a"), PyValue::int(1)),
        ]);
        assert!(d1.py_eq(&d2)); // {'a':1,'b':2} == {'b':2.0,'a':1}
                                // 2**53+1 == float(2**53+1) -> False (float rounds to 2**53)
        let big = int("9007199254740993");
        assert!(!big.py_eq(&PyValue::Float(9007199254740992.0)));
        assert!(int("9007199254740992").py_eq(&PyValue::Float(9007199254740992.0)));
        // 10**400 == float('inf') -> False
        assert!(!int(&format!("1{}", "0".repeat(400))).py_eq(&PyValue::Float(f64::INFINITY)));
        assert!(!PyValue::str("1").py_eq(&PyValue::int(1)));
        assert!(PyValue::None.py_eq(&PyValue::None));
        assert!(!PyValue::None.py_eq(&PyValue::Bool(false)));
    }

    #[test]
    fn big_int_division_and_conversion() {
        // repr(10**30/7) -> 1.4285714285714285e+29
        let a = int("1000000000000000000000000000000");
        let r = int_truediv(&a.as_bigint().unwrap(), &BigInt::from(7)).unwrap();
        assert_eq!(float_repr(r), "1.4285714285714285e+29");
        // repr(2**64/3) -> 6.148914691236517e+18
        let r = int_truediv(&(BigInt::one() << 64u32), &BigInt::from(3)).unwrap();
        assert_eq!(float_repr(r), "6.148914691236517e+18");
        // repr((2**53+1)/1) -> 9007199254740992.0 (ties to even)
        let r = int_truediv(&BigInt::from(9007199254740993i64), &BigInt::one()).unwrap();
        assert_eq!(float_repr(r), "9007199254740992.0");
        // repr(float(2**53+3)) -> 9007199254740996.0
        assert_eq!(
            float_repr(int_to_f64(&BigInt::from(9007199254740995i64)).unwrap()),
            "9007199254740996.0"
        );
        // repr(math.factorial(30)/math.factorial(23)) -> 10260432000.0
        let f30: BigInt = (1..=30u32).map(BigInt::from).product();
        let f23: BigInt = (1..=23u32).map(BigInt::from).product();
        assert_eq!(
            float_repr(int_truediv(&f30, &f23).unwrap()),
            "10260432000.0"
        );
        // repr(100/3**200) -> 3.764861949599026e-94
        let x = int_truediv(&BigInt::from(100), &BigInt::from(3u8).pow(200)).unwrap();
        assert_eq!(float_repr(x), "3.764861949599026e-94");
        // repr(1/10**400) -> 0.0 ; repr(-1/10**320) -> -1e-320
        let big400 = BigInt::from(10u8).pow(400);
        assert_eq!(
            float_repr(int_truediv(&BigInt::one(), &big400).unwrap()),
            "0.0"
        );
        let big320 = BigInt::from(10u8).pow(320);
        assert_eq!(
            float_repr(int_truediv(&BigInt::from(-1), &big320).unwrap()),
            "-1e-320"
        );
        // 10**400/1 -> OverflowError: integer division result too large for a float
        let e = int_truediv(&big400, &BigInt::one()).unwrap_err();
        assert_eq!(e.message, "integer division result too large for a float");
        // float(10**400) -> OverflowError: int too large to convert to float
        assert_eq!(
            int_to_f64(&big400).unwrap_err().message,
            "int too large to convert to float"
        );
        // repr(0/-5) -> -0.0
        assert_eq!(
            float_repr(int_truediv(&BigInt::zero(), &BigInt::from(-5)).unwrap()),
            "-0.0"
        );
        // repr(float(2**1024-2**970-1)) -> 1.7976931348623157e+308 ; float(2**1024-2**970)
        // -> OverflowError (the tie rounds up to 2**1024)
        let top = (BigInt::one() << 1024u32) - (BigInt::one() << 970u32) - 1;
        assert_eq!(
            float_repr(int_to_f64(&top).unwrap()),
            "1.7976931348623157e+308"
        );
        let over = (BigInt::one() << 1024u32) - (BigInt::one() << 970u32);
        assert!(int_to_f64(&over).is_err());
        // 1/0 -> ZeroDivisionError: division by zero
        let e = int_truediv(&BigInt::one(), &BigInt::zero()).unwrap_err();
        assert_eq!(
            (e.kind.as_str(), e.message.as_str()),
            ("ZeroDivisionError", "division by zero")
        );
    }

    #[test]
    fn operators_match_cpython() {
        let r = |op, a: PyValue, b: PyValue| match binop(op, &a, &b) {
            Ok(v) => v.repr(),
            Err(e) => format!("{}: {}", e.kind, e.message),
        };
        let i = PyValue::int;
        let f = PyValue::Float;
        assert_eq!(r(BinOp::Pow, i(2), i(10)), "1024"); // 2**10
        assert_eq!(r(BinOp::Pow, i(2), i(-1)), "0.5"); // 2**-1
        assert_eq!(r(BinOp::Pow, f(1.1), i(10)), "2.5937424601000023"); // 1.1**10
        assert_eq!(r(BinOp::Pow, f(2.0), f(0.5)), "1.4142135623730951"); // 2.0**0.5
        assert_eq!(r(BinOp::Pow, f(1.05), i(30)), "4.321942375150668"); // 1.05**30
        assert_eq!(r(BinOp::Pow, f(-2.0), i(3)), "-8.0"); // (-2.0)**3
        assert_eq!(
            r(BinOp::Pow, i(0), i(-1)),
            "ZeroDivisionError: 0.0 cannot be raised to a negative power"
        ); // 0**-1
        assert_eq!(
            r(BinOp::Pow, f(10.0), i(400)),
            "OverflowError: (34, 'Numerical result out of range')"
        ); // 10.0**400
        assert_eq!(r(BinOp::Div, i(1), i(6)), "0.16666666666666666"); // 1/6
        assert_eq!(
            r(BinOp::Div, i(1), f(0.0)),
            "ZeroDivisionError: float division by zero"
        );
        assert_eq!(r(BinOp::FloorDiv, i(-7), i(2)), "-4"); // -7//2
        assert_eq!(r(BinOp::Mod, i(-7), i(2)), "1"); // -7%2
        assert_eq!(r(BinOp::Mod, i(7), i(-2)), "-1"); // 7%-2
        assert_eq!(r(BinOp::Mod, f(-7.5), i(2)), "0.5"); // -7.5%2
        assert_eq!(r(BinOp::FloorDiv, f(7.5), i(-2)), "-4.0"); // 7.5//-2
        assert_eq!(r(BinOp::Mod, f(0.0), f(-2.0)), "-0.0"); // 0.0%-2.0
                                                            // x // 0 and x % 0
        for (op, a, error) in [
            (BinOp::FloorDiv, i(1), "integer division or modulo by zero"),
            (BinOp::Mod, i(1), "integer modulo by zero"),
            (BinOp::Mod, f(1.0), "float modulo"),
            (BinOp::FloorDiv, f(1.0), "float floor division by zero"),
        ] {
            let want = format!("ZeroDivisionError: {error}");
            assert_eq!(r(op, a, i(0)), want, "{op:?}");
        }
        assert_eq!(r(BinOp::Add, PyValue::Bool(true), i(1)), "2"); // True+1
        assert_eq!(r(BinOp::Add, f(0.1), f(0.2)), "0.30000000000000004");
        assert_eq!(
            r(BinOp::Add, PyValue::str("a"), i(1)),
            "TypeError: can only concatenate str (not \"int\") to str"
        );
        assert_eq!(
            r(BinOp::Add, i(1), PyValue::str("a")),
            "TypeError: unsupported operand type(s) for +: 'int' and 'str'"
        );
        assert_eq!(
            r(BinOp::Pow, PyValue::str("a"), i(2)),
            "TypeError: unsupported operand type(s) for ** or pow(): 'str' and 'int'"
        );
        assert_eq!(
            r(BinOp::Mul, PyValue::str("a"), f(1.5)),
            "TypeError: can't multiply sequence by non-int of type 'float'"
        );
        assert_eq!(r(BinOp::Mul, PyValue::str("ab"), i(3)), "'ababab'");
        assert_eq!(
            r(BinOp::Mul, f(1.0), int(&format!("1{}", "0".repeat(309)))),
            "OverflowError: int too large to convert to float"
        ); // 1.0 * 10**309
        let e = unary(UnaryOp::Neg, &PyValue::str("a")).unwrap_err();
        assert_eq!(e.message, "bad operand type for unary -: 'str'");
        assert_eq!(
            unary(UnaryOp::Neg, &PyValue::Bool(true)).unwrap().repr(),
            "-1"
        );
        // 2**100 -> 1267650600228229401496703205376
        assert_eq!(
            r(BinOp::Pow, i(2), i(100)),
            "1267650600228229401496703205376"
        );
        assert!(binop(BinOp::Pow, &i(10), &int("100000000000")).is_err()); // refused, no hang
    }

    #[test]
    fn ordering_matches_cpython() {
        assert!(py_lt(&PyValue::int(1), &PyValue::Float(1.5)).unwrap());
        assert!(!py_lt(&PyValue::Float(f64::NAN), &PyValue::int(1)).unwrap());
        assert!(py_lt(&PyValue::str("B"), &PyValue::str("a")).unwrap());
        let e = py_lt(&PyValue::int(1), &PyValue::str("a")).unwrap_err();
        // 1 < 'a' -> TypeError: '<' not supported between instances of 'int' and 'str'
        assert_eq!(
            e.message,
            "'<' not supported between instances of 'int' and 'str'"
        );
        let a = PyValue::List(vec![PyValue::int(1), PyValue::int(2)]);
        let b = PyValue::List(vec![PyValue::int(1), PyValue::int(2), PyValue::int(0)]);
        assert!(py_lt(&a, &b).unwrap()); // [1,2] < [1,2,0]
    }

    #[test]
    fn json_round_trip() {
        let j: serde_json::Value =
            serde_json::from_str(r#"{"a": [1, 2.0, "x", null, true], "b": {"c": -3}}"#).unwrap();
        let v = PyValue::from_json(&j);
        assert_eq!(v.repr(), "{'a': [1, 2.0, 'x', None, True], 'b': {'c': -3}}");
        assert_eq!(v.to_json(), j);
        assert_eq!(PyValue::Float(f64::NAN).to_json(), serde_json::json!("nan"));
        assert_eq!(
            PyValue::Tuple(vec![PyValue::int(1)]).to_json(),
            serde_json::json!([1])
        );
        assert_eq!(PyValue::Float(2.0).type_name(), "float");
        assert_eq!(PyValue::None.type_name(), "NoneType");
    }
}
