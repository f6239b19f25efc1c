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
//!
//! [`play_match`]: super::matches::play_match

use shakmaty::{Chess, Move, Position};

use super::engine::{BlockingPool, EnginePool, EngineStrength, Limit};
use super::rules;
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
}
