//! EasyTool (`baselines.md`): two editor passes per tool set, no tool execution.
//!
//! 1. condense: each tool's documentation into a short statement of purpose;
//! 2. guidelines: per tool a usage scenario and an example parameter payload.
//!
//! The final description is the condensed text followed by
//! `Example scenario: <scenario> Call with <json>`. A tool the model's JSON does not
//! mention keeps its description; the parameter schema (where the setting shows one)
//! is never touched.

use super::{
    extract_json, fill, set_description, str_field, tool_description, tool_name, tools_of, Phase,
    Produced, Work,
};
use crate::batch_reflect::render_tool;
use serde_json::{Map, Value};

/// The stage name.
pub const STAGE: &str = "easytool";
/// The stage version.
pub const VERSION: u32 = 1;
/// The condense pass's prompt: each tool's purpose in a short statement.
pub const CONDENSE: &str = include_str!("../../../prompts/easytool_condense.txt");
/// The guidelines pass's prompt: per tool a usage scenario and example parameters.
pub const GUIDELINES: &str = include_str!("../../../prompts/easytool_guidelines.txt");
/// Both templates, in pass order (hashed into the stage key).
pub const TEMPLATES: [&str; 2] = [CONDENSE, GUIDELINES];

/// One editor pass over the whole tool set; its reply's JSON object (keyed by tool
/// name), or an empty map when the reply has none.
fn pass(w: &mut Work<'_>, step: &str, template: &str, tools: &[Value]) -> Map<String, Value> {
    let rendered = tools
        .iter()
        .map(render_tool)
        .collect::<Vec<_>>()
        .join("\n\n");
    w.ask(
        "",
        step,
        Phase::Editing,
        &fill(template, &[("tools", &rendered)]),
        0,
    )
    .and_then(|t| extract_json(&t))
    .unwrap_or_default()
}

/// EasyTool on one instance.
pub fn produce(w: &mut Work<'_>) -> Produced {
    let mut tools = tools_of(w.docs);
    let condensed = pass(w, "condense", CONDENSE, &tools);
    for t in tools.iter_mut() {
        if let Some(d) = condensed.get(tool_name(t)).and_then(Value::as_str) {
            if !d.trim().is_empty() {
                set_description(t, d.trim());
            }
        }
    }
    let guide = pass(w, "guidelines", GUIDELINES, &tools);
    for t in tools.iter_mut() {
        let Some(g) = guide.get(tool_name(t)).and_then(Value::as_object) else {
            continue;
        };
        let scenario = str_field(g, "Scenario");
        let params = match g.get("Parameters") {
            Some(Value::Object(m)) => Value::Object(m.clone()),
            _ => Value::Object(Default::default()),
        };
        if scenario.is_empty() {
            continue;
        }
        let desc = format!(
            "{} Example scenario: {scenario} Call with {params}",
            tool_description(t).trim()
        );
        set_description(t, desc.trim());
    }
    Produced::docs(tools)
}
#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::*;
    use super::*;

    #[test]
    fn two_passes_no_execution() {
        let editor = FnEditor::new(|p: &str| {
            if p.contains("condensed description") {
                "```json\n{\"function_1\": \"Greatest common divisor of two integers.\"}\n```"
                    .into()
            } else {
                "{\"function_1\": {\"Scenario\": \"A user wants the gcd of 12 and 18.\", \"Parameters\": {\"a\": 12, \"b\": 18}}}".into()
            }
        });
        let runner = FnRunner::new(|_| ToolOutput {
            ok: true,
            text: "6".into(),
        });
        let tb = toolbox(&editor, &runner);
        let (inst, doc) = instance();
        let mut w = Work::new(&tb, STAGE, &inst, &doc);
        let p = produce(&mut w);
        assert_eq!(
            p.tools[0]["description"],
            "Greatest common divisor of two integers. Example scenario: A user wants the gcd of 12 and 18. Call with {\"a\":12,\"b\":18}"
        );
        assert_eq!(editor.calls(), 2, "exactly two editor passes");
        assert_eq!(runner.count(), 0, "EasyTool never executes a tool");
        assert!(w.runs.is_empty());
        assert_eq!(w.calls.len(), 2);
        assert!(w
            .calls
            .iter()
            .all(|c| c.phase == "editing" && c.prompt_tokens == 10));
    }

    #[test]
    fn unparsable_replies_keep_the_docs() {
        let editor = FnEditor::new(|_: &str| "I cannot help with that.".into());
        let runner = FnRunner::new(|_| ToolOutput {
            ok: true,
            text: "6".into(),
        });
        let tb = toolbox(&editor, &runner);
        let (inst, doc) = instance();
        let mut w = Work::new(&tb, STAGE, &inst, &doc);
        let p = produce(&mut w);
        assert_eq!(Value::Array(p.tools), doc.tools);
        assert_eq!(runner.count(), 0);
    }
}
