//! The texts on which `src/wordpiece.rs` must give the Hugging Face `tokenizers`
//! library's ids, shared by `tests/embed_model.rs` (which checks the ids recorded in
//! `tests/data/wordpiece_reference.txt`) and `examples/wordpiece_reference.rs` (which
//! records them with the library, feature `tokenizers-reference`).

/// Pieces that texts are made of: every kind of character the normaliser, the
/// pre-tokenizer or the added-token matcher treats specially.
pub const FRAGMENTS: &[&str] = &[
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

/// The fragments, a few long texts (words of 100 and 101 characters, 300 words, 300
/// special tokens written in the text), then 3,000 mixes of 1 to 12 fragments with
/// separators, the same on every run.
pub fn texts() -> Vec<String> {
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
    texts
}

/// How many of [`texts`] come first and are recorded id by id; the mixes after them
/// are recorded by a hash ([`record`]).
pub fn spelled_out() -> usize {
    FRAGMENTS.len() + 5
}

/// A text's ids in the reference file: spelled out, or `fnv:` and the 64-bit FNV-1a
/// hash of their little-endian bytes.
pub fn record(i: usize, ids: &[u32]) -> String {
    if i < spelled_out() {
        let ids: Vec<String> = ids.iter().map(u32::to_string).collect();
        return ids.join(" ");
    }
    let mut h: u64 = 0xcbf29ce484222325;
    for b in ids.iter().flat_map(|id| id.to_le_bytes()) {
        h = (h ^ u64::from(b)).wrapping_mul(0x100000001b3);
    }
    format!("fnv:{h:016x}")
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
