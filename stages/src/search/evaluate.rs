//! Stage `search-evaluate`: accuracy (exact match or the judge's verdicts) with a
//! bootstrap interval, mean F1 and tool calls per question.

use super::rows::{EpisodeRow, SearchScoreRow};

/// The stage name.
pub const EVALUATE_STAGE: &str = "search-evaluate";
/// The stage version.
pub const VERSION: u32 = 1;

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
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let (lo, hi) = datasets::stats::bootstrap_mean_ci(&correct, 1000, 0);
    SearchScoreRow {
        questions: n as i64,
        accuracy: mean(&correct),
        exact_accuracy: mean(&exact),
        judge: verdicts.map_or("exact match", |(j, _)| j).to_string(),
        ci95_lo: if n == 0 { 0.0 } else { lo },
        ci95_hi: if n == 0 { 0.0 } else { hi },
        mean_f1: mean(&eps.iter().map(|e| e.f1).collect::<Vec<_>>()),
        tool_calls_per_question: mean(&eps.iter().map(|e| e.tool_calls as f64).collect::<Vec<_>>()),
        source: source.to_string(),
    }
}
