//! Binding call arguments to a Python signature the way CPython does, with its
//! `TypeError` texts (`f() missing 1 required positional argument: 'a'`,
//! `f() got an unexpected keyword argument 'x'`, ...). The signature table of the BFCL
//! functions lives one layer up, in [`super::exec`].

use super::exception::PyException;
use super::value::PyValue;

/// How a function is implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FnKind {
    /// Pure computation, run by [`call_pure`].
    Pure,
    /// Calls a web API (run by the REST backends).
    Rest,
    /// Appears only as a doc in `exec_multiple`; has a stand-in implementation.
    Decoy,
}

/// A Python default value of a parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DefaultValue {
    None,
    Bool(bool),
    Int(i64),
    Str(&'static str),
}

impl DefaultValue {
    /// The default as a Python value.
    pub fn to_value(self) -> PyValue {
        match self {
            DefaultValue::None => PyValue::None,
            DefaultValue::Bool(b) => PyValue::Bool(b),
            DefaultValue::Int(n) => PyValue::int(n),
            DefaultValue::Str(s) => PyValue::str(s),
        }
    }
}

/// One positional-or-keyword parameter.
#[derive(Debug, Clone, Copy)]
pub struct Param {
    pub name: &'static str,
    /// `None` for a required parameter.
    pub default: Option<DefaultValue>,
}

/// The Python signature of a BFCL function.
#[derive(Debug, Clone, Copy)]
pub struct Signature {
    /// The real (BFCL) function name.
    pub name: &'static str,
    pub params: &'static [Param],
    pub kind: FnKind,
}

pub(crate) const fn req(name: &'static str) -> Param {
    Param {
        name,
        default: None,
    }
}

pub(crate) const fn opt(name: &'static str, default: DefaultValue) -> Param {
    Param {
        name,
        default: Some(default),
    }
}

/// Arguments bound to a signature: one entry per parameter, in signature order, with
/// defaults filled in.
#[derive(Debug, Clone)]
pub struct BoundArgs {
    pub values: Vec<(&'static str, PyValue)>,
}

impl BoundArgs {
    /// The bound value of parameter `name`.
    pub fn get(&self, name: &str) -> Option<&PyValue> {
        self.values.iter().find(|(n, _)| *n == name).map(|(_, v)| v)
    }

    /// The value of the `i`-th parameter.
    pub fn at(&self, i: usize) -> Option<&PyValue> {
        self.values.get(i).map(|(_, v)| v)
    }
}

/// CPython's `missing N required positional argument(s): ...` clause.
pub fn missing_text(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
    let list = match quoted.len() {
        0 => String::new(),
        1 => quoted[0].clone(),
        2 => format!("{} and {}", quoted[0], quoted[1]),
        n => format!("{}, and {}", quoted[..n - 1].join(", "), quoted[n - 1]),
    };
    format!(
        "missing {} required positional argument{}: {list}",
        names.len(),
        if names.len() == 1 { "" } else { "s" }
    )
}

/// Binds keyword arguments as `display_name(**kwargs)` would in CPython. The first
/// unknown keyword (in argument order) is reported before any missing argument.
pub fn bind(
    sig: &Signature,
    display_name: &str,
    kwargs: &[(String, PyValue)],
) -> Result<BoundArgs, PyException> {
    let mut slots: Vec<Option<PyValue>> = vec![None; sig.params.len()];
    for (k, v) in kwargs {
        match sig.params.iter().position(|p| p.name == k) {
            Some(i) => {
                if slots[i].is_some() {
                    return Err(PyException::new(
                        "TypeError",
                        format!("{display_name}() got multiple values for argument '{k}'"),
                    ));
                }
                slots[i] = Some(v.clone());
            }
            None => {
                return Err(PyException::new(
                    "TypeError",
                    format!("{display_name}() got an unexpected keyword argument '{k}'"),
                ))
            }
        }
    }
    let missing: Vec<&str> = sig
        .params
        .iter()
        .zip(&slots)
        .filter(|(p, s)| s.is_none() && p.default.is_none())
        .map(|(p, _)| p.name)
        .collect();
    if !missing.is_empty() {
        return Err(PyException::new(
            "TypeError",
            format!("{display_name}() {}", missing_text(&missing)),
        ));
    }
    let values = sig
        .params
        .iter()
        .zip(slots)
        .map(|(p, s)| {
            let v = s
                .or_else(|| p.default.map(DefaultValue::to_value))
                .unwrap_or(PyValue::None);
            (p.name, v)
        })
        .collect();
    Ok(BoundArgs { values })
}
