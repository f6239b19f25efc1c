//! The `[mcp]` environment through the real stages and a real MCP server: PyPI's
//! `mcp-server-git` (`OTB_MCP_SERVER_GIT`, its command; skips, saying so, when it is
//! absent, unless `OTB_REQUIRE` names `mcp`) over a repository the test makes (two
//! commits with fixed dates), tasks whose answers the test knows, the scripted
//! reader agent and observer editor. Gold, Base and offline ToolObserver run; Gold
//! beats Base; a rerun starts no server, calls no tool and asks no model. Tasks with
//! a `judge` rubric are scored by the LLM judge (`scripted:mcp-judge`, stage
//! `mcp-judge`). The `[mcp]` table's mistakes are one line each (no server needed).

use pipeline::{Mode, Session, Store};
use stages::env::{Method, Split};
use stages::mcp::{EpisodeRow, McpJudgeRow, McpScoreRow, ServerRow, TaskRow};
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
    tasks_file_with(dir, |_, _| {})
}

/// [`TASKS`] as a tasks file, each task as `edit` leaves it.
fn tasks_file_with(dir: &Path, edit: impl Fn(&str, &mut serde_json::Value)) -> PathBuf {
    let p = dir.join("tasks.jsonl");
    let lines: Vec<String> = TASKS
        .iter()
        .map(|(id, q, a, split)| {
            let mut t = serde_json::json!({"id": id, "server": "git", "question": q, "answer": a});
            if let Some(s) = split {
                t["split"] = serde_json::json!(s);
            }
            edit(id, &mut t);
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

    // No task has a rubric: no judge node, and the keys of before the judge existed
    // (evaluate reads the episodes alone under the exact-match rule; batch-reflect
    // reads exploration's episodes).
    assert_eq!(out.by_stage(stages::mcp::JUDGE_STAGE).count(), 0);
    for o in out.by_stage(stages::mcp::EVALUATE_STAGE) {
        let c = &o.entry.manifest.components;
        assert_eq!(
            c.params,
            serde_json::json!({"bootstrap": [1000, 0], "score": "exact match"})
        );
        assert_eq!(c.inputs.keys().collect::<Vec<_>>(), ["episodes"]);
    }
    let explored: Vec<&pipeline::Digest> = out
        .by_stage(stages::mcp::EXPLORE_STAGE)
        .map(|o| &o.entry.manifest.output_digest)
        .collect();
    assert_eq!(out.by_stage("batch-reflect").count(), 1);
    for o in out.by_stage("batch-reflect") {
        assert!(explored.contains(&&o.entry.manifest.components.inputs["trajectories"]));
    }

    // A rerun: every stage from the store, no server started, no call, no model.
    let s2 = Session::new(&store, Mode::Run, true);
    stages::driver::drive(&exp, &s2).unwrap();
    assert_eq!(s2.executed(), 0);
    assert_eq!(stages::mcp::host::counts(), (opened1, calls1));
}

/// The rubric of each judged task: `log-1` (training) and `log-2` name what the
/// reader answers, `log-4` names something else (the judge says incorrect though
/// exact match would say correct), `show-1` (training) leaves the scripted judge
/// without a verdict; `show-4` has neither answer nor rubric (scored nowhere).
fn rubric_of(id: &str) -> Option<&'static str> {
    match id {
        "log-1" | "log-2" => Some("Names the parser module."),
        "log-4" => Some("Says the message is 'initial import'."),
        "show-1" => Some("unjudgeable"),
        _ => None,
    }
}

fn with_rubrics(id: &str, t: &mut serde_json::Value) {
    if let Some(r) = rubric_of(id) {
        t["judge"] = serde_json::json!(r);
        if id != "show-1" {
            t.as_object_mut().unwrap().remove("answer");
        }
    }
    if id == "show-4" {
        t.as_object_mut().unwrap().remove("answer");
    }
}

/// Tasks with a `judge` rubric are scored by the judge (`mcp.judge =
/// "scripted:mcp-judge"`): its verdicts decide their accuracy, a task with neither
/// answer nor rubric counts in no mean, the editor reads the training verdicts
/// ("not judged" for a reply without one), and a rerun asks no model.
#[test]
fn the_judge_decides_tasks_with_rubrics() {
    let Some(command) = server_command() else {
        return;
    };
    let _one = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    repo(dir.path());
    tasks_file_with(dir.path(), with_rubrics);
    let path = dir.path().join("mcp.toml");
    let text = experiment(&command, "\"gold\", \"base\", \"toolobserver\"").replace(
        "concurrency = 2\n",
        "concurrency = 2\njudge = \"scripted:mcp-judge\"\n",
    );
    assert!(text.contains("judge = "), "{text}");
    std::fs::write(&path, text).unwrap();
    let exp = stages::driver::load(&path).unwrap();
    stages::driver::preflight(&exp).unwrap();
    let store = Store::open(&dir.path().join("store"), pipeline::Access::ReadWrite).unwrap();
    let s = Session::new(&store, Mode::Run, true);
    let out = stages::driver::drive(&exp, &s).unwrap();
    let (opened1, calls1) = stages::mcp::host::counts();

    let tasks: Vec<TaskRow> = out
        .by_stage(stages::mcp::TASKS_STAGE)
        .next()
        .unwrap()
        .entry
        .read()
        .unwrap();
    let split_of = |id: &str| {
        tasks
            .iter()
            .find(|t| t.task_id == id)
            .map(|t| t.split.clone())
            .unwrap()
    };
    // A judge node per test play (gold, base, +TO) and per training play (+TO's
    // one round: its training tasks carry rubrics).
    let judged: Vec<&stages::env::Output> = out.by_stage(stages::mcp::JUDGE_STAGE).collect();
    let on = |split: Split| {
        judged
            .iter()
            .filter(|o| o.cell.split() == Some(split))
            .count()
    };
    assert_eq!((on(Split::Test), on(Split::Train)), (3, 1), "{judged:#?}");

    // Gold: the reader answers every task right, so exact match would say 100%;
    // the judge says `log-4` is wrong, and `show-4` counts nowhere.
    let gold = accuracy(&out, Method::Gold);
    let test: Vec<&TaskRow> = tasks.iter().filter(|t| t.split == "test").collect();
    let scored = test.iter().filter(|t| t.task_id != "show-4").count();
    let wrong = usize::from(split_of("log-4") == "test");
    assert_eq!(gold.tasks as usize, test.len());
    assert!(scored > wrong, "{test:?}");
    assert_eq!(
        gold.accuracy,
        (scored - wrong) as f64 / scored as f64,
        "{gold:?}"
    );
    let gold_judged: Vec<McpJudgeRow> = out
        .by_stage(stages::mcp::JUDGE_STAGE)
        .find(|o| o.cell.is(Method::Gold))
        .unwrap()
        .entry
        .read()
        .unwrap();
    assert_eq!(gold_judged.len(), test.len(), "one row per episode");
    for r in &gold_judged {
        let want = match r.task_id.as_str() {
            "log-2" => Some(true),
            "log-4" => Some(false),
            _ => None,
        };
        assert_eq!(r.rubric, want.is_some(), "{r:?}");
        assert_eq!(r.verdict, want, "{r:?}");
        assert!(r.editor_text.is_none(), "test rows carry no editor text");
        if want.is_some() {
            assert!(r.reason.is_some() && r.prompt_tokens > 0, "{r:?}");
        }
    }
    // The evaluation read the verdicts (and the tasks) under a key of its own.
    for o in out.by_stage(stages::mcp::EVALUATE_STAGE) {
        let inputs: Vec<&String> = o.entry.manifest.components.inputs.keys().collect();
        assert_eq!(inputs, ["episodes", "judgements", "tasks"], "{}", o.node);
        assert_eq!(
            o.entry.manifest.components.params["judge"],
            "scripted:mcp-judge"
        );
    }

    // The editor reads the training verdicts: `log-1` by the judge, `show-1` not
    // judged; the others as exploration graded them.
    let train: Vec<McpJudgeRow> = judged
        .iter()
        .find(|o| o.cell.split() == Some(Split::Train))
        .unwrap()
        .entry
        .read()
        .unwrap();
    let explored: Vec<EpisodeRow> = out
        .by_stage(stages::mcp::EXPLORE_STAGE)
        .find(|o| o.cell.split() == Some(Split::Train))
        .unwrap()
        .entry
        .read()
        .unwrap();
    assert_eq!(train.len(), explored.len());
    for (r, e) in train.iter().zip(&explored) {
        assert_eq!(r.task_id, e.task_id);
        let text = r.editor_text.as_deref().unwrap();
        match r.task_id.as_str() {
            "show-1" => {
                assert_eq!(r.verdict, None);
                assert_eq!(r.error_kind.as_deref(), Some("no_verdict"));
                assert!(text.ends_with("Outcome: not judged"), "{text}");
            }
            "log-1" => {
                let v = r.verdict.expect("a verdict on log-1");
                let says = if v { "correct" } else { "incorrect" };
                assert!(text.ends_with(&format!("Outcome: {says}")), "{text}");
            }
            _ => assert_eq!(text, e.editor_text),
        }
    }
    // The batch analysis read the judge's rows.
    let reflect = out.by_stage("batch-reflect").next().unwrap();
    assert_eq!(
        reflect.entry.manifest.components.inputs["trajectories"],
        judged
            .iter()
            .find(|o| o.cell.split() == Some(Split::Train))
            .unwrap()
            .entry
            .manifest
            .output_digest
    );

    // A rerun: every stage from the store, no server, no model.
    let s2 = Session::new(&store, Mode::Run, true);
    stages::driver::drive(&exp, &s2).unwrap();
    assert_eq!(s2.executed(), 0);
    assert_eq!(stages::mcp::host::counts(), (opened1, calls1));
}

/// A tasks file with a rubric but no `mcp.judge`: one line naming the first such
/// task, before anything runs (a user error: exit 2); a bad judge spec is one line.
#[test]
fn a_rubric_without_a_judge_model_is_one_line_before_anything_runs() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("repo")).unwrap();
    tasks_file_with(dir.path(), with_rubrics);
    let server = "[mcp.servers.git]\ncommand = [\"true\", \"--repository\", \"{workdir}\"]\nworkdir = \"repo\"\n";
    let load = |body: &str| {
        let p = dir.path().join("judge.toml");
        std::fs::write(&p, format!("name = \"judge\"\n{body}")).unwrap();
        stages::driver::load(&p)
    };
    let exp = load(&format!("[mcp]\ntasks = \"tasks.jsonl\"\n{server}")).unwrap();
    let e = stages::driver::preflight(&exp).unwrap_err();
    assert_eq!(
        stages::driver::class_of(&e),
        Some(pipeline::ErrorClass::User),
        "exit 2"
    );
    let e = e.0;
    assert!(e.contains("task `log-1`") && e.contains("judge"), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    let e = load(&format!(
        "[mcp]\ntasks = \"tasks.jsonl\"\njudge = \"scripted:nobody\"\n{server}"
    ))
    .unwrap_err()
    .to_string();
    assert!(e.contains("mcp.judge: "), "{e}");
    assert_eq!(e.lines().count(), 1, "{e}");
    let exp = load(&format!(
        "[mcp]\ntasks = \"tasks.jsonl\"\njudge = \"scripted:mcp-judge\"\n{server}"
    ))
    .unwrap();
    stages::driver::preflight(&exp).unwrap();
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

/// A small shop's MCP server over stdio, made by the test (standard-library Python):
/// `stock_level` (the units of an item in stock) and `price_of` (its price), whose
/// own description is wrong -- it claims to tell how many units are sold -- so a
/// reader of descriptions asks it about stock.
const SHOP_SERVER: &str = r#"import json
import sys

ITEM = {"type": "object", "properties": {"item": {"type": "string"}}, "required": ["item"]}
TOOLS = [
    {"name": "stock_level", "description": "Reports the stock of an item.", "inputSchema": ITEM},
    {"name": "price_of",
     "description": "Tells how many units of an item are sold per day, and what each costs.",
     "inputSchema": ITEM},
]
STOCK = {"apple": "42 crates", "pear": "7 crates"}
PRICE = {"apple": "3 EUR", "pear": "2 EUR"}


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


def call(name, args):
    item = str(args.get("item", ""))
    table, field = {"stock_level": (STOCK, "Units"), "price_of": (PRICE, "Price")}[name]
    if item not in table:
        return "Error: no item " + json.dumps(item), True
    return "Item: %s\n%s: %s" % (item, field, table[item]), False


for line in sys.stdin:
    try:
        req = json.loads(line)
    except ValueError:
        continue
    method, rid = req.get("method"), req.get("id")
    if rid is None:
        continue
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": "2025-06-18",
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "shop", "version": "1"},
        }})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call":
        params = req.get("params") or {}
        name = params.get("name")
        if name not in ("stock_level", "price_of"):
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "no such tool"}})
            continue
        text, err = call(name, params.get("arguments") or {})
        send({"jsonrpc": "2.0", "id": rid,
              "result": {"content": [{"type": "text", "text": text}], "isError": err}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": rid,
              "error": {"code": -32601, "message": "method not found: " + str(method)}})
"#;

/// The shop's tasks: one training task, and two test tasks -- `stock-apple`, which
/// the shop's wrong description sends to `price_of` (wrong until the editor
/// describes that tool by what it returned), and `price-pear`, right from the start.
const SHOP_TASKS: &str = r#"{"id": "price-apple", "server": "shop", "question": "What does one 'apple' cost?", "answer": "3 EUR", "split": "train", "oracle": [{"tool": "price_of", "arguments": {"item": "apple"}}]}
{"id": "stock-apple", "server": "shop", "question": "How many units of 'apple' are in stock?", "answer": "42 crates", "split": "test", "oracle": [{"tool": "stock_level", "arguments": {"item": "apple"}}]}
{"id": "price-pear", "server": "shop", "question": "What does one 'pear' cost?", "answer": "2 EUR", "split": "test", "oracle": [{"tool": "price_of", "arguments": {"item": "pear"}}]}
"#;

/// The shop experiment's nodes and keys in offline mode (no `toolobserver` key), as
/// `otb plan --format json` listed them with the otb of before online mode existed
/// (the commit f8ffbbc): a run that does not ask for online mode keeps them.
const SHOP_OFFLINE_KEYS: &[(&str, &str)] = &[
    (
        "mcp-server[shop]",
        "ddba718cb88e02a26c7375fc1a7ae641eaf7b0df7016824a12ceba36aceead1d",
    ),
    (
        "mcp-tasks[shop]",
        "0d3ba24e8921c8a0b02353daab083f491d82b1f9b95af16f48294ee2991d4395",
    ),
    (
        "mcp-docs[shop:names+desc gold]",
        "98b653f186649ffb9967484c14d2b3694dbba12a649affb33b268c81baad886f",
    ),
    (
        "mcp-docs[shop:names+desc opaque]",
        "ab4b14f7d08d989eabf245212623223980ddca7d6ffd2c5c5576318b681e75fa",
    ),
    (
        "mcp-explore[shop:names+desc base test]",
        "abe9da4bab0e199254e49695b30347d7e1a35fdc4bd8313e4130978419a6e5ac",
    ),
    (
        "mcp-evaluate[shop:names+desc base test]",
        "d71fb96df8469bb48309a11771bfbcad8819322de39a0d04f3a2ff18ba82f9de",
    ),
    (
        "mcp-explore[shop:names+desc toolobserver train r0]",
        "122c6d0662189f9f32305d4c1e54e4e4e54c0576d9a863d5655c8ec0b8c43a65",
    ),
    (
        "batch-reflect[shop:names+desc r1]",
        "8bb3a6077ae23f30e156375a9afc131a684b5edce91f0814420c1db55dc66ff3",
    ),
    (
        "consensus-merge[shop:names+desc r1]",
        "984aaccf218fd5365623981713bfb5de8e7323cc18df59b50079cb7d51df6f69",
    ),
    (
        "mcp-explore[shop:names+desc toolobserver train r1]",
        "d1728c6e766fa5492a87cc15ffbcfe31f65fd9f55ae1570e16e02df75d2aaf64",
    ),
    (
        "batch-reflect[shop:names+desc r2]",
        "6e896df3c8d16246d11436b900d9cb1e4a6e6809e5f616f40171c43aff83daba",
    ),
    (
        "consensus-merge[shop:names+desc r2]",
        "e68e9bf1a45c48ca5dc57157301a74ead81c2a99aea62e7bb559e822c468483c",
    ),
    (
        "mcp-explore[shop:names+desc toolobserver test]",
        "242cb76957f8c72e9c19b841212e4961f4eeebb2fcd4cf346bae5ab0c81596a7",
    ),
    (
        "mcp-evaluate[shop:names+desc toolobserver test]",
        "be81ead7e1badd74508f145d6c9998f29d96aeb571cd867121408c41e8d3eaf8",
    ),
];

/// The shop experiment in `dir` (server, tasks, `shop.toml`), with `extra` lines in
/// its `[mcp]` table; the experiment file's path.
fn shop(dir: &Path, extra: &str) -> PathBuf {
    std::fs::write(dir.join("shop_mcp.py"), SHOP_SERVER).unwrap();
    std::fs::write(dir.join("tasks.jsonl"), SHOP_TASKS).unwrap();
    let path = dir.join("shop.toml");
    std::fs::write(
        &path,
        format!(
            "name = \"mcp-shop\"\n[mcp]\ntasks = \"tasks.jsonl\"\nsettings = [\"names+desc\"]\nmethods = [\"base\", \"toolobserver\"]\nmax_turns = 2\nrounds = 2\nbatch_size = 4\nconcurrency = 2\n{extra}[mcp.servers.shop]\ncommand = [\"python3\", \"./shop_mcp.py\"]\nfresh = \"episode\"\n[models]\nagent = \"scripted:mcp-reader\"\neditor = \"scripted:mcp-observer\"\n"
        ),
    )
    .unwrap();
    path
}

/// `python3` runs (the shop server), or the test skips, saying so.
fn python3() -> bool {
    let ok = Command::new("python3")
        .args(["-c", "pass"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        testkit::skip("mcp", "no python3 for the test-made shop server");
    }
    ok
}

/// The output of node `name`.
fn output<'a>(out: &'a stages::driver::RunOutput, name: &str) -> &'a stages::driver::Output {
    out.outputs
        .iter()
        .find(|o| o.node == name)
        .unwrap_or_else(|| {
            let names: Vec<&str> = out.outputs.iter().map(|o| o.node.as_str()).collect();
            panic!("no node {name} in {names:#?}")
        })
}

/// ToolObserver's online mode on the shop (`toolobserver = "online"`): the offline
/// experiment keeps its nodes and keys (pinned); online, each test task gets its own
/// docs, the task the shop's wrong description sends to the wrong tool is answered
/// after the editor rewrote that tool from the task's own episode, the task answered
/// right at round 0 is frozen after one round (no editor call about it later, its
/// episode reused), the table shows the curve's last round, and a rerun calls no
/// server and no model.
#[test]
fn toolobserver_online_learns_on_each_test_task() {
    use stages::rows::{DocRow, EditRow};
    use stages::tables::report::TableReport;
    if !python3() {
        return;
    }
    let _one = SERVERS.lock().unwrap_or_else(|e| e.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(&dir.path().join("store"), pipeline::Access::ReadWrite).unwrap();

    // Offline (the default): the nodes and keys of before online mode existed.
    let offline = stages::driver::load(&shop(dir.path(), "")).unwrap();
    stages::driver::preflight(&offline).unwrap();
    let s = Session::new(&store, Mode::Run, true);
    stages::driver::drive(&offline, &s).unwrap();
    let keys: Vec<(String, String)> = stages::driver::locate(&offline, &store)
        .unwrap()
        .reports
        .iter()
        .map(|r| {
            (
                r.node.clone(),
                r.key.as_ref().map(|k| k.0.clone()).unwrap_or_default(),
            )
        })
        .collect();
    let pinned: Vec<(String, String)> = SHOP_OFFLINE_KEYS
        .iter()
        .map(|(n, k)| (n.to_string(), k.to_string()))
        .collect();
    assert_eq!(
        keys, pinned,
        "the offline experiment's nodes and keys changed"
    );
    // Saying `offline` is the default, word for word.
    let said = stages::driver::load(&shop(dir.path(), "toolobserver = \"offline\"\n")).unwrap();
    let s = Session::new(&store, Mode::Run, true);
    stages::driver::drive(&said, &s).unwrap();
    assert_eq!(s.executed(), 0);

    // Online: the same store; only the online curve's nodes run.
    let exp = stages::driver::load(&shop(dir.path(), "toolobserver = \"online\"\n")).unwrap();
    stages::driver::preflight(&exp).unwrap();
    // Planned before it runs: the task docs and round 0 would run, round 1's edits
    // wait for them, and the rounds after run only if some task is not frozen then.
    let plan = stages::driver::locate(&exp, &store).unwrap();
    let state = |node: &str| {
        plan.reports
            .iter()
            .find(|r| r.node == node)
            .map(|r| r.state.clone())
            .unwrap_or_else(|| panic!("{node} not planned"))
    };
    assert!(matches!(
        state("mcp-task-docs[shop:names+desc]"),
        pipeline::NodeState::WouldRun { .. }
    ));
    assert!(matches!(
        state("batch-reflect[shop:names+desc r1]"),
        pipeline::NodeState::Blocked { .. }
    ));
    assert!(matches!(
        state("mcp-explore[shop:names+desc r1]"),
        pipeline::NodeState::Planned { .. }
    ));
    let (opened0, calls0) = stages::mcp::host::counts();
    let s = Session::new(&store, Mode::Run, true);
    let out = stages::driver::drive(&exp, &s).unwrap();
    let (opened1, calls1) = stages::mcp::host::counts();
    let mut ran: Vec<String> = s
        .reports()
        .into_iter()
        .filter(|r| r.state == pipeline::NodeState::Ran)
        .map(|r| r.node)
        .collect();
    ran.sort();
    assert_eq!(
        ran,
        [
            "batch-reflect[shop:names+desc r1]",
            "batch-reflect[shop:names+desc r2]",
            "mcp-evaluate[shop:names+desc r1]",
            "mcp-explore[shop:names+desc r0]",
            "mcp-explore[shop:names+desc r1]",
            "mcp-task-docs[shop:names+desc]",
        ],
        "every task frozen after round 2's edits: no round 2 play; round 0's episodes \
         are Base's, byte for byte, so their evaluation is Base's entry"
    );
    // Round 0 plays both test tasks, round 1 only the one whose docs changed: one
    // call each.
    assert_eq!(calls1 - calls0, 3, "{opened0}->{opened1} opened");
    assert!(out.by_stage("consensus-merge").next().is_none());

    let eps = |node: &str| -> Vec<EpisodeRow> { output(&out, node).entry.read().unwrap() };
    let ep = |rows: &[EpisodeRow], id: &str| -> EpisodeRow {
        rows.iter().find(|e| e.task_id == id).unwrap().clone()
    };
    let r0 = eps("mcp-explore[shop:names+desc r0]");
    let r1 = eps("mcp-explore[shop:names+desc r1]");
    let (stock0, pear0) = (ep(&r0, "stock-apple"), ep(&r0, "price-pear"));
    assert_eq!(r0.len(), 2, "the test tasks only");
    assert!(!stock0.correct, "{stock0:#?}");
    assert_eq!(stock0.calls[0]["server_tool"], "price_of", "{stock0:#?}");
    assert!(pear0.correct, "{pear0:#?}");
    let wrong_tool = stock0.calls[0]["tool"].as_str().unwrap().to_string();
    assert!(wrong_tool.starts_with("tool_"), "{wrong_tool}");

    // The editor's rounds: the task answered wrong had its tool rewritten from its own
    // episode; the one answered right changed nothing and froze.
    let reflect = |round: u32| -> (Vec<DocRow>, Vec<EditRow>) {
        let o = output(&out, &format!("batch-reflect[shop:names+desc r{round}]"));
        (o.entry.read().unwrap(), o.entry.read().unwrap())
    };
    let (docs1, edits1) = reflect(1);
    let doc =
        |docs: &[DocRow], id: &str| docs.iter().find(|d| d.instance_id == id).unwrap().clone();
    let edit =
        |edits: &[EditRow], id: &str| edits.iter().find(|e| e.instance_id == id).unwrap().clone();
    assert_eq!(edit(&edits1, "stock-apple").updated, [wrong_tool.as_str()]);
    let described = doc(&docs1, "stock-apple")
        .tools
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == wrong_tool.as_str())
        .unwrap()["description"]
        .clone();
    assert_eq!(described, "Returns Item, Price.");
    assert!(edit(&edits1, "price-pear").updated.is_empty());
    assert!(doc(&docs1, "price-pear").frozen);
    assert!(!doc(&docs1, "stock-apple").frozen);
    // The other task's docs are its own: unchanged.
    assert!(doc(&docs1, "price-pear")
        .tools
        .to_string()
        .contains("sold per day"));
    let (docs2, edits2) = reflect(2);
    assert!(
        !edit(&edits2, "price-pear").sent,
        "a frozen task is not sent again"
    );
    assert!(edit(&edits2, "stock-apple").sent);
    assert!(docs2.iter().all(|d| d.frozen), "{docs2:#?}");

    // Round 1: the rewritten task now finds the stock tool; the frozen one's episode
    // is round 0's, reused.
    let stock1 = ep(&r1, "stock-apple");
    assert!(stock1.correct, "{stock1:#?}");
    assert_eq!(stock1.calls[0]["server_tool"], "stock_level");
    let pear1 = ep(&r1, "price-pear");
    assert_eq!(pear1.round, 1);
    assert_eq!(EpisodeRow { round: 0, ..pear1 }, pear0);
    let score = |node: &str| -> McpScoreRow {
        output(&out, node)
            .entry
            .read::<McpScoreRow>()
            .unwrap()
            .remove(0)
    };
    assert_eq!(score("mcp-evaluate[shop:names+desc r0]").accuracy, 0.5);
    assert_eq!(score("mcp-evaluate[shop:names+desc r1]").accuracy, 1.0);

    // The table: Base, and ToolObserver at its curve's last round; a note for the curve.
    let located = stages::driver::locate(&exp, &store).unwrap();
    assert!(located
        .reports
        .iter()
        .all(|r| r.state == pipeline::NodeState::Fresh));
    let status = stages::tables::report::status_text(&located);
    assert!(
        status.contains("fresh      ") && status.contains("batch-reflect[shop:names+desc r2]"),
        "{status}"
    );
    assert!(
        status
            .lines()
            .all(|l| !l.starts_with("would run") && !l.starts_with("missing")),
        "{status}"
    );
    let table = stages::tables::mcp::build(&exp, &located).unwrap();
    let methods: Vec<(&str, f64)> = table
        .rows
        .iter()
        .map(|r| (r.method.as_str(), r.accuracy_pct))
        .collect();
    assert_eq!(
        methods,
        [("base", 50.0), ("toolobserver", 100.0)],
        "{:#?}",
        table.rows
    );
    assert_eq!(table.rows[1].editor, "scripted:mcp-observer");
    let text = table.render(false);
    assert!(text.contains("r0 50.0% -> r1 100.0%"), "{text}");

    // A rerun: everything from the store, no server, no call, no model.
    let s2 = Session::new(&store, Mode::Run, true);
    stages::driver::drive(&exp, &s2).unwrap();
    assert_eq!(s2.executed(), 0);
    assert_eq!(stages::mcp::host::counts(), (opened1, calls1));
}
