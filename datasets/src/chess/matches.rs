//! Seeded engine-vs-engine matches: the games the `calibrate` stage plays to measure
//! the strength a [`Strength`] actually gives (see [`super::strength`]), and the
//! measured player's win/draw/loss counts.

use shakmaty::Chess;
use std::sync::Arc;

use super::engine::{BlockingPool, EngineError, EnginePool};
use super::game::Game;
use super::rules::{self, DrawRules, Side};
use super::strength::{choose_move, Strength};
use super::ChessError;
use crate::rng::SplitMix64;

/// Win/draw/loss counts from one player's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct Wdl {
    /// Games won.
    pub wins: u32,
    /// Games drawn.
    pub draws: u32,
    /// Games lost.
    pub losses: u32,
}

impl Wdl {
    /// Number of games.
    pub fn games(&self) -> u32 {
        self.wins + self.draws + self.losses
    }

    /// Mean score (wins 1, draws 0.5); 0 without games.
    pub fn score(&self) -> f64 {
        let n = self.games();
        if n == 0 {
            0.0
        } else {
            (f64::from(self.wins) + 0.5 * f64::from(self.draws)) / f64::from(n)
        }
    }
}

/// One game of a match.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MatchGame {
    /// Game number (0-based); its seed is derived from the match seed and it.
    pub index: usize,
    /// The start position.
    pub start_fen: String,
    /// The colour of the measured player.
    pub player_side: Side,
    /// The measured player's score: 1, 0.5 or 0.
    pub score: f64,
    /// `1-0`, `0-1` or `1/2-1/2`.
    pub result: String,
    /// Why it ended.
    pub reason: rules::EndReason,
    /// Plies played.
    pub plies: usize,
}

/// The outcome of [`play_match`].
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MatchResult {
    /// Totals from the measured player's view.
    pub wdl: Wdl,
    /// Every game.
    pub games: Vec<MatchGame>,
}

/// Plays `games` games of `player` against `opponent`. Game `i` starts from
/// `start_fens[i / 2 % len]` (the standard start when empty) and the player
/// takes White in even games and Black in odd ones, so every start is
/// played from both sides. Games end by the rules or after `max_plies`
/// plies (a draw). Games run concurrently over the pool.
pub fn play_match(
    pool: &BlockingPool,
    player: &Strength,
    opponent: &Strength,
    games: usize,
    seed: u64,
    start_fens: &[String],
    max_plies: usize,
) -> Result<MatchResult, ChessError> {
    let player = *player;
    play_match_as(
        pool,
        Arc::new(move |_: &Chess| player),
        opponent,
        games,
        seed,
        start_fens,
        max_plies,
    )
}

/// How a player moves in a position: a fixed strength, or one that depends on the
/// position (a phase specialist plays its strength in its phase and random moves
/// elsewhere: [`super::tools::ToolSet::strength_for`]).
pub type Player = Arc<dyn Fn(&Chess) -> Strength + Send + Sync>;

/// [`play_match`] with a position-dependent player.
pub fn play_match_as(
    pool: &BlockingPool,
    player: Player,
    opponent: &Strength,
    games: usize,
    seed: u64,
    start_fens: &[String],
    max_plies: usize,
) -> Result<MatchResult, ChessError> {
    let start = |i: usize| -> String {
        if start_fens.is_empty() {
            rules::fen(&Chess::default())
        } else {
            start_fens[(i / 2) % start_fens.len()].clone()
        }
    };
    let jobs: Vec<(usize, String)> = (0..games).map(|i| (i, start(i))).collect();
    let opponent = *opponent;
    let results = pool.run_many(jobs, move |p, (i, fen)| {
        let player = Arc::clone(&player);
        async move {
            let side = if i % 2 == 0 { Side::White } else { Side::Black };
            let game_seed = SplitMix64::derived(seed, i as u64).next_u64();
            play_one(&p, &fen, side, &*player, &opponent, game_seed, max_plies)
                .await
                .map(|g| (i, fen, side, g))
                .map_err(EngineError::from)
        }
    });
    let mut out = MatchResult {
        wdl: Wdl::default(),
        games: Vec::with_capacity(games),
    };
    for r in results {
        let (index, start_fen, player_side, game) = r.map_err(unwrap_chess)?;
        let Some(end) = game.ending() else {
            continue;
        };
        let score = end.score_for(player_side);
        match score {
            s if s > 0.75 => out.wdl.wins += 1,
            s if s < 0.25 => out.wdl.losses += 1,
            _ => out.wdl.draws += 1,
        }
        out.games.push(MatchGame {
            index,
            start_fen,
            player_side,
            score,
            result: end.result_str().into(),
            reason: end.reason,
            plies: game.plies().len(),
        });
    }
    Ok(out)
}

fn unwrap_chess(e: EngineError) -> ChessError {
    match e {
        EngineError::Position(inner) => *inner,
        other => ChessError::Engine(other),
    }
}

async fn play_one(
    pool: &EnginePool,
    fen: &str,
    player_side: Side,
    player: &(dyn Fn(&Chess) -> Strength + Send + Sync),
    opponent: &Strength,
    seed: u64,
    max_plies: usize,
) -> Result<Game, ChessError> {
    let mut game = Game::new(fen, max_plies, DrawRules::default())?;
    while !game.is_over() {
        let mover = game.turn();
        let strength = if mover == player_side {
            player(game.position())
        } else {
            *opponent
        };
        let ply_seed = SplitMix64::derived(seed, game.plies().len() as u64).next_u64();
        let m = choose_move(pool, game.position(), &strength, ply_seed).await?;
        game.play_move(m, None)?;
    }
    Ok(game)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wdl_score() {
        let w = Wdl {
            wins: 3,
            draws: 2,
            losses: 5,
        };
        assert_eq!(w.games(), 10);
        assert!((w.score() - 0.4).abs() < 1e-12);
        assert_eq!(Wdl::default().score(), 0.0);
    }
}
