//! DRAFT (`baselines.md`): explorer / analyzer / rewriter episodes per tool.
//!
//! Each episode the explorer writes a new user query with arguments. The query is
//! rejected when its embedding cosine to any earlier query of the tool is at least
//! `diversity` (the explorer is asked again, told why, up to `retries` times; the last
//! answer is then accepted). The call is executed; the analyzer compares the output
//! with the description (consistency, completeness, concision); the rewriter writes
//! the new description and a direction for the next episode. As in the DRAFT paper
//! (its Eq. 1, 3 and 4): the explorer sees every earlier (query, call, result), the
//! analyzer the description's revision history, and the rewriter this episode's
//! query, call and result plus the earlier explorations. The tool is done when
//! successive descriptions converge, `(BLEU + cosine) / 2 > converge`, or after
//! `episodes` episodes.

use super::budget::DraftBudget;
use super::{
    cosine, extract_json, fill, str_field, tool_name, tools_of, with_description, Phase, Produced,
    Work,
};
use crate::batch_reflect::{render_call, render_tool};
use serde_json::Value;

/// The stage name.
pub const STAGE: &str = "draft";
/// 2: explorer, analyzer and rewriter see their histories (the DRAFT paper's inputs).
pub const VERSION: u32 = 2;

/// How much of one tool output the history shows.
const OUTPUT_CHARS: usize = 400;

fn clip(s: &str) -> String {
    match s.char_indices().nth(OUTPUT_CHARS) {
        Some((i, _)) => format!("{}... ({} characters)", &s[..i], s.chars().count()),
        None => s.to_string(),
    }
}

/// One earlier exploration: `- request / call / output` lines.
fn history_text(history: &[(String, String, String)]) -> String {
    if history.is_empty() {
        return "(none yet)".to_string();
    }
    history
        .iter()
        .map(|(q, c, o)| format!("- Request: {q}\n  Call: {c}\n  Output: {}", clip(o)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The explorer's prompt: a new query and call for the tool.
pub const EXPLORER: &str = include_str!("../../../prompts/draft_explorer.txt");
/// The analyzer's prompt: the call's output compared with the description.
pub const ANALYZER: &str = include_str!("../../../prompts/draft_analyzer.txt");
/// The rewriter's prompt: the new description and the next episode's direction.
pub const REWRITER: &str = include_str!("../../../prompts/draft_rewriter.txt");
/// Every template, in a fixed order (hashed into the stage key).
pub const TEMPLATES: &[&str] = &[EXPLORER, ANALYZER, REWRITER];

const FIRST_DIRECTION: &str = "start with the most typical use of the tool";

/// What happened to one tool (for tests and logs).
#[derive(Debug, Default, PartialEq)]
pub struct ToolLog {
    /// Episodes run for the tool.
    pub episodes: u32,
    /// Explorer queries rejected as too close to an earlier one.
    pub rejected: u32,
    /// The descriptions converged before the episode limit.
    pub converged: bool,
}

/// Similarity of successive descriptions: (BLEU + embedding cosine) / 2.
fn similarity(w: &Work<'_>, a: &str, b: &str) -> f64 {
    let cos = w
        .embed(&[a, b])
        .map(|v| cosine(&v[0], &v[1]))
        .unwrap_or(0.0);
    (textsim::bleu(a, b) + cos) / 2.0
}

fn draft_tool(
    w: &mut Work<'_>,
    tools: &[Value],
    name: &str,
    budget: &DraftBudget,
) -> (String, ToolLog) {
    let mut log = ToolLog::default();
    let mut desc = tools
        .iter()
        .find(|t| tool_name(t) == name)
        .and_then(|t| t.get("description").and_then(Value::as_str))
        .unwrap_or("")
        .to_string();
    let mut queries: Vec<(String, Vec<f32>)> = Vec::new();
    // (query, call, output) of every executed exploration, and every description so far.
    let mut history: Vec<(String, String, String)> = Vec::new();
    let mut revisions: Vec<String> = vec![desc.clone()];
    let mut direction = FIRST_DIRECTION.to_string();
    for ep in 0..budget.episodes as u64 {
        log.episodes += 1;
        let current = with_description(tools, name, &desc);
        let rendered = current
            .iter()
            .find(|t| tool_name(t) == name)
            .map(render_tool)
            .unwrap_or_default();
        let previous = history_text(&history);
        let mut note = String::new();
        let mut accepted = None;
        for r in 0..=budget.retries as u64 {
            let prompt = fill(
                EXPLORER,
                &[
                    ("tool", &rendered),
                    ("previous", &previous),
                    ("direction", &direction),
                    ("note", &note),
                ],
            );
            let Some(m) = w
                .ask(name, "explorer", Phase::Exploration, &prompt, ep * 100 + r)
                .as_deref()
                .and_then(extract_json)
            else {
                note =
                    "Your previous answer was not a JSON object; answer with JSON only.\n".into();
                continue;
            };
            let query = str_field(&m, "query");
            let args = m
                .get("arguments")
                .and_then(Value::as_object)
                .cloned()
                .unwrap_or_default();
            if query.is_empty() {
                note = "Your previous answer had no \"query\".\n".into();
                continue;
            }
            let emb = w
                .embed(&[&query])
                .and_then(|mut v| v.pop())
                .unwrap_or_default();
            let closest = queries
                .iter()
                .map(|(_, e)| cosine(&emb, e))
                .fold(0.0f64, f64::max);
            if closest >= budget.diversity && r < budget.retries as u64 {
                log.rejected += 1;
                note = format!(
                    "Your request \"{query}\" was too similar to an earlier one; ask something clearly different.\n"
                );
                continue;
            }
            accepted = Some((query, emb, args));
            break;
        }
        let Some((query, emb, args)) = accepted else {
            continue;
        };
        let out = w.execute(name, "explorer", &args);
        let call = render_call(name, &Value::Object(args), None);
        queries.push((query.clone(), emb));
        let earlier = history_text(&history);
        history.push((query.clone(), call.clone(), out.text.clone()));
        let revision_text = revisions
            .iter()
            .enumerate()
            .map(|(i, d)| {
                format!(
                    "{}. {}",
                    i + 1,
                    if d.trim().is_empty() {
                        "(empty)"
                    } else {
                        d.as_str()
                    }
                )
            })
            .collect::<Vec<_>>()
            .join("\n");
        let suggestions = w
            .ask(
                name,
                "analyzer",
                Phase::Exploration,
                &fill(
                    ANALYZER,
                    &[
                        ("tool", &rendered),
                        ("revisions", &revision_text),
                        ("query", &query),
                        ("call", &call),
                        ("output", &clip(&out.text)),
                    ],
                ),
                ep,
            )
            .unwrap_or_default();
        let Some(m) = w
            .ask(
                name,
                "rewriter",
                Phase::Editing,
                &fill(
                    REWRITER,
                    &[
                        ("tool", &rendered),
                        ("query", &query),
                        ("call", &call),
                        ("output", &clip(&out.text)),
                        ("history", &earlier),
                        ("suggestions", &suggestions),
                    ],
                ),
                ep,
            )
            .as_deref()
            .and_then(extract_json)
        else {
            continue;
        };
        let new = str_field(&m, "description");
        if new.is_empty() {
            continue;
        }
        if let Some(d) = m
            .get("direction")
            .and_then(Value::as_str)
            .filter(|d| !d.trim().is_empty())
        {
            direction = d.trim().to_string();
        }
        let converged = similarity(w, &new, &desc) > budget.converge;
        revisions.push(new.clone());
        desc = new;
        if converged {
            log.converged = true;
            break;
        }
    }
    (desc, log)
}

/// DRAFT on one instance, tool by tool.
pub fn produce(w: &mut Work<'_>, budget: &DraftBudget) -> Produced {
    let mut tools = tools_of(w.docs);
    let names: Vec<String> = tools.iter().map(|t| tool_name(t).to_string()).collect();
    for name in names {
        let (desc, _) = draft_tool(w, &tools, &name, budget);
        tools = with_description(&tools, &name, &desc);
    }
    Produced::docs(tools)
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::*;
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    #[test]
    fn rejects_a_too_similar_query_and_stops_on_convergence() {
        let explorer_calls = AtomicU64::new(0);
        let editor = FnEditor::new(|p: &str| {
            if p.starts_with("You are exploring") {
                let n = explorer_calls.fetch_add(1, Ordering::SeqCst);
                // 0: first query; 1: the same words again (rejected); 2: a new one.
                match n {
                    0 | 1 => "{\"query\": \"gcd of 12 and 18\", \"arguments\": {\"a\": 12, \"b\": 18}}".into(),
                    _ => "{\"query\": \"largest common factor of 100 and 75 please\", \"arguments\": {\"a\": 100, \"b\": 75}}".into(),
                }
            } else if p.starts_with("Compare what the tool") {
                "Name the parameters a and b.".into()
            } else {
                // The rewriter returns the same description every time: episode 2 converges.
                "{\"description\": \"Greatest common divisor of integers a and b.\", \"direction\": \"try large numbers\"}".into()
            }
        });
        let runner = FnRunner::new(|_| ToolOutput {
            ok: true,
            text: "6".into(),
        });
        let tb = toolbox(&editor, &runner);
        let (inst, doc) = instance();
        let mut w = Work::new(&tb, STAGE, &inst, &doc);
        let tools = tools_of(&doc);
        let (desc, log) = draft_tool(&mut w, &tools, "function_1", &DraftBudget::default());
        assert_eq!(desc, "Greatest common divisor of integers a and b.");
        assert_eq!(
            log,
            ToolLog {
                episodes: 2,
                rejected: 1,
                converged: true
            }
        );
        assert_eq!(explorer_calls.load(Ordering::SeqCst), 3);
        assert_eq!(runner.count(), 2, "one execution per episode");
        let steps: Vec<&str> = w.calls.iter().map(|c| c.step.as_str()).collect();
        assert_eq!(
            steps,
            ["explorer", "analyzer", "rewriter", "explorer", "explorer", "analyzer", "rewriter"]
        );
    }

    #[test]
    fn accepts_after_retries_and_stops_at_the_episode_limit() {
        let n = AtomicU64::new(0);
        let editor = FnEditor::new(|p: &str| {
            if p.starts_with("You are exploring") {
                "{\"query\": \"gcd of 12 and 18\", \"arguments\": {\"a\": 12, \"b\": 18}}".into()
            } else if p.starts_with("Compare what the tool") {
                String::new()
            } else {
                // Every rewrite is new and unrelated: never converges.
                let k = n.fetch_add(1, Ordering::SeqCst);
                format!("{{\"description\": \"variant {k} zebra{k} quantum{k} harbor{k}\"}}")
            }
        });
        let runner = FnRunner::new(|_| ToolOutput {
            ok: true,
            text: "6".into(),
        });
        let tb = toolbox(&editor, &runner);
        let (inst, doc) = instance();
        let mut w = Work::new(&tb, STAGE, &inst, &doc);
        let budget = DraftBudget {
            episodes: 3,
            retries: 2,
            ..Default::default()
        };
        let (_, log) = draft_tool(&mut w, &tools_of(&doc), "function_1", &budget);
        assert_eq!(log.episodes, 3);
        assert!(!log.converged);
        // Episodes 2 and 3 each reject twice, then accept the same query.
        assert_eq!(log.rejected, 4);
        assert_eq!(runner.count(), 3);
    }

    #[test]
    fn explorer_analyzer_and_rewriter_see_their_histories() {
        let prompts = std::sync::Mutex::new(Vec::<String>::new());
        let n = AtomicU64::new(0);
        let editor = FnEditor::new(|p: &str| {
            prompts.lock().unwrap().push(p.to_string());
            if p.starts_with("You are exploring") {
                let k = n.fetch_add(1, Ordering::SeqCst);
                format!("{{\"query\": \"zebra{k} quantum{k} harbor{k}\", \"arguments\": {{\"a\": {k}}}}}")
            } else if p.starts_with("Compare what the tool") {
                "Say what a is.".into()
            } else {
                let k = n.load(Ordering::SeqCst);
                format!("{{\"description\": \"version {k} lantern{k} meadow{k}\"}}")
            }
        });
        let runner = FnRunner::new(|args| ToolOutput {
            ok: true,
            text: format!("result for a={}", args["a"]),
        });
        let tb = toolbox(&editor, &runner);
        let (inst, doc) = instance();
        let mut w = Work::new(&tb, STAGE, &inst, &doc);
        let budget = DraftBudget {
            episodes: 2,
            ..Default::default()
        };
        draft_tool(&mut w, &tools_of(&doc), "function_1", &budget);
        let p = prompts.lock().unwrap().clone();
        let explorers: Vec<&String> = p
            .iter()
            .filter(|x| x.starts_with("You are exploring"))
            .collect();
        let analyzers: Vec<&String> = p.iter().filter(|x| x.starts_with("Compare what")).collect();
        let rewriters: Vec<&String> = p.iter().filter(|x| x.starts_with("Rewrite")).collect();
        assert_eq!(
            (explorers.len(), analyzers.len(), rewriters.len()),
            (2, 2, 2)
        );
        // Explorer: the (query, call, result) of the first episode.
        assert!(explorers[0].contains("(none yet)"));
        assert!(
            explorers[1].contains("Request: zebra0 quantum0 harbor0"),
            "{}",
            explorers[1]
        );
        assert!(explorers[1].contains("Call: function_1(a=0)"));
        assert!(explorers[1].contains("Output: result for a=0"));
        // Analyzer: the revision history (the empty start, then episode 1's rewrite).
        assert!(analyzers[0].contains("1. (empty)"), "{}", analyzers[0]);
        assert!(
            analyzers[1].contains("2. version 1 lantern1 meadow1"),
            "{}",
            analyzers[1]
        );
        // Rewriter: this episode's query, call and result, and the earlier ones.
        assert!(rewriters[1].contains("User request: zebra1 quantum1 harbor1"));
        assert!(rewriters[1].contains("Output: result for a=1"));
        assert!(rewriters[1].contains("Request: zebra0 quantum0 harbor0"));
    }
}
