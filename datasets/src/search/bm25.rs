//! BM25 over a corpus: an inverted index of this crate's own, built once into a directory
//! the caller gives, opened read-only afterwards.
//!
//! Each document's [`Document::contents`](super::Document::contents) (title line and text)
//! is analysed into terms ([`analyze`]): split on characters that are not alphanumeric,
//! tokens of 40 bytes or more dropped, lowercased, stemmed with the English Snowball
//! stemmer (`frostem`). A query is analysed the same way and becomes a disjunction of its
//! distinct terms, so any text is a valid query (there is no query syntax to get wrong).
//!
//! Scores are BM25 with k1 = 1.2 and b = 0.75 in `f32`: idf = ln(1 + (N - n + 0.5) /
//! (n + 0.5)) over corpus-wide counts, a document's length (its number of terms) rounded
//! down to one of 256 values by the one-byte code Lucene calls `SmallFloat.intToByte4`,
//! the average length unrounded, a document's score the sum of its terms' scores in query
//! order. These are tantivy's `en_stem` analysis and BM25, which this index replaced (a
//! full search engine was a fifth of the release build for one small corpus):
//! `tests/bm25_reference.rs` holds the index to tantivy's analyses and rankings, recorded
//! by `examples/bm25_reference.rs` (feature `tantivy-reference`).
//!
//! The directory holds [`INDEX_FILE`] (the index, written and synced first) and
//! [`META_FILE`] (the corpus fingerprint it was built for, written last: a directory
//! without it is an unfinished build); opening the index for any other corpus is an
//! error.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};

use frostem::{Algorithm, Stemmer};
use rayon::prelude::*;
use serde_json::json;

use super::corpus::Corpus;
use super::tools::{rank, Hit, Retriever};
use super::{io_err, SearchError};

/// The file beside the index that ties it to its corpus.
pub const META_FILE: &str = "otb-index.json";
/// The index itself.
pub const INDEX_FILE: &str = "bm25.bin";
/// The index format; part of the metadata and of the first bytes of [`INDEX_FILE`].
pub const FORMAT: &str = "otb-bm25-2";
const MAGIC: &[u8; 8] = b"OTBBM25\x02";
const K1: f32 = 1.2;
const B: f32 = 0.75;
/// Tokens of this many bytes or more (before lowercasing) are dropped.
const MAX_TOKEN_BYTES: usize = 40;
/// Documents analysed together (in parallel) before their postings are appended.
const CHUNK: usize = 2048;

/// The analysed terms of `text` in order, repeats kept (see the module docs).
pub fn analyze(text: &str) -> Vec<String> {
    let stemmer = Stemmer::new(Algorithm::English);
    let mut terms = Vec::new();
    each_term(&stemmer, text, |t| terms.push(t.to_string()));
    terms
}

fn each_term(stemmer: &Stemmer, text: &str, mut f: impl FnMut(&str)) {
    let mut lower = String::new();
    for token in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty() && t.len() < MAX_TOKEN_BYTES)
    {
        lower.clear();
        if token.is_ascii() {
            lower.push_str(token);
            lower.make_ascii_lowercase();
        } else {
            // Character by character (no final-sigma rule), as the index always did.
            lower.extend(token.chars().flat_map(char::to_lowercase));
        }
        f(&stemmer.stem(&lower));
    }
}

/// The document length a one-byte code stands for (Lucene's `SmallFloat.byte4ToInt`):
/// 0..=23 exactly, then four significant bits and an exponent.
fn code_length(code: u8) -> u32 {
    const EXACT: u8 = 24;
    if code < EXACT {
        return u32::from(code);
    }
    let i = u32::from(code - EXACT);
    let bits = i & 7;
    let shift = (i >> 3) as i32 - 1;
    let long = if shift < 0 { bits } else { (bits | 8) << shift };
    u32::from(EXACT) + long
}

/// The largest code whose length is at most `len`.
fn length_code(len: u32) -> u8 {
    let (mut lo, mut hi) = (0u16, 255u16);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if code_length(mid as u8) <= len {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    lo as u8
}

fn put_varint(out: &mut Vec<u8>, mut v: u32) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8], at: &mut usize) -> Option<u32> {
    let mut v = 0u32;
    for shift in (0..35).step_by(7) {
        let b = *bytes.get(*at)?;
        *at += 1;
        v |= u32::from(b & 0x7f).checked_shl(shift)?;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// One term's postings while the index is built.
#[derive(Default)]
struct Postings {
    docs: u32,
    last: u32,
    bytes: Vec<u8>,
}

impl Postings {
    fn push(&mut self, doc: u32, freq: u32) {
        let delta = if self.docs == 0 { doc } else { doc - self.last };
        put_varint(&mut self.bytes, delta);
        put_varint(&mut self.bytes, freq);
        self.docs += 1;
        self.last = doc;
    }
}

/// A document's length and its distinct terms with their frequencies.
fn doc_terms(stemmer: &Stemmer, text: &str) -> (u32, Vec<(String, u32)>) {
    let mut freqs: HashMap<String, u32> = HashMap::new();
    let mut len = 0u32;
    each_term(stemmer, text, |t| {
        len = len.saturating_add(1);
        match freqs.get_mut(t) {
            Some(n) => *n += 1,
            None => {
                freqs.insert(t.to_string(), 1);
            }
        }
    });
    (len, freqs.into_iter().collect())
}

/// A BM25 index opened for searching.
pub struct Bm25Index {
    dir: PathBuf,
    stemmer: Stemmer,
    /// The whole of [`INDEX_FILE`].
    data: Vec<u8>,
    n_docs: u32,
    n_terms: usize,
    /// Offsets into `data` of the sections.
    codes: usize,
    term_ends: usize,
    doc_freqs: usize,
    post_ends: usize,
    terms: usize,
    postings: usize,
    /// Per length code, k1 * (1 - b + b * length / average length).
    norm: [f32; 256],
}

impl std::fmt::Debug for Bm25Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25Index")
            .field("dir", &self.dir)
            .field("docs", &self.n_docs)
            .field("terms", &self.n_terms)
            .finish()
    }
}

impl Bm25Index {
    /// Indexes `corpus` into `dir`, which must be absent or empty, and opens the result.
    /// The metadata file is written last, so a directory without it is an unfinished
    /// build.
    pub fn build(corpus: &Corpus, dir: &Path) -> Result<Self, SearchError> {
        fs::create_dir_all(dir).map_err(io_err(dir))?;
        if fs::read_dir(dir).map_err(io_err(dir))?.next().is_some() {
            return Err(SearchError::Index {
                path: dir.to_path_buf(),
                detail: "the directory to build the index in is not empty".into(),
            });
        }
        let docs = corpus.docs();
        let n_docs = u32::try_from(docs.len()).map_err(|_| SearchError::Index {
            path: dir.to_path_buf(),
            detail: format!("{} documents are more than an index holds", docs.len()),
        })?;
        let stemmer = Stemmer::new(Algorithm::English);
        let mut postings: HashMap<String, Postings> = HashMap::new();
        let mut codes = Vec::with_capacity(docs.len());
        let mut total_terms = 0u64;
        for (c, chunk) in docs.chunks(CHUNK).enumerate() {
            let analysed: Vec<_> = chunk
                .par_iter()
                .map(|d| doc_terms(&stemmer, &d.contents()))
                .collect();
            for (i, (len, terms)) in analysed.into_iter().enumerate() {
                let doc = (c * CHUNK + i) as u32;
                codes.push(length_code(len));
                total_terms += u64::from(len);
                for (term, freq) in terms {
                    postings.entry(term).or_default().push(doc, freq);
                }
            }
        }
        let mut terms: Vec<(String, Postings)> = postings.into_iter().collect();
        // `String`'s order is its bytes' order, which `find` searches by.
        terms.sort_unstable_by(|a, b| a.0.cmp(&b.0));

        let path = dir.join(INDEX_FILE);
        let write = || -> std::io::Result<()> {
            let mut out = std::io::BufWriter::new(fs::File::create(&path)?);
            out.write_all(MAGIC)?;
            for n in [u64::from(n_docs), total_terms, terms.len() as u64] {
                out.write_all(&n.to_le_bytes())?;
            }
            out.write_all(&codes)?;
            write_ends(&mut out, terms.iter().map(|(t, _)| t.len()))?;
            for (_, p) in &terms {
                out.write_all(&p.docs.to_le_bytes())?;
            }
            write_ends(&mut out, terms.iter().map(|(_, p)| p.bytes.len()))?;
            for (t, _) in &terms {
                out.write_all(t.as_bytes())?;
            }
            for (_, p) in &terms {
                out.write_all(&p.bytes)?;
            }
            out.into_inner().map_err(|e| e.into_error())?.sync_all()
        };
        write().map_err(io_err(&path))?;
        drop(terms);

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
        let path = dir.join(INDEX_FILE);
        let data = fs::read(&path).map_err(io_err(&path))?;
        let bad = |detail: String| SearchError::Index {
            path: path.clone(),
            detail,
        };
        let header = MAGIC.len() + 24;
        if data.len() < header || &data[..MAGIC.len()] != MAGIC {
            return Err(bad(format!("not an index of format {FORMAT}")));
        }
        let word = |i: usize| read_u64(&data, MAGIC.len() + 8 * i);
        let (docs, total_terms, n_terms) = (word(0), word(1), word(2));
        if docs != n_docs as u64 {
            return Err(bad(format!("holds {docs} documents, the corpus {n_docs}")));
        }
        // Section sizes, each checked against the file before any is read.
        let too_big = || bad("section sizes exceed the file".into());
        let n_terms = usize::try_from(n_terms).map_err(|_| too_big())?;
        // Where the section after one of `n_terms` entries of `width` bytes at `start` begins.
        let after = |start: usize, width: usize| {
            n_terms
                .checked_mul(width)
                .and_then(|n| n.checked_add(start))
                .ok_or_else(too_big)
        };
        let codes = header;
        let term_ends = codes + n_docs;
        let doc_freqs = after(term_ends, 8)?;
        let post_ends = after(doc_freqs, 4)?;
        let terms = after(post_ends, 8)?;
        if terms > data.len() {
            return Err(too_big());
        }
        let last = |section: usize| {
            if n_terms == 0 {
                0
            } else {
                read_u64(&data, section + 8 * (n_terms - 1))
            }
        };
        let postings = usize::try_from(last(term_ends))
            .ok()
            .and_then(|n| n.checked_add(terms))
            .ok_or_else(too_big)?;
        let end = usize::try_from(last(post_ends))
            .ok()
            .and_then(|n| n.checked_add(postings))
            .ok_or_else(too_big)?;
        if end != data.len() {
            return Err(bad(format!(
                "{} bytes where the sections make {end}",
                data.len()
            )));
        }
        let average = total_terms as f32 / n_docs.max(1) as f32;
        let mut norm = [0f32; 256];
        for (code, n) in norm.iter_mut().enumerate() {
            *n = K1 * (1.0 - B + B * code_length(code as u8) as f32 / average);
        }
        Ok(Bm25Index {
            dir: dir.to_path_buf(),
            stemmer: Stemmer::new(Algorithm::English),
            data,
            n_docs: n_docs as u32,
            n_terms,
            codes,
            term_ends,
            doc_freqs,
            post_ends,
            terms,
            postings,
            norm,
        })
    }

    /// The index directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The distinct analysed terms of `query`, in order of first occurrence.
    pub fn query_terms(&self, query: &str) -> Vec<String> {
        let mut seen = HashSet::new();
        let mut terms = Vec::new();
        each_term(&self.stemmer, query, |t| {
            if seen.insert(t.to_string()) {
                terms.push(t.to_string());
            }
        });
        terms
    }

    /// The byte range `[start, end)` that entry `i` of an ends section names, relative
    /// to its blob.
    fn range(&self, ends: usize, i: usize) -> (usize, usize) {
        let start = if i == 0 {
            0
        } else {
            read_u64(&self.data, ends + 8 * (i - 1)) as usize
        };
        (start, read_u64(&self.data, ends + 8 * i) as usize)
    }

    fn term(&self, i: usize) -> &[u8] {
        let (s, e) = self.range(self.term_ends, i);
        self.data
            .get(self.terms + s..self.terms + e)
            .unwrap_or_default()
    }

    /// The entry of `term` in the sorted term table.
    fn find(&self, term: &str) -> Option<usize> {
        let (mut lo, mut hi) = (0, self.n_terms);
        while lo < hi {
            let mid = (lo + hi) / 2;
            match self.term(mid).cmp(term.as_bytes()) {
                Ordering::Less => lo = mid + 1,
                Ordering::Greater => hi = mid,
                Ordering::Equal => return Some(mid),
            }
        }
        None
    }

    /// Adds entry `i`'s BM25 scores to `scores`, recording documents seen first.
    fn score_term(
        &self,
        i: usize,
        scores: &mut [f32],
        touched: &mut Vec<u32>,
    ) -> Result<(), SearchError> {
        let doc_freq = u32::from_le_bytes(
            self.data[self.doc_freqs + 4 * i..self.doc_freqs + 4 * i + 4]
                .try_into()
                .unwrap_or_default(),
        );
        let corrupt = || SearchError::Index {
            path: self.dir.join(INDEX_FILE),
            detail: format!(
                "the postings of `{}` are damaged",
                String::from_utf8_lossy(self.term(i))
            ),
        };
        if doc_freq == 0 || doc_freq > self.n_docs {
            return Err(corrupt());
        }
        let x = ((self.n_docs - doc_freq) as f32 + 0.5) / (doc_freq as f32 + 0.5);
        let weight = (1.0 + x).ln() * (1.0 + K1);
        let (s, e) = self.range(self.post_ends, i);
        let bytes = self
            .data
            .get(self.postings + s..self.postings + e)
            .ok_or_else(corrupt)?;
        let (mut at, mut doc) = (0usize, 0u32);
        for n in 0..doc_freq {
            let delta = get_varint(bytes, &mut at).ok_or_else(corrupt)?;
            let freq = get_varint(bytes, &mut at).ok_or_else(corrupt)?;
            doc = if n == 0 {
                delta
            } else {
                doc.checked_add(delta)
                    .filter(|_| delta > 0)
                    .ok_or_else(corrupt)?
            };
            if doc >= self.n_docs || freq == 0 {
                return Err(corrupt());
            }
            let code = self.data[self.codes + doc as usize];
            let tf = freq as f32;
            let score = weight * (tf / (tf + self.norm[code as usize]));
            let slot = &mut scores[doc as usize];
            if *slot == 0.0 {
                touched.push(doc);
            }
            *slot += score;
        }
        if at != bytes.len() {
            return Err(corrupt());
        }
        Ok(())
    }
}

/// A blob's entries by where each ends, as the index file's ends sections hold them.
fn write_ends(out: &mut impl Write, lens: impl Iterator<Item = usize>) -> std::io::Result<()> {
    let mut end = 0u64;
    for n in lens {
        end += n as u64;
        out.write_all(&end.to_le_bytes())?;
    }
    Ok(())
}

fn read_u64(data: &[u8], at: usize) -> u64 {
    data.get(at..at + 8)
        .and_then(|b| b.try_into().ok())
        .map_or(0, u64::from_le_bytes)
}

impl Retriever for Bm25Index {
    fn retrieve(&self, query: &str, limit: usize) -> Result<Vec<Hit>, SearchError> {
        let terms = self.query_terms(query);
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let mut scores = vec![0f32; self.n_docs as usize];
        let mut touched = Vec::new();
        for t in &terms {
            if let Some(i) = self.find(t) {
                self.score_term(i, &mut scores, &mut touched)?;
            }
        }
        let hits: Vec<Hit> = touched
            .into_iter()
            .map(|d| Hit {
                ord: d as usize,
                score: scores[d as usize],
            })
            .collect();
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
    fn length_codes_round_down_to_lucenes_one_byte_lengths() {
        let lengths: Vec<u32> = (0..=255).map(code_length).collect();
        assert!(lengths.windows(2).all(|w| w[0] < w[1]));
        assert_eq!(lengths[..41], (0..=40).collect::<Vec<_>>()[..]);
        assert_eq!(lengths[41..48], [42, 44, 46, 48, 50, 52, 54]);
        assert_eq!(lengths[255], 2_013_265_944);
        for (len, code) in [
            (0, 0),
            (40, 40),
            (41, 40),
            (43, 41),
            (1000, length_code(1000)),
        ] {
            assert_eq!(length_code(len), code);
            assert!(code_length(code) <= len);
            assert!(code == 255 || code_length(code + 1) > len);
        }
        assert_eq!(length_code(u32::MAX), 255);
    }

    #[test]
    fn analysis_splits_drops_lowercases_and_stems() {
        assert_eq!(
            analyze("Rivers, river; PAINTING -- the painter's 2nd"),
            ["river", "river", "paint", "the", "painter", "s", "2nd"]
        );
        let long = "a".repeat(MAX_TOKEN_BYTES);
        let short = "b".repeat(MAX_TOKEN_BYTES - 1);
        assert_eq!(analyze(&format!("{long} {short}")), [short]);
        assert_eq!(
            analyze("ΟΔΟΣ Straße Ünïcode_x"),
            ["οδοσ", "straße", "ünïcode", "x"]
        );
        assert!(analyze("  ,;: -- ").is_empty());
    }

    #[test]
    fn varints_round_trip_and_refuse_truncation() {
        let mut buf = Vec::new();
        for v in [0, 1, 127, 128, 300, u32::MAX] {
            put_varint(&mut buf, v);
        }
        let mut at = 0;
        for v in [0, 1, 127, 128, 300, u32::MAX] {
            assert_eq!(get_varint(&buf, &mut at), Some(v));
        }
        assert_eq!(get_varint(&buf, &mut at), None);
        assert_eq!(get_varint(&[0x80, 0x80], &mut 0), None);
        assert_eq!(get_varint(&[0xff; 6], &mut 0), None);
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
            idx.query_terms("Rivers, river; PAINTING"),
            ["river", "paint"]
        );
        let hits = idx.retrieve("river delta", 10).unwrap();
        assert_eq!(hits.iter().map(|h| h.ord).collect::<Vec<_>>(), [1, 0]);
        assert!(hits[0].score > hits[1].score);
        assert!(idx.retrieve("\"unbalanced AND (", 10).unwrap().is_empty());
        assert!(idx.retrieve("", 10).unwrap().is_empty());
        assert!(idx.retrieve("zebra", 10).unwrap().is_empty());
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

    #[test]
    fn ties_go_to_the_lower_ordinal_and_limits_cut_after_ranking() {
        let c = corpus(&["delta", "other words", "delta", "delta", "delta delta"]);
        let dir = tmp("ties");
        let idx = Bm25Index::build(&c, &dir).unwrap();
        let ords = |limit| {
            idx.retrieve("delta", limit)
                .unwrap()
                .iter()
                .map(|h| h.ord)
                .collect::<Vec<_>>()
        };
        assert_eq!(ords(10), [4, 0, 2, 3]);
        assert_eq!(ords(2), [4, 0]);
        assert_eq!(ords(3), [4, 0, 2]);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_damaged_index_file_is_an_error_not_a_panic() {
        let c = corpus(&["The painter lived by the river.", "A river delta."]);
        let dir = tmp("damaged");
        Bm25Index::build(&c, &dir).unwrap();
        let path = dir.join(INDEX_FILE);
        let good = fs::read(&path).unwrap();
        // Cut short, grown, the magic changed, every byte of the postings flipped.
        let mut cases = vec![
            good[..good.len() - 1].to_vec(),
            [good.as_slice(), b"x"].concat(),
            [b"NOTBM25\x02".as_slice(), &good[8..]].concat(),
        ];
        for i in 1..=6 {
            let mut g = good.clone();
            let n = g.len();
            g[n - i] ^= 0xff;
            cases.push(g);
        }
        for bytes in cases {
            fs::write(&path, &bytes).unwrap();
            match Bm25Index::open(&dir, &c) {
                Err(e) => assert!(e.to_string().contains(INDEX_FILE), "{e}"),
                Ok(idx) => {
                    let _ = idx.retrieve("painter river delta lived", 10);
                }
            }
        }
        fs::remove_dir_all(&dir).unwrap();
    }
}
