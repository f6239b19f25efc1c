//! Scripted (deterministic) models: no model needed, used by tests and by
//! `experiments/scripted.toml`.
//!
//! | spec                 | what                                                        |
//! |----------------------|-------------------------------------------------------------|
//! | `scripted:schema`    | deterministic agent: picks a tool by word overlap, takes parameter names from the schema or from a `Parameters: a, b` sentence in the description, fills them with the question's literals in order; with no names known it calls with no arguments |
//! | `scripted:empty`     | deterministic agent: calls the first tool with no arguments |
//! | `scripted:errors`    | deterministic editor: turns `missing ... arguments: 'a', 'b'` error texts in its prompt into `Parameters: a, b.` descriptions; asked for a JSON tool call (Play2Prompt, DRAFT), calls with the argument names such texts revealed (each = 1; a name revealed by `missing required argument \"x\"` gets the string `\"x\"`) |
//! | `scripted:silent`    | deterministic editor that never proposes a change           |
//! | `scripted:judge`     | deterministic answer judge (search's `judge`): `correct: yes` when the reference answer's words appear in the response, in order |
//! | `scripted:observer`  | deterministic offline editor (search): describes each tool by the titles its calls returned in the trajectories (`Updated description: Finds documents such as ...`); leaves merging to the majority fallback |
//! | `scripted:echo`      | `otb serve` only: answers `echo: ` and the start of the last user message ([`llm::Scripted::echo`]), to measure and test the server without a model |
//!
//! Scripted models report one token per whitespace-separated word of their prompt
//! and reply, so token accounting is exercised without a model.

use super::{Agent, AgentJob, AgentTurn, CallUsage, Editor, EditorReply, MultiTurn};
use crate::rows::CallRecord;
use serde_json::{Map, Value};

/// Scripted agents by name. `chess-oracle` is provided by the chess environment
/// (it needs the rules) and registered by the driver; `search-oracle` and
/// `search-wrong` by the search environment (they need the questions' domains).
pub const AGENTS: &[&str] = &[
    "schema",
    "empty",
    "random",
    "chess-oracle",
    "search-oracle",
    "search-wrong",
];
/// Scripted editors by name.
pub const EDITORS: &[&str] = &["errors", "silent", "observer", "judge"];
/// Scripted models `otb serve` can serve (a backend each, [`served`]).
pub const SERVED: &[&str] = &["echo"];

/// The backend of the servable scripted model called `name` (one of [`SERVED`]).
pub fn served(name: &str) -> Option<std::sync::Arc<dyn llm::Backend>> {
    match name {
        "echo" => Some(std::sync::Arc::new(llm::Scripted::echo())),
        _ => None,
    }
}

/// The scripted agent called `name` (one of [`AGENTS`]).
pub fn agent(name: &str) -> Option<Box<dyn MultiTurn>> {
    match name {
        "schema" => Some(Box::new(SchemaAgent)),
        "empty" => Some(Box::new(EmptyAgent)),
        "random" => Some(Box::new(RandomAgent)),
        _ => None,
    }
}

/// The scripted editor called `name` (one of [`EDITORS`]).
pub fn editor(name: &str) -> Option<Box<dyn Editor>> {
    match name {
        "errors" => Some(Box::new(ErrorsEditor)),
        "silent" => Some(Box::new(SilentEditor)),
        "observer" => Some(Box::new(ObserverEditor)),
        "judge" => Some(Box::new(JudgeEditor)),
        _ => None,
    }
}

/// Scripted models' token counts: whitespace-separated words, so that token
/// accounting is exercised (and checkable) without a model.
pub fn pseudo_tokens(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

fn scripted_agent_usage(job: &AgentJob<'_>, calls: &[CallRecord]) -> CallUsage {
    let tools = serde_json::to_string(job.tools).unwrap_or_default();
    let out = serde_json::to_string(calls).unwrap_or_default();
    CallUsage {
        // The scripted agents ignore the system prompt, and so does their count: a
        // prompt edit then leaves their output bytes unchanged (early cutoff).
        prompt_tokens: pseudo_tokens(job.question) + pseudo_tokens(&tools),
        completion_tokens: pseudo_tokens(&out.replace([',', ':'], " ")),
        ..Default::default()
    }
}

fn scripted_editor_reply(prompt: &str, text: String) -> EditorReply {
    EditorReply {
        usage: CallUsage {
            prompt_tokens: pseudo_tokens(prompt),
            completion_tokens: pseudo_tokens(&text),
            ..Default::default()
        },
        text: Some(text),
        error: None,
        cut: false,
    }
}

/// Calls one tool chosen uniformly at random (seeded by the question and the seed)
/// with no arguments: the floor any documentation should beat.
struct RandomAgent;

impl MultiTurn for RandomAgent {}

impl Agent for RandomAgent {
    fn act(&self, job: &AgentJob<'_>) -> AgentTurn {
        let h = job.question.bytes().fold(1469598103934665603u64, |h, b| {
            (h ^ b as u64).wrapping_mul(1099511628211)
        });
        let calls = if job.tools.is_empty() {
            Vec::new()
        } else {
            let i = ((h ^ job.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15)) % job.tools.len() as u64)
                as usize;
            vec![CallRecord {
                function: job.tools[i]
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string(),
                args: Value::Object(Map::new()),
                raw: None,
            }]
        };
        AgentTurn {
            usage: scripted_agent_usage(job, &calls),
            calls,
            ..Default::default()
        }
    }
}

struct EmptyAgent;

impl MultiTurn for EmptyAgent {}

impl Agent for EmptyAgent {
    fn act(&self, job: &AgentJob<'_>) -> AgentTurn {
        let calls = job
            .tools
            .first()
            .and_then(|t| t.get("name").and_then(Value::as_str))
            .map(|name| {
                vec![CallRecord {
                    function: name.to_string(),
                    args: Value::Object(Map::new()),
                    raw: None,
                }]
            })
            .unwrap_or_default();
        AgentTurn {
            usage: scripted_agent_usage(job, &calls),
            calls,
            ..Default::default()
        }
    }
}

struct SchemaAgent;

fn words(s: &str) -> Vec<String> {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.len() > 2)
        .map(|w| w.to_lowercase())
        .collect()
}

/// Parameter names from the schema, else from a `Parameters: a, b` sentence.
fn param_names(tool: &Value) -> Vec<String> {
    if let Some(props) = tool
        .pointer("/parameters/properties")
        .and_then(Value::as_object)
    {
        return props.keys().cloned().collect();
    }
    let desc = tool
        .get("description")
        .and_then(Value::as_str)
        .unwrap_or("");
    let Some(pos) = desc.find("Parameters:") else {
        return Vec::new();
    };
    desc[pos + "Parameters:".len()..]
        .split('.')
        .next()
        .unwrap_or("")
        .split(',')
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty() && s.chars().all(|c| c.is_alphanumeric() || c == '_'))
        .collect()
}

/// The question's literals in order: numbers (int or float) and quoted strings.
fn literals(question: &str) -> Vec<Value> {
    let mut out = Vec::new();
    let chars: Vec<char> = question.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\'' || c == '"' {
            if let Some(end) = chars[i + 1..].iter().position(|&d| d == c) {
                let s: String = chars[i + 1..i + 1 + end].iter().collect();
                if !s.is_empty() && !s.contains(' ') || s.len() > 1 && end < 40 {
                    out.push(Value::String(s));
                    i += end + 2;
                    continue;
                }
            }
        }
        let starts_number = c.is_ascii_digit()
            || (c == '-'
                && chars.get(i + 1).is_some_and(|d| d.is_ascii_digit())
                && (i == 0 || !chars[i - 1].is_alphanumeric()));
        if starts_number && (i == 0 || !chars[i - 1].is_alphabetic()) {
            let mut j = i + 1;
            while j < chars.len()
                && (chars[j].is_ascii_digit()
                    || chars[j] == ','
                        && chars.get(j + 1).is_some_and(|d| d.is_ascii_digit())
                        && chars.get(j + 4).is_none_or(|d| !d.is_ascii_digit())
                    || chars[j] == '.' && chars.get(j + 1).is_some_and(|d| d.is_ascii_digit()))
            {
                j += 1;
            }
            let text: String = chars[i..j].iter().filter(|&&d| d != ',').collect();
            let v = if text.contains('.') {
                text.parse::<f64>()
                    .ok()
                    .and_then(serde_json::Number::from_f64)
                    .map(Value::Number)
            } else {
                text.parse::<i64>().ok().map(Value::from)
            };
            if let Some(v) = v {
                out.push(v);
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

impl MultiTurn for SchemaAgent {}

impl Agent for SchemaAgent {
    fn act(&self, job: &AgentJob<'_>) -> AgentTurn {
        let q: Vec<String> = words(job.question);
        let best = job
            .tools
            .iter()
            .enumerate()
            .max_by_key(|(i, t)| {
                let text = format!(
                    "{} {}",
                    t.get("name").and_then(Value::as_str).unwrap_or(""),
                    t.get("description").and_then(Value::as_str).unwrap_or("")
                );
                let overlap = words(&text).iter().filter(|w| q.contains(w)).count();
                (overlap, usize::MAX - i)
            })
            .map(|(_, t)| t);
        let Some(tool) = best else {
            return AgentTurn::default();
        };
        let name = tool
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let mut args = Map::new();
        let mut lits = literals(job.question).into_iter();
        for p in param_names(tool) {
            match lits.next() {
                Some(v) => {
                    args.insert(p, v);
                }
                None => break,
            }
        }
        let calls = vec![CallRecord {
            function: name,
            args: Value::Object(args),
            raw: None,
        }];
        AgentTurn {
            usage: scripted_agent_usage(job, &calls),
            calls,
            ..Default::default()
        }
    }
}

struct SilentEditor;

impl Editor for SilentEditor {
    fn complete(&self, prompt: &str, _seed: u64) -> EditorReply {
        scripted_editor_reply(prompt, String::new())
    }
}

struct ErrorsEditor;

/// `(function, ['a', 'b'])` of every `f() missing ... arguments: 'a', 'b'` text.
fn missing_arguments(prompt: &str) -> Vec<(&str, Vec<&str>)> {
    let mut out = Vec::new();
    for line in prompt.lines() {
        let Some(open) = line.find("() missing ") else {
            continue;
        };
        let name_start = line[..open]
            .rfind(|c: char| !(c.is_alphanumeric() || c == '_'))
            .map(|p| p + 1)
            .unwrap_or(0);
        let name = &line[name_start..open];
        let rest = &line[open..];
        let rest = rest.find(" (").map(|p| &rest[..p]).unwrap_or(rest);
        let names: Vec<&str> = rest.split('\'').skip(1).step_by(2).collect();
        if !name.is_empty() && !names.is_empty() {
            out.push((name, names));
        }
    }
    out
}

/// Every `x` of `missing required argument "x"` texts (the search tools' error).
fn missing_named_arguments(prompt: &str) -> Vec<&str> {
    const MARK: &str = "missing required argument \"";
    let mut out: Vec<&str> = Vec::new();
    for (i, _) in prompt.match_indices(MARK) {
        let rest = &prompt[i + MARK.len()..];
        if let Some(name) = rest.split('"').next().filter(|n| !n.is_empty()) {
            if !out.contains(&name) {
                out.push(name);
            }
        }
    }
    out
}

/// The tool a Trace-Free+ request is about: the name on the `Tool name:` line of
/// the rendered interface (`baselines::tracefree::render_interface`), or on a `Name:`
/// line (`batch_reflect::render_tool`).
fn generated_tool(prompt: &str) -> Option<&str> {
    prompt
        .lines()
        .find_map(|l| {
            let l = l.trim();
            l.strip_prefix("Tool name: ")
                .or_else(|| l.strip_prefix("Name: "))
        })
        .map(str::trim)
}

impl Editor for ErrorsEditor {
    fn complete(&self, prompt: &str, _seed: u64) -> EditorReply {
        // A Trace-Free+ request asks for `{"description": ...}`: the parameter names
        // the recorded calls' errors revealed (trace-based), else a restatement.
        if prompt.contains("{\"description\": \"<the new description>\"}") {
            let name = generated_tool(prompt).unwrap_or("the tool");
            let mut params: Vec<&str> = missing_arguments(prompt)
                .into_iter()
                .filter(|(f, _)| *f == name)
                .flat_map(|(_, n)| n)
                .collect();
            params.extend(missing_named_arguments(prompt));
            params.dedup();
            let d = if params.is_empty() {
                format!("Generated: {name} takes keyword arguments.")
            } else {
                format!(
                    "Generated: {name} takes keyword arguments. Parameters: {}.",
                    params.join(", ")
                )
            };
            let reply = serde_json::json!({ "description": d });
            return scripted_editor_reply(prompt, reply.to_string());
        }
        // Tool play / exploration prompts (Play2Prompt, DRAFT) ask for a JSON call:
        // call with the parameter names that error texts in the prompt revealed.
        if prompt.contains("\"arguments\": {\"parameter_name\"") {
            let mut args = Map::new();
            for (_, names) in missing_arguments(prompt) {
                for n in names {
                    args.insert(n.to_string(), Value::from(1));
                }
            }
            for n in missing_named_arguments(prompt) {
                args.insert(n.to_string(), Value::from(n));
            }
            let reply = serde_json::json!({"query": "use the tool", "arguments": args});
            return scripted_editor_reply(prompt, reply.to_string());
        }
        let mut out = String::new();
        for (name, names) in missing_arguments(prompt) {
            out.push_str(&format!(
                "FUNCTION: {name}\nDESCRIPTION: Takes keyword arguments. Parameters: {}.\n",
                names.join(", ")
            ));
        }
        scripted_editor_reply(prompt, out)
    }
}

/// `scripted:judge`: reads the response and the reference answer out of the judge
/// prompt and says `correct: yes` when the answer's words appear in the response.
struct JudgeEditor;

impl Editor for JudgeEditor {
    fn complete(&self, prompt: &str, _seed: u64) -> EditorReply {
        let between = |a: &str, b: &str| -> String {
            prompt
                .split_once(a)
                .and_then(|(_, rest)| rest.split_once(b).map(|(x, _)| x))
                .unwrap_or("")
                .to_string()
        };
        let words = |t: &str| -> String {
            t.to_lowercase()
                .split(|c: char| !c.is_alphanumeric())
                .filter(|w| !w.is_empty())
                .collect::<Vec<_>>()
                .join(" ")
        };
        let response = words(&between("final response:\n", "\n\nReference answer:"));
        let answer = between("Reference answer:\n", "\n\n");
        let answer = words(answer.split(" (also accepted:").next().unwrap_or(""));
        let yes = !answer.is_empty() && format!(" {response} ").contains(&format!(" {answer} "));
        let text = format!(
            "extracted_answer: {response}\nreasoning: scripted comparison\ncorrect: {}",
            if yes { "yes" } else { "no" }
        );
        scripted_editor_reply(prompt, text)
    }
}

/// What `scripted:observer` proposes for a batch of search trajectories: per tool,
/// the result titles (first line of each snippet) its calls returned.
struct ObserverEditor;

/// `(tool, titles)` of every `Call k: <tool>` / `Output: ...` pair in the prompt.
fn observed_titles(prompt: &str) -> Vec<(String, Vec<String>)> {
    const SNIPPET: &str = "\"snippet\": \"";
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    let mut tool: Option<String> = None;
    for line in prompt.lines() {
        let t = line.trim_start();
        if let Some(rest) = t.strip_prefix("Call ") {
            tool = rest
                .split_once(": ")
                .map(|(_, name)| name.trim().to_string());
            continue;
        }
        let Some(name) = &tool else { continue };
        if let Some(i) = t.find(SNIPPET) {
            let title: String = t[i + SNIPPET.len()..]
                .split("\\n")
                .next()
                .unwrap_or("")
                .trim_end_matches(['"', ','])
                .to_string();
            if title.is_empty() {
                continue;
            }
            match out.iter_mut().find(|(n, _)| n == name) {
                Some((_, v)) if !v.contains(&title) => v.push(title),
                Some(_) => {}
                None => out.push((name.clone(), vec![title])),
            }
        }
    }
    out
}

impl Editor for ObserverEditor {
    fn complete(&self, prompt: &str, _seed: u64) -> EditorReply {
        let mut text = String::new();
        for (tool, titles) in observed_titles(prompt) {
            let shown: Vec<&str> = titles.iter().take(8).map(String::as_str).collect();
            text.push_str(&format!(
                "**Tool: {tool}**\nUpdated description: Finds documents such as {}.\n\n",
                shown.join(", ")
            ));
        }
        scripted_editor_reply(prompt, text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn literals_in_order() {
        assert_eq!(
            literals("roll 20 times, p=0.6, exactly 5 and -3 in 'Paris'"),
            vec![json!(20), json!(0.6), json!(5), json!(-3), json!("Paris")]
        );
        assert_eq!(
            literals("a loan of 1,000,000 dollars"),
            vec![json!(1000000)]
        );
    }

    #[test]
    fn schema_agent_uses_description_parameters() {
        let tools = vec![json!({"name": "function_1", "description": "Parameters: n, k."})];
        let job = AgentJob {
            system: "",
            question: "n is 20 and k is 5",
            tools: &tools,
            seed: 0,
        };
        let turn = SchemaAgent.act(&job);
        assert_eq!(turn.calls[0].args, json!({"n": 20, "k": 5}));
    }

    #[test]
    fn errors_editor_reads_missing_argument_texts() {
        let prompt = "Outcome:\nERROR: function_2() missing 3 required positional arguments: 'n', 'k', and 'p'\n";
        let reply = ErrorsEditor.complete(prompt, 0).text.unwrap();
        assert_eq!(
            reply,
            "FUNCTION: function_2\nDESCRIPTION: Takes keyword arguments. Parameters: n, k, p.\n"
        );
    }
}

#[cfg(test)]
mod baseline_prompt_tests {
    use super::*;

    #[test]
    fn errors_editor_proposes_calls_with_revealed_names() {
        let prompt = "{\"arguments\": {\"parameter_name\": value}}\n- function_1() -> TypeError: function_1() missing 2 required positional arguments: 'base' and 'height' (failed): \n";
        let reply = ErrorsEditor.complete(prompt, 0);
        assert_eq!(
            reply.text.as_deref(),
            Some("{\"query\":\"use the tool\",\"arguments\":{\"base\":1,\"height\":1}}")
        );
        assert!(reply.usage.prompt_tokens > 10 && reply.usage.completion_tokens > 0);
    }
}
