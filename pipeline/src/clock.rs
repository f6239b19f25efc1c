//! Wall-clock readings and how they are written: Unix seconds or milliseconds, and
//! UTC times of day and dates (no time-zone database; a clock before 1970 reads 0);
//! and work done at an interval beside other work ([`ticking`]).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Seconds since the Unix epoch.
pub fn now_unix() -> u64 {
    now_ms() / 1000
}

/// Runs `work` while a background thread calls `tick` every `every` (not at all
/// when `every` is zero); the thread stops when `work` returns.
pub fn ticking<R>(every: Duration, mut tick: impl FnMut() + Send, work: impl FnOnce() -> R) -> R {
    if every.is_zero() {
        return work();
    }
    let (stop, stopped) = std::sync::mpsc::channel::<()>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            while let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(every)
            {
                tick();
            }
        });
        let r = work();
        drop(stop);
        r
    })
}

/// `hh:mm:ss` of Unix time `unix`, UTC.
pub fn utc_time(unix: u64) -> String {
    let s = unix % 86_400;
    format!("{:02}:{:02}:{:02}", s / 3600, s % 3600 / 60, s % 60)
}

/// `YYYY-MM-DD hh:mm:ss UTC` of Unix time `unix` (the proleptic Gregorian
/// calendar).
pub fn utc_datetime(unix: u64) -> String {
    let days = (unix / 86_400) as i64;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {} UTC", utc_time(unix))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_and_dates() {
        assert_eq!(utc_time(1_764_115_200 + 3_725), "01:02:05");
        assert_eq!(utc_datetime(1_764_115_200), "2025-11-26 00:00:00 UTC");
        assert_eq!(utc_datetime(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(utc_datetime(0), "1970-01-01 00:00:00 UTC");
    }
}
