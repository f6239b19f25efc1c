//! What `otb report` and `otb export --sft` read of chess's rows: an exploration
//! node's games as the report's items (with the evaluation's per-call checks), the
//! test cells' bootstrap Elo, and the training split's best-tool % that selects an
//! SFT pair.

use crate::chess::rows::{CallCheckRow, GameRow};
use crate::experiment::Experiment;
use crate::reading::{
    rows, shared_docs, tokens, verdict, Along, Block, Cap, Computed, Item, Reading,
};
use pipeline::{Row, StoreError};
use serde_json::Value;
use std::collections::HashMap;

/// The title of the chess interval chart.
const ELO_TITLE: &str = "Chess: bootstrap Elo of the test games (mean, 95% interval)";

/// A failure reading a training play for `otb export --sft`.
fn export_error(e: String) -> pipeline::StageError {
    pipeline::StageError::infra("export", e)
}

/// Chess: the best-tool % of the agent's tool calls in `games` (the test metric, on
/// the training split); `None` when no call was made.
pub fn chess_score(
    exp: &Experiment,
    set: &str,
    games: &[GameRow],
    names: &[Value],
) -> Result<Option<f64>, pipeline::StageError> {
    use datasets::chess::tools::{Docs, ToolFamily, ToolSet};
    let Some(c) = exp.chess() else {
        return Ok(None);
    };
    let Some(family) = [ToolFamily::PhaseSpecialists, ToolFamily::StrengthGradient]
        .into_iter()
        .find(|f| f.as_str() == set)
    else {
        return Ok(None);
    };
    let tools = ToolSet::new(family);
    let first = names.first().map(crate::baselines::tool_name).unwrap_or("");
    let kind = if tools.index_of(first, Docs::Gold).is_some() {
        Docs::Gold
    } else {
        Docs::Opaque
    };
    let mut checks = Vec::new();
    for g in games {
        let rec = g
            .record()
            .map_err(|e| export_error(format!("game {}: {e}", g.game_id)))?;
        checks.extend(
            datasets::chess::metrics::check_tool_calls(&rec, &tools, kind, c.indexing)
                .map_err(|e| export_error(format!("game {}: {e}", g.game_id)))?,
        );
    }
    let s = datasets::chess::metrics::summarize_best_tool(&checks);
    Ok((s.overall.calls > 0).then(|| s.overall.percent()))
}

/// How chess reads its own rows for `otb report` and `otb export --sft`.
pub struct ChessReader;

impl crate::experiment::Reader for ChessReader {
    fn role_of(&self, stage: &str) -> Option<&'static str> {
        (stage == super::EXPLORE_STAGE).then_some("agent")
    }

    /// Whether `stage`'s nodes hold the report's items: the games.
    fn holds_items(&self, stage: &str) -> bool {
        stage == crate::chess::EXPLORE_STAGE
    }

    /// The report's items of `out`, a computed node of [`holds_items`](crate::experiment::Reader::holds_items)'s stage.
    fn items(
        &self,
        out: &Computed<'_>,
        along: &dyn Along,
        cap: &mut Cap,
    ) -> Result<Reading, StoreError> {
        let docs = shared_docs(along, out.node, cap)?;
        let games: Vec<GameRow> = out.entry.read()?;
        let checks: Vec<CallCheckRow> = rows(along.downstream(out.node, CallCheckRow::TABLE))?;
        let mut by_ply: HashMap<(&str, i64), &CallCheckRow> = HashMap::new();
        for c in &checks {
            by_ply.insert((c.game_id.as_str(), c.ply), c);
        }
        let mut items = Vec::with_capacity(games.len());
        for g in &games {
            let mut rows = Vec::new();
            let mut fens = Vec::new();
            let mut labels = Vec::new();
            let mut tools_used = Vec::new();
            let (mut optimal, mut checked) = (0, 0);
            let plies = g.plies.as_array().cloned().unwrap_or_default();
            for (i, p) in plies.iter().enumerate() {
                let s = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                let n = p.get("ply").and_then(Value::as_i64).unwrap_or(i as i64 + 1);
                let tool = s("tool");
                let check = by_ply.get(&(g.game_id.as_str(), n));
                let best = check.map(|c| c.optimal.clone()).unwrap_or_default();
                if let Some(c) = check {
                    checked += 1;
                    optimal += usize::from(c.is_optimal);
                }
                if !tool.is_empty() {
                    tools_used.push(tool.clone());
                }
                let eval = p
                    .get("eval_after")
                    .and_then(Value::as_i64)
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                let mark = match check {
                    Some(c) if c.is_optimal => "yes",
                    Some(_) => "no",
                    None => "",
                };
                rows.push(vec![
                    n.to_string(),
                    s("side"),
                    cap.text(&s("san")),
                    cap.text(&tool),
                    best,
                    mark.into(),
                    eval.clone(),
                ]);
                fens.push(s("fen_before"));
                labels.push(format!(
                    "before ply {n}: {} plays {}{}",
                    s("side"),
                    s("san"),
                    if tool.is_empty() {
                        String::new()
                    } else {
                        format!(" (tool {tool})")
                    }
                ));
                if i + 1 == plies.len() {
                    fens.push(s("fen_after"));
                    labels.push(format!("final position after ply {n}: {}", g.result));
                }
            }
            let score = g.score.unwrap_or(0.0);
            let mut kv = vec![
                ("position".into(), g.position_id.clone()),
                ("agent plays".into(), g.agent_side.clone()),
                ("opponent Elo".into(), g.opponent_elo.to_string()),
                ("result".into(), format!("{} ({})", g.result, g.end_reason)),
                (
                    "evaluation".into(),
                    format!(
                        "{} at the start, {} at the end (centipawns, White's view)",
                        g.start_eval.map(|e| e.to_string()).unwrap_or("-".into()),
                        g.final_eval.map(|e| e.to_string()).unwrap_or("-".into())
                    ),
                ),
                (
                    "tokens".into(),
                    tokens(g.prompt_tokens, g.completion_tokens, g.reasoning_tokens),
                ),
            ];
            if checked > 0 {
                kv.push((
                    "best tool".into(),
                    format!("{optimal} of {checked} calls picked the optimal tool"),
                ));
            }
            if g.failed_calls > 0 {
                kv.push((
                    "failed calls".into(),
                    format!(
                        "{} ({})",
                        g.failed_calls,
                        g.error_kind.clone().unwrap_or_default()
                    ),
                ));
            }
            let mut detail = vec![Block::Kv {
                t: "Game".into(),
                v: kv,
            }];
            detail.push(Block::Table {
                t: format!("Moves ({})", plies.len()),
                head: [
                    "ply",
                    "side",
                    "move",
                    "tool chosen",
                    "optimal tool",
                    "optimal?",
                    "eval after",
                ]
                .map(String::from)
                .to_vec(),
                rows,
            });
            if !fens.is_empty() {
                detail.push(Block::Board {
                    t: "Board".into(),
                    fens,
                    labels,
                });
            }
            let error = g.error_kind.clone();
            let summary = format!(
                "{} vs {} ({}), {} agent moves{}",
                g.result,
                g.opponent_elo,
                g.agent_side,
                tools_used.len(),
                if checked > 0 {
                    format!(", {optimal}/{checked} optimal tool")
                } else {
                    String::new()
                }
            );
            items.push(Item {
                cell: 0,
                id: g.game_id.clone(),
                verdict: verdict(score, &error),
                score,
                error,
                summary,
                detail,
            });
        }
        Ok(Reading {
            items,
            p_a: None,
            docs,
        })
    }

    /// The bootstrap Elo of an evaluation's test games (mean, 95% interval), none for
    /// any other output.
    fn intervals(&self, out: &Computed<'_>) -> Result<Vec<crate::reading::Interval>, StoreError> {
        use crate::chess::rows::EloRow;
        if !out.entry.manifest.outputs.contains_key(EloRow::TABLE) {
            return Ok(Vec::new());
        }
        Ok(out
            .entry
            .read::<EloRow>()?
            .into_iter()
            .map(|e| crate::reading::Interval {
                title: ELO_TITLE,
                unit: "Elo",
                value: e.mean,
                lo: e.ci95_lo,
                hi: e.ci95_hi,
            })
            .collect())
    }

    /// The tool sets of `run` for `otb export --sft`.
    fn sft_tool_sets(&self, run: &crate::env::RunOutput) -> Vec<String> {
        crate::offline::sft::tool_sets(run, crate::chess::DOCS_STAGE)
    }

    /// The SFT pairs of `run`'s ToolObserver curves, selected on the training split by
    /// the best-tool % of the agent's training calls ([`chess_score`]); the traces are
    /// the round-0 training games as the editor read them.
    fn sft_pairs(
        &self,
        run: &crate::env::RunOutput,
        exp: &Experiment,
    ) -> Result<Vec<crate::reading::SftPair>, pipeline::StageError> {
        let score = |set: &str,
                     play: &crate::env::Output,
                     _judged: Option<&crate::env::Output>,
                     names: &[Value]|
         -> Result<crate::offline::sft::TrainPlay, pipeline::StageError> {
            let games: Vec<GameRow> = play.entry.read()?;
            Ok(crate::offline::sft::TrainPlay {
                score: chess_score(exp, set, &games, names)?,
                texts: games.into_iter().map(|g| g.editor_text).collect(),
            })
        };
        crate::offline::sft::pairs(
            run,
            &crate::offline::sft::Curves {
                docs_stage: crate::chess::DOCS_STAGE,
                explore_stage: crate::chess::EXPLORE_STAGE,
                judge_stage: None,
                score: &score,
            },
        )
    }
}
