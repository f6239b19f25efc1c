//! Embeddings per second for a batch of short texts.
//!
//! ```sh
//! cargo run --release -p textsim --example bench_embed -- [BATCH] [ROUNDS]
//! CARGO_TARGET_DIR=/tmp/textsim-native RUSTFLAGS="-C target-cpu=native" \
//!     cargo run --release -p textsim --example bench_embed
//! ```
//!
//! Loads the default model (fetching it on first use), embeds BATCH (64)
//! distinct short tool-description-like texts ROUNDS (5) times after one
//! warm-up call, and prints the median and best rate.

use std::time::Instant;

use textsim::Embedder;

const SUBJECTS: &[&str] = &[
    "the weather",
    "a user's profile",
    "stock prices",
    "a flight booking",
    "the factorial of n",
    "an invoice",
    "the exchange rate",
    "a playlist",
];
const VERBS: &[&str] = &[
    "Returns",
    "Updates",
    "Deletes",
    "Searches for",
    "Computes",
    "Lists",
    "Validates",
    "Formats",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let batch: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(64);
    let rounds: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(5);
    let texts: Vec<String> = (0..batch)
        .map(|i| {
            format!(
                "{} {} for the given id {i}, with optional filters.",
                VERBS[i % VERBS.len()],
                SUBJECTS[(i / VERBS.len()) % SUBJECTS.len()]
            )
        })
        .collect();
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();

    let t = Instant::now();
    let e = Embedder::load_default()?;
    let load = t.elapsed();
    let tokens: usize = refs.iter().map(|s| e.token_ids(s).len()).sum();
    e.embed(&refs)?; // warm-up
    let mut rates = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let t = Instant::now();
        let v = e.embed(&refs)?;
        let secs = t.elapsed().as_secs_f64();
        assert_eq!(v.len(), batch);
        rates.push(batch as f64 / secs);
    }
    rates.sort_by(f64::total_cmp);
    let median = rates.get(rates.len() / 2).copied().unwrap_or(0.0);
    let best = rates.last().copied().unwrap_or(0.0);
    println!(
        "model load {:.2} s; batch {batch} texts ({:.1} word pieces avg), {rounds} rounds: \
         median {median:.1} embeddings/s, best {best:.1} embeddings/s",
        load.as_secs_f64(),
        tokens as f64 / batch.max(1) as f64
    );
    Ok(())
}
