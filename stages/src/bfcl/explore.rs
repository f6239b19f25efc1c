//! Stage `explore`: one agent turn per instance with the current documentation.
//! Instances whose docs did not change since the previous round reuse that round's
//! row (no model call), which is what makes ToolObserver's later rounds cheap.
//! Turns that need a model run concurrently (bounded by the backend).

use crate::baselines::with_demos;
use crate::models::{Agent, AgentJob};
use crate::rows::{DocRow, InstanceRow, TrajectoryRow};
use pipeline::{StageCtx, StageError, Usage};
use serde_json::Value;
use std::collections::HashMap;

/// The stage name.
pub const STAGE: &str = "explore";
/// 2: a previous round's failed agent call is asked again, not reused.
pub const VERSION: u32 = 2;

/// What the agent is asked with: one struct, serialised as the stage key's params
/// and used by the run (so the key cannot miss what the run reads).
#[derive(serde::Serialize)]
pub struct ExploreParams<'a> {
    /// The agent model.
    pub agent: crate::models::ModelSpec,
    /// The agent's system prompt (an instance's demonstrations are appended to it).
    pub system_prompt: &'a str,
    /// Seed of the agent calls.
    pub seed: u64,
    /// Always `required`: the agent must call a tool.
    pub tool_choice: &'static str,
    /// The documentation round explored.
    pub round: i64,
}

/// Runs `explore`: one trajectory row per docs row; an instance whose docs did not
/// change copies its `previous` row (unless that call failed), the others are asked
/// of `agent` concurrently.
pub fn run(
    ctx: &mut StageCtx<'_>,
    agent: &dyn Agent,
    params: &ExploreParams<'_>,
    instances: &[InstanceRow],
    docs: &[DocRow],
    previous: Option<&[TrajectoryRow]>,
) -> Result<(), StageError> {
    let questions: HashMap<&str, &InstanceRow> = instances
        .iter()
        .map(|i| (i.instance_id.as_str(), i))
        .collect();
    let prev: HashMap<&str, &TrajectoryRow> = previous
        .unwrap_or(&[])
        .iter()
        .map(|t| (t.instance_id.as_str(), t))
        .collect();
    // Reused rows first; collect the turns that need the agent.
    let mut rows: Vec<Option<TrajectoryRow>> = Vec::with_capacity(docs.len());
    let mut todo: Vec<(usize, &DocRow, Vec<Value>)> = Vec::new();
    for d in docs {
        let Some(_) = questions.get(d.instance_id.as_str()) else {
            return Err(StageError::bug(
                STAGE,
                format!("docs for unknown instance {}", d.instance_id),
            ));
        };
        match (d.changed, prev.get(d.instance_id.as_str())) {
            // A failed agent call is asked again, never copied forward.
            (false, Some(p)) if p.error_kind.is_none() => {
                let mut row = (*p).clone();
                row.round = d.round;
                row.reused = true;
                rows.push(Some(row));
            }
            _ => {
                todo.push((
                    rows.len(),
                    d,
                    d.tools.as_array().cloned().unwrap_or_default(),
                ));
                rows.push(None);
            }
        }
    }
    // Demonstrations (Play2Prompt) extend the system prompt of their instance.
    let systems: Vec<String> = todo
        .iter()
        .map(|(_, d, _)| with_demos(params.system_prompt, &d.demos))
        .collect();
    let jobs: Vec<AgentJob<'_>> = todo
        .iter()
        .zip(&systems)
        .map(|((_, d, tools), system)| AgentJob {
            system,
            question: questions
                .get(d.instance_id.as_str())
                .map(|i| i.question.as_str())
                .unwrap_or(""),
            tools,
            seed: params.seed,
        })
        .collect();
    let pb = ctx.progress(jobs.len() as u64);
    let turns = agent.act_all(&jobs, &|| pb.inc(1));
    pb.finish_and_clear();
    if let Some(e) =
        crate::models::infrastructure_error(STAGE, turns.iter().filter_map(|t| t.error.as_ref()))
    {
        return Err(e);
    }
    let mut usage = Usage::default();
    for ((slot, d, _), turn) in todo.into_iter().zip(turns) {
        turn.usage.record(&mut usage, turn.error.is_some());
        rows[slot] = Some(TrajectoryRow {
            instance_id: d.instance_id.clone(),
            round: d.round,
            model: params.agent.to_string(),
            calls: turn.calls,
            content: turn.content,
            error_kind: turn.error.as_ref().map(|e| e.kind.clone()),
            error: turn.error.map(|e| e.message),
            prompt_tokens: turn.usage.prompt_tokens as i64,
            completion_tokens: turn.usage.completion_tokens as i64,
            reasoning_tokens: turn.usage.reasoning_tokens as i64,
            latency_ms: turn.usage.latency_ms as i64,
            reused: false,
        });
    }
    let rows: Vec<TrajectoryRow> = rows.into_iter().flatten().collect();
    if rows.len() != docs.len() {
        return Err(StageError::bug(
            STAGE,
            "agent returned fewer turns than asked",
        ));
    }
    ctx.add_usage(&usage);
    ctx.write(&rows)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn demonstrations_extend_the_system_prompt() {
        assert_eq!(with_demos("Be helpful.", &Value::Null), "Be helpful.");
        let demos = json!([{"query": "gcd of 12 and 18?", "function": "function_1", "arguments": {"a": 12, "b": 18}}]);
        assert_eq!(
            with_demos("Be helpful.\n", &demos),
            "Be helpful.\n\nExamples of correct tool use:\nRequest: gcd of 12 and 18?\nCall: function_1(a=12, b=18)"
        );
    }
}
