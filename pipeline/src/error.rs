//! Errors of the stage engine: each carries the path it concerns and a kind.

use std::path::{Path, PathBuf};

/// Who fixes a failure. Every error type of the workspace that can end a command
/// says which class it is ([`Classify`]); the binary maps the class to its exit code
/// and its wording, and nothing else decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorClass {
    /// The user fixes it by changing what they asked for (the experiment, a path,
    /// `--store`, an environment variable): exit code 2, and nothing was written.
    User,
    /// Something outside the program failed (an endpoint, the disk, an engine binary,
    /// a download): retrying may succeed; nothing partial was published.
    Infrastructure,
    /// A broken invariant of this program: never reported as either of the others.
    Bug,
}

/// An error that knows its [`ErrorClass`].
pub trait Classify {
    /// Whose failure this is.
    fn class(&self) -> ErrorClass;

    /// Bad input the user can fix (exit code 2).
    fn is_user_error(&self) -> bool {
        self.class() == ErrorClass::User
    }
}

/// An error from the store, with the file or directory it concerns.
#[derive(Debug, thiserror::Error)]
#[error("{kind} ({})", path.display())]
pub struct StoreError {
    /// What went wrong.
    pub kind: StoreErrorKind,
    /// The file or directory it concerns.
    pub path: PathBuf,
}

/// What went wrong in a [`StoreError`]; decides its [`ErrorClass`].
#[derive(Debug, thiserror::Error)]
pub enum StoreErrorKind {
    /// A file system operation failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    /// The store's directory cannot be created, locked or written (a path below a
    /// file, no permission, opened read-only); the text says why.
    #[error("store is not writable: {0}")]
    NotWritable(String),
    /// A table could not be written or read back as its row type (bad name, schema
    /// mismatch, unreadable Parquet, missing table).
    #[error("table error: {0}")]
    Table(String),
    /// A manifest or slot record could not be written: it does not serialize, or the
    /// stage name cannot name a directory. (An unreadable stored manifest is a
    /// corrupt entry, not this error.)
    #[error("invalid manifest: {0}")]
    Manifest(String),
    /// The directory is a store of another format (another otb version): nothing in
    /// it was touched.
    #[error("store format {found} is not supported by this otb (expects {expected}); use another --store")]
    Format {
        /// The format named by the store's `FORMAT` file.
        found: String,
        /// The format this build reads and writes.
        expected: String,
    },
    /// The directory exists, is not empty and carries no store `FORMAT` marker: it is
    /// not a store, and nothing in it was touched.
    #[error("not an otb store: the directory is not empty and has no FORMAT file saying `{expected}`; nothing was touched; pass --store with a new or empty directory, or an existing store")]
    NotAStore {
        /// The `FORMAT` text a store of this build carries.
        expected: String,
    },
    /// A stored entry failed verification and could not be moved aside, so it can
    /// neither be reused nor replaced.
    #[error("corrupt entry ({reason}) could not be moved to quarantine/: {error}; remove the directory by hand")]
    StuckCorrupt {
        /// Why verification failed.
        reason: String,
        /// Why moving it to `quarantine/` failed.
        error: String,
    },
    /// `gc` was asked to collect with a keep set whose walks did not all reach every
    /// node: what the incomplete walks would still need is unknown.
    #[error("gc refused: {0}; nothing was removed")]
    IncompleteKeep(String),
    /// A `--store` URL that cannot be used: an unsupported scheme, no bucket, or an
    /// object store that refused the first request (unreachable, missing bucket,
    /// credentials); nothing was written.
    #[error("object store unusable: {0}")]
    RemoteUnusable(String),
    /// A request to the object store of a remote store failed.
    #[error("object store request failed: {0}")]
    Remote(String),
}

impl StoreError {
    /// An error of `kind` concerning `path`.
    pub fn new(kind: StoreErrorKind, path: &Path) -> StoreError {
        StoreError {
            kind,
            path: path.to_path_buf(),
        }
    }

    /// An I/O error `e` concerning `path`.
    pub fn io(path: &Path, e: std::io::Error) -> StoreError {
        StoreError::new(StoreErrorKind::Io(e), path)
    }
}

impl Classify for StoreError {
    /// The user fixes a store that is not writable, of another format or not a store
    /// (another `--store`), not by retrying. A `gc` refused because a kept experiment
    /// is not complete is not bad input: the command was right, the store is not ready
    /// for it.
    fn class(&self) -> ErrorClass {
        match self.kind {
            StoreErrorKind::NotWritable(_)
            | StoreErrorKind::Format { .. }
            | StoreErrorKind::NotAStore { .. }
            | StoreErrorKind::RemoteUnusable(_) => ErrorClass::User,
            StoreErrorKind::Io(_)
            | StoreErrorKind::Table(_)
            | StoreErrorKind::Manifest(_)
            | StoreErrorKind::StuckCorrupt { .. }
            | StoreErrorKind::IncompleteKeep(_)
            | StoreErrorKind::Remote(_) => ErrorClass::Infrastructure,
        }
    }
}

/// What kind of failure a [`StageError`] is; decides the exit code.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StageErrorKind {
    /// Bad input: a malformed dataset row, an unknown setting, a missing file the user
    /// named. Exit code 2.
    UserInput,
    /// Something outside the program failed: an endpoint, an engine binary, the disk.
    Infrastructure,
    /// The store failed (see the wrapped [`StoreError`]).
    Store,
    /// A broken invariant of this program.
    Bug,
}

type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// An error raised while running a stage, with a kind and (where there is one) the
/// underlying error as [`std::error::Error::source`].
/// Row-level problems (one failed LLM call, one bad trajectory) are rows, not errors.
#[derive(Debug)]
pub struct StageError {
    kind: StageErrorKind,
    stage: String,
    message: String,
    source: Option<BoxError>,
}

impl StageError {
    /// A failure of kind `kind` caused by `err` (an error, or a message), kept as the
    /// source.
    pub fn with_kind(kind: StageErrorKind, stage: &str, err: impl Into<BoxError>) -> StageError {
        let source: BoxError = err.into();
        StageError {
            kind,
            stage: stage.to_string(),
            message: source.to_string(),
            source: Some(source),
        }
    }

    /// Bad user input (exit code 2).
    pub fn user(stage: &str, err: impl Into<BoxError>) -> StageError {
        StageError::with_kind(StageErrorKind::UserInput, stage, err)
    }

    /// Something outside the program failed.
    pub fn infra(stage: &str, err: impl Into<BoxError>) -> StageError {
        StageError::with_kind(StageErrorKind::Infrastructure, stage, err)
    }

    /// A broken invariant.
    pub fn bug(stage: &str, err: impl Into<BoxError>) -> StageError {
        StageError::with_kind(StageErrorKind::Bug, stage, err)
    }

    /// A store failure while running `stage`.
    pub fn store(stage: &str, err: StoreError) -> StageError {
        StageError::with_kind(StageErrorKind::Store, stage, err)
    }

    /// What kind of failure it is (decides the exit code).
    pub fn kind(&self) -> StageErrorKind {
        self.kind
    }

    /// The stage it concerns (empty when converted from a bare [`StoreError`]).
    pub fn stage(&self) -> &str {
        &self.stage
    }

    /// The text of the underlying error (without the stage name).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The wrapped store error, if this is one.
    pub fn store_error(&self) -> Option<&StoreError> {
        self.source.as_deref()?.downcast_ref::<StoreError>()
    }

    /// This error, naming `stage` when it was raised without one (an error converted
    /// with `?` inside a stage's code: the engine names the stage it was running).
    pub fn in_stage(mut self, stage: &str) -> StageError {
        if self.stage.is_empty() {
            self.stage = stage.to_string();
        }
        self
    }
}

impl Classify for StageError {
    /// By kind; a store error by the wrapped [`StoreError`]'s class.
    fn class(&self) -> ErrorClass {
        match self.kind {
            StageErrorKind::UserInput => ErrorClass::User,
            StageErrorKind::Infrastructure => ErrorClass::Infrastructure,
            StageErrorKind::Bug => ErrorClass::Bug,
            StageErrorKind::Store => self
                .store_error()
                .map_or(ErrorClass::Infrastructure, Classify::class),
        }
    }
}

impl From<ErrorClass> for StageErrorKind {
    fn from(c: ErrorClass) -> StageErrorKind {
        match c {
            ErrorClass::User => StageErrorKind::UserInput,
            ErrorClass::Infrastructure => StageErrorKind::Infrastructure,
            ErrorClass::Bug => StageErrorKind::Bug,
        }
    }
}

impl std::fmt::Display for StageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.stage.is_empty() {
            f.write_str(&self.message)
        } else {
            write!(f, "stage `{}`: {}", self.stage, self.message)
        }
    }
}

impl std::error::Error for StageError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

impl From<StoreError> for StageError {
    fn from(e: StoreError) -> StageError {
        StageError::store("", e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::error::Error as _;

    #[test]
    fn kinds_decide_user_errors_in_one_place() {
        let parse = "x".parse::<u32>().unwrap_err();
        let e = StageError::user("opacify", parse.clone());
        assert!(e.is_user_error());
        assert_eq!(e.kind(), StageErrorKind::UserInput);
        assert_eq!(e.to_string(), format!("stage `opacify`: {parse}"));
        let src = e.source().expect("the parse error is kept as the source");
        assert!(src.downcast_ref::<std::num::ParseIntError>().is_some());

        let infra = StageError::infra("explore", "endpoint down");
        assert_eq!(infra.class(), ErrorClass::Infrastructure);
        let bug = StageError::bug("explore", "bad state");
        assert_eq!(
            bug.class(),
            ErrorClass::Bug,
            "a bug is never infrastructure"
        );
        assert!(!bug.is_user_error());
        assert_eq!(infra.to_string(), "stage `explore`: endpoint down");
        let unnamed = StageError::with_kind(StageErrorKind::Bug, "", "x").in_stage("evaluate");
        assert_eq!(unnamed.to_string(), "stage `evaluate`: x");
        assert_eq!(
            bug.in_stage("other").stage(),
            "explore",
            "a named stage is kept"
        );
    }

    #[test]
    fn store_errors_keep_their_kind_through_conversion() {
        let not_a_store = StoreError::new(
            StoreErrorKind::NotAStore {
                expected: "otb-store-1".into(),
            },
            Path::new("/home/u"),
        );
        let e: StageError = not_a_store.into();
        assert_eq!(e.kind(), StageErrorKind::Store);
        assert!(e.is_user_error(), "another --store fixes it");
        assert!(e.store_error().is_some());
        assert!(e.to_string().contains("/home/u"), "{e}");

        let io = StoreError::io(Path::new("/s/x"), std::io::Error::other("disk full"));
        let e = StageError::store("explore", io);
        assert!(!e.is_user_error());
        assert!(e.source().is_some_and(|s| s.is::<StoreError>()));
    }
}
