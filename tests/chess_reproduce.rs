//! Chess runs reproduce: the same scripted chess grid run twice from empty stores
//! publishes the same entries, byte for byte, the second run beside a CPU hog (a
//! loaded machine). With the paper's time limit instead (`search = "movetime"`,
//! what every run did before `search`), most tables differ between two such runs. The grid exercises every weakened player of the default search
//! (`[chess] search = "nodes"`): the Elo tools (1200 below the engine's floor: random
//! moves and skill level 0; 1800; 2400), the phase specialists (strong in their phase,
//! random elsewhere), the Elo opponents of the test games and of exploration, and
//! the `calibrate` stage rating the opponents and the tools. `otb status` names the
//! search and says whether it reproduces; the paper's literal time limit (`search =
//! "movetime"`) is marked as not reproducible.

mod common;

use common::{chess_engine, otb};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// An opening to explore from; a middlegame and an endgame for the test games.
const FENS: [&str; 3] = [
    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -",
    "r4rk1/pp3ppp/2n5/8/8/2N5/PP3PPP/R4RK1 w - -",
    "8/3R2bk/6p1/1p3p1p/7P/3p4/5KP1/2r5 w - -",
];

fn position_line(id: &str, fen: &str) -> String {
    format!("{{\"fen\": \"{fen}\", \"phase\": \"opening\", \"evaluation\": \"equal\", \"cp\": 0.0, \"mate\": null, \"depth\": 12, \"test_id\": \"{id}\"}}\n")
}

/// The grid's folder: positions files and the experiment (`search` lines added).
fn grid(dir: &Path, search: &str) -> PathBuf {
    let train: String = FENS[..1]
        .iter()
        .enumerate()
        .map(|(i, f)| position_line(&format!("t{i}"), f))
        .collect();
    let test: String = FENS[1..]
        .iter()
        .enumerate()
        .map(|(i, f)| position_line(&format!("p{i}"), f))
        .collect();
    std::fs::write(dir.join("train.jsonl"), train).unwrap();
    std::fs::write(dir.join("test.jsonl"), test).unwrap();
    let exp = dir.join("exp.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"r\"\n[chess]\ntrain_file = \"train.jsonl\"\ntest_file = \"test.jsonl\"\n\
             methods = [\"base\", \"toolobserver\"]\nrounds = 1\nbatch_size = 2\n\
             opponents = [1200, 2400]\nmax_plies = 12\nconcurrency = 2\n\
             calibration_games = 2\ncalibration_plies = 12\ncalibrate_tools = true\n{search}\n\
             [models]\nagent = \"scripted:random\"\neditor = \"scripted:errors\"\n"
        ),
    )
    .unwrap();
    exp
}

/// Every table of every entry of a store: `<stage>/<key>/<table>.parquet` -> bytes.
fn entries(store: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    for stage in std::fs::read_dir(store).unwrap().map(Result::unwrap) {
        let name = stage.file_name().to_string_lossy().into_owned();
        // The store's own folders (`tmp`, `slots`, `cache`, ...) hold no entries.
        let own = ["FORMAT", ".lock", "tmp", "slots", "quarantine", "cache"];
        if own.contains(&name.as_str()) || !stage.path().is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(stage.path()).unwrap().map(Result::unwrap) {
            let key = entry.file_name().to_string_lossy().into_owned();
            let is_key = key.len() == 64 && key.bytes().all(|b| b.is_ascii_hexdigit());
            if !is_key {
                continue;
            }
            for file in std::fs::read_dir(entry.path()).unwrap().map(Result::unwrap) {
                let f = file.file_name().to_string_lossy().into_owned();
                if f.ends_with(".parquet") {
                    out.insert(
                        format!("{name}/{key}/{f}"),
                        std::fs::read(file.path()).unwrap(),
                    );
                }
            }
        }
    }
    out
}

/// A process that keeps a core busy until dropped.
struct Hog(std::process::Child);

impl Hog {
    fn start() -> Hog {
        Hog(std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap())
    }
}

impl Drop for Hog {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn run(store: &Path, exp: &Path) -> String {
    let out = otb()
        .arg("--store")
        .arg(store)
        .arg("run")
        .arg(exp)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stderr}");
    String::from_utf8_lossy(&out.stdout).into_owned() + &stderr
}

#[test]
fn a_chess_grid_publishes_the_same_entries_twice_even_on_a_loaded_machine() {
    let Some(_) = chess_engine() else { return };
    let d = tempfile::tempdir().unwrap();
    // A small node budget: the searches stop on it (not on their depth) in most
    // positions, which is the case the clock decided before.
    let exp = grid(d.path(), "nodes = 20000");
    let (a, b) = (d.path().join("a"), d.path().join("b"));
    let said = run(&a, &exp);
    assert!(
        said.contains("chess.search = nodes (at most 20000 nodes per engine move"),
        "{said}"
    );
    {
        let _hog = Hog::start();
        run(&b, &exp);
    }
    let (first, second) = (entries(&a), entries(&b));
    for stage in [
        "calibrate",
        "chess-explore",
        "chess-evaluate",
        "bootstrap-elo",
    ] {
        assert!(
            first.keys().any(|k| k.starts_with(&format!("{stage}/"))),
            "no {stage} entry: {:?}",
            first.keys().collect::<Vec<_>>()
        );
    }
    // A table of one run only (another key) differs too.
    let all: std::collections::BTreeSet<&String> = first.keys().chain(second.keys()).collect();
    let differ: Vec<&&String> = all
        .iter()
        .filter(|k| first.get(**k) != second.get(**k))
        .collect();
    assert!(
        differ.is_empty(),
        "{} of {} tables (first run {}, second {}) differ between the two runs: {differ:?}",
        differ.len(),
        all.len(),
        first.len(),
        second.len()
    );
    // `otb status` says the run reproduces; the paper's time limit says it does not.
    let status = |exp: &Path| {
        let out = otb()
            .arg("--store")
            .arg(&a)
            .arg("status")
            .arg(exp)
            .output()
            .unwrap();
        assert!(out.status.success());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let s = status(&exp);
    assert!(
        s.contains("chess.search = nodes") && !s.contains("NOT reproducible"),
        "{s}"
    );
    let timed = d.path().join("timed");
    std::fs::create_dir_all(&timed).unwrap();
    let s = status(&grid(&timed, "search = \"movetime\"\nmovetime_ms = 500"));
    assert!(
        s.contains("chess.search = movetime (500 ms per engine move")
            && s.contains("NOT reproducible"),
        "{s}"
    );
}
