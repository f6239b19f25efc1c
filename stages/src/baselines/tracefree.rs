//! Trace-Free+ (`baselines.md`): one generator request per tool rewrites its
//! description from the tool's interface (name, parameters, current description) --
//! trace-free -- or from the interface and a few recorded calls of the tool --
//! trace-based (`[baselines.tracefree] traces = k`). The reply is a JSON object
//! `{"description": ...}`; a reply without one is asked again (`retries`) and then
//! counted as malformed, and the tool keeps its description. No tool is executed:
//! the recorded calls are the Base round-0 trajectories the pipeline already has.

use super::budget::TraceFreeBudget;
use super::{extract_json, fill, set_description, tool_name, tools_of, Phase, Produced, Work};
use crate::batch_reflect::render_tool;
use serde_json::Value;

/// The stage name.
pub const STAGE: &str = "tracefree";
/// The stage version.
pub const VERSION: u32 = 1;
/// The generator's request for one tool (`{{tool}}`, `{{traces}}`).
pub const GENERATE: &str = include_str!("../../../prompts/tracefree_generate.txt");
/// The recorded calls shown in a trace-based request (`{{traces}}`).
pub const TRACES: &str = include_str!("../../../prompts/tracefree_traces.txt");
/// Both templates (hashed into the stage key).
pub const TRACEFREE_TEMPLATES: [&str; 2] = [GENERATE, TRACES];
/// The longest description kept (characters); a longer one is cut there.
pub const MAX_DESCRIPTION_CHARS: usize = 4000;
/// How much of a reply is read for its JSON object (characters): a pathological
/// reply costs at most this much parsing.
pub const MAX_REPLY_CHARS: usize = 64 * 1024;
/// How much of one recorded call is shown to the generator (characters).
pub const TRACE_CHARS: usize = 1500;

/// `s` cut to at most `n` characters (at a character boundary).
fn cut(s: &str, n: usize) -> (&str, bool) {
    match s.char_indices().nth(n) {
        Some((i, _)) => (&s[..i], true),
        None => (s, false),
    }
}

/// Whether `text` names the tool `name` as a whole word (so `function_1` is not
/// found in `function_10`).
pub fn mentions(text: &str, name: &str) -> bool {
    if name.is_empty() {
        return false;
    }
    let word = |c: char| c.is_alphanumeric() || c == '_';
    text.match_indices(name).any(|(i, _)| {
        let before = text[..i].chars().next_back();
        let after = text[i + name.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// The description in a generator reply, bounded; `None` when the reply has no JSON
/// object with a non-empty `description` string.
pub fn parse_reply(reply: &str) -> Option<(String, bool)> {
    let (head, _) = cut(reply, MAX_REPLY_CHARS);
    let m = extract_json(head)?;
    let d = m.get("description").and_then(Value::as_str)?.trim();
    if d.is_empty() {
        return None;
    }
    let (kept, was_cut) = cut(d, MAX_DESCRIPTION_CHARS);
    Some((kept.to_string(), was_cut))
}

/// The trace section of a request for `name`: up to `k` of `traces` that name the
/// tool, numbered and each bounded; empty when there are none (or `k` is 0).
pub fn trace_section(traces: &[String], name: &str, k: u32) -> String {
    let seen: Vec<String> = traces
        .iter()
        .filter(|t| mentions(t, name))
        .take(k as usize)
        .enumerate()
        .map(|(i, t)| {
            let (shown, was_cut) = cut(t.trim(), TRACE_CHARS);
            format!("{}. {shown}{}", i + 1, if was_cut { " [...]" } else { "" })
        })
        .collect();
    if seen.is_empty() {
        return String::new();
    }
    fill(TRACES, &[("traces", &seen.join("\n"))])
}

/// Trace-Free+ on one instance: each tool's description from one generator request
/// (`traces`: the recorded calls of this instance's tools, as text). The requests of
/// an instance are sent together (a model-backed generator answers them
/// concurrently); those whose reply had no usable JSON are sent again, up to
/// `retries` times.
pub fn produce(w: &mut Work<'_>, b: &TraceFreeBudget, traces: &[String]) -> Produced {
    let mut tools = tools_of(w.docs);
    // (index of the tool, (its name, its request)) still to be answered.
    let mut open: Vec<(usize, (String, String))> = tools
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let name = tool_name(t).to_string();
            let prompt = fill(
                GENERATE,
                &[
                    ("tool", &render_tool(t)),
                    ("traces", &trace_section(traces, &name, b.traces)),
                ],
            );
            (i, (name, prompt))
        })
        .collect();
    for attempt in 0..=u64::from(b.retries) {
        if open.is_empty() {
            break;
        }
        let asks: Vec<(&str, &str)> = open
            .iter()
            .map(|(_, (name, prompt))| (name.as_str(), prompt.as_str()))
            .collect();
        let replies = w.ask_all("generate", Phase::Editing, &asks, attempt);
        let mut again = Vec::new();
        for ((i, ask), reply) in open.into_iter().zip(replies) {
            // A failed call is recorded with its class (and fails the stage when it is
            // infrastructure's); the tool keeps its description.
            let Some(text) = reply.text else { continue };
            match parse_reply(&text) {
                Some((d, was_cut)) => {
                    if was_cut {
                        w.mark_call(reply.call, "description-cut");
                    }
                    set_description(&mut tools[i], &d);
                }
                None => {
                    w.mark_call(reply.call, "malformed-reply");
                    again.push((i, ask));
                }
            }
        }
        open = again;
    }
    Produced::docs(tools)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::*;
    use super::*;

    #[test]
    fn one_request_per_tool_and_the_description_from_its_json() {
        let editor = FnEditor::new(|p: &str| {
            assert!(p.contains("function_1"), "{p}");
            "Sure!\n```json\n{\"description\": \"Greatest common divisor of a and b.\"}\n```".into()
        });
        let runner = FnRunner::new(|_| ToolOutput {
            ok: true,
            text: "6".into(),
        });
        let tb = toolbox(&editor, &runner);
        let (inst, doc) = instance();
        let mut w = Work::new(&tb, STAGE, &inst, &doc);
        let p = produce(&mut w, &TraceFreeBudget::default(), &[]);
        assert_eq!(
            p.tools[0]["description"],
            "Greatest common divisor of a and b."
        );
        assert_eq!(editor.calls(), tools_of(&doc).len() as u64);
        assert_eq!(runner.count(), 0, "Trace-Free+ never executes a tool");
        assert!(w
            .calls
            .iter()
            .all(|c| c.step == "generate" && c.error_kind.is_none()));
    }

    #[test]
    fn hostile_replies_are_retried_bounded_and_counted() {
        // 1 MB inside the JSON: only the first MAX_REPLY_CHARS are read, so the object
        // never closes (malformed); 10,000 characters: kept, cut to the maximum.
        let huge = format!("{{\"description\": \"{}\"}}", "x".repeat(1 << 20));
        let long = format!("{{\"description\": \"{}\"}}", "x".repeat(10_000));
        let nested = format!("{}1{}", "{\"a\":".repeat(200), "}".repeat(200));
        for (reply, kind, kept) in [
            ("no json here".to_string(), Some("malformed-reply"), false),
            ("x".repeat(1 << 20), Some("malformed-reply"), false),
            ("{".repeat(1 << 20), Some("malformed-reply"), false),
            (nested, Some("malformed-reply"), false),
            (huge, Some("malformed-reply"), false),
            (long, Some("description-cut"), true),
        ] {
            let editor = FnEditor::new(move |_: &str| reply.clone());
            let runner = FnRunner::new(|_| ToolOutput {
                ok: true,
                text: String::new(),
            });
            let tb = toolbox(&editor, &runner);
            let (inst, doc) = instance();
            let mut w = Work::new(&tb, STAGE, &inst, &doc);
            let p = produce(&mut w, &TraceFreeBudget::default(), &[]);
            let d = p.tools[0]["description"].as_str().unwrap();
            if kept {
                assert_eq!(d.chars().count(), MAX_DESCRIPTION_CHARS);
            } else {
                assert_eq!(d, doc.tools[0]["description"].as_str().unwrap(), "kept");
            }
            let n = tools_of(&doc).len();
            // Malformed: asked twice (one retry) per tool, each counted.
            let per_tool = if kept { 1 } else { 2 };
            assert_eq!(w.calls.len(), n * per_tool);
            assert!(w.calls.iter().all(|c| c.error_kind.as_deref() == kind));
        }
    }

    #[test]
    fn traces_name_the_tool_as_a_whole_word_and_are_bounded() {
        assert!(mentions("called function_1(a=1)", "function_1"));
        assert!(!mentions("called function_10(a=1)", "function_1"));
        let traces = vec![
            "function_10(x=1) -> ok".to_string(),
            format!("function_1(a=1) -> {}", "y".repeat(5000)),
            "function_1(a=2) -> error".to_string(),
            "function_1(a=3) -> 3".to_string(),
        ];
        let s = trace_section(&traces, "function_1", 2);
        assert!(
            s.contains("1. function_1(a=1)") && s.contains("[...]"),
            "{s}"
        );
        assert!(s.contains("2. function_1(a=2) -> error"), "{s}");
        assert!(!s.contains("a=3") && !s.contains("function_10"), "{s}");
        assert_eq!(trace_section(&traces, "function_1", 0), "");
        assert_eq!(trace_section(&traces, "other", 3), "");
    }
}
