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
//! <store>/cache/journal/<key>/    finished items of a stage still running (see `journal`)
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
//! * A lookup verifies the manifest (key, table file names, sizes, sha256 of every
//!   table) before an entry is used. In run mode a failing entry is moved to
//!   `quarantine/` with a warning and recomputed; if it cannot be moved the stage
//!   fails. A corrupt entry is never reused. Status mode changes nothing at all.
//! * Only one process writes a store at a time (`.lock`, an OS file lock released on
//!   exit, even on SIGKILL). Readers (`otb status`) take no lock: publication is atomic.
//! * A store is only a store: `Store::open` accepts a missing directory, an empty one
//!   (or one holding only `cache/` and `.lock`), or one whose `FORMAT` file reads
//!   `otb-store-1`; anything else is `StoreErrorKind::NotAStore` and is not touched.
//! * Nothing is deleted implicitly, and only paths of the store's own shape are ever
//!   deleted: staging directories named `<stage>-<short key>-<pid>-<nanos>` in `tmp/`
//!   (on a read-write open), and in `otb gc` entry directories `<stage>/<64 hex>/`
//!   holding only `manifest.json` and `*.parquet`, and quarantined entries. Anything
//!   else is left alone and listed ([`GcReport::left_alone`]).
//! * `gc` takes a [`KeepSet`] built from complete walks only: if a walk stopped early
//!   (a corrupt upstream, a node that would run) it refuses, since it cannot know
//!   what that experiment's downstream nodes still need.
//!
//! # A store on object storage
//!
//! A store may live on object storage (`s3://bucket/prefix`, `file:///path`): it is
//! used through a local store, its mirror, which fetches what it misses and publishes
//! what it commits with a create-only manifest write, so each key has one winner
//! ([`remote`]). Leases and worker records then live on the object store
//! ([`lease::Board`]); the call cache and journals stay in the mirror.
//!
//! # Known limitations
//!
//! * Code versions are bumped by hand; forgetting to bump one reuses stale outputs.
//! * Verification hashes every table on lookup, so a cached rerun costs one read of
//!   the stored bytes (measured by `make bench`).

// `#[derive(Row)]` names `::pipeline::...`, which must resolve here too.
extern crate self as pipeline;

pub mod clock;
pub mod digest;
pub mod engine;
pub mod error;
pub mod exec;
mod fsio;
pub mod gc;
pub mod journal;
pub mod key;
mod layout;
pub mod lease;
pub mod manifest;
pub mod remote;
pub mod store;
pub mod table;

pub use digest::Digest;
pub use engine::{Call, Handle, Input, Mode, NodeReport, NodeState, Seq, Session, StageCtx};
pub use error::{Classify, ErrorClass, StageError, StageErrorKind, StoreError, StoreErrorKind};
pub use exec::{Node, Params, Schedule};
pub use fsio::write_atomic;
pub use gc::{GcReport, KeepSet};
pub use journal::Journal;
pub use key::{Change, KeyComponents};
/// `#[derive(Row)]`: see the `row_derive` crate for its attributes.
pub use row_derive::Row;
pub use store::{Access, Entry, Lookup, Manifest, Staging, Store, Usage};
pub use table::{col, ColType, Column, Row, TableMeta};
