//! Stage `explore`: one agent turn per instance with the current documentation.
//! Instances whose docs did not change since the previous round reuse that round's
//! row (no model call), which is what makes ToolObserver's later rounds cheap.

use crate::agents::Agent;
use crate::rows::{DocRow, InstanceRow, TrajectoryRow};
use pipeline::{StageCtx, StageError, Usage};
use serde_json::Value;
use std::collections::HashMap;

pub const STAGE: &str = "explore";
pub const VERSION: u32 = 1;

pub fn run(
    ctx: &mut StageCtx<'_>,
    agent: &dyn Agent,
    model: &str,
    system: &str,
    seed: u64,
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
    let pb = ctx.progress(docs.len() as u64);
    let mut usage = Usage::default();
    let mut rows = Vec::with_capacity(docs.len());
    for d in docs {
        let Some(inst) = questions.get(d.instance_id.as_str()) else {
            return Err(StageError::failed(
                STAGE,
                format!("docs for unknown instance {}", d.instance_id),
            ));
        };
        if let (false, Some(p)) = (d.changed, prev.get(d.instance_id.as_str())) {
            let mut row = (*p).clone();
            row.round = d.round;
            row.reused = true;
            rows.push(row);
            pb.inc(1);
            continue;
        }
        let tools: Vec<Value> = d.tools.as_array().cloned().unwrap_or_default();
        let turn = agent.act(system, &inst.question, &tools, seed);
        usage.calls += 1;
        usage.cached_calls += turn.usage.cached as u64;
        usage.prompt_tokens += turn.usage.prompt_tokens;
        usage.completion_tokens += turn.usage.completion_tokens;
        usage.reasoning_tokens += turn.usage.reasoning_tokens;
        if turn.error.is_some() {
            usage.errors += 1;
        }
        rows.push(TrajectoryRow {
            instance_id: d.instance_id.clone(),
            round: d.round,
            model: model.to_string(),
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
        pb.inc(1);
    }
    pb.finish_and_clear();
    ctx.add_usage(&usage);
    ctx.write(&rows)?;
    Ok(())
}
