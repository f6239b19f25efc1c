//! Trace-Free+ through `otb run` (`baselines.md`, "Trace-Free+"):
//!
//! - trace-free (`traces = 0`) and trace-based (`traces = 3`) on BFCL, chess and
//!   search with scripted models: one generator request per tool; trace-based, each
//!   tool is played three times (single calls, stored as `tool_runs`, step `play`) and
//!   nothing else is executed; the column is `+TF-prompt` (the un-tuned editor
//!   generates).
//! - BFCL with a local OpenAI-compatible test server on 127.0.0.1 as editor and
//!   generator, recording every request: a generator request is a system message and a
//!   user message that carries the tool's schema as JSON, `items`, `enum` and
//!   `default` included; no request (tool play or generator) contains a test
//!   instance's question; a named generator marked as tuned gets the paper's sampling
//!   (temperature 0.3, top-p 0.9, repetition penalty 1.1) and the column `+TF`.

mod common;

use common::{fixture, stdout_ok, stored};
use serde_json::{json, Value};
use stages::rows::{DocCallRow, DocRow, ToolRunRow};
use std::path::Path;
use std::sync::Arc;

/// `otb run` of `toml` (written as `exp.toml` in `dir`, store `dir/store`), with
/// `env` set; its stdout.
fn run(dir: &Path, toml: &str, env: &[(&str, &str)]) -> String {
    let exp = dir.join("exp.toml");
    std::fs::write(&exp, toml).unwrap();
    let mut c = common::otb();
    c.arg("--store")
        .arg(dir.join("store"))
        .arg("run")
        .arg(&exp)
        .arg("--quiet");
    for (k, v) in env {
        c.env(k, v);
    }
    stdout_ok(&c.output().unwrap())
}

/// `otb table NAME` of the experiment in `dir` (Markdown).
fn table(dir: &Path, name: &str) -> String {
    stdout_ok(
        &common::otb()
            .arg("--store")
            .arg(dir.join("store"))
            .args(["table", name, "--experiment"])
            .arg(dir.join("exp.toml"))
            .output()
            .unwrap(),
    )
}

/// What a finished tracefree stage stored: its docs, calls and tool runs.
fn outputs(dir: &Path) -> (Vec<DocRow>, Vec<DocCallRow>, Vec<ToolRunRow>) {
    let store = dir.join("store");
    (
        stored(&store, "tracefree", "docs.parquet"),
        stored(&store, "tracefree", "doc_calls.parquet"),
        stored(&store, "tracefree", "tool_runs.parquet"),
    )
}

/// The checks every scripted run shares: one generator request per tool, each tool
/// rewritten; trace-free, nothing played; trace-based, three single calls of each
/// tool (its own runs, step `play`) and the tool's play shown to its generator (the
/// scripted generator names the parameters the play's errors revealed, where there
/// were any). Returns the tool runs.
fn check_scripted(dir: &Path, traces: u32, table_name: &str) -> Vec<ToolRunRow> {
    let (docs, calls, runs) = outputs(dir);
    assert!(!docs.is_empty(), "no tracefree docs");
    let tools: Vec<&Value> = docs
        .iter()
        .flat_map(|d| d.tools.as_array().unwrap().iter())
        .collect();
    let generate = calls.iter().filter(|c| c.step == "generate").count();
    assert_eq!(generate, tools.len(), "one generator request per tool");
    assert!(tools.iter().all(|t| t["description"]
        .as_str()
        .unwrap()
        .starts_with("Generated: ")));
    if traces == 0 {
        assert!(runs.is_empty(), "trace-free executes nothing: {runs:?}");
        assert!(calls.iter().all(|c| c.step == "generate"));
    } else {
        assert_eq!(runs.len(), tools.len() * traces as usize, "{runs:?}");
        assert!(runs.iter().all(|r| r.step == "play"));
        for d in &docs {
            for t in d.tools.as_array().unwrap() {
                let name = t["name"].as_str().unwrap();
                let own = runs
                    .iter()
                    .filter(|r| r.instance_id == d.instance_id && r.tool == name)
                    .count();
                assert_eq!(own, traces as usize, "{} {name}", d.instance_id);
            }
        }
    }
    let text = table(dir, table_name);
    let label = if traces == 0 {
        "+TF-prompt"
    } else {
        "+TF-prompt traces"
    };
    assert!(text.contains(&format!("| {label} |")), "{text}");
    assert!(
        text.contains(&format!(
            "{label} = a prompting baseline in Trace-Free+'s request shape"
        )),
        "{text}"
    );
    assert!(
        text.contains("generator the editor (scripted:errors)"),
        "{text}"
    );
    runs
}

#[test]
fn bfcl_trace_free_and_trace_based_with_scripted_models() {
    for traces in [0, 3] {
        let d = tempfile::tempdir().unwrap();
        run(
            d.path(),
            &format!(
                "name = \"tf\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\"]\nmethods = [\"base\", \"tracefree\"]\n[models]\n{}\n[baselines.tracefree]\ntraces = {traces}\n",
                fixture("mini_bfcl.jsonl").display(),
                common::MODELS
            ),
            &[],
        );
        let runs = check_scripted(d.path(), traces, "table2");
        if traces > 0 {
            // `names` shows no parameters: the first call of each tool is made
            // without arguments and fails; the scripted editor proposes the names the
            // error revealed next, and the generator learns them.
            assert!(
                runs.iter().any(|r| !r.ok) && runs.iter().any(|r| r.ok),
                "{runs:?}"
            );
            let (docs, _, _) = outputs(d.path());
            assert!(docs.iter().all(|d| d.tools[0]["description"]
                .as_str()
                .unwrap()
                .contains("Parameters: ")));
        }
    }
}

#[test]
fn chess_trace_free_and_trace_based_with_scripted_models() {
    if let Err(e) = datasets::chess::engine::find_engine(None) {
        testkit::skip("engine", format_args!("no chess engine ({e})"));
        return;
    }
    for traces in [0, 3] {
        let d = tempfile::tempdir().unwrap();
        let line = |i: usize, fen: &str| {
            json!({"fen": fen, "phase": "opening", "evaluation": "equal", "cp": 0.0,
                "mate": null, "depth": 12, "test_id": format!("p{i}")})
            .to_string()
        };
        let train = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -";
        std::fs::write(d.path().join("train.jsonl"), line(0, train) + "\n").unwrap();
        std::fs::write(
            d.path().join("test.jsonl"),
            line(1, "8/5pk1/6p1/8/3R4/6P1/5PK1/2r5 w - -") + "\n",
        )
        .unwrap();
        run(
            d.path(),
            &format!("name = \"c\"\n[chess]\ntool_sets = [\"phase_specialists\"]\nmethods = [\"base\", \"tracefree\"]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponents = [1350]\nmovetime_ms = 10\nmax_plies = 6\nopponent_ratings = \"nominal\"\nconcurrency = 2\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:errors\"\n[baselines.tracefree]\ntraces = {traces}\n"),
            &[],
        );
        let runs = check_scripted(d.path(), traces, "table3");
        // A chess tool takes no parameters: no proposal is asked for, and each call is
        // the move the tool played on a training position and the evaluation after it.
        let (_, calls, _) = outputs(d.path());
        assert!(calls.iter().all(|c| c.step == "generate"), "{calls:?}");
        for r in &runs {
            assert_eq!(r.arguments, json!({}));
            assert!(r.ok, "{r:?}");
            assert!(r.output.starts_with(&format!("Position {train}")), "{r:?}");
            assert!(r.output.contains("the tool played"), "{r:?}");
        }
    }
}

#[test]
fn search_trace_free_and_trace_based_with_scripted_models() {
    for traces in [0, 3] {
        let d = tempfile::tempdir().unwrap();
        if !common::substitute_corpus(&d.path().join("store")) {
            return;
        }
        run(
            d.path(),
            &format!("name = \"s\"\n[search]\ntool_sets = [\"domains\"]\nmethods = [\"base\", \"tracefree\"]\ntrain_questions = 2\ntest_questions = 2\nmax_turns = 2\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:errors\"\n[baselines.tracefree]\ntraces = {traces}\n"),
            &[],
        );
        let runs = check_scripted(d.path(), traces, "table4");
        if traces > 0 {
            // The first call of each tool has no query (the docs are opaque) and
            // fails; the next ones search with the query the editor then proposes,
            // and the trace holds that search's own result list.
            for tool in runs.iter().map(|r| r.tool.clone()).collect::<Vec<_>>() {
                let own: Vec<&ToolRunRow> = runs.iter().filter(|r| r.tool == tool).collect();
                assert!(!own[0].ok, "{own:?}");
                assert!(
                    own[1..]
                        .iter()
                        .all(|r| r.ok && r.arguments.get("query").is_some()),
                    "{own:?}"
                );
            }
        }
    }
}

/// One local model server's record of requests.
use common::Recorder;

/// A model on 127.0.0.1: tool-play requests get arguments for the fixture's tools;
/// generator requests (a system message first) a JSON description.
fn model(mut stream: std::net::TcpStream, rec: Arc<Recorder>) {
    let Some(req) = rec.record(&stream) else {
        return;
    };
    let user = req["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .and_then(|m| m["content"].as_str())
        .unwrap_or("")
        .to_string();
    let content = if user.contains("\"parameter_name\"") {
        if user.contains("\"enum\"") {
            json!({"arguments": {"stock_name": "AAPL", "interval": "1wk"}})
        } else {
            json!({"arguments": {"array": [3, 1, 2], "reverse": true}})
        }
    } else {
        json!({"description": "Sorts or looks up, as its schema says."})
    };
    let reply = json!({"id": "t", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content.to_string()}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
    common::respond(&mut stream, "200 OK", &reply.to_string());
}

/// Two instances in BFCL's format whose functions have `items`, `default` and `enum`
/// in their schemas, as BFCL's `sort_array` and `get_stock_history` do (this
/// project's wording; the executor runs both offline).
fn rich_fixture(dir: &Path) -> (std::path::PathBuf, Vec<String>) {
    let questions = vec![
        "Put the scores 88, 42 and 67 in descending order for the leaderboard.".to_string(),
        "Show me the weekly price moves of Apple over the past few months.".to_string(),
    ];
    let sort = json!({"name": "sort_array", "description": "Sorts an array of numbers.",
        "parameters": {"type": "dict", "properties": {
            "array": {"type": "array", "items": {"type": "integer"}, "description": "The numbers."},
            "reverse": {"type": "boolean", "description": "Descending order.", "default": false}},
            "required": ["array"]}});
    let stock = json!({"name": "get_stock_history", "description": "Price history of a stock.",
        "parameters": {"type": "dict", "properties": {
            "stock_name": {"type": "string", "description": "The ticker."},
            "interval": {"type": "string", "enum": ["1d", "1wk", "1mo"], "description": "Bar size."},
            "diffandsplits": {"type": "string", "enum": ["true", "false"], "default": "true", "description": "Dividends and splits."}},
            "required": ["stock_name", "interval"]}});
    let rows = [
        json!({"id": "exec_simple_0", "question": [[{"role": "user", "content": questions[0]}]],
            "function": [sort], "ground_truth": ["sort_array(array=[88, 42, 67], reverse=True)"],
            "execution_result_type": ["exact_match"]}),
        json!({"id": "exec_simple_1", "question": [[{"role": "user", "content": questions[1]}]],
            "function": [stock], "ground_truth": ["get_stock_history(stock_name='AAPL', interval='1wk')"],
            "execution_result_type": ["structural_match"]}),
    ];
    let path = dir.join("rich.jsonl");
    let text: Vec<String> = rows.iter().map(Value::to_string).collect();
    std::fs::write(&path, text.join("\n") + "\n").unwrap();
    (path, questions)
}

/// The generator requests among `requests`: those that open with a system message.
fn generator_requests(requests: &[Value]) -> Vec<Value> {
    requests
        .iter()
        .filter(|r| r["messages"][0]["role"] == "system")
        .cloned()
        .collect()
}

#[test]
fn bfcl_generator_requests_carry_the_schema_and_never_a_question() {
    let d = tempfile::tempdir().unwrap();
    let (data, questions) = rich_fixture(d.path());
    let rec = Arc::new(Recorder::default());
    let url = common::spawn_server(rec.clone(), model);
    let exp = |extra: &str| {
        format!(
            "name = \"tf\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names+params\"]\nmethods = [\"base\", \"tracefree\"]\n[models]\nagent = \"scripted:schema\"\neditor = \"openai:fake\"\n[baselines.tracefree]\ntraces = 3\n{extra}",
            data.display()
        )
    };
    let env = [
        ("OTB_LLM_BASE_URL", url.as_str()),
        ("OTB_LLM_API_KEY", "test"),
    ];
    run(d.path(), &exp(""), &env);
    let requests = rec.requests.lock().unwrap().clone();
    let generator = generator_requests(&requests);
    assert_eq!(generator.len(), 2, "one per tool: {generator:?}");
    let user_of = |r: &Value| {
        r["messages"][1]["content"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    let sort = generator
        .iter()
        .map(user_of)
        .find(|u| u.contains("\"items\""))
        .expect("the array tool's request");
    let stock = generator
        .iter()
        .map(user_of)
        .find(|u| u.contains("\"1wk\""))
        .expect("the enum tool's request");
    // The schema as JSON: the array's items, the enum's values, the defaults.
    assert!(
        sort.contains("\"items\": {\n") && sort.contains("\"type\": \"integer\""),
        "{sort}"
    );
    assert!(sort.contains("\"default\": false"), "{sort}");
    assert!(
        stock.contains("\"enum\": [\n") && stock.contains("\"1mo\""),
        "{stock}"
    );
    assert!(stock.contains("\"default\": \"true\""), "{stock}");
    assert!(stock.contains("\"required\": [\n"), "{stock}");
    for r in &generator {
        assert_eq!(r["messages"].as_array().unwrap().len(), 2, "{r}");
        assert!(r["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("tool documentation"));
        // Three single calls of this tool, with their own results.
        let u = user_of(r);
        assert!(u.contains("3 calls: "), "{u}");
        // The generator is the editor here: the paper's temperature and top-p, and no
        // repetition penalty (the editor's endpoint may refuse the field).
        assert_eq!(r["temperature"], json!(0.3), "{r}");
        assert_eq!(r["top_p"], json!(0.9), "{r}");
        assert!(r.get("repetition_penalty").is_none(), "{r}");
    }
    // No request -- tool play or generator -- contains a test instance's question.
    let plays = requests.len() - generator.len();
    assert_eq!(plays, 6, "3 proposals per tool");
    for r in &requests {
        let text = r.to_string();
        for q in &questions {
            assert!(
                !text.contains(q.as_str()),
                "a question reached a request: {r}"
            );
        }
    }
    let runs: Vec<ToolRunRow> = stored(&d.path().join("store"), "tracefree", "tool_runs.parquet");
    assert_eq!(runs.len(), 6);
    assert!(runs.iter().all(|r| r.step == "play"), "{runs:?}");
    assert!(
        runs.iter().any(|r| r.tool == "function_1" && r.ok),
        "{runs:?}"
    );
    let t2 = table(d.path(), "table2");
    assert!(t2.contains("| +TF-prompt traces |"), "{t2}");
    assert!(t2.contains("generator the editor (openai:fake)"), "{t2}");

    // A named generator marked as fine-tuned: the column is Trace-Free+, and its
    // requests carry the paper's repetition penalty beside temperature and top-p.
    rec.requests.lock().unwrap().clear();
    run(
        d.path(),
        &exp("generator = \"openai:tf-generator\"\ngenerator_tuned = true\n"),
        &env,
    );
    let requests = rec.requests.lock().unwrap().clone();
    let generator = generator_requests(&requests);
    assert_eq!(generator.len(), 2, "{generator:?}");
    for r in &generator {
        assert_eq!(r["model"], "tf-generator");
        assert_eq!(r["repetition_penalty"], json!(1.1), "{r}");
        assert_eq!(r["temperature"], json!(0.3), "{r}");
        assert_eq!(r["top_p"], json!(0.9), "{r}");
    }
    // Tool play is the editor's, as before: its proposals come from the call cache.
    assert!(
        requests.iter().all(|r| r["model"] == "tf-generator"),
        "{requests:?}"
    );
    let t2 = table(d.path(), "table2");
    assert!(t2.contains("| +TF traces |"), "{t2}");
    assert!(
        t2.contains("+TF traces = Trace-Free+ (trace-based: each tool's interface and a summary of 3 of its single calls in tool play; fine-tuned generator openai:tf-generator)"),
        "{t2}"
    );

    // The paper's layout: its own system message, the same schema.
    rec.requests.lock().unwrap().clear();
    run(
        d.path(),
        &format!("{}[prompts]\nset = \"paper\"\n", exp("")),
        &env,
    );
    let requests = rec.requests.lock().unwrap().clone();
    let generator = generator_requests(&requests);
    assert_eq!(generator.len(), 2, "{generator:?}");
    for r in &generator {
        let u = user_of(r);
        assert!(u.starts_with("Tool name: "), "{u}");
        assert!(u.contains("Parameters (JSON schema):\n{"), "{u}");
        assert!(u.contains("Execution trace summary:\n3 calls: "), "{u}");
        assert!(r["messages"][0]["content"]
            .as_str()
            .unwrap()
            .contains("Output a JSON object with a single key \"description\""));
    }
}
