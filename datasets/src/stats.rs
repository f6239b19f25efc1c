//! The statistics every environment's metrics share: percentiles and the bootstrap
//! interval of a mean. Seeded with [`SplitMix64`], so an interval is a pure function of
//! its data, resample count and seed (part of the stage keys that store it).

use crate::rng::SplitMix64;

/// A percentile of sorted data with linear interpolation (numpy's default);
/// `q` in `[0, 1]`. NaN for no data.
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    match sorted.len() {
        0 => f64::NAN,
        1 => sorted[0],
        n => {
            let pos = q.clamp(0.0, 1.0) * (n - 1) as f64;
            let lo = pos.floor() as usize;
            let hi = (lo + 1).min(n - 1);
            sorted[lo] + (pos - lo as f64) * (sorted[hi] - sorted[lo])
        }
    }
}

/// The bootstrap 95% percentile interval of the mean of `values`: `resamples` means of
/// `values.len()` draws with replacement (seeded), their 2.5th and 97.5th percentiles.
/// NaN for no data.
pub fn bootstrap_mean_ci(values: &[f64], resamples: u32, seed: u64) -> (f64, f64) {
    let n = values.len();
    if n == 0 || resamples == 0 {
        return (f64::NAN, f64::NAN);
    }
    let mut rng = SplitMix64::new(seed);
    let mut means: Vec<f64> = (0..resamples)
        .map(|_| (0..n).map(|_| values[rng.below(n)]).sum::<f64>() / n as f64)
        .collect();
    means.sort_by(f64::total_cmp);
    (percentile(&means, 0.025), percentile(&means, 0.975))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_interpolate_like_numpy() {
        // Linear interpolation at q * (n - 1), as numpy.percentile([1, 2, 3, 4], ...) does.
        let d = [1.0, 2.0, 3.0, 4.0];
        for (q, want) in [(0.0, 1.0), (0.25, 1.75), (0.5, 2.5), (0.9, 3.7), (1.0, 4.0)] {
            assert!((percentile(&d, q) - want).abs() < 1e-12, "{q}");
        }
        assert!(percentile(&[], 0.5).is_nan());
        assert_eq!(percentile(&[7.0], 0.3), 7.0);
    }

    #[test]
    fn bootstrap_interval_brackets_the_mean_and_is_deterministic() {
        let v: Vec<f64> = (0..50).map(|i| f64::from(u8::from(i % 3 == 0))).collect();
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let (lo, hi) = bootstrap_mean_ci(&v, 1000, 0);
        assert!(lo < mean && mean < hi, "{lo} {mean} {hi}");
        // About 1.96 standard errors either side (sd of a 1/3 Bernoulli mean of 50: 0.067).
        assert!(hi - lo > 0.2 && hi - lo < 0.33, "{lo} {hi}");
        assert_eq!(bootstrap_mean_ci(&v, 1000, 0), (lo, hi));
        assert_ne!(bootstrap_mean_ci(&v, 1000, 1), (lo, hi));
        assert_eq!(bootstrap_mean_ci(&[1.0; 5], 100, 3), (1.0, 1.0));
        let (a, b) = bootstrap_mean_ci(&[], 100, 0);
        assert!(a.is_nan() && b.is_nan());
    }
}
