//! Play2Prompt (`baselines.md`): per tool, tool play to find executable calls and
//! turn them into judged examples, then a beam search over descriptions validated by
//! running the task model on those examples. Budget: [`Play2PromptBudget`] (the
//! paper's reduced budget by default).
//!
//! Per tool:
//! 1. **Examples** (up to `examples`): propose a call from the current docs and the
//!    history of earlier attempts, execute it, have the editor critique the output;
//!    retry with the reflection until a call works or `init_loops` tries are spent
//!    (then no more examples are sought for the tool). A working call becomes a user
//!    query written backwards from the call and its output, judged 1-3 and refined
//!    `refine_steps` times (a refinement is kept when it scores at least as well).
//! 2. **Description search** (only with examples): each candidate is scored by running
//!    the task model on the examples' queries and checking its call (function and
//!    arguments, Python `==`). For `iterations` levels, every kept candidate is
//!    critiqued from its failures and rewritten `expansions` times; the best `top_k`
//!    (at least `beam_width`) are kept; the search stops at a perfect score.
//!
//! The optimised description goes into the docs; the examples become demonstrations in
//! the agent prompt ([`crate::rows::DocRow::demos`]). The optional difficulty term of
//! the original (rewarding examples the task model gets wrong) is not implemented.

use super::budget::Play2PromptBudget;
use super::{
    args_equal, extract_json, fill, str_field, tool_description, tool_name, tools_of,
    with_description, Phase, Produced, Work,
};
use crate::batch_reflect::{render_call, render_tool};
use serde_json::{json, Map, Value};

/// The stage name.
pub const STAGE: &str = "play2prompt";
/// The stage version.
pub const VERSION: u32 = 1;

/// Tool play: propose a call from the docs and the earlier attempts.
pub const PLAY: &str = include_str!("../../../prompts/p2p_play.txt");
/// Critique of a played call's output.
pub const CRITIQUE: &str = include_str!("../../../prompts/p2p_critique.txt");
/// A user query written backwards from a working call and its output.
pub const QUERY: &str = include_str!("../../../prompts/p2p_query.txt");
/// Judges an example query (score 1-3, with feedback).
pub const JUDGE: &str = include_str!("../../../prompts/p2p_judge.txt");
/// Refines an example query from the judge's feedback.
pub const REFINE: &str = include_str!("../../../prompts/p2p_refine.txt");
/// Critique of a candidate description from the task model's failures.
pub const DOC_CRITIQUE: &str = include_str!("../../../prompts/p2p_doc_critique.txt");
/// Rewrites a candidate description from its critique.
pub const REWRITE: &str = include_str!("../../../prompts/p2p_rewrite.txt");

/// Every template, in a fixed order (hashed into the stage key).
pub const TEMPLATES: &[&str] = &[PLAY, CRITIQUE, QUERY, JUDGE, REFINE, DOC_CRITIQUE, REWRITE];

/// A judged example: a user query answered by a call that executed.
#[derive(Clone, Debug, PartialEq)]
pub struct Example {
    /// The user query.
    pub query: String,
    /// The answer the query expects, as the editor wrote it (may be empty).
    pub answer: String,
    /// The arguments of the call that executed.
    pub args: Map<String, Value>,
    /// The call's output.
    pub output: String,
    /// The judge's score (1-3).
    pub score: u32,
}

/// Tool play until one call executes and the critique accepts it (`init_loops` tries).
fn play(
    w: &mut Work<'_>,
    tool: &Value,
    history: &mut Vec<String>,
    budget: &Play2PromptBudget,
    salt: u64,
) -> Option<(Map<String, Value>, String)> {
    let name = tool_name(tool).to_string();
    let rendered = render_tool(tool);
    for attempt in 0..budget.init_loops as u64 {
        let hist = if history.is_empty() {
            "(none yet)".to_string()
        } else {
            history.join("\n")
        };
        let prompt = fill(PLAY, &[("tool", &rendered), ("history", &hist)]);
        let reply = w.ask(
            &name,
            "play",
            Phase::Exploration,
            &prompt,
            salt * 1000 + attempt,
        );
        let args = reply
            .as_deref()
            .and_then(extract_json)
            .and_then(|m| m.get("arguments").and_then(Value::as_object).cloned());
        let Some(args) = args else {
            history.push(format!(
                "- attempt {}: the reply was not a JSON object with \"arguments\"",
                history.len() + 1
            ));
            continue;
        };
        let call = render_call(&name, &Value::Object(args.clone()), None);
        let out = w.execute(&name, "play", &args);
        let crit_prompt = fill(
            CRITIQUE,
            &[("tool", &rendered), ("call", &call), ("output", &out.text)],
        );
        let crit = w
            .ask(
                &name,
                "critique",
                Phase::Exploration,
                &crit_prompt,
                salt * 1000 + attempt,
            )
            .as_deref()
            .and_then(extract_json)
            .unwrap_or_default();
        let ok = out.ok && !str_field(&crit, "status").eq_ignore_ascii_case("error");
        history.push(format!(
            "- {call} -> {} ({}): {}",
            out.text,
            if ok { "worked" } else { "failed" },
            str_field(&crit, "reflection")
        ));
        if ok {
            return Some((args, out.text));
        }
    }
    None
}

fn judge(w: &mut Work<'_>, tool: &Value, ex: &Example, salt: u64) -> (u32, String) {
    let name = tool_name(tool).to_string();
    let call = render_call(&name, &Value::Object(ex.args.clone()), None);
    let prompt = fill(
        JUDGE,
        &[
            ("tool", &render_tool(tool)),
            ("query", &ex.query),
            ("call", &call),
            ("output", &ex.output),
            ("answer", &ex.answer),
        ],
    );
    let m = w
        .ask(&name, "judge", Phase::Exploration, &prompt, salt)
        .as_deref()
        .and_then(extract_json)
        .unwrap_or_default();
    let score = m
        .get("score")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .clamp(1, 3) as u32;
    (score, str_field(&m, "feedback"))
}

/// Reverse query generation, judging and refinement for one working call.
fn make_example(
    w: &mut Work<'_>,
    tool: &Value,
    args: Map<String, Value>,
    output: String,
    budget: &Play2PromptBudget,
    salt: u64,
) -> Option<Example> {
    let name = tool_name(tool).to_string();
    let rendered = render_tool(tool);
    let call = render_call(&name, &Value::Object(args.clone()), None);
    let q = w
        .ask(
            &name,
            "query",
            Phase::Exploration,
            &fill(
                QUERY,
                &[("tool", &rendered), ("call", &call), ("output", &output)],
            ),
            salt,
        )
        .as_deref()
        .and_then(extract_json)?;
    let mut ex = Example {
        query: str_field(&q, "query"),
        answer: str_field(&q, "answer"),
        args,
        output,
        score: 1,
    };
    if ex.query.is_empty() {
        return None;
    }
    let (mut score, mut feedback) = judge(w, tool, &ex, salt);
    for step in 0..budget.refine_steps as u64 {
        let prompt = fill(
            REFINE,
            &[
                ("tool", &rendered),
                ("query", &ex.query),
                ("call", &call),
                ("feedback", &feedback),
            ],
        );
        let Some(r) = w
            .ask(
                &name,
                "refine",
                Phase::Exploration,
                &prompt,
                salt * 10 + step,
            )
            .as_deref()
            .and_then(extract_json)
        else {
            continue;
        };
        let mut cand = ex.clone();
        cand.query = str_field(&r, "query");
        if cand.query.is_empty() {
            continue;
        }
        let a = str_field(&r, "answer");
        if !a.is_empty() {
            cand.answer = a;
        }
        let (s, f) = judge(w, tool, &cand, salt * 10 + step + 1);
        if s >= score {
            ex = cand;
            score = s;
            feedback = f;
        }
    }
    ex.score = score;
    Some(ex)
}

/// Run the task model on every example with `desc` as the tool's description;
/// returns (fraction correct, failure report).
fn validate(
    w: &mut Work<'_>,
    tools: &[Value],
    name: &str,
    desc: &str,
    examples: &[Example],
) -> (f64, String) {
    let shown = with_description(tools, name, desc);
    let mut correct = 0usize;
    let mut report = Vec::new();
    for ex in examples {
        let expected = Value::Object(ex.args.clone());
        let turn = w.act(name, "validate", &ex.query, &shown);
        let calls = turn.map(|t| t.calls).unwrap_or_default();
        let ok = calls
            .iter()
            .any(|c| c.function == name && args_equal(&c.args, &expected));
        correct += ok as usize;
        let made = if calls.is_empty() {
            "(no calls)".to_string()
        } else {
            calls
                .iter()
                .map(|c| render_call(&c.function, &c.args, c.raw.as_deref()))
                .collect::<Vec<_>>()
                .join("; ")
        };
        report.push(format!(
            "- Request: {}\n  Correct call: {}\n  Assistant's calls: {made} ({})",
            ex.query,
            render_call(name, &expected, None),
            if ok { "correct" } else { "wrong" }
        ));
    }
    let score = if examples.is_empty() {
        0.0
    } else {
        correct as f64 / examples.len() as f64
    };
    (score, report.join("\n"))
}

/// The description search for one tool (`examples` non-empty).
fn optimise(
    w: &mut Work<'_>,
    tools: &[Value],
    tool: &Value,
    examples: &[Example],
    budget: &Play2PromptBudget,
) -> String {
    let name = tool_name(tool).to_string();
    let desc0 = tool_description(tool).to_string();
    let (s0, r0) = validate(w, tools, &name, &desc0, examples);
    let mut beam: Vec<(String, f64, String)> = vec![(desc0, s0, r0)];
    let keep = budget.top_k.max(budget.beam_width).max(1) as usize;
    for level in 0..budget.iterations as u64 {
        if beam.first().is_some_and(|b| b.1 >= 1.0) {
            break;
        }
        let mut next: Vec<(String, f64, String)> = Vec::new();
        for (desc, _, failures) in &beam {
            let current = with_description(tools, &name, desc);
            let current_tool = current
                .iter()
                .find(|t| tool_name(t) == name)
                .cloned()
                .unwrap_or_else(|| tool.clone());
            let rendered = render_tool(&current_tool);
            for e in 0..budget.expansions as u64 {
                let salt = level * 100 + e;
                let critique = w
                    .ask(
                        &name,
                        "doc-critique",
                        Phase::Editing,
                        &fill(DOC_CRITIQUE, &[("tool", &rendered), ("failures", failures)]),
                        salt,
                    )
                    .unwrap_or_default();
                let call = render_call(&name, &Value::Object(examples[0].args.clone()), None);
                let new = w
                    .ask(
                        &name,
                        "rewrite",
                        Phase::Editing,
                        &fill(
                            REWRITE,
                            &[
                                ("tool", &rendered),
                                ("critique", &critique),
                                ("call", &call),
                            ],
                        ),
                        salt,
                    )
                    .as_deref()
                    .and_then(extract_json)
                    .map(|m| str_field(&m, "description"))
                    .filter(|d| !d.is_empty());
                if let Some(new) = new {
                    let (s, r) = validate(w, tools, &name, &new, examples);
                    next.push((new, s, r));
                }
            }
        }
        // New candidates first, so a rewrite wins ties against its parent.
        next.extend(beam);
        next.sort_by(|a, b| b.1.total_cmp(&a.1));
        next.truncate(keep);
        beam = next;
    }
    beam.into_iter().next().map(|b| b.0).unwrap_or_default()
}

/// Up to `budget.examples` judged examples for one tool, best first: tool play, then
/// a query written from each working call. Reads only the tool itself.
fn examples_for(w: &mut Work<'_>, tool: &Value, budget: &Play2PromptBudget) -> Vec<Example> {
    let mut history = Vec::new();
    let mut examples: Vec<Example> = Vec::new();
    for k in 0..budget.examples as u64 {
        let Some((args, output)) = play(w, tool, &mut history, budget, k) else {
            break; // budget spent without an executable call
        };
        if let Some(ex) = make_example(w, tool, args, output, budget, k) {
            examples.push(ex);
        }
    }
    examples.sort_by_key(|e| std::cmp::Reverse(e.score));
    examples
}

/// Play2Prompt on one instance.
///
/// A tool's examples depend on that tool alone, so every tool plays at once (each
/// tool's play is a chain of dependent calls; run one after another they made an
/// instance's chain as long as all its tools' together). The description searches
/// then run tool by tool, as before: each validates with the descriptions the earlier
/// tools got. The calls and tool runs are recorded in the order of the sequential
/// method (a tool's examples, then its search, then the next tool), so the stage's
/// rows do not depend on how the threads interleaved.
pub fn produce(w: &mut Work<'_>, budget: &Play2PromptBudget) -> Produced {
    let mut tools = tools_of(w.docs);
    let played: Vec<(Work<'_>, Vec<Example>)> = std::thread::scope(|s| {
        let spawned: Vec<_> = tools
            .iter()
            .map(|tool| {
                let mut own = w.fork();
                s.spawn(move || {
                    let examples = examples_for(&mut own, tool, budget);
                    (own, examples)
                })
            })
            .collect();
        spawned
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|e| std::panic::resume_unwind(e)))
            .collect()
    });
    let mut demos = Vec::new();
    for (i, (own, examples)) in played.into_iter().enumerate() {
        w.absorb(own);
        if examples.is_empty() {
            continue;
        }
        let tool = tools[i].clone();
        let name = tool_name(&tool).to_string();
        let desc = optimise(w, &tools, &tool, &examples, budget);
        tools = with_description(&tools, &name, &desc);
        for ex in &examples {
            demos.push(json!({"query": ex.query, "function": name, "arguments": ex.args}));
        }
    }
    Produced {
        tools,
        demos: if demos.is_empty() {
            Value::Null
        } else {
            Value::Array(demos)
        },
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::*;
    use super::*;
    use crate::models::{AgentJob, AgentTurn};
    use crate::rows::CallRecord;

    /// The steps after a play that worked: the example's query, judged, refined and
    /// judged again, then one level of the description search.
    const AFTER_A_WORKING_PLAY: [&str; 8] = [
        "query",
        "judge",
        "refine",
        "judge",
        "validate",
        "doc-critique",
        "rewrite",
        "validate",
    ];

    /// Proposes `{"x": 1}` first, then `{"a": 12, "b": 18}`; the runner fails on `x`.
    fn editor() -> FnEditor<impl Fn(&str) -> String + Send + Sync> {
        FnEditor::new(|p: &str| {
            if p.starts_with("You are testing a tool") {
                if p.contains("function_1(x=1)") {
                    "{\"arguments\": {\"a\": 12, \"b\": 18}}".into()
                } else {
                    "{\"arguments\": {\"x\": 1}}".into()
                }
            } else {
                reply(p)
            }
        })
    }

    /// The scripted editor's answer to every prompt but tool play.
    fn reply(p: &str) -> String {
        if p.starts_with("A tool was called") {
            if p.contains("TypeError") {
                "{\"status\": \"error\", \"reflection\": \"it wants a and b\"}".into()
            } else {
                "{\"status\": \"ok\", \"reflection\": \"works\"}".into()
            }
        } else if p.starts_with("Below is a call") || p.starts_with("Improve the user request") {
            "{\"query\": \"gcd of 12 and 18?\", \"answer\": \"6\"}".into()
        } else if p.starts_with("Rate how good") {
            "{\"score\": 3, \"feedback\": \"fine\"}".into()
        } else if p.starts_with("An assistant was given") {
            "It does not name a and b.".into()
        } else if p.starts_with("Rewrite the description") {
            "{\"description\": \"gcd of integers a and b\"}".into()
        } else {
            String::new()
        }
    }

    fn runner() -> FnRunner<impl Fn(&Map<String, Value>) -> ToolOutput + Sync> {
        FnRunner::new(|args: &Map<String, Value>| {
            if args.contains_key("a") && args.contains_key("b") {
                ToolOutput {
                    ok: true,
                    text: "6".into(),
                }
            } else {
                ToolOutput {
                    ok: false,
                    text: "TypeError: function_1() got an unexpected keyword argument 'x'".into(),
                }
            }
        })
    }

    /// A task model that gets the call right only when the description names `a`.
    struct Task;
    impl crate::models::Agent for Task {
        fn act(&self, job: &AgentJob<'_>) -> AgentTurn {
            let desc = job.tools[0]["description"].as_str().unwrap_or("");
            let args = if desc.contains(" a ") {
                json!({"a": 12, "b": 18.0})
            } else {
                json!({"n": 12})
            };
            AgentTurn {
                calls: vec![CallRecord {
                    function: "function_1".into(),
                    args,
                    raw: None,
                }],
                ..Default::default()
            }
        }
    }

    #[test]
    fn retries_on_errors_then_optimises_the_description() {
        let (editor, runner) = (editor(), runner());
        let mut tb = toolbox(&editor, &runner);
        tb.agent = Some(&Task);
        let (inst, doc) = instance();
        let mut w = Work::new(&tb, STAGE, &inst, &doc);
        let p = produce(&mut w, &Play2PromptBudget::default());
        // Two plays: the first fails (TypeError), the reflection leads to a working call.
        assert_eq!(runner.count(), 2);
        assert_eq!(p.tools[0]["description"], "gcd of integers a and b");
        assert_eq!(
            p.demos,
            json!([{"query": "gcd of 12 and 18?", "function": "function_1", "arguments": {"a": 12, "b": 18}}])
        );
        let steps: Vec<&str> = w.calls.iter().map(|c| c.step.as_str()).collect();
        let two_plays = ["play", "critique", "play", "critique"];
        assert_eq!(steps, [&two_plays[..], &AFTER_A_WORKING_PLAY[..]].concat());
        assert_eq!(w.calls.iter().filter(|c| c.role == "agent").count(), 2);
    }

    /// An instance with two tools, `function_1` and `function_2`.
    fn two_tools() -> (InstanceRow, DocRow) {
        let (inst, mut doc) = instance();
        doc.tools = json!([
            {"name": "function_1", "description": ""},
            {"name": "function_2", "description": ""}
        ]);
        doc.name_mapping = json!([["math_gcd", "function_1"], ["math_lcm", "function_2"]]);
        (inst, doc)
    }

    /// Every tool plays at once: each tool's first play waits (up to 5 s) until the
    /// other tool's play has been asked too. Done one tool after another, the first
    /// play would wait in vain.
    #[test]
    fn the_tools_play_at_once_and_are_recorded_tool_by_tool() {
        use std::sync::{Condvar, Mutex};
        use std::time::Duration;
        let asked = Mutex::new(std::collections::BTreeSet::new());
        let cv = Condvar::new();
        let overlapped = Mutex::new(Vec::new());
        let editor = FnEditor::new(|p: &str| {
            if p.starts_with("You are testing a tool") {
                let me = if p.contains("function_2") { 2 } else { 1 };
                let mut seen = asked.lock().unwrap();
                seen.insert(me);
                cv.notify_all();
                let (seen, _) = cv
                    .wait_timeout_while(seen, Duration::from_secs(5), |s| s.len() < 2)
                    .unwrap();
                overlapped.lock().unwrap().push(seen.len() == 2);
                "{\"arguments\": {\"a\": 12, \"b\": 18}}".into()
            } else {
                reply(p)
            }
        });
        let runner = runner();
        let mut tb = toolbox(&editor, &runner);
        tb.agent = Some(&Task);
        let (inst, doc) = two_tools();
        let mut w = Work::new(&tb, STAGE, &inst, &doc);
        let p = produce(&mut w, &Play2PromptBudget::default());
        assert_eq!(
            *overlapped.lock().unwrap(),
            [true, true],
            "the plays overlapped"
        );
        assert_eq!(p.tools[0]["description"], "gcd of integers a and b");
        assert_eq!(p.tools[1]["description"], "gcd of integers a and b");
        // Recorded as the sequential method ran: function_1's examples and search,
        // then function_2's.
        let one_tool = [&["play", "critique"][..], &AFTER_A_WORKING_PLAY[..]].concat();
        let recorded: Vec<(&str, &str)> = w
            .calls
            .iter()
            .map(|c| (c.tool.as_str(), c.step.as_str()))
            .collect();
        let expected: Vec<(&str, &str)> = ["function_1", "function_2"]
            .iter()
            .flat_map(|t| one_tool.iter().map(move |s| (*t, *s)))
            .collect();
        assert_eq!(recorded, expected);
        let runs: Vec<&str> = w.runs.iter().map(|r| r.tool.as_str()).collect();
        assert_eq!(runs, ["function_1", "function_2"]);
        assert_eq!(w.usage.calls, 20, "every call's usage is counted once");
    }

    #[test]
    fn stops_at_init_loops_when_nothing_executes() {
        let editor = FnEditor::new(|p: &str| {
            if p.starts_with("You are testing a tool") {
                "{\"arguments\": {\"x\": 1}}".into()
            } else {
                "{\"status\": \"error\", \"reflection\": \"no\"}".into()
            }
        });
        let runner = runner();
        let mut tb = toolbox(&editor, &runner);
        tb.agent = Some(&Task);
        let (inst, doc) = instance();
        let budget = Play2PromptBudget {
            init_loops: 4,
            examples: 3,
            ..Default::default()
        };
        let mut w = Work::new(&tb, STAGE, &inst, &doc);
        let p = produce(&mut w, &budget);
        assert_eq!(runner.count(), 4, "exactly init_loops tool executions");
        assert_eq!(
            editor.calls(),
            8,
            "a play and a critique per try, nothing after"
        );
        assert_eq!(
            Value::Array(p.tools),
            doc.tools,
            "no example: docs unchanged"
        );
        assert!(p.demos.is_null());
    }

    #[test]
    fn perfect_description_stops_the_search() {
        let editor = editor();
        let runner = runner();
        struct Always;
        impl crate::models::Agent for Always {
            fn act(&self, _job: &AgentJob<'_>) -> AgentTurn {
                AgentTurn {
                    calls: vec![CallRecord {
                        function: "function_1".into(),
                        args: json!({"a": 12, "b": 18}),
                        raw: None,
                    }],
                    ..Default::default()
                }
            }
        }
        let mut tb = toolbox(&editor, &runner);
        tb.agent = Some(&Always);
        let (inst, doc) = instance();
        let budget = Play2PromptBudget {
            iterations: 5,
            ..Default::default()
        };
        let mut w = Work::new(&tb, STAGE, &inst, &doc);
        let p = produce(&mut w, &budget);
        assert_eq!(p.tools[0]["description"], "", "already perfect: kept");
        assert!(!w.calls.iter().any(|c| c.step == "rewrite"));
    }
}
