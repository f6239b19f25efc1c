//! The chess and search environments attacked as a careless or hostile user would,
//! through `otb run`: UCI engines that hang (no `uciok`, no `readyok`, no `bestmove`)
//! or print garbage (an endless stream, one enormous line, an illegal move);
//! BrowseComp-Plus files with duplicate, empty, enormous or incomplete documents and
//! queries with a wrong canary or a 1 MB answer; models (a local OpenAI-compatible
//! server on 127.0.0.1) that send 1 MB queries, call unknown tools, repeat one call
//! every turn or answer with nothing; and runs killed with SIGKILL at many points.
//! Each ends with one clear error line (exit 2 for bad input before anything is
//! published, exit 1 for a broken engine, never a signal, a hang or a staging folder
//! left behind), or with a classified row and the run going on.

mod common;

use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `cmd` to its end, its output kept in files of `dir`; a run still going after
/// `secs` seconds is killed and fails the test (a hang is a failure, never a stuck
/// test).
fn bounded(mut cmd: Command, dir: &Path, secs: u64) -> Output {
    let out_path = dir.join(format!("stdout-{}", rand_tag()));
    let err_path = dir.join(format!("stderr-{}", rand_tag()));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .unwrap();
    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "otb still running after {secs} s:\n{}",
                std::fs::read_to_string(&err_path).unwrap_or_default()
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let out = Output {
        status,
        stdout: std::fs::read(&out_path).unwrap(),
        stderr: std::fs::read(&err_path).unwrap(),
    };
    let _ = std::fs::remove_file(out_path);
    let _ = std::fs::remove_file(err_path);
    out
}

/// A name no other call of this process uses.
fn rand_tag() -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    )
}

/// An executable shell script `name` in `dir` (a fake UCI engine).
fn script(dir: &Path, name: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// The entries of the store's `tmp/` (staging folders a failed or killed run leaves).
fn staging(store: &Path) -> Vec<String> {
    std::fs::read_dir(store.join("tmp"))
        .map(|r| {
            r.filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A positions row (`test_id` = `id`) of the start position.
fn position_line(id: &str) -> String {
    format!("{{\"fen\": \"rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -\", \"phase\": \"opening\", \"evaluation\": \"equal\", \"cp\": 0.0, \"mate\": null, \"depth\": 12, \"test_id\": \"{id}\"}}\n")
}

/// A fake UCI engine's script: answers `uci` and `isready`, then on `go` runs `on_go`
/// (shell); `$move` is a legal move of the position last set (`e2e4` for White from
/// the start position, `e7e5` for Black after any first move).
fn uci_engine(on_go: &str) -> String {
    format!(
        "#!/bin/sh\nmove=e2e4\nwhile read -r line; do\n  case \"$line\" in\n    uci) echo 'id name fake'; echo uciok ;;\n    isready) echo readyok ;;\n    \"position fen \"*\" b \"*) move=e7e5 ;;\n    \"position fen \"*) move=e2e4 ;;\n    go*) {on_go} ;;\n    quit) exit 0 ;;\n  esac\ndone\n"
    )
}

/// A fake engine that plays `$move` at once.
const PLAYS: &str = "echo 'info depth 1 score cp 0'; echo \"bestmove $move\"";

/// `otb run` of a 2-ply chess game (the agent's tool, then the opponent) from the
/// start position in `dir` with the engine `engine` (relative to `dir`); `extra` adds
/// `[chess]` keys, `models` is the `[models]` table.
fn chess_run(dir: &Path, engine: &str, extra: &str, models: &str, secs: u64) -> Output {
    std::fs::write(dir.join("train.jsonl"), position_line("a")).unwrap();
    std::fs::write(dir.join("test.jsonl"), position_line("b")).unwrap();
    let exp = dir.join("exp.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"c\"\n[chess]\ntool_sets = [\"strength_gradient\"]\nmethods = [\"base\"]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\nopponents = [1350]\nmovetime_ms = 10\nmax_plies = 2\nopponent_ratings = \"nominal\"\nconcurrency = 1\nengine = \"{engine}\"\n{extra}\n[models]\n{models}\n"
        ),
    )
    .unwrap();
    // Under a 4 GB address-space limit: an engine's endless output must not grow
    // otb's memory without bound (nor take the machine's).
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg("ulimit -v 4000000; exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_otb"))
        .arg("--store")
        .arg(dir.join("store"))
        .arg("run")
        .arg(&exp)
        .env_remove("OTB_STORE")
        .env_remove("OTB_CHESS_ENGINE")
        .env_remove("OTB_FAULT_PAUSE")
        .env_remove("OTB_LLM_BASE_URL");
    bounded(c, dir, secs)
}

/// The last stderr line of a run that failed because of its engine: `otb: error: `,
/// naming the engine and `what`, exit 1, never a signal, no staging folder left.
fn engine_failure(dir: &Path, out: &Output, engine: &str, what: &str) {
    use std::os::unix::process::ExitStatusExt;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.signal(),
        None,
        "{engine}: killed by a signal: {stderr}"
    );
    assert_eq!(out.status.code(), Some(1), "{engine}: {stderr}");
    let last = stderr.lines().last().unwrap_or("");
    assert!(
        last.starts_with("otb: error: ") && last.contains(engine) && last.contains(what),
        "{engine}: {stderr}"
    );
    assert!(
        last.len() < 1000,
        "{engine}: an error line of {} bytes",
        last.len()
    );
    assert!(
        stderr.len() < 4000,
        "{engine}: stderr of {} bytes",
        stderr.len()
    );
    assert_eq!(
        staging(&dir.join("store")),
        Vec::<String>::new(),
        "{engine}"
    );
}

/// Engines that hang (never `uciok`, never `readyok`, never `bestmove`) or print
/// garbage (an endless stream of lines, one enormous line, a move that is not legal):
/// with `engine_timeout_ms = 1000` each run ends within seconds with one line naming
/// the engine and what it failed to say (exit 1, no staging folder), and an engine
/// that hangs once is restarted and the game goes on. The cases run side by side.
#[test]
fn engines_that_hang_or_print_garbage_end_with_one_line_or_are_restarted() {
    let d = tempfile::tempdir().unwrap();
    let marker = d.path().join("hung-once");
    let cases: Vec<(&str, String, &str)> = vec![
        (
            "silent.sh",
            "#!/bin/sh\nwhile read -r line; do :; done\n".into(),
            "uciok",
        ),
        (
            "no_ready.sh",
            "#!/bin/sh\nwhile read -r line; do\n  case \"$line\" in uci) echo uciok ;; esac\ndone\n"
                .into(),
            "readyok",
        ),
        ("no_bestmove.sh", uci_engine(":"), "bestmove"),
        (
            "endless.sh",
            "#!/bin/sh\nexec yes 'garbage garbage garbage garbage'\n".into(),
            "uciok",
        ),
        (
            "one_huge_line.sh",
            uci_engine("head -c 3000000 /dev/zero | tr '\\0' x"),
            "bestmove",
        ),
        (
            "illegal.sh",
            uci_engine("echo 'bestmove e2e5'"),
            "bestmove e2e5",
        ),
        (
            "hangs_once.sh",
            uci_engine(&format!(
                "if [ -e '{m}' ]; then {PLAYS}; else : > '{m}'; fi",
                m = marker.display()
            )),
            "",
        ),
    ];
    std::thread::scope(|s| {
        for (name, text, what) in &cases {
            let dir = d.path().join(name.trim_end_matches(".sh"));
            std::fs::create_dir(&dir).unwrap();
            script(&dir, name, text);
            s.spawn(move || {
                let out = chess_run(
                    &dir,
                    &format!("./{name}"),
                    "engine_timeout_ms = 1000",
                    "agent = \"scripted:random\"",
                    60,
                );
                if what.is_empty() {
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    assert!(out.status.success(), "{name}: {stderr}");
                    assert_eq!(staging(&dir.join("store")), Vec::<String>::new());
                } else {
                    engine_failure(&dir, &out, name, what);
                }
            });
        }
    });
}
