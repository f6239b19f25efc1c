//! The BM25 index against tantivy's, which it replaced: `tests/data/bm25_reference.jsonl`
//! holds what tantivy 0.27 (`en_stem`, BM25, top 10 by score) made of the substitute
//! corpus (analyses of odd texts, the rankings of 250 generated questions and of 250
//! document titles), recorded by `examples/bm25_reference.rs` (feature
//! `tantivy-reference`). Here every analysis must be the same, every ranking the same
//! documents in the same order (documents may trade places only where tantivy's scores
//! are equal to within rounding), every score the same to within rounding (tantivy adds
//! a document's term scores in the order its scorers happen to be in, here in query
//! order). The wheel comes through `support/substitute.rs` (skipped, saying why, without
//! pip or PyPI).

#[path = "support/substitute.rs"]
mod substitute;

use std::path::{Path, PathBuf};

use datasets::search::bm25::analyze;
use datasets::search::{Bm25Index, Retriever};
use serde_json::Value;

/// Relative difference two `f32` sums of the same terms in another order may have.
const ROUNDING: f64 = 1e-5;

fn near(a: f64, b: f64) -> bool {
    (a - b).abs() <= ROUNDING * a.abs().max(b.abs())
}

#[test]
fn analyses_and_rankings_are_tantivys() {
    let Some(sub) = substitute::load() else {
        return;
    };
    let corpus = &sub.corpus;
    let file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/bm25_reference.jsonl");
    let text = std::fs::read_to_string(&file).unwrap();
    let mut lines = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap());
    let head = lines.next().unwrap();
    assert_eq!(
        head["corpus_fingerprint"],
        corpus.fingerprint().as_str(),
        "the reference was recorded on another corpus: rerun examples/bm25_reference.rs"
    );
    let k = head["k"].as_u64().unwrap() as usize;

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("bm25-reference-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let index = Bm25Index::build(corpus, &dir).unwrap();
    let (mut texts, mut queries, mut hits_seen) = (0, 0, 0);
    for line in lines {
        if let Some(t) = line["text"].as_str() {
            let terms: Vec<String> = serde_json::from_value(line["terms"].clone()).unwrap();
            assert_eq!(analyze(t), terms, "analysis of {t:?}");
            texts += 1;
            continue;
        }
        let q = line["query"].as_str().unwrap();
        let theirs: Vec<(usize, f64)> = line["hits"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| (h[0].as_u64().unwrap() as usize, h[1].as_f64().unwrap()))
            .collect();
        let ours = index.retrieve(q, k).unwrap();
        assert_eq!(ours.len(), theirs.len(), "number of hits for {q:?}");
        for (i, (o, t)) in ours.iter().zip(&theirs).enumerate() {
            let score = f64::from(o.score);
            // The same document, or one of equal score: tantivy ranked it elsewhere
            // at that score, or left it out at the cut with its last hit at that score.
            let last = theirs.last().map_or(0.0, |h| h.1);
            let same = o.ord == t.0
                || near(score, t.1)
                    && (near(last, score)
                        || theirs
                            .iter()
                            .any(|(ord, s)| *ord == o.ord && near(*s, score)));
            assert!(
                same && near(score, t.1),
                "{q:?}: hit {i} is {} ({score}), tantivy's {} ({})\nours    {:?}\ntantivy {theirs:?}",
                o.ord,
                t.0,
                t.1,
                ours.iter().map(|h| (h.ord, h.score)).collect::<Vec<_>>()
            );
        }
        queries += 1;
        hits_seen += ours.len();
    }
    std::fs::remove_dir_all(&dir).unwrap();
    println!("{texts} analyses, {queries} queries, {hits_seen} hits as tantivy's");
    assert!(
        texts >= 10 && queries >= 500,
        "{texts} texts, {queries} queries"
    );
}
