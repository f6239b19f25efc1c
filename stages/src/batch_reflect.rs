//! Stage `batch-reflect`, online form: one editor request per instance with its
//! tools and its single observed example (rendered by the environment, see
//! [`crate::env::OnlineEnv::examples`]); the reply's `FUNCTION:` / `DESCRIPTION:`
//! blocks rewrite descriptions; an instance whose docs do not change is frozen.
//! Semantics: `../shared/spec/toolobserver.md`, "Online mode". The offline form
//! (mini-batches over a shared tool set) is [`crate::offline`].

use crate::env::Example;
use crate::models::Editor;
use crate::rows::{DocRow, EditRow};
use pipeline::{StageCtx, StageError, Usage};
use serde_json::Value;

/// The stage name (shared with the offline form; the key's `mode` tells them apart).
pub const STAGE: &str = "batch-reflect";
/// 2: an instance whose agent call failed is not frozen (it was, as if it had
/// converged). 3: a description ends where the reply echoes the observed example
/// ([`ECHOED`]: a small editor copied the calls and their outcome into it).
pub const VERSION: u32 = 3;

/// The observed example's section labels (the environment's rendering: the user's
/// request, the calls, their outcome or output). A reply that repeats one has left the
/// description: the description ends there, at the start of a line or inside one
/// (`Outcome`, a common word, only at the start of a line).
pub const ECHOED: [&str; 4] = ["CALLS MADE", "USER QUESTION", "MODEL OUTPUT", "OUTCOME"];

/// One tool as the editor sees it.
pub fn render_tool(tool: &Value) -> String {
    let name = tool.get("name").and_then(Value::as_str).unwrap_or("?");
    let desc = match tool.get("description").and_then(Value::as_str) {
        Some(d) if !d.trim().is_empty() => d.to_string(),
        _ => "No description provided".to_string(),
    };
    let params = match tool
        .pointer("/parameters/properties")
        .and_then(Value::as_object)
    {
        Some(props) if !props.is_empty() => {
            let required: Vec<&str> = tool
                .pointer("/parameters/required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            props
                .iter()
                .map(|(k, v)| {
                    format!(
                        "  - {k}: {} ({})",
                        v.get("type").and_then(Value::as_str).unwrap_or("any"),
                        if required.contains(&k.as_str()) {
                            "required"
                        } else {
                            "optional"
                        }
                    )
                })
                .collect::<Vec<_>>()
                .join("\n")
        }
        _ => "  No parameter information".to_string(),
    };
    format!("Name: {name}\nDescription: {desc}\nParameters:\n{params}")
}

/// `name(k=v, ...)` with JSON values.
pub fn render_call(function: &str, args: &Value, raw: Option<&str>) -> String {
    match (args.as_object(), raw) {
        (Some(m), _) => format!(
            "{function}({})",
            m.iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        (None, Some(r)) => format!("{function}(<unparsable arguments: {r}>)"),
        (None, None) => format!("{function}()"),
    }
}

/// Parsed editor reply: (tool name, new description) blocks, and how many blocks
/// needed the lenient rules (markdown bold, headings, bullets, lower case, backticks).
#[derive(Debug, Default, PartialEq)]
pub struct ParsedReply {
    /// The `(tool name, new description)` blocks, in reply order.
    pub blocks: Vec<(String, String)>,
    /// How many of them needed the lenient rules.
    pub lenient: usize,
}

/// Strip markdown decoration around a `KEY:` header; returns (rest, was_lenient).
fn header<'a>(line: &'a str, key: &str) -> Option<(&'a str, bool)> {
    if let Some(rest) = line.strip_prefix(&format!("{key}:")) {
        return Some((rest, false));
    }
    let t = line.trim_start_matches(['#', '-', '*', '>', ' ']);
    let upper = t.to_ascii_uppercase();
    if !upper.starts_with(key) {
        return None;
    }
    let after = t[key.len()..].trim_start_matches(['*', '_', ' ']);
    let rest = after.strip_prefix(':')?;
    Some((rest.trim_start_matches(['*', '_']), true))
}

/// Where `line` repeats one of the example's labels ([`ECHOED`]) inside it: the byte
/// offset of the label (`Outcome` only at the line's start: see [`ECHOED`]).
fn echo_in(line: &str) -> Option<usize> {
    let upper = line.to_ascii_uppercase();
    ECHOED
        .iter()
        .filter_map(|label| {
            let at = format!("{label}:");
            match *label {
                "OUTCOME" => None,
                _ => upper.find(&at),
            }
        })
        .min()
}

/// Parses an editor reply's `FUNCTION:` / `DESCRIPTION:` blocks; a description runs
/// until the next `FUNCTION:` header or until the reply echoes the observed example
/// ([`ECHOED`]; what follows up to the next `FUNCTION:` is dropped), and blocks with
/// an empty name or description are dropped.
pub fn parse_reply(text: &str) -> ParsedReply {
    let mut out = ParsedReply::default();
    let mut name: Option<(String, bool)> = None;
    let mut desc: Option<String> = None;
    let flush =
        |name: &mut Option<(String, bool)>, desc: &mut Option<String>, out: &mut ParsedReply| {
            if let (Some((n, lenient)), Some(d)) = (name.take(), desc.take()) {
                let d = d.trim().to_string();
                if !n.is_empty() && !d.is_empty() {
                    out.lenient += lenient as usize;
                    out.blocks.push((n, d));
                }
            }
        };
    // Inside a block whose description already ended at an echo of the example.
    let mut echoed = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some((rest, lenient)) = header(trimmed, "FUNCTION") {
            echoed = false;
            flush(&mut name, &mut desc, &mut out);
            let n = rest
                .trim()
                .trim_matches(['`', '*', '"', '\''])
                .trim()
                .to_string();
            name = Some((n, lenient));
        } else if echoed {
            continue;
        } else if let Some((rest, lenient)) = header(trimmed, "DESCRIPTION") {
            if let Some((_, l)) = name.as_mut() {
                *l |= lenient;
            }
            let rest = rest.trim();
            let cut = echo_in(rest);
            echoed = cut.is_some();
            desc = Some(rest[..cut.unwrap_or(rest.len())].trim().to_string());
        } else if let Some(d) = desc.as_mut() {
            if ECHOED.iter().any(|l| header(trimmed, l).is_some()) {
                echoed = true;
                continue;
            }
            let cut = echo_in(trimmed);
            echoed = cut.is_some();
            let kept = trimmed[..cut.unwrap_or(trimmed.len())].trim();
            if !kept.is_empty() {
                d.push(' ');
                d.push_str(kept);
            }
        }
    }
    flush(&mut name, &mut desc, &mut out);
    out
}

/// What the editor is asked with: one struct, serialised as the stage key's params
/// and used by the run.
#[derive(serde::Serialize)]
pub struct ReflectParams<'a> {
    /// The editor model spec.
    pub editor: crate::models::ModelSpec,
    /// The editor prompt template (`{{tools}}` and `{{example}}` are filled in).
    pub template: &'a str,
    /// The reflection round whose docs this request makes.
    pub round: i64,
    /// Seed of the editor requests.
    pub seed: u64,
    /// The success guard (examples judged correct are not sent; uses gold labels).
    pub skip_success: bool,
    /// The environment's example parameters ([`crate::env::OnlineEnv::example_params`]);
    /// left out of the key when null.
    #[serde(skip_serializing_if = "serde_json::Value::is_null")]
    pub examples: serde_json::Value,
}

/// The editor's inputs for one round, besides the editor itself: the docs and, per
/// docs row (same order), what the editor is shown.
pub struct RoundInputs<'a> {
    /// The previous round's documentation rows, one per instance.
    pub docs: &'a [DocRow],
    /// What the editor is shown for each docs row, or why the row is not sent.
    pub examples: &'a [Example],
}

/// Runs one online reflection round: one editor request per docs row with an
/// example to show, then writes the round's docs (descriptions rewritten from the
/// reply's blocks; a row that did not change and did not fail is frozen) and one
/// [`EditRow`] per docs row.
pub fn run(
    ctx: &mut StageCtx<'_>,
    editor: &dyn Editor,
    params: &ReflectParams<'_>,
    inputs: &RoundInputs<'_>,
) -> Result<(), StageError> {
    if inputs.examples.len() != inputs.docs.len() {
        return Err(StageError::bug(
            STAGE,
            "one example per documentation row expected",
        ));
    }
    // Build every request first, so a model-backed editor can answer them concurrently.
    let mut prompts: Vec<String> = Vec::new();
    let mut prompt_of: Vec<Option<usize>> = Vec::with_capacity(inputs.docs.len());
    for (d, ex) in inputs.docs.iter().zip(inputs.examples) {
        match ex {
            Example::Show(example) if !d.frozen => {
                let tools = d.tools.as_array().cloned().unwrap_or_default();
                let tool_text = tools
                    .iter()
                    .map(render_tool)
                    .collect::<Vec<_>>()
                    .join("\n\n");
                prompt_of.push(Some(prompts.len()));
                prompts.push(
                    params
                        .template
                        .replace("{{tools}}", &tool_text)
                        .replace("{{example}}", example),
                );
            }
            _ => prompt_of.push(None),
        }
    }
    let pb = ctx.progress(prompts.len() as u64);
    let replies = editor.complete_all(&prompts, params.seed, &|| pb.inc(1));
    pb.finish_and_clear();
    crate::models::check_replies(STAGE, &replies, prompts.len())?;
    let mut usage = Usage::default();
    let mut new_docs = Vec::with_capacity(inputs.docs.len());
    let mut edits = Vec::with_capacity(inputs.docs.len());
    for ((d, slot), ex) in inputs.docs.iter().zip(prompt_of).zip(inputs.examples) {
        let mut next = d.clone();
        next.round = params.round;
        let mut edit = EditRow {
            instance_id: d.instance_id.clone(),
            round: params.round,
            model: params.editor.to_string(),
            sent: false,
            reply: None,
            updated: Vec::new(),
            lenient_parses: 0,
            error_kind: None,
            prompt_tokens: 0,
            completion_tokens: 0,
            reasoning_tokens: 0,
        };
        if let Some(reply) = slot.and_then(|i| replies.get(i)) {
            edit.sent = true;
            reply.usage.record(&mut usage, reply.error.is_some());
            edit.prompt_tokens = reply.usage.prompt_tokens as i64;
            edit.completion_tokens = reply.usage.completion_tokens as i64;
            edit.reasoning_tokens = reply.usage.reasoning_tokens as i64;
            if let Some(err) = &reply.error {
                edit.error_kind = Some(err.kind.clone());
            }
            if let Some(text) = &reply.text {
                let parsed = parse_reply(text);
                edit.lenient_parses = parsed.lenient as i64;
                let mut tools = d.tools.as_array().cloned().unwrap_or_default();
                for (name, desc) in parsed.blocks {
                    if let Some(tool) = tools
                        .iter_mut()
                        .find(|t| t.get("name").and_then(Value::as_str) == Some(name.as_str()))
                    {
                        if tool.get("description").and_then(Value::as_str) != Some(desc.as_str()) {
                            tool["description"] = Value::String(desc);
                            edit.updated.push(name);
                        }
                    }
                }
                next.tools = Value::Array(tools);
            }
            edit.reply = reply.text.clone();
        }
        next.changed = !edit.updated.is_empty();
        // Frozen = converged. A failed editor call is not convergence (the next round
        // asks again), and neither is a failed agent call (`Example::Retry`: nothing
        // was observed yet). A row frozen earlier stays frozen.
        next.frozen =
            d.frozen || (!next.changed && edit.error_kind.is_none() && *ex != Example::Retry);
        new_docs.push(next);
        edits.push(edit);
    }
    ctx.add_usage(&usage);
    ctx.write(&new_docs)?;
    ctx.write(&edits)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn strict_blocks() {
        // A small editor's echo of the example ends the description, on a line of
        // its own or inside one; the next block is read as usual.
        let r = parse_reply("FUNCTION: function_1\nDESCRIPTION: Cosine similarity of two vectors. Call function_1(a, b).\nCALLS MADE: function_1(vector1=[0.5])\nOutcome: ERROR: unexpected keyword\nIt failed.\nFUNCTION: function_2\nDESCRIPTION: Density of an object. Calls made: function_2(m=1)\n**User question:** what is\n");
        assert_eq!(
            r.blocks,
            vec![
                (
                    "function_1".to_string(),
                    "Cosine similarity of two vectors. Call function_1(a, b).".to_string()
                ),
                (
                    "function_2".to_string(),
                    "Density of an object.".to_string()
                ),
            ]
        );
        // `Outcome` inside a sentence is the description's own word.
        let r = parse_reply(
            "FUNCTION: f\nDESCRIPTION: Plays a game.\nReturns the outcome: win or loss.\n",
        );
        assert_eq!(
            r.blocks[0].1,
            "Plays a game. Returns the outcome: win or loss."
        );
        let r = parse_reply("FUNCTION: function_1\nDESCRIPTION: Adds two numbers.\nUse a and b.\n\nFUNCTION: function_2\nDESCRIPTION: x\n");
        assert_eq!(
            r.blocks,
            vec![
                (
                    "function_1".to_string(),
                    "Adds two numbers. Use a and b.".to_string()
                ),
                ("function_2".to_string(), "x".to_string())
            ]
        );
        assert_eq!(r.lenient, 0);
    }

    #[test]
    fn markdown_headers_are_accepted_and_counted() {
        let r = parse_reply("**FUNCTION:** `function_1`\n**DESCRIPTION:** Computes n!.\n## Function: function_2\n- Description: y");
        assert_eq!(r.blocks.len(), 2);
        assert_eq!(
            r.blocks[0],
            ("function_1".to_string(), "Computes n!.".to_string())
        );
        assert_eq!(r.blocks[1], ("function_2".to_string(), "y".to_string()));
        assert_eq!(r.lenient, 2);
    }

    #[test]
    fn tool_rendering_says_when_nothing_is_known() {
        let t = render_tool(&json!({"name": "function_1", "description": ""}));
        assert_eq!(t, "Name: function_1\nDescription: No description provided\nParameters:\n  No parameter information");
        let t = render_tool(
            &json!({"name": "f", "description": "d", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}),
        );
        assert!(t.ends_with("  - n: integer (required)"), "{t}");
    }
}
