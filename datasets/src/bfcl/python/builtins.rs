//! Python builtins over [`PyValue`] that more than one part of the runtime needs:
//! `len`, iteration, `operator.index`, subscripting and rich comparison, with CPython's
//! error texts. Used by the lambda evaluator and by the pure BFCL functions.

use num_bigint::BigInt;
use num_traits::{Signed, ToPrimitive};

use super::exception::PyException;
use super::value::{num_cmp, py_lt, PyValue};

/// Largest `n` for which factorial loops run (`n!` has ~250k bits).
pub const MAX_FACTORIAL: u64 = 20_000;

fn exc(kind: &str, msg: impl Into<String>) -> PyException {
    PyException::new(kind, msg)
}

/// Python's `len(v)`.
pub fn py_len(v: &PyValue) -> Result<usize, PyException> {
    match v {
        PyValue::Str(s) => Ok(s.chars().count()),
        PyValue::List(items) | PyValue::Tuple(items) => Ok(items.len()),
        PyValue::Dict(d) => Ok(d.len()),
        other => Err(exc(
            "TypeError",
            format!("object of type '{}' has no len()", other.type_name()),
        )),
    }
}

/// The items `for x in v` visits (dict keys, string characters).
pub fn py_iter(v: &PyValue) -> Result<Vec<PyValue>, PyException> {
    match v {
        PyValue::Str(s) => Ok(s.chars().map(|c| PyValue::Str(c.to_string())).collect()),
        PyValue::List(items) | PyValue::Tuple(items) => Ok(items.clone()),
        PyValue::Dict(d) => Ok(d.iter().map(|(k, _)| k.clone()).collect()),
        other => Err(exc(
            "TypeError",
            format!("'{}' object is not iterable", other.type_name()),
        )),
    }
}

/// `operator.index(v)`: ints (and bools) only, as `range()` and indexing require.
pub fn as_index(v: &PyValue) -> Result<BigInt, PyException> {
    v.as_bigint().ok_or_else(|| {
        exc(
            "TypeError",
            format!(
                "'{}' object cannot be interpreted as an integer",
                v.type_name()
            ),
        )
    })
}

/// Python's `container[index]` for lists, tuples, strings and dicts.
pub fn getitem(container: &PyValue, index: &PyValue) -> Result<PyValue, PyException> {
    let seq_index = |len: usize, what: &str| -> Result<usize, PyException> {
        let i = index.as_bigint().ok_or_else(|| {
            exc(
                "TypeError",
                if what == "string" {
                    format!(
                        "string indices must be integers, not '{}'",
                        index.type_name()
                    )
                } else {
                    format!(
                        "{what} indices must be integers or slices, not {}",
                        index.type_name()
                    )
                },
            )
        })?;
        let len_b = BigInt::from(len);
        let j = if i.is_negative() { &i + &len_b } else { i };
        if j.is_negative() || j >= len_b {
            return Err(exc("IndexError", format!("{what} index out of range")));
        }
        Ok(j.to_usize().unwrap_or(0))
    };
    match container {
        PyValue::List(items) => Ok(items[seq_index(items.len(), "list")?].clone()),
        PyValue::Tuple(items) => Ok(items[seq_index(items.len(), "tuple")?].clone()),
        PyValue::Str(s) => {
            let chars: Vec<char> = s.chars().collect();
            let i = seq_index(chars.len(), "string")?;
            Ok(PyValue::Str(chars[i].to_string()))
        }
        PyValue::Dict(d) => {
            if matches!(index, PyValue::List(_) | PyValue::Dict(_)) {
                return Err(exc(
                    "TypeError",
                    format!("unhashable type: '{}'", index.type_name()),
                ));
            }
            d.iter()
                .find(|(k, _)| k.py_eq(index))
                .map(|(_, v)| v.clone())
                .ok_or_else(|| exc("KeyError", index.repr()))
        }
        other => Err(exc(
            "TypeError",
            format!("'{}' object is not subscriptable", other.type_name()),
        )),
    }
}

/// Python's rich comparison `a <op> b` for `<`, `<=`, `>`, `>=`, `==`, `!=`.
pub fn compare(op: &str, a: &PyValue, b: &PyValue) -> Result<bool, PyException> {
    if op == "==" {
        return Ok(a.py_eq(b));
    }
    if op == "!=" {
        return Ok(!a.py_eq(b));
    }
    if a.is_number() && b.is_number() {
        let o = num_cmp(a, b);
        return Ok(match op {
            "<" => o.is_some_and(|o| o.is_lt()),
            "<=" => o.is_some_and(|o| o.is_le()),
            ">" => o.is_some_and(|o| o.is_gt()),
            _ => o.is_some_and(|o| o.is_ge()),
        });
    }
    let relabel = |e: PyException| {
        if e.kind == "TypeError" {
            exc(
                "TypeError",
                format!(
                    "'{op}' not supported between instances of '{}' and '{}'",
                    a.type_name(),
                    b.type_name()
                ),
            )
        } else {
            e
        }
    };
    match op {
        "<" => py_lt(a, b).map_err(relabel),
        ">" => py_lt(b, a).map_err(relabel),
        "<=" => Ok(py_lt(a, b).map_err(relabel)? || a.py_eq(b)),
        _ => Ok(py_lt(b, a).map_err(relabel)? || a.py_eq(b)),
    }
}
