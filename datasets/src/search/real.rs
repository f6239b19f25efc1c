//! BrowseComp-Plus as a user downloads it elsewhere (the real corpus, queries and answers
//! cannot be fetched on the project's machines).
//!
//! - Corpus: JSONL, one `{docid, text, url}` object a line (docid a string or integer).
//!   Each document's domains come from its URL through a category map in the format of
//!   the reference `simple_categories.json` (`{category: [domain, ...]}`), matched as the
//!   reference searcher does (a domain string occurring in the URL, [`CategoryMatch`]) or
//!   by exact host; `other` holds the pages of no category (or of no named one,
//!   [`OtherRule`]); see [`url_domains`].
//! - Queries: JSONL, one object a line with `query_id`, `query`, `answer` and, when
//!   present, the documents of the answer (`gold_docs`) and its evidence
//!   (`evidence_docs`): docids or objects with `docid`, `url`, `text`. With a canary
//!   string, every string of a row except `query_id`, at any depth, is base64 of the text
//!   XORed with a key stream: the 32-byte sha256 digest of the canary, repeated to the
//!   text's length (the scheme BrowseComp publishes). The canary is user configuration; a
//!   wrong one gives bytes that are not UTF-8 or mostly unprintable, which is reported as
//!   [`SearchError::WrongKey`].
//! - Splits: the reference `*_queries.tsv` files (`query_id<TAB>question`).

use std::collections::HashMap;
use std::path::Path;

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::corpus::{Corpus, Document, DomainSet, Source, NO_TOOL, OTHER};
use super::questions::{DocRef, Question};
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

/// How a URL is matched against a category's domain strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum CategoryMatch {
    /// One of the category's strings occurs in the lowercased URL (the reference
    /// searcher's `domain in url`); a URL may belong to several categories.
    #[default]
    Substring,
    /// The URL's host, or the host without a leading `www.`, is listed.
    Host,
}

/// What the `other` tool returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum OtherRule {
    /// Pages of no category of the map (the reference searcher excludes the URLs of every
    /// category): pages of a category without a tool are found only by `search_all`.
    #[default]
    Reference,
    /// Pages of no named category (the categories without a tool included).
    Spec,
}

/// A category map in the reference `simple_categories.json` format
/// (`{category: [domain, ...]}`), in file order.
#[derive(Debug, Clone, Default)]
pub struct CategoryMap {
    categories: Vec<(String, Vec<String>)>,
    by_host: HashMap<String, String>,
    /// Hosts listed under two categories (an error only for [`CategoryMatch::Host`]).
    conflict: Option<String>,
}

impl CategoryMap {
    /// Reads a `{category: [host, ...]}` JSON file.
    pub fn load(path: &Path) -> Result<Self, SearchError> {
        let bytes = crate::files::read(path, crate::files::SMALL_TEXT).map_err(io_err(path))?;
        Self::parse(&bytes, &path.display().to_string())
    }

    /// Parses the map; `file` names it in errors.
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
        let mut map = CategoryMap::default();
        for (cat, hosts) in cats {
            let Value::Array(hosts) = hosts else {
                return Err(malformed(
                    0,
                    format!("category {cat:?}: expected a list of hosts"),
                ));
            };
            let mut list = Vec::new();
            for h in hosts {
                let Value::String(h) = h else {
                    return Err(malformed(
                        0,
                        format!("category {cat:?}: host {h} is not a string"),
                    ));
                };
                let host = h.trim().to_ascii_lowercase();
                if host.is_empty() {
                    continue;
                }
                if let Some(prev) = map.by_host.insert(host.clone(), cat.clone()) {
                    if prev != cat && map.conflict.is_none() {
                        map.conflict = Some(format!(
                            "{file}: host {host:?} is listed under both {prev:?} and {cat:?}"
                        ));
                    }
                }
                list.push(host);
            }
            map.categories.push((cat, list));
        }
        Ok(map)
    }

    /// Checks that the map can be used with `how`: with host matching a host must
    /// belong to one category.
    pub fn check(&self, how: CategoryMatch) -> Result<(), SearchError> {
        match (&self.conflict, how) {
            (Some(c), CategoryMatch::Host) => Err(SearchError::Invalid(c.clone())),
            _ => Ok(()),
        }
    }

    /// The category of a URL by host: its host looked up as is, then without a
    /// leading `www.`.
    pub fn category(&self, url: &str) -> Option<&str> {
        let host = url_host(url)?;
        self.by_host
            .get(&host)
            .or_else(|| host.strip_prefix("www.").and_then(|h| self.by_host.get(h)))
            .map(String::as_str)
    }

    /// Every category of a URL, in map order: by host (at most one), or every category
    /// one of whose strings occurs in the lowercased URL.
    pub fn categories(&self, url: &str, how: CategoryMatch) -> Vec<&str> {
        match how {
            CategoryMatch::Host => self.category(url).into_iter().collect(),
            CategoryMatch::Substring => {
                let url = url.to_lowercase();
                if url.is_empty() {
                    return Vec::new();
                }
                self.categories
                    .iter()
                    .filter(|(_, hosts)| hosts.iter().any(|h| url.contains(h.as_str())))
                    .map(|(c, _)| c.as_str())
                    .collect()
            }
        }
    }
}

/// The domains of a document with `url`: the named ones among its categories (the first
/// is its domain, the rest `also`); with none, `other` or, under
/// [`OtherRule::Reference`] when it has a category without a tool, [`NO_TOOL`].
pub fn url_domains(
    url: &str,
    categories: &CategoryMap,
    domains: &DomainSet,
    how: CategoryMatch,
    other: OtherRule,
) -> (String, Vec<String>) {
    let cats = categories.categories(url, how);
    let mut named: Vec<String> = Vec::new();
    for c in &cats {
        if let Some(d) = domains.named.iter().find(|d| d.id == *c) {
            if !named.contains(&d.id) {
                named.push(d.id.clone());
            }
        }
    }
    if named.is_empty() {
        let domain = match other {
            OtherRule::Reference if !cats.is_empty() => NO_TOOL,
            _ => OTHER,
        };
        return (domain.to_string(), Vec::new());
    }
    let first = named.remove(0);
    (first, named)
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

/// A text file's contents; bytes that are not UTF-8 are a malformed row, named by file
/// and line like any other.
fn read_text(path: &Path) -> Result<String, SearchError> {
    let bytes = crate::files::read(path, crate::files::DATA).map_err(io_err(path))?;
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let bytes = e.as_bytes();
        let line_start = bytes[..at]
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        SearchError::Malformed {
            file: path.display().to_string(),
            line: bytes[..at].iter().filter(|&&b| b == b'\n').count() + 1,
            message: format!("not UTF-8 (byte {} of the line)", at - line_start + 1),
        }
    })
}

/// Reads the non-empty lines of a JSONL file as objects, reporting file and line on any
/// error.
fn jsonl_rows(path: &Path) -> Result<Vec<Row>, SearchError> {
    let text = read_text(path)?;
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

/// Loads a BrowseComp-Plus corpus JSONL, assigning domains with `categories` and
/// `domains` ([`url_domains`]).
pub fn load_corpus(
    path: &Path,
    categories: &CategoryMap,
    domains: &DomainSet,
    how: CategoryMatch,
    other: OtherRule,
) -> Result<Corpus, SearchError> {
    categories.check(how)?;
    let mut docs = Vec::new();
    // Each docid with the line it was first seen on.
    let mut seen = HashMap::new();
    for row in jsonl_rows(path)? {
        let docid = row.id("docid")?;
        if let Some(first) = seen.insert(docid.clone(), row.line) {
            return Err(row.malformed(format!(
                "docid {docid:?} occurs more than once (first on line {first})"
            )));
        }
        let text = row.string("text")?.to_string();
        let url = match row.get("url") {
            Some(Value::String(s)) => s.clone(),
            None | Some(Value::Null) => String::new(),
            Some(_) => return Err(row.malformed("\"url\" should be a string")),
        };
        let (domain, also) = url_domains(&url, categories, domains, how, other);
        docs.push(Document {
            docid,
            title: String::new(),
            text,
            url,
            topic: None,
            domain,
            also,
        });
    }
    Corpus::new(Source::BrowseCompPlus, docs)
}

/// Decrypts every string of `v` in place, at any depth, except the values of
/// `query_id` keys (the published dataset encrypts every other string field: the
/// question, the answer, and each evidence, gold and negative document's docid, URL and
/// text). `path` names the field in errors (`evidence_docs[0].docid`).
fn decrypt_all(v: &mut Value, canary: &str, path: &str) -> Result<(), (String, DecryptError)> {
    match v {
        Value::String(s) => {
            *s = decrypt(s, canary).map_err(|e| (path.to_string(), e))?;
        }
        Value::Array(items) => {
            for (i, it) in items.iter_mut().enumerate() {
                decrypt_all(it, canary, &format!("{path}[{i}]"))?;
            }
        }
        Value::Object(map) => {
            for (k, it) in map.iter_mut() {
                if k == "query_id" {
                    continue;
                }
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                decrypt_all(it, canary, &p)?;
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
    Ok(())
}

/// Reads a `*_docs` list: docids, or objects with a `docid` (and a `url`).
fn doc_refs(row: &Row, key: &str) -> Result<Vec<DocRef>, SearchError> {
    match row.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|it| {
                let docid = id_string(Some(it)).or_else(|| id_string(it.get("docid")));
                let docid = docid
                    .ok_or_else(|| row.malformed(format!("{key:?}: item {it} is not a docid")))?;
                let url = it
                    .get("url")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                Ok(DocRef { docid, url })
            })
            .collect(),
        Some(_) => Err(row.malformed(format!("{key:?} should be a list"))),
    }
}

/// Loads BrowseComp-Plus queries. With `canary`, every string of a row but `query_id` is
/// decrypted, at any depth (a wrong canary is [`SearchError::WrongKey`]); without, the
/// rows are read as plain text. The answer's documents (`gold_docs`) come first among a
/// question's evidence docids, then the other `evidence_docs`; both lists are kept with
/// their URLs. `corpus`, when given, supplies each question's domain (its first evidence
/// document's) and checks that evidence docids exist.
pub fn load_queries(
    path: &Path,
    canary: Option<&str>,
    corpus: Option<&Corpus>,
) -> Result<Vec<Question>, SearchError> {
    let mut out = Vec::new();
    for mut row in jsonl_rows(path)? {
        if let Some(c) = canary {
            let mut v = Value::Object(std::mem::take(&mut row.map));
            decrypt_all(&mut v, c, "").map_err(|(field, e)| SearchError::WrongKey {
                file: row.file.clone(),
                line: row.line,
                field,
                detail: e.to_string(),
            })?;
            if let Value::Object(m) = v {
                row.map = m;
            }
        }
        let id = row.id("query_id")?;
        let text = row.string("query")?.to_string();
        let answer = row.string("answer")?.to_string();
        let gold = doc_refs(&row, "gold_docs")?;
        let support = doc_refs(&row, "evidence_docs")?;
        let mut evidence: Vec<String> = Vec::new();
        for d in gold.iter().chain(&support) {
            if !evidence.contains(&d.docid) {
                evidence.push(d.docid.clone());
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
            evidence_docs: support,
            gold_docs: gold,
        });
    }
    Ok(out)
}

/// Reads a split file (`query_id<TAB>question` per line) and returns the ids in order.
pub fn load_split_ids(path: &Path) -> Result<Vec<String>, SearchError> {
    let text = read_text(path)?;
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
    fn bytes_that_are_not_utf8_are_named_by_file_and_line() {
        let p = std::env::temp_dir().join(format!("otb-utf8-{}.tsv", std::process::id()));
        std::fs::write(&p, b"1\tfine\n\n3\tcaf\xe9\n").unwrap();
        let err = load_split_ids(&p).unwrap_err().to_string();
        assert!(
            err.ends_with(".tsv:3: not UTF-8 (byte 6 of the line)"),
            "{err}"
        );
        std::fs::write(&p, b"{\"docid\": \"\xff\"}\n").unwrap();
        let err = jsonl_rows(&p)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        let _ = std::fs::remove_file(&p);
        assert!(
            err.ends_with(".tsv:1: not UTF-8 (byte 12 of the line)"),
            "{err}"
        );
    }

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
        // A host under two categories: fine for substring matching, not for hosts.
        let two = CategoryMap::parse(br#"{"a": ["h"], "b": ["h"]}"#, "c.json").unwrap();
        let e = two.check(CategoryMatch::Host).unwrap_err();
        assert!(e.to_string().contains("both"), "{e}");
        assert!(two.check(CategoryMatch::Substring).is_ok());
    }

    #[test]
    fn substring_and_host_matching_and_the_two_readings_of_other() {
        let m = CategoryMap::parse(
            br#"{"wikipedia": ["wikipedia.org"], "news": ["nytimes.com"], "sports": ["espn.com"], "health": ["mayoclinic.org"]}"#,
            "c.json",
        )
        .unwrap();
        let set = DomainSet::browsecomp();
        let d = |url: &str, how, other| url_domains(url, &m, &set, how, other);
        use CategoryMatch::{Host, Substring};
        use OtherRule::{Reference, Spec};
        // The reference: a domain string anywhere in the URL.
        assert_eq!(
            d("https://fr.wikipedia.org/wiki/X", Substring, Reference).0,
            "wikipedia"
        );
        assert_eq!(
            d("https://fr.wikipedia.org/wiki/X", Host, Reference).0,
            "other"
        );
        // Several categories: the first is the domain, the others too.
        assert_eq!(
            d(
                "https://www.nytimes.com/espn.com-deal",
                Substring,
                Reference
            ),
            ("news".to_string(), vec!["sports".to_string()])
        );
        // A category without a tool: only search_all finds it, unless `other` is every
        // page outside the named categories.
        assert_eq!(
            d("https://mayoclinic.org/a", Substring, Reference).0,
            NO_TOOL
        );
        assert_eq!(d("https://mayoclinic.org/a", Substring, Spec).0, OTHER);
        assert_eq!(d("https://mayoclinic.org/a", Host, Reference).0, NO_TOOL);
        assert_eq!(d("https://example.org/", Substring, Reference).0, OTHER);
        assert_eq!(d("", Substring, Reference).0, OTHER);
    }

    #[test]
    fn every_string_but_the_query_id_is_decrypted_at_any_depth() {
        let c = "k";
        let e = |t: &str| encrypt(t, c);
        let mut v = serde_json::json!({
            "query_id": "17",
            "query": e("Which lighthouse?"),
            "gold_docs": [{"docid": e("d1"), "url": e("https://a.org/x"), "text": e("Body")}],
            "negative_docs": [[{"docid": e("d9")}]],
            "n": 3,
        });
        decrypt_all(&mut v, c, "").unwrap();
        assert_eq!(v["query_id"], "17");
        assert_eq!(v["query"], "Which lighthouse?");
        assert_eq!(v["gold_docs"][0]["docid"], "d1");
        assert_eq!(v["gold_docs"][0]["url"], "https://a.org/x");
        assert_eq!(v["negative_docs"][0][0]["docid"], "d9");
        assert_eq!(v["n"], 3);
        let mut w = serde_json::json!({"query_id": "1", "query": encrypt("In which year did the author first publish a poem?", "right")});
        let (field, _) = decrypt_all(&mut w, "wrong", "").unwrap_err();
        assert_eq!(field, "query");
    }
}
