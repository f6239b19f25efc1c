//! Reading the offline editor's replies: `**Tool: <name>**` blocks, each with a field
//! (`Updated description:` in a batch analysis, `Final description:` in the merge)
//! whose text is the tool's new description.
//!
//! Models write these replies in many shapes (bold or heading headers, numbered
//! lists, code fences, a `Reasoning:` after the description, a closing decision
//! framework or summary that names every tool). The description is what the agent
//! will read, so it must hold the description and nothing after it: a trailing
//! section that compares the tools would put other tools' names into a description
//! (which the merge prompt forbids) and leak the editor's reasoning to the agent.
//!
//! A description starts on its field's line (or, when that line has no text, on the
//! next non-empty line) and ends at the first of:
//! - the next tool block (a `Tool: <name>` line, or a heading naming a known tool);
//! - a Markdown heading (`#`), a bold line (`**...`), a horizontal rule (`---`);
//! - a field header (`Reasoning:`, `Evidence: ...`): after a blank line any
//!   `Word words:` header, directly after the text only the fields editors are known
//!   to write after a description ([`TRAILING_FIELDS`]);
//! - a blank line followed by a paragraph that closes the reply rather than
//!   continuing the description: one that names another known tool (a comparison or
//!   a decision framework), or one that opens as a summary ([`CLOSING_OPENERS`]); any
//!   other paragraph (or list item) after a blank line is the description's next
//!   paragraph, kept with its paragraph break;
//! - the end of a code fence that held it.
//!
//! A tool named twice keeps its last description (a reply that corrects itself). A
//! placeholder (`None.`, `N/A`, `No change`, `Unchanged`: the embedded model writes
//! `Updated description: None.`) is no description: the tool keeps its own.

/// Fields that editors write after a description; a line starting with one ends the
/// description even without a blank line before it.
pub const TRAILING_FIELDS: &[&str] = &[
    "reasoning",
    "reason",
    "rationale",
    "justification",
    "evidence",
    "behaviour",
    "behavior",
    "distinguishing features",
    "distinguishing characteristics",
    "observed patterns",
    "comparative strengths/weaknesses",
    "strengths",
    "weaknesses",
    "confidence",
    "summary",
    "notes",
    "note",
    "final description",
    "updated description",
    "decision framework",
    "framework",
    "selection framework",
    "tool selection",
    "selection guide",
    "selection heuristics",
    "recommendation",
    "recommendations",
    "conclusion",
    "overall",
];

/// How a closing paragraph (a summary of the whole reply, not of one tool) starts;
/// after a blank line such a paragraph ends the description.
pub const CLOSING_OPENERS: &[&str] = &[
    "in summary",
    "to summarize",
    "to summarise",
    "in conclusion",
    "overall",
    "summary",
];

/// Whether `line` (cleaned) names a known tool other than `own`, as a whole word.
fn names_another_tool(line: &str, own: &str, known: &[&str]) -> bool {
    line.split(|c: char| !c.is_alphanumeric() && c != '_')
        .any(|w| w != own && known.contains(&w))
}

/// A line with Markdown decoration removed: list markers, heading hashes, bold and
/// backticks.
fn clean(line: &str) -> String {
    let t = line.trim();
    let t = strip_list_marker(t);
    t.trim_start_matches(['#', '>', ' '])
        .replace("**", "")
        .replace("__", "")
        .replace('`', "")
        .trim()
        .to_string()
}

/// `- x`, `* x`, `+ x`, `1. x`, `1) x` -> `x`.
fn strip_list_marker(t: &str) -> &str {
    for m in ["- ", "* ", "+ ", "• "] {
        if let Some(r) = t.strip_prefix(m) {
            return r.trim_start();
        }
    }
    let digits = t.chars().take_while(char::is_ascii_digit).count();
    if digits > 0 && digits <= 3 {
        let rest = &t[digits..];
        for m in [". ", ") "] {
            if let Some(r) = rest.strip_prefix(m) {
                return r.trim_start();
            }
        }
    }
    t
}

fn is_list_item(line: &str) -> bool {
    let t = line.trim();
    strip_list_marker(t).len() != t.len()
}

fn is_rule(line: &str) -> bool {
    let t: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    t.len() >= 3
        && (t.chars().all(|c| c == '-')
            || t.chars().all(|c| c == '*')
            || t.chars().all(|c| c == '_'))
}

fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// `Word words:` at the start of a cleaned line (up to five words before the colon,
/// the first capitalised): the shape of a field header. Returns the header, lower case.
fn field_header(cleaned: &str) -> Option<String> {
    let (head, rest) = cleaned.split_once(':')?;
    let words: Vec<&str> = head.split_whitespace().collect();
    if words.is_empty()
        || words.len() > 5
        || !head.starts_with(char::is_alphabetic)
        || !(rest.is_empty() || rest.starts_with(char::is_whitespace))
    {
        return None;
    }
    if !head
        .chars()
        .all(|c| c.is_alphabetic() || matches!(c, ' ' | '/' | '-' | '\'' | '(' | ')'))
    {
        return None;
    }
    Some(head.trim().to_ascii_lowercase())
}

/// A tool name out of a header's text: its first token, without quotes, brackets and
/// trailing punctuation (`function_1 (the strong one)` -> `function_1`).
fn name_of(text: &str) -> String {
    let tok = text.split_whitespace().next().unwrap_or("");
    tok.trim_matches(|c: char| {
        matches!(
            c,
            '[' | ']' | '"' | '\'' | '*' | '`' | '(' | ')' | ':' | ',' | '.' | ';'
        )
    })
    .to_string()
}

/// The tool a line opens a block for: `Tool: <name>` (bold, heading, list item) or a
/// heading / bold line that is only a known tool's name.
fn tool_header(line: &str, cleaned: &str, known: &[&str]) -> Option<String> {
    let lc = cleaned.to_ascii_lowercase();
    if let Some(rest) = lc.strip_prefix("tool:") {
        let start = cleaned.len() - rest.len();
        let name = name_of(&cleaned[start..]);
        return (!name.is_empty()).then_some(name);
    }
    let t = line.trim();
    let decorated =
        t.starts_with('#') || t.starts_with("**") || is_list_item(t) && t.contains("**");
    if decorated {
        let bare = cleaned.trim_end_matches(':').trim();
        if known.contains(&bare) {
            return Some(bare.to_string());
        }
    }
    None
}

/// Whether `d` says there is no new description rather than giving one.
fn is_placeholder(d: &str) -> bool {
    let t: String = d
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace() || *c == '/')
        .collect::<String>()
        .to_ascii_lowercase();
    matches!(
        t.trim(),
        "none"
            | "n/a"
            | "na"
            | "no change"
            | "no changes"
            | "unchanged"
            | "same"
            | "same as before"
    )
}

/// How a reply's blocks were read.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Blocks {
    /// `(tool, description)` in the order first seen; a tool named twice keeps its
    /// last description.
    pub descriptions: Vec<(String, String)>,
    /// Descriptions cut short by a rule of the module doc (something followed them).
    pub cut: usize,
    /// Tools that had more than one block.
    pub repeated: usize,
}

/// Stands between two paragraphs of a description while it is read (a cleaned line is
/// never empty, so it cannot be one).
const PARAGRAPH: &str = "";

struct Open {
    name: String,
    desc: Option<Vec<String>>,
    /// Inside a code fence that started the description.
    fenced: bool,
    /// The previous line was blank.
    blank: bool,
    done: bool,
}

/// Read the `field` of every tool block in `text`. `known` are the tools' names (a
/// heading that is only a known name opens a block too); names not in it are kept
/// (the caller decides).
pub fn parse(text: &str, field: &str, known: &[&str]) -> Blocks {
    let field_lc = field.to_ascii_lowercase();
    let mut out = Blocks::default();
    let mut open: Option<Open> = None;
    let finish = |o: Option<Open>, out: &mut Blocks| {
        let Some(o) = o else { return };
        let Some(lines) = o.desc else { return };
        // Paragraphs (split at the PARAGRAPH marker), each on one line.
        let d = lines
            .split(|l| l == PARAGRAPH)
            .map(|p| p.join(" ").split_whitespace().collect::<Vec<_>>().join(" "))
            .filter(|p| !p.is_empty())
            .collect::<Vec<_>>()
            .join("\n\n");
        if o.name.is_empty() || d.is_empty() || is_placeholder(&d) {
            return;
        }
        match out.descriptions.iter_mut().find(|(n, _)| *n == o.name) {
            Some(slot) => {
                slot.1 = d;
                out.repeated += 1;
            }
            None => out.descriptions.push((o.name, d)),
        }
    };
    for line in text.lines() {
        let c = clean(line);
        if let Some(name) = tool_header(line, &c, known) {
            finish(open.take(), &mut out);
            open = Some(Open {
                name,
                desc: None,
                fenced: false,
                blank: false,
                done: false,
            });
            continue;
        }
        let Some(o) = open.as_mut() else { continue };
        if o.done {
            continue;
        }
        let lc = c.to_ascii_lowercase();
        if let Some(rest) = lc.strip_prefix(&format!("{field_lc}:")) {
            // The field (again): its text starts here.
            let start = c.len() - rest.len();
            let first = c[start..].trim();
            o.desc = Some(if first.is_empty() {
                Vec::new()
            } else {
                vec![first.to_string()]
            });
            o.blank = false;
            o.fenced = false;
            continue;
        }
        let Some(desc) = o.desc.as_mut() else {
            continue;
        };
        let started = !desc.is_empty();
        if is_fence(line) {
            if o.fenced {
                o.fenced = false;
                o.done = started;
            } else if !started {
                o.fenced = true;
            } else {
                o.done = true;
                out.cut += 1;
            }
            continue;
        }
        if o.fenced {
            if !line.trim().is_empty() {
                desc.push(line.trim().to_string());
            }
            continue;
        }
        if line.trim().is_empty() {
            o.blank = started;
            continue;
        }
        if started {
            let t = line.trim();
            let header = field_header(&c);
            let closing = o.blank
                && !is_list_item(t)
                && (names_another_tool(&c, &o.name, known)
                    || CLOSING_OPENERS.iter().any(|w| {
                        lc.strip_prefix(w)
                            .is_some_and(|r| !r.starts_with(char::is_alphanumeric))
                    }));
            let ends = t.starts_with('#')
                || t.starts_with("**")
                || is_rule(t)
                || header
                    .as_deref()
                    .is_some_and(|h| o.blank || TRAILING_FIELDS.contains(&h))
                || closing;
            if ends {
                o.done = true;
                out.cut += 1;
                continue;
            }
            if o.blank && !is_list_item(t) {
                desc.push(PARAGRAPH.to_string());
            }
            o.blank = false;
            desc.push(c);
        } else if !is_rule(line) {
            desc.push(c);
        }
    }
    finish(open.take(), &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: &[&str] = &["function_1", "function_2", "function_3", "function_4"];

    fn descs(text: &str, field: &str) -> Vec<(String, String)> {
        parse(text, field, KNOWN).descriptions
    }

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn markdown_headers_and_continuation_lines() {
        let text = "Some preamble.\n**Tool: function_1**\nBehaviour: strong.\nUpdated description: Plays the best move\nin most positions.\n\n## Tool: `function_2`\n- **Updated description:** Random moves.\n**Tool: function_3**\nBehaviour: no field\n";
        assert_eq!(
            descs(text, "Updated description"),
            pairs(&[
                ("function_1", "Plays the best move in most positions."),
                ("function_2", "Random moves."),
            ])
        );
    }

    /// The shape the authors' batch prompt asks for: the description on the line after
    /// its field, then `Reasoning:`, and a decision framework after the last tool.
    #[test]
    fn reasoning_and_a_closing_decision_framework_stay_out() {
        let text = "**Tool: function_1**\n\nObserved patterns: wins material early.\n\nDistinguishing characteristics: stronger than function_2.\n\nUpdated description:\nSuggests strong, solid moves; reliable whenever the position is sharp.\n\nReasoning: trajectories 2, 5 and 7 show gains after it.\n\n**Tool: function_2**\n\nUpdated description:\nOften suggests moves that lose material.\n\nReasoning: trajectory 3.\n\n## Decision framework\nUse function_1 first; function_2 never.\n";
        let b = parse(text, "Updated description", KNOWN);
        assert_eq!(
            b.descriptions,
            pairs(&[
                (
                    "function_1",
                    "Suggests strong, solid moves; reliable whenever the position is sharp."
                ),
                ("function_2", "Often suggests moves that lose material."),
            ])
        );
        assert_eq!(b.cut, 2);
    }

    #[test]
    fn a_trailing_field_without_a_blank_line_ends_the_description() {
        let text = "Tool: function_1\nUpdated description: Returns a move.\nReasoning: seen in 4 games.\nTool: function_2\nFinal description: x\n";
        assert_eq!(
            descs(text, "Updated description"),
            pairs(&[("function_1", "Returns a move.")])
        );
    }

    /// A summary paragraph after the last tool (no header at all) names other tools.
    #[test]
    fn a_summary_paragraph_after_the_last_tool_stays_out() {
        let text = "**Tool: function_1**\nFinal description: Strong in most positions.\n\n**Tool: function_2**\nFinal description: Weak; avoid it.\n\nIn summary, function_1 should be preferred over function_2 in every position.\n";
        assert_eq!(
            descs(text, "Final description"),
            pairs(&[
                ("function_1", "Strong in most positions."),
                ("function_2", "Weak; avoid it."),
            ])
        );
    }

    /// A closing section's header directly under a description (no blank line) ends
    /// it, as `Reasoning:` does.
    #[test]
    fn a_decision_framework_line_directly_under_a_description_ends_it() {
        let text = "**Tool: function_1**\nFinal description: Strong in sharp positions.\n**Tool: function_2**\nFinal description: Weak; avoid it.\nDecision framework: use function_1 first, function_2 never.\n";
        let b = parse(text, "Final description", KNOWN);
        assert_eq!(
            b.descriptions,
            pairs(&[
                ("function_1", "Strong in sharp positions."),
                ("function_2", "Weak; avoid it."),
            ])
        );
        assert_eq!(b.cut, 1);
    }

    /// A description of two paragraphs keeps both, with the break between them; a
    /// closing paragraph that opens as a summary does not join it.
    #[test]
    fn a_second_paragraph_is_kept_and_a_summary_is_not() {
        let text = "**Tool: function_1**\nFinal description: Returns the news articles\nthat match a query.\n\nEach result carries its date; an empty query fails.\n\n**Tool: function_2**\nFinal description: Returns encyclopedia pages.\n\nIn summary, both tools answer most questions.\n";
        assert_eq!(
            descs(text, "Final description"),
            pairs(&[
                (
                    "function_1",
                    "Returns the news articles that match a query.\n\nEach result carries its date; an empty query fails."
                ),
                ("function_2", "Returns encyclopedia pages."),
            ])
        );
    }

    #[test]
    fn numbered_lists_and_bold_fields() {
        let text = "1. **Tool: function_1**\n   - **Behaviour:** good\n   - **Updated description:** Finds the best continuation.\n2. **Tool: function_2**\n   - **Updated description:** Plays random legal moves.\n   - **Reasoning:** evaluations drop after it.\n";
        assert_eq!(
            descs(text, "Updated description"),
            pairs(&[
                ("function_1", "Finds the best continuation."),
                ("function_2", "Plays random legal moves."),
            ])
        );
    }

    #[test]
    fn a_description_written_as_a_list_keeps_its_items() {
        let text = "**Tool: function_1**\nFinal description:\n- Use it when the position is quiet.\n- Avoid it when many pieces are gone.\n\n- It rarely blunders.\n\n---\n**Tool: function_2**\nFinal description: Avoid.\n";
        assert_eq!(
            descs(text, "Final description"),
            pairs(&[
                (
                    "function_1",
                    "Use it when the position is quiet. Avoid it when many pieces are gone. It rarely blunders."
                ),
                ("function_2", "Avoid."),
            ])
        );
    }

    #[test]
    fn code_fences_hold_a_description_and_end_it() {
        let text = "**Tool: function_1**\nUpdated description:\n```\nSuggests a move for the side to play.\n```\nReasoning: obvious.\n**Tool: function_2**\nUpdated description: Searches news.\n```json\n{\"function_1\": 1}\n```\n";
        assert_eq!(
            descs(text, "Updated description"),
            pairs(&[
                ("function_1", "Suggests a move for the side to play."),
                ("function_2", "Searches news."),
            ])
        );
    }

    #[test]
    fn a_tool_omitted_and_a_tool_named_twice() {
        let text = "**Tool: function_1**\nFinal description: first try.\n\n**Tool: function_3**\nFinal description: the third.\n\n**Tool: function_1**\nFinal description: corrected.\n";
        let b = parse(text, "Final description", KNOWN);
        assert_eq!(
            b.descriptions,
            pairs(&[("function_1", "corrected."), ("function_3", "the third.")])
        );
        assert_eq!(b.repeated, 1);
    }

    #[test]
    fn headings_that_are_only_a_tool_name_open_blocks() {
        let text = "### function_1\nUpdated description: Good in sharp positions.\n### `function_2`:\nUpdated description: Good in quiet ones.\n";
        assert_eq!(
            descs(text, "Updated description"),
            pairs(&[
                ("function_1", "Good in sharp positions."),
                ("function_2", "Good in quiet ones."),
            ])
        );
    }

    #[test]
    fn header_names_lose_decoration_and_asides() {
        let text = "**Tool: function_1 (the strong one)**\nFinal description: Strong.\n**Tool: \"function_2\":**\nFinal description: Weak.\n";
        assert_eq!(
            descs(text, "Final description"),
            pairs(&[("function_1", "Strong."), ("function_2", "Weak.")])
        );
    }

    #[test]
    fn a_horizontal_rule_and_a_heading_end_the_last_description() {
        let text = "Tool: function_4\nFinal description: Returns documents\nabout many subjects.\n---\nOverall function_4 is best.\n";
        assert_eq!(
            descs(text, "Final description"),
            pairs(&[("function_4", "Returns documents about many subjects.")])
        );
        let text = "Tool: function_4\nFinal description: Returns documents.\n# Selection heuristics\nfunction_1 first.\n";
        assert_eq!(
            descs(text, "Final description"),
            pairs(&[("function_4", "Returns documents.")])
        );
    }

    #[test]
    fn a_placeholder_is_no_description() {
        let text = "**Tool: function_1**\nUpdated description: None.\n**Tool: function_2**\nUpdated description: N/A\n**Tool: function_3**\nUpdated description: None of the moves lose.\n";
        assert_eq!(
            descs(text, "Updated description"),
            pairs(&[("function_3", "None of the moves lose.")])
        );
    }

    #[test]
    fn a_field_the_reply_never_writes_gives_nothing() {
        assert!(descs("**Tool: function_1**\nBehaviour: x\n", "Final description").is_empty());
        assert!(descs("no blocks at all", "Final description").is_empty());
        assert!(descs("Final description: orphan text", "Final description").is_empty());
    }

    /// Replies the embedded Qwen2.5-Coder-1.5B wrote as editor in `make
    /// reproduce-table4` and `make reproduce-table3` (2026-11-25): every description is the text of its field and
    /// nothing after it; the first batch reply was cut by the token limit (then 512)
    /// inside `tool_5`'s description (the parser keeps what is there; the stages drop
    /// a cut reply's last description: `EditorReply::cut`).
    #[test]
    fn replies_the_embedded_model_wrote() {
        let names: Vec<String> = (1..=10)
            .flat_map(|i| [format!("tool_{i}"), format!("function_{i}")])
            .collect();
        let known: Vec<&str> = names.iter().map(String::as_str).collect();
        for (file, field, tools) in [
            (
                include_str!("testdata/search_batch_1.txt"),
                "Updated description",
                5,
            ),
            (
                include_str!("testdata/search_batch_2.txt"),
                "Updated description",
                1,
            ),
            (
                include_str!("testdata/search_merge_1.txt"),
                "Final description",
                5,
            ),
            (
                include_str!("testdata/search_merge_2.txt"),
                "Final description",
                10,
            ),
        ] {
            let b = parse(file, field, &known);
            assert_eq!(b.descriptions.len(), tools, "{file}");
            for (name, d) in &b.descriptions {
                assert!(known.contains(&name.as_str()), "{name}");
                for leak in ["Behaviour", "Distinguishing", "**", "Tool:"] {
                    assert!(!d.contains(leak), "{name}: {d}");
                }
                // No other tool's block ran into this one.
                let others = known
                    .iter()
                    .filter(|n| **n != name.as_str())
                    .filter(|n| {
                        d.split(|c: char| !c.is_alphanumeric() && c != '_')
                            .any(|w| w == **n)
                    })
                    .count();
                assert_eq!(others, 0, "{name}: {d}");
            }
        }
        let b = parse(
            include_str!("testdata/search_batch_1.txt"),
            "Updated description",
            &known,
        );
        assert_eq!(b.descriptions[4].1, "tool_5 is the most");
    }

    #[test]
    fn field_headers_have_a_shape() {
        assert_eq!(field_header("Reasoning: x").as_deref(), Some("reasoning"));
        assert_eq!(
            field_header("Comparative strengths/weaknesses: x").as_deref(),
            Some("comparative strengths/weaknesses")
        );
        assert_eq!(field_header("It plays e4: a strong move"), None);
        assert_eq!(field_header("http://x"), None);
        assert_eq!(field_header("no colon here"), None);
    }
}
