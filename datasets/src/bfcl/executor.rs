//! One entry point for executing a BFCL tool call (`../shared/spec/bfcl-opaque.md`,
//! "Executing tools"): look up the real function's Python signature, bind the keyword
//! arguments under the name the agent used (CPython's `TypeError` texts), then dispatch
//! to the pure implementation, the REST backend chain or the decoy stand-in.
//!
//! | real name | after binding |
//! |---|---|
//! | unknown | `NameError: name '<shown>' is not defined` (what `eval` of the call gave) |
//! | pure | [`exec::call_pure`] on the bound arguments |
//! | REST | the [`BackendChain`] with the arguments *as emitted* (order and all: the recorded responses are keyed by that call string) |
//! | decoy | [`decoys::call_decoy`] on the bound arguments |
//!
//! Ground truth is executed through [`Executor::execute_ground_truth`]: with recorded
//! responses loaded, the call string *as written in the data* is looked up first. The
//! reference grader keyed its cache by that raw text, so
//! `get_weather_data(coordinates=[90.00, 0.00])` has its own frozen value (31.5),
//! different from the canonical `...[90.0, 0.0]` a model call produces (32.1); released
//! verdicts depend on the difference (`exec_simple` 58 and 59).

use std::collections::HashMap;
use std::path::Path;

use md5::{Digest, Md5};

use super::decoys;
use super::python::exception::PyException;
use super::python::exec::{self, FnKind};
use super::python::json;
use super::python::parse::PyCall;
use super::python::value::{dict_get as get, repr_len_estimate, PyValue};
use super::rest::{recorded_exception, BackendChain, RestError};

/// Longest tool output text shown (64 KiB); see [`bounded_output`].
pub const MAX_OUTPUT_BYTES: usize = 64 << 10;

/// Largest result a tool call may return, measured as the length of its `repr` (1 MiB,
/// estimated without building it): a bigger value is an error, not an output, so that
/// comparisons stay exact while nothing huge is stored or shown.
pub const MAX_RESULT_REPR_BYTES: usize = 1 << 20;

/// A tool output's text as it may be shown (to an agent, an editor, a table): `text`
/// itself up to [`MAX_OUTPUT_BYTES`], else its first bytes (cut at a character
/// boundary) followed by a marker saying how much was left out.
pub fn bounded_output(text: &str) -> String {
    if text.len() <= MAX_OUTPUT_BYTES {
        return text.to_string();
    }
    let mut cut = MAX_OUTPUT_BYTES;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    format!(
        "{}... [output truncated: {} bytes in all, the first {cut} shown]",
        &text[..cut],
        text.len()
    )
}

/// The text of a tool call's outcome, bounded by [`bounded_output`]: the result's
/// `repr`, or `Kind: message` for an exception.
pub fn output_text(outcome: &Result<PyValue, PyException>) -> String {
    match outcome {
        Ok(v) => bounded_output(&v.repr()),
        Err(e) => bounded_output(&e.to_string()),
    }
}

/// Refuses a result whose `repr` would exceed [`MAX_RESULT_REPR_BYTES`].
fn bounded_result(outcome: Result<PyValue, PyException>) -> Result<PyValue, PyException> {
    match outcome {
        Ok(v) if repr_len_estimate(&v, MAX_RESULT_REPR_BYTES) > MAX_RESULT_REPR_BYTES => {
            Err(PyException::new(
                "MemoryError",
                format!(
                    "tool result too large: its repr exceeds {MAX_RESULT_REPR_BYTES} bytes \
                     (a limit of this executor, not of Python)"
                ),
            ))
        }
        other => other,
    }
}

/// Executes tool calls with Python semantics.
#[derive(Debug)]
pub struct Executor {
    chain: BackendChain,
    /// md5 of a raw call string -> recorded outcome (paper parity for ground truth).
    raw_recorded: HashMap<String, Result<PyValue, PyException>>,
}

impl Executor {
    /// An executor whose REST functions go through `chain`.
    pub fn new(chain: BackendChain) -> Self {
        Executor {
            chain,
            raw_recorded: HashMap::new(),
        }
    }

    /// The default offline executor: the simulated world for `seed`.
    pub fn simulated(seed: u64) -> Self {
        Executor::new(BackendChain::simulated(seed))
    }

    /// Paper parity: recorded responses first, the simulated world for misses.
    /// Also loads the recorded responses for raw ground-truth lookups
    /// ([`Executor::execute_ground_truth`]).
    pub fn paper(recorded: impl AsRef<Path>, seed: u64) -> Result<Self, RestError> {
        let path = recorded.as_ref();
        let mut ex = Executor::new(BackendChain::paper(path, seed)?);
        ex.raw_recorded = load_raw_recorded(path)?;
        Ok(ex)
    }

    /// Executes a ground-truth call: the recorded outcome of its raw `source` text when
    /// there is one, otherwise `real_name(**args)`.
    pub fn execute_ground_truth(
        &self,
        source: &str,
        real_name: &str,
        args: &[(String, PyValue)],
    ) -> Result<PyValue, PyException> {
        let key = hex::encode(Md5::digest(source.as_bytes()));
        match self.raw_recorded.get(&key) {
            Some(outcome) => outcome.clone(),
            None => self.execute(real_name, real_name, args),
        }
    }

    /// The REST backend chain.
    pub fn chain(&self) -> &BackendChain {
        &self.chain
    }

    /// Executes `display_name(**args)` where `display_name` stands for the BFCL function
    /// `real_name`. Errors are the Python exceptions the call raises.
    pub fn execute(
        &self,
        real_name: &str,
        display_name: &str,
        args: &[(String, PyValue)],
    ) -> Result<PyValue, PyException> {
        self.execute_args(real_name, display_name, &[], args)
    }

    /// Executes a parsed call string under its own name (`otb exec`), positional
    /// arguments included: `calculate_mean([1, 3, 4, 6, 8])` gives `4.4` as in CPython.
    pub fn execute_call(&self, call: &PyCall) -> Result<PyValue, PyException> {
        self.execute_args(&call.name, &call.name, &call.args, &call.kwargs)
    }

    /// Executes `display_name(*positional, **kwargs)` for the BFCL function
    /// `real_name`, binding the arguments as CPython does (its `TypeError` texts).
    pub fn execute_args(
        &self,
        real_name: &str,
        display_name: &str,
        positional: &[PyValue],
        kwargs: &[(String, PyValue)],
    ) -> Result<PyValue, PyException> {
        let not_defined =
            || PyException::new("NameError", format!("name '{display_name}' is not defined"));
        let sig = exec::signature(real_name).ok_or_else(not_defined)?;
        let bound = exec::bind_call(sig, display_name, positional, kwargs)?;
        bounded_result(match sig.kind {
            FnKind::Pure => {
                exec::call_pure(real_name, &bound).unwrap_or_else(|| Err(not_defined()))
            }
            // the arguments as emitted (recorded responses are keyed by them), positional
            // ones named by their parameters
            FnKind::Rest => match exec::keyword_form(sig, positional, kwargs) {
                Some(named) => self.chain.call(real_name, &named),
                None => Err(not_defined()),
            },
            FnKind::Decoy => {
                let kwargs: Vec<(String, PyValue)> = bound
                    .values
                    .into_iter()
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                decoys::call_decoy(real_name, &kwargs).unwrap_or_else(|| Err(not_defined()))
            }
        })
    }

    /// [`Executor::execute`] with arguments given as a JSON object (Python `json.loads`
    /// conversion; key order is kept only if the map preserves it).
    pub fn execute_json(
        &self,
        real_name: &str,
        display_name: &str,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<PyValue, PyException> {
        let kwargs: Vec<(String, PyValue)> = args
            .iter()
            .map(|(k, v)| (k.clone(), PyValue::from_json(v)))
            .collect();
        self.execute(real_name, display_name, &kwargs)
    }
}

/// Reads `{md5: {"output": .., "error": null | ".."}}` with Python-exact numbers.
fn load_raw_recorded(
    path: &Path,
) -> Result<HashMap<String, Result<PyValue, PyException>>, RestError> {
    let format = |detail: String| RestError::Format {
        path: path.to_path_buf(),
        detail,
    };
    let text = std::fs::read_to_string(path).map_err(|source| RestError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let PyValue::Dict(entries) = json::loads(&text).map_err(|e| format(e.to_string()))? else {
        return Err(format("top level is not an object".into()));
    };
    let mut out = HashMap::with_capacity(entries.len());
    for (key, entry) in entries {
        let PyValue::Str(key) = key else { continue };
        let outcome = match get(&entry, "error") {
            Some(PyValue::Str(e)) => Err(recorded_exception(e)),
            _ => Ok(get(&entry, "output").cloned().unwrap_or(PyValue::None)),
        };
        out.insert(key.to_ascii_lowercase(), outcome);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bfcl::python::bind::kw;

    #[test]
    fn unknown_function_is_a_name_error() {
        let ex = Executor::simulated(0);
        let err = ex.execute("function_9", "function_9", &[]).unwrap_err();
        assert_eq!(err.kind, "NameError");
        assert_eq!(err.text(), "name 'function_9' is not defined");
    }

    #[test]
    fn binding_errors_use_the_shown_name() {
        let ex = Executor::simulated(0);
        let err = ex
            .execute("calc_binomial_probability", "function_1", &[])
            .unwrap_err();
        assert_eq!(
            err.text(),
            "function_1() missing 3 required positional arguments: 'n', 'k', and 'p'"
        );
        let err = ex
            .execute(
                "calc_binomial_probability",
                "function_2",
                &kw(&[("properties", PyValue::int(1))]),
            )
            .unwrap_err();
        assert_eq!(
            err.text(),
            "function_2() got an unexpected keyword argument 'properties'"
        );
    }

    #[test]
    fn dispatches_pure_rest_and_decoy() {
        let ex = Executor::simulated(0);
        let out = ex
            .execute(
                "calc_binomial_probability",
                "function_1",
                &kw(&[
                    ("n", PyValue::int(20)),
                    ("k", PyValue::int(5)),
                    ("p", PyValue::Float(0.6)),
                ]),
            )
            .unwrap();
        assert!(out.py_eq(&PyValue::Float(0.0012944935222876579)), "{out:?}");
        assert!(ex
            .execute(
                "get_stock_price_by_stock_name",
                "function_1",
                &kw(&[("stock_name", PyValue::str("AAPL"))])
            )
            .is_ok());
        let decoy = ex.execute(
            "validate_polygon",
            "function_2",
            &kw(&[(
                "vertices",
                PyValue::List(vec![PyValue::List(vec![PyValue::int(0), PyValue::int(0)])]),
            )]),
        );
        assert!(
            decoy.as_ref().err().is_none_or(|e| e.kind != "NameError"),
            "{decoy:?}"
        );
    }

    /// Expected results and texts from CPython 3.11.7: the same signatures defined as
    /// `def function_N(...)`, then `eval` of the call and `print(e)` for the TypeError.
    #[test]
    fn positional_arguments_bind_as_in_cpython() {
        let ex = Executor::simulated(0);
        let run = |real: &str, call: &str| -> String {
            let c = crate::bfcl::python::parse::parse_call_syntax(call).unwrap();
            match ex.execute_args(real, &c.name, &c.args, &c.kwargs) {
                Ok(v) => v.repr(),
                Err(e) => format!("{}: {}", e.kind, e.text()),
            }
        };
        let cases = [
            ("calculate_mean", "function_1([1,3,4,6,8])", "4.4"),
            (
                "calculate_mean",
                "function_1([1], [2])",
                "TypeError: function_1() takes 1 positional argument but 2 were given",
            ),
            ("sort_array", "function_2([3,1], True)", "[3, 1]"),
            (
                "sort_array",
                "function_2([3,1], True, 1)",
                "TypeError: function_2() takes from 1 to 2 positional arguments but 3 were given",
            ),
            (
                "sort_array",
                "function_2([1], 2, 3, 4)",
                "TypeError: function_2() takes from 1 to 2 positional arguments but 4 were given",
            ),
            (
                "math_gcd",
                "function_3(1, 2, 3)",
                "TypeError: function_3() takes 2 positional arguments but 3 were given",
            ),
            (
                "math_gcd",
                "function_3(1, a=2)",
                "TypeError: function_3() got multiple values for argument 'a'",
            ),
            (
                "math_gcd",
                "function_3(1, b=2, c=3)",
                "TypeError: function_3() got an unexpected keyword argument 'c'",
            ),
            // keywords are checked before the count of positional arguments
            (
                "math_gcd",
                "function_3(1, 2, 3, b=4)",
                "TypeError: function_3() got multiple values for argument 'b'",
            ),
            (
                "math_gcd",
                "function_3(1, 2, 3, c=4)",
                "TypeError: function_3() got an unexpected keyword argument 'c'",
            ),
            (
                "get_stock_history",
                "function_4('A', '1d', 'x', 'y')",
                "TypeError: function_4() takes from 2 to 3 positional arguments but 4 were given",
            ),
            (
                "calc_binomial_probability",
                "function_5(1)",
                "TypeError: function_5() missing 2 required positional arguments: 'k' and 'p'",
            ),
            (
                "calc_binomial_probability",
                "function_5(1, p=0.5)",
                "TypeError: function_5() missing 1 required positional argument: 'k'",
            ),
        ];
        for (real, call, want) in cases {
            assert_eq!(run(real, call), want, "{call}");
        }
    }

    #[test]
    fn call_strings_with_positional_arguments() {
        let ex = Executor::simulated(0);
        // `otb exec 'calculate_mean([1,3,4,6,8])'`: CPython 3.11.7 prints 4.4
        let c = crate::bfcl::python::exec::parse_call("calculate_mean([1,3,4,6,8])").unwrap();
        assert!(c.args.is_empty());
        assert_eq!(c.kwargs[0].0, "numbers");
        assert_eq!(
            ex.execute(&c.name, &c.name, &c.kwargs).unwrap().repr(),
            "4.4"
        );
        assert_eq!(ex.execute_call(&c).unwrap().repr(), "4.4");
        // mixed: positional names first, then the keywords as written
        let c = crate::bfcl::python::exec::parse_call(
            "get_stock_history('AAPL', diffandsplits='false', interval='1d')",
        )
        .unwrap();
        let names: Vec<&str> = c.kwargs.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, ["stock_name", "diffandsplits", "interval"]);
        // what cannot bind stays positional and raises on execution
        let c = crate::bfcl::python::exec::parse_call("math_gcd(4, 6, a=1)").unwrap();
        assert_eq!(c.args.len(), 2);
        assert_eq!(
            ex.execute_call(&c).unwrap_err().text(),
            "math_gcd() got multiple values for argument 'a'"
        );
        let c = crate::bfcl::python::exec::parse_call("function_9(1)").unwrap();
        assert_eq!(c.args.len(), 1);
        assert_eq!(
            ex.execute_call(&c).unwrap_err().text(),
            "name 'function_9' is not defined"
        );
        // REST functions get their positional arguments by name
        let by_pos = ex
            .execute_call(
                &crate::bfcl::python::exec::parse_call("get_movie_director('Inception')").unwrap(),
            )
            .unwrap();
        let by_kw = ex
            .execute(
                "get_movie_director",
                "get_movie_director",
                &kw(&[("movie_name", PyValue::str("Inception"))]),
            )
            .unwrap();
        assert!(by_pos.py_eq(&by_kw), "{by_pos:?} {by_kw:?}");
    }

    #[test]
    fn shown_output_is_bounded_at_a_char_boundary() {
        assert_eq!(bounded_output("short"), "short");
        let exact = "a".repeat(MAX_OUTPUT_BYTES);
        assert_eq!(bounded_output(&exact), exact);
        // a 3-byte char straddling the limit is left out whole
        let text = format!("{}€tail", "a".repeat(MAX_OUTPUT_BYTES - 1));
        let shown = bounded_output(&text);
        assert!(shown.starts_with(&"a".repeat(MAX_OUTPUT_BYTES - 1)));
        assert!(shown.ends_with(&format!(
            "... [output truncated: {} bytes in all, the first {} shown]",
            text.len(),
            MAX_OUTPUT_BYTES - 1
        )));
        let err: Result<PyValue, PyException> = Err(PyException::new("KeyError", "'Rated'"));
        assert_eq!(output_text(&err), "KeyError: 'Rated'");
    }

    #[test]
    fn repr_length_estimate_is_close() {
        for text in [
            "[1, 2.5, 'abc', None, (True,)]",
            "{'a': [10**30, -7]}",
            "''",
        ] {
            let v = crate::bfcl::python::parse::parse_expr(text).unwrap();
            let real = v.repr().len();
            let est = repr_len_estimate(&v, usize::MAX);
            assert!(
                est >= real && est <= real * 4 + 8,
                "{text}: {est} vs {real}"
            );
        }
        let long = PyValue::List(vec![PyValue::int(1); 1000]);
        assert!(repr_len_estimate(&long, 100) > 100);
    }
}
