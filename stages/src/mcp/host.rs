//! The one place the environment reaches the server layer (`::mcp::servers`): a
//! server opened on first need -- only inside a stage that must be computed, so a
//! rerun whose stages are all in the store starts no server -- and its calls, each
//! on an episode of its own.

use super::config::ServerConfig;
use pipeline::StageError;
use serde_json::Value;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Servers started by this process (every [`Host::open`]): tests check that a rerun
/// starts none.
static OPENED: AtomicU64 = AtomicU64::new(0);
/// Tool calls sent to servers by this process.
static CALLS: AtomicU64 = AtomicU64::new(0);

/// How many times this process has started an MCP server set, and how many tool
/// calls it has sent: `(opened, calls)`.
pub fn counts() -> (u64, u64) {
    (OPENED.load(Ordering::SeqCst), CALLS.load(Ordering::SeqCst))
}

/// What one tool call gave.
#[derive(Clone, Debug, PartialEq)]
pub struct Called {
    /// The result's text (bounded by the server layer).
    pub text: String,
    /// The server answered that the call failed (or with an MCP error).
    pub is_error: bool,
}

/// One server, started.
pub struct Host {
    servers: ::mcp::servers::Servers,
    name: String,
}

/// A stage error naming the server for a server-layer failure: the user's for bad
/// input, else the infrastructure's (a rerun may succeed).
fn stage_error(stage: &str, e: ::mcp::Error) -> StageError {
    match e {
        ::mcp::Error::Input(m) => StageError::user(stage, m),
        other => StageError::infra(stage, other.to_string()),
    }
}

impl Host {
    /// Start `server` (listing its tools). The server layer makes a folder of its own
    /// under `scratch` for the working copies and deletes it when the host is
    /// dropped.
    pub fn open(stage: &str, server: &ServerConfig, scratch: &Path) -> Result<Host, StageError> {
        std::fs::create_dir_all(scratch)
            .map_err(|e| StageError::infra(stage, format!("{}: {e}", scratch.display())))?;
        OPENED.fetch_add(1, Ordering::SeqCst);
        let servers = ::mcp::servers::Servers::open(vec![server.spec()], scratch, server.limits)
            .map_err(|e| stage_error(stage, e))?;
        Ok(Host {
            servers,
            name: server.name.clone(),
        })
    }

    /// The server's identity as keys and rows hold it.
    pub fn identity(&self) -> Value {
        self.servers
            .identities()
            .into_iter()
            .find(|i| i.name == self.name)
            .and_then(|i| serde_json::to_value(i).ok())
            .unwrap_or(Value::Null)
    }

    /// The server's tools as it lists them.
    pub fn tools(&self, stage: &str) -> Result<Vec<super::tools::ServerTool>, StageError> {
        Ok(self
            .servers
            .tools(&self.name)
            .map_err(|e| stage_error(stage, e))?
            .into_iter()
            .map(Into::into)
            .collect())
    }

    /// A fresh episode (its own process and working copy with `fresh = "episode"`).
    pub fn episode(&self, stage: &str) -> Result<HostEpisode<'_>, StageError> {
        Ok(HostEpisode {
            ep: self.servers.episode().map_err(|e| stage_error(stage, e))?,
            name: &self.name,
        })
    }
}

/// One episode of a server.
pub struct HostEpisode<'a> {
    ep: ::mcp::servers::Episode<'a>,
    name: &'a str,
}

impl HostEpisode<'_> {
    /// Call `tool` with `arguments`. The tool's own failure, or the server's MCP
    /// error answer (unknown tool, invalid arguments), is a result with `is_error`;
    /// a server that hangs, crashes or floods (after the layer's one restart) is the
    /// error, one line naming the server.
    pub fn call(&self, tool: &str, arguments: &Value) -> Result<Called, String> {
        CALLS.fetch_add(1, Ordering::SeqCst);
        match self.ep.call(self.name, tool, arguments) {
            Ok(r) => Ok(Called {
                text: r.text,
                is_error: r.is_error,
            }),
            // Its message only: the error's server field is the command line, which
            // names the working copy's real path.
            Err(::mcp::Error::Rpc { error, .. }) => Ok(Called {
                text: format!("Error: {}", error.message),
                is_error: true,
            }),
            Err(e) => Err(e.to_string()),
        }
    }
}
