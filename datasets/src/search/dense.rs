//! Dense retrieval generic over an encoder: the project's MiniLM (in `textsim`) plugs in
//! through [`DenseEncoder`]; this crate does not depend on it.
//!
//! Document vectors ([`super::Document::contents`], encoded in batches) and query vectors
//! are L2-normalised here, so scores are cosine similarities whatever the encoder returns;
//! search is exhaustive (a dot product with every document), which is exact and fast
//! enough for corpora of this size.

use super::corpus::Corpus;
use super::tools::{rank, Hit, Retriever};
use super::SearchError;

/// Turns texts into vectors of one dimension.
pub trait DenseEncoder {
    /// The encoder's error.
    type Error: std::fmt::Display;

    /// One vector per text, in order.
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Self::Error>;
}

/// Normalised document vectors, row per corpus ordinal.
#[derive(Debug, Clone, PartialEq)]
pub struct DenseIndex {
    dim: usize,
    vectors: Vec<f32>,
}

fn normalise(v: &mut [f32]) {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
}

impl DenseIndex {
    /// Encodes every document of `corpus`, `batch` at a time.
    pub fn build<E: DenseEncoder>(
        corpus: &Corpus,
        encoder: &E,
        batch: usize,
    ) -> Result<Self, SearchError> {
        Self::build_with_progress(corpus, encoder, batch, &|_, _| {})
    }

    /// [`DenseIndex::build`], calling `progress(done, total)` after each batch
    /// (embedding a corpus takes minutes on a CPU).
    pub fn build_with_progress<E: DenseEncoder>(
        corpus: &Corpus,
        encoder: &E,
        batch: usize,
        progress: &dyn Fn(usize, usize),
    ) -> Result<Self, SearchError> {
        let contents: Vec<String> = corpus.docs().iter().map(|d| d.contents()).collect();
        let mut rows = Vec::with_capacity(contents.len());
        for chunk in contents.chunks(batch.max(1)) {
            let texts: Vec<&str> = chunk.iter().map(String::as_str).collect();
            let out = encoder
                .encode(&texts)
                .map_err(|e| SearchError::Encoder(e.to_string()))?;
            if out.len() != texts.len() {
                return Err(SearchError::Encoder(format!(
                    "returned {} vectors for {} texts",
                    out.len(),
                    texts.len()
                )));
            }
            rows.extend(out);
            progress(rows.len(), contents.len());
        }
        Self::from_vectors(rows)
    }

    /// Builds the index from precomputed document vectors (row per corpus ordinal), e.g.
    /// read back from an embedding cache. All rows must have one non-zero dimension.
    pub fn from_vectors(rows: Vec<Vec<f32>>) -> Result<Self, SearchError> {
        let dim = rows.first().map_or(0, Vec::len);
        if rows.iter().any(|r| r.len() != dim) || (dim == 0 && !rows.is_empty()) {
            return Err(SearchError::Encoder(
                "document vectors must all have the same, non-zero dimension".into(),
            ));
        }
        let mut vectors = Vec::with_capacity(rows.len() * dim);
        for mut r in rows {
            normalise(&mut r);
            vectors.extend(r);
        }
        Ok(DenseIndex { dim, vectors })
    }

    /// Vector dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.vectors.len().checked_div(self.dim).unwrap_or(0)
    }

    /// True when no document is indexed.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The normalised vector of document `ord`.
    pub fn vector(&self, ord: usize) -> Option<&[f32]> {
        self.vectors.get(ord * self.dim..(ord + 1) * self.dim)
    }

    /// The best `limit` documents for a query vector (cosine).
    pub fn nearest(&self, query: &[f32], limit: usize) -> Result<Vec<Hit>, SearchError> {
        if query.len() != self.dim {
            return Err(SearchError::Encoder(format!(
                "query vector has dimension {}, documents {}",
                query.len(),
                self.dim
            )));
        }
        let mut q = query.to_vec();
        normalise(&mut q);
        let hits = self
            .vectors
            .chunks_exact(self.dim.max(1))
            .enumerate()
            .map(|(ord, row)| Hit {
                ord,
                score: row.iter().zip(&q).map(|(a, b)| a * b).sum(),
            })
            .collect();
        Ok(rank(hits, limit))
    }
}

/// A dense retriever: an encoder for queries and the document index it built.
pub struct DenseSearcher<E> {
    encoder: E,
    index: DenseIndex,
}

impl<E: DenseEncoder> DenseSearcher<E> {
    /// Pairs an encoder with an index of the same corpus built by the same encoder.
    pub fn new(encoder: E, index: DenseIndex) -> Self {
        DenseSearcher { encoder, index }
    }

    /// Encodes `corpus` with `encoder` and returns the searcher.
    pub fn build(corpus: &Corpus, encoder: E, batch: usize) -> Result<Self, SearchError> {
        let index = DenseIndex::build(corpus, &encoder, batch)?;
        Ok(DenseSearcher { encoder, index })
    }

    /// The document index.
    pub fn index(&self) -> &DenseIndex {
        &self.index
    }
}

impl<E: DenseEncoder> Retriever for DenseSearcher<E> {
    fn retrieve(&self, query: &str, limit: usize) -> Result<Vec<Hit>, SearchError> {
        if query.trim().is_empty() {
            return Ok(Vec::new());
        }
        let mut out = self
            .encoder
            .encode(&[query])
            .map_err(|e| SearchError::Encoder(e.to_string()))?;
        let q = out
            .pop()
            .filter(|_| out.is_empty())
            .ok_or_else(|| SearchError::Encoder("expected one vector for one query".into()))?;
        self.index.nearest(&q, limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::corpus::{test_docs, Source};

    /// Bag of letters a..e: a toy encoder whose geometry is easy to reason about.
    struct Letters;

    impl DenseEncoder for Letters {
        type Error = String;
        fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
            Ok(texts
                .iter()
                .map(|t| {
                    let mut v = vec![0.0; 5];
                    for c in t.chars() {
                        if let Some(i) = "abcde".find(c) {
                            v[i] += 1.0;
                        }
                    }
                    v
                })
                .collect())
        }
    }

    struct Broken;

    impl DenseEncoder for Broken {
        type Error = String;
        fn encode(&self, _: &[&str]) -> Result<Vec<Vec<f32>>, String> {
            Ok(vec![vec![1.0]])
        }
    }

    fn corpus() -> Corpus {
        let rows = ["aaa", "aab", "eee", "ddd c"].map(|t| ("other", t));
        Corpus::new(Source::Substitute, test_docs(&rows)).unwrap()
    }

    #[test]
    fn nearest_by_cosine() {
        let s = DenseSearcher::build(&corpus(), Letters, 3).unwrap();
        assert_eq!(s.index().len(), 4);
        let hits = s.retrieve("a", 2).unwrap();
        assert_eq!(hits[0].ord, 0);
        assert!((hits[0].score - 1.0).abs() < 1e-6);
        assert_eq!(hits[1].ord, 1);
        assert!((hits[1].score - 2.0 / 5f32.sqrt()).abs() < 1e-6);
        assert_eq!(s.retrieve("e", 1).unwrap()[0].ord, 2);
        assert!(s.retrieve("  ", 3).unwrap().is_empty());
    }

    #[test]
    fn plugs_into_the_tools() {
        use crate::search::tools::{SearchEnv, ToolSet, ToolSetConfig};
        use crate::search::DomainSet;
        let c = corpus();
        let s = DenseSearcher::build(&c, Letters, 8).unwrap();
        let tools = ToolSet::new(&DomainSet::substitute(), ToolSetConfig::default());
        let env = SearchEnv::new(&c, &s, tools);
        let out = env
            .execute("tool_10", &serde_json::json!({"query": "dd"}))
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(v[0]["docid"], "d3");
        assert_eq!(v.as_array().unwrap().len(), 4);
    }

    #[test]
    fn shape_errors_are_reported() {
        let e = DenseIndex::build(&corpus(), &Broken, 2).unwrap_err();
        assert!(
            e.to_string().contains("returned 1 vectors for 2 texts"),
            "{e}"
        );
        let e = DenseIndex::from_vectors(vec![vec![1.0, 0.0], vec![1.0]]).unwrap_err();
        assert!(e.to_string().contains("same"), "{e}");
        let idx = DenseIndex::from_vectors(vec![vec![3.0, 4.0]]).unwrap();
        assert_eq!(idx.vector(0), Some(&[0.6, 0.8][..]));
        assert!(idx.nearest(&[1.0], 1).is_err());
    }
}
