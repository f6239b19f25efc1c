//! A small Python runtime for BFCL's tools: values with CPython's `==`, `repr` and
//! arithmetic, parsers for call strings, literals and JSON (never `eval`), argument
//! binding with CPython's `TypeError` texts, a lambda evaluator, and the pure BFCL
//! functions written on top of it.
//!
//! Layers, lowest first; a module uses only modules above it in this list (checked by
//! a unit test of this module):
//!
//! | module | what |
//! |---|---|
//! | [`exception`] | `PyException`: class name and `str(e)` |
//! | [`value`] | `PyValue`: `==`, `repr`, types, operators |
//! | [`builtins`] | `len`, iteration, subscripting, comparisons |
//! | [`json`] | `json.loads` with CPython's error texts: the one JSON reader |
//! | [`parse`] | call strings and literal expressions |
//! | [`bind`] | binding arguments to a signature, CPython's `TypeError` texts |
//! | [`lambda`] | the lambda-expression evaluator (`estimate_derivative`) |
//! | [`pure`] | the pure BFCL functions |
//! | [`exec`] | the BFCL signature table, `call_pure` |
//!
//! It lives under `bfcl/` because its top layers (`pure`, `exec`) are BFCL's functions
//! and nothing outside BFCL uses it; the lower layers depend on nothing BFCL-specific
//! and can move up to the crate root unchanged when a second environment needs them.

pub mod bind;
pub mod builtins;
pub mod exception;
pub mod exec;
pub mod json;
pub mod lambda;
pub mod parse;
pub mod pure;
pub mod value;

/// Deepest nesting any parser of model-controlled text accepts (call strings, literal
/// expressions, lambda bodies, JSON): deeper input is an error, never a stack overflow.
pub const MAX_DEPTH: usize = 100;
