//! BFCL-Opaque: the 150 executable function-calling instances with per-instance
//! anonymised tools (`../shared/spec/bfcl-opaque.md`).

pub mod exec;
pub mod lambda;
pub mod pure;
pub mod pyparse;
pub mod pyvalue;
pub mod data;
pub mod opacify;
pub mod decoys;
pub mod rest;
pub mod executor;
pub mod grader;
pub mod released;
