//! Renders a [`ChatRequest`] into the text prompt of a local model, and
//! parses the generated text back into content and tool calls.
//!
//! Template: ChatML (`<|im_start|>role ... <|im_end|>`), used by both bundled
//! models (SmolLM2, Qwen2.5). Tools are described in the system turn as JSON
//! lines inside `<tools>` tags and calls are requested as JSON inside
//! `<tool_call>` tags, the convention these models were tuned on. Tool
//! results go back as a user turn wrapped in `<tool_response>` tags.

use serde_json::{json, Value};

use crate::grammar::{CALL_CLOSE, CALL_OPEN};
use crate::types::{ChatRequest, Role, ToolCall, ToolChoice, ToolDef};

/// Renders the whole prompt, ending with the opened assistant turn.
pub fn render_chatml(req: &ChatRequest) -> String {
    let mut out = String::new();
    let mut msgs = req.messages.iter().peekable();
    let mut system = String::new();
    if let Some(m) = msgs.peek() {
        if m.role == Role::System {
            system = m.content.clone().unwrap_or_default();
            msgs.next();
        }
    }
    let tools_section = tools_section(&req.tools, &req.tool_choice);
    if !system.is_empty() || !tools_section.is_empty() {
        out.push_str("<|im_start|>system\n");
        if system.is_empty() {
            system = "You are a helpful assistant.".into();
        }
        out.push_str(&system);
        out.push_str(&tools_section);
        out.push_str("<|im_end|>\n");
    }
    for m in msgs {
        match m.role {
            Role::Tool => {
                out.push_str("<|im_start|>user\n<tool_response>\n");
                out.push_str(m.content.as_deref().unwrap_or(""));
                out.push_str("\n</tool_response><|im_end|>\n");
            }
            Role::Assistant => {
                out.push_str("<|im_start|>assistant\n");
                let mut parts: Vec<String> = Vec::new();
                if let Some(c) = m.content.as_deref().filter(|c| !c.is_empty()) {
                    parts.push(c.to_owned());
                }
                for c in &m.tool_calls {
                    parts.push(render_call(c));
                }
                out.push_str(&parts.join("\n"));
                out.push_str("<|im_end|>\n");
            }
            role => {
                out.push_str("<|im_start|>");
                out.push_str(role.as_str());
                out.push('\n');
                out.push_str(m.content.as_deref().unwrap_or(""));
                out.push_str("<|im_end|>\n");
            }
        }
    }
    out.push_str("<|im_start|>assistant\n");
    out
}

fn tools_section(tools: &[ToolDef], choice: &ToolChoice) -> String {
    if tools.is_empty() || *choice == ToolChoice::None {
        return String::new();
    }
    let mut s = String::from(
        "\n\n# Tools\n\nYou can call the functions listed below to help answer. \
         Their signatures, one JSON object per line, are inside <tools></tools>:\n<tools>\n",
    );
    for t in tools {
        let mut f = json!({"name": t.name});
        if let Some(d) = &t.description {
            f["description"] = json!(d);
        }
        if let Some(p) = &t.parameters {
            f["parameters"] = p.clone();
        }
        s.push_str(&json!({"type": "function", "function": f}).to_string());
        s.push('\n');
    }
    s.push_str(
        "</tools>\n\nTo call a function, reply with a JSON object holding its name and \
         arguments inside <tool_call></tool_call> tags:\n<tool_call>\n\
         {\"name\": <function-name>, \"arguments\": <args-json-object>}\n</tool_call>",
    );
    match choice {
        ToolChoice::Required => s.push_str("\nYou must call at least one function."),
        ToolChoice::Named(n) => {
            s.push_str(&format!("\nYou must call the function {n}."));
        }
        _ => {}
    }
    s
}

/// A call as the tool-call grammar makes the model write it (one space after
/// `:` and `,`), so that the cells of the generated call are reused when the
/// conversation comes back with it.
fn render_call(c: &ToolCall) -> String {
    let args = c
        .arguments
        .clone()
        .unwrap_or_else(|| Value::String(c.arguments_raw.clone()));
    let mut out = format!("{CALL_OPEN}{{\"name\": {}, \"arguments\": ", json!(c.name));
    spaced_json(&args, &mut out);
    out.push('}');
    out.push_str(CALL_CLOSE);
    out
}

/// `v` as JSON with one space after `:` and `,` (the grammar's layout), keys
/// in their order.
fn spaced_json(v: &Value, out: &mut String) {
    match v {
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                spaced_json(x, out);
            }
            out.push(']');
        }
        Value::Object(m) => {
            out.push('{');
            for (i, (k, x)) in m.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(&json!(k).to_string());
                out.push_str(": ");
                spaced_json(x, out);
            }
            out.push('}');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Splits generated text into free content and tool calls. A call whose JSON
/// does not parse (e.g. cut off by the token limit) is kept with its raw
/// arguments and flagged (`arguments: None`).
pub fn parse_output(text: &str) -> (Option<String>, Vec<ToolCall>) {
    let open = CALL_OPEN.trim_end();
    let close = CALL_CLOSE.trim_start();
    let mut content = String::new();
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(open) {
        content.push_str(&rest[..start]);
        let after = &rest[start + open.len()..];
        let (body, next) = match after.find(close) {
            Some(end) => (&after[..end], &after[end + close.len()..]),
            None => (after, ""),
        };
        calls.push(parse_call(body.trim(), calls.len()));
        rest = next;
    }
    content.push_str(rest);
    let content = content.trim();
    let content = (!content.is_empty()).then(|| content.to_owned());
    (content, calls)
}

fn parse_call(body: &str, i: usize) -> ToolCall {
    let id = format!("call_{i}");
    if let Ok(v) = serde_json::from_str::<Value>(body) {
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let raw = match v.get("arguments") {
            Some(Value::String(s)) => s.clone(),
            Some(a) => a.to_string(),
            None => "{}".into(),
        };
        return ToolCall::new(id, name, raw);
    }
    // Cut-off JSON: recover the name and keep the raw argument text.
    let name = body
        .split("\"name\": \"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap_or("")
        .to_owned();
    let raw = body
        .split_once("\"arguments\": ")
        .map(|(_, a)| a.to_owned())
        .unwrap_or_default();
    ToolCall {
        id,
        name,
        arguments_raw: raw,
        arguments: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Message;

    /// A call comes back into the prompt exactly as the model wrote it under
    /// the grammar, so its KV cells are reused on the next turn.
    #[test]
    fn a_generated_call_renders_back_as_written() {
        let written = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"q\": \"caf\u{e9} \\\"x\\\"\", \"n\": [1, 2.5, -3], \"o\": {\"b\": true, \"a\": null}}}\n</tool_call>";
        let (content, calls) = parse_output(written);
        assert_eq!(content, None);
        assert_eq!(calls.len(), 1);
        assert_eq!(render_call(&calls[0]), written);
    }

    #[test]
    fn renders_tools_calls_and_results() {
        let mut req = ChatRequest::new(
            "m",
            vec![
                Message::system("Be brief."),
                Message::user("Weather in Oslo?"),
                Message::assistant_tool_calls(
                    None,
                    vec![ToolCall::new("c0", "get_weather", r#"{"city":"Oslo"}"#)],
                ),
                Message::tool_result("c0", "-3C"),
            ],
        );
        req.tools = vec![ToolDef {
            name: "get_weather".into(),
            description: None,
            parameters: None,
        }];
        let p = render_chatml(&req);
        assert!(
            p.starts_with("<|im_start|>system\nBe brief.\n\n# Tools"),
            "{p}"
        );
        assert!(
            p.contains(r#"{"type":"function","function":{"name":"get_weather"}}"#),
            "{p}"
        );
        assert!(p.contains(
            "<|im_start|>assistant\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call><|im_end|>"
        ), "{p}");
        assert!(p.contains("<tool_response>\n-3C\n</tool_response>"));
        assert!(p.ends_with("<|im_start|>assistant\n"));
    }

    #[test]
    fn parses_calls_and_text() {
        let text = "Let me check.\n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": \"g\", \"arguments\": {\"b\": ";
        let (content, calls) = parse_output(text);
        assert_eq!(content.as_deref(), Some("Let me check."));
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "f");
        assert_eq!(calls[0].arguments, Some(json!({"a": 1})));
        assert_eq!(calls[1].name, "g");
        assert!(calls[1].arguments_malformed());
        assert_eq!(calls[1].arguments_raw, "{\"b\":");
        assert_eq!(
            parse_output("just text"),
            (Some("just text".into()), vec![])
        );
    }
}
