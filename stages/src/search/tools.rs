//! The search tool sets (domain tools, `search_all`; gold or opaque docs) and the
//! baselines' tool play.

use super::config::{DataSource, ResultShape};
use super::corpus::Searcher;
use crate::env::{ToolOutput, ToolRunner};
use datasets::search::{DomainSet, Opacity, SearchEnv, ToolSet, ToolSetConfig};
use serde_json::Value;

/// The domains a source's tools filter by.
pub(super) fn domains(source: &DataSource) -> DomainSet {
    match source {
        DataSource::Substitute => DomainSet::substitute(),
        DataSource::BrowseCompPlus(_) => DomainSet::browsecomp(),
    }
}

pub(super) fn tool_set(
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

/// How many tools the set `name` (`domains`, `domains+all`) shows the agent (the
/// bill's per-tool counts and prompt sizes).
pub(crate) fn tool_count(s: &super::config::SearchExperiment, name: &str) -> usize {
    tool_set(&domains(&s.source), name, Opacity::Opaque, s.shape, s.hints)
        .tools_json()
        .len()
}

/// What a search that finds nothing returns.
pub(super) fn empty_result(hints: bool) -> &'static str {
    if hints {
        datasets::search::tools::NO_RESULTS_HINTED
    } else {
        datasets::search::tools::NO_RESULTS
    }
}

/// Tools as the docs store them (`{name, description, parameters}`).
pub(super) fn doc_tools(ts: &ToolSet) -> Vec<Value> {
    ts.tools_json()
        .into_iter()
        .map(|t| t.get("function").cloned().unwrap_or(t))
        .collect()
}

/// Tool play for the baselines: a search with the tool's domain filter, its results
/// as the agent would see them.
pub(super) struct SearchRunner<'a>(pub(super) SearchEnv<'a, Searcher>);

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
