//! Stage `search-judge`: an LLM judge's verdict on every episode's final answer;
//! for training episodes each row also carries the episode as the editor reads it
//! with that verdict.

use super::explore::editor_text;
use super::rows::{EpisodeRow, JudgeRow, QuestionRow};
use super::Search;
use crate::env::{At, Cx, DriveError, Split};
use crate::models::ModelSpec;
use crate::models::{infrastructure_error, CallFailure};
use datasets::search::trajectory::EditorView;
use pipeline::{Handle, StageCtx, StageError, Usage};
use serde::Serialize;

/// The stage name.
pub const JUDGE_STAGE: &str = "search-judge";
/// The judge's stage: 2 since its rows say their split and, for training episodes,
/// carry the episode as the editor reads it with the judge's verdict; 3 since that
/// view bounds what a model wrote (as `search-explore` 4); 4 since a reply without a
/// verdict reads "not judged" to the editor (it read "incorrect").
pub const JUDGE_VERSION: u32 = 4;

/// `search-judge`'s params: the stage key and what the run reads.
#[derive(Serialize)]
struct JudgeParams {
    judge: ModelSpec,
    template: &'static str,
    /// Training episodes: the editor's view their text is written with. Absent for
    /// test episodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    editor: Option<ViewKey>,
}

/// What of [`EditorView`] is configurable (the rest is fixed by the code).
#[derive(Serialize, Clone, Copy)]
struct ViewKey {
    show_queries: bool,
}

impl ViewKey {
    fn view(self) -> EditorView {
        EditorView {
            show_queries: self.show_queries,
            ..EditorView::default()
        }
    }
}

/// Stage `search-judge`: the judge model asked about every episode's final answer
/// (concurrently), one verdict row each. A failed call for an infrastructure reason
/// fails the stage; any other failure is a row without a verdict.
fn judge_episodes(
    ctx: &mut StageCtx<'_>,
    editor: &dyn crate::models::Editor,
    p: &JudgeParams,
    eps: &[EpisodeRow],
    questions: &[QuestionRow],
) -> Result<(), StageError> {
    let by_id: std::collections::HashMap<&str, &QuestionRow> = questions
        .iter()
        .map(|q| (q.question_id.as_str(), q))
        .collect();
    let prompts: Vec<String> = eps
        .iter()
        .map(|e| {
            let q = by_id.get(e.question_id.as_str());
            datasets::search::judge::render_judge_prompt(
                q.map_or("", |q| q.question.as_str()),
                e.answer.as_deref().unwrap_or("(no answer)"),
                q.map_or("", |q| q.answer.as_str()),
                q.map_or(&[][..], |q| q.aliases.as_slice()),
            )
        })
        .collect();
    let pb = ctx.progress(prompts.len() as u64);
    let replies = editor.complete_all(&prompts, 0, &|| pb.inc(1));
    pb.finish_and_clear();
    let failures: Vec<CallFailure> = replies.iter().filter_map(|r| r.error.clone()).collect();
    if let Some(e) = infrastructure_error(JUDGE_STAGE, &failures) {
        return Err(e);
    }
    let mut usage = Usage::default();
    let rows: Vec<JudgeRow> = eps
        .iter()
        .zip(&replies)
        .map(|(e, r)| {
            r.usage.record(&mut usage, r.error.is_some());
            let verdict = r
                .text
                .as_deref()
                .and_then(|t| datasets::search::judge::parse_verdict(t).ok());
            let text = p
                .editor
                .zip(by_id.get(e.question_id.as_str()))
                .map(|(v, q)| editor_text(e, q, verdict, &v.view()));
            JudgeRow {
                question_id: e.question_id.clone(),
                split: e.split.clone(),
                editor_text: text,
                model: p.judge.to_string(),
                verdict,
                reply: r.text.clone(),
                error_kind: match (&r.error, verdict) {
                    (Some(f), _) => Some(f.kind.clone()),
                    (None, None) => Some("no_verdict".into()),
                    _ => None,
                },
                prompt_tokens: r.usage.prompt_tokens as i64,
                completion_tokens: r.usage.completion_tokens as i64,
            }
        })
        .collect();
    ctx.add_usage(&usage);
    ctx.write(&rows)?;
    Ok(())
}

impl Search<'_> {
    /// Stage `search-judge` at the play step `at`: the judge's verdict on every
    /// episode of `trajectories` (`Ok(None)`: no judge configured, or blocked in
    /// status mode).
    /// On the training split each row also carries the episode as the editor reads it
    /// with the verdict as its outcome: there it is `Search`'s grading node
    /// ([`crate::env::OfflineEnv::grade`]), whose output batch-reflect reads; on the test
    /// split `search-evaluate` reads it. (Its key, and batch-reflect's, are what they were
    /// when exploration returned the judgement in place of the episodes: no version bump.)
    pub(super) fn judge<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        at: &At,
        judge: &ModelSpec,
        split: Split,
        trajectories: &Handle,
    ) -> Result<Handle, DriveError> {
        let params = JudgeParams {
            judge: judge.clone(),
            template: datasets::search::judge::JUDGE_TEMPLATE,
            editor: (split == Split::Train).then_some(ViewKey {
                show_queries: self.s.show_queries,
            }),
        };
        let models = cx.models;
        cx.stage(
            at,
            JUDGE_STAGE,
            JUDGE_VERSION,
            params,
            &[
                ("episodes", trajectories),
                ("questions", &self.questions.handle),
            ],
            move |ctx, params| {
                let eps: Vec<EpisodeRow> = ctx.read("episodes")?;
                let ed = models.editor(&params.judge)?;
                let questions = self.questions.get(split)?;
                judge_episodes(ctx, ed.as_ref(), params, &eps, questions)
            },
        )
    }
}
