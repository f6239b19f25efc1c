//! An external method's `play` in search (`docs/methods.md`): the agent answers a
//! *training* question with the tool set's domain tools and the proposed
//! documentation, one multi-turn episode as `search-explore` plays on the training
//! split, graded by normalised exact match against the question's answer. Test
//! questions are never reachable from here: the player holds the rows of
//! `search-train-questions` (the external stage's input, the training split alone)
//! and nothing else of the questions.

use super::config::SearchExperiment;
use super::corpus::Searcher;
use super::explore::{editor_text, graded_row, tool_reply};
use super::rows::QuestionRow;
use super::tools::{domains, tool_set};
use super::{Search, EXPLORE_STAGE};
use crate::baselines::external::{PlayJob, Played, TrainingPlay};
use crate::env::Split;
use crate::models::{run_episode, EpisodeRules};
use crate::rows::CallRecord;
use datasets::search::trajectory::EditorView;
use datasets::search::{Opacity, SearchEnv};
use pipeline::StageError;
use serde_json::{json, Value};

/// The training play of one search tool set: the training questions (the rows of
/// `search-train-questions`; no test question), the experiment's settings and the
/// tools (opaque names, which proposed docs keep).
pub(super) struct SearchPlayer<'e> {
    train: Vec<QuestionRow>,
    s: &'e SearchExperiment,
    env: SearchEnv<'e, Searcher>,
}

impl<'e> SearchPlayer<'e> {
    /// The player of `search`, with its tool set's searcher; its questions read from
    /// `search-train-questions`.
    pub(super) fn new(search: &'e Search<'_>) -> Result<Self, StageError> {
        let train: Vec<QuestionRow> = match &search.train {
            Some(h) => h.read()?,
            None => {
                return Err(StageError::bug(
                    super::TRAIN_QUESTIONS_STAGE,
                    "the training questions were read without an external method",
                ))
            }
        };
        let (sub, index) = search.corpus.searcher(
            EXPLORE_STAGE,
            &search.s.retriever,
            &search.s.embedder,
            &|_, _| {},
        )?;
        Ok(SearchPlayer {
            train,
            s: search.s,
            env: SearchEnv::new(
                &sub.corpus,
                index,
                tool_set(
                    &domains(&search.s.source),
                    &search.set,
                    Opacity::Opaque,
                    search.s.shape,
                    search.s.hints,
                ),
            ),
        })
    }

    /// What it plays on, for the external stage's key (its questions are the stage's
    /// input `train_questions`, beside it).
    pub(super) fn key(search: &Search<'_>) -> Value {
        json!({
            "search": "a training question's episode, graded by exact match",
            "final_answer": crate::models::llm::FINAL_ANSWER,
            "max_turns": search.s.max_turns,
            "first_call_required": search.s.first_call_required,
            "parallel_tool_calls": search.s.parallel_tool_calls,
            "show_queries": search.s.show_queries,
        })
    }
}

impl TrainingPlay for SearchPlayer<'_> {
    fn items(&self) -> Result<Vec<String>, String> {
        Ok(self.train.iter().map(|q| q.question_id.clone()).collect())
    }

    fn play(&self, job: &PlayJob<'_>) -> Result<Vec<Played>, String> {
        let item = job.item;
        let q = self
            .train
            .iter()
            .find(|q| q.question_id == item)
            .ok_or_else(|| format!("{item} is not a training question"))?;
        let mut calls = 0usize;
        let mut run_tool = |c: &CallRecord| -> String {
            calls += 1;
            tool_reply(&self.env, c)
        };
        let ep = run_episode(
            job.agent,
            job.system,
            &q.question,
            job.tools,
            EpisodeRules {
                max_turns: self.s.max_turns,
                first_call_required: self.s.first_call_required,
                one_call_per_turn: !self.s.parallel_tool_calls,
            },
            job.seed,
            &mut run_tool,
        );
        // The trajectory as the editor reads it (tokens do not show there).
        let (row, g) = graded_row(q, Split::Train, 0, "", &ep, calls);
        let view = EditorView {
            show_queries: self.s.show_queries,
            ..EditorView::default()
        };
        let outcome = match &ep.error {
            Some(e) => format!("the agent's request failed ({})", e.kind),
            None if g.exact => "correct (exact match with the answer)".to_string(),
            None => "wrong (no exact match with the answer)".to_string(),
        };
        Ok(vec![Played {
            item: item.to_string(),
            task: "answer this training question with the tools".into(),
            score: Some(if g.exact { 1.0 } else { 0.0 }),
            outcome,
            trajectory: editor_text(&row, q, Some(g.exact), &view),
        }])
    }
}
