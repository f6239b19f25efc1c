//! The one error type of the crate: a failure kind plus context.
//!
//! Kinds come from status codes and error types, never from message text, so
//! that a stage can record `error_kind` per row and decide what to retry.

use serde::{Deserialize, Serialize};
use thiserror::Error;

/// What kind of failure a call ended in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    /// HTTP 429 or a rate-limit error object. Retried (honouring `Retry-After`).
    RateLimit,
    /// 5xx, connection refused/reset, server-side error objects. Retried.
    Transient,
    /// The response could not be understood (bad or truncated JSON, no choices).
    Malformed,
    /// The model or provider refused (content filter, `refusal` field).
    Refusal,
    /// Will not succeed on retry: 4xx such as auth, bad request, unknown model;
    /// also local misconfiguration (missing model file, bad URL).
    Fatal,
    /// The request exceeded its timeout. Retried.
    Timeout,
    /// Replay mode found no cached response for a request.
    CacheMiss,
}

impl ErrorKind {
    /// Stable snake_case name, used as the `error_kind` column.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::RateLimit => "rate_limit",
            ErrorKind::Transient => "transient",
            ErrorKind::Malformed => "malformed",
            ErrorKind::Refusal => "refusal",
            ErrorKind::Fatal => "fatal",
            ErrorKind::Timeout => "timeout",
            ErrorKind::CacheMiss => "cache_miss",
        }
    }

    /// Whether the retry loop tries again after this kind.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::RateLimit | ErrorKind::Transient | ErrorKind::Timeout
        )
    }

    /// Kind for an HTTP status that is not a success.
    pub fn from_status(status: u16) -> ErrorKind {
        match status {
            429 => ErrorKind::RateLimit,
            408 => ErrorKind::Timeout,
            409 | 425 => ErrorKind::Transient,
            500..=599 => ErrorKind::Transient,
            _ => ErrorKind::Fatal,
        }
    }
}

impl std::fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A call that failed (after retries, where the kind is retryable).
#[derive(Debug, Clone, Error, PartialEq, Eq, Serialize, Deserialize)]
#[error("{kind} after {attempts} attempt(s): {message}")]
pub struct LlmError {
    pub kind: ErrorKind,
    pub message: String,
    /// How many times the call was attempted (0 when it never reached a model).
    pub attempts: u32,
}

impl LlmError {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        LlmError {
            kind,
            message: message.into(),
            attempts: 0,
        }
    }
    /// Same error with the attempt count set.
    pub fn with_attempts(mut self, attempts: u32) -> Self {
        self.attempts = attempts;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_classification() {
        assert_eq!(ErrorKind::from_status(429), ErrorKind::RateLimit);
        assert_eq!(ErrorKind::from_status(503), ErrorKind::Transient);
        assert_eq!(ErrorKind::from_status(401), ErrorKind::Fatal);
        assert_eq!(ErrorKind::from_status(400), ErrorKind::Fatal);
        assert!(!ErrorKind::Malformed.is_retryable());
        assert!(ErrorKind::Timeout.is_retryable());
    }
}
