//! README's "Improve your own MCP server's documentation" runs as written (issue #57's
//! Acceptance: a section a new user follows in five minutes with a scripted model).
//!
//! The test takes the section's code blocks from README.md itself -- the shell lines
//! that make the example repository, `tasks.jsonl`, `my-tools.toml` and step 5's
//! commands -- and runs them with bash against the real `mcp-server-git` that
//! `scripts/setup-mcp.sh` installs into `tools/mcp/` (resource `mcp-servers`). Two
//! words are swapped: the example's folder (`/tmp/my-tools`) for a temporary one, and
//! `$PWD/target/release` for the folder of the `otb` under test. What the section says
//! the commands print (the run's summary line, the bill's calls) is read from its text
//! and must be what they print; a rerun runs nothing; step 5 lists the tools through
//! `otb mcp proxy` with the official Python client.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

const HEADING: &str = "## Improve your own MCP server's documentation";

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// README's section, from its heading to the next `## ` heading.
fn section() -> String {
    let readme = std::fs::read_to_string(root().join("README.md")).expect("read README.md");
    let start = readme
        .find(HEADING)
        .expect("README.md has the MCP walkthrough");
    let rest = &readme[start + HEADING.len()..];
    let end = rest.find("\n## ").unwrap_or(rest.len());
    rest[..end].to_string()
}

/// The section's fenced code blocks as (language, text), indentation removed.
fn blocks(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, usize, Vec<String>)> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if let Some((lang, at, mut lines)) = open.take() {
            if trimmed.starts_with("```") {
                out.push((lang, lines.join("\n") + "\n"));
            } else {
                lines.push(line.get(at..).unwrap_or(trimmed).to_string());
                open = Some((lang, at, lines));
            }
        } else if let Some(lang) = trimmed.strip_prefix("```") {
            open = Some((
                lang.trim().to_string(),
                line.len() - trimmed.len(),
                Vec::new(),
            ));
        }
    }
    assert!(open.is_none(), "a code block of the section is not closed");
    out
}

/// The text between the backquotes that follow `after` in the section (whitespace
/// folded, as the paragraph wraps).
fn quoted_after(text: &str, after: &str) -> String {
    let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let at = flat
        .find(after)
        .unwrap_or_else(|| panic!("the section says `{after}`"));
    let rest = &flat[at + after.len()..];
    let open = rest.find('`').expect("a quoted text") + 1;
    let close = rest[open..].find('`').expect("its closing backquote") + open;
    rest[open..close].to_string()
}

/// Whether `tools/mcp` holds mcp-server-git and the Python client (else skipping,
/// unless `OTB_REQUIRE` names `mcp-servers`).
fn tools() -> bool {
    let dir = root().join("tools/mcp");
    let needed = [dir.join("bin/mcp-server-git"), dir.join("git/bin/python")];
    if needed.iter().all(|p| p.is_file()) {
        return true;
    }
    testkit::skip(
        "mcp-servers",
        format!(
            "mcp-server-git or its Python are not installed in {} (run scripts/setup-mcp.sh)",
            dir.display()
        ),
    );
    false
}

/// The shell script the section amounts to, each step's output after a marker line.
fn script(sec: &str, dir: &Path) -> String {
    let bin = Path::new(env!("CARGO_BIN_EXE_otb"))
        .parent()
        .expect("otb's folder")
        .display()
        .to_string();
    let all = blocks(sec);
    let of = |lang: &str| -> Vec<String> {
        all.iter()
            .filter(|(l, _)| l == lang)
            .map(|(_, t)| {
                t.replace("/tmp/my-tools", &dir.display().to_string())
                    .replace("$PWD/target/release", &bin)
            })
            .collect()
    };
    let (sh, json, toml) = (of("sh"), of("json"), of("toml"));
    assert_eq!(
        (sh.len(), json.len(), toml.len()),
        (2, 1, 1),
        "the section has two shell blocks, the tasks and the experiment"
    );
    format!(
        "set -euo pipefail\nexec 2>&1\ncd '{root}'\n{setup}\
         cat > tasks.jsonl <<'OTB_EOF'\n{json}OTB_EOF\n\
         cat > my-tools.toml <<'OTB_EOF'\n{toml}OTB_EOF\n\
         echo '@@ run'\notb run my-tools.toml\n\
         echo '@@ rerun'\notb run my-tools.toml --quiet\n\
         echo '@@ table'\notb table mcp --experiment my-tools.toml\n\
         echo '@@ docs'\n{docs}",
        root = root().display(),
        setup = sh[0],
        json = json[0],
        toml = toml[0],
        docs = sh[1],
    )
}

/// The output of the step whose marker is `name`.
fn step<'a>(out: &'a str, name: &str) -> &'a str {
    let marker = format!("@@ {name}\n");
    let at = out
        .find(&marker)
        .unwrap_or_else(|| panic!("step {name} ran:\n{out}"))
        + marker.len();
    let rest = &out[at..];
    &rest[..rest.find("@@ ").unwrap_or(rest.len())]
}

#[test]
fn the_readme_mcp_walkthrough_runs_as_written_with_scripted_models() {
    if !tools() {
        return;
    }
    let sec = section();
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("my-tools");
    let script = script(&sec, &dir);
    let out = Command::new("bash")
        .arg("-c")
        .arg(&script)
        .env_remove("OTB_STORE")
        .env_remove("OTB_LLM_BASE_URL")
        .output()
        .expect("run bash");
    // `exec 2>&1`: the steps' messages in order, after their markers.
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "the walkthrough failed:\n{script}\n---\n{text}"
    );

    // Step 3: the summary line and the bill the section quotes.
    let run = step(&text, "run");
    let summary = quoted_after(&sec, "a rerun calls nothing) and ends");
    assert!(run.contains(&summary), "the run ends `{summary}`:\n{run}");
    // Step 4 bills the embedded model's run; its calls do not depend on the model, so
    // the scripted run's bill counts as many.
    let calls = sec
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .split("this grid's bill: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .expect("the section gives the grid's bill")
        .to_string();
    assert!(
        run.lines()
            .any(|l| l.starts_with("bill:") && l.contains(&calls)),
        "the bill counts {calls}:\n{run}"
    );
    assert!(
        dir.join("outputs/store").is_dir(),
        "the store is beside the experiment"
    );
    assert!(
        step(&text, "rerun").contains("0 ran"),
        "a rerun runs nothing:\n{}",
        step(&text, "rerun")
    );

    // The table has a row per method of the experiment.
    let table = step(&text, "table");
    for method in ["gold", "base", "toolobserver", "easytool"] {
        assert!(
            table.contains(&format!("| git:as-is | {method} |")),
            "{method} has a row:\n{table}"
        );
    }

    // Step 5: the learned list, and the tools through the proxy as a client sees them.
    let docs = step(&text, "docs");
    assert!(docs.contains("wrote 12 tools to tools.json"), "{docs}");
    let list: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("tools.json")).expect("tools.json"))
            .expect("tools.json is JSON");
    assert_eq!(list["_otb"]["cell"]["method"], "toolobserver", "{list}");
    // The scores before (Base) and after (ToolObserver) on the test tasks.
    for (when, node) in [
        ("after", "mcp-evaluate[git:as-is toolobserver test]"),
        ("before", "mcp-evaluate[git:as-is base test]"),
    ] {
        let s = &list["_otb"]["scores"][when];
        assert_eq!(s["node"], node, "{list}");
        assert!(s["value"].is_number() && s["lo"].is_number(), "{list}");
    }
    assert!(docs.contains("server: mcp-git"), "{docs}");
    assert!(docs.contains("12 tools:"), "{docs}");
    assert!(docs.contains("  git_log: "), "{docs}");

    // The run worked on a copy: the example repository is as the shell lines made it.
    let git = |args: &[&str]| -> String {
        let o = Command::new("git")
            .arg("-C")
            .arg(dir.join("repo"))
            .args(args)
            .output()
            .expect("run git");
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    assert_eq!(
        git(&["status", "--porcelain"]),
        "",
        "the repository is untouched"
    );
    assert_eq!(git(&["rev-list", "--count", "HEAD"]).trim(), "3");
}
