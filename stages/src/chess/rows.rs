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
    #[row(doc = "train or test")]
    pub split: String,
    #[row(doc = "identifier")]
    pub position_id: String,
    #[row(doc = "FEN")]
    pub fen: String,
    #[row(doc = "opening, middlegame, endgame, late_endgame")]
    pub phase: String,
    #[row(doc = "evaluation stratum")]
    pub evaluation: String,
    #[row(doc = "centipawns from White's view (null for a mate)")]
    pub cp: Option<f64>,
    #[row(doc = "mate in moves, positive when White mates")]
    pub mate: Option<f64>,
}

/// One game (an exploration trajectory or a test game).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "chess_games",
    doc = "one chess game: exploration trajectory or test game"
)]
pub struct GameRow {
    #[row(doc = "identifier")]
    pub game_id: String,
    #[row(doc = "train (exploration) or test")]
    pub split: String,
    #[row(doc = "documentation round the agent used")]
    pub round: i64,
    #[row(doc = "agent model spec")]
    pub model: String,
    #[row(doc = "start position")]
    pub position_id: String,
    #[row(doc = "white or black")]
    pub agent_side: String,
    /// The opponent's nominal Elo.
    #[row(doc = "opponent's nominal Elo")]
    pub opponent_elo: i64,
    /// 1 / 0.5 / 0 for the agent; null when unfinished.
    #[row(doc = "1 / 0.5 / 0 for the agent")]
    pub score: Option<f64>,
    #[row(doc = "1-0, 0-1, 1/2-1/2 or *")]
    pub result: String,
    #[row(doc = "why the game ended")]
    pub end_reason: String,
    /// Every ply (`datasets::chess::game::PlyRecord`).
    #[row(doc = "every ply: side, SAN, FENs, tool, evaluation")]
    pub plies: Value,
    #[row(doc = "engine evaluation of the start (White's view)")]
    pub start_eval: Option<i64>,
    #[row(doc = "engine evaluation at the end (White's view)")]
    pub final_eval: Option<i64>,
    /// The game as the editor reads it (bounded).
    #[row(doc = "the game as the editor reads it")]
    pub editor_text: String,
    /// Agent turns whose model call failed (answer-class: the game was lost).
    #[row(doc = "agent turns whose model call failed")]
    pub failed_calls: i64,
    #[row(doc = "class of the first failed call, or null")]
    pub error_kind: Option<String>,
    #[row(doc = "agent prompt tokens")]
    pub prompt_tokens: i64,
    #[row(doc = "agent completion tokens")]
    pub completion_tokens: i64,
    #[row(doc = "agent reasoning tokens")]
    pub reasoning_tokens: i64,
}

/// One agent tool call, checked against the optimal tool.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "chess_calls",
    doc = "one agent tool call in a test game, checked against the optimal tool"
)]
pub struct CallCheckRow {
    #[row(doc = "game")]
    pub game_id: String,
    #[row(doc = "ply number")]
    pub ply: i64,
    #[row(doc = "phase of the position the tool was called in")]
    pub phase: String,
    #[row(doc = "tool called")]
    pub tool: String,
    #[row(doc = "the optimal tool there")]
    pub optimal: String,
    #[row(doc = "the call picked the optimal tool")]
    pub is_optimal: bool,
}

/// The best-tool % of one set of test games.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "chess_best_tool",
    doc = "best-tool % of one set of test games, overall and per phase"
)]
pub struct BestToolRow {
    #[row(doc = "share of tool calls that picked the optimal tool")]
    pub best_tool_pct: f64,
    #[row(doc = "agent tool calls")]
    pub tool_calls: i64,
    /// `{phase: percent}`.
    #[row(doc = "{phase: best-tool %}")]
    pub per_phase: Value,
}

/// The bootstrap Elo of one set of test games.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "chess_elo",
    doc = "bootstrap streaming Elo and best-tool % of one set of test games"
)]
pub struct EloRow {
    #[row(doc = "games")]
    pub games: i64,
    #[row(doc = "start rating")]
    pub start: f64,
    #[row(doc = "seeded shuffles (seeds 0..n)")]
    pub shuffles: i64,
    #[row(doc = "mean final rating (the paper's headline)")]
    pub mean: f64,
    #[row(doc = "median final rating (the authors' code)")]
    pub median: f64,
    #[row(doc = "5th percentile")]
    pub ci90_lo: f64,
    #[row(doc = "95th percentile")]
    pub ci90_hi: f64,
    #[row(doc = "2.5th percentile")]
    pub ci95_lo: f64,
    #[row(doc = "97.5th percentile")]
    pub ci95_hi: f64,
    #[row(doc = "0.5th percentile")]
    pub ci99_lo: f64,
    #[row(doc = "99.5th percentile")]
    pub ci99_hi: f64,
    #[row(doc = "rating at which expected = actual score")]
    pub performance: Option<f64>,
    #[row(doc = "share of tool calls that picked the optimal tool")]
    pub best_tool_pct: f64,
    #[row(doc = "agent tool calls")]
    pub tool_calls: i64,
    /// `{phase: percent}`.
    #[row(doc = "{phase: best-tool %}")]
    pub per_phase: Value,
}

/// One strength's measured Elo.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "chess_calibration",
    doc = "one engine strength's measured Elo against fixed anchors"
)]
pub struct CalibrationRow {
    #[row(doc = "the strength's nominal Elo")]
    pub nominal_elo: i64,
    #[row(doc = "games played")]
    pub games: i64,
    #[row(doc = "wins")]
    pub wins: i64,
    #[row(doc = "draws")]
    pub draws: i64,
    #[row(doc = "losses")]
    pub losses: i64,
    /// The anchors' Elos (the engine's own calibrated `UCI_Elo`).
    #[row(doc = "anchor opponents' Elos")]
    pub anchors: Value,
    #[row(doc = "performance rating against the anchors")]
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
    #[row(doc = "phase_specialists or strength_gradient")]
    pub tool_set: String,
    #[row(doc = "the tool's gold name")]
    pub tool: String,
    #[row(doc = "games played")]
    pub games: i64,
    #[row(doc = "wins")]
    pub wins: i64,
    #[row(doc = "draws")]
    pub draws: i64,
    #[row(doc = "losses")]
    pub losses: i64,
    /// The anchors' Elos (the engine's own calibrated `UCI_Elo`).
    #[row(doc = "anchor opponents' Elos")]
    pub anchors: Value,
    #[row(doc = "performance rating against the anchors")]
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
