//! An external method's `play` in chess (`docs/methods.md`): the agent plays a
//! *training* position's exploration games (both sides, cut after
//! [`game::EXPLORATION_PLIES`] plies against the exploration opponent, as
//! `chess-explore` on the training split does) with the proposed documentation.
//! Test positions are never reachable from here: the player holds the rows of
//! `chess-train-positions` (the external stage's input, the training split alone)
//! and nothing else of the positions (not the environment, whose positions hold both
//! splits).

use super::config::ChessExperiment;
use super::explore::{docs_kind, turn_question, EXPLORE_STAGE};
use super::rows::PositionRow;
use super::Chess;
use crate::baselines::external::{PlayJob, Played, TrainingPlay};
use crate::models::AgentJob;
use datasets::chess::engine::BlockingPool;
use datasets::chess::game::{self, AgentChoice, EpisodeConfig, Game};
use datasets::chess::rules::Side;
use datasets::chess::tools::ToolSet;
use pipeline::StageError;
use serde_json::{json, Value};

/// The training play of one chess experiment: the training positions (the rows of
/// `chess-train-positions`; no test position), the tools, the experiment's settings
/// and the engines.
pub(super) struct ChessPlayer<'e> {
    train: Vec<PositionRow>,
    tools: &'e ToolSet,
    c: &'e ChessExperiment,
    pool: &'e BlockingPool,
}

impl<'e> ChessPlayer<'e> {
    /// The player of `env`, with the exploration engines; its positions read from
    /// `chess-train-positions`.
    pub(super) fn new(env: &'e Chess<'_>) -> Result<Self, StageError> {
        Ok(ChessPlayer {
            train: env.training_positions()?,
            tools: &env.tools,
            c: env.c,
            pool: env.engines.get(EXPLORE_STAGE)?,
        })
    }

    /// What it plays on, for the external stage's key (its positions are the
    /// stage's input `train_positions`, beside it).
    pub(super) fn key(env: &Chess<'_>) -> Value {
        json!({
            "chess": "a training position's exploration games, both sides, cut after the exploration plies",
            "plies": game::EXPLORATION_PLIES,
            "opponent_elo": game::EXPLORATION_OPPONENT_ELO,
            "eval_depth": game::EXPLORATION_EVAL_DEPTH,
            "editor_plies": game::EDITOR_PLIES,
            "search": env.c.search,
            "turn": env.c.agent_turn(),
            "seed": env.c.seed,
        })
    }
}

impl TrainingPlay for ChessPlayer<'_> {
    fn items(&self) -> Result<Vec<String>, String> {
        Ok(self.train.iter().map(|r| r.position_id.clone()).collect())
    }

    fn play(&self, job: &PlayJob<'_>) -> Result<Vec<Played>, String> {
        let PlayJob {
            item,
            agent,
            system,
            tools,
            seed,
        } = *job;
        let (index, row) = self
            .train
            .iter()
            .enumerate()
            .find(|(_, r)| r.position_id == item)
            .ok_or_else(|| format!("{item} is not a training position"))?;
        let kind = docs_kind(self.tools, tools);
        let turn_template = self.c.agent_turn();
        let mut out = Vec::new();
        let configs = EpisodeConfig::exploration(Side::White, self.c.search).mirror();
        for (k, cfg) in configs.iter().enumerate() {
            let draw = ((index as u64) << 1) | k as u64;
            let game_seed = datasets::rng::SplitMix64::derived(self.c.seed, draw).next_u64();
            let mut choose = |g: &Game| -> AgentChoice {
                let question = turn_question(turn_template, g);
                let job = AgentJob {
                    system,
                    question: &question,
                    tools,
                    seed: seed ^ (g.plies().len() as u64),
                };
                let t = agent.act(&job);
                match (t.error, t.calls.first()) {
                    (Some(e), _) => AgentChoice::Failed { error: e.message },
                    (None, None) => AgentChoice::NoCall,
                    (None, Some(c)) => AgentChoice::Tool {
                        name: c.function.clone(),
                    },
                }
            };
            let rec = game::run_episode(
                self.pool,
                self.tools,
                kind,
                &row.fen,
                cfg,
                game_seed,
                &mut choose,
            )
            .map_err(|e| e.to_string())?;
            let side = Side::as_str(cfg.agent_side);
            let (score, outcome) = match &rec.ending {
                Some(e) => (
                    Some(e.score_for(cfg.agent_side)),
                    format!("{} ({})", e.result_str(), e.reason.as_str()),
                ),
                None => (
                    None,
                    format!(
                        "cut after {} plies; final evaluation {} (centipawns, White's view)",
                        rec.plies.len(),
                        rec.final_eval()
                            .map_or_else(|| "n/a".to_string(), |c| c.to_string())
                    ),
                ),
            };
            out.push(Played {
                item: item.to_string(),
                task: format!("play {side} from this position"),
                score,
                outcome,
                trajectory: game::editor_text(&rec, cfg.agent_side, game::EDITOR_PLIES),
            });
        }
        Ok(out)
    }
}
