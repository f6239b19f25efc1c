//! Chess metrics: best-tool share (overall and per phase), streaming Elo,
//! bootstrap Elo over seeded shuffles, and the performance rating.
//!
//! **Best tool.** Every agent tool call is compared with the optimal tool for
//! the position where it was called ([`ToolSet::optimal_tool`]). The authors'
//! evaluator looked that position up by treating the call's ply number (1 for
//! the first ply of the game) as a full-move number: index `2(p-1)` for White
//! and `2(p-1)+1` for Black into the list of positions (start, after ply 1,
//! ...), falling back to the start position past its end. Only White's first
//! ply is looked up correctly; a Black first ply gets the position after its
//! own move, and later plies land further and further ahead (or on the start).
//! [`BestToolIndexing::Reference`] reproduces that for parity;
//! [`BestToolIndexing::Correct`] (the default) uses the position before the
//! move. Per-phase accuracy uses the same looked-up position.
//!
//! **Elo.** `E = 1/(1+10^((R_opp-R)/400))`, `R += K(S-E)`, K = 32, start 1500
//! (or the midpoint of the opponents' ratings when 1500 lies outside them).
//! The bootstrap shuffles the games with seeds `0..n` ([`SplitMix64`], so
//! the permutations differ from numpy's) and reports mean, median and
//! percentile intervals (numpy's default linear interpolation).

use std::collections::BTreeMap;

use rayon::prelude::*;

use super::game::GameRecord;
use super::rules::{self, Phase, Side};
use super::tools::{Docs, ToolSet};
use super::ChessError;
use crate::rng::SplitMix64;

/// Which position a tool call is judged in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BestToolIndexing {
    /// The position before the agent's move.
    #[default]
    Correct,
    /// The authors' evaluator's lookup (see the module docs).
    Reference,
}

/// One judged tool call.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolCallCheck {
    /// The call's ply number (1-based).
    pub ply: usize,
    /// The agent's side.
    pub side: Side,
    /// Phase of the position it was judged in.
    pub phase: Phase,
    /// The tool called.
    pub tool: String,
    /// The optimal tool there.
    pub optimal: String,
    /// Whether they are the same.
    pub is_optimal: bool,
}

/// Judges every agent tool call of a game.
pub fn check_tool_calls(
    record: &GameRecord,
    tools: &ToolSet,
    docs: Docs,
    indexing: BestToolIndexing,
) -> Result<Vec<ToolCallCheck>, ChessError> {
    let mut out = Vec::new();
    for (i, ply) in record.plies.iter().enumerate() {
        let Some(tool) = &ply.tool else { continue };
        let fen = match indexing {
            BestToolIndexing::Correct => &ply.fen_before,
            BestToolIndexing::Reference => {
                let k = 2 * i + usize::from(ply.side == Side::Black);
                match k {
                    0 => &record.start_fen,
                    k if k <= record.plies.len() => &record.plies[k - 1].fen_after,
                    _ => &record.start_fen,
                }
            }
        };
        let pos = rules::parse_fen(fen)?;
        let best = tools.optimal_tool(&pos);
        let optimal = tools.name(best, docs).unwrap_or_default();
        out.push(ToolCallCheck {
            ply: ply.ply,
            side: ply.side,
            phase: Phase::of(&pos),
            is_optimal: tool.trim() == optimal,
            tool: tool.clone(),
            optimal,
        });
    }
    Ok(out)
}

/// Calls and optimal calls.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct Accuracy {
    /// Tool calls.
    pub calls: usize,
    /// Optimal ones.
    pub optimal: usize,
}

impl Accuracy {
    /// `optimal / calls` in percent (0 without calls).
    pub fn percent(&self) -> f64 {
        if self.calls == 0 {
            0.0
        } else {
            100.0 * self.optimal as f64 / self.calls as f64
        }
    }
}

/// Best-tool % overall and per phase.
#[derive(Debug, Clone, PartialEq, Default, serde::Serialize, serde::Deserialize)]
pub struct BestToolSummary {
    /// Over all calls.
    pub overall: Accuracy,
    /// Per phase of the judged position.
    pub per_phase: BTreeMap<Phase, Accuracy>,
}

/// Sums judged calls.
pub fn summarize_best_tool(checks: &[ToolCallCheck]) -> BestToolSummary {
    let mut s = BestToolSummary::default();
    for c in checks {
        for a in [&mut s.overall, s.per_phase.entry(c.phase).or_default()] {
            a.calls += 1;
            a.optimal += usize::from(c.is_optimal);
        }
    }
    s
}

/// One rated game: the opponent's rating and the agent's score (1/0.5/0).
#[derive(Debug, Clone, Copy, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct EloGame {
    /// The opponent's rating (measured or nominal).
    pub opponent: f64,
    /// The agent's score.
    pub score: f64,
}

/// The default start rating.
pub const ELO_START: f64 = 1500.0;
/// The update factor.
pub const ELO_K: f64 = 32.0;
/// The number of bootstrap shuffles.
pub const BOOTSTRAP_SHUFFLES: u64 = 1000;

/// Expected score of `r` against `opponent`.
pub fn expected_score(r: f64, opponent: f64) -> f64 {
    1.0 / (1.0 + 10f64.powf((opponent - r) / 400.0))
}

/// `preferred` if it lies within the opponents' ratings, else their midpoint.
pub fn elo_start(games: &[EloGame], preferred: f64) -> f64 {
    let lo = games
        .iter()
        .map(|g| g.opponent)
        .fold(f64::INFINITY, f64::min);
    let hi = games
        .iter()
        .map(|g| g.opponent)
        .fold(f64::NEG_INFINITY, f64::max);
    if games.is_empty() || (lo..=hi).contains(&preferred) {
        preferred
    } else {
        (lo + hi) / 2.0
    }
}

/// The rating after playing `games` in order from `start`.
pub fn streaming_elo(games: &[EloGame], start: f64, k: f64) -> f64 {
    games.iter().fold(start, |r, g| {
        r + k * (g.score - expected_score(r, g.opponent))
    })
}

fn streaming_elo_in_order(games: &[EloGame], order: &[usize], start: f64, k: f64) -> f64 {
    order.iter().fold(start, |r, &i| {
        let g = games[i];
        r + k * (g.score - expected_score(r, g.opponent))
    })
}

pub use crate::stats::percentile;

/// The bootstrap summary.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct BootstrapElo {
    /// Number of shuffles.
    pub shuffles: u64,
    /// Mean final rating (the paper's statistic).
    pub mean: f64,
    /// Median final rating (the authors' code).
    pub median: f64,
    /// 5th and 95th percentiles.
    pub ci90: (f64, f64),
    /// 2.5th and 97.5th percentiles.
    pub ci95: (f64, f64),
    /// 0.5th and 99.5th percentiles.
    pub ci99: (f64, f64),
}

/// Final streaming Elo over `shuffles` shuffles of the games (seeds
/// `0..shuffles`), in parallel.
pub fn bootstrap_elo(games: &[EloGame], start: f64, k: f64, shuffles: u64) -> BootstrapElo {
    let mut finals: Vec<f64> = (0..shuffles)
        .into_par_iter()
        .map(|seed| {
            let mut order: Vec<usize> = (0..games.len()).collect();
            SplitMix64::new(seed).shuffle(&mut order);
            streaming_elo_in_order(games, &order, start, k)
        })
        .collect();
    finals.sort_by(f64::total_cmp);
    let mean = if finals.is_empty() {
        f64::NAN
    } else {
        finals.iter().sum::<f64>() / finals.len() as f64
    };
    let ci = |level: f64| {
        let tail = (1.0 - level) / 2.0;
        (percentile(&finals, tail), percentile(&finals, 1.0 - tail))
    };
    BootstrapElo {
        shuffles,
        mean,
        median: percentile(&finals, 0.5),
        ci90: ci(0.90),
        ci95: ci(0.95),
        ci99: ci(0.99),
    }
}

/// The rating at which the expected total score equals the actual one
/// (bisection to 1e-6). `None` without games or with a perfect or zero
/// score (no finite rating fits).
pub fn performance_rating(games: &[EloGame]) -> Option<f64> {
    let total: f64 = games.iter().map(|g| g.score).sum();
    if games.is_empty() || total <= 0.0 || total >= games.len() as f64 {
        return None;
    }
    let gap = |r: f64| -> f64 {
        games
            .iter()
            .map(|g| expected_score(r, g.opponent))
            .sum::<f64>()
            - total
    };
    let lo_opp = games
        .iter()
        .map(|g| g.opponent)
        .fold(f64::INFINITY, f64::min);
    let hi_opp = games
        .iter()
        .map(|g| g.opponent)
        .fold(f64::NEG_INFINITY, f64::max);
    let (mut lo, mut hi) = (lo_opp - 4000.0, hi_opp + 4000.0);
    for _ in 0..200 {
        let mid = (lo + hi) / 2.0;
        if gap(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
        if hi - lo < 1e-6 {
            break;
        }
    }
    Some((lo + hi) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chess::game::Game;
    use crate::chess::rules::DrawRules;
    use crate::chess::tools::ToolFamily;

    fn g(opponent: f64, score: f64) -> EloGame {
        EloGame { opponent, score }
    }

    #[test]
    fn streaming_elo_by_hand() {
        // Python 3.11: R=1500; R+=32*(S-1/(1+10**((O-R)/400))) over the games.
        let games = [g(1500.0, 1.0), g(1800.0, 0.0), g(1200.0, 0.5)];
        assert_eq!(streaming_elo(&games[..1], ELO_START, ELO_K), 1516.0);
        let r = streaming_elo(&games[..2], ELO_START, ELO_K);
        assert!((r - 1510.7785909120926).abs() < 1e-9, "{r}");
        let r = streaming_elo(&games, ELO_START, ELO_K);
        assert!((r - 1499.3609001703708).abs() < 1e-9, "{r}");
        assert_eq!(streaming_elo(&[], ELO_START, ELO_K), ELO_START);
    }

    #[test]
    fn start_rating_rule() {
        let pool = [g(1200.0, 1.0), g(2400.0, 0.0)];
        assert_eq!(elo_start(&pool, 1500.0), 1500.0);
        let weak = [g(800.0, 1.0), g(1000.0, 0.0)];
        assert_eq!(elo_start(&weak, 1500.0), 900.0);
        assert_eq!(elo_start(&[], 1500.0), 1500.0);
    }

    #[test]
    fn bootstrap_of_exchangeable_games_is_constant_and_seeded() {
        let same = vec![g(1500.0, 1.0); 10];
        let b = bootstrap_elo(&same, ELO_START, ELO_K, 50);
        let r = streaming_elo(&same, ELO_START, ELO_K);
        for v in [b.mean, b.median, b.ci90.0, b.ci99.1] {
            assert!((v - r).abs() < 1e-9);
        }
        let mixed: Vec<EloGame> = (0..40)
            .map(|i| {
                g(
                    [1200.0, 1800.0, 2400.0][i % 3],
                    [1.0, 0.5, 0.0][i % 2 + i % 3 / 2],
                )
            })
            .collect();
        let a = bootstrap_elo(&mixed, ELO_START, ELO_K, 200);
        let b = bootstrap_elo(&mixed, ELO_START, ELO_K, 200);
        assert_eq!(a, b);
        assert!(a.ci99.0 <= a.ci95.0 && a.ci95.0 <= a.ci90.0 && a.ci90.0 <= a.median);
        assert!(a.median <= a.ci90.1 && a.ci90.1 <= a.ci95.1 && a.ci95.1 <= a.ci99.1);
        assert!(a.ci99.0 < a.ci99.1);
    }

    #[test]
    fn performance_rating_by_hand() {
        // One win, one loss against 1500 and 1700: by symmetry 1600.
        let r = performance_rating(&[g(1500.0, 1.0), g(1700.0, 0.0)]).unwrap();
        assert!((r - 1600.0).abs() < 1e-5, "{r}");
        // 3 of 4 against 2000: E = 0.75 at 2000 + 400*log10(3) = 2190.848501887865.
        let four = [
            g(2000.0, 1.0),
            g(2000.0, 1.0),
            g(2000.0, 1.0),
            g(2000.0, 0.0),
        ];
        let r = performance_rating(&four).unwrap();
        assert!((r - 2190.848501887865).abs() < 1e-5, "{r}");
        assert_eq!(performance_rating(&[g(1500.0, 1.0)]), None);
        assert_eq!(performance_rating(&[]), None);
    }

    #[test]
    fn best_tool_correct_and_reference_indexing() {
        // Black to move in the opening; the agent plays Black's plies.
        let tools = ToolSet::new(ToolFamily::PhaseSpecialists);
        let mut game = Game::new(
            "rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1",
            120,
            DrawRules::default(),
        )
        .unwrap();
        game.play_san("e5", Some("function_1")).unwrap();
        game.play_san("Nf3", None).unwrap();
        game.play_san("Nc6", Some("function_2")).unwrap();
        let rec = game.record();
        let c = check_tool_calls(&rec, &tools, Docs::Opaque, BestToolIndexing::Correct).unwrap();
        assert_eq!(c.len(), 2);
        assert!(c[0].is_optimal && !c[1].is_optimal);
        assert_eq!(c[1].optimal, "function_1");
        assert_eq!(c[0].phase, Phase::Opening);
        // Reference: ply 1 (Black) -> index 1, the position after 1... e5;
        // ply 3 (Black) -> index 5, past the end -> the start position.
        let r = check_tool_calls(&rec, &tools, Docs::Opaque, BestToolIndexing::Reference).unwrap();
        assert_eq!(r.len(), 2);
        assert!(r[0].is_optimal);
        let s = summarize_best_tool(&c);
        assert_eq!(
            s.overall,
            Accuracy {
                calls: 2,
                optimal: 1
            }
        );
        assert_eq!(s.overall.percent(), 50.0);
        assert_eq!(s.per_phase[&Phase::Opening].calls, 2);
    }

    #[test]
    fn reference_indexing_picks_a_different_position_in_a_transition() {
        // A capture that moves the game from middlegame (16) to endgame (15):
        // the reference judges Black's first call after its own capture.
        let tools = ToolSet::new(ToolFamily::PhaseSpecialists);
        let mut game = Game::new(
            "r3k2r/1pp2ppp/8/8/8/8/PP3PPP/R3K2R b KQkq - 0 1",
            120,
            DrawRules::default(),
        )
        .unwrap();
        assert_eq!(Phase::of(game.position()), Phase::Middlegame);
        game.play_san("Rxa2", Some("function_2")).unwrap();
        let rec = game.record();
        let c = check_tool_calls(&rec, &tools, Docs::Opaque, BestToolIndexing::Correct).unwrap();
        let r = check_tool_calls(&rec, &tools, Docs::Opaque, BestToolIndexing::Reference).unwrap();
        assert_eq!((c[0].phase, c[0].is_optimal), (Phase::Middlegame, true));
        assert_eq!((r[0].phase, r[0].is_optimal), (Phase::Endgame, false));
    }
}
