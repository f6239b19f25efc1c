//! Playing strength as data, and the building block of the `calibrate` stage.
//!
//! A [`Strength`] says how a move is chosen: the engine's own options
//! (`UCI_Elo`, `Skill Level`), the search limit, and a share of uniformly
//! random legal moves drawn from a seeded generator. Debian's Stockfish 15.1
//! accepts `UCI_Elo` only from 1350 ([`ENGINE_ELO_FLOOR`]); below that,
//! [`Strength::nominal`] plays at `Skill Level` 0 (Stockfish maps 1350 Elo to
//! about level 0) and mixes in random moves: a share of `(1350 - elo) / 1000`
//! (1200 Elo: 15%). That number is only nominal; [`play_match`] plays seeded
//! games against a fixed opponent so that a calibration stage can measure the
//! strength it actually gives.

use shakmaty::{Chess, Move, Position};
use std::sync::Arc;

use super::engine::{BlockingPool, EngineError, EnginePool, EngineStrength, Limit};
use super::game::Game;
use super::rules::{self, DrawRules, Side};
use super::ChessError;
use crate::rng::SplitMix64;

/// The lowest `UCI_Elo` Debian's Stockfish 15.1 accepts.
pub const ENGINE_ELO_FLOOR: u32 = 1350;

/// The reference's time per move (0.5 s).
pub const REFERENCE_MOVETIME_MS: u64 = 500;

/// How a move is chosen.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Strength {
    /// The engine's strength options.
    pub engine: EngineStrength,
    /// The engine's search limit.
    pub limit: Limit,
    /// Probability (0..=1) of playing a uniformly random legal move instead
    /// of the engine's.
    pub random_share: f64,
}

impl Strength {
    /// The engine at full strength with a search limit.
    pub fn full(limit: Limit) -> Strength {
        Strength {
            engine: EngineStrength::default(),
            limit,
            random_share: 0.0,
        }
    }

    /// Nominal Elo `elo` at `movetime_ms` per move: `UCI_Elo` from the
    /// engine's floor up; below it, `Skill Level` 0 plus a random share of
    /// `(1350 - elo) / 1000` (capped at 1).
    pub fn nominal(elo: u32, movetime_ms: u64) -> Strength {
        let limit = Limit::MovetimeMs(movetime_ms);
        if elo >= ENGINE_ELO_FLOOR {
            Strength {
                engine: EngineStrength {
                    uci_elo: Some(elo),
                    skill_level: None,
                },
                limit,
                random_share: 0.0,
            }
        } else {
            Strength {
                engine: EngineStrength {
                    uci_elo: None,
                    skill_level: Some(0),
                },
                limit,
                random_share: (f64::from(ENGINE_ELO_FLOOR - elo) / 1000.0).min(1.0),
            }
        }
    }

    /// Only random legal moves.
    pub fn random() -> Strength {
        Strength {
            engine: EngineStrength::default(),
            limit: Limit::Depth(1),
            random_share: 1.0,
        }
    }
}

/// A uniformly random legal move (seeded), or `None` when there is none.
pub fn random_move(pos: &Chess, rng: &mut SplitMix64) -> Option<Move> {
    let moves = pos.legal_moves();
    if moves.is_empty() {
        return None;
    }
    Some(moves[rng.below(moves.len())])
}

/// The move `strength` plays in `pos`. The random draw comes from `seed`, so
/// the same seed makes the same random/engine decision (the engine's own
/// move at limited strength is not reproducible; see [`super::engine`]).
pub async fn choose_move(
    pool: &EnginePool,
    pos: &Chess,
    strength: &Strength,
    seed: u64,
) -> Result<Move, ChessError> {
    let mut rng = SplitMix64::new(seed);
    let no_move = || rules::no_legal_move(pos);
    if strength.random_share > 0.0 && rng.next_f64() < strength.random_share {
        return random_move(pos, &mut rng).ok_or_else(no_move);
    }
    let fen = rules::fen(pos);
    let uci = pool
        .best_move(&fen, strength.limit, strength.engine)
        .await?
        .ok_or_else(no_move)?;
    rules::parse_uci(pos, &uci)
}

impl BlockingPool {
    /// Blocking [`choose_move`].
    pub fn choose_move(
        &self,
        pos: &Chess,
        strength: &Strength,
        seed: u64,
    ) -> Result<Move, ChessError> {
        self.block_on(choose_move(self.pool(), pos, strength, seed))
    }
}

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
    fn nominal_strengths() {
        let s = Strength::nominal(2400, 500);
        assert_eq!(s.engine.uci_elo, Some(2400));
        assert_eq!(s.random_share, 0.0);
        assert_eq!(s.limit, Limit::MovetimeMs(500));
        let s = Strength::nominal(1350, 100);
        assert_eq!(s.engine.uci_elo, Some(1350));
        let s = Strength::nominal(1200, 500);
        assert_eq!(s.engine.uci_elo, None);
        assert_eq!(s.engine.skill_level, Some(0));
        assert!((s.random_share - 0.15).abs() < 1e-12);
        assert_eq!(Strength::nominal(0, 500).random_share, 1.0);
    }

    #[test]
    fn random_moves_are_legal_and_seeded() {
        let pos = Chess::default();
        let a = random_move(&pos, &mut SplitMix64::new(5)).unwrap();
        let b = random_move(&pos, &mut SplitMix64::new(5)).unwrap();
        assert_eq!(a, b);
        assert!(pos.is_legal(a));
        let mated = rules::parse_fen("R5k1/5ppp/8/8/8/8/8/6K1 b - - 1 1").unwrap();
        assert_eq!(random_move(&mated, &mut SplitMix64::new(5)), None);
    }

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
