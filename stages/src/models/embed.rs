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

/// `OTB_MINILM_DIR`'s files, when they are not the pinned ones
/// ([`textsim::model::override_identity`]).
fn minilm_override() -> Result<Option<String>, Failure> {
    textsim::model::override_identity().map_err(|e| Failure::user(format!("OTB_MINILM_DIR: {e}")))
}

/// What the keys of stages that embed hold of the embedder `name`: the name, and for
/// `minilm` with `OTB_MINILM_DIR` naming other files than the pinned ones, their
/// identity, so that another encoder's results are never reused as MiniLM's.
pub fn embedder_key(name: &str) -> Result<String, Failure> {
    if name != "minilm" {
        return Ok(name.to_string());
    }
    Ok(match minilm_override()? {
        Some(id) => format!("minilm (OTB_MINILM_DIR files of {id})"),
        None => name.to_string(),
    })
}

/// Serialises an embedder's name as [`embedder_key`] (for key structs).
pub fn serialize_embedder<S: serde::Serializer>(name: &str, s: S) -> Result<S::Ok, S::Error> {
    let key = embedder_key(name).map_err(|e| serde::ser::Error::custom(e.message))?;
    s.serialize_str(&key)
}

/// The embedder an experiment names (`minilm` or `bag-of-words`); MiniLM vectors are
/// cached per text under `cache_dir` (in a file of their own for an
/// `OTB_MINILM_DIR` of other files than the pinned ones).
pub fn make_embedder(name: &str, cache_dir: &Path) -> Result<Box<dyn Embed>, Failure> {
    match name {
        "bag-of-words" => Ok(Box::new(BagOfWords)),
        "minilm" => {
            let file = match minilm_override()? {
                None => "minilm.bin".to_string(),
                Some(id) => format!("minilm-{id}.bin"),
            };
            // The model files come from a pinned wheel and the vectors' cache is the
            // store's: neither failing is the user's input.
            let model = textsim::Embedder::load_default()
                .map_err(|e| Failure::infra(format!("embedder minilm: {e}")))?;
            let cached = textsim::CachedEmbedder::new(model, cache_dir.join(file))
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
