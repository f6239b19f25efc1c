//! BrowseComp-Plus files through `otb run`: a small encrypted fixture written here (the
//! real dataset is gated) runs through the search stages with its questions decrypted
//! and its URLs mapped to the tools' domains; a wrong canary, a missing file and a
//! malformed corpus are each one error line, exit 2, with no stage result published.

mod common;

use common::{one_error_line, otb, stdout_ok};
use datasets::search::real::encrypt;
use serde_json::json;
use std::path::Path;

const CANARY: &str = "fixture canary: not the dataset's";

/// The fixture: a category map, a corpus over three named domains and one outside,
/// and four questions whose text and answers are encrypted with [`CANARY`].
fn write_fixture(dir: &Path) {
    std::fs::write(
        dir.join("categories.json"),
        r#"{"wikipedia": ["en.wikipedia.org"], "news": ["www.nytimes.com"], "academic": ["arxiv.org"]}"#,
    )
    .unwrap();
    let docs = [
        (
            "d1",
            "The lighthouse keeper of Skerry Point wrote a diary in 1911.",
            "https://en.wikipedia.org/wiki/Skerry",
        ),
        (
            "d2",
            "Report: the Skerry Point lighthouse was automated in 1987.",
            "https://www.nytimes.com/skerry",
        ),
        (
            "d3",
            "A survey of tidal energy in northern straits.",
            "https://arxiv.org/abs/1234",
        ),
        (
            "d4",
            "Orchard Lane bakery sells rye bread on Sundays.",
            "https://example.org/bakery",
        ),
        (
            "d5",
            "The Vell river floods its valley every spring.",
            "https://en.wikipedia.org/wiki/Vell",
        ),
    ];
    let corpus: Vec<String> = docs
        .iter()
        .map(|(id, text, url)| json!({"docid": id, "text": text, "url": url}).to_string())
        .collect();
    std::fs::write(dir.join("corpus.jsonl"), corpus.join("\n") + "\n").unwrap();
    let qs = [
        (
            1,
            "Which keeper wrote a diary in 1911?",
            "The Skerry Point keeper",
            "d1",
        ),
        (
            2,
            "When was the Skerry Point lighthouse automated?",
            "1987",
            "d2",
        ),
        (
            3,
            "Which river floods its valley every spring?",
            "Vell",
            "d5",
        ),
        (
            4,
            "What does the Orchard Lane bakery sell on Sundays?",
            "rye bread",
            "d4",
        ),
    ];
    let rows: Vec<String> = qs
        .iter()
        .map(|(id, q, a, d)| {
            json!({"query_id": id, "query": encrypt(q, CANARY), "answer": encrypt(a, CANARY), "evidence_docs": [d]})
                .to_string()
        })
        .collect();
    std::fs::write(dir.join("queries.jsonl"), rows.join("\n") + "\n").unwrap();
}

/// Write `<name>.toml`: the fixture's files with `canary` and `corpus`, then `rest`
/// (tool sets, methods, budgets, models).
fn fixture_experiment(
    dir: &Path,
    name: &str,
    (canary, corpus): (&str, &str),
    rest: &str,
) -> std::path::PathBuf {
    let exp = dir.join(format!("{name}.toml"));
    std::fs::write(
        &exp,
        format!(
            "name = \"{name}\"\n[search]\nsource = \"browsecomp-plus\"\ncorpus_file = \"{corpus}\"\nqueries_file = \"queries.jsonl\"\ncategories_file = \"categories.json\"\ncanary = \"{canary}\"\n{rest}"
        ),
    )
    .unwrap();
    exp
}

fn experiment(dir: &Path, canary: &str, corpus: &str) -> std::path::PathBuf {
    fixture_experiment(
        dir,
        "bcp",
        (canary, corpus),
        "tool_sets = [\"domains\"]\nmethods = [\"base\"]\ntrain_questions = 1\ntest_questions = 3\nmax_turns = 1\n[models]\nagent = \"scripted:random\"\n",
    )
}

/// `otb export` of `exp` over `store` into `out`.
fn export(store: &Path, exp: &Path, out: &Path) {
    stdout_ok(
        &otb()
            .arg("--store")
            .arg(store)
            .args(["export", "--to"])
            .arg(out)
            .arg(exp)
            .output()
            .unwrap(),
    );
}

/// `otb table table4` of `exp` over `store`.
fn table4(store: &Path, exp: &Path) -> String {
    stdout_ok(
        &otb()
            .arg("--store")
            .arg(store)
            .args(["table", "table4", "--experiment"])
            .arg(exp)
            .output()
            .unwrap(),
    )
}

fn run(dir: &Path, exp: &Path) -> std::process::Output {
    otb()
        .arg("--store")
        .arg(dir.join("store"))
        .arg("run")
        .arg(exp)
        .arg("--quiet")
        .output()
        .unwrap()
}

#[test]
fn an_encrypted_browsecomp_plus_fixture_runs_through_the_stages() {
    let d = tempfile::tempdir().unwrap();
    write_fixture(d.path());
    let exp = experiment(d.path(), CANARY, "corpus.jsonl");
    stdout_ok(&run(d.path(), &exp));
    // The questions are stored decrypted, with the evidence's domain.
    let out = d.path().join("export");
    export(&d.path().join("store"), &exp, &out);
    let table = out.join("search_questions.parquet");
    let bytes = std::fs::read(&table).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.contains("Skerry Point") || text.contains("river floods"),
        "questions not decrypted"
    );
    assert!(!text.contains(CANARY));
    let t4 = table4(&d.path().join("store"), &exp);
    assert!(t4.contains("run: browsecomp-plus"), "{t4}");
    assert!(!t4.contains("not BrowseComp-Plus numbers"), "{t4}");
}

#[test]
fn browsecomp_plus_bad_input_is_one_line_and_exit_2() {
    let d = tempfile::tempdir().unwrap();
    write_fixture(d.path());
    // A wrong canary: found before the store is opened.
    let exp = experiment(d.path(), "another canary", "corpus.jsonl");
    let err = one_error_line(&run(d.path(), &exp));
    assert!(err.contains("canary"), "{err}");
    assert!(!d.path().join("store").exists());
    // An unknown tool set.
    let exp = d.path().join("unknown.toml");
    std::fs::write(
        &exp,
        "name = \"u\"\n[search]\ntool_sets = [\"everything\"]\n[models]\nagent = \"scripted:random\"\n",
    )
    .unwrap();
    let err = one_error_line(&run(d.path(), &exp));
    assert!(err.contains("unknown tool set `everything`"), "{err}");
    assert!(!d.path().join("store").exists());
    // A missing file.
    let exp = experiment(d.path(), CANARY, "nowhere.jsonl");
    let err = one_error_line(&run(d.path(), &exp));
    assert!(
        err.contains("nowhere.jsonl") && err.contains("not a file"),
        "{err}"
    );
    assert!(!d.path().join("store").exists());
    // A corpus row that is not a document: bad input from the first search stage,
    // which publishes nothing.
    std::fs::write(
        d.path().join("bad.jsonl"),
        "{\"docid\": \"x\", \"url\": 3}\n",
    )
    .unwrap();
    let exp = experiment(d.path(), CANARY, "bad.jsonl");
    let err = one_error_line(&run(d.path(), &exp));
    assert!(err.contains("bad.jsonl:1"), "{err}");
    let published = std::fs::read_dir(d.path().join("store"))
        .map(|r| {
            r.filter_map(Result::ok)
                .filter(|e| e.file_name().to_string_lossy().starts_with("search-"))
                .count()
        })
        .unwrap_or(0);
    assert_eq!(published, 0, "a stage of a bad corpus was published");
}

/// The stage results in a store, as `stage/key` (what a run published, by key).
fn published(store: &Path) -> Vec<String> {
    let skip = ["cache", "quarantine", "slots", "tmp", "FORMAT"];
    let mut keys = Vec::new();
    for stage in std::fs::read_dir(store).unwrap().filter_map(Result::ok) {
        let name = stage.file_name().to_string_lossy().into_owned();
        if skip.contains(&name.as_str()) || !stage.path().is_dir() {
            continue;
        }
        for key in std::fs::read_dir(stage.path())
            .unwrap()
            .filter_map(Result::ok)
        {
            keys.push(format!("{name}/{}", key.file_name().to_string_lossy()));
        }
    }
    keys.sort();
    keys
}

#[test]
fn concurrent_tool_sets_and_methods_publish_what_a_sequential_run_does() {
    let d = tempfile::tempdir().unwrap();
    write_fixture(d.path());
    let exp = fixture_experiment(
        d.path(),
        "grid",
        (CANARY, "corpus.jsonl"),
        "tool_sets = [\"domains\", \"domains+all\"]\nmethods = [\"gold\", \"base\", \"toolobserver\", \"easytool\", \"play2prompt\"]\ntrain_questions = 1\ntest_questions = 3\nmax_turns = 1\nrounds = 2\nbatch_size = 1\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:errors\"\n",
    );
    let mut tables = Vec::new();
    let mut listings = Vec::new();
    for (store, chains) in [("sequential", "0"), ("concurrent", "1")] {
        let store = d.path().join(store);
        stdout_ok(
            &otb()
                .env("OTB_CONCURRENT_CHAINS", chains)
                .arg("--store")
                .arg(&store)
                .arg("run")
                .arg(&exp)
                .arg("--quiet")
                .output()
                .unwrap(),
        );
        listings.push(published(&store));
        tables.push(table4(&store, &exp));
    }
    // Two tool sets x (gold, base, 2 ToolObserver rounds, two baselines): many stages.
    assert!(listings[0].len() > 20, "{:#?}", listings[0]);
    assert_eq!(listings[0], listings[1]);
    assert_eq!(tables[0], tables[1]);
    assert!(tables[0].contains("domains+all"), "{}", tables[0]);
}

/// A local OpenAI-compatible model that calls a tool when it must (`required`),
/// writes the call as text when the choice is its own (`auto`: what the small
/// embedded model does), and answers when no tool is offered.
fn text_caller(mut stream: std::net::TcpStream, _: std::sync::Arc<()>) {
    let Some(body) = common::read_request(&stream) else {
        return;
    };
    let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let tool = req["tools"][0]["function"]["name"]
        .as_str()
        .unwrap_or("none")
        .to_string();
    let args = json!({"query": "Skerry Point"}).to_string();
    let message = match req["tool_choice"].as_str() {
        Some("required") => json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": tool, "arguments": args}}]}),
        Some("auto") => json!({"role": "assistant",
            "content": json!({"name": tool, "arguments": {"query": "lighthouse"}}).to_string()}),
        _ => json!({"role": "assistant", "content": "1987"}),
    };
    let reply = json!({"id": "t", "object": "chat.completion", "model": "fake",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
    common::respond(&mut stream, "200 OK", &reply.to_string());
}

#[test]
fn a_tool_call_the_agent_writes_as_text_is_made() {
    let d = tempfile::tempdir().unwrap();
    write_fixture(d.path());
    let url = common::spawn_server(std::sync::Arc::new(()), text_caller);
    let exp = fixture_experiment(
        d.path(),
        "text",
        (CANARY, "corpus.jsonl"),
        "tool_sets = [\"domains\"]\nmethods = [\"base\"]\ntrain_questions = 1\ntest_questions = 3\nmax_turns = 2\nfirst_call = \"required\"\n[models]\nagent = \"openai:fake\"\n",
    );
    let store = d.path().join("store");
    stdout_ok(
        &otb()
            .arg("--store")
            .arg(&store)
            .arg("run")
            .arg(&exp)
            .arg("--quiet")
            .env("OTB_LLM_BASE_URL", &url)
            .env("OTB_LLM_API_KEY", "test")
            .output()
            .unwrap(),
    );
    let out = d.path().join("export");
    export(&store, &exp, &out);
    // Both tool turns searched (the second one's call was written as text), and
    // the forced final turn gave the answer.
    let bytes = std::fs::read(out.join("search_episodes.parquet")).unwrap();
    let text = String::from_utf8_lossy(&bytes);
    assert!(
        text.contains("lighthouse"),
        "the call written as text was not made"
    );
    let t4 = table4(&store, &exp);
    assert!(t4.contains("/ 2.0"), "{t4}");
}
