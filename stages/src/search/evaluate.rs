//! Stage `search-evaluate`: accuracy (exact match or the judge's verdicts) with a
//! bootstrap interval, mean F1 and tool calls per question.

use super::rows::{EpisodeRow, SearchScoreRow};
use crate::metrics;

/// The stage name.
pub const EVALUATE_STAGE: &str = "search-evaluate";
/// The stage version: 2 since the score counts the questions the judge gave no
/// verdict on (`unjudged`).
pub const VERSION: u32 = 2;

/// Judged accuracy with a bootstrap 95% interval (1000 resamples of the questions,
/// seeded), mean F1 and tool calls per question.
/// The scores of a set of test episodes; `verdicts` (question id -> the LLM judge's
/// verdict, `None` when its reply had none) decide accuracy when given.
pub fn score(
    eps: &[EpisodeRow],
    source: &str,
    verdicts: Option<(&str, &std::collections::HashMap<String, Option<bool>>)>,
) -> SearchScoreRow {
    let n = eps.len();
    let exact: Vec<f64> = eps.iter().map(|e| f64::from(u8::from(e.correct))).collect();
    let correct: Vec<f64> = match verdicts {
        None => exact.clone(),
        Some((_, v)) => eps
            .iter()
            .map(|e| f64::from(u8::from(v.get(&e.question_id) == Some(&Some(true)))))
            .collect(),
    };
    // A mean over no questions is 0.
    let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { metrics::mean(v) };
    let unjudged = verdicts.map_or(0, |(_, v)| {
        metrics::count(eps, |e| !matches!(v.get(&e.question_id), Some(Some(_))))
    });
    let (lo, hi) = metrics::bootstrap(&correct, 1000, 0);
    SearchScoreRow {
        questions: n as i64,
        accuracy: mean(&correct),
        exact_accuracy: mean(&exact),
        judge: verdicts.map_or("exact match", |(j, _)| j).to_string(),
        unjudged: unjudged as i64,
        ci95_lo: if n == 0 { 0.0 } else { lo },
        ci95_hi: if n == 0 { 0.0 } else { hi },
        mean_f1: mean(&eps.iter().map(|e| e.f1).collect::<Vec<_>>()),
        tool_calls_per_question: mean(&eps.iter().map(|e| e.tool_calls as f64).collect::<Vec<_>>()),
        source: source.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn episode(id: &str, correct: bool) -> EpisodeRow {
        EpisodeRow {
            question_id: id.into(),
            split: "test".into(),
            round: 0,
            model: "scripted".into(),
            steps: serde_json::json!([]),
            answer: Some("x".into()),
            forced: false,
            correct,
            f1: 0.0,
            tool_calls: 0,
            editor_text: String::new(),
            error_kind: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            reasoning_tokens: 0,
        }
    }

    /// A question the judge gave no verdict on is neither correct nor incorrect: it
    /// counts apart (`unjudged`), and not as correct.
    #[test]
    fn questions_without_a_verdict_are_counted_apart() {
        let eps: Vec<EpisodeRow> = ["a", "b", "c", "d"]
            .iter()
            .map(|id| episode(id, true))
            .collect();
        let v: HashMap<String, Option<bool>> = [
            ("a".to_string(), Some(true)),
            ("b".to_string(), Some(false)),
            ("c".to_string(), None),
        ]
        .into_iter()
        .collect();
        let s = score(&eps, "substitute", Some(("openai:judge", &v)));
        assert_eq!(s.unjudged, 2, "c had no verdict, d no row");
        assert_eq!(s.accuracy, 0.25);
        assert_eq!(s.exact_accuracy, 1.0);
        assert_eq!(score(&eps, "substitute", None).unjudged, 0);
    }
}
