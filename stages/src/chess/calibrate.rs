//! Stage `calibrate`: the opponents' (and with `calibrate_tools` the tools') measured
//! Elo, which `bootstrap-elo` rates the test games with.

use super::rows::{CalibrationRow, ToolCalibrationRow};
use super::{fail, Engines};
use datasets::chess::game::Opponent;
use datasets::chess::matches;
use datasets::chess::metrics::{self, EloGame};
use datasets::chess::strength::{self, SearchMode, Strength};
use datasets::chess::tools::{ToolFamily, ToolSet};
use pipeline::{StageCtx, StageError};
use serde::Serialize;
use serde_json::json;

/// The stage name.
pub const CALIBRATE_STAGE: &str = "calibrate";

/// `calibrate`'s params: the stage key and what the run reads.
#[derive(Serialize)]
pub(super) struct CalibrateParams<'a> {
    /// Elo opponents as numbers (the Elo profile's key as before), levels as
    /// `{"skill_level": n}`.
    pub(super) opponents: &'a [Opponent],
    /// How engine moves are searched (`{"nodes": n}` or `{"movetime": ms}`).
    pub(super) search: SearchMode,
    pub(super) games: usize,
    pub(super) max_plies: usize,
    pub(super) seed: u64,
    /// With `calibrate_tools`: the tool sets whose tools are rated too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub(super) tools: Vec<&'static str>,
}

/// Stage `calibrate`: each opponent strength plays seeded games against anchors at
/// the engine's own calibrated `UCI_Elo` (with `search = "nodes"`, the reproducible
/// re-implementation of that weakening, measured against Stockfish's own in
/// `docs/environments.md`); its measured Elo is the performance
/// rating against them (the nominal 1200 lies below the engine's floor and is a
/// weakening whose real strength must be measured; a `Skill Level` opponent's
/// "about 800 / 1600 / 2400" is measured the same way, its row's `nominal_elo`
/// being that stated rating).
pub(super) fn calibrate(
    ctx: &mut StageCtx<'_>,
    c: &CalibrateParams<'_>,
    engines: &Engines,
) -> Result<(), StageError> {
    let pool = engines.get(CALIBRATE_STAGE)?;
    let nominal: Vec<u32> = c.opponents.iter().map(|o| o.nominal_rating()).collect();
    let anchors = calibration_anchors(&nominal);
    let mut rows = Vec::new();
    for &opp in c.opponents {
        let elo = opp.nominal_rating();
        let player = opp.strength(c.search);
        let mut games = Vec::new();
        let mut wdl = (0i64, 0i64, 0i64);
        for (k, &anchor) in anchors.iter().enumerate() {
            let opp = Strength::nominal(anchor, c.search);
            let m = matches::play_match(
                pool,
                &player,
                &opp,
                c.games,
                c.seed ^ (k as u64 + 1) ^ u64::from(elo),
                &[],
                c.max_plies,
            )
            .map_err(|e| fail(CALIBRATE_STAGE, e))?;
            wdl.0 += i64::from(m.wdl.wins);
            wdl.1 += i64::from(m.wdl.draws);
            wdl.2 += i64::from(m.wdl.losses);
            let n = m.wdl.wins + m.wdl.draws + m.wdl.losses;
            let score = f64::from(m.wdl.wins) + 0.5 * f64::from(m.wdl.draws);
            // One EloGame per game, scores spread as played.
            for i in 0..n {
                let s = if (i as f64) < score.floor() {
                    1.0
                } else if (i as f64) < score {
                    0.5
                } else {
                    0.0
                };
                games.push(EloGame {
                    opponent: f64::from(anchor),
                    score: s,
                });
            }
        }
        rows.push(CalibrationRow {
            nominal_elo: i64::from(elo),
            games: games.len() as i64,
            wins: wdl.0,
            draws: wdl.1,
            losses: wdl.2,
            anchors: json!(anchors),
            measured_elo: metrics::performance_rating(&games),
        });
    }
    ctx.write(&rows)?;
    let mut tool_rows = Vec::new();
    for family in ToolFamily::ALL
        .into_iter()
        .filter(|f| c.tools.contains(&f.as_str()))
    {
        let set = ToolSet::with_search(family, c.search);
        for (i, tool) in set.tools.iter().enumerate() {
            let s = set.clone();
            let player: matches::Player = std::sync::Arc::new(move |pos| {
                s.strength_for(i, pos)
                    .unwrap_or_else(strength::Strength::random)
            });
            let (wdl, games) = rate(pool, player, &anchors, c, i as u64 + 101)?;
            tool_rows.push(ToolCalibrationRow {
                tool_set: family.as_str().into(),
                tool: tool.gold_name.clone(),
                games: games.len() as i64,
                wins: i64::from(wdl.wins),
                draws: i64::from(wdl.draws),
                losses: i64::from(wdl.losses),
                anchors: json!(anchors),
                measured_elo: metrics::performance_rating(&games),
            });
        }
    }
    if !tool_rows.is_empty() {
        ctx.write(&tool_rows)?;
    }
    Ok(())
}

/// `player`'s games against each anchor: win / draw / loss counts and one
/// [`EloGame`] per game.
fn rate(
    pool: &datasets::chess::engine::BlockingPool,
    player: matches::Player,
    anchors: &[u32],
    c: &CalibrateParams<'_>,
    salt: u64,
) -> Result<(matches::Wdl, Vec<EloGame>), StageError> {
    let mut wdl = matches::Wdl::default();
    let mut games = Vec::new();
    for (k, &anchor) in anchors.iter().enumerate() {
        let opp = Strength::nominal(anchor, c.search);
        let m = matches::play_match_as(
            pool,
            player.clone(),
            &opp,
            c.games,
            c.seed ^ (k as u64 + 1) ^ salt,
            &[],
            c.max_plies,
        )
        .map_err(|e| fail(CALIBRATE_STAGE, e))?;
        wdl.wins += m.wdl.wins;
        wdl.draws += m.wdl.draws;
        wdl.losses += m.wdl.losses;
        games.extend(m.games.iter().map(|g| EloGame {
            opponent: f64::from(anchor),
            score: g.score,
        }));
    }
    Ok((wdl, games))
}

/// Anchors for calibration: calibrated engine levels around the opponents' range.
fn calibration_anchors(opponents: &[u32]) -> Vec<u32> {
    let lo = opponents.iter().copied().min().unwrap_or(1350);
    let hi = opponents.iter().copied().max().unwrap_or(2400);
    let a = lo.max(strength::ENGINE_ELO_FLOOR);
    let b = hi.max(a + 400);
    vec![a, (a + b) / 2, b]
}
