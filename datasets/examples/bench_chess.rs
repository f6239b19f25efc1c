//! Timings of the chess data layer:
//!
//! 1. bootstrap Elo: 1000 seeded shuffles x 600 games (goal: under 100 ms);
//! 2. engine-pool throughput: positions evaluated per second at depth 12,
//!    a pool of N processes (one per core) against a single process.
//!
//! `cargo run -p datasets --release --example bench_chess [N_POSITIONS]`
//! (part 2 is skipped, saying why, when no engine is found).

use std::time::Instant;

use datasets::chess::engine::{find_engine, BlockingPool, EngineConfig};
use datasets::chess::metrics::{bootstrap_elo, EloGame, BOOTSTRAP_SHUFFLES, ELO_K, ELO_START};
use datasets::chess::rules;
use datasets::rng::SplitMix64;

fn main() {
    let positions: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(64);

    // 1. Bootstrap Elo.
    let mut rng = SplitMix64::new(1);
    let games: Vec<EloGame> = (0..600)
        .map(|i| EloGame {
            opponent: [1200.0, 1800.0, 2400.0][i % 3],
            score: [1.0, 0.5, 0.0][rng.below(3)],
        })
        .collect();
    let t = Instant::now();
    let b = bootstrap_elo(&games, ELO_START, ELO_K, BOOTSTRAP_SHUFFLES);
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    println!(
        "bootstrap: {BOOTSTRAP_SHUFFLES} shuffles x {} games in {ms:.1} ms (mean {:.1}, median {:.1}, 95% [{:.1}, {:.1}]) on {} threads",
        games.len(),
        b.mean,
        b.median,
        b.ci95.0,
        b.ci95.1,
        rayon::current_num_threads()
    );

    // 2. Engine-pool throughput.
    if let Err(e) = find_engine(None) {
        println!("engine pool: skipped ({e})");
        return;
    }
    let fens = random_positions(positions);
    let n = EngineConfig::default().process_count();
    for processes in [1, n] {
        let pool = match BlockingPool::new(EngineConfig {
            processes,
            ..EngineConfig::default()
        }) {
            Ok(p) => p,
            Err(e) => {
                println!("engine pool: {e}");
                return;
            }
        };
        // Warm up (process start-up and network load are not timed).
        let _ = pool.evaluate_many(&fens[..processes.min(fens.len())], 4);
        let t = Instant::now();
        let results = pool.evaluate_many(&fens, 12);
        let s = t.elapsed().as_secs_f64();
        let failed = results.iter().filter(|r| r.is_err()).count();
        println!(
            "engine pool: {processes} process(es): {} positions at depth 12 in {s:.2} s = {:.1} positions/s ({failed} failed)",
            fens.len(),
            fens.len() as f64 / s
        );
    }
}

/// Positions reached by seeded random play from the start (4 to 40 plies).
fn random_positions(n: usize) -> Vec<String> {
    let mut rng = SplitMix64::new(42);
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut pos = shakmaty::Chess::default();
        let plies = 4 + rng.below(37);
        for _ in 0..plies {
            match datasets::chess::strength::random_move(&pos, &mut rng)
                .and_then(|m| rules::play(&pos, m).ok())
            {
                Some(next) => pos = next,
                None => break,
            }
        }
        if rules::position_ending(&pos, rules::DrawRules::Claimed).is_none() {
            out.push(rules::fen(&pos));
        }
    }
    out
}
