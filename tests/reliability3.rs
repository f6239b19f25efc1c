//! Reliability, round three (#59): the newer surfaces (report, serve, export) tried
//! as a careless or hostile user would. Each case failed before its fix.

mod common;

use common::{one_error_line, Scratch, MODELS};
use std::path::Path;

/// An experiment file whose `name` is a path (`../..`, absolute) must not decide
/// where `otb report` writes: refused when the file is read, exit 2, nothing
/// written.
#[test]
fn an_experiment_name_that_is_a_path_is_refused() {
    for name in [
        "../../escaped-dotdot",
        "/tmp/otb-escaped-absolute",
        "a/b",
        "..",
    ] {
        let s = Scratch::new("", MODELS);
        let text = std::fs::read_to_string(s.exp()).unwrap();
        std::fs::write(
            s.exp(),
            text.replace("name = \"mini\"", &format!("name = {name:?}")),
        )
        .unwrap();
        for args in [
            vec!["run", s.exp().to_str().unwrap()],
            vec!["report", s.exp().to_str().unwrap()],
            vec!["plan", s.exp().to_str().unwrap()],
        ] {
            let out = std::process::Command::new(env!("CARGO_BIN_EXE_otb"))
                .current_dir(s.dir.path())
                .arg("--store")
                .arg(s.store())
                .args(&args)
                .output()
                .unwrap();
            let line = one_error_line(&out);
            assert!(line.contains("name"), "{line}");
        }
        assert!(!s.store().exists(), "{name}: nothing may be written");
        assert!(!s.dir.path().join("outputs").exists(), "{name}");
        assert!(!Path::new("/tmp/otb-escaped-absolute").exists());
    }
}

/// `otb serve --store DIR` with a folder that is not a store is refused as `run`
/// refuses it, before a cache is created inside it; and a port in use is reported
/// alone, without a "serving" line before it.
#[test]
fn serve_refuses_a_folder_that_is_not_a_store_and_binds_before_announcing() {
    let dir = tempfile::tempdir().unwrap();
    let not_a_store = dir.path().join("photos");
    std::fs::create_dir(&not_a_store).unwrap();
    std::fs::write(not_a_store.join("holiday.jpg"), "x").unwrap();
    let out = common::otb()
        .arg("--store")
        .arg(&not_a_store)
        .args(["serve", "--model", "replay:m", "--addr", "127.0.0.1:9"])
        .output()
        .unwrap();
    one_error_line(&out);
    let names: Vec<_> = std::fs::read_dir(&not_a_store)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("holiday.jpg")]);

    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = common::otb()
        .arg("--store")
        .arg(dir.path().join("store"))
        .args(["serve", "--model", "replay:m", "--addr", &addr])
        .output()
        .unwrap();
    let line = one_error_line(&out);
    assert!(line.contains("cannot listen on"), "{line}");
}

/// Destinations are the user's input: a file where a folder is wanted, a path under
/// a file, or a folder that cannot be written into is one line and exit 2 before the
/// store is read (they were I/O errors, exit 1, after the work).
#[test]
fn destinations_that_cannot_be_written_are_the_users_error() {
    let s = Scratch::new("", MODELS);
    s.run();
    let file = s.dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under = file.join("sub");
    let exp = s.exp();
    let exp = exp.to_str().unwrap();
    for args in [
        vec!["report", exp, "--to", under.to_str().unwrap()],
        vec!["export", exp, "--sft", file.to_str().unwrap()],
        vec!["export", exp, "--sft", under.to_str().unwrap()],
        vec!["export", exp, "--to", under.to_str().unwrap()],
    ] {
        let line = one_error_line(&s.otb(&args));
        assert!(line.contains("a-file"), "{args:?}: {line}");
    }
}

/// A file the user names is checked by type and size before it is read:
/// `--prices /dev/zero` was read until memory ran out.
#[test]
fn a_device_named_as_a_file_is_refused_before_reading() {
    let s = Scratch::new("", MODELS);
    s.run();
    let exp = s.exp();
    let out = s.otb(&[
        "report",
        exp.to_str().unwrap(),
        "--prices",
        "/dev/zero",
        "--to",
        s.dir.path().join("rep").to_str().unwrap(),
    ]);
    let line = one_error_line(&out);
    assert!(line.contains("not a regular file"), "{line}");
    let out = s.otb(&["run", "/dev/zero"]);
    let line = one_error_line(&out);
    assert!(line.contains("not a regular file"), "{line}");
}

/// An editor that rewrites every tool it is shown with a description of about
/// 1 MB of distinct words (a diff of it against the old text is the worst case).
fn huge_editor(mut stream: std::net::TcpStream, _: std::sync::Arc<()>) {
    let Some(body) = common::read_request(&stream) else {
        return;
    };
    let req: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let prompt = req["messages"].to_string();
    let mut names: Vec<String> = prompt
        .split(|c: char| !c.is_alphanumeric() && c != '_')
        .filter(|w| w.starts_with("function_"))
        .map(str::to_string)
        .collect();
    names.sort();
    names.dedup();
    let huge: String = (0..150_000).map(|i| format!("w{i} ")).collect();
    // One tool per reply: a reply may hold at most 1 MiB.
    let text: String = names
        .iter()
        .take(1)
        .map(|n| format!("FUNCTION: {n}\nDESCRIPTION: {}\n", &huge[..1_000_000]))
        .collect();
    let reply = serde_json::json!({"id": "t", "object": "chat.completion", "model": "huge",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
            "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}});
    common::respond(&mut stream, "200 OK", &reply.to_string());
}

/// `--item-bytes` caps every model-written text of a report, the documentation
/// edits' word diffs too: a 1 MB description made a 5 MB page for 5 instances.
#[test]
fn a_report_caps_a_huge_description_in_its_word_diff() {
    let url = common::spawn_server(std::sync::Arc::new(()), huge_editor);
    let s = Scratch::new(
        "rounds = 1",
        "agent = \"scripted:schema\"\neditor = \"openai:huge\"",
    );
    let text = std::fs::read_to_string(s.exp()).unwrap();
    std::fs::write(
        s.exp(),
        text.replace("rounds = 3\n", "")
            .replace("[\"names\", \"names+params\"]", "[\"names\"]"),
    )
    .unwrap();
    let with_server = |args: &[&str]| {
        common::otb()
            .arg("--store")
            .arg(s.store())
            .args(args)
            .env("OTB_LLM_BASE_URL", &url)
            .env("OTB_LLM_API_KEY", "test")
            .output()
            .unwrap()
    };
    common::stdout_ok(&with_server(&["run", s.exp().to_str().unwrap()]));
    let to = s.dir.path().join("rep");
    common::stdout_ok(&with_server(&[
        "report",
        s.exp().to_str().unwrap(),
        "--to",
        to.to_str().unwrap(),
        "--item-bytes",
        "2048",
    ]));
    let page = std::fs::read_to_string(to.join("report.html")).unwrap();
    assert!(
        page.contains("w100 "),
        "the edit is in the report (its first 2048 bytes)"
    );
    assert!(!page.contains("w100000 "), "the description was not cut");
    assert!(page.len() < 1_000_000, "page of {} bytes", page.len());
}
