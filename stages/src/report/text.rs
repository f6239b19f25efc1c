//! The documentation edits of a report as plain text (`otb report --edits`): each
//! description ToolObserver changed, before and after every round that changed it
//! (the subject's tools it never changed counted, not printed),
//! then the items whose verdict changed after an edit. What the page's
//! "Documentation edits" section shows, for a terminal.

use super::model::Report;
use std::fmt::Write;

/// Characters of one description printed; the rest is counted (the page has it
/// whole, up to its own cap).
pub const TEXT_CHARS: usize = 400;

/// `s` on one line (whitespace runs as one space), at most `n` characters, with
/// what was cut counted.
fn one_line(s: &str, n: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.is_empty() {
        return "(no description)".into();
    }
    let total = flat.chars().count();
    if total <= n {
        return flat;
    }
    let kept: String = flat.chars().take(n).collect();
    format!("{kept}… ({} more characters)", total - n)
}

/// The documentation edits and flipped items of `r`, as text.
pub fn edits(r: &Report) -> String {
    let d = &r.docs;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Documentation edits: {} subjects changed by ToolObserver, {} never changed.",
        d.subjects.len(),
        d.unchanged
    );
    for s in &d.subjects {
        let mut head = format!("\n== {} · {}", s.env, s.setting);
        if !s.instance.is_empty() {
            head.push_str(&format!(" · {}", s.instance));
        }
        head.push_str(&format!(" · agent {}", s.agent));
        if !s.editor.is_empty() {
            head.push_str(&format!(" · editor {}", s.editor));
        }
        let _ = writeln!(out, "{head}");
        let unchanged = crate::metrics::docs::unchanged(s.tools.iter().map(|t| t.rounds.len()));
        for t in s.tools.iter().filter(|t| t.rounds.len() >= 2) {
            let _ = writeln!(out, "  {}", t.tool);
            for (k, (round, text)) in t.rounds.iter().enumerate() {
                let when = if k == 0 {
                    "round 0 (what the agent saw first)".to_string()
                } else {
                    format!("after round {round}")
                };
                let _ = writeln!(out, "    {when}: {}", one_line(text, TEXT_CHARS));
            }
        }
        if unchanged > 0 {
            let _ = writeln!(out, "  ({unchanged} other tools unchanged)");
        }
    }
    let _ = writeln!(
        out,
        "\nItems whose verdict changed after an edit: {}",
        d.flips.len()
    );
    for f in &d.flips {
        let mut line = format!(
            "  {} · {} · round {}: {}",
            f.setting, f.item, f.round, f.direction
        );
        if !f.tools.is_empty() {
            line.push_str(&format!(" (edited in that round: {})", f.tools.join(", ")));
        }
        let _ = writeln!(out, "{line}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::model::{DocEdits, DocSubject, Flip, ToolHistory};

    #[test]
    fn edits_print_each_round_and_each_flip() {
        let r = Report {
            docs: DocEdits {
                subjects: vec![DocSubject {
                    env: "bfcl",
                    setting: "names".into(),
                    agent: "embedded:x".into(),
                    editor: "embedded:x".into(),
                    instance: "exec_simple_0".into(),
                    tools: vec![
                        ToolHistory {
                            tool: "function_1".into(),
                            rounds: vec![
                                (0, String::new()),
                                (1, "Adds  two\nnumbers.".into()),
                                (2, "x".repeat(TEXT_CHARS + 5)),
                            ],
                            others: Vec::new(),
                        },
                        ToolHistory {
                            tool: "function_2".into(),
                            rounds: vec![(0, "Never edited.".into())],
                            others: Vec::new(),
                        },
                    ],
                }],
                unchanged: 3,
                flips: vec![Flip {
                    setting: "names".into(),
                    agent: "embedded:x".into(),
                    editor: "embedded:x".into(),
                    item: "exec_simple_0".into(),
                    round: 1,
                    cell: 0,
                    direction: "wrong -> right",
                    tools: vec!["function_1".into()],
                }],
                frozen: Default::default(),
            },
            ..Report::default()
        };
        let t = edits(&r);
        assert!(
            t.contains("1 subjects changed by ToolObserver, 3 never changed"),
            "{t}"
        );
        assert!(
            t.contains("== bfcl · names · exec_simple_0 · agent embedded:x · editor embedded:x"),
            "{t}"
        );
        assert!(
            t.contains("round 0 (what the agent saw first): (no description)"),
            "{t}"
        );
        assert!(t.contains("after round 1: Adds two numbers."), "{t}");
        assert!(t.contains("… (5 more characters)"), "{t}");
        assert!(
            !t.contains("function_2") && !t.contains("Never edited."),
            "{t}"
        );
        assert!(t.contains("(1 other tools unchanged)"), "{t}");
        assert!(
            t.contains("names · exec_simple_0 · round 1: wrong -> right (edited in that round: function_1)"),
            "{t}"
        );
    }
}
