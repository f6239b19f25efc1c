//! The MCP environment's scripted models, for tests and demos without a model:
//!
//! - `scripted:mcp-oracle`, the ceiling: for a task of the tasks file (found by its
//!   request) it makes the task's `oracle` calls in order (each server tool called by
//!   the name the agent is shown: the server's own in `as-is` docs, its opaque
//!   `tool_k` otherwise), then answers with the task's answer if the tools really
//!   gave it ([`verdict`]), else `unknown`.
//! - `scripted:mcp-reader`, an agent that reads descriptions. For a task of the tasks
//!   file it knows the oracle's arguments but not its tools: for each oracle call it
//!   picks a shown tool by [`Reader::choose`] (the tool whose schema accepts the
//!   arguments and whose description shares the most words with the request and
//!   the arguments; with no word shared, a seeded pick among the accepting tools),
//!   calls it with the oracle's arguments, and answers as the oracle does. With the
//!   servers' descriptions it mostly finds the tools; with names only (no
//!   description, no `required`, no types: every tool accepts anything) it picks at
//!   random: Gold beats Base. For a request that is not a task it calls the tool
//!   whose description shares the most words with the request (with none, it
//!   explores: a tool chosen by the request's hash), with the arguments it can fill
//!   from the schema -- a path parameter gets the working folder named in its system
//!   prompt, an enum a value the request names, a required (or named) parameter the
//!   request's quoted literal -- and answers with the value of the first result line
//!   `Field: value` whose field the request names (a capitalised word).
//! - `scripted:mcp-observer`, an editor that describes each tool by the requests it
//!   served correctly in the batch (`Answers requests such as: ...`); asked about one
//!   episode (ToolObserver's online mode), it describes each tool of an incorrect
//!   episode that answered without an error by the fields its output showed
//!   (`Returns Item, Price.`), and changes nothing after a correct one.
//! - `scripted:mcp-judge`, the LLM judge of tasks with rubrics (`mcp.judge`):
//!   `Verdict: correct` when the final answer shares a word with the rubric
//!   (`words`), `incorrect` otherwise; a rubric that says `unjudgeable` gets a reply
//!   without a verdict.

use crate::models::{Agent, AgentJob, AgentTurn, Conversation, Editor, EditorReply, MultiTurn};
use crate::rows::CallRecord;
use datasets::search::judge::normalize;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// The reader agent's scripted name.
pub const READER: &str = "mcp-reader";
/// The oracle agent's scripted name.
pub const ORACLE: &str = "mcp-oracle";
/// The observer editor's scripted name.
pub const OBSERVER: &str = "mcp-observer";
/// The judge's scripted name.
pub const JUDGE: &str = "mcp-judge";

/// Words that say nothing of a tool.
const STOP: &[&str] = &[
    "what", "which", "when", "where", "who", "whose", "that", "this", "these", "those", "with",
    "from", "into", "does", "have", "has", "the", "and", "for", "are", "was", "answer", "answers",
    "requests", "request", "such", "give", "your", "short", "exact", "tool", "tools", "call",
    "calls", "its", "their", "there", "about", "most", "recent",
];

/// Lowercase words of `s` longer than 2 characters that are not [`STOP`] words, a
/// plural's trailing `s` dropped.
fn words(s: &str) -> Vec<String> {
    let mut out: Vec<String> = s
        .split(|c: char| !c.is_alphanumeric())
        .map(str::to_lowercase)
        .filter(|w| w.len() > 2 && !STOP.contains(&w.as_str()))
        .map(|w| match w.strip_suffix('s') {
            Some(stem) if stem.len() > 2 => stem.to_string(),
            _ => w,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// A stable hash of `s` (FNV-1a).
fn hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The request's quoted literals (`'...'` or `"..."`), in order.
fn quoted(q: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = q;
    while let Some(i) = rest.find(['\'', '"']) {
        let quote = rest[i..].chars().next().unwrap_or('\'');
        let after = &rest[i + 1..];
        match after.find(quote) {
            Some(j) => {
                if j > 0 {
                    out.push(after[..j].to_string());
                }
                rest = &after[j + 1..];
            }
            None => break,
        }
    }
    out
}

/// The first absolute path in the system prompt (the working folder), else
/// `/workspace`.
fn folder(system: &str) -> String {
    system
        .split_whitespace()
        .map(|w| {
            w.trim_matches(|c: char| {
                !(c.is_alphanumeric() || c == '/' || c == '_' || c == '-' || c == '.')
            })
        })
        .map(|w| w.trim_end_matches('.'))
        .find(|w| w.starts_with('/') && w.len() > 1)
        .unwrap_or("/workspace")
        .to_string()
}

/// One oracle call of a task: the server's tool and its arguments.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct OracleCall {
    /// The server's name for the tool.
    pub tool: String,
    /// The arguments (paths as the agent sees them).
    #[serde(default)]
    pub arguments: Value,
}

/// A task as the scripted agents know it (a line of the tasks file).
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct KnownTask {
    /// The server whose tools serve it.
    pub server: String,
    /// The request.
    pub question: String,
    /// The expected answer.
    #[serde(default)]
    pub answer: Option<String>,
    /// Other accepted answers.
    #[serde(default)]
    pub answers: Vec<String>,
    /// The oracle's calls.
    #[serde(default)]
    pub oracle: Vec<OracleCall>,
}

/// What the scripted agents know of an experiment: its tasks (by request) and, per
/// server, the opaque names (`(tool_k, the server's tool)`).
#[derive(Debug, Default)]
pub struct Known {
    tasks: HashMap<String, KnownTask>,
    opaque: HashMap<String, Vec<(String, String)>>,
}

impl Known {
    /// The tasks of the JSON-lines `text` (lines that are not tasks are skipped: the
    /// drive checked the file) and each server's opaque names.
    pub fn new(text: &str, opaque: HashMap<String, Vec<(String, String)>>) -> Known {
        let tasks = text
            .lines()
            .filter_map(|l| serde_json::from_str::<KnownTask>(l).ok())
            .map(|t| (t.question.clone(), t))
            .collect();
        Known { tasks, opaque }
    }

    /// The task whose request is `question` and that says which calls answer it (a
    /// task without oracle calls is played as an unknown request).
    fn task(&self, question: &str) -> Option<&KnownTask> {
        self.tasks.get(question).filter(|t| !t.oracle.is_empty())
    }

    /// The name the agent is shown for `server`'s tool `real` among `tools`: the name
    /// itself where the docs name the server's tools, else its opaque name.
    fn shown(&self, server: &str, real: &str, tools: &[Value]) -> String {
        let named = |n: &str| {
            tools
                .iter()
                .any(|t| t.get("name").and_then(Value::as_str) == Some(n))
        };
        if named(real) {
            return real.to_string();
        }
        self.opaque
            .get(server)
            .and_then(|m| m.iter().find(|(_, r)| r == real))
            .map(|(s, _)| s.clone())
            .filter(|s| named(s))
            .unwrap_or_else(|| real.to_string())
    }
}

/// Whether `text` (a tool's result) reads as a failure.
fn failed(text: &str) -> bool {
    let t = text.trim_start().to_lowercase();
    t.is_empty()
        || ["error", "database error", "mcp error", "unknown tool"]
            .iter()
            .any(|p| t.starts_with(p))
}

/// Whether `needle`'s normalised tokens appear, in a row, among `hay`'s.
fn holds(hay: &str, needle: &str) -> bool {
    let n = normalize(needle);
    !n.is_empty() && format!(" {hay} ").contains(&format!(" {n} "))
}

/// The final answer of a task after the calls that gave `results`: the task's answer
/// (`Exact Answer: ...`) if the results hold it or one of its aliases, normalised as
/// the grader normalises (the results also with their punctuation read as spaces,
/// so that `a,42,b` holds `42`); for a count or a yes/no answer, which is derived
/// from the results rather than read in them, if every one of the task's calls was
/// made and none failed. Else `Exact Answer: unknown`.
pub fn verdict(task: &KnownTask, results: &[String]) -> String {
    let Some(answer) = task.answer.as_deref() else {
        return "Exact Answer: unknown".into();
    };
    let joined = results.join("\n");
    let spaced: String = joined
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || c.is_whitespace() {
                c
            } else {
                ' '
            }
        })
        .collect();
    let (a, b) = (normalize(&joined), normalize(&spaced));
    let read = std::iter::once(answer)
        .chain(task.answers.iter().map(String::as_str))
        .any(|g| holds(&a, g) || holds(&b, g));
    let derived = (answer.chars().all(|c| c.is_ascii_digit()) && !answer.is_empty())
        || matches!(answer, "yes" | "no");
    let all_made = results.len() >= task.oracle.len() && !results.iter().any(|r| failed(r));
    if read || (derived && all_made) {
        format!("Exact Answer: {answer}")
    } else {
        "Exact Answer: unknown".into()
    }
}

/// The results of every call of the conversation so far.
fn results_of(conv: &Conversation<'_>) -> Vec<String> {
    conv.steps
        .iter()
        .flat_map(|s| s.results.iter().cloned())
        .collect()
}

/// The calls of the conversation so far.
fn calls_made(conv: &Conversation<'_>) -> usize {
    conv.steps.iter().map(|s| s.calls.len()).sum()
}

/// A turn that only answers.
fn answer_turn(content: String) -> AgentTurn {
    AgentTurn {
        content: Some(content),
        ..Default::default()
    }
}

/// A turn that makes one call.
fn call_turn(function: String, args: Value) -> AgentTurn {
    AgentTurn {
        calls: vec![CallRecord {
            function,
            args,
            raw: None,
        }],
        ..Default::default()
    }
}

/// `scripted:mcp-oracle` (see the module's documentation).
pub struct Oracle {
    known: Arc<Known>,
}

impl Oracle {
    /// The oracle of the tasks and names in `known`.
    pub fn new(known: Arc<Known>) -> Oracle {
        Oracle { known }
    }
}

impl Agent for Oracle {
    fn act(&self, job: &AgentJob<'_>) -> AgentTurn {
        self.converse(&Conversation {
            system: job.system,
            question: job.question,
            tools: job.tools,
            steps: &[],
            final_answer: false,
            require_tool: false,
            seed: job.seed,
            parallel_tool_calls: None,
        })
    }
}

impl MultiTurn for Oracle {
    fn converse(&self, conv: &Conversation<'_>) -> AgentTurn {
        let Some(task) = self.known.task(conv.question) else {
            return answer_turn("Exact Answer: unknown".into());
        };
        let made = calls_made(conv);
        match task.oracle.get(made).filter(|_| !conv.final_answer) {
            Some(c) => call_turn(
                self.known.shown(&task.server, &c.tool, conv.tools),
                c.arguments.clone(),
            ),
            None => answer_turn(verdict(task, &results_of(conv))),
        }
    }
}

/// Whether the JSON type `ty` (a schema's `type`: a name or a list of names)
/// admits `v`.
fn type_admits(ty: &Value, v: &Value) -> bool {
    let one = |t: &str| match t {
        "string" => v.is_string(),
        "number" => v.is_number(),
        "integer" => v.is_i64() || v.is_u64(),
        "boolean" => v.is_boolean(),
        "array" => v.is_array(),
        "object" => v.is_object(),
        "null" => v.is_null(),
        _ => true,
    };
    match ty {
        Value::String(t) => one(t),
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).any(one),
        _ => true,
    }
}

/// Whether the shown schema `params` accepts `args` as JSON Schema reads it, at the
/// top level: every `required` name given, no name outside `properties` where
/// `additionalProperties` is `false`, every given value of a property's `type`.
/// A schema that says nothing (names only) accepts any object.
pub fn accepts(params: &Value, args: &Value) -> bool {
    let Some(a) = args.as_object() else {
        return false;
    };
    let props = params.get("properties").and_then(Value::as_object);
    let required = params
        .get("required")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str);
    if required.into_iter().any(|r| !a.contains_key(r)) {
        return false;
    }
    if params.get("additionalProperties") == Some(&Value::Bool(false))
        && a.keys().any(|k| !props.is_some_and(|p| p.contains_key(k)))
    {
        return false;
    }
    a.iter().all(|(k, v)| {
        props
            .and_then(|p| p.get(k))
            .and_then(|s| s.get("type"))
            .is_none_or(|t| type_admits(t, v))
    })
}

/// The words of `v`'s keys and string values, at every depth.
fn value_words(v: &Value, out: &mut String) {
    match v {
        Value::String(s) => {
            out.push(' ');
            out.push_str(s);
        }
        Value::Array(a) => a.iter().for_each(|x| value_words(x, out)),
        Value::Object(o) => o.iter().for_each(|(k, x)| {
            out.push(' ');
            out.push_str(k);
            value_words(x, out);
        }),
        _ => {}
    }
}

/// `scripted:mcp-reader` (see the module's documentation).
#[derive(Default)]
pub struct Reader {
    known: Arc<Known>,
}

impl Reader {
    /// The reader of the tasks and names in `known`.
    pub fn new(known: Arc<Known>) -> Reader {
        Reader { known }
    }

    /// The shown tool the reader calls for the oracle call `k` of `question`, with
    /// `args`: among the tools whose shown schema [`accepts`] `args` (all tools when
    /// none does), the one whose description shares the most words with the request
    /// and the arguments (names and string values), the first listed on a tie; when
    /// no description shares a word, the accepting tool drawn by a hash of the
    /// request and `k`. It never looks at a tool's name.
    pub fn choose<'t>(
        question: &str,
        k: usize,
        args: &Value,
        tools: &'t [Value],
    ) -> Option<&'t Value> {
        let fit: Vec<&Value> = tools
            .iter()
            .filter(|t| accepts(t.get("parameters").unwrap_or(&Value::Null), args))
            .collect();
        let pool: Vec<&Value> = if fit.is_empty() {
            tools.iter().collect()
        } else {
            fit
        };
        let mut text = question.to_string();
        value_words(args, &mut text);
        let want = words(&text);
        let overlap = |t: &Value| {
            let d = words(t.get("description").and_then(Value::as_str).unwrap_or(""));
            want.iter().filter(|w| d.contains(w)).count()
        };
        let best = pool.iter().map(|t| overlap(t)).max()?;
        if best > 0 {
            return pool.iter().find(|t| overlap(t) == best).copied();
        }
        let h = hash(&format!("{question}\u{0}{k}"));
        pool.get((h % pool.len() as u64) as usize).copied()
    }

    /// The tool to call for `question` among `tools`: the most words shared with its
    /// description (first on a tie), else one chosen by the question's hash.
    fn pick<'t>(&self, question: &str, tools: &'t [Value]) -> Option<&'t Value> {
        let q = words(question);
        let overlap = |t: &Value| {
            let d = words(t.get("description").and_then(Value::as_str).unwrap_or(""));
            q.iter().filter(|w| d.contains(w)).count()
        };
        let best = tools.iter().map(overlap).max()?;
        if best > 0 {
            return tools.iter().find(|t| overlap(t) == best);
        }
        tools.get((hash(question) % tools.len() as u64) as usize)
    }

    /// The arguments it can fill for `tool` from `question` and the working folder.
    fn arguments(&self, tool: &Value, question: &str, folder: &str) -> Value {
        let params = tool.get("parameters").unwrap_or(&Value::Null);
        let required: Option<Vec<&str>> = params
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect());
        let lower = question.to_lowercase();
        let mut literals = quoted(question).into_iter();
        let mut args = Map::new();
        let props = params.get("properties").and_then(Value::as_object);
        for (name, schema) in props.into_iter().flatten() {
            let n = name.to_lowercase();
            if ["path", "repo", "dir", "folder"]
                .iter()
                .any(|p| n.contains(p))
            {
                args.insert(name.clone(), json!(folder));
                continue;
            }
            if let Some(options) = schema.get("enum").and_then(Value::as_array) {
                let named = options.iter().find(|o| {
                    o.as_str()
                        .is_some_and(|s| lower.contains(&s.to_lowercase()))
                });
                if let Some(v) = named.or(options.first()) {
                    args.insert(name.clone(), v.clone());
                }
                continue;
            }
            let wanted = match &required {
                Some(r) => r.contains(&name.as_str()),
                None => n
                    .split('_')
                    .any(|part| part.len() > 2 && lower.contains(part)),
            };
            if wanted {
                if let Some(l) = literals.next() {
                    args.insert(name.clone(), json!(l));
                }
            }
        }
        Value::Object(args)
    }
}

/// The value of the first line `Field: value` of `result` whose field is a
/// capitalised word of `question` (in the question's order); else the result's first
/// non-empty line. Quotes around the value are dropped.
pub fn read_answer(question: &str, result: &str) -> String {
    if result.trim_start().starts_with("Error") {
        return "unknown".into();
    }
    let fields: Vec<&str> = question
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| w.chars().next().is_some_and(char::is_uppercase) && w.len() > 1)
        .collect();
    for f in fields {
        for line in result.lines() {
            let l = line.trim();
            if let Some(rest) = l.strip_prefix(f).and_then(|r| r.strip_prefix(':')) {
                // A Python repr's quotes and escaped line break (`'msg\\n'`) are not
                // part of the value.
                let v = rest.trim().trim_matches(['\'', '"', '`']);
                let v = v.trim_end_matches("\\n").trim();
                if !v.is_empty() {
                    return v.to_string();
                }
            }
        }
    }
    result
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("unknown")
        .to_string()
}

impl Reader {
    /// The old way, for a request that is not a known task (see the module's
    /// documentation).
    fn act_unknown(&self, job: &AgentJob<'_>) -> AgentTurn {
        let text = job
            .question
            .strip_suffix("\n\nGive your final answer now.")
            .unwrap_or(job.question);
        let mut parts = text.split("\n\nTool result: ");
        let question = parts.next().unwrap_or("");
        if let Some(last) = parts.last() {
            return AgentTurn {
                content: Some(format!("Exact Answer: {}", read_answer(question, last))),
                ..Default::default()
            };
        }
        match self.pick(question, job.tools) {
            Some(t) => AgentTurn {
                calls: vec![CallRecord {
                    function: t
                        .get("name")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string(),
                    args: self.arguments(t, question, &folder(job.system)),
                    raw: None,
                }],
                ..Default::default()
            },
            None => AgentTurn {
                content: Some("Exact Answer: unknown".into()),
                ..Default::default()
            },
        }
    }
}

impl Agent for Reader {
    fn act(&self, job: &AgentJob<'_>) -> AgentTurn {
        let question = job.question.split("\n\n").next().unwrap_or("");
        match self.known.task(question) {
            // A one-turn request of a known task: its first call.
            Some(task) => match task.oracle.first().filter(|_| !job.tools.is_empty()) {
                Some(c) => match Reader::choose(question, 0, &c.arguments, job.tools) {
                    Some(t) => call_turn(
                        t.get("name")
                            .and_then(Value::as_str)
                            .unwrap_or_default()
                            .to_string(),
                        c.arguments.clone(),
                    ),
                    None => answer_turn("Exact Answer: unknown".into()),
                },
                None => answer_turn("Exact Answer: unknown".into()),
            },
            None => self.act_unknown(job),
        }
    }
}

impl MultiTurn for Reader {
    fn converse(&self, conv: &Conversation<'_>) -> AgentTurn {
        let Some(task) = self.known.task(conv.question) else {
            // The default: the latest results appended to the request.
            let mut question = conv.question.to_string();
            for r in results_of(conv) {
                question.push_str("\n\nTool result: ");
                question.push_str(&r);
            }
            if conv.final_answer {
                question.push_str("\n\nGive your final answer now.");
            }
            let mut t = self.act_unknown(&AgentJob {
                system: conv.system,
                question: &question,
                tools: if conv.final_answer { &[] } else { conv.tools },
                seed: conv.seed,
            });
            if conv.final_answer {
                t.calls.clear();
            }
            return t;
        };
        let made = calls_made(conv);
        let next = task.oracle.get(made).filter(|_| !conv.final_answer);
        match next.and_then(|c| {
            Reader::choose(conv.question, made, &c.arguments, conv.tools).map(|t| (t, c))
        }) {
            Some((t, c)) => call_turn(
                t.get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string(),
                c.arguments.clone(),
            ),
            None => answer_turn(verdict(task, &results_of(conv))),
        }
    }
}

/// `scripted:mcp-observer` (see the module's documentation).
pub struct Observer;

/// `(tool, requests)` of the prompt's trajectories whose outcome is correct: each
/// call's tool with the trajectory's request.
fn served(prompt: &str) -> Vec<(String, Vec<String>)> {
    let mut out: Vec<(String, Vec<String>)> = Vec::new();
    for block in prompt.split("\nTrajectory ").skip(1) {
        if !block.contains("\nOutcome: correct") {
            continue;
        }
        let request = block
            .lines()
            .find_map(|l| l.strip_prefix("Request: "))
            .unwrap_or("")
            .trim()
            .to_string();
        for l in block.lines() {
            let Some(tool) = l
                .strip_prefix("Call ")
                .and_then(|r| r.split_once(": "))
                .map(|(_, t)| t.trim().to_string())
            else {
                continue;
            };
            match out.iter_mut().find(|(t, _)| *t == tool) {
                Some((_, v)) if !v.contains(&request) => v.push(request.clone()),
                Some(_) => {}
                None => out.push((tool, vec![request.clone()])),
            }
        }
    }
    out
}

/// The online form of `scripted:mcp-observer`'s reply (one observed episode, no
/// `Trajectory` blocks): after an incorrect outcome, a `FUNCTION:` / `DESCRIPTION:`
/// block for each tool the episode called that answered without an error, describing
/// it by the fields its output showed (`Returns Item, Price.`); after a correct one,
/// nothing. `None`: the prompt holds no such episode.
fn online_reply(prompt: &str) -> Option<String> {
    if prompt.contains("\nTrajectory ") {
        return None;
    }
    let example = &prompt[prompt.rfind("Request: ")?..];
    let outcome = example
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("Outcome: "))?;
    if outcome.trim() == "correct" {
        return Some(String::new());
    }
    let mut fields: Vec<(String, Vec<String>)> = Vec::new();
    // The tool whose output is being read.
    let mut reading: Option<String> = None;
    for line in example.lines() {
        if let Some((_, tool)) = line.strip_prefix("Call ").and_then(|r| r.split_once(": ")) {
            reading = None;
            if !fields.iter().any(|(t, _)| t == tool.trim()) {
                fields.push((tool.trim().to_string(), Vec::new()));
            }
            continue;
        }
        let body = match line.strip_prefix("Output: ") {
            Some(rest) => {
                reading = fields.last().map(|(t, _)| t.clone());
                rest
            }
            None if line.starts_with("Error: ")
                || line.starts_with("Arguments: ")
                || line.starts_with("Final answer: ") =>
            {
                reading = None;
                continue;
            }
            None => line,
        };
        let Some(tool) = &reading else { continue };
        let Some((name, _)) = body.split_once(':') else {
            continue;
        };
        let name = name.trim();
        let is_field = name.chars().next().is_some_and(char::is_uppercase)
            && name.len() <= 40
            && name
                .chars()
                .all(|c| c.is_alphanumeric() || c == ' ' || c == '_');
        if let Some((_, f)) = fields.iter_mut().find(|(t, _)| t == tool) {
            if is_field && !f.iter().any(|x| x == name) {
                f.push(name.to_string());
            }
        }
    }
    Some(
        fields
            .iter()
            .filter(|(_, f)| !f.is_empty())
            .map(|(tool, f)| format!("FUNCTION: {tool}\nDESCRIPTION: Returns {}.\n", f.join(", ")))
            .collect(),
    )
}

impl Editor for Observer {
    fn complete(&self, prompt: &str, _seed: u64) -> EditorReply {
        let mut text = online_reply(prompt).unwrap_or_default();
        for (tool, requests) in served(prompt) {
            let shown: Vec<&str> = requests.iter().take(4).map(String::as_str).collect();
            text.push_str(&format!(
                "**Tool: {tool}**\nUpdated description: Answers requests such as: {}\n\n",
                shown.join(" / ")
            ));
        }
        let tokens = crate::models::scripted::pseudo_tokens;
        EditorReply {
            usage: crate::models::CallUsage {
                prompt_tokens: tokens(prompt),
                completion_tokens: tokens(&text),
                ..Default::default()
            },
            text: Some(text),
            error: None,
            cut: false,
        }
    }
}

/// `scripted:mcp-judge`: reads the rubric and the final answer out of the judge
/// prompt (`prompts/mcp_judge.txt`) and says `correct` when they share a word.
pub struct Judge;

impl Editor for Judge {
    fn complete(&self, prompt: &str, _seed: u64) -> EditorReply {
        let rubric = prompt
            .split_once("\n[Rubric]\n")
            .and_then(|(_, r)| r.split_once("\n\n[Final answer]\n"))
            .map_or("", |(r, _)| r);
        let answer = prompt
            .split_once("\n[Final answer]\n")
            .and_then(|(_, a)| a.rsplit_once("\n\n[End of final answer]"))
            .map_or("", |(a, _)| a);
        let said = words(answer);
        let shared = words(rubric).into_iter().find(|w| said.contains(w));
        let text = if rubric.to_lowercase().contains("unjudgeable") {
            "I cannot decide this one.".to_string()
        } else {
            match shared {
                Some(w) => format!("Verdict: correct\nReason: the answer says `{w}`."),
                None => "Verdict: incorrect\nReason: the answer shares no word with the rubric."
                    .to_string(),
            }
        };
        let tokens = crate::models::scripted::pseudo_tokens;
        EditorReply {
            usage: crate::models::CallUsage {
                prompt_tokens: tokens(prompt),
                completion_tokens: tokens(&text),
                ..Default::default()
            },
            text: Some(text),
            error: None,
            cut: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scripted_judge_says_correct_when_the_answer_shares_a_rubric_word() {
        let ask = |rubric: &str, answer: &str| {
            let p = crate::mcp::judge::render_prompt("Which module?", rubric, answer);
            let r = Judge.complete(&p, 0).text.unwrap_or_default();
            crate::mcp::judge::parse_reply(&r).verdict
        };
        assert_eq!(
            ask("Names the parser module.", "Exact Answer: parser"),
            Some(true)
        );
        assert_eq!(
            ask("Names the parser module.", "Exact Answer: README"),
            Some(false)
        );
        // The request's words do not count: only the answer's.
        assert_eq!(ask("Names the module.", "unknown"), Some(false));
        assert_eq!(ask("unjudgeable: parser", "parser"), None);
    }

    fn tools() -> Vec<Value> {
        vec![
            json!({"name": "git_status", "description": "Shows the working tree status",
                   "parameters": {"type": "object", "properties": {"repo_path": {"type": "string"}}, "required": ["repo_path"]}}),
            json!({"name": "git_show", "description": "Shows the contents of a commit",
                   "parameters": {"type": "object", "properties": {"repo_path": {"type": "string"}, "revision": {"type": "string"}}, "required": ["repo_path", "revision"]}}),
            json!({"name": "git_branch", "description": "List Git branches",
                   "parameters": {"type": "object", "properties": {"repo_path": {"type": "string"}, "branch_type": {"enum": ["local", "remote", "all"]}}, "required": ["repo_path", "branch_type"]}}),
        ]
    }

    fn turn(question: &str, tools: &[Value]) -> AgentTurn {
        Reader::default().act(&AgentJob {
            system: "Tools work on the folder /repo. Use it.",
            question,
            tools,
            seed: 0,
        })
    }

    #[test]
    fn the_reader_picks_by_description_and_fills_from_the_schema() {
        let t = turn(
            "Show the contents of commit 'HEAD~1': its Message?",
            &tools(),
        );
        assert_eq!(t.calls[0].function, "git_show");
        assert_eq!(
            t.calls[0].args,
            json!({"repo_path": "/repo", "revision": "HEAD~1"})
        );
        let t = turn("Which remote branches are there?", &tools());
        assert_eq!(t.calls[0].function, "git_branch");
        assert_eq!(t.calls[0].args["branch_type"], "remote");
        // Names only: nothing to read, it explores (the same tool for the same request).
        let blank: Vec<Value> = tools()
            .into_iter()
            .enumerate()
            .map(|(i, mut t)| {
                t["name"] = json!(format!("tool_{}", i + 1));
                t["description"] = json!("");
                t["parameters"] =
                    json!({"type": "object", "properties": {"repo_path": {}, "revision": {}}});
                t
            })
            .collect();
        let a = turn("Show the Message of revision 'HEAD'", &blank);
        assert_eq!(a.calls.len(), 1);
        assert_eq!(
            a.calls[0].args,
            json!({"repo_path": "/repo", "revision": "HEAD"}),
            "named parameters are filled without `required`"
        );
        assert_eq!(
            turn("Show the Message of revision 'HEAD'", &blank).calls[0].function,
            a.calls[0].function
        );
        // The answer: the field the request names.
        let r = "Commit: 'abc'\nAuthor: Alice\nMessage: 'add parser\\n'\n";
        let t = turn(
            &format!("What is the Message?\n\nTool result: {r}"),
            &tools(),
        );
        assert_eq!(t.content.as_deref(), Some("Exact Answer: add parser"));
        assert!(t.calls.is_empty());
        assert_eq!(read_answer("Who?", "Error: no such revision"), "unknown");
        assert_eq!(
            read_answer("which one", "\n first line\nsecond"),
            "first line"
        );
        assert_eq!(folder("no folder here"), "/workspace");
    }

    /// Two tools of a memory-like server in gold docs.
    fn gold() -> Vec<Value> {
        vec![
            json!({"name": "read_graph", "description": "Read the entire knowledge graph",
                   "parameters": {"type": "object", "properties": {}}}),
            json!({"name": "open_nodes", "description": "Open specific nodes in the knowledge graph by their names",
                   "parameters": {"type": "object", "properties": {"names": {"type": "array"}}, "required": ["names"]}}),
            json!({"name": "delete_entities", "description": "Delete multiple entities",
                   "parameters": {"type": "object", "properties": {"entityNames": {"type": "array"}}, "required": ["entityNames"]}}),
        ]
    }

    const TASKS: &str = concat!(
        r#"{"id": "m-1", "server": "memory", "question": "Which company does \"Ann\" work at?", "answer": "Acme Corp", "oracle": [{"tool": "open_nodes", "arguments": {"names": ["Ann", "Acme Corp"]}}]}"#,
        "\n",
        r#"{"id": "m-2", "server": "memory", "question": "Delete the entity \"Bo\". Then: how many people work at \"Acme\"?", "answer": "2", "oracle": [{"tool": "delete_entities", "arguments": {"entityNames": ["Bo"]}}, {"tool": "open_nodes", "arguments": {"names": ["Acme"]}}]}"#,
        "\nnot a task\n"
    );

    fn known() -> Arc<Known> {
        let opaque = HashMap::from([(
            "memory".to_string(),
            vec![
                ("tool_1".to_string(), "delete_entities".to_string()),
                ("tool_2".to_string(), "read_graph".to_string()),
                ("tool_3".to_string(), "open_nodes".to_string()),
            ],
        )]);
        Arc::new(Known::new(TASKS, opaque))
    }

    /// Plays `agent` on `question` with `tools`, each call answered by `tool`; the
    /// calls made and the final answer.
    fn play(
        agent: &dyn MultiTurn,
        question: &str,
        tools: &[Value],
        tool: impl Fn(&CallRecord) -> String,
    ) -> (Vec<CallRecord>, Option<String>) {
        let mut steps: Vec<crate::models::Step> = Vec::new();
        for turn in 0..=4 {
            let t = agent.converse(&Conversation {
                system: "",
                question,
                tools,
                steps: &steps,
                final_answer: turn == 4,
                require_tool: false,
                seed: 0,
                parallel_tool_calls: None,
            });
            if t.calls.is_empty() {
                let calls = steps.into_iter().flat_map(|s| s.calls).collect();
                return (calls, t.content);
            }
            steps.push(crate::models::Step {
                results: t.calls.iter().map(&tool).collect(),
                calls: t.calls,
                content: None,
            });
        }
        unreachable!("the final turn answers")
    }

    #[test]
    fn the_oracle_calls_by_the_shown_names_and_answers_only_what_came_back() {
        let k = known();
        let oracle = Oracle::new(k.clone());
        let q1 = "Which company does \"Ann\" work at?";
        let graph = |_: &CallRecord| r#"{"entities": [{"name": "Acme Corp"}]}"#.to_string();
        let (calls, answer) = play(&oracle, q1, &gold(), graph);
        assert_eq!(calls.len(), 1);
        assert_eq!(calls[0].function, "open_nodes");
        assert_eq!(calls[0].args, json!({"names": ["Ann", "Acme Corp"]}));
        assert_eq!(answer.as_deref(), Some("Exact Answer: Acme Corp"));
        // Opaque docs: the opaque name of the same tool.
        let opaque: Vec<Value> = ["tool_1", "tool_2", "tool_3"]
            .iter()
            .map(|n| json!({"name": n, "description": "", "parameters": {}}))
            .collect();
        let (calls, _) = play(&oracle, q1, &opaque, graph);
        assert_eq!(calls[0].function, "tool_3");
        // A result without the answer: unknown.
        let (_, answer) = play(&oracle, q1, &gold(), |_| "Error: nothing".into());
        assert_eq!(answer.as_deref(), Some("Exact Answer: unknown"));
        // A derived count: every call made, none failed.
        let q2 = "Delete the entity \"Bo\". Then: how many people work at \"Acme\"?";
        let (calls, answer) = play(&oracle, q2, &gold(), |_| "{}".into());
        assert_eq!(
            calls
                .iter()
                .map(|c| c.function.as_str())
                .collect::<Vec<_>>(),
            ["delete_entities", "open_nodes"]
        );
        assert_eq!(answer.as_deref(), Some("Exact Answer: 2"));
        let (_, answer) = play(&oracle, q2, &gold(), |c| {
            if c.function == "open_nodes" {
                "Error: no".into()
            } else {
                "{}".into()
            }
        });
        assert_eq!(answer.as_deref(), Some("Exact Answer: unknown"));
        // Not a task: unknown, no call.
        let (calls, answer) = play(&oracle, "What?", &gold(), graph);
        assert!(calls.is_empty());
        assert_eq!(answer.as_deref(), Some("Exact Answer: unknown"));
    }

    #[test]
    fn the_reader_finds_tools_by_description_and_guesses_without() {
        let reader = Reader::new(known());
        let q2 = "Delete the entity \"Bo\". Then: how many people work at \"Acme\"?";
        let (calls, answer) = play(&reader, q2, &gold(), |_| "{}".into());
        assert_eq!(
            calls
                .iter()
                .map(|c| c.function.as_str())
                .collect::<Vec<_>>(),
            ["delete_entities", "open_nodes"],
            "the descriptions and schemas lead to the oracle's tools"
        );
        assert_eq!(answer.as_deref(), Some("Exact Answer: 2"));
        // Names only: every schema accepts everything, no description: a seeded
        // guess, the same every time.
        let blank: Vec<Value> = ["tool_1", "tool_2", "tool_3"]
            .iter()
            .map(|n| json!({"name": n, "description": "", "parameters": {"type": "object", "properties": {"names": {}}}}))
            .collect();
        let a = play(&reader, q2, &blank, |_| "{}".into()).0;
        assert_eq!(a, play(&reader, q2, &blank, |_| "{}".into()).0);
        assert_eq!(a.len(), 2);
        assert!(accepts(
            &blank[0]["parameters"],
            &json!({"entityNames": ["Bo"]})
        ));
        // A schema's `required`, `additionalProperties` and types are read.
        let p = json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"], "additionalProperties": false});
        assert!(accepts(&p, &json!({"n": 3})));
        assert!(!accepts(&p, &json!({"n": "3"})));
        assert!(!accepts(&p, &json!({})));
        assert!(!accepts(&p, &json!({"n": 3, "m": 1})));
        assert!(!accepts(&p, &json!([1])));
        // The answer is read as the grader normalises, punctuation or not.
        let t = KnownTask {
            server: "s".into(),
            question: "q".into(),
            answer: Some("The Acme".into()),
            answers: vec![],
            oracle: vec![],
        };
        assert_eq!(verdict(&t, &["[acme]".into()]), "Exact Answer: The Acme");
        assert_eq!(verdict(&t, &["acmes".into()]), "Exact Answer: unknown");
    }

    #[test]
    fn the_observer_describes_tools_by_the_requests_they_served() {
        let prompt = "notes\n\nTrajectory 1:\nRequest: What is the Message of the newest commit?\nCall 1: tool_2\nArguments: {}\nOutput: x\nFinal answer: x\nOutcome: correct\n\nTrajectory 2:\nRequest: Which branch?\nCall 1: tool_1\nArguments: {}\nError: y\nFinal answer: unknown\nOutcome: incorrect";
        let r = Observer.complete(prompt, 0).text.unwrap();
        assert!(r.contains("**Tool: tool_2**\nUpdated description: Answers requests such as: What is the Message of the newest commit?"), "{r}");
        assert!(!r.contains("tool_1"), "{r}");
    }
}
