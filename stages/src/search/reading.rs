//! What `otb report` and `otb export --sft` read of search's rows: an exploration
//! node's episodes as the report's items (with the questions' truths and the
//! judge's verdicts), the test cells' accuracy intervals, and the training split's
//! accuracy that selects an SFT pair.

use crate::reading::{
    answer_block, rows, shared_docs, verdict, Along, Block, Cap, Computed, EpisodeEnd, Item,
    Reading,
};
use crate::search::rows::{EpisodeRow, JudgeRow, QuestionRow};
use pipeline::{Row, StoreError};
use serde_json::Value;
use std::collections::HashMap;

/// The title of the search interval chart.
const ACCURACY_TITLE: &str = "Search: judged accuracy (bootstrap 95% interval)";

/// How search reads its own rows for `otb report` and `otb export --sft`.
pub struct SearchReader;

impl crate::experiment::Reader for SearchReader {
    fn role_of(&self, stage: &str) -> Option<&'static str> {
        match stage {
            super::EXPLORE_STAGE => Some("agent"),
            super::judge::JUDGE_STAGE => Some("judge"),
            _ => None,
        }
    }

    /// Whether `stage`'s nodes hold the report's items: the episodes.
    fn holds_items(&self, stage: &str) -> bool {
        stage == crate::search::EXPLORE_STAGE
    }

    /// The report's items of `out`, a computed node of [`holds_items`](crate::experiment::Reader::holds_items)'s stage.
    fn items(
        &self,
        out: &Computed<'_>,
        along: &dyn Along,
        cap: &mut Cap,
    ) -> Result<Reading, StoreError> {
        let docs = shared_docs(along, out.node, cap)?;
        let eps: Vec<EpisodeRow> = out.entry.read()?;
        let qs: Vec<QuestionRow> = rows(along.upstream(out.node, QuestionRow::TABLE, None))?;
        let judged: Vec<JudgeRow> = rows(along.downstream(out.node, JudgeRow::TABLE))?;
        let qs: HashMap<&str, &QuestionRow> =
            qs.iter().map(|q| (q.question_id.as_str(), q)).collect();
        let judged: HashMap<(&str, &str), &JudgeRow> = judged
            .iter()
            .map(|j| ((j.question_id.as_str(), j.split.as_str()), j))
            .collect();
        let mut items = Vec::with_capacity(eps.len());
        for e in &eps {
            let mut detail = Vec::new();
            if let Some(q) = qs.get(e.question_id.as_str()) {
                detail.push(Block::Text {
                    t: "Question".into(),
                    v: cap.text(&q.question),
                });
                let mut kv = vec![("answer".into(), cap.text(&q.answer))];
                if !q.aliases.is_empty() {
                    kv.push(("also accepted".into(), cap.text(&q.aliases.join("; "))));
                }
                kv.push(("domain".into(), q.domain.clone()));
                detail.push(Block::Kv {
                    t: "Truth".into(),
                    v: kv,
                });
            }
            for (i, step) in e.steps.as_array().into_iter().flatten().enumerate() {
                let calls: Vec<Vec<String>> = step
                    .get("calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|c| {
                        let f = c
                            .get("function")
                            .and_then(Value::as_str)
                            .unwrap_or("?")
                            .to_string();
                        let args = c.get("args").map(|a| a.to_string()).unwrap_or_default();
                        vec![cap.text(&f), cap.text(&args)]
                    })
                    .collect();
                if let Some(c) = step
                    .get("content")
                    .and_then(Value::as_str)
                    .filter(|c| !c.is_empty())
                {
                    detail.push(Block::Text {
                        t: format!("Turn {}: reply text", i + 1),
                        v: cap.text(c),
                    });
                }
                if !calls.is_empty() {
                    detail.push(Block::Table {
                        t: format!("Turn {}: queries", i + 1),
                        head: vec!["tool".into(), "arguments".into()],
                        rows: calls,
                    });
                }
                if let Some(r) = step.get("results").filter(|r| !r.is_null()) {
                    let text = match r {
                        Value::String(s) => s.clone(),
                        Value::Array(a) => a
                            .iter()
                            .map(|x| x.as_str().map(str::to_string).unwrap_or(x.to_string()))
                            .collect::<Vec<_>>()
                            .join("\n\n"),
                        other => serde_json::to_string_pretty(other).unwrap_or_default(),
                    };
                    detail.push(Block::Code {
                        t: format!("Turn {}: returned documents", i + 1),
                        v: cap.text(&text),
                    });
                }
            }
            let judge = judged.get(&(e.question_id.as_str(), e.split.as_str()));
            let correct = match judge.and_then(|j| j.verdict) {
                Some(v) => v,
                None => e.correct,
            };
            detail.push(answer_block(
                cap,
                &EpisodeEnd {
                    answer: e.answer.as_deref(),
                    correct: e.correct,
                    f1: e.f1,
                    tool_calls: e.tool_calls,
                    failed_calls: None,
                    tokens: (e.prompt_tokens, e.completion_tokens, e.reasoning_tokens),
                    forced: e.forced,
                    error: e.error_kind.as_deref(),
                },
            ));
            if let Some(j) = judge {
                detail.push(Block::Kv {
                    t: format!("Judge ({})", j.model),
                    v: vec![
                        (
                            "verdict".into(),
                            match j.verdict {
                                Some(true) => "correct",
                                Some(false) => "incorrect",
                                None => "no verdict",
                            }
                            .into(),
                        ),
                        (
                            "reasoning".into(),
                            cap.text(j.reply.as_deref().unwrap_or("")),
                        ),
                    ],
                });
            }
            let score = if correct { 1.0 } else { 0.0 };
            let error = e.error_kind.clone();
            items.push(Item {
                cell: 0,
                id: e.question_id.clone(),
                verdict: verdict(score, &error),
                score,
                error,
                summary: cap.text(&format!(
                    "{} calls; answered {:?}",
                    e.tool_calls,
                    e.answer.as_deref().unwrap_or("")
                )),
                detail,
            });
        }
        Ok(Reading {
            items,
            p_a: None,
            docs,
        })
    }

    /// An evaluation's judged accuracy with its bootstrap interval, in percent; none for
    /// any other output.
    fn intervals(&self, out: &Computed<'_>) -> Result<Vec<crate::reading::Interval>, StoreError> {
        use crate::search::rows::SearchScoreRow;
        if !out
            .entry
            .manifest
            .outputs
            .contains_key(SearchScoreRow::TABLE)
        {
            return Ok(Vec::new());
        }
        Ok(out
            .entry
            .read::<SearchScoreRow>()?
            .into_iter()
            .map(|s| crate::reading::Interval {
                title: ACCURACY_TITLE,
                unit: "%",
                value: s.accuracy * 100.0,
                lo: s.ci95_lo * 100.0,
                hi: s.ci95_hi * 100.0,
            })
            .collect())
    }

    /// The tool sets of `run` for `otb export --sft`.
    fn sft_tool_sets(&self, run: &crate::env::RunOutput) -> Vec<String> {
        crate::offline::sft::tool_sets(run, crate::search::DOCS_STAGE)
    }

    /// The SFT pairs of `run`'s ToolObserver curves, selected on the training split by
    /// the accuracy the editor read: the judge's verdicts when `[search] judge` is set,
    /// else exact match; the traces are the round-0 training episodes as the editor
    /// read them (with the judge's verdict when there is one).
    fn sft_pairs(
        &self,
        run: &crate::env::RunOutput,
        _exp: &crate::experiment::Experiment,
    ) -> Result<Vec<crate::reading::SftPair>, pipeline::StageError> {
        use crate::offline::sft::TrainPlay;
        let mean = |v: &[bool]| {
            (!v.is_empty()).then(|| v.iter().filter(|b| **b).count() as f64 / v.len() as f64)
        };
        let score = |_set: &str,
                     play: &crate::env::Output,
                     judged: Option<&crate::env::Output>,
                     _names: &[Value]|
         -> Result<TrainPlay, pipeline::StageError> {
            Ok(match judged {
                Some(j) => {
                    let rows: Vec<JudgeRow> = j.entry.read()?;
                    let verdicts: Vec<bool> =
                        rows.iter().map(|r| r.verdict == Some(true)).collect();
                    TrainPlay {
                        score: mean(&verdicts),
                        texts: rows
                            .into_iter()
                            .map(|r| r.editor_text.unwrap_or_default())
                            .collect(),
                    }
                }
                None => {
                    let eps: Vec<EpisodeRow> = play.entry.read()?;
                    let correct: Vec<bool> = eps.iter().map(|e| e.correct).collect();
                    TrainPlay {
                        score: mean(&correct),
                        texts: eps.into_iter().map(|e| e.editor_text).collect(),
                    }
                }
            })
        };
        crate::offline::sft::pairs(
            run,
            &crate::offline::sft::Curves {
                docs_stage: crate::search::DOCS_STAGE,
                explore_stage: crate::search::EXPLORE_STAGE,
                judge_stage: Some(crate::search::judge::JUDGE_STAGE),
                score: &score,
            },
        )
    }
}
