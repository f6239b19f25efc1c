//! Stage `search-explore`: one multi-turn episode per question of a split, with the
//! tools of one set; each row carries the episode as the editor reads it.

use super::config::ResultShape;
use super::rows::{EpisodeRow, QuestionRow};
use super::tools::{domains, tool_set};
use super::Search;
use crate::baselines::shared_docs;
use crate::env::{At, Cx, DriveError, Play, Split};
use crate::models::ModelSpec;
use crate::models::{infrastructure_error, run_episode, CallFailure, MultiTurn};
use crate::rows::{CallRecord, DocRow};
use datasets::search::judge;
use datasets::search::trajectory::{
    serialize_for_editor, EditorView, SearchCall, SearchTrajectory,
};
use datasets::search::{Opacity, SearchEnv};
use pipeline::{Handle, StageCtx, StageError, Usage};
use serde::Serialize;
use serde_json::{json, Value};
use std::sync::Mutex;

/// The stage name.
pub const EXPLORE_STAGE: &str = "search-explore";
/// The episodes' stage: 2 since an agent reply that writes its tool call as text
/// (`models::llm::calls_in_text`) is that call, not the final answer; 3 since one call
/// per turn is executed (unless `parallel_tool_calls`) and the empty result is worded
/// neutrally; 4 since what a model wrote is bounded in the editor's view (2,000
/// characters of a question, answer, query or output) and an unknown tool's name is
/// quoted by its ends.
pub const EXPLORE_VERSION: u32 = 4;

/// `search-explore`'s params: the stage key and what the run reads.
#[derive(Serialize)]
pub(crate) struct ExploreParams<'a> {
    agent: ModelSpec,
    /// The system prompt before any demonstrations (those come with the docs input).
    system: &'a str,
    final_answer: &'static str,
    /// The chain's seed (the agent's requests).
    seed: u64,
    split: Split,
    max_turns: usize,
    show_queries: bool,
    tool_set: &'a str,
    /// What the tools search ([`corpus_key`]).
    corpus: &'a Value,
    /// `bm25` or `dense`.
    retriever: &'a str,
    shape: ResultShape,
    first_call_required: bool,
    /// The dense retriever's embedder (absent for BM25).
    #[serde(skip_serializing_if = "str::is_empty")]
    embedder: &'a str,
    round: i64,
    /// The docs played name the gold tools (`search_<domain>`), so the tools answer to
    /// those names; otherwise to the opaque `tool_N`, which learned docs keep. In the
    /// key only when set.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    gold_names: bool,
    /// Every call of a turn is executed (default: the first only). In the key only
    /// when set.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    parallel_tool_calls: bool,
    /// The empty result hints at the hidden structure. In the key only when set.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    hints: bool,
    /// How the agent samples on this split (`[models]`); in the key only when it is
    /// not the model's default.
    #[serde(skip_serializing_if = "crate::models::TurnSampling::is_default")]
    sampling: crate::models::TurnSampling,
}

/// The episode as the editor reads it, with `correct` as the outcome shown (the exact
/// match, or the judge's verdict; `None`: the judge's reply had none, shown as not
/// judged): rebuilt from the stored steps, so an episode judged afterwards reads
/// exactly as it did, verdict apart.
pub(super) fn editor_text(
    e: &EpisodeRow,
    q: &QuestionRow,
    correct: Option<bool>,
    view: &EditorView,
) -> String {
    let mut calls = Vec::new();
    for step in e.steps.as_array().into_iter().flatten() {
        let results = step.get("results").and_then(Value::as_array);
        for (i, c) in step
            .get("calls")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let args = c.get("args").cloned().unwrap_or(Value::Null);
            calls.push(SearchCall {
                tool: c
                    .get("function")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                query: args
                    .get("query")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| args.to_string()),
                output: results
                    .and_then(|r| r.get(i))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
            });
        }
    }
    let answer = e.answer.clone().unwrap_or_default();
    let traj = SearchTrajectory {
        question: q.question.clone(),
        final_answer: judge::grade(&answer, &q.answer, &q.aliases).answer,
        correct,
        calls,
    };
    serialize_for_editor(&traj, view)
}

impl<'a> Search<'a> {
    /// The episodes of the play step `play`. The key holds whether the docs name the
    /// gold tools, which only the docs can tell: it is computed once they are.
    pub(super) fn explore_node<'p>(
        &'p self,
        cx: &mut Cx<'p, '_>,
        play: &Play<'_>,
    ) -> Result<Handle, DriveError> {
        let inputs = [("questions", &self.questions.handle), ("docs", play.docs)];
        crate::offline::multi_turn::explore_node(
            self,
            cx,
            play,
            (EXPLORE_STAGE, EXPLORE_VERSION),
            &inputs,
        )
    }

    /// Whether `tools` (the docs an episode plays) name the gold tools, in order.
    pub(super) fn names_gold(&self, tools: &[Value]) -> bool {
        let gold = tool_set(
            &domains(&self.s.source),
            &self.set,
            Opacity::Gold,
            self.s.shape,
            self.s.hints,
        );
        tools
            .iter()
            .map(|t| t.get("name").and_then(Value::as_str))
            .eq(gold.tools.iter().map(|t| Some(t.name.as_str())))
    }
}

/// The episode row of question `q` played in `ep` (`calls` tool calls), graded by
/// exact match against the answer and its aliases; the row's editor text is empty.
pub(super) fn graded_row(
    q: &QuestionRow,
    split: Split,
    round: i64,
    model: &str,
    ep: &crate::models::Episode,
    calls: usize,
) -> (EpisodeRow, judge::Grade) {
    let answer = ep.answer.clone().unwrap_or_default();
    let g = judge::grade(&answer, &q.answer, &q.aliases);
    let steps: Vec<Value> = ep
        .steps
        .iter()
        .map(|s| json!({"calls": s.calls, "content": s.content, "results": s.results}))
        .collect();
    let row = EpisodeRow {
        question_id: q.question_id.clone(),
        split: split.as_str().into(),
        round,
        model: model.to_string(),
        steps: Value::Array(steps),
        answer: ep.answer.clone(),
        forced: ep.forced,
        correct: g.exact,
        f1: g.f1,
        tool_calls: calls as i64,
        editor_text: String::new(),
        error_kind: ep.error.as_ref().map(|e| e.kind.clone()),
        prompt_tokens: ep.usage.prompt_tokens as i64,
        completion_tokens: ep.usage.completion_tokens as i64,
        reasoning_tokens: ep.usage.reasoning_tokens as i64,
    };
    (row, g)
}

/// What the agent reads back from a search tool call: the tool's text, or the
/// error as `Error: ...`, bounded as every tool output is.
pub(super) fn tool_reply(env: &SearchEnv<'_, super::corpus::Searcher>, c: &CallRecord) -> String {
    let text = match env.execute(&c.function, &c.args) {
        Ok(t) => t,
        Err(e) => format!("Error: {e}"),
    };
    datasets::bfcl::executor::bounded_output(&text)
}

impl crate::offline::multi_turn::MultiTurnExplore for Search<'_> {
    type Params<'a>
        = ExploreParams<'a>
    where
        Self: 'a;

    /// The agent's params on the docs `docs_rows` at the play step `at` (whose agent
    /// and split are `agent`, `split`), with the tools and system prompt it plays.
    fn params(
        &self,
        at: &At,
        sampling: &crate::models::TurnSampling,
        docs_rows: &[DocRow],
    ) -> Result<(ExploreParams<'_>, Vec<Value>, String), StageError> {
        let (split, agent) = (at.split_for(EXPLORE_STAGE)?, at.agent_for(EXPLORE_STAGE)?);
        // A baseline's demonstrations (Play2Prompt) go into the system prompt.
        let (tools, system) = shared_docs(docs_rows, &self.system);
        let params = ExploreParams {
            agent: agent.clone(),
            system: &self.system,
            final_answer: crate::models::llm::FINAL_ANSWER,
            seed: at.seed,
            split,
            max_turns: self.s.max_turns,
            show_queries: self.s.show_queries,
            tool_set: &self.set,
            corpus: self.corpus_id,
            retriever: &self.s.retriever,
            shape: self.s.shape,
            first_call_required: self.s.first_call_required,
            embedder: self.embedder_key,
            round: at.round,
            gold_names: self.names_gold(&tools),
            parallel_tool_calls: self.s.parallel_tool_calls,
            hints: self.s.hints,
            sampling: sampling.clone(),
        };
        Ok((params, tools, system))
    }

    fn agent<'a>(p: &'a ExploreParams<'_>) -> (&'a ModelSpec, &'a crate::models::TurnSampling) {
        (&p.agent, &p.sampling)
    }

    fn play(
        &self,
        ctx: &mut StageCtx<'_>,
        agent: &dyn MultiTurn,
        p: &ExploreParams<'_>,
        (system, tools): (&str, &[Value]),
    ) -> Result<(), StageError> {
        let (model, round, split, seed) = (&p.agent.to_string(), p.round, p.split, p.seed);
        let embedding = ctx.progress(0);
        let (sub, index) =
            self.corpus
                .searcher(EXPLORE_STAGE, p.retriever, p.embedder, &|done, total| {
                    // First use of the dense retriever: the corpus is embedded (minutes).
                    embedding.set_length(total);
                    embedding.set_position(done);
                    embedding.set_message("embedding documents");
                })?;
        embedding.finish_and_clear();
        let env = SearchEnv::new(
            &sub.corpus,
            index,
            tool_set(
                &domains(&self.s.source),
                p.tool_set,
                if p.gold_names {
                    Opacity::Gold
                } else {
                    Opacity::Opaque
                },
                p.shape,
                p.hints,
            ),
        );
        let qs = self.questions.get(split)?;
        let view = EditorView {
            show_queries: p.show_queries,
            ..EditorView::default()
        };
        let pb = ctx.progress(qs.len() as u64);
        let infra: Mutex<Vec<CallFailure>> = Mutex::new(Vec::new());
        let accounting: Mutex<Usage> = Mutex::new(Usage::default());
        let results = crate::env::parallel_map(
            qs,
            self.s.concurrency,
            &|| pb.inc(1),
            &|q: &QuestionRow| -> EpisodeRow {
                let mut calls = 0usize;
                let mut run_tool = |c: &CallRecord| -> String {
                    calls += 1;
                    tool_reply(&env, c)
                };
                let ep = run_episode(
                    agent,
                    system,
                    &q.question,
                    tools,
                    crate::models::EpisodeRules {
                        max_turns: p.max_turns,
                        first_call_required: p.first_call_required,
                        one_call_per_turn: !p.parallel_tool_calls,
                    },
                    seed,
                    &mut run_tool,
                );
                if let Some(e) = ep.error.as_ref().filter(|e| e.infrastructure) {
                    if let Ok(mut v) = infra.lock() {
                        v.push(e.clone());
                    }
                }
                if let Ok(mut a) = accounting.lock() {
                    a.add(&ep.accounting);
                }
                let (mut row, g) = graded_row(q, split, round, model, &ep, calls);
                row.editor_text = editor_text(&row, q, Some(g.exact), &view);
                row
            },
        );
        pb.finish_and_clear();
        if let Some(e) =
            infrastructure_error(EXPLORE_STAGE, &infra.into_inner().unwrap_or_default())
        {
            return Err(e);
        }
        let rows = results
            .into_iter()
            .map(|r| r.ok_or_else(|| StageError::bug(EXPLORE_STAGE, "a worker thread panicked")))
            .collect::<Result<Vec<_>, _>>()?;
        ctx.add_usage(&accounting.into_inner().unwrap_or_default());
        ctx.write(&rows)?;
        Ok(())
    }
}
