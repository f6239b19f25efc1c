//! Retrieval quality of a tool set on questions with known evidence: recall@k of each
//! question's answer document when its text is sent, as the query, to the tool of the
//! document's domain, to each other domain tool, and to the unfiltered search. This is how
//! the tests show that the domain structure matters.

use super::questions::Question;
use super::tools::{Retriever, SearchEnv};
use super::SearchError;

/// Recall@k of the answer documents, as fractions of the questions counted.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Recall {
    /// Questions counted.
    pub questions: usize,
    /// With the tool of the evidence document's domain.
    pub right_tool: f64,
    /// With the other domain tools (mean over those tools).
    pub wrong_tools: f64,
    /// With the unfiltered search (over all domains).
    pub search_all: f64,
}

/// Measures [`Recall`] over `questions` whose first evidence docid is in the corpus (the
/// tool set's `k` is the cut-off). `hops` keeps only questions with that many hops.
pub fn recall<R: Retriever + ?Sized>(
    env: &SearchEnv<'_, R>,
    questions: &[Question],
    hops: Option<u8>,
) -> Result<Recall, SearchError> {
    let domains: Vec<&str> = env
        .tools()
        .tools
        .iter()
        .filter_map(|t| t.domain.as_deref())
        .collect();
    let mut r = Recall::default();
    let (mut right, mut wrong, mut all) = (0usize, 0.0f64, 0usize);
    for q in questions
        .iter()
        .filter(|q| hops.is_none_or(|h| q.hops == h))
    {
        let Some(target) = q
            .evidence_docids
            .first()
            .and_then(|d| env.corpus().ordinal(d))
        else {
            continue;
        };
        let domain = env.corpus().docs()[target].domain.as_str();
        let found = |d: Option<&str>| -> Result<bool, SearchError> {
            Ok(env
                .search_domain(d, &q.text)?
                .iter()
                .any(|h| h.ord == target))
        };
        r.questions += 1;
        right += usize::from(found(Some(domain))?);
        all += usize::from(found(None)?);
        let others: Vec<&str> = domains.iter().copied().filter(|d| *d != domain).collect();
        let mut hits = 0usize;
        for d in &others {
            hits += usize::from(found(Some(d))?);
        }
        if !others.is_empty() {
            wrong += hits as f64 / others.len() as f64;
        }
    }
    if r.questions > 0 {
        let n = r.questions as f64;
        r.right_tool = right as f64 / n;
        r.wrong_tools = wrong / n;
        r.search_all = all as f64 / n;
    }
    Ok(r)
}
