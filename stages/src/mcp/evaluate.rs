//! Stage `mcp-evaluate`: exact-match accuracy with a bootstrap interval, mean F1,
//! tool calls and failed calls per task.

use super::rows::{EpisodeRow, McpScoreRow};
use crate::metrics;

/// The stage name.
pub const EVALUATE_STAGE: &str = "mcp-evaluate";
/// The stage version.
pub const EVALUATE_VERSION: u32 = 1;

/// The scores of a set of test episodes: accuracy by normalised exact match with a
/// bootstrap 95% interval (1000 resamples of the tasks, seed 0), mean token F1, tool
/// calls and failed calls per task. No episode: every number 0.
pub fn score(eps: &[EpisodeRow]) -> McpScoreRow {
    let n = eps.len();
    let correct: Vec<f64> = eps.iter().map(|e| f64::from(u8::from(e.correct))).collect();
    let mean = |v: Vec<f64>| if v.is_empty() { 0.0 } else { metrics::mean(&v) };
    let (lo, hi) = if n == 0 {
        (0.0, 0.0)
    } else {
        metrics::bootstrap(&correct, 1000, 0)
    };
    McpScoreRow {
        tasks: n as i64,
        accuracy: mean(correct.clone()),
        ci95_lo: lo,
        ci95_hi: hi,
        mean_f1: mean(eps.iter().map(|e| e.f1).collect()),
        tool_calls_per_task: mean(eps.iter().map(|e| e.tool_calls as f64).collect()),
        tool_errors_per_task: mean(eps.iter().map(|e| e.tool_errors as f64).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ep(correct: bool, calls: i64) -> EpisodeRow {
        EpisodeRow {
            task_id: "t".into(),
            split: "test".into(),
            round: 0,
            model: "scripted:mcp-reader".into(),
            steps: serde_json::json!([]),
            calls: serde_json::json!([]),
            answer: None,
            forced: false,
            correct,
            f1: if correct { 1.0 } else { 0.5 },
            tool_calls: calls,
            tool_errors: 1,
            editor_text: String::new(),
            error_kind: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            reasoning_tokens: 0,
        }
    }

    #[test]
    fn accuracy_with_its_interval_and_none_is_zero() {
        let s = score(&[ep(true, 1), ep(false, 3), ep(true, 2), ep(true, 2)]);
        assert_eq!(s.tasks, 4);
        assert_eq!(s.accuracy, 0.75);
        assert!(s.ci95_lo <= 0.75 && 0.75 <= s.ci95_hi, "{s:?}");
        assert!(s.ci95_lo < s.ci95_hi);
        assert_eq!(s.mean_f1, 0.875);
        assert_eq!(s.tool_calls_per_task, 2.0);
        assert_eq!(s.tool_errors_per_task, 1.0);
        let none = score(&[]);
        assert_eq!((none.tasks, none.accuracy, none.ci95_hi), (0, 0.0, 0.0));
    }
}
