//! BM25 over a corpus with tantivy: built once into a directory the caller gives, opened
//! read-only afterwards.
//!
//! Each document's [`Document::contents`](super::Document::contents) (title line and text)
//! is indexed in one field with tantivy's `en_stem` analyzer (split on non-alphanumerics,
//! drop tokens over 40 bytes, lowercase, English Snowball stemming), frequencies only (no
//! positions), with the document's ordinal in a fast field. A query is analysed the same
//! way and becomes a disjunction of its distinct terms, so any text is a valid query
//! (there is no query syntax to get wrong). Scores are tantivy's BM25 (k1 = 1.2,
//! b = 0.75) with corpus-wide statistics, so they do not depend on segmentation.
//!
//! The directory also holds `otb-index.json` naming the corpus fingerprint; opening the
//! index for any other corpus is an error.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

use serde_json::json;
use tantivy::collector::TopDocs;
use tantivy::columnar::Column;
use tantivy::directory::error::{DeleteError, LockError, OpenReadError, OpenWriteError};
use tantivy::directory::{
    Directory, DirectoryLock, FileHandle, Lock, MmapDirectory, WatchCallback, WatchHandle, WritePtr,
};
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::TokenStream;
use tantivy::{Index, IndexReader, ReloadPolicy, TantivyDocument, Term};

use super::corpus::Corpus;
use super::tools::{rank, Hit, Retriever};
use super::{io_err, SearchError};

/// The file beside the index that ties it to its corpus.
pub const META_FILE: &str = "otb-index.json";
const FORMAT: &str = "otb-bm25-1";
const CONTENTS: &str = "contents";
const ORD: &str = "ord";

/// A BM25 index opened for searching.
pub struct Bm25Index {
    dir: PathBuf,
    index: Index,
    reader: IndexReader,
    contents: Field,
    ords: Vec<Column<u64>>,
}

impl std::fmt::Debug for Bm25Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25Index").field("dir", &self.dir).finish()
    }
}

fn schema() -> (Schema, Field) {
    let mut b = Schema::builder();
    let indexing = TextFieldIndexing::default()
        .set_tokenizer("en_stem")
        .set_index_option(IndexRecordOption::WithFreqs);
    let contents = b.add_text_field(
        CONTENTS,
        TextOptions::default().set_indexing_options(indexing),
    );
    b.add_u64_field(ORD, NumericOptions::default().set_fast());
    (b.build(), contents)
}

impl Bm25Index {
    /// Indexes `corpus` into `dir`, which must be absent or empty, and opens the result.
    /// The metadata file is written last, so a directory without it is an unfinished
    /// build.
    pub fn build(corpus: &Corpus, dir: &Path) -> Result<Self, SearchError> {
        let err = index_err(dir);
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        if fs::read_dir(dir).map_err(io_err(dir))?.next().is_some() {
            return Err(SearchError::Index {
                path: dir.to_path_buf(),
                detail: "the directory to build the index in is not empty".into(),
            });
        }
        let (schema, contents) = schema();
        let ord = schema.get_field(ORD).map_err(&err)?;
        let index = Index::create_in_dir(dir, schema).map_err(&err)?;
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
        let mut writer = index
            .writer_with_num_threads::<TantivyDocument>(threads, threads * 64_000_000)
            .map_err(&err)?;
        for (i, d) in corpus.docs().iter().enumerate() {
            let mut doc = TantivyDocument::default();
            doc.add_text(contents, d.contents());
            doc.add_u64(ord, i as u64);
            writer.add_document(doc).map_err(&err)?;
        }
        writer.commit().map_err(&err)?;
        writer.wait_merging_threads().map_err(&err)?;
        // The writer leaves its (unlocked) lock files behind; a published index does not
        // need them and readers here take none.
        for lock in [".tantivy-writer.lock", ".tantivy-meta.lock"] {
            let path = dir.join(lock);
            match fs::remove_file(&path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(io_err(&path)(e)),
                _ => {}
            }
        }
        let meta = json!({
            "format": FORMAT,
            "source": corpus.source().label(),
            "docs": corpus.len(),
            "corpus_fingerprint": corpus.fingerprint(),
        });
        let path = dir.join(META_FILE);
        fs::write(&path, format!("{meta:#}\n")).map_err(io_err(&path))?;
        Self::open_unchecked(dir, corpus.len())
    }

    /// Opens an index built by [`Bm25Index::build`] for `corpus` (checked against the
    /// fingerprint it was built for). Nothing in `dir` is written.
    pub fn open(dir: &Path, corpus: &Corpus) -> Result<Self, SearchError> {
        let path = dir.join(META_FILE);
        let text = fs::read_to_string(&path).map_err(io_err(&path))?;
        let meta: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| SearchError::Malformed {
                file: path.display().to_string(),
                line: e.line(),
                message: e.to_string(),
            })?;
        let mismatch = |detail: String| SearchError::Index {
            path: dir.to_path_buf(),
            detail,
        };
        if meta["format"] != FORMAT {
            return Err(mismatch(format!(
                "format {} is not {FORMAT}",
                meta["format"]
            )));
        }
        if meta["corpus_fingerprint"] != corpus.fingerprint().as_str() {
            return Err(mismatch(format!(
                "built for another corpus ({} documents from {}), not this one ({} from {})",
                meta["docs"],
                meta["source"],
                corpus.len(),
                corpus.source().label()
            )));
        }
        Self::open_unchecked(dir, corpus.len())
    }

    fn open_unchecked(dir: &Path, n_docs: usize) -> Result<Self, SearchError> {
        let err = index_err(dir);
        let mmap = MmapDirectory::open(dir).map_err(|e| SearchError::Index {
            path: dir.to_path_buf(),
            detail: e.to_string(),
        })?;
        let index = Index::open(ReadOnlyDir(mmap)).map_err(&err)?;
        let contents = index.schema().get_field(CONTENTS).map_err(&err)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()
            .map_err(&err)?;
        let searcher = reader.searcher();
        if searcher.num_docs() as usize != n_docs {
            return Err(SearchError::Index {
                path: dir.to_path_buf(),
                detail: format!(
                    "holds {} documents, the corpus {n_docs}",
                    searcher.num_docs()
                ),
            });
        }
        let ords = searcher
            .segment_readers()
            .iter()
            .map(|s| s.fast_fields().u64(ORD))
            .collect::<Result<Vec<_>, _>>()
            .map_err(&err)?;
        Ok(Bm25Index {
            dir: dir.to_path_buf(),
            index,
            reader,
            contents,
            ords,
        })
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The distinct analysed terms of `query`, in order of first occurrence.
    pub fn query_terms(&self, query: &str) -> Result<Vec<String>, SearchError> {
        let mut analyzer = self
            .index
            .tokenizer_for_field(self.contents)
            .map_err(index_err(&self.dir))?;
        let mut stream = analyzer.token_stream(query);
        let mut seen = HashSet::new();
        let mut terms = Vec::new();
        while stream.advance() {
            let t = stream.token().text.clone();
            if seen.insert(t.clone()) {
                terms.push(t);
            }
        }
        Ok(terms)
    }
}

/// A directory that serves an existing index's files and writes nothing: tantivy's
/// readers take a lock file, which a published (possibly read-only, checksummed) index
/// directory must not grow. Nothing else writes while a published index is read, so the
/// lock is not needed.
#[derive(Debug, Clone)]
struct ReadOnlyDir(MmapDirectory);

fn read_only(path: &Path) -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::PermissionDenied,
        format!("{} is opened read-only", path.display()),
    )
}

impl Directory for ReadOnlyDir {
    fn get_file_handle(
        &self,
        path: &Path,
    ) -> Result<std::sync::Arc<dyn FileHandle>, OpenReadError> {
        self.0.get_file_handle(path)
    }

    fn delete(&self, path: &Path) -> Result<(), DeleteError> {
        Err(DeleteError::IoError {
            io_error: std::sync::Arc::new(read_only(path)),
            filepath: path.to_path_buf(),
        })
    }

    fn exists(&self, path: &Path) -> Result<bool, OpenReadError> {
        self.0.exists(path)
    }

    fn open_write(&self, path: &Path) -> Result<WritePtr, OpenWriteError> {
        Err(OpenWriteError::IoError {
            io_error: std::sync::Arc::new(read_only(path)),
            filepath: path.to_path_buf(),
        })
    }

    fn atomic_read(&self, path: &Path) -> Result<Vec<u8>, OpenReadError> {
        self.0.atomic_read(path)
    }

    fn atomic_write(&self, path: &Path, _data: &[u8]) -> std::io::Result<()> {
        Err(read_only(path))
    }

    fn sync_directory(&self) -> std::io::Result<()> {
        Ok(())
    }

    fn acquire_lock(&self, _lock: &Lock) -> Result<DirectoryLock, LockError> {
        Ok(DirectoryLock::from(Box::new(())))
    }

    fn watch(&self, _callback: WatchCallback) -> tantivy::Result<WatchHandle> {
        Ok(WatchHandle::empty())
    }
}

fn index_err(dir: &Path) -> impl Fn(tantivy::TantivyError) -> SearchError + '_ {
    move |e| SearchError::Index {
        path: dir.to_path_buf(),
        detail: e.to_string(),
    }
}

impl Retriever for Bm25Index {
    fn retrieve(&self, query: &str, limit: usize) -> Result<Vec<Hit>, SearchError> {
        let terms = self.query_terms(query)?;
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let clauses: Vec<(Occur, Box<dyn Query>)> = terms
            .iter()
            .map(|t| {
                let term = Term::from_field_text(self.contents, t);
                let q: Box<dyn Query> =
                    Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs));
                (Occur::Should, q)
            })
            .collect();
        let searcher = self.reader.searcher();
        let top = searcher
            .search(
                &BooleanQuery::new(clauses),
                &TopDocs::with_limit(limit).order_by_score(),
            )
            .map_err(index_err(&self.dir))?;
        let mut hits = Vec::with_capacity(top.len());
        for (score, addr) in top {
            let ord = self
                .ords
                .get(addr.segment_ord as usize)
                .and_then(|c| c.first(addr.doc_id))
                .ok_or_else(|| SearchError::Index {
                    path: self.dir.clone(),
                    detail: format!("document {addr:?} has no ordinal"),
                })?;
            hits.push(Hit {
                ord: ord as usize,
                score,
            });
        }
        Ok(rank(hits, limit))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::corpus::{test_docs, Source};

    fn corpus(texts: &[&str]) -> Corpus {
        let rows: Vec<(&str, &str)> = texts.iter().map(|t| ("other", *t)).collect();
        Corpus::new(Source::Substitute, test_docs(&rows)).unwrap()
    }

    fn tmp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("otb-bm25-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&d);
        d
    }

    #[test]
    fn ranks_by_bm25_and_reopens() {
        let c = corpus(&[
            "The painter lived by the river.",
            "Rivers flow into the sea; a river delta forms.",
            "Completely unrelated text about chess openings.",
        ]);
        let dir = tmp("rank");
        let idx = Bm25Index::build(&c, &dir).unwrap();
        assert_eq!(
            idx.query_terms("Rivers, river; PAINTING").unwrap(),
            ["river", "paint"]
        );
        let hits = idx.retrieve("river delta", 10).unwrap();
        assert_eq!(hits.iter().map(|h| h.ord).collect::<Vec<_>>(), [1, 0]);
        assert!(hits[0].score > hits[1].score);
        assert!(idx.retrieve("\"unbalanced AND (", 10).unwrap().is_empty());
        assert!(idx.retrieve("", 10).unwrap().is_empty());
        assert_eq!(idx.retrieve("river", 1).unwrap().len(), 1);
        drop(idx);
        let listing = || {
            let mut v: Vec<(String, u64)> = fs::read_dir(&dir)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        e.metadata().unwrap().len(),
                    )
                })
                .collect();
            v.sort();
            v
        };
        let before = listing();
        assert!(
            before.iter().all(|(n, _)| !n.ends_with(".lock")),
            "{before:?}"
        );
        let again = Bm25Index::open(&dir, &c).unwrap();
        assert_eq!(again.retrieve("river delta", 10).unwrap(), hits);
        drop(again);
        assert_eq!(listing(), before, "opening wrote into the index directory");
        let other = corpus(&["something else"]);
        let e = Bm25Index::open(&dir, &other).unwrap_err();
        assert!(e.to_string().contains("another corpus"), "{e}");
        let e = Bm25Index::build(&c, &dir).unwrap_err();
        assert!(e.to_string().contains("not empty"), "{e}");
        fs::remove_dir_all(&dir).unwrap();
    }
}
