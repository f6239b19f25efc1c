//! The offline environments' prompts carry the paper's own selection cues and nothing
//! of the hidden partition that ToolObserver is meant to discover (#31, #55).
//!
//! The rule (`stages::env::partition_leaks`): the paper's cues are allowed -- the chess
//! agent is asked for the strongest tool for the position and what type of position it
//! faces (tactical, positional, endgame, opening); the search agent is told the tools
//! return different types of results and asked what type of question it faces; the
//! search editor weighs query-type suitability. Forbidden is what the paper does not
//! say: the partition's nouns (phase, domain, topic, collection, part, ...), its names
//! (the chess phases and strengths, the search domains, taken from the gold docs) in
//! editor and tool texts, and any sentence that ties a tool to one of them -- what the
//! labelled `hints` switch sends (`prompts/hints/`, off by default).
//!
//! A local OpenAI-compatible test server on 127.0.0.1 plays agent, editor and
//! generator and records every request of every method a chess or search run has
//! (Base, ToolObserver, EasyTool, Play2Prompt, Trace-Free+; DRAFT runs on BFCL only, so
//! its templates are checked as files), in both prompt sets; the same run with
//! `hints = true` must be flagged (the negative control).

mod common;

use common::{otb, stdout_ok};
use serde_json::{json, Value};
use stages::env::{partition_leaks, Reader};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::Recorder;

impl Recorder {
    /// The requests recorded since the last call.
    fn take(&self) -> Vec<Value> {
        std::mem::take(&mut *self.requests.lock().unwrap())
    }
}

/// The reply to a request without tools: a final answer, one block of each editor
/// field, and a JSON object with the fields the baselines ask for (a tool-play call
/// whose query matches nothing, a user query, a description).
const EDITOR_REPLY: &str = "Explanation: nothing found.\nExact Answer: unknown\nConfidence: 0%\n\n**Tool: function_1**\nUpdated description: Returns a suggestion.\n\n**Tool: function_1**\nFinal description: Returns a suggestion.\n\n{\"arguments\": {\"query\": \"zqxjvw\"}, \"query\": \"zqxjvw\", \"answer\": \"unknown\", \"description\": \"Returns a suggestion.\"}";

/// Agent turns with tools: call the first tool (a search with a query that matches
/// nothing, so the tool answers with its empty-result text), then answer once a tool
/// result is in the conversation. Turns without tools: [`EDITOR_REPLY`].
fn model(mut stream: std::net::TcpStream, rec: Arc<Recorder>) {
    let Some(req) = rec.record(&stream) else {
        return;
    };
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
        _ => json!({"role": "assistant", "content": EDITOR_REPLY}),
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

/// One text of a request: who reads it, where it sits, the text.
struct Sent {
    reader: Reader,
    part_of: String,
    text: String,
}

/// The texts of one request that are the project's wording, each with its reader,
/// with the data (a question, the model's own replies, documents a search returned)
/// taken out: `data` are texts to remove.
fn wording(req: &Value, data: &[String]) -> Vec<Sent> {
    let agent = req["tools"].as_array().is_some_and(|t| !t.is_empty());
    let mut out = Vec::new();
    for m in req["messages"].as_array().into_iter().flatten() {
        let role = m["role"].as_str().unwrap_or("");
        let mut text = m["content"].as_str().unwrap_or("").to_string();
        for d in data {
            text = text.replace(d.as_str(), " ");
        }
        let reader = match role {
            // The model's own earlier turns are not the project's wording.
            "assistant" => continue,
            // Documents (JSON) are data; anything else is the tool's own wording.
            "tool" if text.trim_start().starts_with(['[', '{']) => continue,
            "tool" => Reader::Tool,
            _ if agent => Reader::Agent,
            _ => Reader::Editor,
        };
        out.push(Sent {
            reader,
            part_of: format!("{} message", if agent { "agent" } else { "editor" }),
            text,
        });
    }
    for t in req["tools"].as_array().into_iter().flatten() {
        let f = &t["function"];
        out.push(Sent {
            reader: Reader::Tool,
            part_of: format!("tool {}", f["name"]),
            text: format!(
                "{}\n\n{}\n\n{}",
                f["name"].as_str().unwrap_or(""),
                f["description"].as_str().unwrap_or(""),
                f["parameters"]
            ),
        });
    }
    out
}

/// Every leak in `requests`, one line each: where, what, and the text.
fn leaks(requests: &[Value], data: &[String]) -> Vec<(Reader, String)> {
    let mut out = Vec::new();
    for req in requests {
        for s in wording(req, data) {
            let bad = partition_leaks(&s.text, s.reader);
            if !bad.is_empty() {
                out.push((
                    s.reader,
                    format!("the {} text names {bad:?}:\n{}", s.part_of, s.text),
                ));
            }
        }
    }
    out
}

fn prompts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts")
}

/// Whitespace-normalised.
fn flat(t: &str) -> String {
    t.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A line of a shipped template that identifies its requests: its longest line
/// without a placeholder.
fn fingerprint(file: &str) -> String {
    let text = std::fs::read_to_string(prompts_dir().join(file)).unwrap();
    text.lines()
        .filter(|l| !l.contains("{{"))
        .map(flat)
        .max_by_key(String::len)
        .unwrap_or_default()
}

/// Every request's messages, whitespace-normalised, for [`fingerprint`] lookups.
fn all_text(requests: &[Value]) -> String {
    requests
        .iter()
        .flat_map(|r| r["messages"].as_array().cloned().unwrap_or_default())
        .map(|m| flat(m["content"].as_str().unwrap_or("")))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The methods whose requests must have been recorded, each with the templates
/// that identify its requests (one of them suffices; files not shipped are skipped).
fn assert_methods_sent(requests: &[Value], methods: &[(&str, Vec<String>)], what: &str) {
    let text = all_text(requests);
    for (method, files) in methods {
        let prints: Vec<String> = files
            .iter()
            .filter(|f| prompts_dir().join(f).is_file())
            .map(|f| fingerprint(f))
            .filter(|f| !f.is_empty())
            .collect();
        assert!(
            prints.iter().any(|f| text.contains(f)),
            "{what}: no {method} request was recorded (none of {prints:?})"
        );
    }
}

/// The methods of a chess or search run and the templates that identify each one's
/// requests in the prompt set `set` (`""` or `"paper/"`); `agent`: the environment's
/// agent system prompt. The paper set's run shares the store of the project set's, so
/// EasyTool's requests and Play2Prompt's tool play, which do not depend on the set,
/// are the ones already sent (and checked) and are not sent again.
fn method_templates(set: &str, agent: &str) -> Vec<(&'static str, Vec<String>)> {
    let f = |names: &[&str]| names.iter().map(|n| n.to_string()).collect::<Vec<_>>();
    let mut out = vec![
        ("base", f(&[&format!("{set}{agent}")])),
        ("toolobserver", f(&[&format!("{set}editor_batch.txt")])),
        ("toolobserver", f(&[&format!("{set}editor_merge.txt")])),
        (
            "tracefree",
            f(&[
                &format!("{set}tracefree_generate.txt"),
                &format!("{set}tracefree_system.txt"),
            ]),
        ),
    ];
    if set.is_empty() {
        out.push((
            "easytool",
            f(&["easytool_condense.txt", "easytool_guidelines.txt"]),
        ));
        out.push(("play2prompt", f(&["p2p_play.txt"])));
    }
    out
}

/// Who reads a shipped template, by its file name.
fn reader_of(name: &str) -> Reader {
    if name.contains("judge") {
        Reader::Any
    } else if name.contains("agent") {
        Reader::Agent
    } else {
        Reader::Editor
    }
}

/// Every shipped template in `dir` and its subfolders, except `prompts/hints/`.
fn templates(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() && p.file_name().is_some_and(|n| n != "hints") {
            templates(&p, out);
        } else if p.extension().is_some_and(|x| x == "txt") {
            out.push(p);
        }
    }
}

/// Without its `{{placeholders}}`.
fn unplaced(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find("{{") {
        out.push_str(&rest[..i]);
        rest = rest[i..].find("}}").map_or("", |j| &rest[i + j + 2..]);
    }
    out + rest
}

/// Every shipped template (both sets, every method's, DRAFT's included) follows the
/// rule for its reader; every hint file breaks it (the negative control).
#[test]
fn shipped_templates_name_no_partition_and_hints_do() {
    let mut files = Vec::new();
    templates(&prompts_dir(), &mut files);
    assert!(files.len() >= 30, "only {} prompt files found", files.len());
    assert!(files
        .iter()
        .any(|p| p.ends_with("paper/chess_agent_system.txt")));
    assert!(files.iter().any(|p| p.ends_with("draft_analyzer.txt")));
    for p in &files {
        let name = p.file_name().unwrap().to_string_lossy();
        let text = unplaced(&std::fs::read_to_string(p).unwrap());
        let bad = partition_leaks(&text, reader_of(&name));
        assert!(bad.is_empty(), "{} names {bad:?}", p.display());
    }
    let mut hints = 0;
    for e in std::fs::read_dir(prompts_dir().join("hints"))
        .unwrap()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().to_string();
        let text = std::fs::read_to_string(e.path()).unwrap();
        let bad = partition_leaks(&text, reader_of(&name));
        assert!(!bad.is_empty(), "the hint {name} is not flagged:\n{text}");
        hints += 1;
    }
    assert_eq!(hints, 3);
}

/// Both prompt sets carry the paper's selection cues: the chess agent is asked for
/// the strongest tool for the current position, to use a tool that is clearly
/// superior for the position type, and what type of position this is; the search
/// agent is told the tools return different types of results and asked what type of
/// question this is; the search editor weighs query-type suitability.
#[test]
fn both_sets_carry_the_papers_selection_cues() {
    let read =
        |f: &str| flat(&std::fs::read_to_string(prompts_dir().join(f)).unwrap()).to_lowercase();
    for set in ["paper/", ""] {
        let chess = read(&format!("{set}chess_agent_system.txt"))
            + " "
            + &read(&format!("{set}chess_agent_turn.txt"));
        for cue in [
            "strongest tool for the current position",
            "clearly superior",
            "type of position",
            "tactical",
            "positional",
            "endgame",
            "opening",
        ] {
            assert!(chess.contains(cue), "{set}chess: no `{cue}` in {chess}");
        }
        let search = read(&format!("{set}search_agent_system.txt"));
        for cue in ["different types of results", "type of question"] {
            assert!(search.contains(cue), "{set}search: no `{cue}` in {search}");
        }
        let notes = read(&format!("{set}search_editor_notes.txt"));
        for cue in ["types of query", "relevant", "complete"] {
            assert!(
                notes.contains(cue),
                "{set}search notes: no `{cue}` in {notes}"
            );
        }
    }
}

const METHODS: &str =
    "methods = [\"base\", \"toolobserver\", \"easytool\", \"play2prompt\", \"tracefree\"]\n";

const MODELS: &str = "[models]\nagent = \"openai:fake\"\neditor = \"openai:fake\"\n";

const PAPER: &str = "[prompts]\nset = \"paper\"\n";

#[test]
fn chess_runs_send_no_partition_and_a_hint_is_caught() {
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
    let chess = |extra: &str, methods: &str, prompts: &str| {
        format!(
            "name = \"c\"\n[chess]\ntool_sets = [\"phase_specialists\", \"strength_gradient\"]\n{methods}train_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponents = [1350]\nmovetime_ms = 10\nmax_plies = 6\nrounds = 1\nbatch_size = 2\nopponent_ratings = \"nominal\"\nconcurrency = 2\n{extra}[baselines.play2prompt]\ninit_loops = 1\n{MODELS}{prompts}"
        )
    };
    for (set, prompts, dir) in [("project", "", ""), ("paper", PAPER, "paper/")] {
        run(d.path(), set, &chess("", METHODS, prompts), &url);
        let requests = rec.take();
        let bad = leaks(&requests, &[]);
        assert!(bad.is_empty(), "chess, {set} set: {}", bad[0].1);
        let methods = method_templates(dir, "chess_agent_system.txt");
        assert_methods_sent(&requests, &methods, &format!("chess, {set} set"));
    }
    // The negative control: the editor hint names the phases, and the check says so.
    run(
        d.path(),
        "hinted",
        &chess(
            "hints = true\n",
            "methods = [\"base\", \"toolobserver\"]\n",
            "",
        ),
        &url,
    );
    let bad = leaks(&rec.take(), &[]);
    assert!(
        bad.iter().any(|(r, _)| *r == Reader::Editor),
        "`[chess] hints = true` was not flagged: {:?}",
        bad.iter().map(|b| &b.1).collect::<Vec<_>>()
    );
}

/// The questions of a search run's agent requests: data (generated from the corpus),
/// not the project's wording.
fn questions(requests: &[Value]) -> Vec<String> {
    requests
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
        .collect()
}

#[test]
fn search_runs_send_no_partition_and_a_hint_is_caught() {
    let d = tempfile::tempdir().unwrap();
    if !common::substitute_corpus(&d.path().join("store")) {
        return;
    }
    let rec = Arc::new(Recorder::default());
    let url = common::spawn_server(rec.clone(), model);
    let search = |extra: &str, methods: &str, prompts: &str| {
        format!(
            "name = \"s\"\n[search]\ntool_sets = [\"domains\", \"domains+all\"]\n{methods}train_questions = 2\ntest_questions = 2\nmax_turns = 2\nrounds = 1\nbatch_size = 2\nshow_queries = true\n{extra}[baselines.play2prompt]\ninit_loops = 1\n{MODELS}{prompts}"
        )
    };
    for (set, prompts, dir) in [("project", "", ""), ("paper", PAPER, "paper/")] {
        run(d.path(), set, &search("", METHODS, prompts), &url);
        let requests = rec.take();
        let data = questions(&requests);
        assert!(!data.is_empty());
        let bad = leaks(&requests, &data);
        assert!(bad.is_empty(), "search, {set} set: {}", bad[0].1);
        let methods = method_templates(dir, "search_agent_system.txt");
        assert_methods_sent(&requests, &methods, &format!("search, {set} set"));
    }
    // The negative control: the hints name the collection's parts to the agent and
    // the topics to the editor, and the check says so for both.
    run(
        d.path(),
        "hinted",
        &search(
            "hints = true\n",
            "methods = [\"base\", \"toolobserver\"]\n",
            "",
        ),
        &url,
    );
    let requests = rec.take();
    let bad = leaks(&requests, &questions(&requests));
    for reader in [Reader::Agent, Reader::Editor] {
        assert!(
            bad.iter().any(|(r, _)| *r == reader),
            "`[search] hints = true` was not flagged for the {reader:?}: {:?}",
            bad.iter().map(|b| &b.1).collect::<Vec<_>>()
        );
    }
}
