//! The fourth benchmark end to end (issue #57 section 3, Acceptance): `otb run` of
//! `experiments/mcp-scripted.toml` (only gold, base and toolobserver, the sample
//! tasks) on freshly generated fixtures, through the four real MCP servers that
//! `scripts/setup-mcp.sh` installs into `tools/mcp/bin` (resource `mcp-servers`):
//!
//! - `scripted:mcp-oracle`, which makes each task's oracle calls and answers only
//!   what the servers' results hold, scores 100% with gold on every server;
//! - `scripted:mcp-reader`, which picks tools by their descriptions, scores higher
//!   with gold (the servers' own descriptions) than with base (names only) on every
//!   server;
//! - a rerun runs no stage and starts no server: every server program is reached
//!   through a wrapper on `PATH` that counts its starts, and the count does not move
//!   (nor do the servers' logs under the store's `cache/mcp/logs`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The shipped servers' programs, by the experiment's server names.
const PROGRAMS: [(&str, &str); 4] = [
    ("git", "mcp-server-git"),
    ("sqlite", "mcp-server-sqlite"),
    ("filesystem", "mcp-server-filesystem"),
    ("memory", "mcp-server-memory"),
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `tools/mcp/bin`, if it holds the four programs (else skipping, unless
/// `OTB_REQUIRE` names `mcp-servers`).
fn servers_bin() -> Option<PathBuf> {
    let bin = root().join("tools/mcp/bin");
    let missing: Vec<&str> = PROGRAMS
        .iter()
        .map(|(_, p)| *p)
        .filter(|p| !bin.join(p).is_file())
        .collect();
    if missing.is_empty() {
        return Some(bin);
    }
    testkit::skip(
        "mcp-servers",
        format!(
            "the MCP servers are not installed in {} (missing {}; run scripts/setup-mcp.sh)",
            bin.display(),
            missing.join(", ")
        ),
    );
    None
}

/// `otb args` with `PATH` = `path`: its output, which must say it succeeded.
fn otb(path: &str, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_otb"))
        .args(args)
        .env("PATH", path)
        .output()
        .expect("run otb");
    assert!(
        out.status.success(),
        "otb {args:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// The text of both of an output's streams.
fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// The fields of one CSV line (quoted fields may hold commas).
fn fields(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().expect("a field").push(c),
        }
    }
    out
}

/// `(server, method) -> accuracy %` of `otb table mcp --format csv`.
fn accuracy(csv: &str) -> BTreeMap<(String, String), f64> {
    let mut lines = csv.lines().filter(|l| !l.trim().is_empty());
    let head = fields(lines.next().expect("a header"));
    let col = |name: &str| {
        head.iter()
            .position(|h| h == name)
            .unwrap_or_else(|| panic!("no column {name} in {head:?}"))
    };
    let (set, method, acc) = (col("Tool set"), col("Method"), col("Accuracy %"));
    lines
        .map(|l| {
            let f = fields(l);
            let server = f[set].split(':').next().unwrap_or("").to_string();
            let a: f64 = f[acc]
                .parse()
                .unwrap_or_else(|_| panic!("accuracy {:?} in {l}", f[acc]));
            ((server, f[method].clone()), a)
        })
        .collect()
}

/// The total size of the files under `dir` (0 when absent).
fn bytes_under(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

#[test]
fn the_oracle_scores_all_the_reader_prefers_gold_and_a_rerun_starts_nothing() {
    let Some(bin) = servers_bin() else { return };
    let t0 = std::time::Instant::now();
    let d = tempfile::tempdir().expect("tempdir");
    let dir = d.path();

    // Each server program behind a wrapper that counts its starts.
    let starts = dir.join("starts.log");
    let wrap = dir.join("wrap");
    std::fs::create_dir(&wrap).expect("mkdir");
    for (_, p) in PROGRAMS {
        let w = wrap.join(p);
        std::fs::write(
            &w,
            format!(
                "#!/bin/sh\necho {p} >> '{}'\nexec '{}' \"$@\"\n",
                starts.display(),
                bin.join(p).display()
            ),
        )
        .expect("write wrapper");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&w, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    let path = format!(
        "{}:{}",
        wrap.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let count = || {
        std::fs::read_to_string(&starts)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };

    // The fixtures beside the experiment's copies, as `mcp-fixtures/`.
    let fixtures = dir.join("mcp-fixtures");
    otb(
        &path,
        &[
            "mcp",
            "fixtures",
            "--out",
            fixtures.to_str().expect("utf-8"),
        ],
    );
    let shipped = std::fs::read_to_string(root().join("experiments/mcp-scripted.toml"))
        .expect("experiments/mcp-scripted.toml");
    assert!(
        shipped.contains("agent = \"scripted:mcp-reader\""),
        "the shipped scripted experiment plays the reader"
    );
    let experiment = |agent: &str| -> PathBuf {
        let text: String = shipped
            .lines()
            .map(|l| {
                if l.starts_with("methods = ") {
                    "methods = [\"gold\", \"base\", \"toolobserver\"]".to_string()
                } else if l.starts_with("agent = ") {
                    format!("agent = \"scripted:{agent}\"")
                } else {
                    l.to_string()
                }
            })
            .map(|l| l + "\n")
            .collect();
        let p = dir.join(format!("{agent}.toml"));
        std::fs::write(&p, text).expect("write experiment");
        p
    };
    let store = dir.join("store");
    let store = store.to_str().expect("utf-8");
    let table = |exp: &Path| {
        let o = otb(
            &path,
            &[
                "--store",
                store,
                "table",
                "mcp",
                "--format",
                "csv",
                "--experiment",
                exp.to_str().expect("utf-8"),
            ],
        );
        let csv = String::from_utf8_lossy(&o.stdout).into_owned();
        (accuracy(&csv), csv)
    };

    // The oracle: 100% with gold on every server, through the real servers.
    let oracle = experiment("mcp-oracle");
    let first = otb(
        &path,
        &["--store", store, "run", oracle.to_str().expect("utf-8")],
    );
    assert!(count() >= PROGRAMS.len(), "the run started the servers");
    // The servers listed their tools before the bill: it counts the grid's calls.
    let said = text(&first);
    let bill = said
        .lines()
        .find(|l| l.starts_with("bill: "))
        .unwrap_or_else(|| panic!("no bill:\n{said}"));
    assert!(
        !bill.contains(" 0 model calls") && bill.contains(" model calls"),
        "{bill}"
    );
    let (acc, csv) = table(&oracle);
    for (server, _) in PROGRAMS {
        let a = acc.get(&(server.to_string(), "gold".to_string()));
        assert_eq!(a, Some(&100.0), "the oracle with gold on {server}:\n{csv}");
    }

    // The reader: gold beats base on every server.
    let reader = experiment("mcp-reader");
    otb(
        &path,
        &["--store", store, "run", reader.to_str().expect("utf-8")],
    );
    let (acc, csv) = table(&reader);
    for (server, _) in PROGRAMS {
        let get = |m: &str| {
            *acc.get(&(server.to_string(), m.to_string()))
                .unwrap_or_else(|| panic!("no {server} {m} row:\n{csv}"))
        };
        assert!(
            get("gold") > get("base"),
            "the reader on {server}: gold {} <= base {}:\n{csv}",
            get("gold"),
            get("base")
        );
    }

    // A rerun: no stage runs, no server starts, the servers' logs do not grow.
    let logs = PathBuf::from(store).join("cache/mcp/logs");
    let (started, logged) = (count(), bytes_under(&logs));
    assert!(logged > 0, "the servers' logs are under {}", logs.display());
    let again = otb(
        &path,
        &["--store", store, "run", reader.to_str().expect("utf-8")],
    );
    let said = text(&again);
    assert!(said.contains(" 0 ran,"), "the rerun ran stages:\n{said}");
    assert_eq!(count(), started, "the rerun started a server");
    assert_eq!(
        bytes_under(&logs),
        logged,
        "the rerun wrote to the servers' logs"
    );
    eprintln!("mcp bench end to end: {:.1}s", t0.elapsed().as_secs_f64());
}
