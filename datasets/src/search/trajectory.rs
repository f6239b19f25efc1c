//! A search episode as the offline editor sees it (`../shared/spec/toolobserver.md`):
//! question, final answer, whether it was judged correct, number of calls, the tool
//! sequence, then per call the tool name, the query (a switch: the reference did not show
//! queries) and the output cut to a token budget; the first [`EditorView::max_calls`]
//! calls are shown, the rest counted. Whatever a model or a dataset wrote is bounded:
//! the question, the answer, a query and an output keep at most [`MAX_TEXT_CHARS`]
//! characters (a cut says so), a tool name (the agent may call one that does not
//! exist) is quoted by its ends ([`crate::quote::clip`]).

use super::tools::truncate_tokens;
use crate::quote::clip;

/// The most characters of a question, an answer, a query or an output (after its
/// token budget) the editor is shown: a model's 1 MB answer or query, or one word of
/// a megabyte in a document, is cut there, saying how long it was.
pub const MAX_TEXT_CHARS: usize = 2000;

/// `s`, or its first [`MAX_TEXT_CHARS`] characters and how many there were.
fn bounded(s: &str) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(MAX_TEXT_CHARS) {
        None => s.into(),
        Some((cut, _)) => format!(
            "{} [... cut: {} characters in all]",
            &s[..cut],
            s.chars().count()
        )
        .into(),
    }
}

/// One tool call of an episode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchCall {
    /// The tool name the agent called.
    pub tool: String,
    /// The query it passed (or the raw arguments when they were not a query).
    pub query: String,
    /// The tool's output (or the error text the agent was shown).
    pub output: String,
}

/// One episode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SearchTrajectory {
    /// The question asked.
    pub question: String,
    /// The agent's final answer (empty when it gave none).
    pub final_answer: String,
    /// Whether the final answer was judged correct (the outcome signal); `None`: not
    /// judged (an LLM judge's reply gave no verdict), shown to the editor as such.
    pub correct: Option<bool>,
    /// The calls in order.
    pub calls: Vec<SearchCall>,
}

/// What the editor is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EditorView {
    /// Show each call's query (off in the reference implementation).
    pub show_queries: bool,
    /// Calls shown in detail; later ones are only counted.
    pub max_calls: usize,
    /// Whitespace tokens kept of each output.
    pub output_tokens: usize,
}

impl Default for EditorView {
    fn default() -> Self {
        EditorView {
            show_queries: false,
            max_calls: 10,
            output_tokens: 100,
        }
    }
}

/// Renders `t` for the editor.
pub fn serialize_for_editor(t: &SearchTrajectory, view: &EditorView) -> String {
    let mut s = String::new();
    s.push_str(&format!("Question: {}\n", bounded(t.question.trim())));
    let answer = t.final_answer.trim();
    s.push_str(&format!(
        "Final answer: {}\n",
        if answer.is_empty() {
            "(none)".into()
        } else {
            bounded(answer)
        }
    ));
    s.push_str(&format!(
        "Judged: {}\n",
        match t.correct {
            Some(true) => "correct",
            Some(false) => "incorrect",
            None => "not judged",
        }
    ));
    s.push_str(&format!("Tool calls: {}\n", t.calls.len()));
    let seq: Vec<_> = t.calls.iter().map(|c| clip(&c.tool)).collect();
    s.push_str(&format!(
        "Tool sequence: {}\n",
        if seq.is_empty() {
            "(none)".to_string()
        } else {
            seq.join(" -> ")
        }
    ));
    for (i, c) in t.calls.iter().take(view.max_calls).enumerate() {
        s.push_str(&format!("Call {}: {}\n", i + 1, clip(&c.tool)));
        if view.show_queries {
            s.push_str(&format!("  Query: {}\n", bounded(c.query.trim())));
        }
        let (out, cut) = truncate_tokens(c.output.trim(), view.output_tokens);
        let out = bounded(out).replace('\n', "\n    ");
        s.push_str(&format!(
            "  Output: {out}{}\n",
            if cut { " [...]" } else { "" }
        ));
    }
    if t.calls.len() > view.max_calls {
        s.push_str(&format!(
            "({} more calls not shown)\n",
            t.calls.len() - view.max_calls
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn traj(n: usize) -> SearchTrajectory {
        SearchTrajectory {
            question: "Which river?".into(),
            final_answer: "Nile".into(),
            correct: Some(true),
            calls: (0..n)
                .map(|i| SearchCall {
                    tool: format!("tool_{}", i % 3 + 1),
                    query: format!("query {i}"),
                    output: "one two\nthree four".into(),
                })
                .collect(),
        }
    }

    #[test]
    fn renders_header_calls_and_count() {
        let view = EditorView {
            output_tokens: 3,
            max_calls: 2,
            ..EditorView::default()
        };
        let s = serialize_for_editor(&traj(3), &view);
        assert_eq!(
            s,
            "Question: Which river?\nFinal answer: Nile\nJudged: correct\nTool calls: 3\n\
             Tool sequence: tool_1 -> tool_2 -> tool_3\n\
             Call 1: tool_1\n  Output: one two\n    three [...]\n\
             Call 2: tool_2\n  Output: one two\n    three [...]\n\
             (1 more calls not shown)\n"
        );
        assert!(!s.contains("query 0"));
        let shown = serialize_for_editor(
            &traj(1),
            &EditorView {
                show_queries: true,
                ..EditorView::default()
            },
        );
        assert!(shown.contains("  Query: query 0\n"));
        assert!(shown.contains("three four\n"));
        assert!(!shown.contains("more calls"));
    }

    /// A 1 MB question, answer, query and output word, and a tool name of 100,000
    /// characters: the editor's view stays a few KiB and says what was cut.
    #[test]
    fn what_a_model_wrote_is_bounded() {
        let huge = "w".repeat(1_000_000);
        let t = SearchTrajectory {
            question: huge.clone(),
            final_answer: huge.clone(),
            correct: Some(false),
            calls: vec![SearchCall {
                tool: "t".repeat(100_000),
                query: huge.clone(),
                output: huge,
            }],
        };
        let view = EditorView {
            show_queries: true,
            ..EditorView::default()
        };
        let s = serialize_for_editor(&t, &view);
        assert!(s.len() < 10_000, "{} bytes", s.len());
        assert_eq!(s.matches("[... cut: 1000000 characters in all]").count(), 4);
        assert!(s.contains("[100000 characters, 99800 left out]"));
    }

    #[test]
    fn empty_episode() {
        let mut t = traj(0);
        t.final_answer.clear();
        t.correct = Some(false);
        let s = serialize_for_editor(&t, &EditorView::default());
        assert!(s.contains(
            "Final answer: (none)\nJudged: incorrect\nTool calls: 0\nTool sequence: (none)\n"
        ));
        // A judge reply without a verdict is not an incorrect answer.
        t.correct = None;
        let s = serialize_for_editor(&t, &EditorView::default());
        assert!(s.contains("\nJudged: not judged\n"), "{s}");
    }
}
