//! The Trace-Free+ export's selection (`otb export --sft`): which tool sets are held
//! out, which pairs train, and what each curriculum stage draws. The pairs themselves
//! are read by each environment; the export writes what is selected here.

use datasets::rng::SplitMix64;
use std::collections::BTreeSet;

/// The tool sets among `sets` that a `--holdout` item names: the tool set itself,
/// every tool set of the environment it names (`chess` names `chess:<set>`), or a
/// tool set by its bare name (`phase_specialists`); in `sets`' order.
pub fn named<'s>(sets: &'s [String], item: &str) -> Vec<&'s String> {
    sets.iter()
        .filter(|s| {
            *s == item
                || s.split_once(':')
                    .is_some_and(|(env, set)| env == item || set == item)
        })
        .collect()
}

/// A `share` in (0, 1) of `sets`, drawn by `seed`: `round(len * share)` of them, at
/// least one.
pub fn drawn_share(sets: &[String], share: f64, seed: u64) -> BTreeSet<String> {
    let k = ((sets.len() as f64 * share).round() as usize).clamp(1, sets.len().max(1));
    let mut order = sets.to_vec();
    SplitMix64::derived(seed, 0x686f_6c64).shuffle(&mut order);
    order.into_iter().take(k).collect()
}

/// The pairs of `tool_sets` (each pair's tool set) split by the held-out tool sets
/// `held`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Split {
    /// Whether each pair is held out, in pair order.
    pub held_out: Vec<bool>,
    /// The pairs that train (not held out), in order.
    pub training: Vec<usize>,
}

/// Which pairs (`tool_sets`: each pair's tool set, in order) are held out by `held`.
pub fn split<'p>(tool_sets: impl IntoIterator<Item = &'p str>, held: &BTreeSet<String>) -> Split {
    let held_out: Vec<bool> = tool_sets.into_iter().map(|t| held.contains(t)).collect();
    let training = (0..held_out.len()).filter(|&i| !held_out[i]).collect();
    Split { held_out, training }
}

/// `k` of `pool`, drawn by `rng`: whole shuffled passes over the pool, the last one
/// cut (so no item repeats before every item was drawn).
pub fn draw(pool: &[usize], k: usize, rng: &mut SplitMix64) -> Vec<usize> {
    let mut out = Vec::with_capacity(k);
    while out.len() < k && !pool.is_empty() {
        let mut pass = pool.to_vec();
        rng.shuffle(&mut pass);
        let need = k - out.len();
        out.extend(pass.into_iter().take(need));
    }
    out
}

/// What one curriculum stage draws.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StageDraw {
    /// Trace-free examples.
    pub trace_free: usize,
    /// Trace-based examples.
    pub trace_based: usize,
    /// The examples in order: `(pair, trace-based)`.
    pub examples: Vec<(usize, bool)>,
}

/// A stage needs trace-based examples and no pair has traces.
#[derive(Clone, Copy, Debug, PartialEq, thiserror::Error)]
#[error("{based} trace-based examples are needed but no pair has traces")]
pub struct NoTraces {
    /// The trace-based examples the stage needs.
    pub based: usize,
}

/// Curriculum stage `stage` (1-based) over pairs of which `traced` says which have
/// traces: `samples` examples, `round(samples * share)` of them trace-free and the
/// rest trace-based. The trace-based ones are drawn by `seed` and the stage from the
/// pairs with traces; the trace-free ones from all pairs, those not drawn
/// trace-based first; the stage's examples are then shuffled. No pairs: no
/// examples.
pub fn stage_draw(
    traced: &[bool],
    samples: usize,
    share: f64,
    seed: u64,
    stage: usize,
) -> Result<StageDraw, NoTraces> {
    let n = traced.len();
    let (free, based) = if n == 0 {
        (0, 0)
    } else {
        let free = ((samples as f64 * share).round() as usize).min(samples);
        (free, samples - free)
    };
    let with: Vec<usize> = (0..n).filter(|&i| traced[i]).collect();
    if based > 0 && with.is_empty() {
        return Err(NoTraces { based });
    }
    let mut rng = SplitMix64::derived(seed, stage as u64);
    let chosen = draw(&with, based, &mut rng);
    let drawn: BTreeSet<usize> = chosen.iter().copied().collect();
    let all: Vec<usize> = (0..n).collect();
    let fresh: Vec<usize> = all.iter().copied().filter(|i| !drawn.contains(i)).collect();
    let mut free_drawn = draw(&fresh, free.min(fresh.len()), &mut rng);
    free_drawn.extend(draw(&all, free - free_drawn.len(), &mut rng));
    let mut examples: Vec<(usize, bool)> = chosen.into_iter().map(|i| (i, true)).collect();
    examples.extend(free_drawn.into_iter().map(|i| (i, false)));
    rng.shuffle(&mut examples);
    Ok(StageDraw {
        trace_free: free,
        trace_based: based,
        examples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sets() -> Vec<String> {
        [
            "bfcl",
            "chess:phase_specialists",
            "chess:strength_gradient",
            "search:domains",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn holdout_items_name_tool_sets_environments_or_bare_sets() {
        let s = sets();
        assert_eq!(named(&s, "chess"), [&s[1], &s[2]]);
        assert_eq!(named(&s, "bfcl"), [&s[0]]);
        assert_eq!(named(&s, "strength_gradient"), [&s[2]]);
        assert!(named(&s, "search:other").is_empty());
        let half = drawn_share(&s, 0.5, 7);
        assert_eq!(half.len(), 2);
        assert_eq!(half, drawn_share(&s, 0.5, 7));
        assert_eq!(drawn_share(&s, 0.01, 7).len(), 1);
        let held: BTreeSet<String> = ["chess:strength_gradient".to_string()].into();
        let sp = split(["bfcl", "chess:strength_gradient", "bfcl"], &held);
        assert_eq!(sp.held_out, [false, true, false]);
        assert_eq!(sp.training, [0, 2]);
    }

    #[test]
    fn a_stage_draws_exact_shares_traced_pairs_only_trace_based() {
        let traced: Vec<bool> = (0..10).map(|i| i >= 3).collect();
        let d = stage_draw(&traced, 20, 0.1, 0, 1).unwrap();
        assert_eq!((d.trace_free, d.trace_based, d.examples.len()), (2, 18, 20));
        assert!(d.examples.iter().all(|&(i, based)| !based || traced[i]));
        assert_eq!(d.examples.iter().filter(|e| e.1).count(), 18);
        // Whole passes: every traced pair is drawn twice or three times in 18.
        for i in 3..10 {
            let k = d.examples.iter().filter(|e| e.0 == i && e.1).count();
            assert!((2..=3).contains(&k), "pair {i}: {k}");
        }
        // The seed and the stage draw; the same ones draw the same.
        assert_eq!(d, stage_draw(&traced, 20, 0.1, 0, 1).unwrap());
        assert_ne!(d, stage_draw(&traced, 20, 0.1, 0, 2).unwrap());
        assert_ne!(d, stage_draw(&traced, 20, 0.1, 1, 1).unwrap());
        // Trace-free first from the pairs not drawn trace-based.
        let d = stage_draw(&traced, 10, 0.1, 0, 1).unwrap();
        let based: BTreeSet<usize> = d.examples.iter().filter(|e| e.1).map(|e| e.0).collect();
        let free: Vec<usize> = d.examples.iter().filter(|e| !e.1).map(|e| e.0).collect();
        assert_eq!(free.len(), 1);
        assert!(!based.contains(&free[0]), "{d:?}");
        assert_eq!(
            stage_draw(&[false, false], 2, 0.5, 0, 1),
            Err(NoTraces { based: 1 })
        );
        assert_eq!(
            stage_draw(&[false], 3, 1.0, 0, 1).unwrap().examples,
            [(0, false); 3]
        );
        assert_eq!(stage_draw(&[], 3, 0.0, 0, 1).unwrap(), StageDraw::default());
    }
}
