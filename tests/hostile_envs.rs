//! The chess and search environments attacked as a careless or hostile user would,
//! through `otb run`: UCI engines that hang (no `uciok`, no `readyok`, no `bestmove`)
//! or print garbage (an endless stream, one enormous line, an illegal move);
//! BrowseComp-Plus files with duplicate, empty, enormous or incomplete documents and
//! queries with a wrong canary or a 1 MB answer; models (a local OpenAI-compatible
//! server on 127.0.0.1) that send 1 MB queries, call unknown tools, repeat one call
//! every turn or answer with nothing; and runs killed with SIGKILL at many points.
//! Each ends with one clear error line (exit 2 for bad input before anything is
//! published, exit 1 for a broken engine, never a signal, a hang or a staging folder
//! left behind), or with a classified row and the run going on.

mod common;

use common::{chess_engine, one_error_line, otb, staging, stdout_ok};
use datasets::search::real::encrypt;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` to its end, its output kept in files of `dir`; a run still going after
/// `secs` seconds is killed and fails the test (a hang is a failure, never a stuck
/// test).
fn bounded(mut cmd: Command, dir: &Path, secs: u64) -> Output {
    let out_path = dir.join(format!("stdout-{}", rand_tag()));
    let err_path = dir.join(format!("stderr-{}", rand_tag()));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "otb still running after {secs} s:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = Output {
        status,
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: std::fs::read(&err_path).unwrap(),
    };
    let _ = std::fs::remove_file(out_path);
    let _ = std::fs::remove_file(err_path);
    out
}

/// A name no other call of this process uses.
fn rand_tag() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// An executable shell script `name` in `dir` (a fake UCI engine).
fn script(dir: &Path, name: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// A positions row (`test_id` = `id`) of the start position.
fn position_line(id: &str) -> String {
    format!("{{\"fen\": \"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -\", \"phase\": \"opening\", \"evaluation\": \"equal\", \"cp\": 0.0, \"mate\": null, \"depth\": 12, \"test_id\": \"{id}\"}}\n")
}

/// A fake UCI engine's script: answers `uci` and `isready`, then on `go` runs `on_go`
/// (shell); `$move` is a legal move of the position last set (`e2e4` for White from
/// the start position, `e7e5` for Black after any first move).
fn uci_engine(on_go: &str) -> String {
    format!(
        "#!/bin/sh\nmove=e2e4\nwhile read -r line; do\n  case \"$line\" in\n    uci) echo 'id name fake'; echo uciok ;;\n    isready) echo readyok ;;\n    \"position fen \"*\" b \"*) move=e7e5 ;;\n    \"position fen \"*) move=e2e4 ;;\n    go*) {on_go} ;;\n    quit) exit 0 ;;\n  esac\ndone\n"
    )
}

/// A fake engine that plays `$move` at once.
const PLAYS: &str = "echo 'info depth 1 score cp 0'; echo \"bestmove $move\"";

/// `otb run` of a 2-ply chess game (the agent's tool, then the opponent) from the
/// start position in `dir` with the engine `engine` (relative to `dir`); `extra` adds
/// `[chess]` keys, `models` is the `[models]` table.
fn chess_run(dir: &Path, engine: &str, extra: &str, models: &str, secs: u64) -> Output {
    std::fs::write(dir.join("train.jsonl"), position_line("a")).unwrap();
    std::fs::write(dir.join("test.jsonl"), position_line("b")).unwrap();
    let exp = dir.join("exp.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"c\"\n[chess]\ntool_sets = [\"strength_gradient\"]\nmethods = [\"base\"]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponents = [1350]\nmovetime_ms = 10\nmax_plies = 2\nopponent_ratings = \"nominal\"\nconcurrency = 1\nengine = \"{engine}\"\n{extra}\n[models]\n{models}\n"
        ),
    )
    .unwrap();
    // Under a 4 GB address-space limit: an engine's endless output must not grow
    // otb's memory without bound (nor take the machine's).
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg("ulimit -v 4000000; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_otb"))
        .arg("--store")
        .arg(dir.join("store"))
        .arg("run")
        .arg(&exp)
        .env_remove("OTB_STORE")
        .env_remove("OTB_CHESS_ENGINE")
        .env_remove("OTB_FAULT_PAUSE")
        .env_remove("OTB_LLM_BASE_URL");
    bounded(c, dir, secs)
}

/// The last stderr line of a run that failed because of its engine: `otb: error: `,
/// naming the engine and `what`, exit 1, never a signal, no staging folder left.
fn engine_failure(dir: &Path, out: &Output, engine: &str, what: &str) {
    use std::os::unix::process::ExitStatusExt;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        None,
        "{engine}: killed by a signal: {stderr}"
    );
    assert_eq!(out.status.code(), Some(1), "{engine}: {stderr}");
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with("otb: error: ") && last.contains(engine) && last.contains(what),
        "{engine}: {stderr}"
    );
    assert!(
        last.len() < 1000,
        "{engine}: an error line of {} bytes",
        last.len()
    );
    assert!(
        stderr.len() < 4000,
        "{engine}: stderr of {} bytes",
        stderr.len()
    );
    assert_eq!(
        staging(&dir.join("store")),
        Vec::<String>::new(),
        "{engine}"
    );
}

/// Engines that hang (never `uciok`, never `readyok`, never `bestmove`) or print
/// garbage (an endless stream of lines, one enormous line, a move that is not legal):
/// with `engine_timeout_ms = 1000` each run ends within seconds with one line naming
/// the engine and what it failed to say (exit 1, no staging folder), and an engine
/// that hangs once is restarted and the game goes on. The cases run side by side.
#[test]
fn engines_that_hang_or_print_garbage_end_with_one_line_or_are_restarted() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("hung-once");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "silent.sh",
            "#!/bin/sh\nwhile read -r line; do :; done\n".into(),
            "uciok",
        ),
        (
            "no_ready.sh",
            "#!/bin/sh\nwhile read -r line; do\n  case \"$line\" in uci) echo uciok ;; esac\ndone\n"
                .into(),
            "readyok",
        ),
        ("no_bestmove.sh", uci_engine(":"), "bestmove"),
        (
            "endless.sh",
            "#!/bin/sh\nexec yes 'garbage garbage garbage garbage'\n".into(),
            "uciok",
        ),
        (
            "one_huge_line.sh",
            uci_engine("head -c 3000000 /dev/zero | tr '\\0' x"),
            "bestmove",
        ),
        (
            "illegal.sh",
            uci_engine("echo 'bestmove e2e5'"),
            "bestmove e2e5",
        ),
        (
            "hangs_once.sh",
            uci_engine(&format!(
                "if [ -e '{m}' ]; then {PLAYS}; else : > '{m}'; fi",
                m = marker.display()
            )),
            "",
        ),
    ];
    std::thread::scope(|s| {
        for (name, text, what) in &cases {
            let dir = d.path().join(name.trim_end_matches(".sh"));
            std::fs::create_dir(&dir).unwrap();
            script(&dir, name, text);
            s.spawn(move || {
                let out = chess_run(
                    &dir,
                    &format!("./{name}"),
                    "engine_timeout_ms = 1000",
                    "agent = \"scripted:random\"",
                    60,
                );
                if what.is_empty() {
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    assert!(out.status.success(), "{name}: {stderr}");
                    assert_eq!(staging(&dir.join("store")), Vec::<String>::new());
                } else {
                    engine_failure(&dir, &out, name, what);
                }
            });
        }
    });
}

// ---------------------------------------------------------------------------------
// BrowseComp-Plus files (a small fixture written here, in the dataset's shape)

const CANARY: &str = "hostile fixture canary";

/// One document of a fixture corpus: `docid`, `text`, `url`.
fn doc(docid: &str, text: &str, url: &str) -> String {
    json!({"docid": docid, "text": text, "url": url}).to_string()
}

/// The fixture's documents: three named domains and one outside.
fn docs() -> Vec<String> {
    vec![
        doc(
            "d1",
            "The lighthouse keeper of Skerry Point wrote a diary in 1911.",
            "https://en.wikipedia.org/wiki/Skerry",
        ),
        doc(
            "d2",
            "Report: the Skerry Point lighthouse was automated in 1987.",
            "https://www.nytimes.com/skerry",
        ),
        doc(
            "d3",
            "A survey of tidal energy in northern straits.",
            "https://arxiv.org/abs/1234",
        ),
        doc(
            "d4",
            "Orchard Lane bakery sells rye bread on Sundays.",
            "https://example.org/bakery",
        ),
    ]
}

/// A question row as the dataset publishes it: every string but `query_id` encrypted
/// with `canary`, the answer's document in `gold_docs`.
fn query(id: &str, question: &str, answer: &str, gold: &str, canary: &str) -> String {
    json!({
        "query_id": id,
        "query": encrypt(question, canary),
        "answer": encrypt(answer, canary),
        "gold_docs": [{"docid": encrypt(gold, canary), "url": encrypt("https://en.wikipedia.org/wiki/Skerry", canary)}],
    })
    .to_string()
}

/// The fixture's questions (four: one for training, three for tests).
fn queries() -> Vec<String> {
    vec![
        query(
            "1",
            "Which keeper wrote a diary in 1911?",
            "The Skerry Point keeper",
            "d1",
            CANARY,
        ),
        query(
            "2",
            "When was the Skerry Point lighthouse automated?",
            "1987",
            "d2",
            CANARY,
        ),
        query(
            "3",
            "What was surveyed in northern straits?",
            "tidal energy",
            "d3",
            CANARY,
        ),
        query(
            "4",
            "What does the Orchard Lane bakery sell on Sundays?",
            "rye bread",
            "d4",
            CANARY,
        ),
    ]
}

/// Base play with the opaque domain tools (the `[search]` keys of most tests here).
const BASE: &str = "tool_sets = [\"domains\"]\nmethods = [\"base\"]\n";

/// Writes the category map, `corpus` and `queries` (JSON lines) into `dir`, and an
/// experiment over them whose `[search]` table ends with `search` and whose models are
/// `models`.
fn bcp(dir: &Path, corpus: &[String], queries: &[String], search: &str, models: &str) -> PathBuf {
    std::fs::write(
        dir.join("categories.json"),
        r#"{"wikipedia": ["en.wikipedia.org"], "news": ["www.nytimes.com"], "academic": ["arxiv.org"]}"#,
    )
    .unwrap();
    std::fs::write(dir.join("corpus.jsonl"), corpus.join("\n") + "\n").unwrap();
    std::fs::write(dir.join("queries.jsonl"), queries.join("\n") + "\n").unwrap();
    let exp = dir.join("bcp.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"bcp\"\n[search]\nsource = \"browsecomp-plus\"\ncorpus_file = \"corpus.jsonl\"\nqueries_file = \"queries.jsonl\"\ncategories_file = \"categories.json\"\ncanary = \"{CANARY}\"\n{search}\n[models]\n{models}\n"
        ),
    )
    .unwrap();
    exp
}

/// `otb run --quiet` of `exp` over `<dir>/store`, killed (and failed) after 60 s.
fn run_exp(dir: &Path, exp: &Path, env: &[(&str, &str)]) -> Output {
    let mut c = otb();
    c.arg("--store")
        .arg(dir.join("store"))
        .arg("run")
        .arg(exp)
        .arg("--quiet");
    for (k, v) in env {
        c.env(k, v);
    }
    bounded(c, dir, 60)
}

/// Rows of `table` in the store's one entry of `stage`.
fn stored<T: pipeline::table::Row + serde::de::DeserializeOwned>(
    store: &Path,
    stage: &str,
    table: &str,
) -> Vec<T> {
    let dirs: Vec<PathBuf> = std::fs::read_dir(store.join(stage))
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    assert_eq!(dirs.len(), 1, "{stage}: {dirs:?}");
    pipeline::table::read_rows(&dirs[0].join(format!("{table}.parquet"))).unwrap()
}

/// Files a user could hand over by mistake, each one error line, exit 2, and no search
/// stage published: a docid twice (both lines named), a document without text, a file
/// cut in the middle of its last row, a 1 MB docid twice (quoted in part), a question
/// encrypted with another canary, a gold document that is a 1 MB object and not a
/// docid (quoted in part), a question without an answer.
#[test]
fn browsecomp_plus_files_with_broken_rows_are_one_line_each() {
    let d = tempfile::tempdir().unwrap();
    let huge = "x".repeat(1_000_000);
    let mut dup = docs();
    dup.push(doc(
        "d2",
        "Another text under the same docid.",
        "https://arxiv.org/a",
    ));
    let mut no_text = docs();
    no_text[2] = json!({"docid": "d3", "url": "https://arxiv.org/abs/1234"}).to_string();
    let mut cut = docs();
    let last = cut.pop().unwrap();
    cut.push(last[..last.len() / 2].to_string());
    let mut huge_dup = docs();
    huge_dup.push(doc(&huge, "one", "https://arxiv.org/1"));
    huge_dup.push(doc(&huge, "two", "https://arxiv.org/2"));
    let mut other_canary = queries();
    other_canary[2] = query(
        "3",
        "What was surveyed?",
        "tidal energy",
        "d3",
        "another canary",
    );
    let mut huge_gold = queries();
    huge_gold[0] = json!({"query_id": "1", "query": encrypt("Which keeper?", CANARY), "answer": encrypt("keeper", CANARY), "gold_docs": [{"note": 1, "blob": [huge.as_str()]}]}).to_string();
    let mut no_answer = queries();
    no_answer[1] = json!({"query_id": "2", "query": encrypt("When?", CANARY)}).to_string();
    // (case, corpus rows, query rows, what the error line names)
    type Case<'a> = (&'a str, Vec<String>, Vec<String>, Vec<&'a str>);
    let cases: Vec<Case> = vec![
        (
            "duplicate",
            dup,
            queries(),
            vec!["corpus.jsonl:5", "\"d2\"", "line 2"],
        ),
        (
            "no text",
            no_text,
            queries(),
            vec!["corpus.jsonl:3", "\"text\""],
        ),
        ("cut", cut, queries(), vec!["corpus.jsonl:4", "not JSON"]),
        (
            "huge duplicate",
            huge_dup,
            queries(),
            vec!["corpus.jsonl:6", "more than once"],
        ),
        (
            "other canary",
            docs(),
            other_canary,
            vec!["queries.jsonl:3", "canary"],
        ),
        (
            "huge gold",
            docs(),
            huge_gold,
            vec!["queries.jsonl:1", "gold_docs"],
        ),
        (
            "no answer",
            docs(),
            no_answer,
            vec!["queries.jsonl:2", "\"answer\""],
        ),
    ];
    for (name, corpus, qs, expect) in cases {
        let dir = d.path().join(name);
        std::fs::create_dir(&dir).unwrap();
        let exp = bcp(
            &dir,
            &corpus,
            &qs,
            &format!("{BASE}train_questions = 1\ntest_questions = 3\nmax_turns = 1"),
            "agent = \"scripted:random\"",
        );
        let err = one_error_line(&run_exp(&dir, &exp, &[]));
        assert!(
            err.len() < 1000,
            "{name}: an error line of {} bytes",
            err.len()
        );
        for e in expect {
            assert!(err.contains(e), "{name}: {e} not in {err}");
        }
        let search: Vec<String> = published(&dir.join("store"))
            .into_iter()
            .filter(|k| k.starts_with("search-"))
            .collect();
        assert_eq!(search, Vec::<String>::new(), "{name}");
    }
}

/// Documents that are odd but documents: empty, blanks only, the same text under two
/// docids, 4 MB of words, and a 2 MB word; and a question whose answer is 1 MB. The
/// run succeeds; every tool result the agent was shown and every editor's view is
/// bounded.
#[test]
fn empty_duplicate_and_enormous_documents_and_a_1_mb_answer_run() {
    let d = tempfile::tempdir().unwrap();
    let mut corpus = docs();
    corpus.push(doc("empty", "", "https://en.wikipedia.org/wiki/Empty"));
    corpus.push(doc(
        "blank",
        " \n\t ",
        "https://en.wikipedia.org/wiki/Blank",
    ));
    corpus.push(doc(
        "copy",
        "The lighthouse keeper of Skerry Point wrote a diary in 1911.",
        "https://en.wikipedia.org/wiki/Copy",
    ));
    corpus.push(doc(
        "words",
        &"keeper lighthouse diary tide ".repeat(150_000),
        "https://en.wikipedia.org/wiki/Words",
    ));
    corpus.push(doc(
        "word",
        &format!("keeper {}", "y".repeat(2_000_000)),
        "https://en.wikipedia.org/wiki/Word",
    ));
    let mut qs = queries();
    qs[3] = query(
        "4",
        "Which keeper kept a diary?",
        &"a very long answer ".repeat(55_000),
        "words",
        CANARY,
    );
    let exp = bcp(
        d.path(),
        &corpus,
        &qs,
        &format!(
            "{BASE}max_turns = 1\nshow_queries = true\ntrain_questions = 0\ntest_questions = 4"
        ),
        "agent = \"scripted:search-oracle\"",
    );
    let out = run_exp(d.path(), &exp, &[]);
    stdout_ok(&out);
    assert!(
        out.stderr.len() < 4000,
        "stderr of {} bytes",
        out.stderr.len()
    );
    let store = d.path().join("store");
    let episodes: Vec<stages::search::EpisodeRow> = stored(
        &store,
        stages::search::explore::EXPLORE_STAGE,
        "search_episodes",
    );
    assert_eq!(episodes.len(), 4);
    let shown = serde_json::to_string(&episodes).unwrap();
    for docid in ["\\\"words\\\"", "\\\"word\\\"", "output truncated"] {
        assert!(shown.contains(docid), "{docid} was never shown");
    }
    for e in &episodes {
        for step in e.steps.as_array().unwrap() {
            for r in step["results"].as_array().unwrap() {
                let r = r.as_str().unwrap();
                assert!(
                    r.len() < 70_000,
                    "{}: a result of {} bytes",
                    e.question_id,
                    r.len()
                );
            }
        }
        assert!(
            e.editor_text.len() < 16_000,
            "{}: an editor's view of {} bytes",
            e.question_id,
            e.editor_text.len()
        );
    }
}
/// The stage results in a store, as `stage/key`.
fn published(store: &Path) -> Vec<String> {
    common::published(store).unwrap_or_default()
}

// ---------------------------------------------------------------------------------
// Hostile models: a local OpenAI-compatible server on 127.0.0.1

/// What a hostile model does on every turn.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Behaviour {
    /// Calls the first offered tool with 1 MB of arguments (a search query of 130,000
    /// distinct words); its final answer is 900 KB.
    Huge,
    /// Calls a tool that is not offered, whose name is 200 KB.
    Unknown,
    /// Calls the first offered tool with the same arguments every turn.
    Repeat,
    /// Answers with nothing: no text, no call.
    Nothing,
}

/// The behaviour of a search request: by its question (see [`queries`]).
fn search_behaviour(question: &str) -> Behaviour {
    if question.contains("diary") {
        Behaviour::Huge
    } else if question.contains("automated") {
        Behaviour::Unknown
    } else if question.contains("surveyed") {
        Behaviour::Repeat
    } else {
        Behaviour::Nothing
    }
}

/// An OpenAI-style reply carrying `message`.
fn reply(message: Value) -> String {
    json!({"id": "t", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})
    .to_string()
}

/// A request answered as `behaviour` says: a tool call while tools are offered, else
/// (the forced final turn) an answer.
fn hostile_answer(req: &Value, behaviour: Behaviour) -> String {
    let tools = req["tools"].as_array().cloned().unwrap_or_default();
    let first = tools
        .first()
        .and_then(|t| t["function"]["name"].as_str())
        .unwrap_or("none")
        .to_string();
    let call = |name: String, args: Value| {
        reply(json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}))
    };
    let text = |t: String| reply(json!({"role": "assistant", "content": t}));
    match (behaviour, tools.is_empty()) {
        (Behaviour::Nothing, _) => text(String::new()),
        (Behaviour::Huge, false) => call(
            first,
            json!({"query": (0..130_000).map(|i| format!("w{i}")).collect::<Vec<_>>().join(" ")}),
        ),
        (Behaviour::Huge, true) => text(format!("Exact Answer: {}", "keeper ".repeat(128_000))),
        (Behaviour::Unknown, false) => call(
            format!("no_such_tool_{}", "z".repeat(200_000)),
            json!({"query": "lighthouse"}),
        ),
        (Behaviour::Repeat, false) => call(first, json!({"query": "tidal energy"})),
        (_, true) => text("tidal energy".into()),
    }
}

/// The search model: each question's behaviour is [`search_behaviour`] of its text.
fn search_model(mut stream: std::net::TcpStream, _: std::sync::Arc<()>) {
    let Some(body) = common::read_request(&stream) else {
        return;
    };
    let req: Value = serde_json::from_slice(&body).unwrap_or_default();
    let question = req["messages"][1]["content"].as_str().unwrap_or("");
    let text = hostile_answer(&req, search_behaviour(question));
    common::respond(&mut stream, "200 OK", &text);
}

/// A search agent that sends 1 MB queries (and a 900 KB answer), calls a tool that is
/// not offered (with a 200 KB name), repeats one call every turn, or answers with
/// nothing: every episode is a row (no model error: each is an answer), the run goes
/// on; the agent is told which tools there are, every result it is shown is bounded,
/// and so is every episode as the editor reads it (queries shown).
#[test]
fn hostile_search_agents_end_as_rows_and_the_run_goes_on() {
    let d = tempfile::tempdir().unwrap();
    let url = common::spawn_server(std::sync::Arc::new(()), search_model);
    let exp = bcp(
        d.path(),
        &docs(),
        &queries(),
        &format!(
            "{BASE}train_questions = 0\ntest_questions = 4\nmax_turns = 2\nshow_queries = true"
        ),
        "agent = \"openai:fake\"",
    );
    let out = run_exp(
        d.path(),
        &exp,
        &[("OTB_LLM_BASE_URL", &url), ("OTB_LLM_API_KEY", "test")],
    );
    stdout_ok(&out);
    let episodes: Vec<stages::search::EpisodeRow> = stored(
        &d.path().join("store"),
        stages::search::explore::EXPLORE_STAGE,
        "search_episodes",
    );
    assert_eq!(episodes.len(), 4);
    let by = |b: Behaviour| {
        let q = match b {
            Behaviour::Huge => "1",
            Behaviour::Unknown => "2",
            Behaviour::Repeat => "3",
            Behaviour::Nothing => "4",
        };
        episodes.iter().find(|e| e.question_id == q).unwrap()
    };
    for e in &episodes {
        assert_eq!(e.error_kind, None, "{}", e.question_id);
        assert!(
            e.editor_text.len() < 16_000,
            "{}: the editor reads {} bytes",
            e.question_id,
            e.editor_text.len()
        );
        for step in e.steps.as_array().unwrap() {
            for r in step["results"].as_array().unwrap() {
                assert!(r.as_str().unwrap().len() < 70_000, "{}", e.question_id);
            }
        }
    }
    // 1 MB queries: searched (the result bounded), two tool turns, then the answer.
    let huge = by(Behaviour::Huge);
    assert_eq!((huge.tool_calls, huge.forced), (2, true));
    // A tool that is not offered: the agent is told so and which tools there are.
    let unknown = by(Behaviour::Unknown);
    let result = unknown.steps[0]["results"][0].as_str().unwrap();
    assert!(
        result.starts_with("Error: unknown tool") && result.contains("the tools are: tool_1"),
        "{}",
        &result[..result.len().min(300)]
    );
    assert!(
        result.len() < 2000,
        "an error result of {} bytes",
        result.len()
    );
    // One call repeated: the turn budget ends it, the forced answer is graded.
    let repeat = by(Behaviour::Repeat);
    assert_eq!(
        (repeat.tool_calls, repeat.forced, repeat.correct),
        (2, true, true)
    );
    // Nothing: an empty answer, judged wrong.
    let nothing = by(Behaviour::Nothing);
    assert_eq!((nothing.tool_calls, nothing.correct), (0, false));
    assert!(nothing.answer.as_deref().unwrap_or("").is_empty());
}

/// The chess model: every request answered as the server's behaviour says.
fn chess_model(mut stream: std::net::TcpStream, behaviour: std::sync::Arc<Behaviour>) {
    let Some(body) = common::read_request(&stream) else {
        return;
    };
    let req: Value = serde_json::from_slice(&body).unwrap_or_default();
    let text = match *behaviour {
        // Chess tools take no arguments: 1 MB of them.
        Behaviour::Huge => {
            let name = req["tools"][0]["function"]["name"].as_str().unwrap_or("");
            let args = json!({"note": "x".repeat(1_000_000)}).to_string();
            reply(json!({"role": "assistant", "content": null, "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": name, "arguments": args}}]}))
        }
        b => hostile_answer(&req, b),
    };
    common::respond(&mut stream, "200 OK", &text);
}

/// A chess agent that sends 1 MB of arguments, calls a tool that is not offered,
/// repeats one tool every turn, or answers with nothing: each game is a row (the
/// first and third played to the ply limit, the second forfeited as a failed tool
/// call, the fourth as no tool call), and the run succeeds. The four runs go side by
/// side, each with its own model server.
#[test]
fn hostile_chess_agents_end_as_rows_and_the_run_goes_on() {
    let Some(_) = chess_engine() else { return };
    let d = tempfile::tempdir().unwrap();
    let cases = [
        (Behaviour::Huge, "ply_limit"),
        (Behaviour::Unknown, "failed_tool_call"),
        (Behaviour::Repeat, "ply_limit"),
        (Behaviour::Nothing, "no_tool_call"),
    ];
    std::thread::scope(|s| {
        for (behaviour, reason) in cases {
            let dir = d.path().join(format!("{behaviour:?}"));
            std::fs::create_dir(&dir).unwrap();
            s.spawn(move || {
                let url = common::spawn_server(std::sync::Arc::new(behaviour), chess_model);
                std::fs::write(dir.join("train.jsonl"), position_line("a")).unwrap();
                std::fs::write(dir.join("test.jsonl"), position_line("b")).unwrap();
                let exp = dir.join("exp.toml");
                std::fs::write(
                    &exp,
                    "name = \"c\"\n[chess]\ntool_sets = [\"strength_gradient\"]\nmethods = [\"base\"]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponents = [1350]\nmovetime_ms = 10\nmax_plies = 6\nopponent_ratings = \"nominal\"\nconcurrency = 1\n[models]\nagent = \"openai:fake\"\n",
                )
                .unwrap();
                let out = run_exp(
                    &dir,
                    &exp,
                    &[("OTB_LLM_BASE_URL", &url), ("OTB_LLM_API_KEY", "test")],
                );
                stdout_ok(&out);
                let games: Vec<stages::chess::rows::GameRow> = stored(
                    &dir.join("store"),
                    stages::chess::EXPLORE_STAGE,
                    "chess_games",
                );
                assert_eq!(games.len(), 1, "{behaviour:?}");
                let g = &games[0];
                assert_eq!(g.end_reason, reason, "{behaviour:?}: {g:?}");
                assert_eq!(g.error_kind, None, "{behaviour:?}");
                let tools: Vec<&str> = g.plies.as_array().unwrap().iter().filter_map(|p| p["tool"].as_str()).collect();
                let played = if reason == "ply_limit" { 3 } else { 0 };
                assert_eq!(tools.len(), played, "{behaviour:?}: {tools:?}");
                assert!(tools.iter().all(|t| *t == "function_1"), "{behaviour:?}: {tools:?}");
            });
        }
    });
}

// ---------------------------------------------------------------------------------
// Kills

/// `otb table NAME --experiment EXP` over `store` (CSV).
fn table(store: &Path, name: &str, exp: &Path) -> String {
    stdout_ok(
        &otb()
            .arg("--store")
            .arg(store)
            .args(["table", name, "--format", "csv", "--experiment"])
            .arg(exp)
            .output()
            .unwrap(),
    )
}

/// `otb run --quiet` of `exp` over `store` (a command to spawn or run).
fn run_cmd(store: &Path, exp: &Path) -> Command {
    let mut c = otb();
    c.arg("--store")
        .arg(store)
        .arg("run")
        .arg(exp)
        .arg("--quiet");
    c
}

/// Starts `run_cmd(store, exp)` once per delay of `kills`, killing it with SIGKILL
/// after that delay; then the same command to its end, which must succeed, and once
/// more, which must find every stage fresh.
fn kill_then_finish(store: &Path, exp: &Path, kills: impl Iterator<Item = Duration>) {
    for at in kills {
        let mut child = run_cmd(store, exp)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(at);
        let _ = child.kill();
        let _ = child.wait();
    }
    let out = run_cmd(store, exp).output().unwrap();
    stdout_ok(&out);
    let again = stdout_ok(&run_cmd(store, exp).output().unwrap());
    assert!(again.contains(" 0 ran,"), "{again}");
    assert_eq!(staging(store), Vec::<String>::new());
}

/// A search grid (two tool sets; gold, base, two ToolObserver rounds and the
/// baselines; scripted models: deterministic) killed with SIGKILL at 20 points and run
/// again ends with the Table 4 of an uninterrupted run, and every entry is fresh on
/// one more run.
#[test]
fn a_search_run_killed_anywhere_ends_with_the_uninterrupted_table() {
    let d = tempfile::tempdir().unwrap();
    let exp = bcp(
        d.path(),
        &docs(),
        &queries(),
        "tool_sets = [\"domains\", \"domains+all\"]\nmethods = [\"gold\", \"base\", \"toolobserver\", \"easytool\", \"play2prompt\"]\ntrain_questions = 1\ntest_questions = 3\nmax_turns = 1\nrounds = 2\nbatch_size = 1",
        "agent = \"scripted:random\"\neditor = \"scripted:errors\"",
    );
    let reference = d.path().join("reference");
    let t0 = Instant::now();
    stdout_ok(&run_cmd(&reference, &exp).output().unwrap());
    let full = t0.elapsed();
    eprintln!("search run: {full:?}");
    let want = table(&reference, "table4", &exp);
    let store = d.path().join("killed");
    // Kills at 1/11 .. 10/11 of the run's length, twice over (the second time from
    // wherever the first left the store).
    let kills = (0..20u32).map(|i| full.mul_f64(f64::from(i % 10 + 1) / 11.0));
    kill_then_finish(&store, &exp, kills);
    assert_eq!(table(&store, "table4", &exp), want);
    assert_eq!(published(&store), published(&reference));
}

/// A chess run (positions, docs, journaled test games of two methods, evaluation, Elo)
/// killed with SIGKILL at 8 points and run again completes, leaves no staging folder
/// and no journal, publishes as many entries per stage as an uninterrupted run, and
/// finds every entry fresh on one more run; its games are those of the uninterrupted
/// run (engine moves are node-limited and seeded), so Table 3 and the published keys
/// are the same.
#[test]
fn a_chess_run_killed_anywhere_completes_and_is_then_fresh() {
    let Some(_) = chess_engine() else { return };
    let d = tempfile::tempdir().unwrap();
    std::fs::write(d.path().join("train.jsonl"), position_line("a")).unwrap();
    std::fs::write(
        d.path().join("test.jsonl"),
        position_line("b") + &position_line("c").replace("KQkq -", "KQkq - 0 1"),
    )
    .unwrap();
    let exp = common::exp_file(
        d.path(),
        "name = \"k\"\n[chess]\ntool_sets = [\"strength_gradient\"]\nmethods = [\"gold\", \"base\"]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponents = [1350]\nnodes = 2000\nmax_plies = 8\nopponent_ratings = \"nominal\"\nconcurrency = 2\n[models]\nagent = \"scripted:random\"\n",
    );
    let reference = d.path().join("reference");
    let t0 = Instant::now();
    stdout_ok(&run_cmd(&reference, &exp).output().unwrap());
    let full = t0.elapsed();
    eprintln!("chess run: {full:?}");
    // Table 3's rows: tool set, model, method, source, editor, and the games played.
    let rows = |store: &Path| -> Vec<String> {
        table(store, "table3", &exp)
            .lines()
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                format!("{} {:?}", f[..5].join(","), f.last())
            })
            .collect()
    };
    let store = d.path().join("killed");
    let kills = (0..8u32).map(|i| full.mul_f64(f64::from(i + 1) / 9.0));
    kill_then_finish(&store, &exp, kills);
    let per_stage = |store: &Path| -> Vec<(String, usize)> {
        let mut n = std::collections::BTreeMap::new();
        for k in published(store) {
            *n.entry(k.split('/').next().unwrap_or("").to_string())
                .or_insert(0) += 1;
        }
        n.into_iter().collect()
    };
    assert_eq!(per_stage(&store), per_stage(&reference));
    assert_eq!(rows(&store), rows(&reference));
    assert_eq!(
        table(&store, "table3", &exp),
        table(&reference, "table3", &exp)
    );
    assert_eq!(published(&store), published(&reference));
    let journal: Vec<_> = std::fs::read_dir(store.join("cache").join("journal"))
        .map(|r| r.filter_map(Result::ok).map(|e| e.path()).collect())
        .unwrap_or_default();
    assert_eq!(
        journal,
        Vec::<PathBuf>::new(),
        "a journal outlived its stage"
    );
}
