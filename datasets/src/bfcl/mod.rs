//! BFCL-Opaque: the 150 executable function-calling instances with per-instance
//! anonymised tools (`../shared/spec/bfcl-opaque.md`).

pub mod data;
pub mod decoys;
pub mod exec;
pub mod executor;
pub mod grader;
pub mod lambda;
pub mod live;
pub mod opacify;
pub mod pure;
pub mod pyjson;
pub mod pyparse;
pub mod pyvalue;
pub mod released;
pub mod released_checks;
pub mod rest;
