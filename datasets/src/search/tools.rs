//! The search tools: one per domain (the named nine, then `other`), optionally preceded
//! by the unfiltered `search_all`, as in the reference configs (`tool_configs/`: 10 tools
//! in `*_no-doc.json`, 11 with `search_all` first in `*_no-doc_search-all.json`).
//!
//! A call retrieves the top [`ToolSetConfig::candidates`] (2048) documents for the query
//! over the whole corpus, keeps those of the tool's domain (all of them for `search_all`),
//! and returns the top [`ToolSetConfig::k`] (5) as a JSON array of
//! `{docid, score, snippet}`, each snippet cut to [`ToolSetConfig::snippet_tokens`]
//! whitespace tokens (512). When nothing is left the output is [`NO_RESULTS`].
//!
//! Opaque tools are named `tool_1`, `tool_2`, ... in that order and share one description;
//! gold tools carry the domain set's names and descriptions. Tools differ only by their
//! domain filter (query syntax is the same for all).

use serde_json::{json, Value};

use super::corpus::{Corpus, DomainSet, DomainSpec};
use super::SearchError;

/// What a tool returns when no document of its domain matches: it says so and
/// suggests rephrasing or another tool, and says nothing about why (the tools' hidden
/// difference is for the agent to find out).
pub const NO_RESULTS: &str =
    "No results for this query. Try rephrasing it or using a different search tool.";

/// The empty result with the hidden structure hinted at (`[search] hints = true` only).
pub const NO_RESULTS_HINTED: &str =
    "No results: no document in this tool's collection matches the query.";

/// The one description every opaque tool shares.
pub const OPAQUE_DESCRIPTION: &str =
    "Looks up the given query and returns the best-matching results.";

/// The opaque description of the `query` parameter.
pub const OPAQUE_QUERY: &str = "Free-text description of what to look for.";

/// One retrieved document: its ordinal in the corpus and its score.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Hit {
    /// Ordinal of the document in its [`Corpus`].
    pub ord: usize,
    /// Retrieval score (higher is better).
    pub score: f32,
}

/// A ranked retriever over a corpus (BM25 or dense).
pub trait Retriever {
    /// The best `limit` documents for `query`, best first; ties broken by ordinal.
    fn retrieve(&self, query: &str, limit: usize) -> Result<Vec<Hit>, SearchError>;
}

/// Sorts hits best first, ties by ordinal, and keeps `limit`: the best `limit` are
/// selected first, so only they are sorted (the order is total, ordinals being
/// distinct, so the result is what sorting all would give).
pub(crate) fn rank(mut hits: Vec<Hit>, limit: usize) -> Vec<Hit> {
    let order = |a: &Hit, b: &Hit| b.score.total_cmp(&a.score).then(a.ord.cmp(&b.ord));
    if limit == 0 {
        return Vec::new();
    }
    if hits.len() > limit {
        hits.select_nth_unstable_by(limit - 1, order);
        hits.truncate(limit);
    }
    hits.sort_by(order);
    hits
}

/// Opaque (generic names, one shared description) or gold (transparent) documentation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opacity {
    /// `tool_1`..`tool_N`, identical descriptions.
    Opaque,
    /// The domain set's names and descriptions.
    Gold,
}

/// How a tool set is built and how its tools answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSetConfig {
    /// Documentation setting.
    pub opacity: Opacity,
    /// Whether `search_all` is offered (first, as in the reference configs).
    pub search_all: bool,
    /// Results per call.
    pub k: usize,
    /// Candidates retrieved before the domain filter.
    pub candidates: usize,
    /// Snippet length in whitespace tokens.
    pub snippet_tokens: usize,
    /// Each result carries its document's URL (BrowseComp-Plus, as the reference
    /// searcher shows them by default).
    pub show_urls: bool,
    /// The empty result hints at what a tool covers ([`NO_RESULTS_HINTED`]).
    pub hints: bool,
}

impl Default for ToolSetConfig {
    fn default() -> Self {
        ToolSetConfig {
            opacity: Opacity::Opaque,
            search_all: false,
            k: 5,
            candidates: 2048,
            snippet_tokens: 512,
            show_urls: false,
            hints: false,
        }
    }
}

/// One tool of a set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSpec {
    /// The name the agent sees.
    pub name: String,
    /// The reference `tool_id` (`search_<domain>`, `search_all`).
    pub tool_id: String,
    /// The domain filter; `None` for `search_all`.
    pub domain: Option<String>,
    /// The description the agent sees.
    pub description: String,
    /// The description of the `query` parameter.
    pub query_description: String,
}

/// A tool set: the tools, in order, and how they answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolSet {
    /// The tools in the order they are offered.
    pub tools: Vec<ToolSpec>,
    /// The configuration it was built with.
    pub config: ToolSetConfig,
}

impl ToolSet {
    /// Builds the tool set for `domains` under `config`.
    pub fn new(domains: &DomainSet, config: ToolSetConfig) -> Self {
        let all = config.search_all.then_some(&domains.all);
        let tools = all
            .into_iter()
            .map(|d| (d, None))
            .chain(domains.filtered().map(|d| (d, Some(d.id.clone()))))
            .enumerate()
            .map(|(i, (d, domain)): (usize, (&DomainSpec, Option<String>))| {
                let (name, description, query_description) = match config.opacity {
                    Opacity::Opaque => (
                        format!("tool_{}", i + 1),
                        OPAQUE_DESCRIPTION.to_string(),
                        OPAQUE_QUERY.to_string(),
                    ),
                    Opacity::Gold => (
                        d.gold_name.clone(),
                        d.gold_description.replace("{k}", &config.k.to_string()),
                        d.gold_query.clone(),
                    ),
                };
                ToolSpec {
                    name,
                    tool_id: d.tool_id.clone(),
                    domain,
                    description,
                    query_description,
                }
            })
            .collect();
        ToolSet { tools, config }
    }

    /// The tool the agent calls `name`.
    pub fn get(&self, name: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// The tool with reference id `tool_id` (e.g. `search_news`).
    pub fn by_tool_id(&self, tool_id: &str) -> Option<&ToolSpec> {
        self.tools.iter().find(|t| t.tool_id == tool_id)
    }

    /// The tools as OpenAI-style function definitions.
    pub fn tools_json(&self) -> Vec<Value> {
        self.tools
            .iter()
            .map(|t| {
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": {
                            "type": "object",
                            "properties": {
                                "query": {"type": "string", "description": t.query_description}
                            },
                            "required": ["query"],
                            "additionalProperties": false
                        }
                    }
                })
            })
            .collect()
    }
}

/// One returned result.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ResultItem {
    /// The document's id.
    pub docid: String,
    /// Retrieval score, rounded to 4 decimals.
    pub score: f64,
    /// The document's contents cut to the snippet budget.
    pub snippet: String,
    /// The document's URL, when the tool set shows them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
}

/// The first `n` whitespace-separated tokens of `s`, with the original spacing between
/// them, and whether anything was cut.
pub fn truncate_tokens(s: &str, n: usize) -> (&str, bool) {
    let mut count = 0;
    let mut in_token = false;
    for (i, c) in s.char_indices() {
        if c.is_whitespace() {
            if in_token && count == n {
                let cut = !s[i..].trim().is_empty();
                return (&s[..i], cut);
            }
            in_token = false;
        } else if !in_token {
            if count == n {
                return (s[..i].trim_end(), true);
            }
            in_token = true;
            count += 1;
        }
    }
    (s.trim_end(), false)
}

/// A corpus, a retriever over it and a tool set: executes tool calls.
pub struct SearchEnv<'a, R: Retriever + ?Sized> {
    corpus: &'a Corpus,
    retriever: &'a R,
    tools: ToolSet,
}

impl<'a, R: Retriever + ?Sized> SearchEnv<'a, R> {
    /// Binds a tool set to a corpus and its retriever.
    pub fn new(corpus: &'a Corpus, retriever: &'a R, tools: ToolSet) -> Self {
        SearchEnv {
            corpus,
            retriever,
            tools,
        }
    }

    /// The tool set.
    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }

    /// The corpus.
    pub fn corpus(&self) -> &Corpus {
        self.corpus
    }

    /// Runs `domain`-filtered retrieval (`None`: unfiltered) and returns the top `k` hits.
    pub fn search_domain(
        &self,
        domain: Option<&str>,
        query: &str,
    ) -> Result<Vec<Hit>, SearchError> {
        let hits = self
            .retriever
            .retrieve(query, self.tools.config.candidates)?;
        Ok(self.top_in_domain(&hits, domain))
    }

    /// The top `k` of `candidates` (best first) in `domain` (`None`: any).
    pub fn top_in_domain(&self, candidates: &[Hit], domain: Option<&str>) -> Vec<Hit> {
        candidates
            .iter()
            .filter(|h| {
                domain.is_none_or(|d| self.corpus.get(h.ord).is_some_and(|doc| doc.in_domain(d)))
            })
            .take(self.tools.config.k)
            .copied()
            .collect()
    }

    /// The retriever.
    pub fn retriever(&self) -> &R {
        self.retriever
    }

    /// The results of tool `name` for `query`.
    pub fn search(&self, name: &str, query: &str) -> Result<Vec<ResultItem>, SearchError> {
        let tool = self.tool(name)?;
        let hits = self.search_domain(tool.domain.as_deref(), query)?;
        Ok(hits
            .into_iter()
            .filter_map(|h| {
                let doc = self.corpus.get(h.ord)?;
                let contents = doc.contents();
                let (snippet, _) = truncate_tokens(&contents, self.tools.config.snippet_tokens);
                Some(ResultItem {
                    docid: doc.docid.clone(),
                    score: (f64::from(h.score) * 1e4).round() / 1e4,
                    snippet: snippet.to_string(),
                    url: self.tools.config.show_urls.then(|| doc.url.clone()),
                })
            })
            .collect())
    }

    fn tool(&self, name: &str) -> Result<&ToolSpec, SearchError> {
        self.tools
            .get(name)
            .ok_or_else(|| SearchError::UnknownTool {
                name: name.to_string(),
                available: self
                    .tools
                    .tools
                    .iter()
                    .map(|t| t.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// Executes a call: `args` must be `{"query": <string>}`. Returns the tool's output
    /// text (a JSON array of results, or [`NO_RESULTS`]); unknown tools and bad
    /// arguments are errors whose text can be shown to the agent.
    pub fn execute(&self, name: &str, args: &Value) -> Result<String, SearchError> {
        let tool = self.tool(name)?;
        let bad = |message: String| SearchError::BadArguments {
            tool: tool.name.clone(),
            message,
        };
        let Value::Object(map) = args else {
            return Err(bad(format!("arguments must be an object, got {args}")));
        };
        if let Some(extra) = map.keys().find(|k| *k != "query") {
            return Err(bad(format!(
                "unexpected argument {extra:?}; the only parameter is \"query\""
            )));
        }
        let query = match map.get("query") {
            Some(Value::String(q)) => q,
            Some(other) => return Err(bad(format!("\"query\" must be a string, got {other}"))),
            None => return Err(bad("missing required argument \"query\"".into())),
        };
        let results = self.search(name, query)?;
        if results.is_empty() {
            let text = if self.tools.config.hints {
                NO_RESULTS_HINTED
            } else {
                NO_RESULTS
            };
            return Ok(text.to_string());
        }
        serde_json::to_string_pretty(&results).map_err(|e| SearchError::Invalid(e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::corpus::{test_docs, Source};

    /// Scores documents by how many query words their text contains.
    struct WordCount<'a>(&'a Corpus);

    impl Retriever for WordCount<'_> {
        fn retrieve(&self, query: &str, limit: usize) -> Result<Vec<Hit>, SearchError> {
            let words: Vec<String> = query.split_whitespace().map(str::to_lowercase).collect();
            let hits = self
                .0
                .docs()
                .iter()
                .enumerate()
                .filter_map(|(ord, d)| {
                    let t = d.text.to_lowercase();
                    let n = words.iter().filter(|w| t.contains(w.as_str())).count();
                    (n > 0).then_some(Hit {
                        ord,
                        score: n as f32,
                    })
                })
                .collect();
            Ok(rank(hits, limit))
        }
    }

    fn corpus() -> Corpus {
        let mut docs = test_docs(&[
            ("people", "river bank painter"),
            ("geography", "river delta"),
            ("geography", "river"),
            ("other", "painter of rivers and lakes and seas"),
        ]);
        for (i, d) in docs.iter_mut().enumerate() {
            d.title = format!("T{i}");
        }
        Corpus::new(Source::Substitute, docs).unwrap()
    }

    #[test]
    fn tool_sets_follow_the_reference_shapes() {
        let set = DomainSet::browsecomp();
        let opaque = ToolSet::new(&set, ToolSetConfig::default());
        assert_eq!(opaque.tools.len(), 10);
        assert_eq!(opaque.tools[0].name, "tool_1");
        assert_eq!(opaque.tools[0].tool_id, "search_wikipedia");
        assert_eq!(opaque.tools[9].tool_id, "search_other");
        assert!(opaque
            .tools
            .iter()
            .all(|t| t.description == OPAQUE_DESCRIPTION));
        let gold = ToolSet::new(
            &set,
            ToolSetConfig {
                opacity: Opacity::Gold,
                search_all: true,
                ..ToolSetConfig::default()
            },
        );
        assert_eq!(gold.tools.len(), 11);
        assert_eq!(gold.tools[0].name, "search_all_sources");
        assert_eq!(gold.tools[0].domain, None);
        assert_eq!(gold.tools[2].name, "search_academic_sources");
        assert!(gold.tools[1].description.contains("top 5"));
        let j = gold.tools_json();
        assert_eq!(j[3]["function"]["name"], "search_news_sources");
        assert_eq!(j[3]["function"]["parameters"]["required"], json!(["query"]));
    }

    #[test]
    fn execute_filters_by_domain_and_reports_empty_results() {
        let c = corpus();
        let r = WordCount(&c);
        let cfg = ToolSetConfig {
            opacity: Opacity::Gold,
            search_all: true,
            k: 2,
            snippet_tokens: 3,
            ..ToolSetConfig::default()
        };
        let env = SearchEnv::new(&c, &r, ToolSet::new(&DomainSet::substitute(), cfg));
        let out: Value = serde_json::from_str(
            &env.execute("search_geography", &json!({"query": "river delta"}))
                .unwrap(),
        )
        .unwrap();
        assert_eq!(out[0]["docid"], "d1");
        assert_eq!(out[0]["score"], 2.0);
        assert_eq!(out[1]["docid"], "d2");
        assert_eq!(out[0]["snippet"], "T1\nriver delta");
        let all = env.search("search_all", "painter river").unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].docid, "d0");
        assert_eq!(all[0].snippet, "T0\nriver bank");
        assert_eq!(
            env.execute("search_people", &json!({"query": "delta"}))
                .unwrap(),
            NO_RESULTS
        );
        assert_eq!(
            env.execute("search_people", &json!({"query": "  "}))
                .unwrap(),
            NO_RESULTS
        );
    }

    #[test]
    fn bad_calls_are_errors() {
        let c = corpus();
        let r = WordCount(&c);
        let env = SearchEnv::new(
            &c,
            &r,
            ToolSet::new(&DomainSet::substitute(), ToolSetConfig::default()),
        );
        let e = env.execute("tool_99", &json!({"query": "x"})).unwrap_err();
        assert!(e.to_string().contains("tool_1, tool_2"), "{e}");
        let e = env.execute("tool_1", &json!({"q": "x"})).unwrap_err();
        assert!(e.to_string().contains("unexpected argument \"q\""), "{e}");
        let e = env.execute("tool_1", &json!({})).unwrap_err();
        assert!(e.to_string().contains("missing"), "{e}");
        let e = env.execute("tool_1", &json!({"query": 3})).unwrap_err();
        assert!(e.to_string().contains("must be a string"), "{e}");
        let e = env.execute("tool_1", &json!("x")).unwrap_err();
        assert!(e.to_string().contains("must be an object"), "{e}");
    }

    #[test]
    fn truncation_keeps_spacing_and_counts_tokens() {
        assert_eq!(truncate_tokens("a  b\nc d", 3), ("a  b\nc", true));
        assert_eq!(truncate_tokens("a b ", 2), ("a b", false));
        assert_eq!(truncate_tokens("  a b", 5), ("  a b", false));
        assert_eq!(truncate_tokens("a b", 0), ("", true));
        assert_eq!(truncate_tokens("", 0), ("", false));
        assert_eq!(truncate_tokens("héé wörld x", 2), ("héé wörld", true));
    }
}
