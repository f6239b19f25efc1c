//! The one error type of the crate: a failure kind plus context.
//!
//! Kinds come from status codes and error types, never from message text, so
//! that a stage can record `error_kind` per row and decide what to retry.
//!
//! Every kind falls in one of two classes ([`ErrorKind::is_infrastructure`]):
//!
//! - **answer**: the model (or the provider's filter of its output) answered,
//!   and the answer is unusable: `malformed`, `refusal`, `context_overflow`,
//!   `content_filter`. A stage records these as the model's result.
//! - **infrastructure**: no answer was obtained, for reasons that say nothing
//!   about the model: `auth`, `rate_limit` and `transient` (after retries),
//!   `timeout`, `local_io`, `cache_miss`, `fatal`. A stage should fail (and be
//!   rerun) rather than score these.

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
    /// The reply could not be turned into an answer: bad or truncated JSON,
    /// no choices, a tool call without a name, tool-call arguments nested
    /// deeper than [`crate::types::MAX_JSON_DEPTH`], a reply larger than
    /// [`crate::types::MAX_REPLY_BYTES`]. Part of the answer.
    Malformed,
    /// The model refused (`refusal` field, an error of type `refusal`).
    Refusal,
    /// Will not succeed on retry and is not about the answer: bad request,
    /// unknown model, quota; also local misconfiguration (missing model file,
    /// bad URL).
    Fatal,
    /// The request exceeded its timeout. Retried.
    Timeout,
    /// Replay mode found no cached response for a request.
    CacheMiss,
    /// HTTP 401/403 or an authentication/permission error object.
    Auth,
    /// The prompt (plus the output budget) does not fit the model's context
    /// (`context_length_exceeded`, llama.cpp's `exceed_context_size_error`,
    /// the embedded backend's own check). Part of the answer.
    ContextOverflow,
    /// The provider's content filter stopped the output (`finish_reason`
    /// `content_filter`, error code `content_filter` /
    /// `content_policy_violation`). Part of the answer.
    ContentFilter,
    /// Local storage failed: the call cache could not be read or written, its
    /// lock is busy, or a record is corrupt.
    LocalIo,
}

impl ErrorKind {
    /// Every kind, for tests and exhaustive tables.
    pub const ALL: [ErrorKind; 11] = [
        ErrorKind::RateLimit,
        ErrorKind::Transient,
        ErrorKind::Malformed,
        ErrorKind::Refusal,
        ErrorKind::Fatal,
        ErrorKind::Timeout,
        ErrorKind::CacheMiss,
        ErrorKind::Auth,
        ErrorKind::ContextOverflow,
        ErrorKind::ContentFilter,
        ErrorKind::LocalIo,
    ];

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
            ErrorKind::Auth => "auth",
            ErrorKind::ContextOverflow => "context_overflow",
            ErrorKind::ContentFilter => "content_filter",
            ErrorKind::LocalIo => "local_io",
        }
    }

    /// Whether the retry loop tries again after this kind.
    pub fn is_retryable(self) -> bool {
        matches!(
            self,
            ErrorKind::RateLimit | ErrorKind::Transient | ErrorKind::Timeout
        )
    }

    /// True when the failure belongs to the model's answer (the model was
    /// asked and what came back is unusable): a stage records it as the
    /// model's result.
    pub fn belongs_to_answer(self) -> bool {
        match self {
            ErrorKind::Malformed
            | ErrorKind::Refusal
            | ErrorKind::ContextOverflow
            | ErrorKind::ContentFilter => true,
            ErrorKind::RateLimit
            | ErrorKind::Transient
            | ErrorKind::Fatal
            | ErrorKind::Timeout
            | ErrorKind::CacheMiss
            | ErrorKind::Auth
            | ErrorKind::LocalIo => false,
        }
    }

    /// True when no answer was obtained for reasons outside the model
    /// (network, provider, credentials, local storage, replay miss): a stage
    /// should fail rather than score the call. The negation of
    /// [`ErrorKind::belongs_to_answer`].
    pub fn is_infrastructure(self) -> bool {
        !self.belongs_to_answer()
    }

    /// Kind for an HTTP status that is not a success.
    pub fn from_status(status: u16) -> ErrorKind {
        match status {
            429 => ErrorKind::RateLimit,
            401 | 403 => ErrorKind::Auth,
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
    /// What kind of failure; decides retrying and whether it is the answer.
    pub kind: ErrorKind,
    /// What happened, for a person (a status, an excerpt of the body, a path).
    pub message: String,
    /// How many times the call was attempted (0 when it never reached a model).
    pub attempts: u32,
}

impl LlmError {
    /// An error of `kind` with `message`, attempted 0 times (set the count
    /// with [`LlmError::with_attempts`]).
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
    /// See [`ErrorKind::belongs_to_answer`].
    pub fn belongs_to_answer(&self) -> bool {
        self.kind.belongs_to_answer()
    }
    /// See [`ErrorKind::is_infrastructure`].
    pub fn is_infrastructure(&self) -> bool {
        self.kind.is_infrastructure()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_classification() {
        assert_eq!(ErrorKind::from_status(429), ErrorKind::RateLimit);
        assert_eq!(ErrorKind::from_status(503), ErrorKind::Transient);
        assert_eq!(ErrorKind::from_status(401), ErrorKind::Auth);
        assert_eq!(ErrorKind::from_status(403), ErrorKind::Auth);
        assert_eq!(ErrorKind::from_status(400), ErrorKind::Fatal);
        assert!(!ErrorKind::Malformed.is_retryable());
        assert!(ErrorKind::Timeout.is_retryable());
    }

    #[test]
    fn names_are_stable_and_classes_split() {
        // Stored in Parquet rows: never rename an existing one.
        let names: Vec<&str> = ErrorKind::ALL.iter().map(|k| k.as_str()).collect();
        assert_eq!(
            names,
            [
                "rate_limit",
                "transient",
                "malformed",
                "refusal",
                "fatal",
                "timeout",
                "cache_miss",
                "auth",
                "context_overflow",
                "content_filter",
                "local_io"
            ]
        );
        for k in ErrorKind::ALL {
            // The serde name is the column name.
            assert_eq!(serde_json::to_value(k).unwrap(), k.as_str());
            assert_ne!(k.belongs_to_answer(), k.is_infrastructure());
        }
        let answer: Vec<&str> = ErrorKind::ALL
            .iter()
            .filter(|k| k.belongs_to_answer())
            .map(|k| k.as_str())
            .collect();
        assert_eq!(
            answer,
            ["malformed", "refusal", "context_overflow", "content_filter"]
        );
        let e = LlmError::new(ErrorKind::Auth, "no key");
        assert!(e.is_infrastructure() && !e.belongs_to_answer());
    }
}
