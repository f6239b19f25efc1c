//! Chess behind the environment seam: [`Chess`] as an [`OfflineEnv`] (exploration,
//! the editor's view, evaluation with its Elo) and the baselines' tool play
//! (`ChessRunner`).

use super::elo::{bootstrap_elo, EloParams, ELO_STAGE};
use super::evaluate::{check_calls, EvaluateParams, EVALUATE_STAGE};
use super::explore::{docs_kind, EXPLORE_STAGE};
use super::rows::{BestToolRow, GameRow, PositionRow};
use super::{Chess, VERSION};
use crate::env::{Cx, DriveError, OfflineEnv, Play, Split, ToolOutput, ToolRunner};
use crate::rows::DocRow;
use datasets::chess::engine::BlockingPool;
use datasets::chess::game::{self, Game};
use datasets::chess::metrics;
use datasets::chess::rules::Side;
use datasets::chess::tools::Docs;
use pipeline::{Handle, StageError};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Mutex;

/// Tool play for the baselines: a tool's n-th call runs it on a training position
/// drawn from the chess seed, the tool and n, plays its move and reports the move
/// with the engine's evaluation before and after (from White's view). The draw
/// depends on the tool's own count, not on the order calls to different tools
/// arrive in (Play2Prompt plays every tool at once).
struct ChessRunner<'e, 'a> {
    tools: &'e datasets::chess::tools::ToolSet,
    c: &'e super::ChessExperiment,
    train: TrainingPositions<'e, 'a>,
    pool: &'e BlockingPool,
    calls: PlayCounts,
}

/// Where a [`ChessRunner`] finds its training positions.
enum TrainingPositions<'e, 'a> {
    /// The training split of `chess-positions`, read on first use (the built-in
    /// baselines, whose stages read the full set).
    Env(&'e Chess<'a>),
    /// The rows of `chess-train-positions` (an external method's stage: it holds
    /// no test position).
    Rows(Vec<PositionRow>),
}

/// How many times each tool (by index) has been played.
#[derive(Default)]
struct PlayCounts(Mutex<HashMap<usize, u64>>);

impl PlayCounts {
    /// The draw of `tool`'s next play: its own count, whatever other tools did.
    fn next_draw(&self, seed: u64, tool: usize) -> datasets::rng::SplitMix64 {
        let n = {
            let mut calls = self.0.lock().unwrap_or_else(|e| e.into_inner());
            let n = calls.entry(tool).or_insert(0);
            *n += 1;
            *n - 1
        };
        datasets::rng::SplitMix64::derived(seed, ((tool as u64) << 32) | n)
    }
}

impl ChessRunner<'_, '_> {
    fn play(&self, name: &str) -> Result<String, String> {
        let tools = self.tools;
        let i = tools
            .index_of(name, Docs::Opaque)
            .or_else(|| tools.index_of(name, Docs::Gold))
            .ok_or_else(|| format!("there is no tool named {name}"))?;
        let mut draw = self.calls.next_draw(self.c.seed, i);
        let train = match &self.train {
            TrainingPositions::Env(env) => {
                env.positions(Split::Train).map_err(|e| e.to_string())?
            }
            TrainingPositions::Rows(rows) => rows.as_slice(),
        };
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
    fn explore<'p>(&'p self, cx: &mut Cx<'p, '_>, play: &Play<'_>) -> Result<Handle, DriveError> {
        self.explore_node(cx, play)
    }

    fn serialize(&self, trajectories: &Handle) -> Result<Vec<String>, DriveError> {
        let games: Vec<GameRow> = trajectories.read()?;
        Ok(games.into_iter().map(|g| g.editor_text).collect())
    }

    fn agent_system(&self) -> &str {
        self.c.agent_system()
    }

    fn tool_runner(&self) -> Result<Box<dyn ToolRunner + '_>, StageError> {
        Ok(Box::new(ChessRunner {
            tools: &self.tools,
            c: self.c,
            train: TrainingPositions::Env(self),
            pool: self.engines.get(EXPLORE_STAGE)?,
            calls: PlayCounts::default(),
        }))
    }

    /// The same tool play on the rows of `chess-train-positions` (the external
    /// stage's input), in the same order as the training split: the same draws.
    fn training_runner(&self) -> Result<Box<dyn ToolRunner + '_>, StageError> {
        Ok(Box::new(ChessRunner {
            tools: &self.tools,
            c: self.c,
            train: TrainingPositions::Rows(self.training_positions()?),
            pool: self.engines.get(EXPLORE_STAGE)?,
            calls: PlayCounts::default(),
        }))
    }

    fn runner_key(&self) -> (Value, Vec<(&'static str, Handle)>) {
        (
            json!({
                // The text no longer names the game phase (it did before); with
                // `hints` it does.
                "chess": if self.c.hints {
                    "a tool on a training position drawn per tool and call (its phase named), then the evaluation"
                } else {
                    "a tool on a training position drawn per tool and call, then the evaluation (no phase named)"
                },
                "search": self.c.search,
                "eval_depth": game::EXPLORATION_EVAL_DEPTH,
                "seed": self.c.seed,
            }),
            vec![("positions", self.positions.handle.clone())],
        )
    }

    fn editor_notes(&self) -> &str {
        &self.notes
    }

    fn player(
        &self,
    ) -> Result<Option<Box<dyn crate::baselines::external::TrainingPlay + '_>>, StageError> {
        Ok(Some(Box::new(super::play::ChessPlayer::new(self)?)))
    }

    fn play_key(&self) -> (Value, Vec<(&'static str, Handle)>) {
        // The training positions alone, in place of the tool runner's
        // `chess-positions` (which holds the test positions too).
        (
            super::play::ChessPlayer::key(self),
            self.train
                .iter()
                .map(|h| ("train_positions", h.clone()))
                .collect(),
        )
    }

    fn evaluate<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        play: &Play<'_>,
        trajectories: &Handle,
    ) -> Result<Handle, DriveError> {
        let Play { at, docs, .. } = *play;
        let c = self.c;
        let params = EvaluateParams {
            indexing: c.indexing,
        };
        let inputs = [("games", trajectories), ("docs", docs)];
        let tools = &self.tools;
        let checked = cx.stage(
            at,
            EVALUATE_STAGE,
            VERSION,
            params,
            &inputs,
            move |ctx, params| {
                // The games are read only by a stage that must be computed.
                let games: Vec<GameRow> = ctx.read("games")?;
                let docs_rows: Vec<DocRow> = ctx.read("docs")?;
                let tools_json = docs_rows
                    .first()
                    .and_then(|d| d.tools.as_array().cloned())
                    .unwrap_or_default();
                let kind = docs_kind(tools, &tools_json);
                check_calls(ctx, tools, kind, params, &games)
            },
        )?;
        let params = EloParams {
            elo_start: c.elo_start,
            opponent_ratings: &c.opponent_ratings,
            k: metrics::ELO_K,
            shuffles: metrics::BOOTSTRAP_SHUFFLES,
            elo_games: c.elo_games,
        };
        let mut inputs = vec![("games", trajectories), ("checked", &checked)];
        if let Some(cal) = &self.calibration {
            inputs.push(("calibration", cal));
        }
        cx.stage(
            at,
            ELO_STAGE,
            VERSION,
            params,
            &inputs,
            move |ctx, params| {
                let games: Vec<GameRow> = ctx.read("games")?;
                let best: Vec<BestToolRow> = ctx.read("checked")?;
                bootstrap_elo(ctx, params, self.ratings()?, &games, best.first())
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::super::explore::tests::params;
    use super::super::tests::experiment;
    use super::*;
    use crate::env::Split;
    use crate::models::ModelSpec;
    use crate::offline;
    use datasets::chess::game::EpisodeConfig;
    use datasets::chess::rules::DrawRules;
    use datasets::chess::tools::ToolFamily;

    use crate::env::hidden_structure_words as forbidden_words;

    #[test]
    fn the_word_test_is_whole_words() {
        assert_eq!(
            forbidden_words("A partial game; the Opening, late_endgame and phases."),
            ["late endgame", "phases"]
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
        let record = game::settle(
            g.record(),
            &EpisodeConfig::exploration(Side::White, Default::default()),
        );
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
                let tools =
                    datasets::chess::tools::ToolSet::new(family).function_defs(Docs::Opaque);
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

    /// A tool's draws are the same whether other tools were played between its
    /// calls or not (Play2Prompt plays the tools at once), and differ between tools.
    #[test]
    fn a_tools_draws_do_not_depend_on_other_tools_plays() {
        let alone = PlayCounts::default();
        let a: Vec<u64> = (0..3).map(|_| alone.next_draw(7, 1).next_u64()).collect();
        let mixed = PlayCounts::default();
        let mut b = Vec::new();
        for _ in 0..3 {
            mixed.next_draw(7, 0);
            b.push(mixed.next_draw(7, 1).next_u64());
            mixed.next_draw(7, 2);
        }
        assert_eq!(a, b);
        let other = PlayCounts::default().next_draw(7, 0).next_u64();
        assert_ne!(other, a[0]);
        assert_ne!(a[0], a[1]);
    }
}
