//! Grading final answers: normalised exact match against the answer and its aliases, token
//! F1 beside it, and the text side of an optional LLM judge (prompt rendering and verdict
//! parsing; the call itself belongs to the caller).
//!
//! Normalisation: lowercase; delete every character that is neither alphanumeric nor
//! whitespace (punctuation and symbols, as SQuAD's `normalize_answer` deletes ASCII
//! punctuation, here for all of Unicode); drop the words `a`, `an`, `the`; split on
//! whitespace. Exact match compares the joined tokens; F1 is SQuAD's token F1 (bag of
//! tokens; 1 when both are empty, 0 when one is).

use std::collections::HashMap;

use super::SearchError;

/// Normalised tokens of `s`.
pub fn normalize_tokens(s: &str) -> Vec<String> {
    let cleaned: String = s
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace())
        .collect();
    cleaned
        .split_whitespace()
        .filter(|w| !matches!(*w, "a" | "an" | "the"))
        .map(str::to_string)
        .collect()
}

/// The normalised form of `s` (tokens joined by one space).
pub fn normalize(s: &str) -> String {
    normalize_tokens(s).join(" ")
}

/// SQuAD token F1 between a prediction and one gold string, on normalised tokens.
pub fn token_f1(prediction: &str, gold: &str) -> f64 {
    let p = normalize_tokens(prediction);
    let g = normalize_tokens(gold);
    if p.is_empty() || g.is_empty() {
        return f64::from(u8::from(p == g));
    }
    let mut counts: HashMap<&str, usize> = HashMap::new();
    for t in &g {
        *counts.entry(t).or_insert(0) += 1;
    }
    let mut same = 0usize;
    for t in &p {
        if let Some(n) = counts.get_mut(t.as_str()) {
            if *n > 0 {
                *n -= 1;
                same += 1;
            }
        }
    }
    if same == 0 {
        return 0.0;
    }
    let precision = same as f64 / p.len() as f64;
    let recall = same as f64 / g.len() as f64;
    2.0 * precision * recall / (precision + recall)
}

/// How a final answer scores against the gold answer and its aliases.
#[derive(Debug, Clone, PartialEq)]
pub struct Grade {
    /// The answer that was graded (the `Exact Answer:` field when present).
    pub answer: String,
    /// Normalised exact match with the answer or any alias.
    pub exact: bool,
    /// Best token F1 over the answer and its aliases.
    pub f1: f64,
}

/// Grades `response` (a whole final message or a bare answer) against `gold` and
/// `aliases`. The `Exact Answer:` field is graded when the response has one.
pub fn grade(response: &str, gold: &str, aliases: &[String]) -> Grade {
    let answer = extract_exact_answer(response).unwrap_or_else(|| response.trim().to_string());
    let norm = normalize(&answer);
    let golds = std::iter::once(gold).chain(aliases.iter().map(String::as_str));
    let mut exact = false;
    let mut f1: f64 = 0.0;
    for g in golds {
        exact |= !norm.is_empty() && normalize(g) == norm;
        f1 = f1.max(token_f1(&answer, g));
    }
    Grade { answer, exact, f1 }
}

/// The value of the last `Exact Answer:` line of a final message (case-insensitive, with
/// optional Markdown bold), if any.
pub fn extract_exact_answer(response: &str) -> Option<String> {
    response.lines().rev().find_map(|line| {
        let l = line.trim().trim_start_matches(['*', '#', '-', ' ']);
        let lower = l.to_lowercase();
        let rest = lower.strip_prefix("exact answer")?;
        let rest_orig = &l[l.len() - rest.len()..];
        let value = rest_orig.trim_start_matches(['*', ' ']).strip_prefix(':')?;
        let value = value.trim().trim_matches('*').trim();
        (!value.is_empty()).then(|| value.to_string())
    })
}

/// The LLM judge's instructions; `{question}`, `{response}` and `{answer}` are filled in by
/// [`render_judge_prompt`].
pub const JUDGE_TEMPLATE: &str = include_str!("../../../prompts/search_judge.txt");

/// Fills [`JUDGE_TEMPLATE`]. Aliases are listed after the answer as accepted variants.
pub fn render_judge_prompt(
    question: &str,
    response: &str,
    answer: &str,
    aliases: &[String],
) -> String {
    let mut gold = answer.to_string();
    if !aliases.is_empty() {
        gold.push_str(&format!(" (also accepted: {})", aliases.join("; ")));
    }
    JUDGE_TEMPLATE
        .replace("{question}", question)
        .replace("{response}", response)
        .replace("{answer}", &gold)
}

/// The verdict of the last `correct:` line of a judge reply.
pub fn parse_verdict(reply: &str) -> Result<bool, SearchError> {
    for line in reply.lines().rev() {
        let l = line
            .trim()
            .trim_start_matches(['*', '-', ' '])
            .to_lowercase();
        let Some(rest) = l.strip_prefix("correct") else {
            continue;
        };
        let Some(value) = rest.trim_start_matches(['*', ' ']).strip_prefix(':') else {
            continue;
        };
        let word: String = value
            .trim_matches(|c: char| c.is_whitespace() || matches!(c, '*' | '.' | '"' | '\''))
            .chars()
            .take_while(|c| c.is_alphabetic())
            .collect();
        return match word.as_str() {
            "yes" | "true" | "correct" => Ok(true),
            "no" | "false" | "incorrect" => Ok(false),
            _ => Err(SearchError::Invalid(format!(
                "judge reply: `correct:` is {:?}, expected yes or no",
                value.trim()
            ))),
        };
    }
    Err(SearchError::Invalid(
        "judge reply has no `correct: yes|no` line".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Expected values from Python 3.11.7:
    //   def norm(s):
    //       s = ''.join(c for c in s.lower() if c.isalnum() or c.isspace())
    //       return ' '.join(w for w in s.split() if w not in ('a', 'an', 'the'))
    #[test]
    fn normalisation_matches_python() {
        let cases = [
            ("The Old Man and the Sea", "old man and sea"),
            ("  U.S.A.!  ", "usa"),
            ("An apple, a day", "apple day"),
            ("Théâtre “Odéon” – Paris", "théâtre odéon paris"),
            ("2001: A Space Odyssey", "2001 space odyssey"),
            ("the", ""),
            ("ÉCOLE  then\tThe", "école then"),
        ];
        for (input, want) in cases {
            assert_eq!(normalize(input), want, "{input:?}");
        }
    }

    // Python 3.11.7, SQuAD's f1 over the tokens above:
    //   f1("old man sea", "Old Man and the Sea") == 0.8571428571428571
    //   f1("man man", "man") == 0.6666666666666666
    #[test]
    fn token_f1_matches_squad() {
        assert_eq!(
            token_f1("old man sea", "Old Man and the Sea"),
            0.8571428571428571
        );
        assert_eq!(token_f1("man man", "man"), 0.6666666666666666);
        assert_eq!(token_f1("x", "y"), 0.0);
        assert_eq!(token_f1("the", "a"), 1.0);
        assert_eq!(token_f1("the", "y"), 0.0);
    }

    #[test]
    fn grades_the_exact_answer_field_against_aliases() {
        let r = "Explanation: it is the planet.\n**Exact Answer:** Mercury\nConfidence: 80%";
        let g = grade(r, "Mercury (planet)", &["Mercury".into()]);
        assert_eq!(g.answer, "Mercury");
        assert!(g.exact);
        assert_eq!(g.f1, 1.0);
        let g = grade("the Mercury planet", "Mercury (planet)", &[]);
        assert!(g.exact);
        let g = grade("Mercury, the closest planet", "Mercury (planet)", &[]);
        assert!(!g.exact);
        assert_eq!(g.f1, 0.8);
        assert!(!grade("", "x", &[]).exact);
        assert_eq!(extract_exact_answer("no field here"), None);
        assert_eq!(
            extract_exact_answer("exact answer: A\nExact Answer: B").as_deref(),
            Some("B")
        );
    }

    #[test]
    fn judge_prompt_and_verdicts() {
        let p = render_judge_prompt("Q?", "It is X.", "X", &["Ex".into()]);
        assert!(p.contains("Question:\nQ?\n"));
        assert!(p.contains("X (also accepted: Ex)"));
        assert!(parse_verdict("reasoning: same\ncorrect: yes").unwrap());
        assert!(!parse_verdict("**correct:** No.").unwrap());
        assert!(parse_verdict("correct: maybe").is_err());
        assert!(parse_verdict("looks right").is_err());
        assert!(parse_verdict("correctness: high\ncorrect: yes").unwrap());
    }
}
