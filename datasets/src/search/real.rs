//! BrowseComp-Plus as a user downloads it elsewhere (the real corpus, queries and answers
//! cannot be fetched on the project's machines).
//!
//! - Corpus: JSONL, one `{docid, text, url}` object a line (docid a string or integer).
//!   Each document's domain comes from its URL host through a category map in the format
//!   of the reference `simple_categories.json` (`{category: [host, ...]}`): the category
//!   when it is one of the nine named domains, else `other` (unlisted hosts included).
//! - Queries: JSONL, one object a line with `query_id`, `query`, `answer` and, when
//!   present, evidence documents (`evidence_docs` or `gold_docs`: docids or objects with a
//!   `docid`). With a canary string, `query` and `answer` are base64 of the text XORed with
//!   a key stream: the 32-byte sha256 digest of the canary, repeated to the text's length
//!   (the scheme BrowseComp publishes). The canary is user configuration; a wrong one
//!   gives bytes that are not UTF-8 or mostly unprintable, which is reported as
//!   [`SearchError::WrongKey`].
//! - Splits: the reference `*_queries.tsv` files (`query_id<TAB>question`).

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::Path;

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::corpus::{Corpus, Document, DomainSet, Source};
use super::questions::Question;
use super::{io_err, SearchError};

/// Why a field did not decrypt to text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecryptError {
    /// The field is not base64.
    #[error("not base64: {0}")]
    Base64(String),
    /// The decrypted bytes are not UTF-8.
    #[error("decrypted bytes are not UTF-8")]
    NotUtf8,
    /// The decrypted text is mostly control characters.
    #[error("decrypted text is {0}% control characters")]
    Unprintable(usize),
}

/// XORs `data` with the key stream of `canary` (sha256 digest repeated).
pub fn xor_with_canary(data: &[u8], canary: &str) -> Vec<u8> {
    let key = Sha256::digest(canary.as_bytes());
    data.iter()
        .zip(key.iter().cycle())
        .map(|(b, k)| b ^ k)
        .collect()
}

/// Encrypts `text` the way the dataset's fields are encrypted (for fixtures and tests).
pub fn encrypt(text: &str, canary: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(xor_with_canary(text.as_bytes(), canary))
}

/// Decrypts one field and checks that the result is text.
pub fn decrypt(field: &str, canary: &str) -> Result<String, DecryptError> {
    let raw = base64::engine::general_purpose::STANDARD
        .decode(field.trim())
        .map_err(|e| DecryptError::Base64(e.to_string()))?;
    let text =
        String::from_utf8(xor_with_canary(&raw, canary)).map_err(|_| DecryptError::NotUtf8)?;
    let total = text.chars().count();
    let control = text
        .chars()
        .filter(|c| c.is_control() && !matches!(c, '\n' | '\r' | '\t'))
        .count();
    // Real text has essentially no control characters; XOR garbage that happens to be
    // UTF-8 is mostly ASCII and a quarter of ASCII is control characters.
    if total > 0 && control * 10 > total {
        return Err(DecryptError::Unprintable(control * 100 / total));
    }
    Ok(text)
}

/// A category map: host -> category, from a `simple_categories.json`-style file.
#[derive(Debug, Clone, Default)]
pub struct CategoryMap {
    by_host: HashMap<String, String>,
}

impl CategoryMap {
    /// Reads a `{category: [host, ...]}` JSON file.
    pub fn load(path: &Path) -> Result<Self, SearchError> {
        let bytes = fs::read(path).map_err(io_err(path))?;
        Self::parse(&bytes, &path.display().to_string())
    }

    /// Parses the map; `file` names it in errors. A host listed under two categories is
    /// an error.
    pub fn parse(bytes: &[u8], file: &str) -> Result<Self, SearchError> {
        let malformed = |line: usize, message: String| SearchError::Malformed {
            file: file.to_string(),
            line,
            message,
        };
        let v: Value = serde_json::from_slice(bytes)
            .map_err(|e| malformed(e.line(), format!("not JSON: {e}")))?;
        let Value::Object(cats) = v else {
            return Err(malformed(
                0,
                "expected an object {category: [host, ...]}".into(),
            ));
        };
        let mut by_host = HashMap::new();
        for (cat, hosts) in cats {
            let Value::Array(hosts) = hosts else {
                return Err(malformed(
                    0,
                    format!("category {cat:?}: expected a list of hosts"),
                ));
            };
            for h in hosts {
                let Value::String(h) = h else {
                    return Err(malformed(
                        0,
                        format!("category {cat:?}: host {h} is not a string"),
                    ));
                };
                let host = h.trim().to_ascii_lowercase();
                if let Some(prev) = by_host.insert(host.clone(), cat.clone()) {
                    if prev != cat {
                        return Err(malformed(
                            0,
                            format!("host {host:?} is listed under both {prev:?} and {cat:?}"),
                        ));
                    }
                }
            }
        }
        Ok(CategoryMap { by_host })
    }

    /// The category of a URL: its host looked up as is, then without a leading `www.`.
    pub fn category(&self, url: &str) -> Option<&str> {
        let host = url_host(url)?;
        self.by_host
            .get(&host)
            .or_else(|| host.strip_prefix("www.").and_then(|h| self.by_host.get(h)))
            .map(String::as_str)
    }
}

/// The lowercased host of a URL (no scheme, user info or port); `None` when empty.
pub fn url_host(url: &str) -> Option<String> {
    let rest = url.trim();
    let rest = rest.split_once("://").map_or(rest, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = match host.rsplit_once(':') {
        Some((h, port)) if port.chars().all(|c| c.is_ascii_digit()) => h,
        _ => host,
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty()).then_some(host)
}

fn id_string(v: Option<&Value>) -> Option<String> {
    match v? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

/// One JSONL object with where it came from.
struct Row {
    file: String,
    line: usize,
    map: serde_json::Map<String, Value>,
}

impl Row {
    fn malformed(&self, message: impl Into<String>) -> SearchError {
        SearchError::Malformed {
            file: self.file.clone(),
            line: self.line,
            message: message.into(),
        }
    }

    fn get(&self, key: &str) -> Option<&Value> {
        self.map.get(key)
    }

    /// A required identifier field (a non-empty string or an integer).
    fn id(&self, key: &str) -> Result<String, SearchError> {
        id_string(self.get(key))
            .ok_or_else(|| self.malformed(format!("missing {key:?} (a string or integer)")))
    }

    /// A required string field.
    fn string(&self, key: &str) -> Result<&str, SearchError> {
        match self.get(key) {
            Some(Value::String(s)) => Ok(s),
            _ => Err(self.malformed(format!("missing {key:?} (a string)"))),
        }
    }
}

/// Reads the non-empty lines of a JSONL file as objects, reporting file and line on any
/// error.
fn jsonl_rows(path: &Path) -> Result<Vec<Row>, SearchError> {
    let text = fs::read_to_string(path).map_err(io_err(path))?;
    let file = path.display().to_string();
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut row = Row {
            file: file.clone(),
            line: i + 1,
            map: serde_json::Map::new(),
        };
        match serde_json::from_str::<Value>(line) {
            Ok(Value::Object(m)) => row.map = m,
            Ok(_) => return Err(row.malformed("expected a JSON object")),
            Err(e) => return Err(row.malformed(format!("not JSON: {e}"))),
        }
        out.push(row);
    }
    Ok(out)
}

/// Loads a BrowseComp-Plus corpus JSONL, assigning domains with `categories` and `domains`.
pub fn load_corpus(
    path: &Path,
    categories: &CategoryMap,
    domains: &DomainSet,
) -> Result<Corpus, SearchError> {
    let mut docs = Vec::new();
    let mut seen = HashSet::new();
    for row in jsonl_rows(path)? {
        let docid = row.id("docid")?;
        if !seen.insert(docid.clone()) {
            return Err(row.malformed(format!("docid {docid:?} occurs more than once")));
        }
        let text = row.string("text")?.to_string();
        let url = match row.get("url") {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            Some(_) => return Err(row.malformed("\"url\" should be a string")),
        };
        let domain = domains
            .domain_of(categories.category(&url).unwrap_or(""))
            .to_string();
        docs.push(Document {
            docid,
            title: String::new(),
            text,
            url,
            topic: None,
            domain,
        });
    }
    Corpus::new(Source::BrowseCompPlus, docs)
}

/// Loads BrowseComp-Plus queries. With `canary`, `query` and `answer` are decrypted (a
/// wrong canary is [`SearchError::WrongKey`]); without, they are read as plain text.
/// `corpus`, when given, supplies each question's domain (its first evidence document's)
/// and checks that evidence docids exist.
pub fn load_queries(
    path: &Path,
    canary: Option<&str>,
    corpus: Option<&Corpus>,
) -> Result<Vec<Question>, SearchError> {
    let mut out = Vec::new();
    for row in jsonl_rows(path)? {
        let id = row.id("query_id")?;
        let field = |name: &str| -> Result<String, SearchError> {
            let raw = row.string(name)?;
            match canary {
                None => Ok(raw.to_string()),
                Some(c) => decrypt(raw, c).map_err(|e| SearchError::WrongKey {
                    file: row.file.clone(),
                    line: row.line,
                    field: name.to_string(),
                    detail: e.to_string(),
                }),
            }
        };
        let text = field("query")?;
        let answer = field("answer")?;
        let mut evidence = Vec::new();
        for key in ["evidence_docs", "gold_docs"] {
            match row.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::Array(items)) => {
                    for it in items {
                        let id = id_string(Some(it)).or_else(|| id_string(it.get("docid")));
                        let id = id.ok_or_else(|| {
                            row.malformed(format!("{key:?}: item {it} is not a docid"))
                        })?;
                        if !evidence.contains(&id) {
                            evidence.push(id);
                        }
                    }
                }
                Some(_) => return Err(row.malformed(format!("{key:?} should be a list"))),
            }
        }
        let mut domain = String::new();
        if let Some(c) = corpus {
            if let Some(missing) = evidence.iter().find(|d| c.ordinal(d).is_none()) {
                return Err(
                    row.malformed(format!("evidence docid {missing:?} is not in the corpus"))
                );
            }
            domain = evidence
                .first()
                .and_then(|d| c.by_docid(d))
                .map(|d| d.domain.clone())
                .unwrap_or_default();
        }
        out.push(Question {
            id,
            source: Source::BrowseCompPlus.label().to_string(),
            text,
            answer,
            aliases: Vec::new(),
            evidence_docids: evidence,
            hops: 0,
            domain,
        });
    }
    Ok(out)
}

/// Reads a split file (`query_id<TAB>question` per line) and returns the ids in order.
pub fn load_split_ids(path: &Path) -> Result<Vec<String>, SearchError> {
    let text = fs::read_to_string(path).map_err(io_err(path))?;
    let mut ids = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let id = line.split('\t').next().unwrap_or("").trim();
        if id.is_empty() || !line.contains('\t') {
            return Err(SearchError::Malformed {
                file: path.display().to_string(),
                line: i + 1,
                message: "expected query_id<TAB>question".into(),
            });
        }
        ids.push(id.to_string());
    }
    Ok(ids)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn xor_round_trip_and_python_vector() {
        // Python 3.11: base64.b64encode(bytes(a ^ b for a, b in zip("Who wrote it?".encode(),
        //   hashlib.sha256(b"canary-x").digest()))).decode() == "+Qq3vh32zLgbz2JCfA=="
        assert_eq!(encrypt("Who wrote it?", "canary-x"), "+Qq3vh32zLgbz2JCfA==");
        assert_eq!(
            decrypt("+Qq3vh32zLgbz2JCfA==", "canary-x").unwrap(),
            "Who wrote it?"
        );
        let long = "x".repeat(100);
        assert_eq!(decrypt(&encrypt(&long, "k"), "k").unwrap(), long);
    }

    #[test]
    fn wrong_key_is_detected() {
        let enc = encrypt(
            "In which year did the author of this novel first publish a poem?",
            "right",
        );
        let err = decrypt(&enc, "wrong").unwrap_err();
        assert!(
            matches!(err, DecryptError::NotUtf8 | DecryptError::Unprintable(_)),
            "{err:?}"
        );
        assert!(matches!(decrypt("%%%", "k"), Err(DecryptError::Base64(_))));
    }

    #[test]
    fn hosts_and_categories() {
        assert_eq!(
            url_host("https://User@En.Wikipedia.org:443/wiki/X?y#z").as_deref(),
            Some("en.wikipedia.org")
        );
        assert_eq!(
            url_host("www.nytimes.com/a").as_deref(),
            Some("www.nytimes.com")
        );
        assert_eq!(url_host(""), None);
        let m = CategoryMap::parse(
            br#"{"news": ["www.nytimes.com", "apnews.com"], "health": ["www.mayoclinic.org"]}"#,
            "c.json",
        )
        .unwrap();
        assert_eq!(m.category("https://www.nytimes.com/x"), Some("news"));
        assert_eq!(m.category("https://www.apnews.com/x"), Some("news"));
        assert_eq!(m.category("https://example.org/"), None);
        let set = DomainSet::browsecomp();
        assert_eq!(
            set.domain_of(m.category("https://www.mayoclinic.org/").unwrap()),
            "other"
        );
        let e = CategoryMap::parse(br#"{"a": ["h"], "b": ["h"]}"#, "c.json").unwrap_err();
        assert!(e.to_string().contains("both"), "{e}");
    }
}
