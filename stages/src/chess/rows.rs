//! The chess environment's stored rows.

use pipeline::{col, ColType::*, Column, Row};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One start position of a split.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PositionRow {
    pub split: String,
    pub position_id: String,
    pub fen: String,
    pub phase: String,
    pub evaluation: String,
    pub cp: Option<f64>,
    pub mate: Option<f64>,
}

impl Row for PositionRow {
    const TABLE: &'static str = "chess_positions";
    const DOC: &'static str = "one chess start position of the train or test split";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("split", Str, "train or test"),
            col("position_id", Str, "identifier"),
            col("fen", Str, "FEN"),
            col("phase", Str, "opening, middlegame, endgame, late_endgame"),
            col("evaluation", Str, "evaluation stratum"),
            col("cp", F64, "centipawns from White's view (null for a mate)"),
            col("mate", F64, "mate in moves, positive when White mates"),
        ];
        C
    }
}

/// One game (an exploration trajectory or a test game).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct GameRow {
    pub game_id: String,
    pub split: String,
    pub round: i64,
    pub model: String,
    pub position_id: String,
    pub agent_side: String,
    /// The opponent's nominal Elo.
    pub opponent_elo: i64,
    /// 1 / 0.5 / 0 for the agent; null when unfinished.
    pub score: Option<f64>,
    pub result: String,
    pub end_reason: String,
    /// Every ply (`datasets::chess::game::PlyRecord`).
    pub plies: Value,
    pub start_eval: Option<i64>,
    pub final_eval: Option<i64>,
    /// The game as the editor reads it (bounded).
    pub editor_text: String,
    /// Agent turns whose model call failed (answer-class: the game was lost).
    pub failed_calls: i64,
    pub error_kind: Option<String>,
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    pub reasoning_tokens: i64,
}

impl Row for GameRow {
    const TABLE: &'static str = "chess_games";
    const DOC: &'static str = "one chess game: exploration trajectory or test game";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("game_id", Str, "identifier"),
            col("split", Str, "train (exploration) or test"),
            col("round", I64, "documentation round the agent used"),
            col("model", Str, "agent model spec"),
            col("position_id", Str, "start position"),
            col("agent_side", Str, "white or black"),
            col("opponent_elo", I64, "opponent's nominal Elo"),
            col("score", F64, "1 / 0.5 / 0 for the agent"),
            col("result", Str, "1-0, 0-1, 1/2-1/2 or *"),
            col("end_reason", Str, "why the game ended"),
            col(
                "plies",
                Json,
                "every ply: side, SAN, FENs, tool, evaluation",
            ),
            col(
                "start_eval",
                I64,
                "engine evaluation of the start (White's view)",
            ),
            col(
                "final_eval",
                I64,
                "engine evaluation at the end (White's view)",
            ),
            col("editor_text", Str, "the game as the editor reads it"),
            col("failed_calls", I64, "agent turns whose model call failed"),
            col("error_kind", Str, "class of the first failed call, or null"),
            col("prompt_tokens", I64, "agent prompt tokens"),
            col("completion_tokens", I64, "agent completion tokens"),
            col("reasoning_tokens", I64, "agent reasoning tokens"),
        ];
        C
    }
}

/// One agent tool call, checked against the optimal tool.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CallCheckRow {
    pub game_id: String,
    pub ply: i64,
    pub phase: String,
    pub tool: String,
    pub optimal: String,
    pub is_optimal: bool,
}

impl Row for CallCheckRow {
    const TABLE: &'static str = "chess_calls";
    const DOC: &'static str =
        "one agent tool call in a test game, checked against the optimal tool";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("game_id", Str, "game"),
            col("ply", I64, "ply number"),
            col("phase", Str, "phase of the position the tool was called in"),
            col("tool", Str, "tool called"),
            col("optimal", Str, "the optimal tool there"),
            col("is_optimal", Bool, "the call picked the optimal tool"),
        ];
        C
    }
}

/// The best-tool % of one set of test games.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct BestToolRow {
    pub best_tool_pct: f64,
    pub tool_calls: i64,
    /// `{phase: percent}`.
    pub per_phase: Value,
}

impl Row for BestToolRow {
    const TABLE: &'static str = "chess_best_tool";
    const DOC: &'static str = "best-tool % of one set of test games, overall and per phase";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col(
                "best_tool_pct",
                F64,
                "share of tool calls that picked the optimal tool",
            ),
            col("tool_calls", I64, "agent tool calls"),
            col("per_phase", Json, "{phase: best-tool %}"),
        ];
        C
    }
}

/// The bootstrap Elo of one set of test games.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct EloRow {
    pub games: i64,
    pub start: f64,
    pub shuffles: i64,
    pub mean: f64,
    pub median: f64,
    pub ci90_lo: f64,
    pub ci90_hi: f64,
    pub ci95_lo: f64,
    pub ci95_hi: f64,
    pub ci99_lo: f64,
    pub ci99_hi: f64,
    pub performance: Option<f64>,
    pub best_tool_pct: f64,
    pub tool_calls: i64,
    /// `{phase: percent}`.
    pub per_phase: Value,
}

impl Row for EloRow {
    const TABLE: &'static str = "chess_elo";
    const DOC: &'static str = "bootstrap streaming Elo and best-tool % of one set of test games";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("games", I64, "games"),
            col("start", F64, "start rating"),
            col("shuffles", I64, "seeded shuffles (seeds 0..n)"),
            col("mean", F64, "mean final rating (the paper's headline)"),
            col("median", F64, "median final rating (the authors' code)"),
            col("ci90_lo", F64, "5th percentile"),
            col("ci90_hi", F64, "95th percentile"),
            col("ci95_lo", F64, "2.5th percentile"),
            col("ci95_hi", F64, "97.5th percentile"),
            col("ci99_lo", F64, "0.5th percentile"),
            col("ci99_hi", F64, "99.5th percentile"),
            col(
                "performance",
                F64,
                "rating at which expected = actual score",
            ),
            col(
                "best_tool_pct",
                F64,
                "share of tool calls that picked the optimal tool",
            ),
            col("tool_calls", I64, "agent tool calls"),
            col("per_phase", Json, "{phase: best-tool %}"),
        ];
        C
    }
}

/// One strength's measured Elo.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CalibrationRow {
    pub nominal_elo: i64,
    pub games: i64,
    pub wins: i64,
    pub draws: i64,
    pub losses: i64,
    /// The anchors' Elos (the engine's own calibrated `UCI_Elo`).
    pub anchors: Value,
    pub measured_elo: Option<f64>,
}

impl Row for CalibrationRow {
    const TABLE: &'static str = "chess_calibration";
    const DOC: &'static str = "one engine strength's measured Elo against fixed anchors";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("nominal_elo", I64, "the strength's nominal Elo"),
            col("games", I64, "games played"),
            col("wins", I64, "wins"),
            col("draws", I64, "draws"),
            col("losses", I64, "losses"),
            col("anchors", Json, "anchor opponents' Elos"),
            col(
                "measured_elo",
                F64,
                "performance rating against the anchors",
            ),
        ];
        C
    }
}

/// One tool's measured Elo as a whole-game player (`calibrate_tools = true`): a phase
/// specialist plays its strength in its phase and random moves elsewhere.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct ToolCalibrationRow {
    pub tool_set: String,
    pub tool: String,
    pub games: i64,
    pub wins: i64,
    pub draws: i64,
    pub losses: i64,
    /// The anchors' Elos (the engine's own calibrated `UCI_Elo`).
    pub anchors: Value,
    pub measured_elo: Option<f64>,
}

impl Row for ToolCalibrationRow {
    const TABLE: &'static str = "chess_tool_calibration";
    const DOC: &'static str = "one tool's measured Elo, playing every move of its side";
    fn columns() -> &'static [Column] {
        const C: &[Column] = &[
            col("tool_set", Str, "phase_specialists or strength_gradient"),
            col("tool", Str, "the tool's gold name"),
            col("games", I64, "games played"),
            col("wins", I64, "wins"),
            col("draws", I64, "draws"),
            col("losses", I64, "losses"),
            col("anchors", Json, "anchor opponents' Elos"),
            col(
                "measured_elo",
                F64,
                "performance rating against the anchors",
            ),
        ];
        C
    }
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
