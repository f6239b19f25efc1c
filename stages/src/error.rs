//! The errors of the stages crate, each with its [`ErrorClass`] (who fixes it);
//! [`crate::driver::class_of`] is the one question the binary asks of any error to
//! choose its exit code.
//!
//! - [`InputError`]: bad input the user fixes (an unknown model spec, a file that does
//!   not parse). Always [`ErrorClass::User`].
//! - [`Failure`]: an error whose class is decided where it is raised (opening a model:
//!   a missing API key is the user's, a failed download is infrastructure, a poisoned
//!   lock is a bug). Converted with `?` inside a stage's code, the engine names the
//!   stage.
//! - [`DriveError`](crate::env::DriveError), [`ConfigError`](crate::experiment::ConfigError)
//!   and pipeline's [`StageError`] / [`pipeline::StoreError`] carry their class too.

pub use pipeline::{Classify, ErrorClass};
use pipeline::{StageError, StageErrorKind};

/// Bad input that the user can fix (unknown model spec, missing file): exit code 2.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct InputError(pub String);

impl Classify for InputError {
    fn class(&self) -> ErrorClass {
        ErrorClass::User
    }
}

/// A failure whose class was decided where it happened.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    /// Who fixes it (user, infrastructure or bug).
    pub class: ErrorClass,
    /// What went wrong, as shown to the user.
    pub message: String,
}

impl Failure {
    /// A failure the user fixes ([`ErrorClass::User`]).
    pub fn user(message: impl Into<String>) -> Failure {
        Failure {
            class: ErrorClass::User,
            message: message.into(),
        }
    }

    /// A failure of something outside the program ([`ErrorClass::Infrastructure`]).
    pub fn infra(message: impl Into<String>) -> Failure {
        Failure {
            class: ErrorClass::Infrastructure,
            message: message.into(),
        }
    }

    /// A broken invariant of this program ([`ErrorClass::Bug`]).
    pub fn bug(message: impl Into<String>) -> Failure {
        Failure {
            class: ErrorClass::Bug,
            message: message.into(),
        }
    }
}

impl Classify for Failure {
    fn class(&self) -> ErrorClass {
        self.class
    }
}

impl From<InputError> for Failure {
    fn from(e: InputError) -> Failure {
        Failure::user(e.0)
    }
}

/// Inside a stage's code: the engine names the stage ([`StageError::in_stage`]).
impl From<InputError> for StageError {
    fn from(e: InputError) -> StageError {
        StageError::user("", e)
    }
}

/// Inside a stage's code: the engine names the stage ([`StageError::in_stage`]).
impl From<Failure> for StageError {
    fn from(e: Failure) -> StageError {
        StageError::with_kind(StageErrorKind::from(e.class), "", e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failure_keeps_its_class_through_a_stage_error() {
        for (f, class) in [
            (Failure::user("no API key"), ErrorClass::User),
            (
                Failure::infra("download failed"),
                ErrorClass::Infrastructure,
            ),
            (Failure::bug("lock poisoned"), ErrorClass::Bug),
        ] {
            let e: StageError = f.into();
            assert_eq!(e.class(), class);
            let e = e.in_stage("explore");
            assert_eq!(e.class(), class);
            assert!(e.to_string().starts_with("stage `explore`: "), "{e}");
        }
        let e: StageError = InputError("bad".into()).into();
        assert!(e.is_user_error());
    }
}
