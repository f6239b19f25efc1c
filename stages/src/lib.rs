//! The stages of the benchmark pipeline and the experiment driver that wires them
//! into a DAG. Each stage is one module: typed rows in (read from upstream store
//! entries), typed rows out (written through [`pipeline::StageCtx`]).
//!
//! Dataflow for BFCL-Opaque (one chain per documentation setting):
//!
//! ```text
//! bfcl-data -> opacify[setting] -> explore[r0] -> evaluate[r0]            (Base, Gold)
//!                                     |               |
//!                                     +-> batch-reflect[r1] -> explore[r1] -> evaluate[r1] -> ... (+TO)
//!                -> easytool | play2prompt | draft [setting] -> explore -> evaluate   (baselines)
//! all evaluate outputs -> summarize (means + bootstrap intervals)
//! ```

pub mod at;
pub mod baselines;
pub mod batch_reflect;
pub mod bfcl;
pub mod chess;
pub mod driver;
pub mod env;
pub mod error;
pub mod experiment;
pub mod gc;
pub mod models;
pub mod offline;
pub mod once;
pub mod online;
pub mod plan;
pub mod report;
pub mod rows;
pub mod search;
pub mod tables;

pub use error::{Failure, InputError};
