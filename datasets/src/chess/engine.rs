//! A pool of UCI engine processes (Stockfish by default), driven over tokio.
//!
//! Each process runs with `Threads=1` and a small hash; before every search
//! the pool sends `ucinewgame` (which clears the hash) and waits for
//! `readyok`, so that a depth-limited search gives the same answer whatever
//! the engine did before. Searches limited by depth or by nodes (with
//! `Threads=1`) are reproducible; searches limited by time or by strength
//! (`UCI_LimitStrength`, `Skill Level`) are not: their result depends on the
//! clock, and Stockfish seeds the random choice of its weakened play from the
//! time. A weakened move that reproduces is chosen by the caller from a
//! MultiPV search's lines ([`SearchRequest::multipv`], [`SearchOutcome::lines`]:
//! see [`super::strength`]).
//!
//! A process that dies, stops answering or says something that is not UCI is
//! killed, restarted, and the search retried ([`EngineConfig::retries`] times);
//! so is one that fails while it starts. Every wait for an answer is bounded: in
//! time (the handshake's `uciok` and `readyok` and a timed search's `bestmove`
//! by [`EngineConfig::answer_timeout_ms`], a depth- or node-limited search by
//! [`EngineConfig::search_timeout_ms`]) and in size (a line of at most
//! [`MAX_LINE_BYTES`], at most [`MAX_ANSWER_BYTES`] read while waiting), so an
//! engine that hangs or prints garbage forever costs a few seconds and bounded
//! memory. A `bestmove` that is not a legal move of the position searched is a
//! protocol error too. A write to a dead process's input fails with `EPIPE`
//! (the caller must leave SIGPIPE ignored, Rust's default, or the write ends
//! the whole program instead). A missing binary is [`EngineError::NotFound`].
//!
//! Scores: UCI scores are from the side to move; [`Eval`] turns them into
//! White's view. A mate in `n` **moves** (UCI counts full moves) is
//! `+-(32000 - n)` centipawns (`-32000` for the side that is mated), as
//! python-chess's `Score.score(mate_score=32000)` computes it.
//!
//! [`EnginePool`] is the async pool; [`BlockingPool`] owns a tokio runtime and
//! offers the same operations to synchronous callers (the stages).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use shakmaty::{Chess, Position};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::Semaphore;

use super::rules::{self, Side};

/// Environment variable naming the UCI engine binary.
pub const ENGINE_ENV: &str = "OTB_CHESS_ENGINE";

/// Centipawn value of a mate (a mate in `n` moves is `MATE_CP - n`).
pub const MATE_CP: i32 = 32000;

/// The longest line an engine may write (a UCI line is at most a few KiB: a
/// principal variation of a hundred moves); a longer one is a protocol error.
pub const MAX_LINE_BYTES: usize = 64 * 1024;

/// The most an engine may write while one answer is awaited (a depth-20 search
/// writes a few KiB); more is a protocol error.
pub const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// Engine errors.
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// No engine binary was found.
    #[error("no UCI chess engine found (tried {}); install Debian's `stockfish` package or set {ENGINE_ENV}", display_paths(.tried))]
    NotFound {
        /// The places looked at, in order.
        tried: Vec<PathBuf>,
    },
    /// The binary could not be started.
    #[error("starting {path}: {source}")]
    Spawn {
        /// The binary.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The process died, closed its pipes or failed to answer in time.
    #[error("engine {path}: {detail}")]
    Died {
        /// The binary.
        path: PathBuf,
        /// What happened.
        detail: String,
    },
    /// The engine wrote more than a UCI answer can be (see [`MAX_LINE_BYTES`]
    /// and [`MAX_ANSWER_BYTES`]).
    #[error("engine {path}: {detail}")]
    Garbage {
        /// The binary.
        path: PathBuf,
        /// What it wrote.
        detail: String,
    },
    /// The engine said something that is not valid UCI here (a `bestmove`
    /// that is not a legal move of the position included).
    #[error("engine {path}: unexpected reply {:?}", crate::quote::clip(line))]
    Protocol {
        /// The binary.
        path: PathBuf,
        /// The line.
        line: String,
    },
    /// A strength the engine does not offer (e.g. `UCI_Elo` below its floor).
    #[error("engine {path}: {detail}")]
    Unsupported {
        /// The binary.
        path: PathBuf,
        /// What is not supported.
        detail: String,
    },
    /// The position is not a legal chess position.
    #[error(transparent)]
    Position(Box<super::ChessError>),
    /// The tokio runtime of the blocking facade could not be built.
    #[error("building the engine runtime: {0}")]
    Runtime(std::io::Error),
}

impl From<super::ChessError> for EngineError {
    fn from(e: super::ChessError) -> Self {
        EngineError::Position(Box::new(e))
    }
}

fn display_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

impl EngineError {
    /// Errors after which a fresh process may succeed.
    fn is_process_failure(&self) -> bool {
        matches!(
            self,
            EngineError::Died { .. } | EngineError::Garbage { .. } | EngineError::Protocol { .. }
        )
    }
}

/// How the pool finds and runs its engines.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct EngineConfig {
    /// The engine binary; `None`: `$OTB_CHESS_ENGINE`, else `stockfish` on
    /// `PATH`, else `/usr/games/stockfish`.
    pub binary: Option<PathBuf>,
    /// Number of processes; 0 means one per core.
    pub processes: usize,
    /// `Hash` in MiB.
    pub hash_mb: u32,
    /// `Threads` per process.
    pub threads: u32,
    /// How long a depth- or node-limited search may take before the process
    /// is considered hung (milliseconds).
    pub search_timeout_ms: u64,
    /// How long an engine may take to answer beyond what it was asked
    /// (milliseconds): its handshake (`uciok`, `readyok`), and a timed search's
    /// `bestmove` after its `movetime`.
    pub answer_timeout_ms: u64,
    /// How often a search is retried on a fresh process after the old one died.
    pub retries: u32,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            binary: None,
            processes: 0,
            hash_mb: 16,
            threads: 1,
            search_timeout_ms: 120_000,
            answer_timeout_ms: 10_000,
            retries: 2,
        }
    }
}

impl EngineConfig {
    /// The number of processes this configuration runs.
    pub fn process_count(&self) -> usize {
        if self.processes > 0 {
            self.processes
        } else {
            std::thread::available_parallelism().map_or(1, |n| n.get())
        }
    }
}

/// Finds the engine binary: `explicit`, else `$OTB_CHESS_ENGINE`, else
/// `stockfish` on `PATH`, else `/usr/games/stockfish`.
pub fn find_engine(explicit: Option<&Path>) -> Result<PathBuf, EngineError> {
    let mut tried = Vec::new();
    let env = std::env::var_os(ENGINE_ENV).filter(|v| !v.is_empty());
    let named = explicit
        .map(Path::to_path_buf)
        .or_else(|| env.map(PathBuf::from));
    if let Some(p) = named {
        // A bare name is looked up on PATH; a path is taken as is.
        if p.components().count() == 1 {
            if let Some(found) = on_path(&p, &mut tried) {
                return Ok(found);
            }
        } else {
            if p.is_file() {
                return Ok(p);
            }
            tried.push(p);
        }
        return Err(EngineError::NotFound { tried });
    }
    if let Some(found) = on_path(Path::new("stockfish"), &mut tried) {
        return Ok(found);
    }
    let games = PathBuf::from("/usr/games/stockfish");
    if games.is_file() {
        return Ok(games);
    }
    tried.push(games);
    Err(EngineError::NotFound { tried })
}

fn on_path(name: &Path, tried: &mut Vec<PathBuf>) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(name);
        if candidate.is_file() {
            return Some(candidate);
        }
        tried.push(candidate);
    }
    None
}

/// How long a search runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// `go depth N`.
    Depth(u32),
    /// `go movetime MS`.
    MovetimeMs(u64),
    /// `go nodes N`.
    Nodes(u64),
    /// `go depth D nodes N`: whichever is reached first.
    DepthNodes {
        /// The depth.
        depth: u32,
        /// The node budget.
        nodes: u64,
    },
}

/// Engine-side strength options for one search.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct EngineStrength {
    /// `UCI_LimitStrength=true` and this `UCI_Elo`; `None`: full strength.
    pub uci_elo: Option<u32>,
    /// `Skill Level` (0-20 in Stockfish); `None`: the maximum.
    pub skill_level: Option<u32>,
}

/// One search request.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SearchRequest {
    /// The position (FEN with or without counters).
    pub fen: String,
    /// The search limit.
    pub limit: Limit,
    /// The strength options.
    pub strength: EngineStrength,
    /// `MultiPV`: how many best lines the engine reports (0 and 1: one).
    #[serde(default)]
    pub multipv: u32,
}

/// A UCI score from the side to move's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Score {
    /// Centipawns.
    Cp(i32),
    /// Mate in this many moves (negative: being mated; 0: mated now).
    Mate(i32),
}

impl Score {
    /// Centipawns with mates as `+-(32000 - n)`; `Mate(0)` is `-32000`.
    pub fn centipawns(self) -> i32 {
        match self {
            Score::Cp(cp) => cp,
            Score::Mate(n) if n > 0 => MATE_CP - n,
            Score::Mate(n) => -MATE_CP - n,
        }
    }

    /// The same score from the other side's view.
    pub fn negate(self) -> Score {
        match self {
            Score::Cp(cp) => Score::Cp(-cp),
            Score::Mate(0) => Score::Mate(0),
            Score::Mate(n) => Score::Mate(-n),
        }
    }
}

/// The result of a search.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SearchOutcome {
    /// The engine's move in UCI notation; `None` when there is no legal move.
    pub best_move: Option<String>,
    /// The last reported score (side to move's view), if any.
    pub score: Option<Score>,
    /// The depth of that score.
    pub depth: u32,
    /// With [`SearchRequest::multipv`] above 1: the last reported line of each
    /// `multipv` index, best first (empty when the engine reported none).
    #[serde(default)]
    pub lines: Vec<PvLine>,
}

/// One line of a MultiPV search, as last reported.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PvLine {
    /// Its score (side to move's view).
    pub score: Score,
    /// Its first move (UCI).
    pub first_move: String,
    /// The depth it was reported at.
    pub depth: u32,
}

/// An evaluation from White's view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Eval {
    /// Centipawns (`None` for a mate).
    pub cp: Option<i32>,
    /// Mate in this many moves, positive when White mates (`None` otherwise).
    /// A position where White is already mated has `Some(0)` with
    /// [`Eval::white_cp`] `-32000`; Black mated: `Some(0)`, `+32000`.
    pub mate: Option<i32>,
    /// Centipawns with mates as `+-(32000 - n)`.
    pub white_cp: i32,
    /// Search depth reached.
    pub depth: u32,
}

impl Eval {
    /// Converts a side-to-move score.
    pub fn from_score(score: Score, to_move: Side, depth: u32) -> Eval {
        let white = match to_move {
            Side::White => score,
            Side::Black => score.negate(),
        };
        let mut white_cp = white.centipawns();
        if let (Score::Mate(0), Side::Black) = (score, to_move) {
            white_cp = MATE_CP;
        }
        match white {
            Score::Cp(cp) => Eval {
                cp: Some(cp),
                mate: None,
                white_cp,
                depth,
            },
            Score::Mate(n) => Eval {
                cp: None,
                mate: Some(n),
                white_cp,
                depth,
            },
        }
    }
}

/// One engine process.
struct Engine {
    path: PathBuf,
    child: Child,
    stdin: ChildStdin,
    out: BufReader<ChildStdout>,
    elo_range: Option<(u32, u32)>,
    /// The `MultiPV` the process was last told (1, the UCI default, at start).
    multipv: u32,
}

impl Engine {
    async fn spawn(path: &Path, cfg: &EngineConfig) -> Result<Engine, EngineError> {
        let mut child = Command::new(path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|source| {
                if source.kind() == std::io::ErrorKind::NotFound {
                    EngineError::NotFound {
                        tried: vec![path.to_owned()],
                    }
                } else {
                    EngineError::Spawn {
                        path: path.to_owned(),
                        source,
                    }
                }
            })?;
        let died = |detail: &str| EngineError::Died {
            path: path.to_owned(),
            detail: detail.into(),
        };
        let stdin = child.stdin.take().ok_or_else(|| died("no stdin pipe"))?;
        let stdout = child.stdout.take().ok_or_else(|| died("no stdout pipe"))?;
        let mut engine = Engine {
            path: path.to_owned(),
            child,
            stdin,
            out: BufReader::new(stdout),
            elo_range: None,
            multipv: 1,
        };
        let timeout = Duration::from_millis(cfg.answer_timeout_ms.max(1));
        engine.send("uci").await?;
        let lines = engine
            .read_until("uciok", |l| l == "uciok", timeout)
            .await?;
        engine.elo_range = lines.iter().find_map(|l| parse_spin_range(l, "UCI_Elo"));
        engine
            .send(&format!(
                "setoption name Threads value {}",
                cfg.threads.max(1)
            ))
            .await?;
        engine
            .send(&format!("setoption name Hash value {}", cfg.hash_mb.max(1)))
            .await?;
        engine.send("isready").await?;
        engine
            .read_until("readyok", |l| l == "readyok", timeout)
            .await?;
        Ok(engine)
    }

    fn died(&self, detail: impl Into<String>) -> EngineError {
        EngineError::Died {
            path: self.path.clone(),
            detail: detail.into(),
        }
    }

    async fn send(&mut self, line: &str) -> Result<(), EngineError> {
        let mut buf = Vec::with_capacity(line.len() + 1);
        buf.extend_from_slice(line.as_bytes());
        buf.push(b'\n');
        let r = match self.stdin.write_all(&buf).await {
            Ok(()) => self.stdin.flush().await,
            Err(e) => Err(e),
        };
        r.map_err(|e| match e.kind() {
            std::io::ErrorKind::BrokenPipe => self.died("the engine exited (its input is closed)"),
            _ => self.died(format!("writing to the engine: {e}")),
        })
    }

    /// Reads lines until `done` accepts one (`want` names it in errors);
    /// returns them all. Bounded in time (`timeout`) and in size (a line of at
    /// most [`MAX_LINE_BYTES`], at most [`MAX_ANSWER_BYTES`] in all); bytes that
    /// are not UTF-8 are read as U+FFFD.
    async fn read_until(
        &mut self,
        want: &str,
        done: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> Result<Vec<String>, EngineError> {
        enum Failed {
            Died(String),
            Garbage(String),
        }
        let mut seen = Vec::new();
        let out = &mut self.out;
        let read = async {
            let mut buf = Vec::new();
            let mut total = 0usize;
            loop {
                buf.clear();
                let n = (&mut *out)
                    .take(MAX_LINE_BYTES as u64 + 1)
                    .read_until(b'\n', &mut buf)
                    .await
                    .map_err(|e| Failed::Died(format!("reading from the engine: {e}")))?;
                if n == 0 {
                    return Err(Failed::Died(
                        "the engine closed its output (did it exit?)".into(),
                    ));
                }
                if n > MAX_LINE_BYTES && buf.last() != Some(&b'\n') {
                    return Err(Failed::Garbage(format!(
                        "a line of more than {MAX_LINE_BYTES} bytes while awaiting `{want}`"
                    )));
                }
                total += n;
                if total > MAX_ANSWER_BYTES {
                    return Err(Failed::Garbage(format!(
                        "more than {MAX_ANSWER_BYTES} bytes of output without `{want}`"
                    )));
                }
                let line = String::from_utf8_lossy(&buf).trim().to_owned();
                let stop = done(&line);
                seen.push(line);
                if stop {
                    return Ok(());
                }
            }
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(Ok(())) => Ok(seen),
            Ok(Err(Failed::Died(detail))) => Err(self.died(detail)),
            Ok(Err(Failed::Garbage(detail))) => Err(EngineError::Garbage {
                path: self.path.clone(),
                detail,
            }),
            Err(_) => Err(self.died(format!("no `{want}` within {} ms", timeout.as_millis()))),
        }
    }

    /// One search of `req`, whose position is `pos`.
    async fn search(
        &mut self,
        req: &SearchRequest,
        pos: &Chess,
        cfg: &EngineConfig,
    ) -> Result<SearchOutcome, EngineError> {
        let s = req.strength;
        match s.uci_elo {
            Some(elo) => {
                if let Some((lo, hi)) = self.elo_range {
                    if elo < lo || elo > hi {
                        return Err(EngineError::Unsupported {
                            path: self.path.clone(),
                            detail: format!("UCI_Elo {elo} is outside the engine's range {lo}..={hi}; use a weakening below the floor"),
                        });
                    }
                }
                self.send("setoption name UCI_LimitStrength value true")
                    .await?;
                self.send(&format!("setoption name UCI_Elo value {elo}"))
                    .await?;
            }
            None => {
                self.send("setoption name UCI_LimitStrength value false")
                    .await?
            }
        }
        self.send(&format!(
            "setoption name Skill Level value {}",
            s.skill_level.unwrap_or(20)
        ))
        .await?;
        // Told only when it changes: an engine never asked for lines never hears of it.
        let multipv = req.multipv.max(1);
        if multipv != self.multipv {
            self.send(&format!("setoption name MultiPV value {multipv}"))
                .await?;
            self.multipv = multipv;
        }
        let ready_timeout = Duration::from_millis(cfg.answer_timeout_ms.max(1));
        self.send("ucinewgame").await?;
        self.send("isready").await?;
        self.read_until("readyok", |l| l == "readyok", ready_timeout)
            .await?;
        self.send(&format!("position fen {}", req.fen.trim()))
            .await?;
        let (go, timeout) = match req.limit {
            Limit::Depth(d) => (format!("go depth {d}"), cfg.search_timeout_ms),
            Limit::Nodes(n) => (format!("go nodes {n}"), cfg.search_timeout_ms),
            Limit::DepthNodes { depth, nodes } => (
                format!("go depth {depth} nodes {nodes}"),
                cfg.search_timeout_ms,
            ),
            Limit::MovetimeMs(ms) => (
                format!("go movetime {ms}"),
                ms.saturating_add(cfg.answer_timeout_ms),
            ),
        };
        self.send(&go).await?;
        let lines = self
            .read_until(
                "bestmove",
                |l| l.starts_with("bestmove"),
                Duration::from_millis(timeout),
            )
            .await?;
        let garbage = || EngineError::Protocol {
            path: self.path.clone(),
            line: lines.last().cloned().unwrap_or_default(),
        };
        let out = parse_search(&lines).ok_or_else(garbage)?;
        // A move that is not legal here, or none where there are moves, is garbage;
        // so is a reported line that does not start with a legal move.
        let legal = match &out.best_move {
            Some(m) => rules::parse_uci(pos, m).is_ok(),
            None => pos.legal_moves().is_empty(),
        } && out
            .lines
            .iter()
            .all(|l| rules::parse_uci(pos, &l.first_move).is_ok());
        if !legal {
            return Err(garbage());
        }
        Ok(out)
    }
}

/// `option name <name> type spin default d min a max b` -> `(a, b)`.
fn parse_spin_range(line: &str, name: &str) -> Option<(u32, u32)> {
    let rest = line.strip_prefix("option name ")?.strip_prefix(name)?;
    let rest = rest.strip_prefix(" type spin")?;
    let words: Vec<&str> = rest.split_whitespace().collect();
    let value = |key: &str| {
        words
            .iter()
            .position(|w| *w == key)
            .and_then(|i| words.get(i + 1))
            .and_then(|v| v.parse().ok())
    };
    Some((value("min")?, value("max")?))
}

/// The outcome from a search's output: the last unbounded score of the main
/// line and the `bestmove`.
fn parse_search(lines: &[String]) -> Option<SearchOutcome> {
    let last = lines.last()?;
    let mut words = last.split_whitespace();
    if words.next()? != "bestmove" {
        return None;
    }
    let best = words.next()?;
    let best_move = (best != "(none)" && best != "0000").then(|| best.to_owned());
    let mut score = None;
    let mut depth = 0;
    let mut pv: Vec<Option<PvLine>> = Vec::new();
    for line in lines {
        if let Some((s, d)) = parse_info_score(line) {
            score = Some(s);
            depth = d;
        }
        if let Some((k, l)) = parse_pv_line(line) {
            if pv.len() < k {
                pv.resize(k, None);
            }
            pv[k - 1] = Some(l);
        }
    }
    // Lines 1..n as reported; a gap (never reported) ends the list.
    let lines = pv.into_iter().map_while(|l| l).collect();
    Some(SearchOutcome {
        best_move,
        score,
        depth,
        lines,
    })
}

/// The most lines a MultiPV answer is read for (Stockfish allows 500).
const MAX_PV_LINES: usize = 500;

/// `info depth D ... multipv K score cp X|mate N ... pv M ...` -> `(K, line)`,
/// bounds included (the last report of each line is what counts).
fn parse_pv_line(line: &str) -> Option<(usize, PvLine)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.first() != Some(&"info") {
        return None;
    }
    let after = |key: &str| {
        words
            .iter()
            .position(|w| *w == key)
            .and_then(|i| words.get(i + 1))
    };
    let k: usize = after("multipv")?.parse().ok()?;
    if k == 0 || k > MAX_PV_LINES {
        return None;
    }
    let depth = after("depth")?.parse().ok()?;
    let i = words.iter().position(|w| *w == "score")?;
    let value: i32 = words.get(i + 2)?.parse().ok()?;
    let score = match *words.get(i + 1)? {
        "cp" => Score::Cp(value),
        "mate" => Score::Mate(value),
        _ => return None,
    };
    let first_move = after("pv")?.to_string();
    Some((
        k,
        PvLine {
            score,
            first_move,
            depth,
        },
    ))
}

/// `info depth D ... [multipv 1] score cp X|mate N` without a bound.
fn parse_info_score(line: &str) -> Option<(Score, u32)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    if words.first() != Some(&"info") {
        return None;
    }
    let after = |key: &str| words.iter().position(|w| *w == key).map(|i| i + 1);
    if let Some(i) = after("multipv") {
        if words.get(i) != Some(&"1") {
            return None;
        }
    }
    if words.contains(&"lowerbound") || words.contains(&"upperbound") {
        return None;
    }
    let depth = after("depth")
        .and_then(|i| words.get(i))
        .and_then(|v| v.parse().ok())?;
    let i = after("score")?;
    let value: i32 = words.get(i + 1)?.parse().ok()?;
    let score = match *words.get(i)? {
        "cp" => Score::Cp(value),
        "mate" => Score::Mate(value),
        _ => return None,
    };
    Some((score, depth))
}

/// A pool of engine processes (async). Processes start on first use.
pub struct EnginePool {
    path: PathBuf,
    cfg: EngineConfig,
    idle: Mutex<Vec<Engine>>,
    permits: Semaphore,
    restarts: AtomicU64,
    searches: AtomicU64,
}

impl EnginePool {
    /// A pool for `cfg`; fails with [`EngineError::NotFound`] when there is no
    /// engine binary.
    pub fn new(cfg: EngineConfig) -> Result<EnginePool, EngineError> {
        let path = find_engine(cfg.binary.as_deref())?;
        let n = cfg.process_count();
        Ok(EnginePool {
            path,
            cfg,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(n),
            restarts: AtomicU64::new(0),
            searches: AtomicU64::new(0),
        })
    }

    /// The engine binary in use.
    pub fn binary(&self) -> &Path {
        &self.path
    }

    /// The number of processes (the maximum number of searches at once).
    pub fn size(&self) -> usize {
        self.cfg.process_count()
    }

    /// How many times a dead or hung process was replaced.
    pub fn restarts(&self) -> u64 {
        self.restarts.load(Ordering::Relaxed)
    }

    /// How many searches completed.
    pub fn searches(&self) -> u64 {
        self.searches.load(Ordering::Relaxed)
    }

    /// Process ids of the idle processes (for monitoring and tests).
    pub fn idle_pids(&self) -> Vec<u32> {
        self.idle
            .lock()
            .map(|v| v.iter().filter_map(|e| e.child.id()).collect())
            .unwrap_or_default()
    }

    fn take_idle(&self) -> Option<Engine> {
        self.idle.lock().ok().and_then(|mut v| v.pop())
    }

    fn put_idle(&self, e: Engine) {
        if let Ok(mut v) = self.idle.lock() {
            v.push(e);
        }
    }

    /// Runs one search on an idle process (starting one if needed), restarting
    /// a process that dies and retrying.
    pub async fn search(&self, req: &SearchRequest) -> Result<SearchOutcome, EngineError> {
        let pos = rules::parse_fen(&req.fen)?;
        let _permit = self
            .permits
            .acquire()
            .await
            .map_err(|_| EngineError::Died {
                path: self.path.clone(),
                detail: "the pool is closed".into(),
            })?;
        let mut attempt = 0;
        loop {
            let mut engine = match self.take_idle() {
                Some(e) => e,
                None => match Engine::spawn(&self.path, &self.cfg).await {
                    Ok(e) => e,
                    Err(e) if e.is_process_failure() && attempt < self.cfg.retries => {
                        attempt += 1;
                        self.restarts.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                    Err(e) => return Err(e),
                },
            };
            match engine.search(req, &pos, &self.cfg).await {
                Ok(out) => {
                    self.put_idle(engine);
                    self.searches.fetch_add(1, Ordering::Relaxed);
                    return Ok(out);
                }
                Err(e) if e.is_process_failure() && attempt < self.cfg.retries => {
                    attempt += 1;
                    self.restarts.fetch_add(1, Ordering::Relaxed);
                    let _ = engine.child.start_kill();
                    drop(engine);
                }
                Err(e @ EngineError::Unsupported { .. }) => {
                    self.put_idle(engine);
                    return Err(e);
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// The engine's move (UCI) at a strength and limit; `None` when the side
    /// to move has no legal move.
    pub async fn best_move(
        &self,
        fen: &str,
        limit: Limit,
        strength: EngineStrength,
    ) -> Result<Option<String>, EngineError> {
        let req = SearchRequest {
            fen: fen.to_owned(),
            limit,
            strength,
            multipv: 1,
        };
        Ok(self.search(&req).await?.best_move)
    }

    /// Full-strength evaluation at a fixed depth, from White's view. Finished
    /// positions are scored without the engine (mate: `+-32000`, other ends 0).
    pub async fn evaluate(&self, fen: &str, depth: u32) -> Result<Eval, EngineError> {
        let pos = rules::parse_fen(fen)?;
        let side = Side::to_move(&pos);
        if let Some(end) = rules::position_ending(&pos, rules::DrawRules::Automatic) {
            if end.reason == rules::EndReason::Checkmate {
                return Ok(Eval::from_score(Score::Mate(0), side, 0));
            }
            return Ok(Eval::from_score(Score::Cp(0), side, 0));
        }
        let req = SearchRequest {
            fen: fen.to_owned(),
            limit: Limit::Depth(depth),
            strength: EngineStrength::default(),
            multipv: 1,
        };
        let out = self.search(&req).await?;
        let score = out.score.ok_or_else(|| EngineError::Protocol {
            path: self.path.clone(),
            line: "a search that reported no score".into(),
        })?;
        Ok(Eval::from_score(score, side, out.depth))
    }
}

/// The engine pool for synchronous callers: owns a tokio runtime.
pub struct BlockingPool {
    rt: tokio::runtime::Runtime,
    pool: Arc<EnginePool>,
}

impl BlockingPool {
    /// A pool for `cfg` (see [`EnginePool::new`]).
    pub fn new(cfg: EngineConfig) -> Result<BlockingPool, EngineError> {
        let pool = Arc::new(EnginePool::new(cfg)?);
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_io()
            .enable_time()
            .build()
            .map_err(EngineError::Runtime)?;
        Ok(BlockingPool { rt, pool })
    }

    /// The async pool inside.
    pub fn pool(&self) -> &EnginePool {
        &self.pool
    }

    /// See [`EnginePool::search`].
    pub fn search(&self, req: &SearchRequest) -> Result<SearchOutcome, EngineError> {
        self.rt.block_on(self.pool.search(req))
    }

    /// Runs many searches at once over the pool; results in request order.
    pub fn search_many(&self, reqs: Vec<SearchRequest>) -> Vec<Result<SearchOutcome, EngineError>> {
        self.run_many(reqs, |pool, req| async move { pool.search(&req).await })
    }

    /// See [`EnginePool::best_move`].
    pub fn best_move(
        &self,
        fen: &str,
        limit: Limit,
        strength: EngineStrength,
    ) -> Result<Option<String>, EngineError> {
        self.rt.block_on(self.pool.best_move(fen, limit, strength))
    }

    /// See [`EnginePool::evaluate`].
    pub fn evaluate(&self, fen: &str, depth: u32) -> Result<Eval, EngineError> {
        self.rt.block_on(self.pool.evaluate(fen, depth))
    }

    /// Evaluates many positions at once over the pool; results in input order.
    pub fn evaluate_many(&self, fens: &[String], depth: u32) -> Vec<Result<Eval, EngineError>> {
        self.run_many(fens.to_vec(), move |pool, fen| async move {
            pool.evaluate(&fen, depth).await
        })
    }

    /// Runs a future on the pool's runtime (for callers that compose their
    /// own async operations over [`BlockingPool::pool`]).
    pub fn block_on<T>(&self, fut: impl std::future::Future<Output = T>) -> T {
        self.rt.block_on(fut)
    }

    /// Runs `op` on every item concurrently (at most [`EnginePool::size`]
    /// searches at a time); results in input order. A task that panics gives
    /// an error in its place.
    pub fn run_many<I, T, F, Fut>(&self, items: Vec<I>, op: F) -> Vec<Result<T, EngineError>>
    where
        I: Send + 'static,
        T: Send + 'static,
        F: Fn(Arc<EnginePool>, I) -> Fut,
        Fut: std::future::Future<Output = Result<T, EngineError>> + Send + 'static,
    {
        self.rt.block_on(async {
            let mut set = tokio::task::JoinSet::new();
            let n = items.len();
            for (i, item) in items.into_iter().enumerate() {
                let fut = op(Arc::clone(&self.pool), item);
                set.spawn(async move { (i, fut.await) });
            }
            let mut out: Vec<Option<Result<T, EngineError>>> = (0..n).map(|_| None).collect();
            while let Some(joined) = set.join_next().await {
                if let Ok((i, r)) = joined {
                    out[i] = Some(r);
                }
            }
            out.into_iter()
                .map(|r| {
                    r.unwrap_or_else(|| {
                        Err(EngineError::Died {
                            path: self.pool.path.clone(),
                            detail: "a search task panicked".into(),
                        })
                    })
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scores_and_mates_from_whites_view() {
        assert_eq!(Score::Mate(3).centipawns(), 31997);
        assert_eq!(Score::Mate(-2).centipawns(), -31998);
        assert_eq!(Score::Mate(0).centipawns(), -32000);
        let e = Eval::from_score(Score::Cp(35), Side::Black, 12);
        assert_eq!((e.cp, e.mate, e.white_cp), (Some(-35), None, -35));
        let e = Eval::from_score(Score::Mate(2), Side::Black, 12);
        assert_eq!((e.cp, e.mate, e.white_cp), (None, Some(-2), -31998));
        let e = Eval::from_score(Score::Mate(0), Side::Black, 0);
        assert_eq!(e.white_cp, 32000);
        let e = Eval::from_score(Score::Mate(0), Side::White, 0);
        assert_eq!(e.white_cp, -32000);
    }

    #[test]
    fn parses_uci_output() {
        assert_eq!(
            parse_spin_range(
                "option name UCI_Elo type spin default 1350 min 1350 max 2850",
                "UCI_Elo"
            ),
            Some((1350, 2850))
        );
        assert_eq!(
            parse_spin_range(
                "option name Hash type spin default 16 min 1 max 9",
                "UCI_Elo"
            ),
            None
        );
        let lines: Vec<String> = [
            "info depth 1 seldepth 1 multipv 1 score cp 20 nodes 20 pv e2e4",
            "info depth 2 seldepth 2 multipv 1 score cp 35 lowerbound nodes 40",
            "info depth 2 seldepth 2 multipv 1 score mate -3 nodes 80 pv e2e4",
            "info string NNUE evaluation enabled",
            "bestmove e2e4 ponder e7e5",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = parse_search(&lines).unwrap();
        assert_eq!(out.best_move.as_deref(), Some("e2e4"));
        assert_eq!(out.score, Some(Score::Mate(-3)));
        assert_eq!(out.depth, 2);
        let none =
            parse_search(&["info depth 0 score mate 0".into(), "bestmove (none)".into()]).unwrap();
        assert_eq!(none.best_move, None);
        assert_eq!(none.score, Some(Score::Mate(0)));
        assert!(parse_search(&["readyok".into()]).is_none());
        // MultiPV: the last report of each line, best first; bounds count.
        let lines: Vec<String> = [
            "info depth 3 seldepth 3 multipv 1 score cp 30 nodes 90 pv d2d4 d7d5",
            "info depth 3 seldepth 3 multipv 2 score cp 20 nodes 90 pv e2e4",
            "info depth 4 seldepth 4 multipv 1 score cp 25 lowerbound nodes 150 pv e2e4 e7e5",
            "info depth 4 seldepth 4 multipv 2 score mate -5 nodes 150 pv g2g4",
            "bestmove e2e4",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let out = parse_search(&lines).unwrap();
        let got: Vec<(Score, &str, u32)> = out
            .lines
            .iter()
            .map(|l| (l.score, l.first_move.as_str(), l.depth))
            .collect();
        assert_eq!(
            got,
            [(Score::Cp(25), "e2e4", 4), (Score::Mate(-5), "g2g4", 4)]
        );
        // The main score ignores the bound, as before.
        assert_eq!((out.score, out.depth), (Some(Score::Cp(30)), 3));
        // A gap ends the list; a line without a move is no line.
        let gap: Vec<String> = [
            "info depth 1 multipv 1 score cp 5 pv a2a3",
            "info depth 1 multipv 3 score cp 1 pv h2h3",
            "info depth 1 multipv 2 score cp 3",
            "bestmove a2a3",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(parse_search(&gap).unwrap().lines.len(), 1);
    }

    /// Engines that hang, flood their output, write an endless line or play a
    /// move that is not one: each search ends within the answer timeout with an
    /// error naming the engine and what it failed to say.
    #[test]
    fn hung_flooding_and_illegal_engines_are_bounded_errors() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("otb-engine-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let answers = |on_go: &str| {
            format!("while read -r l; do case \"$l\" in uci) echo uciok ;; isready) echo readyok ;; go*) {on_go} ;; esac; done")
        };
        // The cases that end by a timeout wait 300 ms; the others get 3 s, which
        // their own fault (a flood, a long line, a bad move) must beat by far even
        // on a loaded machine (CI runs two test binaries at a time on 2 cores).
        let cases = [
            (
                "silent",
                "while read -r l; do :; done".to_string(),
                300,
                "no `uciok` within 300 ms",
            ),
            (
                "flood",
                "exec yes garbage".into(),
                3000,
                "more than 4194304 bytes of output without `uciok`",
            ),
            (
                "long_line",
                answers("head -c 100000 /dev/zero | tr '\\0' x"),
                3000,
                "a line of more than 65536 bytes while awaiting `bestmove`",
            ),
            ("no_best", answers(":"), 300, "no `bestmove` within 310 ms"),
            (
                "illegal",
                answers("echo 'bestmove e2e5'"),
                3000,
                "unexpected reply \"bestmove e2e5\"",
            ),
            (
                "none",
                answers("echo 'bestmove (none)'"),
                3000,
                "unexpected reply \"bestmove (none)\"",
            ),
        ];
        for (name, body, timeout_ms, expected) in cases {
            let path = dir.join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
            let pool = BlockingPool::new(EngineConfig {
                binary: Some(path.clone()),
                processes: 1,
                answer_timeout_ms: timeout_ms,
                retries: 0,
                ..EngineConfig::default()
            })
            .unwrap();
            let start = std::time::Instant::now();
            let err = pool
                .best_move(
                    "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1",
                    Limit::MovetimeMs(10),
                    EngineStrength::default(),
                )
                .unwrap_err()
                .to_string();
            assert!(
                start.elapsed() < Duration::from_secs(5),
                "{name}: {:?}",
                start.elapsed()
            );
            assert!(
                err.contains(&path.display().to_string()) && err.contains(expected),
                "{name}: {err}"
            );
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn missing_binary_is_not_found() {
        let err = find_engine(Some(Path::new("/nonexistent/dir/engine"))).unwrap_err();
        match &err {
            EngineError::NotFound { tried } => {
                assert_eq!(tried, &vec![PathBuf::from("/nonexistent/dir/engine")])
            }
            other => panic!("{other}"),
        }
        let line = err.to_string();
        assert!(line.contains("stockfish") && !line.contains('\n'), "{line}");
        let cfg = EngineConfig {
            binary: Some("/nonexistent/dir/engine".into()),
            ..EngineConfig::default()
        };
        assert!(matches!(
            BlockingPool::new(cfg),
            Err(EngineError::NotFound { .. })
        ));
    }
}
