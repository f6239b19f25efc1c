//! Retry policy: capped exponential backoff with jitter, honouring
//! `Retry-After` on rate limits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::ErrorKind;

/// How often and how patiently to retry rate limits, transient errors and
/// timeouts. Other kinds are never retried.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Total attempts including the first (1 = no retries).
    pub max_attempts: u32,
    /// Delay before the first retry; doubles each retry.
    pub base_delay: Duration,
    /// Cap of the exponential delay.
    pub max_delay: Duration,
    /// Cap of a server-sent `Retry-After`.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 6,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
            max_retry_after: Duration::from_secs(120),
        }
    }
}

impl RetryPolicy {
    /// Small delays for tests.
    pub fn fast(max_attempts: u32) -> Self {
        RetryPolicy {
            max_attempts,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(5),
            max_retry_after: Duration::from_secs(2),
        }
    }

    /// Whether attempt number `attempt` (1-based, just failed with `kind`)
    /// is followed by another.
    pub fn should_retry(&self, kind: ErrorKind, attempt: u32) -> bool {
        kind.is_retryable() && attempt < self.max_attempts
    }

    /// Delay after failed attempt `attempt` (1-based). A `Retry-After` wins
    /// over the computed backoff when it is longer (capped).
    pub fn delay(&self, attempt: u32, retry_after: Option<Duration>) -> Duration {
        let exp = attempt.saturating_sub(1).min(30);
        let raw = self
            .base_delay
            .saturating_mul(1u32 << exp)
            .min(self.max_delay);
        // "Equal jitter": half fixed, half random, so delays never collapse to 0.
        let half = raw / 2;
        let jittered = half + half.mul_f64(unit_random());
        match retry_after {
            Some(ra) => ra.min(self.max_retry_after).max(jittered),
            None => jittered,
        }
    }
}

/// Parses a `Retry-After` header value in seconds (the HTTP-date form is
/// rare for APIs and is ignored).
pub fn parse_retry_after(v: &str) -> Option<Duration> {
    let v = v.trim();
    if let Ok(s) = v.parse::<u64>() {
        return Some(Duration::from_secs(s));
    }
    v.parse::<f64>()
        .ok()
        .filter(|s| s.is_finite() && *s >= 0.0)
        .map(Duration::from_secs_f64)
}

/// A uniform number in [0, 1) from a splitmix64 stream (jitter needs no
/// cryptographic randomness, and this avoids a dependency).
fn unit_random() -> f64 {
    static STATE: AtomicU64 = AtomicU64::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let mut z = STATE
        .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
        .wrapping_add(nanos);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^= z >> 31;
    (z >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_is_capped_and_jittered() {
        let p = RetryPolicy::default();
        for attempt in 1..20 {
            let d = p.delay(attempt, None);
            assert!(d <= p.max_delay, "{d:?}");
            let raw = p
                .base_delay
                .saturating_mul(1 << (attempt - 1).min(30))
                .min(p.max_delay);
            assert!(d >= raw / 2);
        }
    }

    #[test]
    fn retry_after_is_honoured_and_capped() {
        let p = RetryPolicy::default();
        assert!(p.delay(1, Some(Duration::from_secs(7))) >= Duration::from_secs(7));
        assert_eq!(
            p.delay(1, Some(Duration::from_secs(9999))),
            p.max_retry_after
        );
        assert_eq!(parse_retry_after(" 3 "), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT"), None);
    }

    #[test]
    fn only_retryable_kinds_are_retried() {
        let p = RetryPolicy::fast(3);
        assert!(p.should_retry(ErrorKind::Transient, 2));
        assert!(!p.should_retry(ErrorKind::Transient, 3));
        assert!(!p.should_retry(ErrorKind::Fatal, 1));
        assert!(!p.should_retry(ErrorKind::Malformed, 1));
    }
}
