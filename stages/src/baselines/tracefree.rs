//! Trace-Free+ (`baselines.md`): one generator request per tool rewrites its
//! description from the tool's interface -- its name, its full parameter schema as
//! JSON (types, `items`, `enum`, `default`, `required`, nested) and its current
//! description -- after a system message (trace-free), or from the interface and
//! `h_i`, a summary of single calls of that tool (trace-based, `[baselines.tracefree]
//! traces = k`). The reply is a JSON object `{"description": ...}`; a reply without
//! one is asked again (`retries`) and then counted as malformed, and the tool keeps
//! its description.
//!
//! The single calls come from tool play, as Play2Prompt's do: the experiment's editor
//! proposes the arguments of one call of the tool from its documentation alone (each
//! call after the first sees the earlier calls and what came back), the environment
//! executes it (BFCL's executor, a chess tool on a training position, a domain
//! search), and each call is stored in `tool_runs` (step `play`). A tool whose schema
//! declares no parameters (chess) is called without a proposal. No test question, no
//! gold answer and no trajectory of an agent reaches the generator.
//!
//! Two request layouts: this project's (`prompts/tracefree_system.txt`,
//! `tracefree_generate.txt`, `tracefree_traces.txt`) and, with `[prompts] set =
//! "paper"`, one shaped as the paper's (`prompts/paper/tracefree_*.txt`): a system
//! message with the rewriting guidelines, then a user message with the tool's name, its
//! parameter schema as JSON, its original description and, trace-based, an "Execution
//! trace summary"; the reply format last. [`request`] builds either; `otb export
//! --sft` writes its training requests with it too.

use super::budget::TraceFreeBudget;
use super::{
    extract_json, fill, set_description, tool_description, tool_name, tools_of, Phase, Produced,
    Toolbox, Work,
};
use serde_json::{Map, Value};

/// The stage name.
pub const STAGE: &str = "tracefree";
/// The stage version (2: the schema as JSON, a system message, traces from tool play
/// summarised per tool, the paper's layout, the repetition penalty).
pub const VERSION: u32 = 2;
/// The generator's system message (this project's layout).
pub const SYSTEM: &str = include_str!("../../../prompts/tracefree_system.txt");
/// The generator's request for one tool (`{{tool}}`, `{{traces}}`).
pub const GENERATE: &str = include_str!("../../../prompts/tracefree_generate.txt");
/// The trace summary `h_i` in a trace-based request (`{{traces}}`).
pub const TRACES: &str = include_str!("../../../prompts/tracefree_traces.txt");
/// The editor's tool-play request: one call of a tool (`{{tool}}`, `{{earlier}}`).
pub const PLAY: &str = include_str!("../../../prompts/tracefree_play.txt");
/// The paper's layout: the system message.
pub const PAPER_SYSTEM: &str = include_str!("../../../prompts/paper/tracefree_system.txt");
/// The paper's layout: the user message (`{{tool}}`, `{{traces}}`).
pub const PAPER_GENERATE: &str = include_str!("../../../prompts/paper/tracefree_generate.txt");
/// The paper's layout: the trace summary (`{{traces}}`).
pub const PAPER_TRACES: &str = include_str!("../../../prompts/paper/tracefree_traces.txt");
/// This project's templates (hashed into the stage key).
pub const TRACEFREE_TEMPLATES: [&str; 4] = [SYSTEM, GENERATE, TRACES, PLAY];
/// The paper layout's templates (hashed into the stage key).
pub const PAPER_TEMPLATES: [&str; 4] = [PAPER_SYSTEM, PAPER_GENERATE, PAPER_TRACES, PLAY];
/// The longest description kept (characters); a longer one is cut there.
pub const MAX_DESCRIPTION_CHARS: usize = 4000;
/// How much of a reply is read for its JSON object (characters): a pathological
/// reply costs at most this much parsing.
pub const MAX_REPLY_CHARS: usize = 64 * 1024;
/// How much of a text trace is shown to the generator (characters; [`text_traces`]).
pub const TRACE_CHARS: usize = 1500;
/// How much of one call's arguments a trace shows (characters).
pub const ARGS_CHARS: usize = 300;
/// How much of one call's result or error a trace shows (characters).
pub const OUTPUT_CHARS: usize = 600;

/// The templates of the layout `paper` names (`false`: this project's).
pub fn templates(paper: bool) -> &'static [&'static str; 4] {
    if paper {
        &PAPER_TEMPLATES
    } else {
        &TRACEFREE_TEMPLATES
    }
}

/// `s` cut to at most `n` characters (at a character boundary).
fn cut(s: &str, n: usize) -> (&str, bool) {
    match s.char_indices().nth(n) {
        Some((i, _)) => (&s[..i], true),
        None => (s, false),
    }
}

/// `s` cut to `n` characters, ` [...]` marking a cut.
fn bounded(s: &str, n: usize) -> String {
    match cut(s, n) {
        (kept, true) => format!("{kept} [...]"),
        (all, false) => all.to_string(),
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

/// A tool's interface as the generator reads it: its name, its whole parameter
/// schema as pretty JSON (every field the definition has: types, `items`, `enum`,
/// `default`, `required`, nested objects) and its description (`paper`: labelled
/// the original description, as the paper's request has it).
pub fn render_interface(tool: &Value, paper: bool) -> String {
    let schema = match tool.get("parameters") {
        Some(p) => serde_json::to_string_pretty(p).unwrap_or_else(|_| p.to_string()),
        None => "(none given)".to_string(),
    };
    let d = tool_description(tool).trim();
    let d = if d.is_empty() { "(none)" } else { d };
    let (schema_label, desc_label) = if paper {
        ("Parameters (JSON schema)", "Original description")
    } else {
        ("Parameter schema (JSON)", "Current description")
    };
    format!(
        "Tool name: {}\n{schema_label}:\n{schema}\n{desc_label}: {d}\n",
        tool_name(tool)
    )
}

/// One single call of a tool made in tool play: its arguments and what came back.
#[derive(Clone, Debug, PartialEq)]
pub struct Trace {
    /// The arguments the call was made with.
    pub arguments: Map<String, Value>,
    /// Whether the tool returned a result (`false`: an error).
    pub ok: bool,
    /// The result, or the error text.
    pub output: String,
}

/// One call as a trace or an earlier call shows it: the arguments, then the result
/// or the error, each bounded, continuation lines indented.
fn render_trace(n: usize, t: &Trace) -> String {
    let args = bounded(&Value::Object(t.arguments.clone()).to_string(), ARGS_CHARS);
    let out = bounded(t.output.trim(), OUTPUT_CHARS).replace('\n', "\n   ");
    let what = if t.ok { "result" } else { "error" };
    format!("{n}. arguments: {args}\n   {what}: {out}")
}

/// `h_i` of one tool: how many calls, how many returned and how many failed, then
/// each call (its arguments and its own result or error, bounded); empty without
/// calls.
pub fn summary(traces: &[Trace]) -> String {
    if traces.is_empty() {
        return String::new();
    }
    let ok = traces.iter().filter(|t| t.ok).count();
    let mut out = format!(
        "{} call{}: {ok} returned a result, {} failed with an error.",
        traces.len(),
        if traces.len() == 1 { "" } else { "s" },
        traces.len() - ok
    );
    for (i, t) in traces.iter().enumerate() {
        out.push('\n');
        out.push_str(&render_trace(i + 1, t));
    }
    out
}

/// The generator request for `tool` in the layout of the prompt set `set` (`paper`,
/// else this project's): `(system message, user message)`. `traces`: the trace
/// summary `h_i` ([`summary`]), or empty for a trace-free request.
pub fn request(tool: &Value, traces: &str, set: &str) -> (String, String) {
    let paper = set == "paper";
    let [system, generate, section, _] = *templates(paper);
    let traces = traces.trim();
    let shown = if traces.is_empty() {
        String::new()
    } else {
        fill(section, &[("traces", traces)])
    };
    (
        system.trim_end().to_string(),
        fill(
            generate,
            &[("tool", &render_interface(tool, paper)), ("traces", &shown)],
        ),
    )
}

/// h_i from traces given as text (whole recorded turns or episodes, as the SFT
/// export has them): up to `k` of `traces` that name the tool `name`, numbered and
/// each bounded to [`TRACE_CHARS`]; empty when there are none (or `k` is 0).
/// [`request`] shows it under the trace heading. The stage itself shows [`summary`]
/// of single calls instead.
pub fn text_traces(traces: &[String], name: &str, k: u32) -> String {
    traces
        .iter()
        .filter(|t| mentions(t, name))
        .take(k as usize)
        .enumerate()
        .map(|(i, t)| {
            let (shown, was_cut) = cut(t.trim(), TRACE_CHARS);
            format!("{}. {shown}{}", i + 1, if was_cut { " [...]" } else { "" })
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether a call of `tool` needs arguments proposed: not when its schema declares
/// no parameters (an empty `properties` object); yes when it has some or does not
/// say (a tool documented by its name alone).
pub fn takes_arguments(tool: &Value) -> bool {
    !tool
        .get("parameters")
        .and_then(|p| p.get("properties"))
        .and_then(Value::as_object)
        .is_some_and(Map::is_empty)
}

/// Tool play: `k` single calls of every tool, the editor proposing each call's
/// arguments from the tool's documentation and the earlier calls (a tool without
/// parameters is called with none), the environment executing them. The proposals
/// of one round are sent together. A reply without an `arguments` object is
/// counted as malformed and that round makes no call of the tool.
pub fn play(w: &mut Work<'_>, tools: &[Value], k: u32) -> Vec<Vec<Trace>> {
    let mut traces: Vec<Vec<Trace>> = vec![Vec::new(); tools.len()];
    for round in 0..k {
        let asks: Vec<(usize, String, String)> = tools
            .iter()
            .enumerate()
            .filter(|(_, t)| takes_arguments(t))
            .map(|(i, t)| {
                let earlier = if traces[i].is_empty() {
                    "(none yet)".to_string()
                } else {
                    traces[i]
                        .iter()
                        .enumerate()
                        .map(|(n, tr)| render_trace(n + 1, tr))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                let prompt = fill(
                    PLAY,
                    &[("tool", &render_interface(t, false)), ("earlier", &earlier)],
                );
                (i, tool_name(t).to_string(), prompt)
            })
            .collect();
        let pairs: Vec<(&str, &str)> = asks
            .iter()
            .map(|(_, n, p)| (n.as_str(), p.as_str()))
            .collect();
        let replies = w.ask_all("play", Phase::Exploration, &pairs, u64::from(round));
        let mut args: Vec<Option<Map<String, Value>>> = tools
            .iter()
            .map(|t| (!takes_arguments(t)).then(Map::new))
            .collect();
        for ((i, _, _), reply) in asks.iter().zip(replies) {
            let Some(text) = reply.text else { continue };
            let (head, _) = cut(&text, MAX_REPLY_CHARS);
            match extract_json(head)
                .and_then(|m| m.get("arguments").and_then(Value::as_object).cloned())
            {
                Some(a) => args[*i] = Some(a),
                None => w.mark_call(reply.call, "malformed-reply"),
            }
        }
        for (i, a) in args.into_iter().enumerate() {
            let Some(a) = a else { continue };
            let out = w.execute(tool_name(&tools[i]), "play", &a);
            traces[i].push(Trace {
                arguments: a,
                ok: out.ok,
                output: out.text,
            });
        }
    }
    traces
}

/// Trace-Free+ on one instance: each tool's description from one generator request
/// in the layout `b.paper` names. Trace-based (`b.traces > 0`), `player` (the
/// editor's toolbox, with the environment's tool runner) first plays every tool
/// `b.traces` times ([`play`]; its calls and runs are recorded in `w`) and each
/// request carries its tool's [`summary`]. The requests of an instance are sent
/// together (a model-backed generator answers them concurrently); those whose reply
/// had no usable JSON are sent again, up to `retries` times.
pub fn produce(w: &mut Work<'_>, b: &TraceFreeBudget, player: Option<&Toolbox<'_>>) -> Produced {
    let mut tools = tools_of(w.docs);
    let traces = match player {
        Some(tb) if b.traces > 0 => {
            let mut own = Work::new(tb, w.method, w.instance, w.docs);
            let t = play(&mut own, &tools, b.traces);
            w.absorb(own);
            t
        }
        _ => vec![Vec::new(); tools.len()],
    };
    let set = if b.paper { "paper" } else { "project" };
    let system = templates(b.paper)[0].trim_end().to_string();
    // (index of the tool, (its name, its user message)) still to be answered.
    let mut open: Vec<(usize, (String, String))> = tools
        .iter()
        .zip(&traces)
        .enumerate()
        .map(|(i, (t, tr))| {
            let (_, user) = request(t, &summary(tr), set);
            (i, (tool_name(t).to_string(), user))
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
        let replies =
            w.ask_all_with_system(Some(&system), "generate", Phase::Editing, &asks, attempt);
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
        let p = produce(&mut w, &TraceFreeBudget::default(), None);
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
            let p = produce(&mut w, &TraceFreeBudget::default(), None);
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

    /// A tool with `items`, `enum`, `default`, `required` and a nested object.
    fn rich_tool() -> Value {
        serde_json::json!({
            "name": "function_2",
            "description": "",
            "parameters": {
                "type": "object",
                "properties": {
                    "array": {"type": "array", "items": {"type": "integer"}, "description": ""},
                    "interval": {"type": "string", "enum": ["1d", "1wk", "1mo"]},
                    "reverse": {"type": "boolean", "default": false},
                    "window": {"type": "object", "properties": {"days": {"type": "integer", "default": 7}}}
                },
                "required": ["array", "interval"]
            }
        })
    }

    /// The request carries the whole schema as JSON (every field, nested ones too),
    /// the tool's name and description, after a system message; nothing invites the
    /// generator to write about other tools; the paper's layout has its own system
    /// message and labels, and an "Execution trace summary" only when trace-based.
    #[test]
    fn the_request_carries_the_full_schema_after_a_system_message() {
        let tool = rich_tool();
        let (system, user) = request(&tool, "", "project");
        assert_eq!(system, SYSTEM.trim_end());
        for needle in [
            "Tool name: function_2",
            "\"items\": {",
            "\"enum\": [",
            "\"1wk\"",
            "\"default\": false",
            "\"default\": 7",
            "\"required\": [",
            "Current description: (none)",
            "{\"description\": \"<the new description>\"}",
        ] {
            assert!(user.contains(needle), "{needle} not in\n{user}");
        }
        // The schema is the definition's, whole: it parses back from the request.
        let start = user.find("{\n").unwrap();
        let end = user.find("\nCurrent description").unwrap();
        let back: Value = serde_json::from_str(&user[start..end]).unwrap();
        assert_eq!(back, tool["parameters"]);
        for text in [&system, &user] {
            assert!(!text.to_lowercase().contains("another tool"), "{text}");
            assert!(!text.to_lowercase().contains("other tool"), "{text}");
        }
        assert!(!user.contains("Recorded calls"), "trace-free: {user}");
        let (_, traced) = request(&tool, "1 call: 1 returned a result.", "project");
        assert!(traced.contains("Recorded calls") && traced.contains("1 call: 1 returned"));

        let (psys, puser) = request(&tool, "", "paper");
        assert_eq!(psys, PAPER_SYSTEM.trim_end());
        assert!(
            puser.starts_with("Tool name: function_2\nParameters (JSON schema):\n{"),
            "{puser}"
        );
        assert!(puser.contains("Original description: (none)") && puser.contains("\"enum\""));
        assert!(!puser.contains("Execution trace summary"), "{puser}");
        let (_, ptraced) = request(&tool, "2 calls: ...", "paper");
        assert!(
            ptraced.contains("Execution trace summary:\n2 calls: ..."),
            "{ptraced}"
        );
        // Without a schema the request says so rather than invent one.
        let (_, bare) = request(&serde_json::json!({"name": "f"}), "", "project");
        assert!(
            bare.contains("Parameter schema (JSON):\n(none given)"),
            "{bare}"
        );
    }

    /// Trace-based: each tool is played `traces` times (the editor proposes the
    /// arguments from the tool's docs and the earlier calls; the runner executes),
    /// each call stored as a tool run, and the generator reads that tool's own calls
    /// with their own results and errors -- never the instance's question.
    #[test]
    fn traces_are_the_tools_own_single_calls_from_tool_play() {
        let (inst, mut doc) = instance();
        doc.tools = serde_json::json!([
            {"name": "function_1", "description": "", "parameters": {"type": "object", "properties": {"a": {"type": "integer"}}}},
            rich_tool()
        ]);
        let question = inst.question.clone();
        let prompts = std::sync::Mutex::new(Vec::<String>::new());
        let editor = FnEditor::new(|p: &str| {
            prompts.lock().unwrap().push(p.to_string());
            if p.contains("{\"arguments\": {\"parameter_name\"") {
                // The second proposal differs from the first.
                let n = if p.contains("(none yet)") { 1 } else { 2 };
                format!("{{\"arguments\": {{\"a\": {n}}}}}")
            } else {
                "{\"description\": \"Generated.\"}".into()
            }
        });
        let runner = FnRunner::new(|args| match args.get("a").and_then(Value::as_i64) {
            Some(1) => ToolOutput {
                ok: false,
                text: "TypeError: f() missing 1 required positional argument: 'b'".into(),
            },
            _ => ToolOutput {
                ok: true,
                text: "42\nsecond line".into(),
            },
        });
        let tb = toolbox(&editor, &runner);
        let mut w = Work::new(&tb, STAGE, &inst, &doc);
        let b = TraceFreeBudget {
            traces: 2,
            ..Default::default()
        };
        let p = produce(&mut w, &b, Some(&tb));
        assert!(p.tools.iter().all(|t| t["description"] == "Generated."));
        // 2 tools x 2 plays, then 2 generator requests; 4 executions.
        assert_eq!(runner.count(), 4);
        assert_eq!(w.runs.len(), 4);
        assert!(w.runs.iter().all(|r| r.step == "play"));
        let steps: Vec<&str> = w.calls.iter().map(|c| c.step.as_str()).collect();
        assert_eq!(
            steps,
            ["play", "play", "play", "play", "generate", "generate"]
        );
        let prompts = prompts.lock().unwrap().clone();
        let gen: Vec<&String> = prompts
            .iter()
            .filter(|p| p.contains("<the new description>"))
            .collect();
        assert_eq!(gen.len(), 2);
        for g in &gen {
            assert!(g.starts_with(SYSTEM.trim_end()), "{g}");
            assert!(
                g.contains("2 calls: 1 returned a result, 1 failed with an error."),
                "{g}"
            );
            assert!(
                g.contains("1. arguments: {\"a\":1}\n   error: TypeError: f() missing"),
                "{g}"
            );
            assert!(
                g.contains("2. arguments: {\"a\":2}\n   result: 42\n   second line"),
                "{g}"
            );
        }
        // Each request is about its own tool (and shows only its own calls).
        assert!(gen[0].contains("Tool name: function_1") && !gen[0].contains("function_2"));
        assert!(gen[1].contains("Tool name: function_2") && gen[1].contains("\"enum\""));
        for p in &prompts {
            assert!(
                !p.contains(&question),
                "the question reached a request:\n{p}"
            );
        }
        // Trace-free: no play, no execution.
        let runner0 = FnRunner::new(|_| ToolOutput {
            ok: true,
            text: String::new(),
        });
        let tb0 = toolbox(&editor, &runner0);
        let mut w0 = Work::new(&tb0, STAGE, &inst, &doc);
        produce(&mut w0, &TraceFreeBudget::default(), Some(&tb0));
        assert_eq!(runner0.count(), 0);
        assert!(w0.calls.iter().all(|c| c.step == "generate"));
    }

    /// A tool whose schema declares no parameters (chess) is called with none and no
    /// proposal; a proposal without `arguments` is counted and makes no call.
    #[test]
    fn parameterless_tools_need_no_proposal_and_bad_proposals_no_call() {
        let (inst, mut doc) = instance();
        doc.tools = serde_json::json!([
            {"name": "function_1", "description": "", "parameters": {"type": "object", "properties": {}, "required": []}},
            {"name": "function_2", "description": ""}
        ]);
        assert!(!takes_arguments(&doc.tools[0]) && takes_arguments(&doc.tools[1]));
        let editor = FnEditor::new(|p: &str| {
            if p.contains("parameter_name") {
                "I would call it with a=1.".into()
            } else {
                "{\"description\": \"D\"}".into()
            }
        });
        let runner = FnRunner::new(|_| ToolOutput {
            ok: true,
            text: "played e4".into(),
        });
        let tb = toolbox(&editor, &runner);
        let mut w = Work::new(&tb, STAGE, &inst, &doc);
        let b = TraceFreeBudget {
            traces: 3,
            ..Default::default()
        };
        produce(&mut w, &b, Some(&tb));
        assert_eq!(runner.count(), 3, "only the parameterless tool ran");
        assert!(w
            .runs
            .iter()
            .all(|r| r.tool == "function_1" && r.arguments == serde_json::json!({})));
        let play: Vec<_> = w.calls.iter().filter(|c| c.step == "play").collect();
        assert_eq!(play.len(), 3);
        assert!(play
            .iter()
            .all(|c| c.tool == "function_2" && c.error_kind.as_deref() == Some("malformed-reply")));
    }

    #[test]
    fn a_summary_bounds_each_call() {
        let t = Trace {
            arguments: serde_json::from_value(serde_json::json!({"q": "x".repeat(5000)})).unwrap(),
            ok: true,
            output: "y".repeat(10_000),
        };
        let s = summary(&[t]);
        assert!(
            s.starts_with("1 call: 1 returned a result, 0 failed with an error."),
            "{s}"
        );
        assert!(
            s.chars().count() < ARGS_CHARS + OUTPUT_CHARS + 200,
            "{}",
            s.len()
        );
        assert_eq!(s.matches("[...]").count(), 2);
        assert_eq!(summary(&[]), "");
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
        let s = text_traces(&traces, "function_1", 2);
        assert!(
            s.contains("1. function_1(a=1)") && s.contains("[...]"),
            "{s}"
        );
        assert!(s.contains("2. function_1(a=2) -> error"), "{s}");
        assert!(!s.contains("a=3") && !s.contains("function_10"), "{s}");
        assert_eq!(text_traces(&traces, "function_1", 0), "");
        assert_eq!(text_traces(&traces, "other", 3), "");
    }
}
