//! The project's WordPiece tokenizer (`textsim::wordpiece`) against the Hugging Face
//! `tokenizers` library on the pinned MiniLM `tokenizer.json`: the same ids for every
//! text, including the added tokens written in the text, accents, CJK, other scripts,
//! control and format characters, Unicode whitespace, over-long words and truncation.
//!
//! `tokenizers` is a dev-dependency only: the release build does not compile it.
//! Skips, saying so, when the model cannot be fetched.

use textsim::wordpiece::WordPiece;
use textsim::{Embedder, TextSimError, MAX_TOKENS};
use tokenizers::{Tokenizer, TruncationParams};

/// Pieces that texts are made of: every kind of character the normaliser, the
/// pre-tokenizer or the added-token matcher treats specially.
const FRAGMENTS: &[&str] = &[
    "Hello",
    "world",
    "get_user_profile(user_id: int) -> dict",
    "naïve café",
    "nai\u{308}ve cafe\u{301}",
    "ÅNGSTRÖM",
    "İstanbul",
    "ΣΊΣΥΦΟΣ",
    "ﬁnance",
    "Ｆｕｌｌｗｉｄｔｈ",
    "野口里佳",
    "𠀀𪜀",
    "한국어 텍스트",
    "ひらがなカタカナ",
    "العربية",
    "हिन्दी",
    "ภาษาไทย",
    "עִבְרִית",
    "Привет, мир",
    "👍🏽 👨‍👩‍👧 ❤️",
    "\u{0}\u{7}\u{1b}[0m",
    "\u{fffd}",
    "zero\u{200b}width\u{200d}joiner\u{feff}",
    "\u{e000}private",
    "\u{378}unassigned",
    "\u{e0001}tag",
    "\t\n\r",
    "\u{a0}\u{3000}\u{2028}\u{85}",
    "[CLS]",
    "[SEP][SEP]",
    "[MASK]",
    "[mask]",
    "[CL[CLS]S]",
    "[PAD",
    "[UNK]x",
    "3.14159",
    "$^`~|\\",
    "«quotes» „low“ ‘single’",
    "¿Qué? ¡Sí!",
    "—–-‐",
    "∑∫√ ≤≥",
    "x²³ ½",
    "supercalifragilisticexpialidocious",
    "a",
    " ",
    "",
];

fn tokenizers_ids(t: &Tokenizer, text: &str) -> Vec<u32> {
    t.encode(text, true)
        .unwrap_or_else(|e| panic!("tokenizers on {text:?}: {e}"))
        .get_ids()
        .to_vec()
}

/// A small deterministic generator (64-bit LCG), so that the texts are the same on
/// every run.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn tokenizer_agrees_with_tokenizers() {
    let e = match Embedder::load_default() {
        Ok(e) => e,
        Err(e @ (TextSimError::FetchDisabled { .. } | TextSimError::Fetch(_))) => {
            testkit::skip(
                "model",
                format_args!("the MiniLM model is not available: {e}"),
            );
            return;
        }
        Err(e) => panic!("loading the MiniLM model: {e}"),
    };
    let json = std::fs::read(e.dir().join("tokenizer.json")).expect("reading tokenizer.json");
    let ours = WordPiece::from_json(&json).expect("our tokenizer");
    let mut theirs = Tokenizer::from_bytes(&json).expect("tokenizers");
    theirs
        .with_truncation(Some(TruncationParams {
            max_length: MAX_TOKENS,
            ..TruncationParams::default()
        }))
        .expect("truncation");
    theirs.with_padding(None);

    let mut texts: Vec<String> = FRAGMENTS.iter().map(|s| s.to_string()).collect();
    texts.push("x".repeat(100));
    texts.push("x".repeat(101));
    texts.push("é".repeat(101));
    texts.push("word ".repeat(300));
    texts.push("[CLS] ".repeat(300));
    let seps = [" ", "", "\n", ", ", "-", "\u{3000}", "_"];
    let mut rng = Lcg(0x5eed);
    for _ in 0..3000 {
        let n = 1 + rng.next(12);
        let mut t = String::new();
        for _ in 0..n {
            t.push_str(FRAGMENTS[rng.next(FRAGMENTS.len())]);
            t.push_str(seps[rng.next(seps.len())]);
        }
        texts.push(t);
    }
    let mut unknown = 0;
    for text in &texts {
        let want = tokenizers_ids(&theirs, text);
        let got = ours.encode(text, MAX_TOKENS);
        assert_eq!(got, want, "ids of {text:?}");
        // The same through the embedder, which truncates to MAX_TOKENS.
        assert_eq!(e.token_ids(text), want, "the embedder's ids of {text:?}");
        unknown += want.iter().filter(|&&id| id == 100).count();
    }
    // The texts reach the unknown-token paths (a word over 100 characters, a word
    // with no known continuation), not only the happy one.
    assert!(unknown > 100, "only {unknown} unknown tokens");
}
