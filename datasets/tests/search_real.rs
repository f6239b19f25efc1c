//! BrowseComp-Plus loaders on a small encrypted fixture this test writes, and the tool sets
//! against the reference configs in `../shared/data/otb/browsecomp/` (skipped, saying so,
//! when that directory is absent).

use std::fs;
use std::path::{Path, PathBuf};

use datasets::search::real::{
    encrypt, load_corpus, load_queries, load_split_ids, url_domains, CategoryMap, CategoryMatch,
    OtherRule,
};
use datasets::search::{
    Bm25Index, DomainSet, Opacity, SearchEnv, SearchError, Source, ToolSet, ToolSetConfig,
};
use serde_json::{json, Value};

const CANARY: &str = "fixture canary: not the dataset's";

fn scratch(name: &str) -> PathBuf {
    let d = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("search-real-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    fs::create_dir_all(&d).unwrap();
    d
}

fn reference_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/otb/browsecomp");
    if dir.is_dir() {
        return Some(dir);
    }
    let alt = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data/otb/browsecomp");
    if alt.is_dir() {
        return Some(alt);
    }
    testkit::skip(
        "shared",
        format_args!("reference data {} is absent", dir.display()),
    );
    None
}

fn write_fixture(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let categories = dir.join("categories.json");
    fs::write(
        &categories,
        r#"{"wikipedia": ["en.wikipedia.org"], "news": ["www.nytimes.com"], "health": ["www.mayoclinic.org"]}"#,
    )
    .unwrap();
    let corpus = dir.join("corpus.jsonl");
    let rows = [
        json!({"docid": "101", "text": "The lighthouse keeper of Skerry Point wrote a diary in 1911.", "url": "https://en.wikipedia.org/wiki/Skerry"}),
        json!({"docid": 102, "text": "Report: the Skerry Point lighthouse was automated.", "url": "https://www.nytimes.com/skerry"}),
        json!({"docid": "103", "text": "Lighthouse keepers and their health.", "url": "https://www.mayoclinic.org/x"}),
        json!({"docid": "104", "text": "An unrelated page.", "url": "https://example.org/"}),
    ];
    let text: Vec<String> = rows.iter().map(Value::to_string).collect();
    fs::write(&corpus, text.join("\n") + "\n\n").unwrap();
    let queries = dir.join("queries.jsonl");
    let q = json!({
        "query_id": 7,
        "query": encrypt("Which keeper of a lighthouse wrote a diary in 1911?", CANARY),
        "answer": encrypt("The Skerry Point keeper", CANARY),
        // As published: every string but the query id is encrypted, nested ones too.
        "evidence_docs": [{"docid": encrypt("101", CANARY), "url": encrypt("https://en.wikipedia.org/wiki/Skerry", CANARY)}, encrypt("102", CANARY)],
    });
    fs::write(&queries, format!("{q}\n")).unwrap();
    (categories, corpus, queries)
}

#[test]
fn encrypted_fixture_loads_and_searches() {
    let dir = scratch("ok");
    let (cats, corpus_path, queries_path) = write_fixture(&dir);
    let domains = DomainSet::browsecomp();
    let cmap = CategoryMap::load(&cats).unwrap();
    let load = |other| {
        load_corpus(
            &corpus_path,
            &cmap,
            &domains,
            CategoryMatch::Substring,
            other,
        )
        .unwrap()
    };
    // The reference: the health page (a category without a tool) is in no filtered
    // tool; with `other = "spec"` it is in `other`.
    let reference = load(OtherRule::Reference);
    let doms: Vec<&str> = reference.docs().iter().map(|d| d.domain.as_str()).collect();
    assert_eq!(doms, ["wikipedia", "news", "none", "other"]);
    let corpus = load(OtherRule::Spec);
    assert_eq!(corpus.source(), Source::BrowseCompPlus);
    let doms: Vec<&str> = corpus.docs().iter().map(|d| d.domain.as_str()).collect();
    assert_eq!(doms, ["wikipedia", "news", "other", "other"]);
    assert_eq!(corpus.docs()[1].docid, "102");

    let qs = load_queries(&queries_path, Some(CANARY), Some(&corpus)).unwrap();
    assert_eq!(qs.len(), 1);
    assert_eq!(qs[0].id, "7");
    assert_eq!(qs[0].answer, "The Skerry Point keeper");
    assert_eq!(qs[0].evidence_docids, ["101", "102"]);
    assert_eq!(
        qs[0].evidence_docs[0].url,
        "https://en.wikipedia.org/wiki/Skerry"
    );
    assert_eq!(qs[0].domain, "wikipedia");
    assert_eq!(qs[0].source, "browsecomp-plus");

    let index = Bm25Index::build(&corpus, &dir.join("index")).unwrap();
    let env = SearchEnv::new(
        &corpus,
        &index,
        ToolSet::new(&domains, ToolSetConfig::default()),
    );
    let out: Value = serde_json::from_str(
        &env.execute("tool_1", &json!({"query": "lighthouse diary"}))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(out.as_array().unwrap().len(), 1);
    assert_eq!(out[0]["docid"], "101");
    let other: Value = serde_json::from_str(
        &env.execute("tool_10", &json!({"query": "lighthouse"}))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(other[0]["docid"], "103");
    // Under the reference rule only the unfiltered search finds it.
    let index = Bm25Index::build(&reference, &dir.join("index-ref")).unwrap();
    let cfg = ToolSetConfig {
        search_all: true,
        show_urls: true,
        ..ToolSetConfig::default()
    };
    let env = SearchEnv::new(&reference, &index, ToolSet::new(&domains, cfg));
    let none = env
        .execute("tool_11", &json!({"query": "health keepers"}))
        .unwrap();
    assert_eq!(none, datasets::search::tools::NO_RESULTS);
    let all: Value = serde_json::from_str(
        &env.execute("tool_1", &json!({"query": "health keepers"}))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(all[0]["docid"], "103");
    assert_eq!(all[0]["url"], "https://www.mayoclinic.org/x");
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn wrong_canary_and_malformed_files_are_clear_errors() {
    let dir = scratch("bad");
    let (cats, corpus_path, queries_path) = write_fixture(&dir);
    let e = load_queries(&queries_path, Some("some other canary"), None).unwrap_err();
    assert!(matches!(e, SearchError::WrongKey { line: 1, .. }), "{e}");
    assert!(e.to_string().contains("canary"), "{e}");

    let bad = dir.join("bad.jsonl");
    fs::write(
        &bad,
        "{\"docid\": \"1\", \"text\": \"x\", \"url\": \"u\"}\n{\"docid\": \"2\", \"text\": \n",
    )
    .unwrap();
    let cmap = CategoryMap::load(&cats).unwrap();
    // The corpus at `path` as BrowseComp-Plus's reference reads it.
    let browsecomp = |path: &Path| {
        load_corpus(
            path,
            &cmap,
            &DomainSet::browsecomp(),
            CategoryMatch::Substring,
            OtherRule::Reference,
        )
    };
    let e = browsecomp(&bad).unwrap_err();
    assert!(
        e.to_string()
            .starts_with(&format!("{}:2: not JSON", bad.display())),
        "{e}"
    );
    fs::write(&bad, "{\"docid\": \"1\", \"url\": \"u\"}\n").unwrap();
    let e = browsecomp(&bad).unwrap_err();
    assert!(e.to_string().contains(":1: missing \"text\""), "{e}");
    fs::write(
        &bad,
        "{\"docid\": \"1\", \"text\": \"a\"}\n{\"docid\": \"1\", \"text\": \"b\"}\n",
    )
    .unwrap();
    let e = browsecomp(&bad).unwrap_err();
    assert!(
        e.to_string()
            .contains(":2: docid \"1\" occurs more than once"),
        "{e}"
    );
    fs::write(&bad, "{\"query_id\": \"1\", \"query\": \"q\"}\n").unwrap();
    let e = load_queries(&bad, None, None).unwrap_err();
    assert!(e.to_string().contains(":1: missing \"answer\""), "{e}");

    let corpus = browsecomp(&corpus_path).unwrap();
    fs::write(
        &bad,
        "{\"query_id\": \"1\", \"query\": \"q\", \"answer\": \"a\", \"gold_docs\": [\"999\"]}\n",
    )
    .unwrap();
    let e = load_queries(&bad, None, Some(&corpus)).unwrap_err();
    assert!(
        e.to_string().contains("\"999\" is not in the corpus"),
        "{e}"
    );
    let e = load_split_ids(&bad).unwrap_err();
    assert!(
        e.to_string().contains(":1: expected query_id<TAB>question"),
        "{e}"
    );
    fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn reference_splits_and_category_map() {
    let Some(dir) = reference_dir() else { return };
    assert_eq!(
        load_split_ids(&dir.join("train_queries.tsv"))
            .unwrap()
            .len(),
        83
    );
    assert_eq!(
        load_split_ids(&dir.join("test_queries.tsv")).unwrap().len(),
        747
    );
    let cmap = CategoryMap::load(&dir.join("simple_categories.json")).unwrap();
    let domains = DomainSet::browsecomp();
    let cases = [
        ("https://en.wikipedia.org/wiki/Lighthouse", "wikipedia"),
        ("https://www.nytimes.com/2020/a", "news"),
        ("https://www.espn.com/x", "sports"),
        ("https://www.reddit.com/r/x", "other"),
        ("https://www.mayoclinic.org/x", "other"),
        ("https://unknown.example/x", "other"),
    ];
    for (url, want) in cases {
        assert_eq!(
            domains.domain_of(cmap.category(url).unwrap_or("")),
            want,
            "{url}"
        );
    }
    // The defaults (the reference searcher's): substring matching, and `other` without
    // the categories that have no tool.
    let cases = [
        ("https://en.wikipedia.org/wiki/Lighthouse", "wikipedia"),
        ("https://fr.wikipedia.org/wiki/Phare", "wikipedia"),
        ("https://www.espn.com/x", "sports"),
        ("https://www.reddit.com/r/x", "none"),
        ("https://www.mayoclinic.org/x", "none"),
        ("https://unknown.example/x", "other"),
    ];
    for (url, want) in cases {
        let (d, _) = url_domains(
            url,
            &cmap,
            &domains,
            CategoryMatch::Substring,
            OtherRule::Reference,
        );
        assert_eq!(d, want, "{url}");
    }
    cmap.check(CategoryMatch::Host).unwrap();
}

/// The reference tool configs and ours: same tool ids in the same order, same opaque
/// names, same gold names, same parameter shapes (descriptions are our own words).
#[test]
fn tool_sets_match_reference_configs() {
    let Some(dir) = reference_dir() else { return };
    let domains = DomainSet::browsecomp();
    for (file, opacity, search_all) in [
        ("fully_opaque_bm25_no-doc.json", Opacity::Opaque, false),
        (
            "fully_opaque_bm25_no-doc_search-all.json",
            Opacity::Opaque,
            true,
        ),
        ("transparent_bm25_no-doc.json", Opacity::Gold, false),
        (
            "transparent_bm25_no-doc_search-all.json",
            Opacity::Gold,
            true,
        ),
    ] {
        let text = fs::read_to_string(dir.join("tool_configs").join(file)).unwrap();
        let reference: Value = serde_json::from_str(&text).unwrap();
        let ref_tools = reference["tools"].as_array().unwrap();
        let ours = ToolSet::new(
            &domains,
            ToolSetConfig {
                opacity,
                search_all,
                ..ToolSetConfig::default()
            },
        );
        let json = ours.tools_json();
        assert_eq!(ref_tools.len(), ours.tools.len(), "{file}");
        for ((r, t), j) in ref_tools.iter().zip(&ours.tools).zip(&json) {
            assert_eq!(r["tool_id"], t.tool_id.as_str(), "{file}");
            let def = &r["tool_definition"];
            assert_eq!(def["name"], t.name.as_str(), "{file}");
            let (mut a, mut b) = (
                def["parameters"].clone(),
                j["function"]["parameters"].clone(),
            );
            a["properties"]["query"]["description"] = Value::Null;
            b["properties"]["query"]["description"] = Value::Null;
            assert_eq!(a, b, "{file}");
            let filter = r["searcher_config"]["filter_category"].as_str().unwrap();
            assert_eq!(t.domain.as_deref().unwrap_or("none"), filter, "{file}");
        }
        if opacity == Opacity::Opaque {
            let first = &json[0]["function"]["description"];
            assert!(json.iter().all(|j| &j["function"]["description"] == first));
        }
    }
}
