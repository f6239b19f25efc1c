//! Playing strength as data, and the building block of the `calibrate` stage.
//!
//! A [`Strength`] says how a move is chosen: a weakening (Stockfish's own
//! `UCI_Elo` / `Skill Level` options, or the same weakening re-implemented
//! here), the search limit, and a share of uniformly random legal moves drawn
//! from a seeded generator. Debian's Stockfish 15.1 accepts `UCI_Elo` only
//! from 1350 ([`ENGINE_ELO_FLOOR`]); below that, [`Strength::nominal`] plays
//! at `Skill Level` 0 (Stockfish maps 1350 Elo to about level 0) and mixes in
//! random moves: a share of `(1350 - elo) / 1000` (1200 Elo: 15%). That
//! number is only nominal; [`play_match`] plays seeded games against a fixed
//! opponent so that a calibration stage can measure the strength it actually
//! gives.
//!
//! Two ways to search ([`SearchMode`]):
//!
//! - [`SearchMode::Nodes`] (the default, reproducible): Stockfish's weakening
//!   is re-implemented over a MultiPV search. Stockfish 15.1 turns `UCI_Elo`
//!   into a fractional skill level ([`skill_level_for_elo`]), searches
//!   [`SKILL_LINES`] lines and, when iteration `1 + level` is done, picks one
//!   of them by adding to each line's score a deterministic term and a random
//!   one that grow with the weakness; the random term comes from a generator
//!   seeded with the clock. Here the same search is asked for directly (`go
//!   depth 1+level nodes N`, `MultiPV 4`, one thread, hash cleared) and the
//!   same rule ([`pick_line`]) draws from this project's [`SplitMix64`],
//!   seeded from the game, the ply and the tool: the same key plays the same
//!   moves on any machine, at any load. The node budget stands in for the
//!   clock where the depth takes long.
//! - [`SearchMode::Movetime`] (the paper's literal 0.5 s per move): the
//!   engine's own options under `go movetime`. Not reproducible: the move
//!   depends on the machine's speed and load and on Stockfish's clock-seeded
//!   generator. Runs that use it are marked so (`otb status`, the tables).
//!
//! [`play_match`]: super::matches::play_match

use shakmaty::{Chess, Move, Position};

use super::engine::{BlockingPool, EnginePool, EngineStrength, Limit, PvLine, SearchRequest};
use super::rules;
use super::ChessError;
use crate::rng::SplitMix64;

/// The lowest `UCI_Elo` Debian's Stockfish 15.1 accepts.
pub const ENGINE_ELO_FLOOR: u32 = 1350;

/// The reference's time per move (0.5 s).
pub const REFERENCE_MOVETIME_MS: u64 = 500;

/// The default node budget of a search in [`SearchMode::Nodes`]: what
/// Stockfish 15.1 searches in about 0.5 s on one thread of a 1 M nodes/s
/// machine (see `docs/environments.md` for what was measured with it).
pub const DEFAULT_NODES: u64 = 500_000;

/// How many lines the weakened pick chooses among (Stockfish raises `MultiPV`
/// to 4 when a skill level is set).
pub const SKILL_LINES: u32 = 4;

/// The cap on the spread term of the weakened pick, in reported centipawns:
/// Stockfish's cap is a middlegame pawn (126 internal units), which Stockfish
/// 15.1 reports as 126 * 100 / 394 = 32 centipawns.
pub const SKILL_SPREAD_CAP_CP: i32 = 32;

/// How engine moves are searched.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SearchMode {
    /// Reproducible: searches limited by depth and this node budget; a weakened
    /// move re-implemented over a MultiPV list and drawn from a seeded generator.
    Nodes(u64),
    /// The paper's literal time limit (milliseconds per move) with the engine's
    /// own weakening: not reproducible.
    Movetime(u64),
}

impl Default for SearchMode {
    fn default() -> Self {
        SearchMode::Nodes(DEFAULT_NODES)
    }
}

impl SearchMode {
    /// Whether two runs with this mode play the same moves.
    pub fn reproducible(self) -> bool {
        matches!(self, SearchMode::Nodes(_))
    }

    /// A full-strength search's limit: `go nodes N` or `go movetime MS`.
    pub fn limit(self) -> Limit {
        match self {
            SearchMode::Nodes(n) => Limit::Nodes(n),
            SearchMode::Movetime(ms) => Limit::MovetimeMs(ms),
        }
    }

    /// A person's phrase: `nodes 500000 per move (reproducible)` or `movetime
    /// 500 ms per move (not reproducible: ...)`.
    pub fn describe(self) -> String {
        match self {
            SearchMode::Nodes(n) => format!(
                "nodes (at most {n} nodes per engine move, weakened moves drawn from a seeded generator: reproducible)"
            ),
            SearchMode::Movetime(ms) => format!(
                "movetime ({ms} ms per engine move, Stockfish's own clock-seeded weakening: NOT reproducible, moves depend on the machine's speed and load)"
            ),
        }
    }
}

/// Stockfish 15.1's skill level for a `UCI_Elo`: `((elo - 1346.6) / 143.4) ^
/// (1 / 0.806)`, clamped to 0..=19 (fractional).
pub fn skill_level_for_elo(elo: u32) -> f64 {
    let x = (f64::from(elo) - 1346.6) / 143.4;
    if x <= 0.0 {
        return 0.0;
    }
    x.powf(1.0 / 0.806).clamp(0.0, 19.0)
}

/// The depth at which a skill level picks its move: `1 + level` (whole part).
pub fn skill_depth(level: f64) -> u32 {
    1 + level.max(0.0) as u32
}

/// A score as the pick compares it: centipawns, mates as `+-(32000 - n)`.
fn pick_value(line: &PvLine) -> i64 {
    i64::from(line.score.centipawns())
}

/// The weakened pick (Stockfish's rule, written here over reported scores): with
/// `weakness = 120 - 2 * level` and `spread = min(top - last, cap)`, each line
/// `i` (best first) gets `score_i + (weakness * (top - score_i) + spread *
/// r_i) / 128` with `r_i` uniform in `0..weakness` from `rng`; the highest
/// total wins, a later line on a tie. Returns the chosen line's index (0 for
/// an empty list).
pub fn pick_line(lines: &[PvLine], level: f64, rng: &mut SplitMix64) -> usize {
    let (Some(first), Some(last)) = (lines.first(), lines.last()) else {
        return 0;
    };
    let top = pick_value(first);
    let spread = (top - pick_value(last)).clamp(0, i64::from(SKILL_SPREAD_CAP_CP));
    let weakness = 120.0 - 2.0 * level.clamp(0.0, 19.0);
    let span = (weakness as usize).max(1);
    let mut best = (0, i64::MIN);
    for (i, line) in lines.iter().enumerate() {
        let v = pick_value(line);
        let r = rng.below(span) as f64;
        let push = ((weakness * (top - v) as f64 + spread as f64 * r) / 128.0) as i64;
        if v + push >= best.1 {
            best = (i, v + push);
        }
    }
    best.0
}

/// How a move is chosen.
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Strength {
    /// The engine's strength options.
    pub engine: EngineStrength,
    /// The engine's search limit (with `skill`: the node budget of the
    /// MultiPV search).
    pub limit: Limit,
    /// Probability (0..=1) of playing a uniformly random legal move instead
    /// of the engine's.
    pub random_share: f64,
    /// The reproducible weakening: this skill level (0..20, fractional) picked
    /// here over a MultiPV search ([`pick_line`]) instead of by the engine;
    /// `None`: the engine's own move.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skill: Option<f64>,
}

impl Strength {
    /// The engine at full strength with a search limit.
    pub fn full(limit: Limit) -> Strength {
        Strength {
            engine: EngineStrength::default(),
            limit,
            random_share: 0.0,
            skill: None,
        }
    }

    /// Nominal Elo `elo` searched as `mode` says: `UCI_Elo` from the engine's
    /// floor up; below it, `Skill Level` 0 plus a random share of `(1350 -
    /// elo) / 1000` (capped at 1). With [`SearchMode::Nodes`] the weakening is
    /// the reproducible one: the skill level `UCI_Elo` stands for
    /// ([`skill_level_for_elo`]), picked here.
    pub fn nominal(elo: u32, mode: SearchMode) -> Strength {
        let random_share = if elo >= ENGINE_ELO_FLOOR {
            0.0
        } else {
            (f64::from(ENGINE_ELO_FLOOR - elo) / 1000.0).min(1.0)
        };
        match mode {
            SearchMode::Nodes(_) => Strength {
                engine: EngineStrength::default(),
                limit: mode.limit(),
                random_share,
                skill: Some(if elo >= ENGINE_ELO_FLOOR {
                    skill_level_for_elo(elo)
                } else {
                    0.0
                }),
            },
            SearchMode::Movetime(_) => Strength {
                engine: if elo >= ENGINE_ELO_FLOOR {
                    EngineStrength {
                        uci_elo: Some(elo),
                        skill_level: None,
                    }
                } else {
                    EngineStrength {
                        uci_elo: None,
                        skill_level: Some(0),
                    }
                },
                limit: mode.limit(),
                random_share,
                skill: None,
            },
        }
    }

    /// Stockfish's `Skill Level` `level` (no Elo limit) searched as `mode` says.
    pub fn skill_level(level: u32, mode: SearchMode) -> Strength {
        match mode {
            SearchMode::Nodes(_) => Strength {
                engine: EngineStrength::default(),
                limit: mode.limit(),
                random_share: 0.0,
                skill: (level < 20).then_some(f64::from(level)),
            },
            SearchMode::Movetime(_) => Strength {
                engine: EngineStrength {
                    uci_elo: None,
                    skill_level: Some(level),
                },
                limit: mode.limit(),
                random_share: 0.0,
                skill: None,
            },
        }
    }

    /// Only random legal moves.
    pub fn random() -> Strength {
        Strength {
            engine: EngineStrength::default(),
            limit: Limit::Depth(1),
            random_share: 1.0,
            skill: None,
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

/// The move `strength` plays in `pos`. The random draws come from `seed`, so
/// the same seed makes the same random/engine decision and, with a
/// reproducible weakening ([`Strength::skill`]), the same weakened move (the
/// engine's own move at limited strength is not reproducible; see
/// [`super::engine`]).
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
    let uci = match strength.skill {
        Some(level) => {
            let nodes = match strength.limit {
                Limit::Nodes(n) | Limit::DepthNodes { nodes: n, .. } => n,
                _ => DEFAULT_NODES,
            };
            let req = SearchRequest {
                fen,
                limit: Limit::DepthNodes {
                    depth: skill_depth(level),
                    nodes,
                },
                strength: EngineStrength::default(),
                multipv: SKILL_LINES,
            };
            let out = pool.search(&req).await?;
            // The pick's own stream (the random-share draw above is another).
            let mut pick = SplitMix64::derived(seed, 0x5b11);
            match out.lines.get(pick_line(&out.lines, level, &mut pick)) {
                Some(line) => line.first_move.clone(),
                // An engine that reports no lines: its own move.
                None => out.best_move.ok_or_else(no_move)?,
            }
        }
        None => pool
            .best_move(&fen, strength.limit, strength.engine)
            .await?
            .ok_or_else(no_move)?,
    };
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
        let t = SearchMode::Movetime(500);
        let s = Strength::nominal(2400, t);
        assert_eq!(s.engine.uci_elo, Some(2400));
        assert_eq!((s.random_share, s.skill), (0.0, None));
        assert_eq!(s.limit, Limit::MovetimeMs(500));
        let s = Strength::nominal(1350, SearchMode::Movetime(100));
        assert_eq!(s.engine.uci_elo, Some(1350));
        let s = Strength::nominal(1200, t);
        assert_eq!(s.engine.uci_elo, None);
        assert_eq!(s.engine.skill_level, Some(0));
        assert!((s.random_share - 0.15).abs() < 1e-12);
        assert_eq!(Strength::nominal(0, t).random_share, 1.0);
        // Reproducible: no engine option, the skill level picked here.
        let n = SearchMode::Nodes(1000);
        let s = Strength::nominal(2400, n);
        assert_eq!(s.engine, EngineStrength::default());
        assert_eq!(s.limit, Limit::Nodes(1000));
        let level = s.skill.unwrap();
        assert!((level - 11.87).abs() < 0.01, "{level}");
        assert_eq!(skill_depth(level), 12);
        let s = Strength::nominal(1200, n);
        assert_eq!(s.skill, Some(0.0));
        assert!((s.random_share - 0.15).abs() < 1e-12);
        assert_eq!(skill_depth(skill_level_for_elo(1800)), 5);
        assert!(skill_level_for_elo(1350) < 0.1);
        assert!((18.0..19.0).contains(&skill_level_for_elo(2850)));
        assert_eq!(skill_level_for_elo(1000), 0.0);
        assert_eq!(Strength::skill_level(5, n).skill, Some(5.0));
        assert_eq!(Strength::skill_level(5, t).engine.skill_level, Some(5));
        assert!(SearchMode::default().reproducible() && !t.reproducible());
    }

    fn line(cp: i32, mv: &str) -> PvLine {
        PvLine {
            score: super::super::engine::Score::Cp(cp),
            first_move: mv.into(),
            depth: 5,
        }
    }

    /// The pick is the seed's: the same seed the same line; a weak level spreads
    /// over the lines, a strong one keeps to the best unless the others are close.
    #[test]
    fn the_weakened_pick_is_seeded_and_follows_the_level() {
        let lines = [
            line(50, "a"),
            line(40, "b"),
            line(-30, "c"),
            line(-200, "d"),
        ];
        let picks = |level: f64| {
            let mut counts = [0usize; 4];
            for seed in 0..2000 {
                let i = pick_line(&lines, level, &mut SplitMix64::new(seed));
                assert_eq!(i, pick_line(&lines, level, &mut SplitMix64::new(seed)));
                counts[i] += 1;
            }
            counts
        };
        let weak = picks(0.0);
        let strong = picks(19.0);
        assert!(weak.iter().all(|&c| c > 0), "{weak:?}");
        assert!(weak[0] < 1000 && strong[0] > weak[0], "{weak:?} {strong:?}");
        assert!(strong[0] + strong[1] > 1800 && strong[3] < 20, "{strong:?}");
        assert_eq!(pick_line(&[], 3.0, &mut SplitMix64::new(1)), 0);
        assert_eq!(pick_line(&lines[..1], 0.0, &mut SplitMix64::new(1)), 0);
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
