//! BrowseComp-Plus files through `otb run`: a small encrypted fixture written here (the
//! real dataset is gated) runs through the search stages with its questions decrypted
//! and its URLs mapped to the tools' domains; a wrong canary, a missing file and a
//! malformed corpus (a row that is not JSON, not a document or not UTF-8: its file and
//! line) are each one error line, exit 2, with no stage result published.

mod common;

use common::{one_error_line, otb, otb_run, stdout_ok};
use datasets::search::real::encrypt;
use serde_json::json;
use std::path::Path;

const CANARY: &str = "fixture canary: not the dataset's";

/// The fixture, in the shape of the published dataset: a category map, a corpus over
/// three named domains and one outside, and four questions in which every string
/// except `query_id` is encrypted with [`CANARY`], nested document lists included
/// (`evidence_docs`, `gold_docs`, `negative_docs`: objects with `docid`, `url`, `text`).
fn write_fixture(dir: &Path) {
    std::fs::write(
        dir.join("categories.json"),
        r#"{"wikipedia": ["en.wikipedia.org"], "news": ["www.nytimes.com"], "academic": ["arxiv.org"]}"#,
    )
    .unwrap();
    let corpus: Vec<String> = DOCS
        .iter()
        .map(|(id, text, url)| json!({"docid": id, "text": text, "url": url}).to_string())
        .collect();
    std::fs::write(dir.join("corpus.jsonl"), corpus.join("\n") + "\n").unwrap();
    let doc = |id: &str| {
        let (docid, text, url) = DOCS.iter().find(|d| d.0 == id).unwrap();
        json!({"docid": encrypt(docid, CANARY), "url": encrypt(url, CANARY), "text": encrypt(text, CANARY)})
    };
    let rows: Vec<String> = QUESTIONS
        .iter()
        .map(|(id, q, a, gold, evidence)| {
            json!({
                "query_id": id,
                "query": encrypt(q, CANARY),
                "answer": encrypt(a, CANARY),
                "evidence_docs": [doc(evidence)],
                "gold_docs": [doc(gold)],
                "negative_docs": [doc("bcp-doc-4")],
            })
            .to_string()
        })
        .collect();
    std::fs::write(dir.join("queries.jsonl"), rows.join("\n") + "\n").unwrap();
}

/// The fixture's corpus: `(docid, text, url)`.
const DOCS: [(&str, &str, &str); 5] = [
    (
        "bcp-doc-1",
        "The lighthouse keeper of Skerry Point wrote a diary in 1911.",
        "https://en.wikipedia.org/wiki/Skerry",
    ),
    (
        "bcp-doc-2",
        "Report: the Skerry Point lighthouse was automated in 1987.",
        "https://www.nytimes.com/skerry",
    ),
    (
        "bcp-doc-3",
        "A survey of tidal energy in northern straits.",
        "https://arxiv.org/abs/1234",
    ),
    (
        "bcp-doc-4",
        "Orchard Lane bakery sells rye bread on Sundays.",
        "https://example.org/bakery",
    ),
    (
        "bcp-doc-5",
        "The Vell river floods its valley every spring.",
        "https://en.wikipedia.org/wiki/Vell",
    ),
];

/// The fixture's questions: `(query_id, question, answer, gold docid, evidence docid)`.
const QUESTIONS: [(&str, &str, &str, &str, &str); 4] = [
    (
        "701",
        "Which keeper wrote a diary in 1911?",
        "The Skerry Point keeper",
        "bcp-doc-1",
        "bcp-doc-2",
    ),
    (
        "702",
        "When was the Skerry Point lighthouse automated?",
        "1987",
        "bcp-doc-2",
        "bcp-doc-1",
    ),
    (
        "703",
        "Which river floods its valley every spring?",
        "Vell",
        "bcp-doc-5",
        "bcp-doc-3",
    ),
    (
        "704",
        "What does the Orchard Lane bakery sell on Sundays?",
        "rye bread",
        "bcp-doc-4",
        "bcp-doc-3",
    ),
];

/// The question rows the run stored (read from the store).
fn stored_questions(store: &Path) -> Vec<stages::search::QuestionRow> {
    let stage = store.join(stages::search::QUESTIONS_STAGE);
    let mut dirs: Vec<_> = std::fs::read_dir(&stage)
        .unwrap()
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    let dir = dirs.remove(0);
    pipeline::table::read_rows(&dir.join("search_questions.parquet")).unwrap()
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
    otb_run(dir.join("store"), exp)
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
    insta::assert_snapshot!("table4_browsecomp_plus_fixture", t4);
    // Every question loaded (none was rejected as naming a document not in the
    // corpus), with its evidence decrypted: the answer's document first, then the
    // supporting one, each with its URL.
    let qs = stored_questions(&d.path().join("store"));
    assert_eq!(qs.len(), 3, "{qs:?}");
    for q in &qs {
        let (_, question, answer, gold, evidence) =
            QUESTIONS.iter().find(|x| x.0 == q.question_id).unwrap();
        assert_eq!(
            (q.question.as_str(), q.answer.as_str()),
            (*question, *answer)
        );
        assert_eq!(q.evidence_docids, [*gold, *evidence]);
        assert_eq!(q.gold_docs[0].docid, *gold);
        assert_eq!(q.evidence_docs[0].docid, *evidence);
        let url = DOCS.iter().find(|d| d.0 == *gold).unwrap().2;
        assert_eq!(q.gold_docs[0].url, url);
        // The domain is the answer's document's (its URL through the category map).
        let domain = match *gold {
            "bcp-doc-2" => "news",
            "bcp-doc-4" => "other",
            _ => "wikipedia",
        };
        assert_eq!(q.domain, domain, "{q:?}");
    }
}

/// With the paper's id files, the splits are theirs, whole: no cap unless one is set.
#[test]
fn id_files_give_the_split_and_its_size() {
    let d = tempfile::tempdir().unwrap();
    write_fixture(d.path());
    // 50 more questions, all for training: more than the 45 a cap would keep.
    let mut queries = std::fs::read_to_string(d.path().join("queries.jsonl")).unwrap();
    let mut train = String::from("702\tq\n");
    for i in 0..50 {
        let doc = json!({"docid": encrypt("bcp-doc-1", CANARY), "url": encrypt(DOCS[0].2, CANARY)});
        let row = json!({"query_id": format!("9{i:02}"), "query": encrypt(&format!("Who kept the light, version {i}?"), CANARY), "answer": encrypt("The Skerry Point keeper", CANARY), "gold_docs": [doc]});
        queries.push_str(&format!("{row}\n"));
        train.push_str(&format!("9{i:02}\tq\n"));
    }
    std::fs::write(d.path().join("queries.jsonl"), queries).unwrap();
    std::fs::write(d.path().join("train.tsv"), train).unwrap();
    std::fs::write(d.path().join("test.tsv"), "701\tq\n703\tq\n704\tq\n").unwrap();
    let exp = fixture_experiment(
        d.path(),
        "ids",
        (CANARY, "corpus.jsonl"),
        "train_ids_file = \"train.tsv\"\ntest_ids_file = \"test.tsv\"\ntool_sets = [\"domains\"]\nmethods = [\"base\"]\nmax_turns = 1\n[models]\nagent = \"scripted:random\"\n",
    );
    stdout_ok(&run(d.path(), &exp));
    let qs = stored_questions(&d.path().join("store"));
    let split = |s: &str| -> Vec<&str> {
        qs.iter()
            .filter(|q| q.split == s)
            .map(|q| q.question_id.as_str())
            .collect()
    };
    assert_eq!(split("train").len(), 51);
    assert_eq!(split("train")[0], "702");
    assert_eq!(split("test"), ["701", "703", "704"]);
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

/// A corpus row that is not UTF-8 is a malformed row like any other: exit 2 with its
/// file and line (not only "stream did not contain valid UTF-8"), nothing published.
#[test]
fn a_corpus_row_that_is_not_utf8_names_its_line() {
    let d = tempfile::tempdir().unwrap();
    write_fixture(d.path());
    let mut corpus = std::fs::read(d.path().join("corpus.jsonl")).unwrap();
    let second = corpus.iter().position(|&b| b == b'\n').unwrap() + 1;
    // A Latin-1 e-acute inside the second row's text.
    corpus.insert(second + 30, 0xe9);
    std::fs::write(d.path().join("latin1.jsonl"), corpus).unwrap();
    let exp = experiment(d.path(), CANARY, "latin1.jsonl");
    let err = one_error_line(&run(d.path(), &exp));
    assert!(
        err.contains("latin1.jsonl:2") && err.contains("UTF-8"),
        "{err}"
    );
    assert!(published(&d.path().join("store"))
        .iter()
        .all(|k| !k.starts_with("search-")));
}

/// The stage results in a store, as `stage/key` (what a run published, by key).
fn published(store: &Path) -> Vec<String> {
    common::published(store).expect("a store")
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
            &otb_run(&store, &exp)
                .env("OTB_CONCURRENT_CHAINS", chains)
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
    let one_call = req["parallel_tool_calls"] == json!(false);
    let message = match req["tool_choice"].as_str() {
        // A search request that does not ask for one call per turn is answered so
        // that the test sees it.
        Some(_) if !one_call => {
            json!({"role": "assistant", "content": "parallel_tool_calls not sent"})
        }
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
        &otb_run(&store, &exp)
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
    // Every request that offered tools asked for one call per turn.
    assert!(!text.contains("parallel_tool_calls not sent"));
    let t4 = table4(&store, &exp);
    assert!(t4.contains("/ 2.0"), "{t4}");
}

/// `otb plan --format json` of the finished run of `exp` over `store`: its nodes.
fn plan_nodes(store: &Path, exp: &Path) -> Vec<serde_json::Value> {
    let out = otb()
        .arg("--store")
        .arg(store)
        .args(["plan", "--format", "json"])
        .arg(exp)
        .output()
        .unwrap();
    let plan: serde_json::Value = serde_json::from_str(&stdout_ok(&out)).expect("plan JSON");
    plan["nodes"].as_array().expect("nodes").clone()
}

/// The search judge on a training play is a node of its own (the environment's
/// grading node): at the training play's cell, with its own key, reading that play's
/// episodes; batch-reflect's `trajectories` input is that node. Without a judge,
/// batch-reflect reads the play's episodes and there is no judge node.
#[test]
fn the_training_judge_is_the_node_batch_reflect_reads() {
    let d = tempfile::tempdir().unwrap();
    write_fixture(d.path());
    let exp = |name: &str, judge: &str| {
        fixture_experiment(
            d.path(),
            name,
            (CANARY, "corpus.jsonl"),
            &format!("tool_sets = [\"domains\"]\nmethods = [\"toolobserver\"]\ntrain_questions = 2\ntest_questions = 2\nmax_turns = 1\nrounds = 1\nbatch_size = 2\n{judge}[models]\nagent = \"scripted:random\"\neditor = \"scripted:observer\"\n"),
        )
    };
    let train_play =
        |n: &serde_json::Value| n["cell"]["split"] == "train" && n["cell"]["round"] == 0;
    for (name, judge) in [("judged", "judge = \"scripted:judge\"\n"), ("exact", "")] {
        let exp = exp(name, judge);
        stdout_ok(&run(d.path(), &exp));
        let nodes = plan_nodes(&d.path().join("store"), &exp);
        let one = |stage: &str, pred: &dyn Fn(&serde_json::Value) -> bool| {
            let found: Vec<&serde_json::Value> = nodes
                .iter()
                .filter(|n| n["stage"] == stage && pred(n))
                .collect();
            assert_eq!(found.len(), 1, "{name}: {stage}: {found:?}");
            found[0].clone()
        };
        let explore = one("search-explore", &train_play);
        let reflect = one("batch-reflect", &|_| true);
        let read: Vec<&serde_json::Value> = reflect["inputs"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["name"] == "trajectories")
            .collect();
        assert_eq!(read.len(), 1, "{reflect}");
        let judges: Vec<&serde_json::Value> = nodes
            .iter()
            .filter(|n| n["stage"] == "search-judge" && train_play(n))
            .collect();
        if judge.is_empty() {
            assert!(judges.is_empty(), "{judges:?}");
            assert_eq!(read[0]["node"], explore["node"], "{reflect}");
            continue;
        }
        let judged = one("search-judge", &train_play);
        assert_eq!(judged["cell"], explore["cell"]);
        assert!(judged["key"].is_string(), "{judged}");
        assert_ne!(judged["key"], explore["key"]);
        assert!(
            judged["inputs"]
                .as_array()
                .unwrap()
                .iter()
                .any(|i| i["name"] == "episodes" && i["node"] == explore["node"]),
            "{judged}"
        );
        assert_eq!(read[0]["node"], judged["node"], "{reflect}");
    }
}
