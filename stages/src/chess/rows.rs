//! The chess environment's stored rows.

use pipeline::Row;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One start position of a split.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "chess_positions",
    doc = "one chess start position of the train or test split"
)]
pub struct PositionRow {
    /// `train` or `test`.
    pub split: String,
    /// Position identifier.
    pub position_id: String,
    /// The position in FEN.
    pub fen: String,
    /// `opening`, `middlegame`, `endgame` or `late_endgame`.
    pub phase: String,
    /// Evaluation stratum.
    pub evaluation: String,
    /// Centipawns from White's view (null for a mate).
    pub cp: Option<f64>,
    /// Mate in moves, positive when White mates.
    pub mate: Option<f64>,
}

/// One game (an exploration trajectory or a test game).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "chess_games",
    doc = "one chess game: exploration trajectory or test game"
)]
pub struct GameRow {
    /// Game identifier.
    pub game_id: String,
    /// `train` (exploration) or `test`.
    pub split: String,
    /// Documentation round the agent used.
    pub round: i64,
    /// Agent model spec.
    pub model: String,
    /// Start position (its `position_id`).
    pub position_id: String,
    /// `white` or `black`.
    pub agent_side: String,
    /// The opponent's nominal Elo.
    pub opponent_elo: i64,
    /// 1 / 0.5 / 0 for the agent; null when unfinished.
    pub score: Option<f64>,
    /// `1-0`, `0-1`, `1/2-1/2` or `*`.
    pub result: String,
    /// Why the game ended.
    pub end_reason: String,
    /// Every ply: side, SAN, FENs, tool, evaluation (`datasets::chess::game::PlyRecord`).
    pub plies: Value,
    /// Engine evaluation of the start (White's view).
    pub start_eval: Option<i64>,
    /// Engine evaluation at the end (White's view).
    pub final_eval: Option<i64>,
    /// The game as the editor reads it (bounded).
    pub editor_text: String,
    /// Agent turns whose model call failed (answer-class: the game was lost).
    pub failed_calls: i64,
    /// Class of the first failed call, or null.
    pub error_kind: Option<String>,
    /// Agent prompt tokens.
    pub prompt_tokens: i64,
    /// Agent completion tokens.
    pub completion_tokens: i64,
    /// Agent reasoning tokens.
    pub reasoning_tokens: i64,
}

impl GameRow {
    /// The game as the metrics read it: its plies (from `plies`), its first and last
    /// positions; an error names what in `plies` does not parse.
    pub fn record(&self) -> Result<datasets::chess::game::GameRecord, serde_json::Error> {
        let plies: Vec<datasets::chess::game::PlyRecord> =
            serde_json::from_value(self.plies.clone())?;
        Ok(datasets::chess::game::GameRecord {
            start_fen: plies
                .first()
                .map(|p| p.fen_before.clone())
                .unwrap_or_default(),
            final_fen: plies
                .last()
                .map(|p| p.fen_after.clone())
                .unwrap_or_default(),
            plies,
            ending: None,
            start_eval: None,
            cut_after: None,
        })
    }
}

/// One agent tool call, checked against the optimal tool.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "chess_calls",
    doc = "one agent tool call in a test game, checked against the optimal tool"
)]
pub struct CallCheckRow {
    /// The game the call was made in (its `game_id`).
    pub game_id: String,
    /// Ply number.
    pub ply: i64,
    /// Phase of the position the tool was called in.
    pub phase: String,
    /// Tool called.
    pub tool: String,
    /// The optimal tool there.
    pub optimal: String,
    /// The call picked the optimal tool.
    pub is_optimal: bool,
}

/// The best-tool % of one set of test games.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "chess_best_tool",
    doc = "best-tool % of one set of test games, overall and per phase"
)]
pub struct BestToolRow {
    /// Share of tool calls that picked the optimal tool.
    pub best_tool_pct: f64,
    /// Agent tool calls.
    pub tool_calls: i64,
    /// Best-tool % per phase: `{phase: percent}`.
    pub per_phase: Value,
}

/// The bootstrap Elo of one set of test games.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "chess_elo",
    doc = "bootstrap streaming Elo and best-tool % of one set of test games"
)]
pub struct EloRow {
    /// Test games rated.
    pub games: i64,
    /// Start rating of the streaming Elo.
    pub start: f64,
    /// Seeded shuffles (seeds 0..n).
    pub shuffles: i64,
    /// Mean final rating (the paper's headline).
    pub mean: f64,
    /// Median final rating (the authors' code).
    pub median: f64,
    /// 5th percentile.
    pub ci90_lo: f64,
    /// 95th percentile.
    pub ci90_hi: f64,
    /// 2.5th percentile.
    pub ci95_lo: f64,
    /// 97.5th percentile.
    pub ci95_hi: f64,
    /// 0.5th percentile.
    pub ci99_lo: f64,
    /// 99.5th percentile.
    pub ci99_hi: f64,
    /// Rating at which expected = actual score.
    pub performance: Option<f64>,
    /// Share of tool calls that picked the optimal tool.
    pub best_tool_pct: f64,
    /// Agent tool calls.
    pub tool_calls: i64,
    /// Best-tool % per phase: `{phase: percent}`.
    pub per_phase: Value,
}

/// One strength's measured Elo.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "chess_calibration",
    doc = "one engine strength's measured Elo against fixed anchors"
)]
pub struct CalibrationRow {
    /// The strength's nominal Elo.
    pub nominal_elo: i64,
    /// Games played.
    pub games: i64,
    /// Wins.
    pub wins: i64,
    /// Draws.
    pub draws: i64,
    /// Losses.
    pub losses: i64,
    /// The anchors' Elos (the engine's own calibrated `UCI_Elo`).
    pub anchors: Value,
    /// Performance rating against the anchors.
    pub measured_elo: Option<f64>,
}

/// One tool's measured Elo as a whole-game player (`calibrate_tools = true`): a phase
/// specialist plays its strength in its phase and random moves elsewhere.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "chess_tool_calibration",
    doc = "one tool's measured Elo, playing every move of its side"
)]
pub struct ToolCalibrationRow {
    /// `phase_specialists` or `strength_gradient`.
    pub tool_set: String,
    /// The tool's gold name.
    pub tool: String,
    /// Games played.
    pub games: i64,
    /// Wins.
    pub wins: i64,
    /// Draws.
    pub draws: i64,
    /// Losses.
    pub losses: i64,
    /// The anchors' Elos (the engine's own calibrated `UCI_Elo`).
    pub anchors: Value,
    /// Performance rating against the anchors.
    pub measured_elo: Option<f64>,
}

/// The chess tables `otb export` writes (positions and calibration are per
/// experiment, not per chain: unlabelled).
pub fn exported() -> Vec<crate::rows::Exported> {
    use crate::rows::Exported;
    vec![
        Exported::of::<PositionRow>(false),
        Exported::of::<CalibrationRow>(false),
        Exported::of::<ToolCalibrationRow>(false),
        Exported::of::<GameRow>(true),
        Exported::of::<CallCheckRow>(true),
        Exported::of::<BestToolRow>(true),
        Exported::of::<EloRow>(true),
    ]
}
