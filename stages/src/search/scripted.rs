//! The scripted search agents (`scripted:search-oracle`, `scripted:search-wrong`).

use super::config::{DataSource, ResultShape, TOOL_SETS};
use super::rows::QuestionRow;
use super::tools::{domains, tool_set};
use crate::models::MultiTurn;
use datasets::search::Opacity;
use serde_json::{json, Value};

/// `scripted:search-oracle` / `scripted:search-wrong`: the ceiling and the floor of
/// tool choice. The oracle searches the evidence document's domain with the question
/// text (it knows each question's domain, as the chess oracle knows the optimal tool);
/// the wrong agent searches a domain other than the evidence's. Both answer with the
/// best-ranked result title (first snippet line) that the question does not name.
pub struct Oracle {
    wrong: bool,
    /// Question text -> the evidence document's domain.
    domain_of: std::collections::HashMap<String, String>,
    /// The tools of every set and documentation setting (names -> domains).
    sets: Vec<Vec<datasets::search::tools::ToolSpec>>,
}

impl Oracle {
    pub(super) fn new(wrong: bool, questions: &[QuestionRow], source: &DataSource) -> Oracle {
        let ds = domains(source);
        let mut sets = Vec::new();
        for set in TOOL_SETS {
            for o in [Opacity::Opaque, Opacity::Gold] {
                sets.push(
                    tool_set(
                        &ds,
                        set,
                        o,
                        ResultShape {
                            results: 5,
                            snippet_tokens: 512,
                            show_urls: false,
                        },
                        false,
                    )
                    .tools,
                );
            }
        }
        Oracle {
            wrong,
            domain_of: questions
                .iter()
                .map(|q| (q.question.clone(), q.domain.clone()))
                .collect(),
            sets,
        }
    }
}

impl crate::models::Agent for Oracle {
    fn act(&self, job: &crate::models::AgentJob<'_>) -> crate::models::AgentTurn {
        let (question, result) = match job.question.split_once("\n\nTool result: ") {
            Some((q, r)) => (q, Some(r)),
            None => (job.question, None),
        };
        if let Some(r) = result {
            // The first line of a result's snippet is its title; the answer is the
            // best-ranked title the question does not name (its subject never is).
            let results =
                serde_json::from_str::<Value>(r.split("\n\nTool result: ").next().unwrap_or(""))
                    .ok()
                    .and_then(|v| v.as_array().cloned())
                    .unwrap_or_default();
            let q = question.to_lowercase();
            let title = results
                .iter()
                .filter_map(|h| h.get("snippet")?.as_str()?.lines().next())
                .find(|t| !t.is_empty() && !q.contains(&t.to_lowercase()))
                .unwrap_or("unknown")
                .to_string();
            return crate::models::AgentTurn {
                content: Some(title),
                ..Default::default()
            };
        }
        let want = self.domain_of.get(question);
        let offered = |name: &str| {
            job.tools
                .iter()
                .any(|t| t.get("name").and_then(Value::as_str) == Some(name))
        };
        // The set the agent is offered: same size, every name offered.
        let set = self
            .sets
            .iter()
            .find(|set| set.len() == job.tools.len() && set.iter().all(|t| offered(&t.name)));
        let tool = set.into_iter().flatten().find(|t| match (&t.domain, want) {
            (Some(d), Some(w)) => (d == w) != self.wrong,
            _ => false,
        });
        match tool {
            Some(t) => crate::models::AgentTurn {
                calls: vec![crate::rows::CallRecord {
                    function: t.name.clone(),
                    args: json!({"query": question}),
                    raw: None,
                }],
                ..Default::default()
            },
            None => crate::models::AgentTurn {
                content: Some("unknown".into()),
                ..Default::default()
            },
        }
    }
}

impl MultiTurn for Oracle {}
