//! Stage `chess-evaluate`: the agent's tool calls in the test games checked against
//! the optimal tool (best-tool %, overall and per phase).

use super::fail;
use super::rows::{BestToolRow, CallCheckRow, GameRow};
use datasets::chess::metrics::{self, BestToolIndexing};
use datasets::chess::tools::{Docs, ToolSet};
use pipeline::{StageCtx, StageError};
use serde::Serialize;
use serde_json::{json, Value};

/// The stage name.
pub const EVALUATE_STAGE: &str = "chess-evaluate";

/// `chess-evaluate`'s params: the stage key and what the run reads.
#[derive(Serialize)]
pub(super) struct EvaluateParams {
    pub(super) indexing: BestToolIndexing,
}

/// Stage `chess-evaluate`: every agent tool call of the test games checked against
/// the optimal tool (`chess_calls`), and the best-tool % overall and per phase
/// (`chess_best_tool`).
pub(super) fn check_calls(
    ctx: &mut StageCtx<'_>,
    tools: &ToolSet,
    kind: Docs,
    p: &EvaluateParams,
    games: &[GameRow],
) -> Result<(), StageError> {
    let mut checks = Vec::new();
    let mut rows = Vec::new();
    for g in games {
        let rec = g
            .record()
            .map_err(|e| fail(EVALUATE_STAGE, format!("game {}: {e}", g.game_id)))?;
        let cs = metrics::check_tool_calls(&rec, tools, kind, p.indexing)
            .map_err(|e| fail(EVALUATE_STAGE, format!("game {}: {e}", g.game_id)))?;
        for ch in &cs {
            rows.push(CallCheckRow {
                game_id: g.game_id.clone(),
                ply: ch.ply as i64,
                phase: ch.phase.as_str().into(),
                tool: ch.tool.clone(),
                optimal: ch.optimal.clone(),
                is_optimal: ch.is_optimal,
            });
        }
        checks.extend(cs);
    }
    let summary = metrics::summarize_best_tool(&checks);
    let per_phase: serde_json::Map<String, Value> = summary
        .per_phase
        .iter()
        .map(|(p, a)| (p.as_str().to_string(), json!(a.percent())))
        .collect();
    ctx.write(&rows)?;
    ctx.write(&[BestToolRow {
        best_tool_pct: summary.overall.percent(),
        tool_calls: summary.overall.calls as i64,
        per_phase: Value::Object(per_phase),
    }])?;
    Ok(())
}
