//! Search behind the environment seam: `Search` as an [`OfflineEnv`] (exploration,
//! the judge on training episodes as the grading node batch-reflect reads, the
//! editor's view, evaluation).

use super::evaluate::score;
use super::rows::{EpisodeRow, JudgeRow};
use super::tools::{domains, empty_result, tool_set, SearchRunner};
use super::{Search, EVALUATE_STAGE, EXPLORE_STAGE, JUDGE_STAGE, VERSION};
use crate::env::{Cx, DriveError, OfflineEnv, Play, Split, ToolRunner};
use datasets::search::{Opacity, SearchEnv};
use pipeline::{Handle, StageError};
use serde_json::{json, Value};

impl OfflineEnv for Search<'_> {
    fn explore<'p>(&'p self, cx: &mut Cx<'p, '_>, play: &Play<'_>) -> Result<Handle, DriveError> {
        self.explore_node(cx, play)
    }

    fn serialize(&self, trajectories: &Handle) -> Result<Vec<String>, DriveError> {
        let eps: Vec<EpisodeRow> = trajectories.read()?;
        Ok(eps.into_iter().map(|e| e.editor_text).collect())
    }

    /// With a judge, the editor is told the judge's verdicts: the training episodes
    /// are judged in a node of their own (`search-judge[... train r<k>]`), whose rows
    /// carry each episode as the editor reads it with the verdict as its outcome.
    fn grade<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        play: &Play<'_>,
        trajectories: &Handle,
    ) -> Result<Option<Handle>, DriveError> {
        match (&self.s.judge, play.at.split_for(JUDGE_STAGE)?) {
            (Some(judge), Split::Train) => Ok(Some(self.judge(
                cx,
                play.at,
                judge,
                Split::Train,
                trajectories,
            )?)),
            _ => Ok(None),
        }
    }

    fn serialize_graded(&self, graded: &Handle) -> Result<Vec<String>, DriveError> {
        let rows: Vec<JudgeRow> = graded.read()?;
        Ok(rows
            .into_iter()
            .map(|r| r.editor_text.unwrap_or_default())
            .collect())
    }

    fn agent_system(&self) -> &str {
        &self.system
    }

    fn tool_runner(&self) -> Result<Box<dyn ToolRunner + '_>, StageError> {
        let (sub, index) = self.corpus.searcher(
            EXPLORE_STAGE,
            &self.s.retriever,
            &self.s.embedder,
            &|_, _| {},
        )?;
        Ok(Box::new(SearchRunner(SearchEnv::new(
            &sub.corpus,
            index,
            tool_set(
                &domains(&self.s.source),
                &self.set,
                Opacity::Opaque,
                self.s.shape,
                self.s.hints,
            ),
        ))))
    }

    fn runner_key(&self) -> (Value, Vec<(&'static str, Handle)>) {
        (
            json!({
                "search": self.s.retriever,
                "embedder": (self.s.retriever == "dense").then_some(self.embedder_key),
                "corpus": self.corpus_id,
                "tool_set": self.set,
                "shape": self.s.shape,
                "empty": empty_result(self.s.hints),
            }),
            Vec::new(),
        )
    }

    fn editor_notes(&self) -> &str {
        &self.notes
    }

    fn player(
        &self,
    ) -> Result<Option<Box<dyn crate::baselines::external::TrainingPlay + '_>>, StageError> {
        Ok(Some(Box::new(super::play::SearchPlayer::new(self)?)))
    }

    fn play_key(&self) -> (Value, Vec<(&'static str, Handle)>) {
        // The training questions alone (`search-train-questions`), never
        // `search-questions` (which holds the test questions too).
        (
            super::play::SearchPlayer::key(self),
            self.train
                .iter()
                .map(|h| ("train_questions", h.clone()))
                .collect(),
        )
    }

    fn evaluate<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        play: &Play<'_>,
        trajectories: &Handle,
    ) -> Result<Handle, DriveError> {
        let at = play.at;
        let verdicts = match &self.s.judge {
            Some(judge) => Some(self.judge(cx, at, judge, Split::Test, trajectories)?),
            None => None,
        };
        let mut inputs = vec![("episodes", trajectories)];
        if let Some(j) = &verdicts {
            inputs.push(("judgements", j));
        }
        let judged = verdicts.is_some();
        let judge = self.s.judge.as_ref().map(ToString::to_string);
        cx.stage(
            at,
            EVALUATE_STAGE,
            VERSION,
            json!({"bootstrap": [1000, 0], "judge": judge}),
            &inputs,
            move |ctx, _| {
                let eps: Vec<EpisodeRow> = ctx.read("episodes")?;
                let source = self
                    .questions
                    .get(Split::Test)?
                    .first()
                    .map(|q| q.source.clone())
                    .unwrap_or_default();
                let by_q = if judged {
                    Some(
                        ctx.read::<JudgeRow>("judgements")?
                            .into_iter()
                            .map(|r| (r.question_id, r.verdict))
                            .collect::<std::collections::HashMap<_, _>>(),
                    )
                } else {
                    None
                };
                let v = judge.as_deref().zip(by_q.as_ref());
                ctx.write(&[score(&eps, &source, v)])?;
                Ok(())
            },
        )
    }
}
