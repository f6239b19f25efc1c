//! Games and episodes: the position, the plies with the tool behind each agent
//! move, the result and why; the exploration trajectory and the test game of
//! the spec; the editor's view of a trajectory.
//!
//! Counting is in plies (half-moves) throughout: the spec's "10 moves" of
//! exploration and "120 moves" of a test game are plies.
//!
//! An agent turn is decided by the caller (a model) as an [`AgentChoice`]; no
//! call, a failed call or an illegal move loses the game for the agent.

use std::fmt::Write as _;

use shakmaty::{Chess, Move};

use super::engine::{BlockingPool, EngineError};
use super::rules::{self, DrawRules, EndReason, Ending, Side};
use super::strength::{self, SearchMode, Strength};
use super::tools::{Docs, ToolSet};
use super::ChessError;
use crate::rng::SplitMix64;

/// One ply.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PlyRecord {
    /// 1-based ply number within the game.
    pub ply: usize,
    /// Who moved.
    pub side: Side,
    /// The move in SAN (with `+` / `#`).
    pub san: String,
    /// The move in UCI notation.
    pub uci: String,
    /// The position before the move (full FEN).
    pub fen_before: String,
    /// The position after the move (full FEN).
    pub fen_after: String,
    /// The tool that produced the move (agent plies only), as the agent named it.
    pub tool: Option<String>,
    /// Engine evaluation after the move (White's view, centipawns, mates as
    /// `+-(32000 - n)`), when evaluations were asked for.
    pub eval_after: Option<i32>,
}

/// A game in progress or finished.
#[derive(Debug, Clone)]
pub struct Game {
    start_fen: String,
    pos: Chess,
    plies: Vec<PlyRecord>,
    keys: Vec<u64>,
    ending: Option<Ending>,
    max_plies: usize,
    rules: DrawRules,
    start_eval: Option<i32>,
}

/// A finished (or abandoned) game as plain data.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GameRecord {
    /// The start position (full FEN).
    pub start_fen: String,
    /// The position at the end (full FEN).
    pub final_fen: String,
    /// Every ply.
    pub plies: Vec<PlyRecord>,
    /// The result; `None` if the game was not finished.
    pub ending: Option<Ending>,
    /// Evaluation of the start position (White's view), when asked for.
    pub start_eval: Option<i32>,
    /// `Some(n)`: the game was cut after `n` plies without a result (an
    /// exploration trajectory); `ending` is then `None`.
    #[serde(default)]
    pub cut_after: Option<usize>,
}

impl GameRecord {
    /// The agent's plies (those with a tool).
    pub fn agent_plies(&self) -> impl Iterator<Item = &PlyRecord> {
        self.plies.iter().filter(|p| p.tool.is_some())
    }

    /// Evaluation after the last ply (or of the start when no ply was played).
    pub fn final_eval(&self) -> Option<i32> {
        match self.plies.last() {
            Some(p) => p.eval_after,
            None => self.start_eval,
        }
    }
}

impl Game {
    /// A game from `fen` (with or without counters) that ends after at most
    /// `max_plies` plies (then a draw).
    pub fn new(fen: &str, max_plies: usize, rules: DrawRules) -> Result<Game, ChessError> {
        let pos = rules::parse_fen(fen)?;
        let mut game = Game {
            start_fen: rules::fen(&pos),
            keys: vec![rules::position_key(&pos)],
            pos,
            plies: Vec::new(),
            ending: None,
            max_plies,
            rules,
            start_eval: None,
        };
        game.check_end();
        Ok(game)
    }

    /// The current position.
    pub fn position(&self) -> &Chess {
        &self.pos
    }

    /// The current position as a full FEN.
    pub fn fen(&self) -> String {
        rules::fen(&self.pos)
    }

    /// The start position as a full FEN.
    pub fn start_fen(&self) -> &str {
        &self.start_fen
    }

    /// The side to move.
    pub fn turn(&self) -> Side {
        Side::to_move(&self.pos)
    }

    /// The plies so far.
    pub fn plies(&self) -> &[PlyRecord] {
        &self.plies
    }

    /// The result, once the game is over.
    pub fn ending(&self) -> Option<Ending> {
        self.ending
    }

    /// Whether the game is over.
    pub fn is_over(&self) -> bool {
        self.ending.is_some()
    }

    /// Sets the evaluation of the start position.
    pub fn set_start_eval(&mut self, cp: i32) {
        self.start_eval = Some(cp);
    }

    /// Sets the evaluation after the last ply.
    pub fn set_last_eval(&mut self, cp: i32) {
        if let Some(p) = self.plies.last_mut() {
            p.eval_after = Some(cp);
        }
    }

    fn check_end(&mut self) {
        if self.ending.is_some() {
            return;
        }
        self.ending = rules::game_ending(&self.pos, &self.keys, self.rules).or_else(|| {
            (self.plies.len() >= self.max_plies).then_some(Ending {
                winner: None,
                reason: EndReason::PlyLimit,
            })
        });
    }

    /// Plays a legal move; `tool` names the tool for an agent ply.
    pub fn play_move(&mut self, m: Move, tool: Option<&str>) -> Result<(), ChessError> {
        if let Some(end) = self.ending {
            return Err(ChessError::IllegalMove {
                fen: self.fen(),
                mv: rules::uci(m),
                reason: format!("the game is over ({})", end.reason.as_str()),
            });
        }
        let side = self.turn();
        let san = rules::san(&self.pos, m);
        let next = rules::play(&self.pos, m)?;
        let fen_before = self.fen();
        self.pos = next;
        self.keys.push(rules::position_key(&self.pos));
        self.plies.push(PlyRecord {
            ply: self.plies.len() + 1,
            side,
            san,
            uci: rules::uci(m),
            fen_before,
            fen_after: rules::fen(&self.pos),
            tool: tool.map(str::to_owned),
            eval_after: None,
        });
        self.check_end();
        Ok(())
    }

    /// Plays a move given in SAN.
    pub fn play_san(&mut self, san: &str, tool: Option<&str>) -> Result<(), ChessError> {
        let m = rules::parse_san(&self.pos, san)?;
        self.play_move(m, tool)
    }

    /// Ends the game with a loss for the side to move.
    pub fn forfeit(&mut self, reason: EndReason) {
        if self.ending.is_none() {
            self.ending = Some(Ending {
                winner: Some(self.turn().other()),
                reason,
            });
        }
    }

    /// Applies an agent's turn: a tool call is executed and its move played;
    /// no call, a failed call, an unknown tool or an illegal move forfeits.
    /// Engine failures are returned as errors (they are not the agent's).
    pub fn agent_turn(
        &mut self,
        choice: &AgentChoice,
        tools: &ToolSet,
        docs: Docs,
        pool: &BlockingPool,
        seed: u64,
    ) -> Result<(), ChessError> {
        match choice {
            AgentChoice::NoCall => self.forfeit(EndReason::NoToolCall),
            AgentChoice::Failed { .. } => self.forfeit(EndReason::FailedToolCall),
            AgentChoice::Tool { name } => match tools.index_of(name, docs) {
                None => self.forfeit(EndReason::FailedToolCall),
                Some(i) => {
                    let mv = tools.execute(i, &self.pos, seed, pool)?;
                    if self.play_san(&mv.san, Some(name)).is_err() {
                        self.forfeit(EndReason::IllegalMove);
                    }
                }
            },
        }
        Ok(())
    }

    /// The move history as the agent is shown it: `12. e4 (function_1) e5`,
    /// with the tool after each agent move, numbered from the start FEN's
    /// move number (`12. ... Nf6` when Black moved first).
    pub fn history_text(&self) -> String {
        let mut out = String::new();
        let mut number = self
            .start_fen
            .rsplit(' ')
            .next()
            .and_then(|n| n.parse::<u32>().ok())
            .unwrap_or(1);
        for (i, p) in self.plies.iter().enumerate() {
            if !out.is_empty() {
                out.push(' ');
            }
            match p.side {
                Side::White => {
                    let _ = write!(out, "{number}. ");
                }
                Side::Black if i == 0 => {
                    let _ = write!(out, "{number}. ... ");
                }
                Side::Black => {}
            }
            out.push_str(&p.san);
            if let Some(t) = &p.tool {
                let _ = write!(out, " ({t})");
            }
            if p.side == Side::Black {
                number += 1;
            }
        }
        out
    }

    /// The game as plain data.
    pub fn record(&self) -> GameRecord {
        GameRecord {
            start_fen: self.start_fen.clone(),
            final_fen: self.fen(),
            plies: self.plies.clone(),
            ending: self.ending,
            start_eval: self.start_eval,
            cut_after: None,
        }
    }
}

/// What the agent did on its turn.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum AgentChoice {
    /// Called the tool with this name.
    Tool {
        /// The tool's name as the agent wrote it.
        name: String,
    },
    /// Made no tool call.
    NoCall,
    /// The call could not be made (malformed, refused, ...).
    Failed {
        /// What went wrong.
        error: String,
    },
}

/// How an episode is played.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EpisodeConfig {
    /// Ply limit (then a draw).
    pub max_plies: usize,
    /// The agent's colour; the opponent has the other.
    pub agent_side: Side,
    /// The opponent.
    pub opponent: Strength,
    /// Depth of the evaluation after every ply (`None`: no evaluations).
    pub eval_depth: Option<u32>,
    /// Draw rules.
    pub draw_rules: DrawRules,
    /// Whether reaching `max_plies` ends the game as a draw (a test game)
    /// or only cuts it short (an exploration trajectory: a partial game with
    /// no result, judged by its final evaluation).
    #[serde(default = "yes")]
    pub limit_is_draw: bool,
}

fn yes() -> bool {
    true
}

/// The exploration trajectory's ply count (5 per side).
pub const EXPLORATION_PLIES: usize = 10;
/// The exploration trajectory's evaluation depth.
pub const EXPLORATION_EVAL_DEPTH: u32 = 16;
/// The exploration opponent's Elo (the authors' code).
pub const EXPLORATION_OPPONENT_ELO: u32 = 1800;
/// A test game's ply limit.
pub const TEST_GAME_PLIES: usize = 120;
/// The opponents' Elos of the test games.
pub const OPPONENT_ELOS: [u32; 3] = [1200, 1800, 2400];

/// The other opponent profile of the spec (the paper's appendix): Stockfish
/// `Skill Level` 1, 5 and 10, with the ratings the paper gives them ("about
/// 800 / 1600 / 2400"); the calibrate stage measures what they really are.
pub const OPPONENT_LEVELS: [(u32, u32); 3] = [(1, 800), (5, 1600), (10, 2400)];

/// An opponent of the test games.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Opponent {
    /// The engine limited to this Elo ([`Strength::nominal`]: `UCI_Elo`, or
    /// the weakening below the engine's floor).
    Elo(u32),
    /// The engine at `Skill Level` `level` (no Elo limit), with its nominal
    /// rating.
    Level {
        /// Stockfish's `Skill Level` (0-20).
        level: u32,
        /// The rating it is said to have (used when ratings are nominal).
        nominal: u32,
    },
}

impl Opponent {
    /// The Elo profile: 1200, 1800, 2400.
    pub fn elo_profile() -> Vec<Opponent> {
        OPPONENT_ELOS.iter().map(|&e| Opponent::Elo(e)).collect()
    }

    /// The level profile: Skill Level 1, 5, 10.
    pub fn level_profile() -> Vec<Opponent> {
        OPPONENT_LEVELS
            .iter()
            .map(|&(level, nominal)| Opponent::Level { level, nominal })
            .collect()
    }

    /// How it plays with engine moves searched as `search` says.
    pub fn strength(self, search: SearchMode) -> Strength {
        match self {
            Opponent::Elo(elo) => Strength::nominal(elo, search),
            Opponent::Level { level, .. } => Strength::skill_level(level, search),
        }
    }

    /// The nominal rating (the Elo, or the level's stated rating): what the
    /// games record and the key of its measured rating.
    pub fn nominal_rating(self) -> u32 {
        match self {
            Opponent::Elo(elo) => elo,
            Opponent::Level { nominal, .. } => nominal,
        }
    }

    /// Its part of a game id: `vs1800`, `vsL5`.
    pub fn tag(self) -> String {
        match self {
            Opponent::Elo(elo) => format!("vs{elo}"),
            Opponent::Level { level, .. } => format!("vsL{level}"),
        }
    }
}

/// An Elo opponent is written as its number (so the Elo profile's stage keys
/// read as before: `[1200, 1800, 2400]`), a level as `{"skill_level": n}`.
impl serde::Serialize for Opponent {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match *self {
            Opponent::Elo(elo) => s.serialize_u32(elo),
            Opponent::Level { level, .. } => {
                use serde::ser::SerializeMap;
                let mut m = s.serialize_map(Some(1))?;
                m.serialize_entry("skill_level", &level)?;
                m.end()
            }
        }
    }
}

impl EpisodeConfig {
    /// The training trajectory: 10 plies against Elo 1800, evaluated at
    /// depth 16 after every ply; the 10-ply cut leaves a partial game (no
    /// result), not a draw.
    pub fn exploration(agent_side: Side, search: SearchMode) -> EpisodeConfig {
        EpisodeConfig {
            max_plies: EXPLORATION_PLIES,
            agent_side,
            opponent: Strength::nominal(EXPLORATION_OPPONENT_ELO, search),
            eval_depth: Some(EXPLORATION_EVAL_DEPTH),
            draw_rules: DrawRules::default(),
            limit_is_draw: false,
        }
    }

    /// A test game: up to 120 plies against `opponent`, no evaluations.
    pub fn test(agent_side: Side, opponent: Strength) -> EpisodeConfig {
        EpisodeConfig {
            max_plies: TEST_GAME_PLIES,
            agent_side,
            opponent,
            eval_depth: None,
            draw_rules: DrawRules::default(),
            limit_is_draw: true,
        }
    }

    /// The same configuration for both agent colours ("mirror").
    pub fn mirror(&self) -> [EpisodeConfig; 2] {
        Side::BOTH.map(|s| EpisodeConfig {
            agent_side: s,
            ..self.clone()
        })
    }
}

/// Plays one episode: the agent (`agent`, called on each of its turns with
/// the game so far) against the configured opponent. Seeds for the tools and
/// the opponent's random draws are derived from `seed` and the ply number.
pub fn run_episode(
    pool: &BlockingPool,
    tools: &ToolSet,
    docs: Docs,
    fen: &str,
    cfg: &EpisodeConfig,
    seed: u64,
    agent: &mut dyn FnMut(&Game) -> AgentChoice,
) -> Result<GameRecord, ChessError> {
    let mut game = Game::new(fen, cfg.max_plies, cfg.draw_rules)?;
    let evaluate = |g: &Game, depth: u32| -> Result<i32, ChessError> {
        Ok(pool.evaluate(&g.fen(), depth)?.white_cp)
    };
    if let Some(d) = cfg.eval_depth {
        let cp = evaluate(&game, d)?;
        game.set_start_eval(cp);
    }
    while !game.is_over() {
        let ply_seed = SplitMix64::derived(seed, game.plies().len() as u64).next_u64();
        let before = game.plies().len();
        if game.turn() == cfg.agent_side {
            let choice = agent(&game);
            game.agent_turn(&choice, tools, docs, pool, ply_seed)?;
        } else {
            let m = pool
                .choose_move(game.position(), &cfg.opponent, ply_seed)
                .map_err(|e| match e {
                    ChessError::Engine(EngineError::Position(inner)) => *inner,
                    other => other,
                })?;
            game.play_move(m, None)?;
        }
        if let (Some(d), true) = (cfg.eval_depth, game.plies().len() > before) {
            let cp = evaluate(&game, d)?;
            game.set_last_eval(cp);
        }
    }
    Ok(settle(game.record(), cfg))
}

/// A played episode's record under `cfg`: when the ply limit only cuts the
/// game (`limit_is_draw` false: exploration), a game that reached it has no
/// result and says where it was cut; every other ending stands.
pub fn settle(mut record: GameRecord, cfg: &EpisodeConfig) -> GameRecord {
    if let (
        false,
        Some(Ending {
            reason: EndReason::PlyLimit,
            ..
        }),
    ) = (cfg.limit_is_draw, record.ending)
    {
        record.ending = None;
        record.cut_after = Some(record.plies.len());
    }
    record
}

/// The default number of agent plies shown to the editor per trajectory.
pub const EDITOR_PLIES: usize = 20;

/// A trajectory as the ToolObserver editor sees it: side played, result (a
/// game cut short says so, with no result),
/// initial and final evaluation, then per agent ply the SAN, the FEN after,
/// the tool and the evaluation before/after; the first `max_plies` agent
/// plies, then a count of the rest.
pub fn editor_text(record: &GameRecord, agent_side: Side, max_plies: usize) -> String {
    let cp = |v: Option<i32>| v.map_or_else(|| "n/a".to_owned(), |c| c.to_string());
    let mut out = String::new();
    let result = match record.ending {
        Some(e) => format!(
            "{} ({}; {} for the agent)",
            e.result_str(),
            e.reason.as_str(),
            match e.score_for(agent_side) {
                s if s > 0.75 => "win",
                s if s < 0.25 => "loss",
                _ => "draw",
            }
        ),
        None => match record.cut_after {
            Some(n) => format!(
                "none (a partial game, stopped after {n} plies; judge it by the final evaluation)"
            ),
            None => "unfinished".into(),
        },
    };
    let _ = writeln!(out, "Agent played: {agent_side}");
    let _ = writeln!(out, "Result: {result}");
    let _ = writeln!(
        out,
        "Evaluation (centipawns, White's view): initial {}, final {}",
        cp(record.start_eval),
        cp(record.final_eval())
    );
    let mut before = record.start_eval;
    let mut shown = 0;
    let mut hidden = 0;
    for p in &record.plies {
        if let Some(tool) = &p.tool {
            if shown < max_plies {
                let _ = writeln!(
                    out,
                    "Ply {}: {} by {} -> FEN {} | eval {} -> {}",
                    p.ply,
                    p.san,
                    tool,
                    p.fen_after,
                    cp(before),
                    cp(p.eval_after)
                );
                shown += 1;
            } else {
                hidden += 1;
            }
        }
        before = p.eval_after;
    }
    if hidden > 0 {
        let _ = writeln!(out, "... {hidden} more agent plies not shown");
    }
    out
}

/// Plays `strength`'s move for the side to move (the opponent's turn, for
/// callers that drive the loop themselves).
pub fn opponent_turn(
    game: &mut Game,
    pool: &BlockingPool,
    strength: &Strength,
    seed: u64,
) -> Result<(), ChessError> {
    let m = pool.choose_move(game.position(), strength, seed)?;
    game.play_move(m, None)
}

/// A uniformly random legal move for the side to move (seeded), if any.
pub fn random_legal_move(game: &Game, seed: u64) -> Option<Move> {
    strength::random_move(game.position(), &mut SplitMix64::new(seed))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plies_history_and_ply_limit() {
        let mut g = Game::new(
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -",
            3,
            DrawRules::default(),
        )
        .unwrap();
        g.play_san("e4", Some("function_1")).unwrap();
        g.play_san("e5", None).unwrap();
        assert!(!g.is_over());
        g.play_san("Nf3", Some("function_2")).unwrap();
        assert_eq!(
            g.history_text(),
            "1. e4 (function_1) e5 2. Nf3 (function_2)"
        );
        assert_eq!(g.ending().map(|e| e.reason), Some(EndReason::PlyLimit));
        assert!(g.play_san("Nc6", None).is_err());
        let r = g.record();
        assert_eq!(r.agent_plies().count(), 2);
        assert_eq!(r.plies[1].side, Side::Black);
        assert_eq!(r.plies[2].fen_before, r.plies[1].fen_after);
    }

    #[test]
    fn black_to_move_history_and_forfeit() {
        let mut g = Game::new(
            "4k3/8/8/8/8/8/4P3/4K3 b - - 0 41",
            120,
            DrawRules::default(),
        )
        .unwrap();
        g.play_san("Kd7", Some("function_3")).unwrap();
        g.play_san("e4", None).unwrap();
        assert_eq!(g.history_text(), "41. ... Kd7 (function_3) 42. e4");
        assert!(g.play_san("Kd9", None).is_err());
        g.forfeit(EndReason::NoToolCall);
        let e = g.ending().unwrap();
        assert_eq!(e.winner, Some(Side::White));
        assert_eq!(e.reason, EndReason::NoToolCall);
        // A second forfeit does not change the result.
        g.forfeit(EndReason::IllegalMove);
        assert_eq!(g.ending().unwrap().reason, EndReason::NoToolCall);
    }

    #[test]
    fn checkmate_and_repetition_end_the_game() {
        let mut g = Game::new(
            "6k1/5ppp/8/8/8/8/8/R5K1 w - - 0 1",
            120,
            DrawRules::default(),
        )
        .unwrap();
        g.play_san("Ra8#", Some("function_1")).unwrap();
        assert_eq!(
            g.ending(),
            Some(Ending {
                winner: Some(Side::White),
                reason: EndReason::Checkmate
            })
        );
        let mut g = Game::new("4k3/8/8/8/8/8/8/R3K3 w - - 0 1", 120, DrawRules::default()).unwrap();
        for _ in 0..2 {
            for m in ["Ra2", "Kd8", "Ra1", "Ke8"] {
                g.play_san(m, None).unwrap();
            }
        }
        assert_eq!(g.ending().map(|e| e.reason), Some(EndReason::Repetition));
    }

    /// The exploration cut is a partial game with its final evaluation, never a draw.
    #[test]
    fn a_cut_trajectory_is_partial_not_a_draw() {
        let mut g = Game::new(
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
            2,
            DrawRules::default(),
        )
        .unwrap();
        g.set_start_eval(20);
        g.play_san("e4", Some("function_1")).unwrap();
        g.set_last_eval(35);
        g.play_san("e5", None).unwrap();
        g.set_last_eval(30);
        assert_eq!(g.ending().map(|e| e.reason), Some(EndReason::PlyLimit));
        // A test game's limit is a draw ...
        let test = settle(
            g.record(),
            &EpisodeConfig::test(Side::White, Strength::random()),
        );
        assert_eq!(test.ending.map(|e| e.winner), Some(None));
        assert_eq!(test.cut_after, None);
        // ... the exploration cut is not.
        let r = settle(
            g.record(),
            &EpisodeConfig::exploration(Side::White, SearchMode::Nodes(10)),
        );
        assert_eq!((r.ending, r.cut_after), (None, Some(2)));
        let text = editor_text(&r, Side::White, 20);
        assert!(
            !text.contains("1/2-1/2") && !text.contains("draw for"),
            "{text}"
        );
        assert!(
            text.contains("Result: none (a partial game, stopped after 2 plies"),
            "{text}"
        );
        assert!(text.contains("initial 20, final 30"), "{text}");
    }

    #[test]
    fn editor_text_is_bounded() {
        let mut g = Game::new(
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
            120,
            DrawRules::default(),
        )
        .unwrap();
        g.set_start_eval(20);
        for (i, m) in ["Nf3", "Nf6", "Ng1", "Ng8", "Nc3", "Nc6", "Nb1", "Nb8"]
            .iter()
            .enumerate()
        {
            let tool = (i % 2 == 0).then_some("function_2");
            g.play_san(m, tool).unwrap();
            g.set_last_eval(10 * i as i32);
        }
        let r = g.record();
        let text = editor_text(&r, Side::White, 3);
        assert!(text.starts_with("Agent played: white\n"), "{text}");
        assert!(
            text.contains("Result: 1/2-1/2 (repetition; draw for the agent)"),
            "{text}"
        );
        assert!(text.contains("initial 20, final 70"), "{text}");
        assert!(text.contains("Ply 1: Nf3 by function_2 -> FEN rnbqkbnr/pppppppp/8/8/8/5N2/PPPPPPPP/RNBQKB1R b KQkq - 1 1 | eval 20 -> 0"), "{text}");
        assert!(text.contains("Ply 3: Ng1 by function_2 -> FEN"), "{text}");
        assert!(text.contains("eval 10 -> 20"), "{text}");
        assert!(!text.contains("Ply 7"), "{text}");
        assert!(
            text.ends_with("... 1 more agent plies not shown\n"),
            "{text}"
        );
    }
}
