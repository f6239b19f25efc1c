//! Stage `search-questions`: the train and test questions (generated from the
//! substitute corpus, or a user's BrowseComp-Plus queries decrypted and split).

use super::config::bad_file;
use super::config::{DataSource, RealFiles, SearchExperiment};
use super::corpus::{file_digest, Corpus};
use super::rows::QuestionRow;
use crate::InputError;
use datasets::search::questions::{self, GenConfig};
use datasets::search::Question;
use pipeline::{StageCtx, StageError};
use serde_json::{json, Value};
use std::path::PathBuf;

/// The stage name.
pub const QUESTIONS_STAGE: &str = "search-questions";
/// The questions' stage: 2 since generated questions carry no word of their answer and
/// name the answer's topic only with `collection_hint`, and BrowseComp-Plus rows are
/// decrypted whole (evidence and gold documents kept).
pub const QUESTIONS_VERSION: u32 = 2;

/// The stage of the training split alone: what an external method's stage reads
/// (its `play` questions), so that no test question is among its inputs. Made only
/// when the experiment lists an external method.
pub const TRAIN_QUESTIONS_STAGE: &str = "search-train-questions";
/// `search-train-questions`' version.
pub const TRAIN_QUESTIONS_VERSION: u32 = 1;

/// `search-train-questions`' key: which rows of `search-questions` it keeps.
pub(super) fn train_key() -> Value {
    json!({"split": "train"})
}

/// Whether a row of `search-questions` is a training question.
pub(super) fn is_train(r: &QuestionRow) -> bool {
    r.split == "train"
}

/// Stage `search-train-questions`: the training rows of input `questions`
/// (`search-questions`), in stored order; nothing else.
pub(super) fn train_questions(ctx: &mut StageCtx<'_>) -> Result<(), StageError> {
    let rows: Vec<QuestionRow> = ctx.read("questions")?;
    let train: Vec<QuestionRow> = rows.into_iter().filter(is_train).collect();
    ctx.write(&train)?;
    Ok(())
}

/// Stage `search-questions`: the questions of both splits, at most the configured
/// count each.
pub(super) fn build(
    ctx: &mut StageCtx<'_>,
    s: &SearchExperiment,
    corpus: &Corpus,
) -> Result<(), StageError> {
    let (sub, _) = corpus.get(QUESTIONS_STAGE)?;
    let (train, test) = match &s.source {
        DataSource::Substitute => {
            let all = questions::generate(sub, &gen_config(s));
            questions::split(&all, s.seed, 0.1)
        }
        DataSource::BrowseCompPlus(f) => load_real_questions(f, Some(&sub.corpus), s.seed)
            .map_err(|e| StageError::user(QUESTIONS_STAGE, e.0))?,
    };
    let mut rows = Vec::new();
    for (split, list, n) in [
        ("train", &train, s.train_questions),
        ("test", &test, s.test_questions),
    ] {
        for q in list.iter().take(n.unwrap_or(usize::MAX)) {
            rows.push(QuestionRow {
                split: split.into(),
                question_id: q.id.clone(),
                source: q.source.clone(),
                question: q.text.clone(),
                answer: q.answer.clone(),
                aliases: q.aliases.clone(),
                evidence_docids: q.evidence_docids.clone(),
                hops: i64::from(q.hops),
                domain: q.domain.clone(),
                evidence_docs: q.evidence_docs.clone(),
                gold_docs: q.gold_docs.clone(),
            });
        }
    }
    ctx.write(&rows)?;
    Ok(())
}

/// Check, before anything is written, that a user's BrowseComp-Plus files exist and
/// that the queries decrypt with the canary (bad input, exit code 2, otherwise).
pub fn check_source(s: &SearchExperiment) -> Result<(), InputError> {
    let DataSource::BrowseCompPlus(f) = &s.source else {
        return Ok(());
    };
    for p in [&f.corpus, &f.queries, &f.categories]
        .into_iter()
        .chain(f.train_ids.iter())
        .chain(f.test_ids.iter())
    {
        if !p.is_file() {
            return Err(InputError(format!("search: {} is not a file", p.display())));
        }
    }
    datasets::search::real::CategoryMap::load(&f.categories)
        .and_then(|c| c.check(f.category_match))
        .map_err(bad_file(&f.categories))?;
    load_real_questions(f, None, s.seed).map(|_| ())
}

/// BrowseComp-Plus questions (decrypted with the canary), split by the id files or
/// 10/90 with `seed`.
pub(super) fn load_real_questions(
    f: &RealFiles,
    corpus: Option<&datasets::search::Corpus>,
    seed: u64,
) -> Result<(Vec<Question>, Vec<Question>), InputError> {
    let all = datasets::search::real::load_queries(&f.queries, f.canary.as_deref(), corpus)
        .map_err(bad_file(&f.queries))?;
    let by_ids = |p: &PathBuf| -> Result<Vec<Question>, InputError> {
        let ids = datasets::search::real::load_split_ids(p).map_err(bad_file(p))?;
        ids.iter()
            .map(|id| {
                all.iter().find(|q| &q.id == id).cloned().ok_or_else(|| {
                    InputError(format!(
                        "search {}: query id {id} is not in {}",
                        p.display(),
                        f.queries.display()
                    ))
                })
            })
            .collect()
    };
    match (&f.train_ids, &f.test_ids) {
        (Some(tr), Some(te)) => Ok((by_ids(tr)?, by_ids(te)?)),
        (None, None) => Ok(questions::split(&all, seed, 0.1)),
        _ => Err(InputError(
            "search: give both train_ids_file and test_ids_file, or neither".into(),
        )),
    }
}

/// The generator's settings for the substitute's questions.
fn gen_config(s: &SearchExperiment) -> GenConfig {
    GenConfig {
        collection_hint: s.collection_hint,
        ..GenConfig::default()
    }
}

/// The questions stage's key: where the corpus and the questions come from (files by
/// their sha256), the split and the counts.
pub(super) fn source_key(s: &SearchExperiment, corpus: &Value) -> Value {
    let source = match &s.source {
        DataSource::Substitute => {
            let g = gen_config(s);
            json!({
                "corpus": corpus,
                "generate": {"seed": g.seed, "one_hop": g.one_hop, "two_hop": g.two_hop, "collection_hint": g.collection_hint},
            })
        }
        DataSource::BrowseCompPlus(f) => json!({
            "browsecomp_plus": {
                "corpus": corpus,
                "queries": file_digest(&f.queries),
                "canary": f.canary.as_deref().map(|c| pipeline::Digest::of_bytes(c.as_bytes()).0),
                "train_ids": f.train_ids.as_deref().map(file_digest),
                "test_ids": f.test_ids.as_deref().map(file_digest),
            }
        }),
    };
    json!({"source": source, "split_seed": s.seed, "train": s.train_questions, "test": s.test_questions})
}
