//! What `otb report` reads of the MCP environment's rows: an exploration node's
//! episodes as the report's items (the request, each call's arguments and the
//! server's answer, the final answer against the expected one) and the test cells'
//! accuracy intervals.

use super::explore::McpCall;
use super::rows::{EpisodeRow, McpScoreRow, TaskRow};
use crate::reading::{
    answer_block, rows, shared_docs, verdict, Along, Block, Cap, Computed, EpisodeEnd, Item,
    Reading,
};
use pipeline::{Row, StoreError};
use std::collections::HashMap;

/// The title of the MCP interval chart.
const ACCURACY_TITLE: &str = "MCP: exact-match accuracy (bootstrap 95% interval)";

/// How the MCP environment reads its own rows for `otb report`.
pub struct McpReader;

impl crate::experiment::Reader for McpReader {
    fn role_of(&self, stage: &str) -> Option<&'static str> {
        (stage == super::EXPLORE_STAGE).then_some("agent")
    }

    fn holds_items(&self, stage: &str) -> bool {
        stage == super::EXPLORE_STAGE
    }

    fn items(
        &self,
        out: &Computed<'_>,
        along: &dyn Along,
        cap: &mut Cap,
    ) -> Result<Reading, StoreError> {
        let docs = shared_docs(along, out.node, cap)?;
        let eps: Vec<EpisodeRow> = out.entry.read()?;
        let tasks: Vec<TaskRow> = rows(along.upstream(out.node, TaskRow::TABLE, Some("tasks")))?;
        let tasks: HashMap<&str, &TaskRow> =
            tasks.iter().map(|t| (t.task_id.as_str(), t)).collect();
        let mut items = Vec::with_capacity(eps.len());
        for e in &eps {
            let mut detail = Vec::new();
            if let Some(t) = tasks.get(e.task_id.as_str()) {
                detail.push(Block::Text {
                    t: "Request".into(),
                    v: cap.text(&t.question),
                });
                let mut kv = vec![("answer".into(), cap.text(&t.answer))];
                if !t.answers.is_empty() {
                    kv.push(("also accepted".into(), cap.text(&t.answers.join("; "))));
                }
                if let Some(k) = &t.kind {
                    kv.push(("kind".into(), cap.text(k)));
                }
                detail.push(Block::Kv {
                    t: "Expected".into(),
                    v: kv,
                });
            }
            let calls: Vec<McpCall> = serde_json::from_value(e.calls.clone()).unwrap_or_default();
            for (i, c) in calls.iter().enumerate() {
                let tool = match &c.server_tool {
                    Some(real) if *real != c.tool => format!("{} (the server's {real})", c.tool),
                    Some(_) => c.tool.clone(),
                    None => format!("{} (no such tool)", c.tool),
                };
                detail.push(Block::Kv {
                    t: format!("Call {}", i + 1),
                    v: vec![
                        ("tool".into(), cap.text(&tool)),
                        ("arguments".into(), cap.json(&c.arguments)),
                    ],
                });
                detail.push(Block::Code {
                    t: format!(
                        "Call {}: {}",
                        i + 1,
                        if c.is_error {
                            "error"
                        } else {
                            "the server's answer"
                        }
                    ),
                    v: cap.text(&c.result),
                });
            }
            detail.push(answer_block(
                cap,
                &EpisodeEnd {
                    answer: e.answer.as_deref(),
                    correct: e.correct,
                    f1: e.f1,
                    tool_calls: e.tool_calls,
                    failed_calls: Some(e.tool_errors),
                    tokens: (e.prompt_tokens, e.completion_tokens, e.reasoning_tokens),
                    forced: e.forced,
                    error: e.error_kind.as_deref(),
                },
            ));
            let score = if e.correct { 1.0 } else { 0.0 };
            let error = e.error_kind.clone();
            items.push(Item {
                cell: 0,
                id: e.task_id.clone(),
                verdict: verdict(score, &error),
                score,
                error,
                summary: cap.text(&format!(
                    "{} calls ({} failed); answered {:?}",
                    e.tool_calls,
                    e.tool_errors,
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

    fn intervals(&self, out: &Computed<'_>) -> Result<Vec<crate::reading::Interval>, StoreError> {
        if !out.entry.manifest.outputs.contains_key(McpScoreRow::TABLE) {
            return Ok(Vec::new());
        }
        Ok(out
            .entry
            .read::<McpScoreRow>()?
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
}
