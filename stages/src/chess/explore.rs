//! Stage `chess-explore`: the games of one split (exploration from both sides, or
//! test games against each opponent), the agent asked once per agent ply; finished
//! games are journaled so a killed run resumes.

use super::rows::{GameRow, PositionRow};
use super::{fail, Chess, EXPLORE_VERSION};
use crate::baselines::shared_docs;
use crate::env::{Cx, DriveError, Play, Split};
use crate::models::ModelSpec;
use crate::models::{infrastructure_error, AgentJob, CallFailure, CallUsage, MultiTurn};
use crate::rows::DocRow;
use datasets::chess::game::{self, AgentChoice, EpisodeConfig, Game, Opponent};
use datasets::chess::rules::Side;
use datasets::chess::tools::{Docs, ToolSet};
use pipeline::{Handle, StageCtx, StageError, Usage};
use serde::Serialize;
use serde_json::Value;
use std::sync::Mutex;

/// The stage name.
pub const EXPLORE_STAGE: &str = "chess-explore";

/// The paper explores chess at minimal reasoning effort (`chess.md`).
pub const EXPLORE_REASONING_EFFORT: &str = "minimal";

/// `chess-explore`'s params: the stage key and what the run reads.
#[derive(Serialize)]
pub(super) struct ExploreParams<'a> {
    agent: ModelSpec,
    /// The system prompt before any demonstrations (those come with the docs input).
    pub(super) system: &'static str,
    turn: &'static str,
    /// The chain's seed (the agent's requests).
    chain_seed: u64,
    /// The chess seed (each game's tool and opponent draws).
    seed: u64,
    split: Split,
    /// How engine moves are searched (`{"nodes": n}` or `{"movetime": ms}`).
    search: datasets::chess::strength::SearchMode,
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

/// Which docs a tool list shows (gold names or `function_i`).
pub(super) fn docs_kind(tools: &ToolSet, list: &[Value]) -> Docs {
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

/// The agent's sampling on `split`: the chain's, with the paper's minimal reasoning
/// effort for exploration when the experiment names none.
fn chess_sampling(
    sampling: &crate::models::TurnSampling,
    split: Split,
) -> crate::models::TurnSampling {
    let mut s = sampling.clone();
    if split == Split::Train && s.reasoning_effort.is_none() {
        s.reasoning_effort = Some(EXPLORE_REASONING_EFFORT.into());
    }
    s
}

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
                    for cfg in EpisodeConfig::exploration(Side::White, p.search).mirror() {
                        push(pos, cfg, game::EXPLORATION_OPPONENT_ELO, "explore".into());
                    }
                }
                Split::Test => {
                    for &opp in p.opponents {
                        let mut base = EpisodeConfig::test(Side::White, opp.strength(p.search));
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

impl Chess<'_> {
    fn jobs(&self, p: &ExploreParams<'_>) -> Result<Vec<Job>, StageError> {
        Ok(schedule(self.positions(p.split)?, p))
    }

    /// Play the games `p` schedules with `agent` on `docs`, `concurrency` games at a
    /// time.
    fn play(
        &self,
        ctx: &mut StageCtx<'_>,
        agent: &dyn MultiTurn,
        p: &ExploreParams<'_>,
        (system, docs): (&str, &[Value]),
    ) -> Result<(), StageError> {
        let (model, round, split, seed) = (&p.agent.to_string(), p.round, p.split, p.chain_seed);
        let jobs = self.jobs(p)?;
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
                    let question = turn_question(turn_template, g);
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
            rows.push(r.ok_or_else(|| StageError::bug(EXPLORE_STAGE, "a game thread panicked"))??);
        }
        ctx.add_usage(&accounting.into_inner().unwrap_or_default());
        ctx.write(&rows)?;
        Ok(())
    }

    pub(super) fn explore_node<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        play: &Play<'_>,
    ) -> Result<Handle, DriveError> {
        let Play { at, sampling, docs } = *play;
        let (split, agent) = (at.split_for(EXPLORE_STAGE)?, at.agent_for(EXPLORE_STAGE)?);
        let c = self.c;
        let params = ExploreParams {
            agent: agent.clone(),
            system: c.agent_system(),
            turn: c.agent_turn(),
            chain_seed: at.seed,
            seed: c.seed,
            split,
            search: c.search,
            opponents: &c.opponents,
            max_plies: c.max_plies,
            round: at.round,
            sides: (split == Split::Test && !c.mirror).then_some("agent_white"),
            cut: (split == Split::Train).then_some("partial"),
            sampling: chess_sampling(sampling, split),
        };
        let models = cx.models;
        cx.stage(
            at,
            EXPLORE_STAGE,
            EXPLORE_VERSION,
            params,
            &[("positions", &self.positions.handle), ("docs", docs)],
            move |ctx, p| {
                // Read only when the games must be played. A baseline's
                // demonstrations (Play2Prompt) go into the system prompt.
                let docs_rows: Vec<DocRow> = ctx.read("docs")?;
                let (tools, system) = shared_docs(&docs_rows, c.agent_system());
                let agent = models.agent_sampled(&p.agent, &p.sampling)?;
                self.play(ctx, agent.as_ref(), p, (&system, &tools))
            },
        )
    }
}

/// The agent's question at game `g` from the turn template (`{{fen}}`, `{{side}}`,
/// `{{history}}`: the moves so far, or `(none)`).
pub(super) fn turn_question(template: &str, g: &Game) -> String {
    template
        .replace("{{fen}}", &g.fen())
        .replace("{{side}}", Side::as_str(g.turn()))
        .replace(
            "{{history}}",
            &Some(g.history_text())
                .filter(|h| !h.is_empty())
                .unwrap_or_else(|| "(none)".into()),
        )
}

#[cfg(test)]
pub(super) mod tests {
    use super::super::tests::experiment;
    use super::*;
    use crate::chess::ChessExperiment;
    use serde_json::json;
    use std::path::PathBuf;

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

    pub(in crate::chess) fn params<'a>(
        agent: &'a ModelSpec,
        c: &'a ChessExperiment,
        split: Split,
    ) -> ExploreParams<'a> {
        ExploreParams {
            agent: agent.clone(),
            system: c.agent_system(),
            turn: c.agent_turn(),
            chain_seed: 0,
            seed: c.seed,
            split,
            search: c.search,
            opponents: &c.opponents,
            max_plies: c.max_plies,
            round: 0,
            sides: (split == Split::Test && !c.mirror).then_some("agent_white"),
            cut: (split == Split::Train).then_some("partial"),
            sampling: Default::default(),
        }
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
                .map(|j| (j.id.as_str(), j.opponent_elo, j.cfg.opponent.skill))
                .collect::<Vec<_>>(),
            [
                ("p0-vsL1-white", 800, Some(1.0)),
                ("p0-vsL5-white", 1600, Some(5.0)),
                ("p0-vsL10-white", 2400, Some(10.0)),
            ]
        );
        // The reproducible search sets no engine option; the time search does.
        assert!(jobs.iter().all(|j| j.cfg.opponent.engine.uci_elo.is_none()
            && j.cfg.opponent.engine.skill_level.is_none()));
        let timed = experiment("opponents = \"levels\"\nsearch = \"movetime\"");
        let jobs = schedule(&rows[..1], &params(&agent, &timed, Split::Test));
        assert_eq!(
            jobs.iter()
                .map(|j| j.cfg.opponent.engine.skill_level)
                .collect::<Vec<_>>(),
            [Some(1), Some(5), Some(10)]
        );
        // The search is in the key: the node budget, or the time.
        assert_eq!(key(&c, Split::Test)["search"], json!({"nodes": 500_000}));
        assert_eq!(key(&timed, Split::Test)["search"], json!({"movetime": 500}));
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
        assert!(bad("engine_timeout_ms = 0").contains("engine_timeout_ms"));
        assert_eq!(c.engine_timeout_ms, 10_000);
        assert_eq!(experiment("engine_timeout_ms = 500").engine_timeout_ms, 500);
        assert!(c
            .switches()
            .contains(&"chess.mirror = off (agent as White)".to_string()));
        assert!(c.switches().contains(&"chess.elo_games = all".to_string()));
        assert!(levels
            .switches()
            .iter()
            .any(|s| s.starts_with("chess.opponents = levels")));
        // `search`: nodes by default; the paper's time limit is a switch marked as not
        // reproducible; `movetime_ms` alone means it (as it did before `search`).
        use datasets::chess::strength::SearchMode;
        assert_eq!(c.search, SearchMode::Nodes(500_000));
        assert_eq!(experiment("nodes = 2000").search, SearchMode::Nodes(2000));
        assert_eq!(timed.search, SearchMode::Movetime(500));
        assert_eq!(
            experiment("movetime_ms = 100").search,
            SearchMode::Movetime(100)
        );
        let line = |c: &ChessExperiment| {
            c.switches()
                .into_iter()
                .find(|s| s.starts_with("chess.search = "))
                .unwrap()
        };
        assert!(line(&c).contains("reproducible") && !line(&c).contains("NOT"));
        assert!(line(&timed).contains("500 ms") && line(&timed).contains("NOT reproducible"));
        assert!(bad("search = \"movetime\"\nnodes = 5").contains("chess.nodes"));
        assert!(bad("nodes = 5\nmovetime_ms = 5").contains("chess.movetime_ms"));
        assert!(bad("search = \"depth\"").contains("valid: nodes"));
        assert!(bad("nodes = 0").contains("at least 1"));
    }
}
