//! Questions: the [`Question`] type both sources share, and BrowseComp-style questions
//! generated deterministically from the substitute corpus.
//!
//! Two kinds, each with an answer that is a document title and evidence known exactly:
//! - **one-hop**: several clues about one entity: its short description, a year its
//!   summary mentions (when it has one) and rare words of its summary (document frequency
//!   at most [`GenConfig::max_df`]); the answer is that entity's title.
//! - **two-hop** (the majority): a bridge entity A is given by its description and a rare
//!   word; the answer is the title of the one other article B whose summary names A and
//!   also carries a further clue (a year or a rare word), with B's domain described. The
//!   agent must find A first and then search with A's title: at least two searches.
//!
//! Every clue set is checked to single out its document in the corpus, and the question
//! text never contains the answer's title or aliases (nor, for two-hop, the bridge's),
//! nor any word of the answer's title of [`TITLE_WORD_LETTERS`] letters or more. Whether
//! a two-hop question names the answer's topic in the gold tool's words is
//! [`GenConfig::collection_hint`] (off by default: it points at the hidden structure).
//! Questions carry the substitute's [`Source`] label.

use std::collections::{HashMap, HashSet};

use super::corpus::{Source, SUBSTITUTE_TOPICS};
use super::judge::normalize_tokens;
use super::substitute::SubstituteCorpus;

/// One question over a corpus.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Question {
    /// Identifier (`query_id` for BrowseComp-Plus, `subq-NNNN` for generated ones).
    pub id: String,
    /// The data source label ([`Source::label`]).
    pub source: String,
    /// The question text.
    pub text: String,
    /// The gold answer.
    pub answer: String,
    /// Other accepted forms of the answer.
    pub aliases: Vec<String>,
    /// Evidence docids, the answer's document first (for two-hop: then the bridge).
    pub evidence_docids: Vec<String>,
    /// 1 or 2 for generated questions; 0 when unknown (BrowseComp-Plus).
    pub hops: u8,
    /// The domain of the first evidence document (empty when unknown).
    pub domain: String,
    /// BrowseComp-Plus: the documents that support the answer (`evidence_docs`).
    pub evidence_docs: Vec<DocRef>,
    /// BrowseComp-Plus: the documents that contain the answer (`gold_docs`).
    pub gold_docs: Vec<DocRef>,
}

/// A document a question names: its docid and URL.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct DocRef {
    /// The document's id.
    pub docid: String,
    /// Its URL (empty when the row gives none).
    pub url: String,
}

/// Generation settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GenConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Number of one-hop questions.
    pub one_hop: usize,
    /// Number of two-hop questions.
    pub two_hop: usize,
    /// Largest document frequency of a "rare word" clue.
    pub max_df: usize,
    /// Largest number of documents that may name a bridge entity.
    pub max_bridge_mentions: usize,
    /// Two-hop questions say which topic the answer's article has, in the words of
    /// the gold tool's description (a hint at the hidden structure; off by default).
    pub collection_hint: bool,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            seed: 20250101,
            one_hop: 150,
            two_hop: 300,
            max_df: 12,
            max_bridge_mentions: 20,
            collection_hint: false,
        }
    }
}

/// A small deterministic generator (SplitMix64).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// Seeds the generator.
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// Shuffles in place (Fisher-Yates).
    pub fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            v.swap(i, self.below(i + 1));
        }
    }
}

/// Accepted variants of a title: without a trailing parenthetical (`Mercury (planet)` ->
/// `Mercury`).
pub fn aliases(title: &str) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(open) = title.rfind(" (") {
        if title.ends_with(')') {
            let base = title[..open].trim();
            if !base.is_empty() {
                out.push(base.to_string());
            }
        }
    }
    out
}

/// Lowercased alphanumeric words of `s`, in order.
fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// Alphanumeric words of `s` in their original case.
fn raw_words(s: &str) -> impl Iterator<Item = &str> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
}

fn contains_seq(hay: &[String], needle: &[String]) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle)
}

/// Per-document word data used by the generator.
struct Analysed {
    /// Summary words (lowercase), in order.
    words: Vec<Vec<String>>,
    /// Summary word sets.
    sets: Vec<HashSet<String>>,
    /// Document frequency of each lowercase word.
    df: HashMap<String, usize>,
    /// Title words (lowercase).
    titles: Vec<Vec<String>>,
    /// Document ordinals by lowercased description.
    by_description: HashMap<String, Vec<usize>>,
}

impl Analysed {
    fn new(sub: &SubstituteCorpus) -> Self {
        let docs = sub.corpus.docs();
        let words: Vec<Vec<String>> = docs.iter().map(|d| words(&d.text)).collect();
        let sets: Vec<HashSet<String>> =
            words.iter().map(|w| w.iter().cloned().collect()).collect();
        let mut df = HashMap::new();
        for s in &sets {
            for w in s {
                *df.entry(w.clone()).or_insert(0) += 1;
            }
        }
        let mut by_description: HashMap<String, Vec<usize>> = HashMap::new();
        for (i, d) in sub.descriptions.iter().enumerate() {
            by_description
                .entry(d.trim().to_lowercase())
                .or_default()
                .push(i);
        }
        Analysed {
            words,
            sets,
            df,
            titles: docs.iter().map(|d| self::words(&d.title)).collect(),
            by_description,
        }
    }

    /// True when `word` (lowercase) overlaps any word of document `ord`'s title.
    fn touches_title(&self, ord: usize, word: &str) -> bool {
        self.titles[ord]
            .iter()
            .filter(|t| t.len() >= 3)
            .any(|t| word.contains(t.as_str()) || t.contains(word))
    }

    /// Rare words of document `ord`'s summary (original case), in order, deduplicated.
    fn rare_words<'a>(&self, ord: usize, text: &'a str, max_df: usize) -> Vec<&'a str> {
        let mut seen = HashSet::new();
        raw_words(text)
            .filter(|w| {
                let l = w.to_lowercase();
                w.chars().count() >= 6
                    && w.chars().all(char::is_alphabetic)
                    && self.df.get(&l).is_some_and(|&n| n <= max_df)
                    && !self.touches_title(ord, &l)
                    && seen.insert(l)
            })
            .collect()
    }

    /// Years (1000-2029) the summary of `ord` mentions, in order, deduplicated.
    fn years(&self, ord: usize) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for w in &self.words[ord] {
            let ok = w.len() == 4
                && w.chars().all(|c| c.is_ascii_digit())
                && ("1000"..="2029").contains(&w.as_str());
            if ok && !out.contains(w) {
                out.push(w.clone());
            }
        }
        out
    }

    /// The document's short description, when it has one (leaks of the title are caught
    /// on the whole question text).
    fn description_clue<'a>(&self, ord: usize, sub: &'a SubstituteCorpus) -> Option<&'a str> {
        let d = sub.descriptions.get(ord)?.trim();
        (!d.is_empty()).then_some(d)
    }

    /// Documents with description `description` (case-insensitive) whose summary contains
    /// all `clue_words` (lowercase), stopping after two.
    fn matching(&self, description: &str, clue_words: &[String]) -> Vec<usize> {
        let desc = description.trim().to_lowercase();
        self.by_description
            .get(&desc)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&i| clue_words.iter().all(|w| self.sets[i].contains(w)))
            .take(2)
            .collect()
    }
}

fn quote_list(words: &[&str]) -> String {
    let q: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
    match q.len() {
        0 => String::new(),
        1 => q[0].clone(),
        n => format!("{} and {}", q[..n - 1].join(", "), q[n - 1]),
    }
}

/// True when the normalised `text` contains any of the normalised `names`.
fn leaks(text: &str, names: &[String]) -> bool {
    let t = normalize_tokens(text);
    names.iter().any(|n| contains_seq(&t, &normalize_tokens(n)))
}

/// The shortest title word that gives a question away: words of the answer's title
/// with at least this many letters may not occur in its question.
pub const TITLE_WORD_LETTERS: usize = 4;

/// The words of `title` (lowercase) with at least [`TITLE_WORD_LETTERS`] characters
/// that `text` contains as whole words, case-insensitively.
pub fn title_words_in(text: &str, title: &str) -> Vec<String> {
    let in_text: HashSet<String> = words(text).into_iter().collect();
    let mut out: Vec<String> = Vec::new();
    for w in words(title) {
        if w.chars().count() >= TITLE_WORD_LETTERS && in_text.contains(&w) && !out.contains(&w) {
            out.push(w);
        }
    }
    out
}

/// How many of `questions` give their answer away: the text contains the answer, an
/// alias, or a word of the answer of at least [`TITLE_WORD_LETTERS`] letters.
pub fn leak_count(questions: &[Question]) -> usize {
    questions
        .iter()
        .filter(|q| {
            let mut names = vec![q.answer.clone()];
            names.extend(q.aliases.iter().cloned());
            leaks(&q.text, &names) || !title_words_in(&q.text, &q.answer).is_empty()
        })
        .count()
}

fn domain_phrase(domain: &str) -> Option<&'static str> {
    SUBSTITUTE_TOPICS
        .iter()
        .find(|(_, id, what)| *id == domain && !what.is_empty())
        .map(|(_, _, what)| *what)
}

/// Generates one-hop and two-hop questions over the substitute corpus. The same corpus
/// and config always give the same questions.
pub fn generate(sub: &SubstituteCorpus, cfg: &GenConfig) -> Vec<Question> {
    let a = Analysed::new(sub);
    let docs = sub.corpus.docs();
    let mut rng = Rng::new(cfg.seed);
    let mut used_answers = HashSet::new();
    let mut out = Vec::new();

    // Two-hop first: bridges A named in B's summary, found by first-word lookup.
    let mut by_first: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, t) in a.titles.iter().enumerate() {
        let distinctive = t.len() >= 2 || t.first().is_some_and(|w| w.chars().count() >= 6);
        if let (true, Some(first)) = (distinctive, t.first()) {
            by_first.entry(first.as_str()).or_default().push(i);
        }
    }
    let mut mentions: Vec<Vec<usize>> = vec![Vec::new(); docs.len()];
    let mut mention_count = vec![0usize; docs.len()];
    for (b, ws) in a.words.iter().enumerate() {
        let mut found = Vec::new();
        for (i, w) in ws.iter().enumerate() {
            for &t in by_first.get(w.as_str()).into_iter().flatten() {
                let title = &a.titles[t];
                // Word match, and the title as written (case included) in the text.
                if t != b
                    && ws[i..].starts_with(title)
                    && !found.contains(&t)
                    && docs[b].text.contains(docs[t].title.as_str())
                {
                    found.push(t);
                }
            }
        }
        for &t in &found {
            mention_count[t] += 1;
        }
        mentions[b] = found;
    }
    let mut named_by: Vec<Vec<usize>> = vec![Vec::new(); docs.len()];
    for (b, found) in mentions.iter().enumerate() {
        for &t in found {
            named_by[t].push(b);
        }
    }
    let mut order: Vec<usize> = (0..docs.len()).collect();
    rng.shuffle(&mut order);
    let mut used_bridges = HashSet::new();
    for &b in &order {
        if out.len() >= cfg.two_hop {
            break;
        }
        let mut bridges: Vec<usize> = mentions[b]
            .iter()
            .copied()
            .filter(|&t| mention_count[t] <= cfg.max_bridge_mentions && !used_bridges.contains(&t))
            .collect();
        rng.shuffle(&mut bridges);
        for br in bridges {
            if let Some(q) = two_hop(sub, &a, &mut rng, cfg, &named_by[br], br, b) {
                used_bridges.insert(br);
                used_answers.insert(b);
                out.push(q);
                break;
            }
        }
    }

    let mut singles = 0;
    for &e in &order {
        if singles >= cfg.one_hop {
            break;
        }
        if used_answers.contains(&e) {
            continue;
        }
        if let Some(q) = one_hop(sub, &a, &mut rng, cfg, e) {
            used_answers.insert(e);
            out.push(q);
            singles += 1;
        }
    }

    // Interleave deterministically so that ids do not reveal the kind.
    rng.shuffle(&mut out);
    for (i, q) in out.iter_mut().enumerate() {
        q.id = format!("subq-{:04}", i + 1);
    }
    out
}

fn question(
    sub: &SubstituteCorpus,
    text: String,
    answer: usize,
    bridge: Option<usize>,
) -> Question {
    let docs = sub.corpus.docs();
    let d = &docs[answer];
    Question {
        id: String::new(),
        source: Source::Substitute.label().to_string(),
        text,
        answer: d.title.clone(),
        aliases: aliases(&d.title),
        evidence_docids: std::iter::once(answer)
            .chain(bridge)
            .map(|i| docs[i].docid.clone())
            .collect(),
        hops: if bridge.is_some() { 2 } else { 1 },
        domain: d.domain.clone(),
        evidence_docs: Vec::new(),
        gold_docs: Vec::new(),
    }
}

fn names(sub: &SubstituteCorpus, ord: usize) -> Vec<String> {
    let title = &sub.corpus.docs()[ord].title;
    std::iter::once(title.clone())
        .chain(aliases(title))
        .collect()
}

fn one_hop(
    sub: &SubstituteCorpus,
    a: &Analysed,
    rng: &mut Rng,
    cfg: &GenConfig,
    e: usize,
) -> Option<Question> {
    let doc = &sub.corpus.docs()[e];
    let desc = a.description_clue(e, sub)?;
    let mut rare = a.rare_words(e, &doc.text, cfg.max_df);
    rng.shuffle(&mut rare);
    let years = a.years(e);
    let year = (!years.is_empty()).then(|| years[rng.below(years.len())].clone());
    let wanted = if year.is_some() { 1 } else { 2 };
    if rare.len() < wanted {
        return None;
    }
    rare.truncate(2);
    let mut clue_words: Vec<String> = rare.iter().map(|w| w.to_lowercase()).collect();
    clue_words.extend(year.clone());
    if a.matching(desc, &clue_words) != [e] {
        return None;
    }
    let mut text = format!(
        "Identify the subject of an encyclopedia article from these clues. It is described as \"{desc}\"."
    );
    if let Some(y) = &year {
        text.push_str(&format!(" Its summary mentions the year {y}."));
    }
    text.push_str(&format!(
        " Its summary uses the word{} {}. What is the title of the article?",
        if rare.len() > 1 { "s" } else { "" },
        quote_list(&rare)
    ));
    if leaks(&text, &names(sub, e)) || !title_words_in(&text, &doc.title).is_empty() {
        return None;
    }
    Some(question(sub, text, e, None))
}

fn two_hop(
    sub: &SubstituteCorpus,
    a: &Analysed,
    rng: &mut Rng,
    cfg: &GenConfig,
    named_by: &[usize],
    bridge: usize,
    answer: usize,
) -> Option<Question> {
    let docs = sub.corpus.docs();
    // The bridge: description plus one rare word, unique in the corpus.
    let desc = a.description_clue(bridge, sub)?;
    let mut rare = a.rare_words(bridge, &docs[bridge].text, cfg.max_df);
    rng.shuffle(&mut rare);
    let bridge_word = *rare.first()?;
    if a.matching(desc, &[bridge_word.to_lowercase()]) != [bridge] {
        return None;
    }
    // The answer: names the bridge, plus a year or a rare word, unique among documents
    // naming the bridge.
    let mut clues: Vec<(String, String)> = a
        .years(answer)
        .into_iter()
        .map(|y| (y.clone(), format!("the year {y}")))
        .chain(
            a.rare_words(answer, &docs[answer].text, cfg.max_df)
                .into_iter()
                .map(|w| (w.to_lowercase(), format!("the word \"{w}\""))),
        )
        .filter(|(w, _)| !a.titles[bridge].contains(w))
        .collect();
    rng.shuffle(&mut clues);
    let (_, clue_text) = clues.into_iter().find(|(w, _)| {
        let naming: Vec<usize> = named_by
            .iter()
            .copied()
            .filter(|&i| a.sets[i].contains(w))
            .take(2)
            .collect();
        naming == [answer]
    })?;
    let mut text = format!(
        "Start from the subject described as \"{desc}\" whose encyclopedia summary uses the word \"{bridge_word}\". \
         Another article's summary mentions that subject by name and also mentions {clue_text}."
    );
    if let Some(what) = domain_phrase(&docs[answer].domain).filter(|_| cfg.collection_hint) {
        text.push_str(&format!(
            " That other article belongs to the collection about {what}."
        ));
    }
    text.push_str(" What is the title of that other article?");
    let mut hidden = names(sub, answer);
    hidden.extend(names(sub, bridge));
    // Neither the clues nor the bridge may carry a word of the answer's title.
    if leaks(&text, &hidden) || !title_words_in(&text, &docs[answer].title).is_empty() {
        return None;
    }
    Some(question(sub, text, answer, Some(bridge)))
}

/// Mixed into the split's seed so that it does not repeat the generator's stream.
const SPLIT_SALT: u64 = 0x5eed_0000_0000_0010;

/// Splits questions into train and test: a seeded shuffle, the first
/// `round(len * train_fraction)` to train; both keep their original order.
pub fn split(
    questions: &[Question],
    seed: u64,
    train_fraction: f64,
) -> (Vec<Question>, Vec<Question>) {
    let mut idx: Vec<usize> = (0..questions.len()).collect();
    Rng::new(seed ^ SPLIT_SALT).shuffle(&mut idx);
    let n_train = ((questions.len() as f64) * train_fraction.clamp(0.0, 1.0)).round() as usize;
    let train: HashSet<usize> = idx[..n_train].iter().copied().collect();
    let (mut tr, mut te) = (Vec::new(), Vec::new());
    for (i, q) in questions.iter().enumerate() {
        if train.contains(&i) {
            tr.push(q.clone());
        } else {
            te.push(q.clone());
        }
    }
    (tr, te)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::substitute::parse_summaries;

    /// A tiny corpus: two rivers share a description, the painter names a river.
    fn tiny() -> SubstituteCorpus {
        let json = r#"{
          "Alpha River": {"title": "Alpha River", "extract": "The Alpha is a long waterway crossing sandstone gorges, first mapped in 1821.", "description": "River in Freedonia", "topic": "Geography"},
          "Beta River": {"title": "Beta River", "extract": "The Beta is a short waterway through marshland, mapped in 1790.", "description": "River in Freedonia", "topic": "Geography"},
          "Carla Gomez": {"title": "Carla Gomez", "extract": "Carla Gomez was a painter who lived beside the Alpha River and exhibited watercolours in 1902.", "description": "Freedonian painter", "topic": "People"},
          "Delta (band)": {"title": "Delta (band)", "extract": "Delta is a quartet formed in 1999 that toured with lanterns and marionettes.", "description": "Freedonian musical group", "topic": "Arts"}
        }"#;
        parse_summaries(json.as_bytes(), "tiny.json").unwrap()
    }

    /// Ten questions of each kind over [`tiny`], rare words occurring once.
    fn small_config() -> GenConfig {
        GenConfig {
            seed: 7,
            one_hop: 10,
            two_hop: 10,
            max_df: 1,
            max_bridge_mentions: 5,
            collection_hint: false,
        }
    }

    #[test]
    fn generates_both_kinds_without_leaking_titles() {
        let sub = tiny();
        let cfg = small_config();
        let qs = generate(&sub, &cfg);
        assert_eq!(qs, generate(&sub, &cfg), "deterministic");
        let two: Vec<&Question> = qs.iter().filter(|q| q.hops == 2).collect();
        assert_eq!(two.len(), 1);
        assert_eq!(two[0].answer, "Carla Gomez");
        assert_eq!(two[0].evidence_docids, ["wiki-00002", "wiki-00000"]);
        assert!(
            two[0].text.contains("River in Freedonia"),
            "{}",
            two[0].text
        );
        // The answer's topic is not named unless asked for.
        assert!(!two[0].text.contains("collection"), "{}", two[0].text);
        let hinted = generate(
            &sub,
            &GenConfig {
                collection_hint: true,
                ..cfg
            },
        );
        let hinted: Vec<&Question> = hinted.iter().filter(|q| q.hops == 2).collect();
        assert!(
            hinted[0].text.contains("collection about people"),
            "{}",
            hinted[0].text
        );
        let one: Vec<&Question> = qs.iter().filter(|q| q.hops == 1).collect();
        assert!(one
            .iter()
            .any(|q| q.answer == "Delta (band)" && q.aliases == ["Delta"]));
        for q in &qs {
            assert_eq!(q.source, Source::Substitute.label());
            assert!(
                !leaks(&q.text, std::slice::from_ref(&q.answer)),
                "{}",
                q.text
            );
            assert!(
                q.aliases
                    .iter()
                    .all(|a| !leaks(&q.text, std::slice::from_ref(a))),
                "{}",
                q.text
            );
            assert!(q.id.starts_with("subq-"));
        }
    }

    #[test]
    fn no_question_carries_a_word_of_its_answer() {
        // "Alpha River" is singled out by its description "River in Freedonia" and two
        // rare words: that question would carry "river", a word of its answer.
        let sub = tiny();
        let cfg = small_config();
        let qs = generate(&sub, &cfg);
        assert!(!qs.is_empty());
        for q in &qs {
            assert_eq!(
                title_words_in(&q.text, &q.answer),
                Vec::<String>::new(),
                "{}",
                q.text
            );
        }
        assert!(!qs.iter().any(|q| q.answer == "Alpha River"), "{qs:?}");
        assert_eq!(leak_count(&qs), 0);
        assert_eq!(
            title_words_in("It is a RIVER in the hills.", "Alpha River (Freedonia)"),
            ["river"]
        );
        assert!(title_words_in("a rivers tale", "Alpha River").is_empty());
        assert!(title_words_in("the USA flag", "USA").is_empty());
    }

    #[test]
    fn aliases_drop_parentheticals() {
        assert_eq!(aliases("Mercury (planet)"), ["Mercury"]);
        assert!(aliases("Mercury").is_empty());
        assert!(aliases("(band)").is_empty());
    }

    #[test]
    fn split_is_seeded_and_complete() {
        let qs: Vec<Question> = (0..50)
            .map(|i| Question {
                id: format!("q{i}"),
                source: String::new(),
                text: String::new(),
                answer: String::new(),
                aliases: vec![],
                evidence_docids: vec![],
                hops: 1,
                domain: String::new(),
                evidence_docs: vec![],
                gold_docs: vec![],
            })
            .collect();
        let (tr, te) = split(&qs, 1, 0.1);
        assert_eq!((tr.len(), te.len()), (5, 45));
        assert_eq!(split(&qs, 1, 0.1).0, tr);
        assert_ne!(split(&qs, 2, 0.1).0, tr);
        let mut ids: Vec<&str> = tr.iter().chain(&te).map(|q| q.id.as_str()).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 50);
    }
}
