//! Stage `mcp-evaluate`: accuracy (exact match, or the LLM judge's verdict where a
//! task has a rubric) with a bootstrap interval, mean F1, tool calls and failed
//! calls per task.

use super::judge::{scoring, Scoring};
use super::rows::{EpisodeRow, McpJudgeRow, McpScoreRow, TaskRow};
use super::Mcp;
use crate::env::{Cx, DriveError, Play};
use crate::metrics;
use pipeline::Handle;
use serde_json::json;
use std::collections::HashMap;

/// The stage name.
pub const EVALUATE_STAGE: &str = "mcp-evaluate";
/// The stage version.
pub const EVALUATE_VERSION: u32 = 1;

/// The scoring rule in the key of a test split whose tasks all have answers (the
/// key of before the judge existed).
pub const EXACT_RULE: &str = "exact match";
/// The scoring rule in the key of a test split with a rubric task or a task with
/// neither an answer nor a rubric.
pub const GRADED_RULE: &str =
    "the judge where a task has a rubric, else exact match; tasks with neither in no mean";

/// How one test episode counts in the scores.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Counted {
    /// By its exact-match grade and F1.
    Exact,
    /// By the judge's verdict (none: not judged, so not correct), F1 1 or 0.
    Judged(Option<bool>),
    /// In no accuracy or F1 mean (its task has neither an answer nor a rubric).
    Unscored,
}

/// The scores of a set of test episodes graded by exact match
/// ([`score_counted`] with every episode [`Counted::Exact`]).
pub fn score(eps: &[EpisodeRow]) -> McpScoreRow {
    score_counted(eps, |_| Counted::Exact)
}

/// The scores of a set of test episodes, each counted as `how` says: accuracy with a
/// bootstrap 95% interval (1000 resamples of the scored tasks, seed 0) and mean token
/// F1 over the scored episodes, tool calls and failed calls per task over all.
/// `tasks` counts every episode. Nothing to count: 0.
pub fn score_counted(eps: &[EpisodeRow], how: impl Fn(&EpisodeRow) -> Counted) -> McpScoreRow {
    let n = eps.len();
    let mut correct: Vec<f64> = Vec::with_capacity(n);
    let mut f1: Vec<f64> = Vec::with_capacity(n);
    for e in eps {
        let (c, f) = match how(e) {
            Counted::Exact => (e.correct, e.f1),
            Counted::Judged(v) => {
                let yes = v == Some(true);
                (yes, f64::from(u8::from(yes)))
            }
            Counted::Unscored => continue,
        };
        correct.push(f64::from(u8::from(c)));
        f1.push(f);
    }
    let mean = |v: &[f64]| if v.is_empty() { 0.0 } else { metrics::mean(v) };
    let (lo, hi) = if correct.is_empty() {
        (0.0, 0.0)
    } else {
        metrics::bootstrap(&correct, 1000, 0)
    };
    McpScoreRow {
        tasks: n as i64,
        accuracy: mean(&correct),
        ci95_lo: lo,
        ci95_hi: hi,
        mean_f1: mean(&f1),
        tool_calls_per_task: mean(&eps.iter().map(|e| e.tool_calls as f64).collect::<Vec<_>>()),
        tool_errors_per_task: mean(&eps.iter().map(|e| e.tool_errors as f64).collect::<Vec<_>>()),
    }
}

/// How each episode of `eps` counts, by its task (`tasks`) and the judge's
/// `verdicts` (task id -> verdict, from the rows where the judge was asked).
fn counted<'a>(
    tasks: &'a [TaskRow],
    verdicts: &'a HashMap<String, Option<bool>>,
) -> impl Fn(&EpisodeRow) -> Counted + 'a {
    let by_id: HashMap<&str, &TaskRow> = tasks.iter().map(|t| (t.task_id.as_str(), t)).collect();
    move |e: &EpisodeRow| match by_id.get(e.task_id.as_str()).map(|t| scoring(t)) {
        Some(Scoring::Judge) => Counted::Judged(verdicts.get(&e.task_id).copied().flatten()),
        Some(Scoring::Unscored) => Counted::Unscored,
        Some(Scoring::Exact) | None => Counted::Exact,
    }
}

impl Mcp<'_> {
    /// Stage `mcp-evaluate` over the test episodes `trajectories`. A test split whose
    /// tasks all have answers is scored by exact match under the key of before the
    /// judge existed; one with a rubric task reads the judge's verdicts too
    /// (`mcp-judge`, input `judgements`), and one with a task that has neither
    /// answer nor rubric leaves it out of the means (input `tasks`).
    pub(super) fn evaluate_node<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        play: &Play<'_>,
        trajectories: &Handle,
    ) -> Result<Handle, DriveError> {
        let g = self.grading.test;
        if !g.rubrics && !g.unscored {
            return cx.stage(
                play.at,
                EVALUATE_STAGE,
                EVALUATE_VERSION,
                json!({"bootstrap": [1000, 0], "score": EXACT_RULE}),
                &[("episodes", trajectories)],
                |ctx, _| {
                    let eps: Vec<EpisodeRow> = ctx.read("episodes")?;
                    ctx.write(&[score(&eps)])?;
                    Ok(())
                },
            );
        }
        let judgements = self.judged(cx, play.at, trajectories)?;
        let judge = judgements
            .as_ref()
            .and(self.m.judge.as_ref())
            .map(ToString::to_string);
        let mut inputs = vec![("episodes", trajectories), ("tasks", &self.tasks.handle)];
        if let Some(j) = &judgements {
            inputs.push(("judgements", j));
        }
        let judged = judgements.is_some();
        cx.stage(
            play.at,
            EVALUATE_STAGE,
            EVALUATE_VERSION,
            json!({"bootstrap": [1000, 0], "score": GRADED_RULE, "judge": judge}),
            &inputs,
            move |ctx, _| {
                let eps: Vec<EpisodeRow> = ctx.read("episodes")?;
                let tasks: Vec<TaskRow> = ctx.read("tasks")?;
                let verdicts: HashMap<String, Option<bool>> = if judged {
                    ctx.read::<McpJudgeRow>("judgements")?
                        .into_iter()
                        .filter(|r| r.rubric)
                        .map(|r| (r.task_id, r.verdict))
                        .collect()
                } else {
                    HashMap::new()
                };
                ctx.write(&[score_counted(&eps, counted(&tasks, &verdicts))])?;
                Ok(())
            },
        )
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
    fn the_judge_decides_rubric_tasks_and_tasks_with_neither_count_nowhere() {
        let mut eps = vec![
            ep(true, 1),
            ep(false, 1),
            ep(false, 1),
            ep(true, 1),
            ep(false, 1),
        ];
        for (e, id) in eps
            .iter_mut()
            .zip(["exact", "judged", "unjudged", "none", "other"])
        {
            e.task_id = id.into();
        }
        let task = |id: &str, answer: &str, judge: Option<&str>| TaskRow {
            split: "test".into(),
            task_id: id.into(),
            server: "git".into(),
            question: "q".into(),
            answer: answer.into(),
            answers: Vec::new(),
            judge: judge.map(str::to_string),
            kind: None,
        };
        let tasks = vec![
            task("exact", "x", None),
            task("judged", "", Some("names x")),
            task("unjudged", "x", Some("names x")),
            task("none", "", None),
            task("other", "y", None),
        ];
        let verdicts: HashMap<String, Option<bool>> = [
            ("judged".to_string(), Some(true)),
            ("unjudged".to_string(), None),
        ]
        .into_iter()
        .collect();
        let how = counted(&tasks, &verdicts);
        assert_eq!(how(&eps[0]), Counted::Exact);
        assert_eq!(how(&eps[1]), Counted::Judged(Some(true)));
        assert_eq!(how(&eps[2]), Counted::Judged(None));
        assert_eq!(how(&eps[3]), Counted::Unscored);
        let s = score_counted(&eps, how);
        // Scored: exact (right), judged (right), unjudged (not correct), other
        // (wrong); `none` counts in no mean, though it was exactly "correct".
        assert_eq!(s.tasks, 5);
        assert_eq!(s.accuracy, 0.5);
        assert_eq!(s.mean_f1, (1.0 + 1.0 + 0.0 + 0.5) / 4.0);
        assert_eq!(s.tool_calls_per_task, 1.0);
        // Every task unscored: nothing to count.
        let none = score_counted(&eps, |_| Counted::Unscored);
        assert_eq!((none.tasks, none.accuracy, none.ci95_hi), (5, 0.0, 0.0));
        // Exact match alone is `score`.
        assert_eq!(score_counted(&eps, |_| Counted::Exact), score(&eps));
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
