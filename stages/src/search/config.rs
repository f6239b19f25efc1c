//! The `[search]` table of an experiment file: parsed and validated
//! ([`SearchExperiment`]), the prompt sets it picks, and the input checks run before
//! anything is written.

use crate::models::ModelSpec;
use crate::InputError;
use datasets::search::real::{CategoryMatch, OtherRule};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
    /// The methods to run (default: all of [`METHODS`]).
    pub methods: Vec<crate::env::Method>,
    /// At most this many questions per split (`None`: all of the split; the default
    /// with BrowseComp-Plus id files, which are the paper's 83 / 747).
    pub train_questions: Option<usize>,
    /// At most this many test questions (`None`: all of the split).
    pub test_questions: Option<usize>,
    /// Tool turns of an episode before the forced final answer.
    pub max_turns: usize,
    /// ToolObserver reflection rounds K.
    pub rounds: u32,
    /// Episodes per batch-reflect mini-batch.
    pub batch_size: usize,
    /// The run's seed.
    pub seed: u64,
    /// Episodes run at the same time.
    pub concurrency: usize,
    /// The editor is shown each call's query (off in the reference implementation).
    pub show_queries: bool,
    /// `bm25` (the BM25 index of `datasets::search::bm25`) or `dense` (sentence embeddings, cosine).
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
    /// Results per search.
    pub results: usize,
    /// Words kept of each result's snippet.
    pub snippet_tokens: usize,
    /// Each result carries its document's URL (in keys only when on).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub show_urls: bool,
}

/// The search environment's data: the substitute corpus (default) or BrowseComp-Plus
/// files a user downloaded elsewhere.
#[derive(Debug, Clone, PartialEq)]
pub enum DataSource {
    /// The substitute corpus (topic-tagged Wikipedia summaries, generated questions).
    Substitute,
    /// BrowseComp-Plus, from the user's downloaded files.
    BrowseCompPlus(RealFiles),
}

/// BrowseComp-Plus as downloaded: the corpus JSONL (`{docid, text, url}`), the queries
/// JSONL (`query` and `answer` encrypted with the dataset's canary string), the URL
/// category map, and optionally the train / test query-id splits (`query_id<TAB>text`).
#[derive(Debug, Clone, PartialEq)]
pub struct RealFiles {
    /// The corpus JSONL (`{docid, text, url}`).
    pub corpus: PathBuf,
    /// The queries JSONL.
    pub queries: PathBuf,
    /// The URL category map.
    pub categories: PathBuf,
    /// `None`: the query fields are plain text.
    pub canary: Option<String>,
    /// The train query-id split (`query_id<TAB>text`), if given.
    pub train_ids: Option<PathBuf>,
    /// The test query-id split (`query_id<TAB>text`), if given.
    pub test_ids: Option<PathBuf>,
    /// How URLs are matched against the category map (default: substring, as the
    /// reference searcher).
    pub category_match: CategoryMatch,
    /// What `other` holds (default: pages of no category of the map, as the reference).
    pub other: OtherRule,
}

/// The tool sets search can run.
pub const TOOL_SETS: &[&str] = &["domains", "domains+all"];
/// The methods search can run, in table order.
pub const METHODS: &[&str] = &["gold", "base", "toolobserver", "play2prompt", "easytool"];
/// Methods beyond the paper's table, run only when named (`tracefree`: Trace-Free+).
pub const EXTRA_METHODS: &[&str] = &["tracefree"];

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
            .chain(EXTRA_METHODS)
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
            first_call_required: crate::models::EpisodeRules::first_call(
                raw.first_call.as_deref(),
                "search",
            )?,
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
                .map(|j| crate::models::parse_for(j, crate::models::Role::Editor))
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

/// A user's file that did not load: bad input naming the file.
pub(super) fn bad_file(
    p: &std::path::Path,
) -> impl Fn(datasets::search::SearchError) -> InputError + '_ {
    move |e| InputError(format!("search {}: {e}", p.display()))
}

#[cfg(test)]
mod tests {
    use super::super::tools::empty_result;
    use super::*;
    use serde_json::json;

    fn exp(toml: &str) -> Result<SearchExperiment, String> {
        let raw: RawSearch = toml::from_str(toml).map_err(|e| e.to_string())?;
        SearchExperiment::from_raw(raw, &|p| PathBuf::from(p))
    }

    use crate::env::hidden_structure_words as forbidden;
    use crate::env::{partition_leaks, Reader};

    #[test]
    fn both_prompt_sets_are_neutral_and_hints_are_a_labelled_switch() {
        let mut s = exp("").unwrap();
        assert!(s.switches().is_empty(), "{:?}", s.switches());
        for paper in [false, true] {
            s.paper_prompts = paper;
            for (text, reader) in [
                (s.agent_system(), Reader::Agent),
                (s.editor_notes(), Reader::Editor),
            ] {
                assert_eq!(
                    partition_leaks(&text, reader),
                    Vec::<String>::new(),
                    "{text}"
                );
            }
            // The paper's cues: different types of results, the type of question,
            // query-type suitability.
            assert!(s.agent_system().contains("different types of results"));
            assert!(s.agent_system().contains("type of question"));
            assert!(s.editor_notes().contains("types of query"));
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
        assert!(!partition_leaks(&h.editor_notes(), Reader::Editor).is_empty());
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
