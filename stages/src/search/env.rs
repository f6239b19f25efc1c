//! Search behind the environment seam: `Search` as an [`OfflineEnv`] (exploration,
//! the judge on training episodes, the editor's view, evaluation).

use super::evaluate::score;
use super::rows::{EpisodeRow, JudgeRow};
use super::tools::{domains, empty_result, tool_set, SearchRunner};
use super::{Search, EVALUATE_STAGE, EXPLORE_STAGE, JUDGE_STAGE, VERSION};
use crate::env::{Cx, DriveError, OfflineEnv, Play, Split, ToolRunner};
use datasets::search::{Opacity, SearchEnv};
use pipeline::{Entry, Row, StageError};
use serde_json::{json, Value};

impl OfflineEnv for Search<'_> {
    fn train_stages(&self) -> Vec<&'static str> {
        let judge = self.s.judge.is_some().then_some(JUDGE_STAGE);
        std::iter::once(EXPLORE_STAGE).chain(judge).collect()
    }

    fn round_stages(&self) -> (&'static str, Vec<&'static str>) {
        let judge = self.s.judge.is_some().then_some(JUDGE_STAGE);
        (
            EXPLORE_STAGE,
            judge.into_iter().chain([EVALUATE_STAGE]).collect(),
        )
    }

    fn explore(&self, cx: &mut Cx<'_, '_>, play: &Play<'_>) -> Result<Option<Entry>, DriveError> {
        self.explore_node(cx, play)
    }

    fn serialize(&self, trajectories: &Entry) -> Result<Vec<String>, DriveError> {
        if trajectories.manifest.outputs.contains_key(JudgeRow::TABLE) {
            let rows: Vec<JudgeRow> = trajectories.read()?;
            return Ok(rows
                .into_iter()
                .map(|r| r.editor_text.unwrap_or_default())
                .collect());
        }
        let eps: Vec<EpisodeRow> = trajectories.read()?;
        Ok(eps.into_iter().map(|e| e.editor_text).collect())
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

    fn runner_key(&self) -> (Value, Vec<(&'static str, Entry)>) {
        (
            json!({
                "search": self.s.retriever,
                "embedder": (self.s.retriever == "dense").then_some(&self.s.embedder),
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

    fn evaluate(
        &self,
        cx: &mut Cx<'_, '_>,
        play: &Play<'_>,
        trajectories: &Entry,
    ) -> Result<Option<Entry>, DriveError> {
        let at = play.at;
        let source = self
            .test
            .first()
            .map(|q| q.source.clone())
            .unwrap_or_default();
        let mut verdicts = None;
        if self.s.judge.is_some() {
            let Some(judged) = self.judge(cx, at, Split::Test, trajectories)? else {
                return Ok(None);
            };
            verdicts = Some(judged);
        }
        let mut inputs = vec![("episodes", Some(trajectories))];
        if let Some(j) = &verdicts {
            inputs.push(("judgements", Some(j)));
        }
        let judge = self.s.judge.as_ref().map(ToString::to_string);
        cx.stage(
            at,
            EVALUATE_STAGE,
            VERSION,
            &json!({"bootstrap": [1000, 0], "judge": judge}),
            &inputs,
            |ctx| {
                let eps: Vec<EpisodeRow> = trajectories.read()?;
                let by_q = match &verdicts {
                    Some(j) => Some(
                        j.read::<JudgeRow>()?
                            .into_iter()
                            .map(|r| (r.question_id, r.verdict))
                            .collect::<std::collections::HashMap<_, _>>(),
                    ),
                    None => None,
                };
                let v = judge.as_deref().zip(by_q.as_ref());
                ctx.write(&[score(&eps, &source, v)])?;
                Ok(())
            },
        )
    }
}
