//! The benchmark's stages, the environments that run them, and everything that reads
//! their results back: the `otb` binary is a thin layer over this crate.
//!
//! - **Running.** An experiment file ([`experiment`]) names environment tables
//!   (`[bfcl]`, `[chess]`, `[search]`, registered in [`driver::builtin`]); the driver
//!   expands each into stage calls at typed grid cells ([`at::At`]) through the
//!   environment seam ([`mod@env`]: online environments with tools per instance, offline
//!   ones with shared tools and a training / test split). The methods are written once
//!   for every environment: ToolObserver online ([`online`], [`batch_reflect`]) and
//!   offline ([`offline`]: explore -> batch-reflect -> consensus-merge), and the
//!   baselines ([`baselines`]: EasyTool, Play2Prompt, DRAFT, Trace-Free+). Each stage
//!   reads and writes typed rows as Parquet in the store ([`pipeline`]); models are
//!   reached through [`models`].
//! - **Planning.** The same drive in status mode looks every node up without running
//!   it: [`driver::locate`] gives a [`driver::Located`] (every computed output with its
//!   [`at::Cell`], every node's state), which [`plan`] prints with its bill
//!   ([`estimate`]: calls, tokens, time, dollars).
//! - **Reading.** Every reader of a command takes that one `Located`: the tables
//!   ([`tables`]: Tables 2-7, tokens, status, exports, the SFT export), the report
//!   ([`report`]) and gc ([`gc`]); what is particular to an environment (its report
//!   items, cost roles, SFT pairs) is its own [`experiment::Reader`], over the types of
//!   [`reading`]. No reader parses a node name.
//!
//! BFCL-Opaque's chain per documentation setting, for orientation:
//!
//! ```text
//! bfcl-data -> opacify[setting] -> explore[r0] -> evaluate[r0]            (Base, Gold)
//!                                     |               |
//!                                     +-> batch-reflect[r1] -> explore[r1] -> evaluate[r1] -> ... (+TO)
//!                -> easytool | play2prompt | draft | tracefree [setting] -> explore -> evaluate   (baselines)
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
pub mod estimate;
pub mod experiment;
pub mod gc;
pub mod learned;
pub mod mcp;
pub mod metrics;
pub mod models;
pub mod offline;
pub mod once;
pub mod online;
pub mod plan;
pub mod reading;
pub mod report;
pub mod rows;
pub mod search;
pub mod tables;

pub use error::{Failure, InputError};
