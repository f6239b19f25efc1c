//! BFCL-Opaque: the 150 executable function-calling instances with per-instance
//! anonymised tools (`../shared/spec/bfcl-opaque.md`).
//!
//! Module layers, lowest first (a module uses only modules before it in this list;
//! the workspace's `tests/layers.rs` checks the `use` lines against it):
//! [`python`] (the Python runtime) < [`data`] < [`opacify`] < [`rest`] (REST backends,
//! including `live`) < [`decoys`] < [`executor`] < [`grader`] < [`released`] <
//! [`released_checks`].

pub mod data;
pub mod decoys;
pub mod executor;
pub mod grader;
pub mod opacify;
pub mod python;
pub mod released;
pub mod released_checks;
pub mod rest;

// The runtime's modules at their former paths (`datasets::bfcl::pyvalue::PyValue`, ...).
pub use python::exec;
pub use python::json as pyjson;
pub use python::lambda;
/// The call-string and literal parser at its former path, with [`parse_call`]
/// (positional arguments bound to BFCL parameter names).
///
/// [`parse_call`]: python::exec::parse_call
pub mod pyparse {
    pub use super::python::exec::parse_call;
    pub use super::python::parse::*;
}
pub use python::pure;
pub use python::value as pyvalue;
pub use rest::live;
