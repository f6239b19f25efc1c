//! Stage `mcp-judge`: an LLM judge's verdict on the final answer of every episode
//! whose task carries a rubric (`judge` in the tasks file), with the judge model
//! `mcp.judge`. One row per episode of the node, in the episodes' order: the judge
//! is asked only where the task has a rubric; on the training split each row also
//! carries the episode as the editor reads it, with the verdict as its outcome where
//! there is a rubric (the exact-match grade otherwise), which batch-reflect reads.
//!
//! The node exists only where its split has rubric tasks ([`Grading`]): an
//! experiment without rubrics has exactly the nodes and keys it had before.
//! A failed call for an infrastructure reason fails the stage; any other failure,
//! and a reply without a verdict, is a row without a verdict ("not judged", never
//! "incorrect" to the editor; not correct in accuracy).

use super::config::McpExperiment;
use super::explore::{clip, editor_text, McpCall, Outcome};
use super::rows::{EpisodeRow, McpJudgeRow, TaskRow};
use super::tasks::Task;
use super::Mcp;
use crate::env::{At, Cx, DriveError, Split};
use crate::models::{infrastructure_error, CallFailure, Editor, EditorReply, ModelSpec};
use crate::InputError;
use pipeline::{Handle, StageCtx, StageError, Usage};
use serde::Serialize;
use std::collections::HashMap;

/// The stage name.
pub const JUDGE_STAGE: &str = "mcp-judge";
/// The stage version.
pub const JUDGE_VERSION: u32 = 1;
/// The judge's instructions: `{request}`, `{rubric}` and `{answer}` are filled in by
/// [`render_prompt`].
pub const JUDGE_TEMPLATE: &str = include_str!("../../../prompts/mcp_judge.txt");
/// The most characters of the request, the rubric and the answer in a judge prompt.
pub const PROMPT_FIELD_CHARS: usize = 4000;
/// The most characters of the judge's reason stored.
pub const REASON_CHARS: usize = 500;
/// The most characters of the judge's reply stored.
pub const REPLY_CHARS: usize = 2000;

/// A task's rubric: its `judge` text, unless empty or blank.
pub fn rubric(judge: Option<&str>) -> Option<&str> {
    judge.map(str::trim).filter(|r| !r.is_empty())
}

/// How a task's episodes are scored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scoring {
    /// By the LLM judge, against the task's rubric.
    Judge,
    /// By normalised exact match (and F1) against the task's answer and aliases.
    Exact,
    /// Neither an answer nor a rubric: counted in no accuracy.
    Unscored,
}

/// How the episodes of task `t` are scored: a rubric wins over an answer.
pub fn scoring(t: &TaskRow) -> Scoring {
    if rubric(t.judge.as_deref()).is_some() {
        Scoring::Judge
    } else if !t.answer.trim().is_empty() || t.answers.iter().any(|a| !a.trim().is_empty()) {
        Scoring::Exact
    } else {
        Scoring::Unscored
    }
}

/// What the tasks of one split of a server ask of the scoring.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SplitGrading {
    /// Some task has a rubric: the split's episodes are judged (`mcp-judge`).
    pub rubrics: bool,
    /// Some task has neither an answer nor a rubric.
    pub unscored: bool,
}

/// What the tasks of one server ask of the scoring, per split; read from the tasks
/// file when the drive starts, so that nodes and keys follow the file (the default,
/// no rubric and every task with an answer, leaves them as they were before the
/// judge existed).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Grading {
    /// The training split.
    pub train: SplitGrading,
    /// The test split.
    pub test: SplitGrading,
}

impl Grading {
    /// The grading of `split`.
    pub fn of(&self, split: Split) -> SplitGrading {
        match split {
            Split::Train => self.train,
            Split::Test => self.test,
        }
    }

    /// The grading of a server's task rows (both splits).
    pub fn of_rows(rows: &[TaskRow]) -> Grading {
        let mut g = Grading::default();
        for t in rows {
            let s = if t.split == "train" {
                &mut g.train
            } else {
                &mut g.test
            };
            match scoring(t) {
                Scoring::Judge => s.rubrics = true,
                Scoring::Unscored => s.unscored = true,
                Scoring::Exact => {}
            }
        }
        g
    }
}

/// A task with a rubric needs a judge model: the first such task without
/// `mcp.judge` is one error line.
pub fn check(m: &McpExperiment, tasks: &[Task]) -> Result<(), InputError> {
    if m.judge.is_some() {
        return Ok(());
    }
    match tasks.iter().find(|t| rubric(t.judge.as_deref()).is_some()) {
        Some(t) => Err(InputError(format!(
            "mcp: task `{}` has a `judge` rubric but no judge model is set: add `judge = \"<model>\"` to [mcp] (or drop the rubrics)",
            clip(&t.id, 100)
        ))),
        None => Ok(()),
    }
}

/// Each server's [`Grading`], from the tasks file as the `mcp-tasks` stage splits
/// it. No tasks file, or one that cannot be read (the `mcp-tasks` stage then says
/// why, as the preflight did): every grading is the default. A rubric without a
/// judge model is an error ([`check`]).
pub fn gradings(m: &McpExperiment) -> Result<HashMap<String, Grading>, InputError> {
    let Some(p) = &m.tasks else {
        return Ok(HashMap::new());
    };
    let names: Vec<&str> = m.servers.iter().map(|s| s.name.as_str()).collect();
    let Ok(all) = super::tasks::load(p, &names) else {
        return Ok(HashMap::new());
    };
    check(m, &all)?;
    Ok(m.servers
        .iter()
        .map(|s| {
            let rows = super::tasks::split(&all, &s.name, m.seed, m.train_fraction);
            (s.name.clone(), Grading::of_rows(&rows))
        })
        .collect())
}

/// The judge prompt: [`JUDGE_TEMPLATE`] with the request, the rubric and the final
/// answer, each at most [`PROMPT_FIELD_CHARS`] characters. Filled in one pass: a
/// placeholder inside a filled-in text stays as written.
pub fn render_prompt(request: &str, rubric: &str, answer: &str) -> String {
    let fields = [
        ("{request}", clip(request.trim(), PROMPT_FIELD_CHARS)),
        ("{rubric}", clip(rubric.trim(), PROMPT_FIELD_CHARS)),
        ("{answer}", clip(answer.trim(), PROMPT_FIELD_CHARS)),
    ];
    let mut out = String::with_capacity(JUDGE_TEMPLATE.len() + 3 * 256);
    let mut rest = JUDGE_TEMPLATE;
    while let Some(i) = rest.find('{') {
        out.push_str(&rest[..i]);
        let tail = &rest[i..];
        match fields.iter().find(|(k, _)| tail.starts_with(k)) {
            Some((k, v)) => {
                out.push_str(v);
                rest = &tail[k.len()..];
            }
            None => {
                out.push('{');
                rest = &tail[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// What a judge reply says.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Judgement {
    /// `Some(true)` for `correct`, `Some(false)` for `incorrect`; `None`: the reply
    /// gives no verdict (not judged).
    pub verdict: Option<bool>,
    /// The reply's reason (its `Reason:` line), at most [`REASON_CHARS`] characters.
    pub reason: Option<String>,
}

/// A line's text without Markdown decoration (`**`, `#`, `-`, `>`) at its ends.
fn plain(line: &str) -> &str {
    line.trim()
        .trim_start_matches(['*', '#', '-', '>', '_', ' '])
        .trim_end_matches(['*', '_', ' '])
}

/// The verdict a text opens with: `correct` (or `yes`, `right`, `pass`) or
/// `incorrect` (or `not correct`, `wrong`, `no`, `fail`), case and decoration aside.
fn verdict_word(text: &str) -> Option<bool> {
    let lower = text.to_lowercase();
    let mut words = lower
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty());
    match words.next()? {
        "correct" | "yes" | "right" | "pass" | "passed" => Some(true),
        "incorrect" | "wrong" | "no" | "fail" | "failed" => Some(false),
        "not" if words.next() == Some("correct") => Some(false),
        _ => None,
    }
}

/// The value after `label` (`Verdict`, `Reason`) at the start of `line`, followed
/// by `:`, `=` or ` -`; case and Markdown decoration aside.
fn labelled<'a>(line: &'a str, label: &str) -> Option<&'a str> {
    let l = plain(line);
    let head = l.get(..label.len())?;
    if !head.eq_ignore_ascii_case(label) {
        return None;
    }
    let rest = l[label.len()..].trim_start_matches(['*', '_', ' ']);
    let value = rest
        .strip_prefix(':')
        .or_else(|| rest.strip_prefix('='))
        .or_else(|| rest.strip_prefix('-'))?;
    Some(value.trim().trim_matches(['*', '_', '`', '"', '\'']).trim())
}

/// Parse a judge reply leniently: the last `Verdict:` line decides (`correct` /
/// `incorrect`, decorated or not, `yes` / `no` too); without one, a reply that is
/// only a verdict word (`Correct.`) does. Anything else has no verdict: never read
/// as `incorrect`. The reason is the last `Reason:` line, bounded.
pub fn parse_reply(reply: &str) -> Judgement {
    let lines: Vec<&str> = reply.lines().collect();
    let verdict = lines
        .iter()
        .rev()
        .find_map(|l| labelled(l, "verdict"))
        .map(verdict_word)
        .unwrap_or_else(|| {
            let only = plain(reply.trim()).trim_end_matches(['.', '!']);
            let single = !only.is_empty() && only.split_whitespace().count() <= 2;
            if single {
                verdict_word(only)
            } else {
                None
            }
        });
    let reason = lines
        .iter()
        .rev()
        .find_map(|l| labelled(l, "reason"))
        .filter(|r| !r.is_empty())
        .map(|r| clip(r, REASON_CHARS));
    Judgement { verdict, reason }
}

/// The bounds a judge row is written with (part of the key).
#[derive(Serialize, Clone, Copy)]
struct Bounds {
    prompt_field_chars: usize,
    reason_chars: usize,
    reply_chars: usize,
}

/// The editor's view a training row is written with (part of the key).
#[derive(Serialize, Clone, Copy)]
struct ViewKey {
    field_chars: usize,
    text_bytes: usize,
}

/// `mcp-judge`'s params: the stage key and what the run reads.
#[derive(Serialize)]
struct JudgeParams {
    judge: ModelSpec,
    template: &'static str,
    bounds: Bounds,
    /// Training episodes: the editor's view their text is written with. Absent for
    /// test episodes.
    #[serde(skip_serializing_if = "Option::is_none")]
    editor: Option<ViewKey>,
}

/// The episode `e` of task `t` as the editor reads it, with `outcome`.
fn view(e: &EpisodeRow, t: &TaskRow, outcome: Outcome) -> Result<String, StageError> {
    let calls: Vec<McpCall> = serde_json::from_value(e.calls.clone())
        .map_err(|err| StageError::bug(JUDGE_STAGE, format!("stored calls: {err}")))?;
    Ok(editor_text(
        &t.question,
        &calls,
        e.answer.as_deref(),
        outcome,
    ))
}

/// Stage `mcp-judge`: the judge asked about every episode whose task has a rubric
/// (concurrently, as the model allows), one row per episode.
fn judge_episodes(
    ctx: &mut StageCtx<'_>,
    judge: &dyn Editor,
    p: &JudgeParams,
    eps: &[EpisodeRow],
    tasks: &[TaskRow],
) -> Result<(), StageError> {
    let by_id: HashMap<&str, &TaskRow> = tasks.iter().map(|t| (t.task_id.as_str(), t)).collect();
    let mut asked: Vec<usize> = Vec::new();
    let mut prompts: Vec<String> = Vec::new();
    for (i, e) in eps.iter().enumerate() {
        let Some(t) = by_id.get(e.task_id.as_str()) else {
            continue;
        };
        if let Some(r) = rubric(t.judge.as_deref()) {
            asked.push(i);
            prompts.push(render_prompt(
                &t.question,
                r,
                e.answer.as_deref().unwrap_or("(no final answer)"),
            ));
        }
    }
    let pb = ctx.progress(prompts.len() as u64);
    let replies = if prompts.is_empty() {
        Vec::new()
    } else {
        judge.complete_all(&prompts, 0, &|| pb.inc(1))
    };
    pb.finish_and_clear();
    if replies.len() != prompts.len() {
        return Err(StageError::bug(
            JUDGE_STAGE,
            format!("{} replies to {} prompts", replies.len(), prompts.len()),
        ));
    }
    let failures: Vec<CallFailure> = replies.iter().filter_map(|r| r.error.clone()).collect();
    if let Some(e) = infrastructure_error(JUDGE_STAGE, &failures) {
        return Err(e);
    }
    let reply_of: HashMap<usize, &EditorReply> = asked.into_iter().zip(&replies).collect();
    let mut usage = Usage::default();
    let mut rows = Vec::with_capacity(eps.len());
    for (i, e) in eps.iter().enumerate() {
        let task = by_id.get(e.task_id.as_str());
        let mut row = McpJudgeRow {
            task_id: e.task_id.clone(),
            split: e.split.clone(),
            model: p.judge.to_string(),
            rubric: false,
            verdict: None,
            reason: None,
            reply: None,
            error_kind: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            editor_text: p.editor.map(|_| e.editor_text.clone()),
        };
        if let (Some(r), Some(t)) = (reply_of.get(&i), task) {
            r.usage.record(&mut usage, r.error.is_some());
            let j = r.text.as_deref().map(parse_reply).unwrap_or_default();
            row.rubric = true;
            row.verdict = j.verdict;
            row.reason = j.reason;
            row.reply = r.text.as_deref().map(|t| clip(t, REPLY_CHARS));
            row.error_kind = match (&r.error, j.verdict) {
                (Some(f), _) => Some(f.kind.clone()),
                (None, None) => Some("no_verdict".into()),
                _ => None,
            };
            row.prompt_tokens = r.usage.prompt_tokens as i64;
            row.completion_tokens = r.usage.completion_tokens as i64;
            if p.editor.is_some() {
                row.editor_text = Some(view(e, t, Outcome::of(j.verdict))?);
            }
        }
        rows.push(row);
    }
    ctx.add_usage(&usage);
    ctx.write(&rows)?;
    Ok(())
}

impl Mcp<'_> {
    /// Stage `mcp-judge` over the episodes `episodes` of the play step `at`, if its
    /// split has rubric tasks and a judge model is set (`Ok(None)` otherwise: nothing
    /// to judge). On the training split its rows carry the episodes as the editor
    /// reads them: it is the grading node batch-reflect reads
    /// ([`crate::env::OfflineEnv::grade`]); on the test split `mcp-evaluate` reads
    /// its verdicts.
    pub(super) fn judged<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        at: &At,
        episodes: &Handle,
    ) -> Result<Option<Handle>, DriveError> {
        let split = at.split_for(JUDGE_STAGE)?;
        let Some(judge) = self
            .m
            .judge
            .as_ref()
            .filter(|_| self.grading.of(split).rubrics)
        else {
            return Ok(None);
        };
        let params = JudgeParams {
            judge: judge.clone(),
            template: JUDGE_TEMPLATE,
            bounds: Bounds {
                prompt_field_chars: PROMPT_FIELD_CHARS,
                reason_chars: REASON_CHARS,
                reply_chars: REPLY_CHARS,
            },
            editor: (split == Split::Train).then_some(ViewKey {
                field_chars: super::explore::EDITOR_FIELD_CHARS,
                text_bytes: super::explore::EDITOR_TEXT_BYTES,
            }),
        };
        let models = cx.models;
        let h = cx.stage(
            at,
            JUDGE_STAGE,
            JUDGE_VERSION,
            params,
            &[("episodes", episodes), ("tasks", &self.tasks.handle)],
            move |ctx, params| {
                let eps: Vec<EpisodeRow> = ctx.read("episodes")?;
                let tasks: Vec<TaskRow> = ctx.read("tasks")?;
                let judge = models.editor(&params.judge)?;
                judge_episodes(ctx, judge.as_ref(), params, &eps, &tasks)
            },
        )?;
        Ok(Some(h))
    }

    /// The training play's grading node ([`crate::env::OfflineEnv::grade`]): the
    /// judge, where training tasks carry rubrics.
    pub(super) fn grade_train<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        at: &At,
        episodes: &Handle,
    ) -> Result<Option<Handle>, DriveError> {
        match at.split_for(JUDGE_STAGE)? {
            Split::Train => self.judged(cx, at, episodes),
            Split::Test => Ok(None),
        }
    }
}

/// The judge's training rows as the editor reads them, in the episodes' order
/// ([`crate::env::OfflineEnv::serialize_graded`]).
pub(super) fn serialize_judged(graded: &Handle) -> Result<Vec<String>, DriveError> {
    let rows: Vec<McpJudgeRow> = graded.read()?;
    Ok(rows
        .into_iter()
        .map(|r| r.editor_text.unwrap_or_default())
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(id: &str, split: &str, answer: &str, judge: Option<&str>) -> TaskRow {
        TaskRow {
            split: split.into(),
            task_id: id.into(),
            server: "git".into(),
            question: format!("question {id}?"),
            answer: answer.into(),
            answers: Vec::new(),
            judge: judge.map(str::to_string),
            kind: None,
        }
    }

    fn episode(id: &str, split: &str, answer: Option<&str>) -> EpisodeRow {
        let calls = vec![McpCall {
            tool: "tool_1".into(),
            server_tool: Some("git_log".into()),
            arguments: json!({"repo_path": "/workspace"}),
            result: "Message: add parser module".into(),
            is_error: false,
        }];
        EpisodeRow {
            task_id: id.into(),
            split: split.into(),
            round: 0,
            model: "scripted:mcp-reader".into(),
            steps: json!([]),
            calls: serde_json::to_value(&calls).unwrap(),
            answer: answer.map(str::to_string),
            forced: false,
            correct: false,
            f1: 0.0,
            tool_calls: 1,
            tool_errors: 0,
            editor_text: format!("explore's view of {id}"),
            error_kind: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            reasoning_tokens: 0,
        }
    }

    #[test]
    fn replies_parse_leniently_and_without_a_verdict_are_not_judged() {
        let cases: &[(&str, Option<bool>)] = &[
            ("Verdict: correct\nReason: it names the module.", Some(true)),
            ("Verdict: incorrect\nReason: wrong commit.", Some(false)),
            ("**Verdict:** Correct.\n**Reason:** fine", Some(true)),
            ("verdict = INCORRECT", Some(false)),
            ("- Verdict - not correct", Some(false)),
            ("## Verdict: `correct`", Some(true)),
            ("Verdict: yes", Some(true)),
            (
                "Thinking...\nVerdict: incorrect\nVerdict: correct",
                Some(true),
            ),
            ("Correct.", Some(true)),
            ("incorrect", Some(false)),
            // No verdict: never read as incorrect.
            ("I cannot tell from the rubric.", None),
            ("Verdict: maybe\nReason: unclear", None),
            ("The answer is correct because it names the module.", None),
            ("", None),
            ("Reason: no verdict line", None),
        ];
        for (reply, want) in cases {
            assert_eq!(parse_reply(reply).verdict, *want, "{reply:?}");
        }
        let j = parse_reply("Verdict: correct\nReason: it names the parser module.");
        assert_eq!(j.reason.as_deref(), Some("it names the parser module."));
        assert_eq!(parse_reply("Verdict: correct").reason, None);
        // The reason is bounded.
        let long = format!("Verdict: correct\nReason: {}", "x".repeat(10_000));
        let r = parse_reply(&long).reason.unwrap();
        assert!(r.chars().count() <= REASON_CHARS + 20, "{}", r.len());
        assert!(r.ends_with("[cut]"), "{r}");
    }

    #[test]
    fn the_prompt_is_filled_in_one_pass_and_bounded() {
        let p = render_prompt("Who wrote {answer}?", "names {rubric} Alice", "Alice");
        assert!(p.contains("[Request]\nWho wrote {answer}?\n"), "{p}");
        assert!(p.contains("[Rubric]\nnames {rubric} Alice\n"), "{p}");
        assert!(p.contains("[Final answer]\nAlice\n"), "{p}");
        assert!(p.contains("Verdict: <correct or incorrect>"), "{p}");
        assert!(!p.contains("{request}"), "{p}");
        let huge = "y".repeat(100_000);
        let p = render_prompt(&huge, &huge, &huge);
        assert!(p.len() < JUDGE_TEMPLATE.len() + 3 * (PROMPT_FIELD_CHARS + 20));
    }

    #[test]
    fn a_task_is_scored_by_its_rubric_its_answer_or_not_at_all() {
        assert_eq!(
            scoring(&task("a", "test", "x", Some("names x"))),
            Scoring::Judge
        );
        assert_eq!(scoring(&task("b", "test", "x", Some("  "))), Scoring::Exact);
        assert_eq!(scoring(&task("c", "test", " ", None)), Scoring::Unscored);
        let mut aliased = task("d", "test", "", None);
        aliased.answers = vec!["y".into()];
        assert_eq!(scoring(&aliased), Scoring::Exact);
        let g = Grading::of_rows(&[
            task("a", "train", "x", None),
            task("b", "test", "x", Some("names x")),
            task("c", "test", "", None),
        ]);
        assert_eq!(g.train, SplitGrading::default());
        assert_eq!(
            g.of(Split::Test),
            SplitGrading {
                rubrics: true,
                unscored: true
            }
        );
        // Tasks with answers only: the default, the keys of before.
        assert_eq!(
            Grading::of_rows(&[task("a", "train", "x", None), task("b", "test", "y", None)]),
            Grading::default()
        );
    }

    /// A scripted judge that answers each prompt by its rubric's first word.
    struct ByRubric;

    impl Editor for ByRubric {
        fn complete(&self, prompt: &str, _seed: u64) -> EditorReply {
            let rubric = prompt
                .split_once("[Rubric]\n")
                .map(|(_, r)| r)
                .unwrap_or("");
            let text = if rubric.starts_with("pass") {
                "Verdict: correct\nReason: ok ".to_string() + &"z".repeat(5000)
            } else if rubric.starts_with("fail") {
                "Verdict: incorrect\nReason: no".to_string()
            } else if rubric.starts_with("broken") {
                return EditorReply {
                    text: None,
                    usage: Default::default(),
                    error: Some(CallFailure {
                        kind: "refusal".into(),
                        message: "no".into(),
                        infrastructure: false,
                    }),
                    cut: false,
                };
            } else {
                "I am not sure.".to_string()
            };
            EditorReply {
                text: Some(text),
                usage: crate::models::CallUsage {
                    prompt_tokens: 10,
                    completion_tokens: 3,
                    ..Default::default()
                },
                error: None,
                cut: false,
            }
        }
    }

    #[test]
    fn rows_follow_the_episodes_and_only_rubric_tasks_are_judged() {
        let tasks = vec![
            task("ok", "train", "", Some("pass: names the module")),
            task("bad", "train", "", Some("fail: anything")),
            task("odd", "train", "", Some("unsure")),
            task("err", "train", "", Some("broken")),
            task("plain", "train", "x", None),
        ];
        let eps: Vec<EpisodeRow> = ["ok", "bad", "odd", "err", "plain"]
            .iter()
            .map(|id| episode(id, "train", Some("add parser module")))
            .collect();
        let p = JudgeParams {
            judge: ModelSpec::parse("scripted:mcp-judge").unwrap(),
            template: JUDGE_TEMPLATE,
            bounds: Bounds {
                prompt_field_chars: PROMPT_FIELD_CHARS,
                reason_chars: REASON_CHARS,
                reply_chars: REPLY_CHARS,
            },
            editor: Some(ViewKey {
                field_chars: 1,
                text_bytes: 1,
            }),
        };
        let dir = tempfile::tempdir().unwrap();
        let store = pipeline::Store::open(dir.path(), pipeline::Access::ReadWrite).unwrap();
        let s = pipeline::Session::new(&store, pipeline::Mode::Run, true);
        let h = s
            .stage(
                "mcp-judge[test]",
                JUDGE_STAGE,
                JUDGE_VERSION,
                json!({"t": 1}),
                &[],
                |ctx: &mut StageCtx<'_>| judge_episodes(ctx, &ByRubric, &p, &eps, &tasks),
            )
            .unwrap();
        let rows: Vec<McpJudgeRow> = h.read().unwrap();
        let ids: Vec<&str> = rows.iter().map(|r| r.task_id.as_str()).collect();
        assert_eq!(ids, ["ok", "bad", "odd", "err", "plain"]);
        let verdicts: Vec<Option<bool>> = rows.iter().map(|r| r.verdict).collect();
        assert_eq!(verdicts, [Some(true), Some(false), None, None, None]);
        let rubric: Vec<bool> = rows.iter().map(|r| r.rubric).collect();
        assert_eq!(rubric, [true, true, true, true, false]);
        let kinds: Vec<Option<&str>> = rows.iter().map(|r| r.error_kind.as_deref()).collect();
        assert_eq!(
            kinds,
            [None, None, Some("no_verdict"), Some("refusal"), None]
        );
        // What the judge wrote is bounded.
        let ok = &rows[0];
        assert!(ok.reply.as_ref().unwrap().chars().count() <= REPLY_CHARS + 20);
        assert!(ok.reason.as_ref().unwrap().chars().count() <= REASON_CHARS + 20);
        assert_eq!(ok.prompt_tokens, 10);
        // The editor reads the verdict; a reply without one reads "not judged"; a
        // task without a rubric keeps exploration's view.
        let text = |i: usize| rows[i].editor_text.clone().unwrap();
        assert!(text(0).ends_with("Outcome: correct"), "{}", text(0));
        assert!(text(0).contains("Call 1: tool_1"), "{}", text(0));
        assert!(text(1).ends_with("Outcome: incorrect"), "{}", text(1));
        assert!(text(2).ends_with("Outcome: not judged"), "{}", text(2));
        assert!(text(3).ends_with("Outcome: not judged"), "{}", text(3));
        assert_eq!(text(4), "explore's view of plain");
        assert_eq!(
            serialize_judged(&h).unwrap(),
            (0..5).map(text).collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_rubric_needs_a_judge_model_and_a_bad_spec_is_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let server = "[servers.git]\ncommand = [\"srv\"]\n";
        let parse = |body: &str| -> Result<McpExperiment, String> {
            let raw: super::super::RawMcp = toml::from_str(body).map_err(|e| e.to_string())?;
            McpExperiment::from_raw(raw, &|p| dir.path().join(p))
        };
        let e = parse(&format!("methods = [\"gold\"]\njudge = \"nope\"\n{server}")).unwrap_err();
        assert!(e.starts_with("mcp.judge: "), "{e}");
        assert_eq!(e.lines().count(), 1, "{e}");
        let e = parse(&format!(
            "methods = [\"gold\"]\njudge = \"scripted:mcp-nobody\"\n{server}"
        ))
        .unwrap_err();
        assert!(
            e.contains("mcp.judge: ") && e.contains("scripted:mcp-judge"),
            "{e}"
        );
        let with = parse(&format!(
            "methods = [\"gold\"]\njudge = \"scripted:mcp-judge\"\n{server}"
        ))
        .unwrap();
        assert_eq!(
            with.judge.as_ref().map(ToString::to_string).as_deref(),
            Some("scripted:mcp-judge")
        );
        let without = parse(&format!("methods = [\"gold\"]\n{server}")).unwrap();
        assert!(without.judge.is_none());
        let t = |id: &str, judge: Option<&str>| Task {
            id: id.into(),
            server: "git".into(),
            question: "q".into(),
            answer: None,
            answers: Vec::new(),
            split: None,
            judge: judge.map(str::to_string),
            kind: None,
        };
        let tasks = [
            t("a", None),
            t("b", Some(" ")),
            t("c", Some("names x")),
            t("d", Some("y")),
        ];
        let e = check(&without, &tasks).unwrap_err().0;
        assert!(e.contains("task `c`"), "{e}");
        assert!(e.contains("judge = \"<model>\""), "{e}");
        assert_eq!(e.lines().count(), 1);
        assert!(check(&with, &tasks).is_ok());
        assert!(check(&without, &tasks[..2]).is_ok());
    }
}
