//! `[mcp] first_call = "required"`: an episode's first turn must call a tool.
//!
//! The embedded Qwen2.5-Coder-1.5B, left to choose, wrote its tool call as a JSON
//! block inside prose in 59 of the 92 episodes of a stopped `make reproduce-mcp` run
//! (an answer, not a call: 80 of 92 episodes called nothing). The test's model, a
//! local OpenAI-compatible server, does the same when the choice is its own, calls
//! the tool when a call is required, and answers once it has read a tool result;
//! the MCP server is the test-made `hostile_mcp.py echo`. Without `first_call` the
//! episode answers in prose (0%, no call); with `first_call = "required"` its first
//! request says `tool_choice: "required"`, the server is called and the task is
//! answered (100%).

mod common;

use serde_json::{json, Value};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// Each chat request's `tool_choice` (`-` when none was sent), in arrival order.
type Seen = Mutex<Vec<String>>;

/// The model: a call when one is required, prose around a JSON call when the choice
/// is its own and no tool result has come back yet, else the answer.
fn model(mut stream: std::net::TcpStream, seen: Arc<Seen>) {
    let Some(body) = common::read_request(&stream) else {
        return;
    };
    let req: Value = serde_json::from_slice(&body).unwrap_or_default();
    let choice = req["tool_choice"].as_str().unwrap_or("-").to_string();
    if let Ok(mut v) = seen.lock() {
        v.push(choice.clone());
    }
    let has_result = req["messages"]
        .as_array()
        .is_some_and(|m| m.iter().any(|m| m["role"] == "tool"));
    let call = json!({"name": "echo", "arguments": {"text": "Skerry"}});
    let message = match choice.as_str() {
        "required" => json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "echo", "arguments": call["arguments"].to_string()}}]}),
        _ if has_result => json!({"role": "assistant", "content": "Exact Answer: Skerry"}),
        _ => json!({"role": "assistant", "content": format!(
            "To answer this, I will call the echo tool:\n\n```json\n{call}\n```\n\nIt will print the word.")}),
    };
    let reply = json!({"id": "t", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
    common::respond(&mut stream, "200 OK", &reply.to_string());
}

/// The experiment in `dir` with `extra` lines in its `[mcp]` table.
fn experiment(dir: &Path, name: &str, extra: &str) -> std::path::PathBuf {
    let fixture = common::fixture("hostile_mcp.py");
    std::fs::write(
        dir.join("tasks.jsonl"),
        "{\"id\": \"e1\", \"server\": \"echo\", \"question\": \"Which word does the echo tool give back for Skerry?\", \"answer\": \"Skerry\", \"split\": \"test\"}\n",
    )
    .expect("write tasks");
    common::exp_file(
        dir,
        &format!(
            "name = \"{name}\"\n[mcp]\ntasks = \"tasks.jsonl\"\nsettings = [\"as-is\"]\nmethods = [\"gold\"]\nmax_turns = 2\n{extra}[mcp.servers.echo]\ncommand = [\"python3\", \"{}\", \"echo\"]\n[models]\nagent = \"openai:fake\"\n",
            fixture.display()
        ),
    )
}

/// `otb table mcp` of `exp`: the gold row's (accuracy %, calls per task).
fn gold_row(store: &Path, exp: &Path) -> (String, String) {
    let out = common::otb()
        .arg("--store")
        .arg(store)
        .args(["table", "mcp", "--experiment"])
        .arg(exp)
        .output()
        .expect("run otb table");
    let table = common::stdout_ok(&out);
    let cells = |line: &str| -> Vec<String> {
        line.trim()
            .trim_matches('|')
            .split('|')
            .map(|c| c.trim().to_string())
            .collect()
    };
    let header = table
        .lines()
        .find(|l| l.starts_with("| Tool set"))
        .map(cells)
        .unwrap_or_else(|| panic!("a header:\n{table}"));
    let row = table
        .lines()
        .find(|l| l.contains("| gold |"))
        .map(cells)
        .unwrap_or_else(|| panic!("a gold row:\n{table}"));
    let at = |name: &str| header.iter().position(|h| h == name).expect(name);
    (
        row[at("Accuracy %")].clone(),
        row[at("Calls / task")].clone(),
    )
}

#[test]
fn a_required_first_call_turns_a_call_written_in_prose_into_a_call() {
    if !common::python3("mcp", "no python3 for the test-made MCP server") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    let seen: Arc<Seen> = Arc::new(Mutex::new(Vec::new()));
    let url = common::spawn_server(seen.clone(), model);
    let run = |exp: &Path| {
        common::stdout_ok(
            &common::otb_run(&store, exp)
                .arg("--quiet")
                .env("OTB_LLM_BASE_URL", &url)
                .env("OTB_LLM_API_KEY", "test")
                .output()
                .expect("run otb"),
        )
    };
    let choices = || seen.lock().map(|v| v.clone()).unwrap_or_default();
    let forget = || {
        if let Ok(mut v) = seen.lock() {
            v.clear();
        }
    };

    // The model's choice: it writes the call in prose, which is its answer.
    let auto = experiment(dir.path(), "auto", "");
    run(&auto);
    assert_eq!(choices().first().map(String::as_str), Some("auto"));
    let (acc, calls) = gold_row(&store, &auto);
    assert_eq!((acc.as_str(), calls.as_str()), ("0.0", "0.00"));

    // Required: the first request asks for a call, the server is called, the task
    // is answered.
    forget();
    let required = experiment(dir.path(), "required", "first_call = \"required\"\n");
    run(&required);
    assert_eq!(
        choices().first().map(String::as_str),
        Some("required"),
        "{:?}",
        choices()
    );
    assert!(
        choices()[1..].iter().all(|c| c != "required"),
        "only the first turn is required: {:?}",
        choices()
    );
    let (acc, calls) = gold_row(&store, &required);
    assert_eq!((acc.as_str(), calls.as_str()), ("100.0", "1.00"));

    // A rerun asks the model nothing.
    forget();
    run(&required);
    assert!(choices().is_empty(), "{:?}", choices());
}
