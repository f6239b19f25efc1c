//! How much of an input an error line or a warning quotes: a 5 MB FEN or docid is
//! shown by its ends and its length, never whole.

use std::borrow::Cow;

/// The most characters [`clip`] keeps of a text (its first 150 and last 50).
pub const QUOTE_CHARS: usize = 200;

const HEAD: usize = 150;
const TAIL: usize = QUOTE_CHARS - HEAD;

/// `s` when it has at most [`QUOTE_CHARS`] characters; else its first 150 and last 50
/// characters around `…[N characters, M left out]…`, so that a message quoting an input
/// stays one short line (a cut message keeps its end, where a parser says what it
/// expected and where).
pub fn clip(s: &str) -> Cow<'_, str> {
    let total = s.chars().count();
    if total <= QUOTE_CHARS {
        return Cow::Borrowed(s);
    }
    let head_end = s.char_indices().nth(HEAD).map_or(s.len(), |(i, _)| i);
    let tail_start = s
        .char_indices()
        .nth(total - TAIL)
        .map_or(s.len(), |(i, _)| i);
    Cow::Owned(format!(
        "{}…[{total} characters, {} left out]…{}",
        &s[..head_end],
        total - QUOTE_CHARS,
        &s[tail_start..]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_texts_are_kept_long_ones_keep_their_ends_and_length() {
        assert_eq!(clip("e2e4"), "e2e4");
        let exact = "x".repeat(QUOTE_CHARS);
        assert_eq!(clip(&exact), exact);
        let long = format!("{}{}", "é".repeat(5_000_000), "end");
        let c = clip(&long);
        assert!(c.chars().count() < QUOTE_CHARS + 60, "{c}");
        assert!(c.starts_with(&"é".repeat(HEAD)), "{c}");
        assert!(c.ends_with("éend"), "{c}");
        assert!(
            c.contains("…[5000003 characters, 4999803 left out]…"),
            "{c}"
        );
    }
}
