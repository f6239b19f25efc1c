//! Stage `bootstrap-elo`: the Elo of one set of test games (streaming Elo over seeded
//! shuffles, intervals, performance rating).

use super::rows::{BestToolRow, EloRow, GameRow};
use datasets::chess::metrics::{self, EloGame};
use pipeline::{StageCtx, StageError};
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

/// The bootstrap Elo of one set of test games (its own stage: changing the Elo
/// settings reruns only this).
pub const ELO_STAGE: &str = "bootstrap-elo";

/// `bootstrap-elo`'s params: the stage key and what the run reads.
#[derive(Serialize)]
pub(super) struct EloParams<'a> {
    /// The configured start rating (the midpoint of the opponents' ratings when it
    /// lies outside them).
    pub(super) elo_start: f64,
    /// `measured` (the calibrate stage's ratings, an input) or `nominal`.
    pub(super) opponent_ratings: &'a str,
    pub(super) k: f64,
    pub(super) shuffles: u64,
    /// At most this many finished games, in schedule order (absent: all, the key as
    /// before).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) elo_games: Option<usize>,
}

/// The finished test games as the Elo sees them (the opponent's rating from
/// `ratings`, the nominal one when it has none), the first `cap` in schedule order.
fn elo_games_of(
    games: &[GameRow],
    ratings: &BTreeMap<u32, f64>,
    cap: Option<usize>,
) -> Vec<EloGame> {
    games
        .iter()
        .filter_map(|g| {
            let score = g.score?;
            let nominal = g.opponent_elo as u32;
            Some(EloGame {
                opponent: ratings.get(&nominal).copied().unwrap_or(nominal as f64),
                score,
            })
        })
        .take(cap.unwrap_or(usize::MAX))
        .collect()
}

/// Stage `bootstrap-elo`: the streaming Elo over `shuffles` seeded shuffles of the
/// finished games (rayon), mean, median and intervals, and the performance rating;
/// the row repeats the best-tool figures of `chess-evaluate` so one row is one cell.
pub(super) fn bootstrap_elo(
    ctx: &mut StageCtx<'_>,
    p: &EloParams<'_>,
    ratings: &BTreeMap<u32, f64>,
    games: &[GameRow],
    best: Option<&BestToolRow>,
) -> Result<(), StageError> {
    let elo_games = elo_games_of(games, ratings, p.elo_games);
    let start = metrics::elo_start(&elo_games, p.elo_start);
    let b = metrics::bootstrap_elo(&elo_games, start, p.k, p.shuffles);
    let elo = EloRow {
        games: elo_games.len() as i64,
        start,
        shuffles: b.shuffles as i64,
        mean: b.mean,
        median: b.median,
        ci90_lo: b.ci90.0,
        ci90_hi: b.ci90.1,
        ci95_lo: b.ci95.0,
        ci95_hi: b.ci95.1,
        ci99_lo: b.ci99.0,
        ci99_hi: b.ci99.1,
        performance: metrics::performance_rating(&elo_games),
        best_tool_pct: best.map_or(0.0, |b| b.best_tool_pct),
        tool_calls: best.map_or(0, |b| b.tool_calls),
        per_phase: best.map_or(Value::Null, |b| b.per_phase.clone()),
    };
    ctx.write(&[elo])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `elo_games` caps the games entering the Elo, in schedule order; unfinished
    /// games never enter; ratings come from the calibration when it has them.
    #[test]
    fn elo_games_caps_in_schedule_order() {
        let game = |i: usize, opp: i64, score: Option<f64>| GameRow {
            game_id: format!("g{i}"),
            split: "test".into(),
            round: 0,
            model: "m".into(),
            position_id: format!("p{i}"),
            agent_side: "white".into(),
            opponent_elo: opp,
            score,
            result: String::new(),
            end_reason: String::new(),
            plies: Value::Null,
            start_eval: None,
            final_eval: None,
            editor_text: String::new(),
            failed_calls: 0,
            error_kind: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            reasoning_tokens: 0,
        };
        let games = vec![
            game(0, 1200, Some(1.0)),
            game(1, 1800, None),
            game(2, 1800, Some(0.5)),
            game(3, 2400, Some(0.0)),
        ];
        let ratings: BTreeMap<u32, f64> = [(1200, 1010.0)].into_iter().collect();
        let all = elo_games_of(&games, &ratings, None);
        assert_eq!(all.len(), 3);
        assert_eq!((all[0].opponent, all[0].score), (1010.0, 1.0));
        let two = elo_games_of(&games, &ratings, Some(2));
        assert_eq!(
            two.iter()
                .map(|g| (g.opponent, g.score))
                .collect::<Vec<_>>(),
            [(1010.0, 1.0), (1800.0, 0.5)]
        );
        // The cap is in bootstrap-elo's key only when set.
        let p = |elo_games| {
            serde_json::to_value(EloParams {
                elo_start: 1500.0,
                opponent_ratings: "measured",
                k: 32.0,
                shuffles: 1000,
                elo_games,
            })
            .unwrap()
        };
        assert!(p(None).get("elo_games").is_none());
        assert_eq!(p(Some(300))["elo_games"], 300);
    }
}
