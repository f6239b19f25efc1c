//! The benchmark's environments. Each module owns its data loading, its executable
//! tools and its grader; none of them knows about the store or about models.

pub mod bfcl;
pub mod chess;
pub mod files;
pub mod mcp;
pub mod quote;
pub mod rng;
pub mod search;
pub mod stats;
