//! A server's own timeouts in an experiment (`[mcp.servers.NAME] connect_timeout_s`,
//! `call_timeout_s`): a slow machine, or a server that takes long to start, can give
//! it more time than the bounds' defaults (20 s to answer `initialize`, 60 s a call),
//! and a test can give it less. The test-made `hostile_mcp.py never-init` never
//! answers `initialize`: with `connect_timeout_s = 1` the run fails after a second
//! with one line naming the server and the bound, and publishes no server node.

mod common;

#[test]
fn a_servers_connect_timeout_bounds_its_handshake() {
    if !common::python3("mcp", "no python3 for the test-made MCP server") {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let store = dir.path().join("store");
    std::fs::write(
        dir.path().join("tasks.jsonl"),
        "{\"id\": \"l1\", \"server\": \"late\", \"question\": \"Which word?\", \"answer\": \"Skerry\", \"split\": \"test\"}\n",
    )
    .expect("write tasks");
    let exp = common::exp_file(
        dir.path(),
        &format!(
            "name = \"late\"\n[mcp]\ntasks = \"tasks.jsonl\"\nmethods = [\"gold\"]\n[mcp.servers.late]\ncommand = [\"python3\", \"{}\", \"never-init\"]\nconnect_timeout_s = 1\ncall_timeout_s = 5\n[models]\nagent = \"scripted:mcp-reader\"\n",
            common::fixture("hostile_mcp.py").display()
        ),
    );
    let out = common::otb_run(&store, &exp)
        .arg("--quiet")
        .output()
        .expect("run otb");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    let line = stderr
        .lines()
        .find(|l| l.starts_with("otb: error: "))
        .unwrap_or_else(|| panic!("an error line:\n{stderr}"));
    assert!(
        line.contains("`late`") && line.contains("did not answer `initialize` within 1 s"),
        "{line}"
    );
    let published = common::published(&store).unwrap_or_default();
    assert!(
        !published.iter().any(|k| k.starts_with("mcp-server/")),
        "a server node was published: {published:?}"
    );
    assert!(common::staging(&store).is_empty(), "staging left behind");
}
