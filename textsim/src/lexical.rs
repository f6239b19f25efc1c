//! Lexical similarity: ROUGE-1 F1 and sentence BLEU-4, bit-for-bit as the
//! Python reference packages compute them.
//!
//! * [`rouge1_f1`] = `rouge_score.rouge_scorer.RougeScorer(['rouge1'],
//!   use_stemmer=False).score(reference, candidate)['rouge1'].fmeasure`
//!   (rouge-score 0.1.2).
//! * [`bleu`] = `nltk.translate.bleu_score.sentence_bleu([reference.split()],
//!   candidate.split(), smoothing_function=SmoothingFunction().method1)`
//!   (NLTK 3.10; default weights `(0.25,)*4`, `auto_reweigh=False`,
//!   epsilon 0.1).
//!
//! Both follow the Python arithmetic step by step (integer ratios rounded
//! once, `math.fsum` for the log sum) so the results are the same `f64`s.

use std::collections::HashMap;

/// The rouge-score default tokenizer: lowercase (Unicode, as Python's
/// `str.lower`), replace every run of characters outside `[a-z0-9]` by a
/// space, split. Equivalently: the maximal runs of ASCII `[a-z0-9]` in the
/// lowercased text.
pub fn rouge_tokenize(text: &str) -> Vec<String> {
    let lower = text.to_lowercase();
    lower
        .split(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit()))
        .filter(|t| !t.is_empty())
        .map(str::to_owned)
        .collect()
}

fn counts<'a, I: IntoIterator<Item = &'a str>>(tokens: I) -> HashMap<&'a str, usize> {
    let mut m = HashMap::new();
    for t in tokens {
        *m.entry(t).or_insert(0) += 1;
    }
    m
}

/// ROUGE-1 F-measure of `candidate` (the prediction) against `reference`
/// (the target), without stemming. 0 when either side has no token.
pub fn rouge1_f1(candidate: &str, reference: &str) -> f64 {
    let cand = rouge_tokenize(candidate);
    let refs = rouge_tokenize(reference);
    let c = counts(cand.iter().map(String::as_str));
    let r = counts(refs.iter().map(String::as_str));
    let intersection: usize = r
        .iter()
        .map(|(t, n)| (*n).min(c.get(t).copied().unwrap_or(0)))
        .sum();
    // rouge_scorer._score_ngrams: precision/recall as int / max(count, 1).
    let precision = intersection as f64 / cand.len().max(1) as f64;
    let recall = intersection as f64 / refs.len().max(1) as f64;
    // scoring.fmeasure
    if precision + recall > 0.0 {
        2.0 * precision * recall / (precision + recall)
    } else {
        0.0
    }
}

/// Python's `str.isspace` (what `str.split()` splits on): Unicode
/// `White_Space` plus the four ASCII separators U+001C..U+001F, which Rust's
/// [`char::is_whitespace`] does not count.
fn python_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.split()` with no argument.
pub fn python_split(text: &str) -> Vec<&str> {
    text.split(python_space).filter(|t| !t.is_empty()).collect()
}

/// NLTK `modified_precision` for one reference: (clipped matches, max(1,
/// hypothesis n-grams)).
fn modified_precision(hyp: &[&str], reference: &[&str], n: usize) -> (usize, usize) {
    let grams = |s: &[&str]| -> HashMap<Vec<String>, usize> {
        let mut m = HashMap::new();
        if s.len() >= n {
            for w in s.windows(n) {
                let key: Vec<String> = w.iter().map(|t| (*t).to_owned()).collect();
                *m.entry(key).or_insert(0) += 1;
            }
        }
        m
    };
    let h = grams(hyp);
    let r = grams(reference);
    let numerator: usize = h
        .iter()
        .map(|(g, c)| (*c).min(r.get(g).copied().unwrap_or(0)))
        .sum();
    let denominator = h.values().sum::<usize>().max(1);
    (numerator, denominator)
}

/// Sentence BLEU-4 of `candidate` against one `reference`, both split on
/// whitespace as Python's `str.split()` (case and punctuation kept), with
/// NLTK's smoothing method 1 (a zero n-gram precision becomes 0.1 / count).
/// 0 when no unigram matches (in particular when either side is empty).
pub fn bleu(candidate: &str, reference: &str) -> f64 {
    const WEIGHTS: [f64; 4] = [0.25; 4];
    const EPSILON: f64 = 0.1;
    let hyp = python_split(candidate);
    let refs = python_split(reference);
    let p: Vec<(usize, usize)> = (1..=WEIGHTS.len())
        .map(|n| modified_precision(&hyp, &refs, n))
        .collect();
    if p[0].0 == 0 {
        return 0.0;
    }
    // brevity_penalty(closest_ref_len, hyp_len); hyp_len > 0 here.
    let (r, c) = (refs.len(), hyp.len());
    let bp = if c > r {
        1.0
    } else {
        (1.0 - r as f64 / c as f64).exp()
    };
    let terms: Vec<f64> = WEIGHTS
        .iter()
        .zip(&p)
        .map(|(w, &(num, den))| {
            let p_i = if num == 0 {
                (num as f64 + EPSILON) / den as f64
            } else {
                num as f64 / den as f64
            };
            w * p_i.ln()
        })
        .collect();
    bp * fsum(&terms).exp()
}

/// Python's `math.fsum` for finite inputs: Shewchuk's exact partial sums,
/// then a correctly rounded (half-even) total.
pub fn fsum(values: &[f64]) -> f64 {
    let mut partials: Vec<f64> = Vec::new();
    for &v in values {
        let mut x = v;
        let mut i = 0;
        for j in 0..partials.len() {
            let mut y = partials[j];
            if x.abs() < y.abs() {
                std::mem::swap(&mut x, &mut y);
            }
            let hi = x + y;
            let lo = y - (hi - x);
            if lo != 0.0 {
                partials[i] = lo;
                i += 1;
            }
            x = hi;
        }
        partials.truncate(i);
        partials.push(x);
    }
    let mut n = partials.len();
    if n == 0 {
        return 0.0;
    }
    n -= 1;
    let mut hi = partials[n];
    let mut lo = 0.0;
    while n > 0 {
        let x = hi;
        n -= 1;
        let y = partials[n];
        hi = x + y;
        let yr = hi - x;
        lo = y - yr;
        if lo != 0.0 {
            break;
        }
    }
    if n > 0 && ((lo < 0.0 && partials[n - 1] < 0.0) || (lo > 0.0 && partials[n - 1] > 0.0)) {
        let y = lo * 2.0;
        let x = hi + y;
        let yr = x - hi;
        if y == yr {
            hi = x;
        }
    }
    hi
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (candidate, reference): empty sides, punctuation, case, repeated
    /// words, no overlap, identical texts, non-ASCII letters and Python-only
    /// whitespace. The expected values were computed by the real packages
    /// (rouge-score 0.1.2, nltk 3.10.4, Python 3.11) with
    /// `textsim/tests/reference/lexical.py`, in essence:
    ///
    /// ```python
    /// scorer = rouge_scorer.RougeScorer(['rouge1'], use_stemmer=False)
    /// scorer.score(ref, cand)['rouge1'].fmeasure
    /// sentence_bleu([ref.split()], cand.split(),
    ///               smoothing_function=SmoothingFunction().method1)
    /// ```
    const PAIRS: &[(&str, &str)] = &[
        ("the cat sat on the mat", "the cat is on the mat"),
        ("", ""),
        ("", "the reference only"),
        ("the candidate only", ""),
        ("Hello, world!", "hello world"),
        ("the the the the the the the", "the cat is on the mat"),
        ("apples and oranges", "completely different text here"),
        (
            "Returns the current weather for a given city.",
            "Get the weather forecast of a city, in Celsius.",
        ),
        (
            "Computes the factorial of a non-negative integer n.",
            "Computes the factorial of a non-negative integer n.",
        ),
        ("add two numbers", "adds two numbers together"),
        (
            "Café über naïve İstanbul KELVIN\u{212a} x_y x-y 3.14",
            "cafe uber naive istanbul kelvink x y 3 14",
        ),
        ("a\u{1c}b\u{a0}c\td\ne", "a b c d e"),
        (
            "Search the catalogue by keyword; returns up to `limit` items (default 10).",
            "Look up products matching a keyword and return at most limit results, default 10.",
        ),
    ];

    // repr() of the Python floats, in PAIRS order.
    const ROUGE1: &[f64] = &[
        0.8333333333333334,
        0.0,
        0.0,
        0.0,
        1.0,
        0.30769230769230765,
        0.0,
        0.47058823529411764,
        1.0,
        0.5714285714285715,
        0.4545454545454546,
        1.0,
        0.3846153846153846,
    ];
    const BLEU: &[f64] = &[
        0.25406637407730737,
        0.0,
        0.0,
        0.0,
        0.0,
        0.039281465090051315,
        0.0,
        0.03226013518927287,
        1.0,
        0.17216896116316355,
        0.0,
        1.0,
        0.014418280697523623,
    ];

    #[test]
    fn rouge1_matches_rouge_score() {
        assert_eq!(PAIRS.len(), ROUGE1.len());
        for ((c, r), want) in PAIRS.iter().zip(ROUGE1) {
            let got = rouge1_f1(c, r);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{c:?} vs {r:?}: {got} != {want}"
            );
        }
    }

    #[test]
    fn bleu_matches_nltk() {
        assert_eq!(PAIRS.len(), BLEU.len());
        for ((c, r), want) in PAIRS.iter().zip(BLEU) {
            let got = bleu(c, r);
            assert_eq!(
                got.to_bits(),
                want.to_bits(),
                "{c:?} vs {r:?}: {got} != {want}"
            );
        }
    }

    #[test]
    fn rouge_tokenizer_keeps_only_ascii_alphanumerics() {
        assert_eq!(
            rouge_tokenize("Café x_y 3.14 İ"),
            vec!["caf", "x", "y", "3", "14", "i"]
        );
        assert!(rouge_tokenize("¿¡—!").is_empty());
    }

    #[test]
    fn python_split_counts_ascii_separators() {
        assert_eq!(
            python_split("a\u{1c}b\u{85}c\u{200b}d"),
            vec!["a", "b", "c\u{200b}d"]
        );
        assert!(python_split(" \t\n").is_empty());
    }

    #[test]
    fn fsum_is_exact() {
        assert_eq!(fsum(&[]), 0.0);
        assert_eq!(fsum(&[0.1; 10]), 1.0);
        assert_eq!(
            fsum(&[1e100, 1.0, -1e100, 1e-100, 1e50, -1.0, -1e50]),
            1e-100
        );
        // Half-even correction across partials (CPython's test_math case).
        assert_eq!(
            fsum(&[1.0, 2f64.powi(-53), 2f64.powi(-106)]),
            1.0 + 2f64.powi(-52)
        );
    }
}
