//! GBNF grammars that constrain the embedded model to well-formed tool calls.
//!
//! The grammar accepts exactly the call format that [`crate::prompt`] teaches
//! the model:
//!
//! ```text
//! <tool_call>
//! {"name": "NAME", "arguments": {...}}
//! </tool_call>
//! ```
//!
//! `NAME` is one of the offered tools and the arguments follow that tool's
//! JSON schema (or are a bounded flat JSON object when it has none).
//!
//! Designed for decoding speed: whitespace is fixed (one space after `:` and
//! `,`, none elsewhere), so the grammar never branches on layout and most
//! positions admit one token; properties come in schema order (required
//! first, then optional ones); there is no unbounded nesting. The embedded
//! sampler checks the unconstrained choice first and only runs the grammar
//! over the whole vocabulary when that choice is rejected.
//!
//! This module is plain text generation (no llama.cpp), so it is tested
//! without the `embedded` feature.

use std::fmt::Write;

use serde_json::Value;

use crate::types::{ToolChoice, ToolDef};

/// Text that opens one call (shared with the prompt renderer).
pub const CALL_OPEN: &str = "<tool_call>\n";
/// Text that closes one call (shared with the prompt renderer).
pub const CALL_CLOSE: &str = "\n</tool_call>";

/// Most calls in one answer.
pub const MAX_CALLS: usize = 4;
/// Most keys of an object without a schema.
const FREE_OBJECT_MAX_KEYS: usize = 8;
/// Deeper schemas fall back to a generic value.
const MAX_DEPTH: usize = 6;
/// Optional properties beyond this count are matched by a generic key list.
const MAX_OPTIONAL_COMBINATIONS: usize = 8;

const COMMON_RULES: &str = r#"string ::= "\"" char* "\""
char ::= [^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F] [0-9a-fA-F])
integer ::= "-"? ("0" | [1-9] [0-9]{0,15})
number ::= integer ("." [0-9]+)? ([eE] [-+]? [0-9]+)?
boolean ::= "true" | "false"
null ::= "null"
scalar ::= string | number | boolean | null
scalar-array ::= "[" (scalar (", " scalar)*)? "]"
flat-value ::= scalar | scalar-array
flat-object ::= "{" (string ": " flat-value (", " string ": " flat-value)*)? "}"
any-value ::= flat-value | flat-object | "[" (flat-object (", " flat-object)*)? "]"
"#;

/// Builds the grammar for a request's tools and tool choice.
///
/// `Ok(None)`: nothing to constrain (no tools, or `ToolChoice::None`).
/// For `Auto` the root also admits a plain-text answer (any text that does
/// not start with `<`), so the model may answer without calling.
pub fn tool_call_grammar(tools: &[ToolDef], choice: &ToolChoice) -> Result<Option<String>, String> {
    if tools.is_empty() || *choice == ToolChoice::None {
        return Ok(None);
    }
    let offered: Vec<&ToolDef> = match choice {
        ToolChoice::Named(n) => {
            let t = tools.iter().find(|t| &t.name == n).ok_or_else(|| {
                format!("tool_choice names {n:?}, which is not among the offered tools")
            })?;
            vec![t]
        }
        _ => tools.iter().collect(),
    };
    let mut g = Builder::default();
    let mut alts = Vec::new();
    for t in &offered {
        let args = match &t.parameters {
            Some(schema) => g.schema(schema, 0),
            None => "free-object".to_owned(),
        };
        let rule = g.fresh("call");
        let head = format!(
            "{CALL_OPEN}{{\"name\": {}, \"arguments\": ",
            json_str(&t.name)
        );
        let tail = format!("}}{CALL_CLOSE}");
        g.rule(&rule, &format!("{} {args} {}", lit(&head), lit(&tail)));
        alts.push(rule);
    }
    g.rule("call", &alts.join(" | "));
    let calls = if matches!(choice, ToolChoice::Named(_)) {
        "call".to_owned()
    } else {
        format!("call (\"\\n\" call){{0,{}}}", MAX_CALLS - 1)
    };
    let root = if *choice == ToolChoice::Auto {
        format!("{calls} | text")
    } else {
        calls
    };
    let mut out = String::new();
    let _ = writeln!(out, "root ::= {root}");
    out.push_str(&g.rules);
    out.push_str(COMMON_RULES);
    let _ = writeln!(
        out,
        "free-object ::= \"{{\" (string \": \" any-value (\", \" string \": \" any-value){{0,{}}})? \"}}\"",
        FREE_OBJECT_MAX_KEYS - 1
    );
    if *choice == ToolChoice::Auto {
        out.push_str("text ::= [^<] [^\\x00]*\n");
    }
    Ok(Some(out))
}

#[derive(Default)]
struct Builder {
    rules: String,
    n: usize,
}

impl Builder {
    fn fresh(&mut self, prefix: &str) -> String {
        self.n += 1;
        format!("{prefix}-{}", self.n)
    }

    fn rule(&mut self, name: &str, body: &str) {
        let _ = writeln!(self.rules, "{name} ::= {body}");
    }

    /// A grammar expression for values matching `schema`.
    fn schema(&mut self, schema: &Value, depth: usize) -> String {
        if depth > MAX_DEPTH {
            return "any-value".into();
        }
        let Some(obj) = schema.as_object() else {
            return "any-value".into(); // `true` or junk: anything
        };
        if let Some(c) = obj.get("const") {
            return lit(&c.to_string());
        }
        if let Some(vals) = obj.get("enum").and_then(Value::as_array) {
            if !vals.is_empty() {
                let alts: Vec<String> = vals.iter().map(|v| lit(&v.to_string())).collect();
                return format!("({})", alts.join(" | "));
            }
        }
        for key in ["anyOf", "oneOf"] {
            if let Some(subs) = obj.get(key).and_then(Value::as_array) {
                if !subs.is_empty() {
                    let alts: Vec<String> =
                        subs.iter().map(|s| self.schema(s, depth + 1)).collect();
                    return format!("({})", alts.join(" | "));
                }
            }
        }
        match obj.get("type") {
            Some(Value::String(t)) => self.typed(t, obj, depth),
            Some(Value::Array(ts)) => {
                let alts: Vec<String> = ts
                    .iter()
                    .filter_map(Value::as_str)
                    .map(|t| self.typed(t, obj, depth))
                    .collect();
                if alts.is_empty() {
                    "any-value".into()
                } else {
                    format!("({})", alts.join(" | "))
                }
            }
            _ if obj.contains_key("properties") => self.typed("object", obj, depth),
            _ => "any-value".into(),
        }
    }

    fn typed(&mut self, ty: &str, obj: &serde_json::Map<String, Value>, depth: usize) -> String {
        match ty {
            "string" => "string".into(),
            "integer" => "integer".into(),
            "number" | "float" => "number".into(),
            "boolean" => "boolean".into(),
            "null" => "null".into(),
            "array" => {
                let item = match obj.get("items") {
                    Some(s) => self.schema(s, depth + 1),
                    None => "flat-value".into(),
                };
                format!("\"[\" ({item} (\", \" {item})*)? \"]\"")
            }
            "object" => self.object(obj, depth),
            _ => "any-value".into(),
        }
    }

    fn object(&mut self, obj: &serde_json::Map<String, Value>, depth: usize) -> String {
        let props = match obj.get("properties").and_then(Value::as_object) {
            Some(p) if !p.is_empty() => p,
            _ => return "free-object".into(),
        };
        let required: Vec<&str> = obj
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut req_kvs = Vec::new();
        let mut opt_kvs = Vec::new();
        // Required ones in the order of `required`, then the rest in schema order.
        for name in &required {
            if let Some(s) = props.get(*name) {
                let v = self.schema(s, depth + 1);
                req_kvs.push(format!("{} {v}", lit(&format!("{}: ", json_str(name)))));
            }
        }
        // Sorted, so the grammar does not depend on serde_json's map order.
        let mut names: Vec<&String> = props.keys().collect();
        names.sort();
        for name in names {
            if required.contains(&name.as_str()) {
                continue;
            }
            let v = self.schema(&props[name], depth + 1);
            opt_kvs.push(format!("{} {v}", lit(&format!("{}: ", json_str(name)))));
        }
        let body = if !req_kvs.is_empty() {
            let mut b = req_kvs.join(" \", \" ");
            for kv in &opt_kvs {
                let _ = write!(b, " (\", \" {kv})?");
            }
            b
        } else if opt_kvs.len() <= MAX_OPTIONAL_COMBINATIONS {
            // Any ordered subset: pick the first present one, then optional rest.
            let firsts: Vec<String> = (0..opt_kvs.len())
                .map(|i| {
                    let mut s = opt_kvs[i].clone();
                    for kv in &opt_kvs[i + 1..] {
                        let _ = write!(s, " (\", \" {kv})?");
                    }
                    format!("({s})")
                })
                .collect();
            format!("({})?", firsts.join(" | "))
        } else {
            let kv = self.fresh("kv");
            self.rule(&kv, &opt_kvs.join(" | "));
            format!("({kv} (\", \" {kv})*)?")
        };
        let name = self.fresh("obj");
        self.rule(&name, &format!("\"{{\" {body} \"}}\""));
        name
    }
}

/// JSON encoding of a string (with quotes).
fn json_str(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// A GBNF string literal matching `s` exactly.
pub fn lit(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02X}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn weather() -> ToolDef {
        ToolDef {
            name: "get_weather".into(),
            description: Some("Weather".into()),
            parameters: Some(json!({
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["c", "f"]},
                    "days": {"type": "integer"}
                },
                "required": ["city"]
            })),
        }
    }

    #[test]
    fn no_grammar_without_tools_or_with_none() {
        assert_eq!(tool_call_grammar(&[], &ToolChoice::Required).unwrap(), None);
        assert_eq!(
            tool_call_grammar(&[weather()], &ToolChoice::None).unwrap(),
            None
        );
    }

    #[test]
    fn required_choice_grammar_shape() {
        let g = tool_call_grammar(&[weather()], &ToolChoice::Required)
            .unwrap()
            .unwrap();
        assert!(g.starts_with("root ::= call (\"\\n\" call){0,3}\n"), "{g}");
        assert!(
            g.contains(r#""<tool_call>\n{\"name\": \"get_weather\", \"arguments\": ""#),
            "{g}"
        );
        assert!(
            g.contains(r#""\"city\": " string (", " "\"days\": " integer)? (", " "\"unit\": " ("\"c\"" | "\"f\""))?"#),
            "{g}"
        );
        assert!(!g.contains("text ::="));
    }

    #[test]
    fn named_choice_offers_one_tool_and_unknown_name_is_an_error() {
        let other = ToolDef {
            name: "other".into(),
            description: None,
            parameters: None,
        };
        let tools = [weather(), other];
        let g = tool_call_grammar(&tools, &ToolChoice::Named("other".into()))
            .unwrap()
            .unwrap();
        assert!(
            g.contains("\\\"other\\\"") && !g.contains("get_weather"),
            "{g}"
        );
        assert!(g.contains("free-object"));
        assert!(tool_call_grammar(&tools, &ToolChoice::Named("nope".into())).is_err());
    }

    #[test]
    fn auto_admits_text() {
        let g = tool_call_grammar(&[weather()], &ToolChoice::Auto)
            .unwrap()
            .unwrap();
        assert!(
            g.starts_with("root ::= call (\"\\n\" call){0,3} | text\n"),
            "{g}"
        );
    }

    #[test]
    fn literals_are_escaped() {
        assert_eq!(lit("a\"b\\c\nd"), r#""a\"b\\c\nd""#);
        assert_eq!(lit("\u{1}"), r#""\x01""#);
    }
}
