//! Sentence embedders (DRAFT's rules, Table 6): the trait, a bag-of-words one for
//! scripted tests, and the embedders by name.

use crate::Failure;
use std::path::Path;

/// Sentence embeddings (DRAFT's diversity and convergence rules, Table 6).
pub trait Embed: Send + Sync {
    /// One unit-length vector per text.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String>;
}

/// A deterministic bag-of-words embedder (hashed word counts, L2-normalised) for
/// scripted tests: texts with the same words have cosine 1.
pub struct BagOfWords;

impl Embed for BagOfWords {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        Ok(texts
            .iter()
            .map(|t| {
                let mut v = vec![0f32; 64];
                for w in t
                    .split(|c: char| !c.is_alphanumeric())
                    .filter(|w| !w.is_empty())
                {
                    let h = w
                        .to_lowercase()
                        .bytes()
                        .fold(1469598103934665603u64, |h, b| {
                            (h ^ b as u64).wrapping_mul(1099511628211)
                        });
                    v[(h % 64) as usize] += 1.0;
                }
                let n = v.iter().map(|x| x * x).sum::<f32>().sqrt();
                if n > 0.0 {
                    v.iter_mut().for_each(|x| *x /= n);
                }
                v
            })
            .collect())
    }
}

/// The embedder an experiment names (`minilm` or `bag-of-words`); MiniLM vectors are
/// cached per text under `cache_dir`.
pub fn make_embedder(name: &str, cache_dir: &Path) -> Result<Box<dyn Embed>, Failure> {
    match name {
        "bag-of-words" => Ok(Box::new(BagOfWords)),
        "minilm" => {
            // The model files come from a pinned wheel and the vectors' cache is the
            // store's: neither failing is the user's input.
            let model = textsim::Embedder::load_default()
                .map_err(|e| Failure::infra(format!("embedder minilm: {e}")))?;
            let cached = textsim::CachedEmbedder::new(model, cache_dir.join("minilm.bin"))
                .map_err(|e| Failure::infra(format!("embedder minilm: {e}")))?;
            Ok(Box::new(MiniLm(cached)))
        }
        other => Err(Failure::user(format!(
            "unknown embedder `{other}` (valid: minilm, bag-of-words)"
        ))),
    }
}

struct MiniLm(textsim::CachedEmbedder);

impl Embed for MiniLm {
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.0.embed(texts).map_err(|e| e.to_string())
    }
}
