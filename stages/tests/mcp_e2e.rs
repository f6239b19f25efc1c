//! The `[mcp]` environment through the real stages and a real MCP server: PyPI's
//! `mcp-server-git` (`OTB_MCP_SERVER_GIT`, its command; skips, saying so, when it is
//! absent, unless `OTB_REQUIRE` names `mcp`) over a repository the test makes (two
//! commits with fixed dates), tasks whose answers the test knows, the scripted
//! reader agent and observer editor. Gold, Base and offline ToolObserver run; Gold
//! beats Base; a rerun starts no server, calls no tool and asks no model. The
//! `[mcp]` table's mistakes are one line each (no server needed).

use pipeline::{Mode, Session, Store};
use stages::env::{Method, Split};
use stages::mcp::{EpisodeRow, McpScoreRow, ServerRow, TaskRow};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// The tests that start servers run one at a time: the server and call counts
/// ([`stages::mcp::host::counts`]) are the process's.
static SERVERS: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The server's command (`OTB_MCP_SERVER_GIT`, default `mcp-server-git`), or `None`
/// (skipping) when it or git does not run here.
fn server_command() -> Option<Vec<String>> {
    let words: Vec<String> = std::env::var("OTB_MCP_SERVER_GIT")
        .unwrap_or_else(|_| "mcp-server-git".into())
        .split_whitespace()
        .map(str::to_string)
        .collect();
    let runs = |program: &str, args: &[String]| {
        Command::new(program)
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !runs("git", &["--version".to_string()]) {
        testkit::skip("mcp", "no git here");
        return None;
    }
    let ok = words.first().is_some_and(|p| {
        let mut args = words[1..].to_vec();
        args.push("--help".into());
        runs(p, &args)
    });
    if !ok {
        testkit::skip(
            "mcp",
            format!(
                "no mcp-server-git ({}; set OTB_MCP_SERVER_GIT)",
                words.join(" ")
            ),
        );
        return None;
    }
    Some(words)
}

/// A repository with two commits at fixed dates: `initial import` (2024-01-01) and
/// `add parser module` (2024-02-02).
fn repo(dir: &Path) -> PathBuf {
    let r = dir.join("repo");
    std::fs::create_dir(&r).unwrap();
    let git = |args: &[&str], date: &str| {
        let ok = Command::new("git")
            .args([
                "-c",
                "user.name=Alice",
                "-c",
                "user.email=alice@example.org",
            ])
            .args(args)
            .current_dir(&r)
            .env("GIT_AUTHOR_DATE", date)
            .env("GIT_COMMITTER_DATE", date)
            .stdout(Stdio::null())
            .status()
            .unwrap();
        assert!(ok.success(), "git {args:?}");
    };
    git(&["init", "-q", "-b", "main"], "2024-01-01T12:00:00+00:00");
    std::fs::write(r.join("README.md"), "# demo\n").unwrap();
    git(&["add", "README.md"], "2024-01-01T12:00:00+00:00");
    git(
        &["commit", "-q", "-m", "initial import"],
        "2024-01-01T12:00:00+00:00",
    );
    std::fs::write(r.join("parser.py"), "def parse(s):\n    return s.split()\n").unwrap();
    git(&["add", "parser.py"], "2024-02-02T12:00:00+00:00");
    git(
        &["commit", "-q", "-m", "add parser module"],
        "2024-02-02T12:00:00+00:00",
    );
    r
}

/// Eight tasks whose answers come from the repository above (a field of `git_log`'s
/// or `git_show`'s answer); two are training tasks by their own field, the others
/// split by the seeded fraction.
const TASKS: &[(&str, &str, &str, Option<&str>)] = &[
    (
        "log-1",
        "In the commit logs, what is the Message of the newest entry?",
        "add parser module",
        Some("train"),
    ),
    (
        "show-1",
        "Show the contents of revision 'HEAD~1': what is its Date?",
        "2024-01-01 12:00:00 +0000",
        Some("train"),
    ),
    (
        "log-2",
        "Read the commit logs: what is the Message at the top?",
        "add parser module",
        None,
    ),
    (
        "show-2",
        "Show the contents of revision 'HEAD': what is its Date?",
        "2024-02-02 12:00:00 +0000",
        None,
    ),
    (
        "show-3",
        "Show the contents of revision 'HEAD^' and give its Date.",
        "2024-01-01 12:00:00 +0000",
        None,
    ),
    (
        "log-3",
        "In the commit logs, what is the Date of the newest entry?",
        "2024-02-02 12:00:00+00:00",
        None,
    ),
    (
        "show-4",
        "Show the contents of revision 'HEAD~1' and give its Author.",
        "Alice <alice@example.org>",
        None,
    ),
    (
        "log-4",
        "Which Message does the newest entry of the commit logs have?",
        "add parser module",
        None,
    ),
];

fn tasks_file(dir: &Path) -> PathBuf {
    let p = dir.join("tasks.jsonl");
    let lines: Vec<String> = TASKS
        .iter()
        .map(|(id, q, a, split)| {
            let mut t = serde_json::json!({"id": id, "server": "git", "question": q, "answer": a});
            if let Some(s) = split {
                t["split"] = serde_json::json!(s);
            }
            t.to_string()
        })
        .collect();
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    p
}

fn experiment(command: &[String], methods: &str) -> String {
    let words: Vec<String> = command.iter().map(|w| format!("{w:?}")).collect();
    format!(
        "name = \"mcp-git\"\n[mcp]\ntasks = \"tasks.jsonl\"\nsettings = [\"names\"]\nmethods = [{methods}]\ntrain_fraction = 0.2\nmax_turns = 2\nrounds = 1\nbatch_size = 4\nconcurrency = 2\n[mcp.servers.git]\ncommand = [{}, \"--repository\", \"{{workdir}}\"]\nworkdir = \"repo\"\nfresh = \"episode\"\n[models]\nagent = \"scripted:mcp-reader\"\neditor = \"scripted:mcp-observer\"\n",
        words.join(", ")
    )
}

fn accuracy(out: &stages::driver::RunOutput, method: Method) -> McpScoreRow {
    out.by_stage(stages::mcp::EVALUATE_STAGE)
        .find(|o| o.cell.is(method))
        .unwrap_or_else(|| panic!("no {method:?} score"))
        .entry
        .read::<McpScoreRow>()
        .unwrap()
        .remove(0)
}

#[test]
fn gold_base_and_toolobserver_run_on_a_real_git_server() {
    let Some(command) = server_command() else {
        return;
    };
    let _one = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    tasks_file(dir.path());
    let path = dir.path().join("mcp.toml");
    std::fs::write(
        &path,
        experiment(&command, "\"gold\", \"base\", \"toolobserver\""),
    )
    .unwrap();
    let exp = stages::driver::load(&path).unwrap();
    stages::driver::preflight(&exp).unwrap();
    let store = Store::open(&dir.path().join("store"), pipeline::Access::ReadWrite).unwrap();
    let (opened0, calls0) = stages::mcp::host::counts();
    let s = Session::new(&store, Mode::Run, true);
    let out = stages::driver::drive(&exp, &s).unwrap();
    let (opened1, calls1) = stages::mcp::host::counts();
    assert!(
        opened1 > opened0 && calls1 > calls0,
        "the server was used: {opened0}->{opened1} opened, {calls0}->{calls1} calls"
    );

    // The server as it was met: mcp-server-git's tools, its identity.
    let server: Vec<ServerRow> = out
        .by_stage(stages::mcp::SERVER_STAGE)
        .next()
        .expect("the server's row")
        .entry
        .read()
        .unwrap();
    let names: Vec<&str> = server[0]
        .tools
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"git_log") && names.contains(&"git_show"),
        "{names:?}"
    );
    assert_eq!(server[0].identity["name"], "git");
    assert!(
        server[0].identity["workdir_digest"].is_string(),
        "{}",
        server[0].identity
    );

    // The splits: the two marked training tasks, and one of the six others.
    let tasks: Vec<TaskRow> = out
        .by_stage(stages::mcp::TASKS_STAGE)
        .next()
        .unwrap()
        .entry
        .read()
        .unwrap();
    let train: Vec<&str> = tasks
        .iter()
        .filter(|t| t.split == "train")
        .map(|t| t.task_id.as_str())
        .collect();
    assert_eq!(train.len(), 3, "{train:?}");
    assert!(train.contains(&"log-1") && train.contains(&"show-1"));
    let n_test = tasks.len() - train.len();

    // Gold reads the server's descriptions and answers every test task; the names
    // alone leave it guessing.
    let gold = accuracy(&out, Method::Gold);
    let base = accuracy(&out, Method::Base);
    eprintln!("gold {gold:?}\nbase {base:?}");
    assert_eq!(gold.tasks as usize, n_test);
    // Every call is stored with its arguments and the server's answer, in the
    // opaque names of the docs played.
    let base_eps: Vec<EpisodeRow> = out
        .by_stage(stages::mcp::EXPLORE_STAGE)
        .find(|o| o.cell.is(Method::Base) && o.cell.split() == Some(Split::Test))
        .unwrap()
        .entry
        .read()
        .unwrap();
    let gold_eps: Vec<EpisodeRow> = out
        .by_stage(stages::mcp::EXPLORE_STAGE)
        .find(|o| o.cell.is(Method::Gold))
        .unwrap()
        .entry
        .read()
        .unwrap();
    let answers: Vec<(&str, Option<&str>, &str)> = gold_eps
        .iter()
        .map(|e| {
            (
                e.task_id.as_str(),
                e.answer.as_deref(),
                e.calls[0]["result"].as_str().unwrap_or(""),
            )
        })
        .collect();
    assert_eq!(gold.accuracy, 1.0, "{gold:?}: {answers:#?}");
    assert!(
        gold.accuracy > base.accuracy,
        "gold {gold:?} vs base {base:?}"
    );
    for e in &gold_eps {
        let c = &e.calls[0];
        assert!(c["tool"].as_str().unwrap().starts_with("git_"), "{c}");
        assert_eq!(c["arguments"]["repo_path"], "/workspace");
        assert_eq!(c["is_error"], false, "{c}");
        let result = c["result"].as_str().unwrap();
        assert!(result.contains("Author:"), "{result}");
        // The agent never sees the copy's real path.
        assert!(!result.contains(dir.path().to_str().unwrap()), "{result}");
        assert!(
            e.editor_text.contains("Outcome: correct"),
            "{}",
            e.editor_text
        );
    }
    for e in &base_eps {
        for c in e.calls.as_array().unwrap() {
            assert!(c["tool"].as_str().unwrap().starts_with("tool_"), "{c}");
            assert!(
                c["server_tool"].as_str().unwrap().starts_with("git_"),
                "{c}"
            );
        }
    }
    // Offline ToolObserver: a round over the training tasks, then the test split.
    assert_eq!(out.by_stage("consensus-merge").count(), 1);
    let to = accuracy(&out, Method::ToolObserver);
    assert_eq!(to.tasks as usize, n_test);
    eprintln!("+TO {to:?}");
    // The observer described the tools by the training requests they served: the
    // reader finds the right tool more often than with the names alone.
    assert!(to.accuracy > base.accuracy, "+TO {to:?} vs base {base:?}");

    // Status mode walks the same grid from the store (no server started), and the
    // environment's table shows each cell.
    let located = stages::driver::locate(&exp, &store).unwrap();
    assert!(located
        .reports
        .iter()
        .all(|r| r.state == pipeline::NodeState::Fresh));
    use stages::tables::report::TableReport;
    let table = stages::tables::mcp::build(&exp, &located)
        .unwrap()
        .render(false);
    assert!(
        table.contains("| git:names | gold | scripted:mcp-reader |  | 100.0 |"),
        "{table}"
    );
    assert_eq!(table.matches("| git:names |").count(), 3, "{table}");

    // The report: each episode an item with every call's arguments and the
    // server's answer, the environment's table, the accuracy intervals.
    let r = stages::report::of_experiment(&store, &exp, None, &stages::report::Options::default())
        .unwrap();
    let items = serde_json::to_string(&r.items).unwrap();
    assert!(
        items.contains("the server's answer") && items.contains("/workspace"),
        "{items}"
    );
    assert!(items.contains("log-2"), "{items}");
    assert!(
        r.tables
            .iter()
            .chain(&r.more_tables)
            .any(|t| t.name.contains("MCP") && t.markdown.contains("| gold |")),
        "{:?}",
        r.tables.iter().map(|t| &t.name).collect::<Vec<_>>()
    );

    // A rerun: every stage from the store, no server started, no call, no model.
    let s2 = Session::new(&store, Mode::Run, true);
    stages::driver::drive(&exp, &s2).unwrap();
    assert_eq!(s2.executed(), 0);
    assert_eq!(stages::mcp::host::counts(), (opened1, calls1));
}

/// Each mistake in an `[mcp]` table or its tasks file is one line naming it,
/// before anything runs.
#[test]
fn config_mistakes_are_one_line_each() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("repo")).unwrap();
    tasks_file(dir.path());
    // `true` is on every PATH: the program a run checks for exists.
    let server = "[mcp.servers.git]\ncommand = [\"true\", \"--repository\", \"{workdir}\"]\nworkdir = \"repo\"\n";
    let load = |body: &str| {
        let p = dir.path().join("bad.toml");
        std::fs::write(&p, format!("name = \"bad\"\n{body}")).unwrap();
        stages::driver::load(&p)
    };
    for (body, says) in [
        (
            format!("[mcp]\ntasks = \"tasks.jsonl\"\ncolour = 1\n{server}"),
            "colour",
        ),
        (
            "[mcp]\ntasks = \"tasks.jsonl\"\n[mcp.servers.git]\nworkdir = \"repo\"\n".to_string(),
            "give `command`",
        ),
        (
            format!("[mcp]\ntasks = \"tasks.jsonl\"\nsettings = [\"secret\"]\n{server}"),
            "unknown setting `secret`",
        ),
        (
            format!("[mcp]\ntasks = \"tasks.jsonl\"\nmethods = [\"magic\"]\n{server}"),
            "unknown method `magic`",
        ),
        (
            format!("[mcp]\ntasks = \"tasks.jsonl\"\ntrain_fraction = 1.5\n{server}"),
            "strictly between 0 and 1",
        ),
        (format!("[mcp]\n{server}"), "toolobserver needs tasks"),
    ] {
        let e = load(&body).expect_err(&body).to_string();
        assert!(e.contains(says), "{body}\n=> {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // A missing tasks file, working folder or program: one line before a run (the
    // shipped experiments name fixtures `otb mcp fixtures` makes, so reading the
    // file does not require them).
    for (body, says) in [
        (
            format!("[mcp]\ntasks = \"missing.jsonl\"\n{server}"),
            "missing.jsonl is not a file",
        ),
        (
            "[mcp]\ntasks = \"tasks.jsonl\"\n[mcp.servers.git]\ncommand = [\"true\"]\nworkdir = \"gone\"\n".to_string(),
            "gone is not a folder",
        ),
        (
            "[mcp]\ntasks = \"tasks.jsonl\"\n[mcp.servers.git]\ncommand = [\"otb-no-such-server-57\"]\n".to_string(),
            "program `otb-no-such-server-57` not found",
        ),
    ] {
        let exp = load(&body).expect(&body);
        let e = stages::driver::preflight(&exp).unwrap_err().0;
        assert!(e.contains(says), "{body}\n=> {e}");
        assert_eq!(e.lines().count(), 1, "{e}");
    }
    // Without tasks, the methods that need none are accepted.
    let exp = load(&format!(
        "[mcp]\nmethods = [\"easytool\", \"draft\"]\n{server}"
    ))
    .unwrap();
    assert!(exp.mcp().unwrap().tasks.is_none());
    // A bad line of the tasks file: one line naming it, before the store is touched.
    std::fs::write(
        dir.path().join("tasks.jsonl"),
        "{\"id\": \"a\", \"server\": \"git\", \"question\": \"q\"}\n{\"id\": \"b\", \"server\": \"hg\", \"question\": \"q\"}\n",
    )
    .unwrap();
    let exp = load(&format!(
        "[mcp]\ntasks = \"tasks.jsonl\"\nmethods = [\"gold\"]\n{server}"
    ))
    .unwrap();
    let e = stages::driver::preflight(&exp).unwrap_err().0;
    assert!(e.contains("line 2") && e.contains("server `hg`"), "{e}");
    // ToolObserver on a server without a training task says so.
    std::fs::write(
        dir.path().join("tasks.jsonl"),
        "{\"id\": \"a\", \"server\": \"git\", \"question\": \"q\", \"split\": \"test\"}\n",
    )
    .unwrap();
    let exp = load(&format!("[mcp]\ntasks = \"tasks.jsonl\"\n{server}")).unwrap();
    let e = stages::driver::preflight(&exp).unwrap_err().0;
    assert!(
        e.contains("toolobserver needs tasks") && e.contains("`git`"),
        "{e}"
    );
}

/// Without a tasks file the methods that need no tasks still run: EasyTool,
/// Play2Prompt's and DRAFT's tool play (real calls to the server, here one shared
/// process: `fresh = "run"`) and Trace-Free+ write their descriptions, and their
/// test episodes are none.
#[test]
fn methods_that_need_no_tasks_run_without_tasks() {
    let Some(command) = server_command() else {
        return;
    };
    let _one = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    let words: Vec<String> = command.iter().map(|w| format!("{w:?}")).collect();
    let path = dir.path().join("notasks.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"mcp-notasks\"\n[mcp]\nsettings = [\"names+params\"]\nmethods = [\"easytool\", \"play2prompt\", \"draft\", \"tracefree\"]\n[mcp.servers.git]\ncommand = [{}, \"--repository\", \"{{workdir}}\"]\nworkdir = \"repo\"\nfresh = \"run\"\n[models]\nagent = \"scripted:mcp-reader\"\neditor = \"scripted:errors\"\n[baselines.play2prompt]\ninit_loops = 1\nbeam_width = 1\nexpansions = 1\niterations = 1\nrefine_steps = 1\ntop_k = 1\nexamples = 1\n[baselines.draft]\nepisodes = 1\nretries = 1\nembedder = \"bag-of-words\"\n",
            words.join(", ")
        ),
    )
    .unwrap();
    let exp = stages::driver::load(&path).unwrap();
    stages::driver::preflight(&exp).unwrap();
    let store = Store::open(&dir.path().join("store"), pipeline::Access::ReadWrite).unwrap();
    let (_, calls0) = stages::mcp::host::counts();
    let s = Session::new(&store, Mode::Run, true);
    let out = stages::driver::drive(&exp, &s).unwrap();
    for stage in ["easytool", "play2prompt", "draft", "tracefree"] {
        let docs: Vec<stages::rows::DocRow> = out
            .by_stage(stage)
            .next()
            .unwrap_or_else(|| panic!("no {stage} output"))
            .entry
            .read()
            .unwrap();
        let tools = docs[0].tools.as_array().unwrap();
        assert!(tools.len() >= 12, "{stage}: {tools:?}");
        assert!(tools
            .iter()
            .all(|t| t["name"].as_str().unwrap().starts_with("tool_")));
    }
    // The tool play called the real server.
    let runs: Vec<stages::rows::ToolRunRow> = out
        .by_stage("play2prompt")
        .next()
        .unwrap()
        .entry
        .read()
        .unwrap();
    assert!(!runs.is_empty());
    assert!(stages::mcp::host::counts().1 > calls0, "{runs:#?}");
    // Nothing to evaluate: every score counts no task.
    let scores: Vec<McpScoreRow> = out
        .by_stage(stages::mcp::EVALUATE_STAGE)
        .map(|o| o.entry.read::<McpScoreRow>().unwrap().remove(0))
        .collect();
    assert_eq!(scores.len(), 4);
    assert!(scores.iter().all(|s| s.tasks == 0));
}
