//! The MCP layer of opaquetools, over the official Rust SDK (`rmcp`): no JSON-RPC
//! is written by hand here.
//!
//! - [`upstream`]: a client connection to one MCP server (a stdio child process or
//!   a Streamable HTTP URL), every answer held to the [`bounds::Limits`] (time per
//!   request, message size, JSON depth, number of tools, description length); a
//!   server past one is one error naming it.
//! - [`tools`]: the learned tool list file (`otb docs` writes it; MCP's
//!   `tools/list` shape plus provenance under `_otb`).
//! - [`servers`]: MCP servers as an experiment's tools, a blocking API over
//!   [`upstream`]: each server started on a copy of its working folder (fresh per
//!   episode or shared by the run), its real path shown to the agent as an alias,
//!   a failing server restarted once, then one error naming it.
//! - [`proxy`]: `otb mcp proxy`, an MCP server (stdio, or Streamable HTTP) that
//!   forwards every request to an upstream and answers `tools/list` with the
//!   learned descriptions.
//!
//! It is a crate of its own, below `stages` (whose `[mcp]` environment uses
//! [`servers`]) and knowing nothing of experiments, so that everything that speaks
//! MCP is in one place.

pub mod bounds;
pub mod error;
pub mod proxy;
pub mod servers;
pub mod tools;
pub mod upstream;

pub use error::{Error, Failure};
