//! Python exceptions as values: what a tool call raises, with CPython's class name and
//! `str(e)` text. The lowest layer of the runtime: everything else returns these.

use std::fmt;

/// A Python exception raised by a tool call: its class name and `str(e)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyException {
    /// The exception class, e.g. `"TypeError"`.
    pub kind: String,
    /// `str(e)` as CPython gives it.
    pub message: String,
}

impl PyException {
    /// Builds an exception of class `kind` with text `message`.
    pub fn new(kind: &str, message: impl Into<String>) -> Self {
        PyException {
            kind: kind.to_string(),
            message: message.into(),
        }
    }

    /// The text the agent sees: Python's `str(e)`.
    pub fn text(&self) -> String {
        self.message.clone()
    }
}

impl fmt::Display for PyException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.kind, self.message)
    }
}

impl std::error::Error for PyException {}
