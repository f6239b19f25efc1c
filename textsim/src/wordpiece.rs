//! BERT's WordPiece tokenizer, read from a `tokenizer.json` of the Hugging Face
//! `tokenizers` layout, giving the same ids as that library for the layout MiniLM uses.
//!
//! What `tokenizers` does for `encode(text, add_special_tokens = true)` with a
//! `BertNormalizer`, a `BertPreTokenizer`, a `WordPiece` model and a `[CLS] A [SEP]`
//! template, step by step:
//!
//! 1. the added tokens (`[CLS]`, `[MASK]`, ...) are found in the raw text first,
//!    leftmost and longest match, and become their ids whatever surrounds them;
//! 2. each stretch between them is normalised: control characters dropped and
//!    whitespace made a space (`clean_text`), spaces put around CJK ideographs
//!    (`handle_chinese_chars`), canonical decomposition with nonspacing marks dropped
//!    (`strip_accents`, which follows `lowercase` when unset), lower case;
//! 3. split on whitespace (dropped) and around punctuation (kept, one character each);
//! 4. each word becomes its longest known prefix, then `##`-continuations, greedily;
//!    a word with an unknown remainder, or over `max_input_chars_per_word` characters,
//!    is one unknown token;
//! 5. the ids are truncated to leave room for `[CLS]` and `[SEP]`, then wrapped.
//!
//! The character classes come from the crates `tokenizers` itself uses
//! (`unicode_categories`, `unicode-normalization-alignments`), so the Unicode tables
//! agree with it; the `tokenizer_agrees_with_tokenizers` test compares the ids with
//! the library's on texts of many scripts. Any other `tokenizer.json` layout is
//! refused when loading, not tokenized differently.

use std::collections::HashMap;

use serde_json::Value;
use unicode_categories::UnicodeCategories;
use unicode_normalization_alignments::UnicodeNormalization;

/// A WordPiece tokenizer with BERT's normalisation and its `[CLS] ... [SEP]` wrapping.
#[derive(Debug, Clone)]
pub struct WordPiece {
    vocab: HashMap<String, u32>,
    unk: u32,
    prefix: String,
    max_word_chars: usize,
    /// Added tokens matched in the raw text, longest first.
    added: Vec<(String, u32)>,
    cls: u32,
    sep: u32,
    clean_text: bool,
    chinese_chars: bool,
    strip_accents: bool,
    lowercase: bool,
}

fn unsupported(what: impl std::fmt::Display) -> String {
    format!("unsupported tokenizer.json: {what}")
}

fn field<'a>(v: &'a Value, path: &str) -> Result<&'a Value, String> {
    path.split('.')
        .try_fold(v, |v, k| v.get(k))
        .ok_or_else(|| unsupported(format!("no `{path}`")))
}

/// A token id: a JSON number that fits in `u32`.
fn as_id(v: &Value) -> Option<u32> {
    v.as_u64().and_then(|i| u32::try_from(i).ok())
}

/// The `id` of a template piece of `kind` (`SpecialToken`, `Sequence`).
fn piece<'a>(p: &'a Value, kind: &str) -> Option<&'a str> {
    p.get(kind)?.get("id")?.as_str()
}

fn flag(v: &Value, key: &str) -> Result<Option<bool>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(b)) => Ok(Some(*b)),
        Some(other) => Err(unsupported(format!("`{key}` is {other}, not a boolean"))),
    }
}

fn expect_type(v: &Value, key: &str, ty: &str) -> Result<(), String> {
    match field(v, key)?.get("type").and_then(Value::as_str) {
        Some(t) if t == ty => Ok(()),
        other => Err(unsupported(format!(
            "`{key}` is {}, only {ty} is implemented",
            other.unwrap_or("missing")
        ))),
    }
}

impl WordPiece {
    /// Reads a `tokenizer.json`. Refuses, with what it found, any layout other than
    /// BERT's (normaliser, pre-tokenizer, WordPiece model, `[CLS] A [SEP]` template,
    /// added tokens matched on the raw text).
    pub fn from_json(bytes: &[u8]) -> Result<Self, String> {
        let json: Value = serde_json::from_slice(bytes).map_err(|e| format!("not JSON: {e}"))?;
        expect_type(&json, "model", "WordPiece")?;
        expect_type(&json, "normalizer", "BertNormalizer")?;
        expect_type(&json, "pre_tokenizer", "BertPreTokenizer")?;
        expect_type(&json, "post_processor", "TemplateProcessing")?;

        let model = field(&json, "model")?;
        let vocab: HashMap<String, u32> = field(model, "vocab")?
            .as_object()
            .ok_or_else(|| unsupported("`model.vocab` is not an object"))?
            .iter()
            .map(|(k, v)| {
                as_id(v)
                    .map(|id| (k.clone(), id))
                    .ok_or_else(|| unsupported(format!("vocabulary id of {k:?} is {v}")))
            })
            .collect::<Result<_, _>>()?;
        let unk_token = field(model, "unk_token")?
            .as_str()
            .ok_or_else(|| unsupported("`model.unk_token` is not a string"))?;
        let unk = *vocab.get(unk_token).ok_or_else(|| {
            unsupported(format!("unknown token {unk_token:?} not in the vocabulary"))
        })?;
        let prefix = field(model, "continuing_subword_prefix")?
            .as_str()
            .ok_or_else(|| unsupported("`model.continuing_subword_prefix` is not a string"))?
            .to_owned();
        let max_word_chars = field(model, "max_input_chars_per_word")?
            .as_u64()
            .ok_or_else(|| unsupported("`model.max_input_chars_per_word` is not a number"))?
            as usize;

        let norm = field(&json, "normalizer")?;
        let lowercase = flag(norm, "lowercase")?.unwrap_or(true);

        let mut added = Vec::new();
        if let Some(tokens) = json.get("added_tokens").and_then(Value::as_array) {
            for t in tokens {
                let content = t.get("content").and_then(Value::as_str);
                let id = t.get("id").and_then(as_id);
                let (Some(content), Some(id)) = (content, id) else {
                    return Err(unsupported(format!("added token {t}")));
                };
                for key in ["single_word", "lstrip", "rstrip", "normalized"] {
                    if flag(t, key)? == Some(true) {
                        return Err(unsupported(format!("added token {content:?} sets `{key}`")));
                    }
                }
                if !content.is_empty() {
                    added.push((content.to_owned(), id));
                }
            }
        }
        // Longest first: the first that matches at a position is the longest one.
        added.sort_by_key(|(c, _)| std::cmp::Reverse(c.len()));

        let post = field(&json, "post_processor")?;
        let special_id = |name: &str| -> Result<u32, String> {
            let ids = field(post, "special_tokens")?
                .get(name)
                .and_then(|s| s.get("ids"))
                .and_then(Value::as_array)
                .ok_or_else(|| unsupported(format!("no ids for {name:?}")))?;
            match ids.as_slice() {
                [id] => as_id(id).ok_or_else(|| unsupported(format!("id of {name:?} is {id}"))),
                _ => Err(unsupported(format!("{name:?} is not one token"))),
            }
        };
        let single = field(post, "single")?
            .as_array()
            .ok_or_else(|| unsupported("`post_processor.single` is not a list"))?;
        // `[SpecialToken a, Sequence A, SpecialToken b]`: the names of a and b.
        let (first, last) = match single.as_slice() {
            [first, seq, last] if piece(seq, "Sequence") == Some("A") => {
                piece(first, "SpecialToken").zip(piece(last, "SpecialToken"))
            }
            _ => None,
        }
        .ok_or_else(|| unsupported("the template is not `[special] A [special]`"))?;
        let (cls, sep) = (special_id(first)?, special_id(last)?);

        Ok(Self {
            vocab,
            unk,
            prefix,
            max_word_chars,
            added,
            cls,
            sep,
            clean_text: flag(norm, "clean_text")?.unwrap_or(true),
            chinese_chars: flag(norm, "handle_chinese_chars")?.unwrap_or(true),
            strip_accents: flag(norm, "strip_accents")?.unwrap_or(lowercase),
            lowercase,
        })
    }

    /// The ids of `text` with `[CLS]` and `[SEP]`, at most `max_tokens` of them
    /// (at least the two special tokens).
    pub fn encode(&self, text: &str, max_tokens: usize) -> Vec<u32> {
        let mut ids = Vec::new();
        let mut rest = text;
        while !rest.is_empty() {
            match self.next_added(rest) {
                Some((at, len, id)) => {
                    self.encode_plain(&rest[..at], &mut ids);
                    ids.push(id);
                    rest = &rest[at + len..];
                }
                None => {
                    self.encode_plain(rest, &mut ids);
                    break;
                }
            }
        }
        ids.truncate(max_tokens.saturating_sub(2));
        let mut out = Vec::with_capacity(ids.len() + 2);
        out.push(self.cls);
        out.extend(ids);
        out.push(self.sep);
        out
    }

    /// The leftmost added token in `text`, the longest one at that position:
    /// (byte offset, byte length, id).
    fn next_added(&self, text: &str) -> Option<(usize, usize, u32)> {
        if self.added.is_empty() {
            return None;
        }
        text.char_indices().find_map(|(at, _)| {
            self.added
                .iter()
                .find(|(c, _)| text[at..].starts_with(c.as_str()))
                .map(|(c, id)| (at, c.len(), *id))
        })
    }

    fn normalize(&self, text: &str) -> String {
        let mut s: String = if self.clean_text {
            text.chars()
                .filter(|&c| !(c == '\0' || c == '\u{fffd}' || is_control(c)))
                .map(|c| if is_whitespace(c) { ' ' } else { c })
                .collect()
        } else {
            text.to_owned()
        };
        if self.chinese_chars && s.chars().any(is_chinese_char) {
            let mut padded = String::with_capacity(s.len() + 8);
            for c in s.chars() {
                if is_chinese_char(c) {
                    padded.push(' ');
                    padded.push(c);
                    padded.push(' ');
                } else {
                    padded.push(c);
                }
            }
            s = padded;
        }
        if self.strip_accents {
            s = s
                .nfd()
                .map(|(c, _)| c)
                .filter(|c| !c.is_mark_nonspacing())
                .collect();
        }
        if self.lowercase {
            s = s.chars().flat_map(char::to_lowercase).collect();
        }
        s
    }

    fn encode_plain(&self, text: &str, ids: &mut Vec<u32>) {
        if text.is_empty() {
            return;
        }
        let normalized = self.normalize(text);
        for chunk in normalized.split(char::is_whitespace) {
            let mut start = 0;
            for (at, c) in chunk.char_indices() {
                if is_bert_punc(c) {
                    self.encode_word(&chunk[start..at], ids);
                    self.encode_word(&chunk[at..at + c.len_utf8()], ids);
                    start = at + c.len_utf8();
                }
            }
            self.encode_word(&chunk[start..], ids);
        }
    }

    fn encode_word(&self, word: &str, ids: &mut Vec<u32>) {
        if word.is_empty() {
            return;
        }
        if word.chars().count() > self.max_word_chars {
            ids.push(self.unk);
            return;
        }
        let first = ids.len();
        let mut start = 0;
        let mut piece = String::new();
        while start < word.len() {
            let mut end = word.len();
            let mut found = None;
            while start < end {
                piece.clear();
                if start > 0 {
                    piece.push_str(&self.prefix);
                }
                piece.push_str(&word[start..end]);
                if let Some(&id) = self.vocab.get(piece.as_str()) {
                    found = Some(id);
                    break;
                }
                end -= word[start..end]
                    .chars()
                    .next_back()
                    .map_or(1, char::len_utf8);
            }
            match found {
                Some(id) => ids.push(id),
                None => {
                    ids.truncate(first);
                    ids.push(self.unk);
                    return;
                }
            }
            start = end;
        }
    }
}

/// Whitespace for BERT: Unicode's, with tab, newline and carriage return.
fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

/// Control characters for BERT: categories Cc, Cf and Co, except tab, newline and
/// carriage return (which are whitespace).
fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

/// The CJK ideograph blocks BERT puts spaces around.
fn is_chinese_char(c: char) -> bool {
    matches!(
        c as u32,
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

/// Punctuation for BERT: ASCII punctuation (symbols such as `$` and `^` included)
/// and Unicode's punctuation categories.
fn is_bert_punc(c: char) -> bool {
    c.is_ascii_punctuation() || c.is_punctuation()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> WordPiece {
        let json = serde_json::json!({
            "added_tokens": [
                {"id": 0, "content": "[PAD]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                {"id": 1, "content": "[UNK]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                {"id": 2, "content": "[CLS]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true},
                {"id": 3, "content": "[SEP]", "single_word": false, "lstrip": false, "rstrip": false, "normalized": false, "special": true}
            ],
            "normalizer": {"type": "BertNormalizer", "clean_text": true, "handle_chinese_chars": true, "strip_accents": null, "lowercase": true},
            "pre_tokenizer": {"type": "BertPreTokenizer"},
            "post_processor": {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}, {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]}, "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}},
            "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##", "max_input_chars_per_word": 10,
                "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "un": 4, "##aff": 5, "##able": 6, "cafe": 7, "!": 8, "中": 9, "a": 10, "##ff": 11}}
        });
        WordPiece::from_json(json.to_string().as_bytes()).expect("tiny tokenizer")
    }

    #[test]
    fn words_split_into_the_longest_known_pieces() {
        let t = tiny();
        assert_eq!(t.encode("unaffable", 16), [2, 4, 5, 6, 3]);
        // Accents stripped, lower-cased, punctuation isolated, CJK split off.
        assert_eq!(t.encode("CAFÉ!中un", 16), [2, 7, 8, 9, 4, 3]);
        // A word with an unknown remainder is one [UNK]; so is a word over 10 chars.
        assert_eq!(t.encode("unx", 16), [2, 1, 3]);
        assert_eq!(t.encode("unaffableable", 16), [2, 1, 3]);
        // Added tokens are matched in the raw text, before lower-casing.
        assert_eq!(t.encode("un[SEP]un [sep]", 16), [2, 4, 3, 4, 1, 1, 1, 3]);
        // Control characters vanish; every whitespace separates.
        assert_eq!(t.encode("un\u{200b}\u{0}aff\tun", 16), [2, 4, 5, 4, 3]);
        assert_eq!(t.encode("", 16), [2, 3]);
        assert_eq!(t.encode("un un un un", 4), [2, 4, 4, 3]);
    }

    #[test]
    fn other_layouts_are_refused() {
        let bad = serde_json::json!({"model": {"type": "BPE"}, "normalizer": null});
        let err = WordPiece::from_json(bad.to_string().as_bytes()).unwrap_err();
        assert!(
            err.contains("`model` is BPE, only WordPiece is implemented"),
            "{err}"
        );
        let err = WordPiece::from_json(b"{").unwrap_err();
        assert!(err.starts_with("not JSON"), "{err}");
    }
}
