//! Binding call arguments to a Python signature the way CPython does, with its
//! `TypeError` texts (`f() missing 1 required positional argument: 'a'`,
//! `f() got an unexpected keyword argument 'x'`, ...). The signature table of the BFCL
//! functions lives one layer up, in [`super::exec`].

use super::exception::PyException;
use super::value::PyValue;

/// How a function is implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FnKind {
    /// Pure computation, run by `exec::call_pure`.
    Pure,
    /// Calls a web API (run by the REST backends).
    Rest,
    /// Appears only as a doc in `exec_multiple`; has a stand-in implementation.
    Decoy,
}

/// A Python default value of a parameter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DefaultValue {
    /// `None`.
    None,
    /// `True` / `False`.
    Bool(bool),
    /// An int literal.
    Int(i64),
    /// A str literal.
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
    /// The parameter's name, as a keyword argument spells it.
    pub name: &'static str,
    /// `None` for a required parameter.
    pub default: Option<DefaultValue>,
}

/// The Python signature of a BFCL function.
#[derive(Debug, Clone, Copy)]
pub struct Signature {
    /// The real (BFCL) function name.
    pub name: &'static str,
    /// The parameters in declaration order (all positional-or-keyword; no
    /// `*args` / `**kwargs`).
    pub params: &'static [Param],
    /// How the function is implemented.
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
    /// `(parameter name, value)` for every parameter of the signature, in
    /// signature order.
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
    bind_call(sig, display_name, &[], kwargs)
}

/// Binds `display_name(*positional, **kwargs)` as CPython does: positional arguments
/// fill the parameters in declaration order, then each keyword (in argument order) must
/// name a parameter (`got an unexpected keyword argument`) that is still free (`got
/// multiple values for argument`); then too many positional arguments are reported
/// (`takes 1 positional argument but 2 were given`), then missing ones.
pub fn bind_call(
    sig: &Signature,
    display_name: &str,
    positional: &[PyValue],
    kwargs: &[(String, PyValue)],
) -> Result<BoundArgs, PyException> {
    let n = sig.params.len();
    let mut slots: Vec<Option<PyValue>> = vec![None; n];
    for (slot, v) in slots.iter_mut().zip(positional) {
        *slot = Some(v.clone());
    }
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
    if positional.len() > n {
        return Err(PyException::new(
            "TypeError",
            format!("{display_name}() {}", too_many_text(sig, positional.len())),
        ));
    }
    finish(sig, display_name, slots)
}

/// CPython's `takes N positional argument(s) but M were given` clause (`from R to N`
/// when some parameters have defaults).
fn too_many_text(sig: &Signature, given: usize) -> String {
    let n = sig.params.len();
    let required = sig.params.iter().filter(|p| p.default.is_none()).count();
    let takes = if required < n {
        format!("from {required} to {n} positional arguments")
    } else {
        format!("{n} positional argument{}", if n == 1 { "" } else { "s" })
    };
    let was = if given == 1 { "was" } else { "were" };
    format!("takes {takes} but {given} {was} given")
}

/// The call's arguments in keyword form, as CPython would bind them: each positional
/// argument named by its parameter (declaration order), then the keywords as given.
/// `None` when the positional arguments cannot bind (too many of them, or one that a
/// keyword also names): executing the call raises the `TypeError` then.
pub fn keyword_form(
    sig: &Signature,
    positional: &[PyValue],
    kwargs: &[(String, PyValue)],
) -> Option<Vec<(String, PyValue)>> {
    if positional.len() > sig.params.len() {
        return None;
    }
    let named = sig.params.iter().zip(positional);
    if named
        .clone()
        .any(|(p, _)| kwargs.iter().any(|(k, _)| k == p.name))
    {
        return None;
    }
    Some(
        named
            .map(|(p, v)| (p.name.to_string(), v.clone()))
            .chain(kwargs.iter().cloned())
            .collect(),
    )
}

fn finish(
    sig: &Signature,
    display_name: &str,
    slots: Vec<Option<PyValue>>,
) -> Result<BoundArgs, PyException> {
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

/// Keyword arguments of one call (already bound by the executor), as a function's
/// body reads them.
pub(crate) struct Args<'a> {
    /// The function's name (what an error names).
    pub(crate) func: &'a str,
    /// The arguments, by name.
    pub(crate) kwargs: &'a [(String, PyValue)],
}

impl<'a> Args<'a> {
    /// The argument `name`, if given.
    pub(crate) fn get(&self, name: &str) -> Option<&'a PyValue> {
        self.kwargs.iter().find(|(k, _)| k == name).map(|(_, v)| v)
    }

    /// A required argument; its absence (an unbound call) raises CPython's TypeError.
    pub(crate) fn req(&self, name: &str) -> Result<&'a PyValue, PyException> {
        self.get(name).ok_or_else(|| {
            PyException::new(
                "TypeError",
                format!(
                    "{}() missing 1 required positional argument: '{name}'",
                    self.func
                ),
            )
        })
    }
}

/// Keyword arguments from `(name, value)` pairs (the tests' calls).
#[cfg(test)]
pub(crate) fn kw(pairs: &[(&str, PyValue)]) -> Vec<(String, PyValue)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// CPython 3.11.7: `def z(): pass; z(1)` and `def f(a=1): pass; f(1, 2)`.
    #[test]
    fn too_many_positional_texts() {
        let z = Signature {
            name: "z",
            params: &[],
            kind: FnKind::Pure,
        };
        let err = bind_call(&z, "z", &[PyValue::int(1)], &[]).unwrap_err();
        assert_eq!(
            err.text(),
            "z() takes 0 positional arguments but 1 was given"
        );
        static F_PARAMS: [Param; 1] = [opt("a", DefaultValue::Int(1))];
        let f = Signature {
            name: "f",
            params: &F_PARAMS,
            kind: FnKind::Pure,
        };
        let two = [PyValue::int(1), PyValue::int(2)];
        let err = bind_call(&f, "f", &two, &[]).unwrap_err();
        assert_eq!(
            err.text(),
            "f() takes from 0 to 1 positional arguments but 2 were given"
        );
        let ok = bind_call(&f, "f", &two[..1], &[]).unwrap();
        assert_eq!(ok.values[0].1.repr(), "1");
        assert!(keyword_form(&f, &two, &[]).is_none());
        assert_eq!(keyword_form(&f, &two[..1], &[]).unwrap()[0].0, "a");
    }
}
