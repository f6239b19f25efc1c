//! Sentence embedders by name (DRAFT's rules, Table 6).

use crate::baselines::{BagOfWords, Embed};
use crate::InputError;
use std::path::Path;

/// The embedder an experiment names (`minilm` or `bag-of-words`); MiniLM vectors are
/// cached per text under `cache_dir`.
pub fn make_embedder(name: &str, cache_dir: &Path) -> Result<Box<dyn Embed>, InputError> {
    match name {
        "bag-of-words" => Ok(Box::new(BagOfWords)),
        "minilm" => {
            let model = textsim::Embedder::load_default()
                .map_err(|e| InputError(format!("embedder minilm: {e}")))?;
            let cached = textsim::CachedEmbedder::new(model, cache_dir.join("minilm.bin"))
                .map_err(|e| InputError(format!("embedder minilm: {e}")))?;
            Ok(Box::new(MiniLm(cached)))
        }
        other => Err(InputError(format!(
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
