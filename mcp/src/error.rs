//! The crate's one error type.

/// How bad an upstream failure is for the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// One request failed (it took too long, or its answer was past a bound); the
    /// server may still answer others.
    Call,
    /// The server is gone (never started, exited, broke the protocol, closed the
    /// connection): nothing more can be asked of it.
    Dead,
}

/// What can go wrong between otb and an MCP server.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The user's input (a command line, a tool-list file) is wrong.
    #[error("{0}")]
    Input(String),
    /// The upstream server failed or went past a bound; the message names it.
    #[error("MCP server `{server}` {what}")]
    Server {
        /// The server's command line or URL.
        server: String,
        /// What it did.
        what: String,
        /// Whether the server can still answer.
        failure: Failure,
    },
    /// The upstream server answered a request with an MCP error (passed on as it is).
    #[error("MCP server `{server}` answered with an error: {error}")]
    Rpc {
        /// The server's command line or URL.
        server: String,
        /// Its error (boxed: it is large beside the other variants).
        error: Box<rmcp::ErrorData>,
    },
    /// Serving MCP failed (stdio or the HTTP listener).
    #[error("{0}")]
    Serve(String),
    /// A file operation in otb's own folders failed (copying a server's working
    /// folder into the scratch folder, deleting a copy).
    #[error("{0}")]
    Io(String),
}

impl Error {
    /// Whether the upstream server is gone after this error.
    pub fn is_fatal(&self) -> bool {
        matches!(
            self,
            Error::Server {
                failure: Failure::Dead,
                ..
            }
        )
    }
}
