//! The stage engine: content-addressed, crash-safe Parquet outputs.
//!
//! This crate knows nothing about chess, BFCL or models. It turns "run stage S with
//! params P on inputs I" into a directory of Parquet tables that is computed once and
//! reused until something that went into it changes.
//!
//! # The key
//!
//! A stage run is identified by `key = sha256(canonical_json(components))`, where the
//! components are:
//!
//! | component      | example                                    | changes when                  |
//! |----------------|--------------------------------------------|-------------------------------|
//! | `stage`        | `evaluate`                                 | never (it names the stage)    |
//! | `code_version` | `3`                                        | a stage's semantics change    |
//! | `params`       | model, prompt template text, seed, round   | the experiment file changes   |
//! | `inputs`       | `{"trajectories": <digest>}`               | an upstream output changes    |
//!
//! Inputs are keyed by the upstream *output digest* (sha256 over the tables' bytes), not
//! by the upstream key: if an upstream stage is rerun and produces byte-identical
//! tables, everything downstream keeps its key (early cutoff). Outputs are never part
//! of a key. Canonical JSON sorts object keys and drops whitespace, so reordering a TOML
//! table does not invalidate anything.
//!
//! # On-disk layout
//!
//! ```text
//! <store>/FORMAT                 store format tag, checked before anything is written
//! <store>/.lock                  exclusive lock held by a writing `otb` process
//! <store>/<stage>/<key>/         one published output: <table>.parquet + manifest.json
//! <store>/slots/<node>.json      last key components per experiment node (for `status`)
//! <store>/tmp/                   staging directories of runs in progress
//! <store>/quarantine/            entries that failed verification, moved aside
//! <store>/cache/                 other crates' caches (LLM calls, downloaded data)
//! ```
//!
//! # Invariants
//!
//! * A directory `<stage>/<key>/` is either absent or complete: tables are written and
//!   fsynced in `tmp/`, the manifest is written last (atomically), the staging
//!   directory is fsynced and then renamed into place. A crash at any point leaves at
//!   most a staging directory, which the next writer deletes.
//! * A lookup verifies the manifest (key, table sizes, sha256 of every table) before
//!   an entry is used; a failing entry is moved to `quarantine/` with a warning and
//!   recomputed.
//! * Only one process writes a store at a time (`.lock`, an OS file lock released on
//!   exit, even on SIGKILL). Readers (`otb status`) take no lock: publication is atomic.
//! * Nothing is deleted implicitly: only `otb gc` removes entries, and it lists them.
//!
//! # Known limitations
//!
//! * Code versions are bumped by hand; forgetting to bump one reuses stale outputs.
//! * Verification hashes every table on lookup, so a cached rerun costs one read of
//!   the stored bytes (measured by `make bench`).

pub mod digest;
pub mod engine;
pub mod error;
pub mod key;
pub mod store;
pub mod table;

pub use digest::Digest;
pub use engine::{Input, Mode, NodeReport, NodeState, Session, StageCtx};
pub use error::{StageError, StoreError, StoreErrorKind};
pub use key::{Change, KeyComponents};
pub use store::{Access, Entry, Lookup, Manifest, Store, Usage};
pub use table::{col, ColType, Column, Row, TableMeta};
