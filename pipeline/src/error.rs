//! Errors of the stage engine: each carries the path it concerns and a kind.

use std::path::{Path, PathBuf};

/// An error from the store, with the file or directory it concerns.
#[derive(Debug, thiserror::Error)]
#[error("{kind} ({})", path.display())]
pub struct StoreError {
    pub kind: StoreErrorKind,
    pub path: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreErrorKind {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("store is not writable: {0}")]
    NotWritable(String),
    #[error("table error: {0}")]
    Table(String),
    #[error("invalid manifest: {0}")]
    Manifest(String),
    #[error("store format {found} is not supported by this otb (expects {expected}); use another --store")]
    Format { found: String, expected: String },
}

impl StoreError {
    pub fn new(kind: StoreErrorKind, path: &Path) -> StoreError {
        StoreError {
            kind,
            path: path.to_path_buf(),
        }
    }

    pub fn io(path: &Path, e: std::io::Error) -> StoreError {
        StoreError::new(StoreErrorKind::Io(e), path)
    }
}

/// An error raised by a stage's own computation (bad input data, a missing resource).
/// Row-level problems (one failed LLM call, one bad trajectory) are rows, not errors.
#[derive(Debug, thiserror::Error)]
pub enum StageError {
    #[error("{0}")]
    Store(#[from] StoreError),
    #[error("stage `{stage}`: {message}")]
    Failed { stage: String, message: String },
}

impl StageError {
    pub fn failed(stage: &str, message: impl Into<String>) -> StageError {
        StageError::Failed {
            stage: stage.to_string(),
            message: message.into(),
        }
    }
}
