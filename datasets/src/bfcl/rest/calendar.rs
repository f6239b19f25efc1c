//! Calendar arithmetic of the simulated world: proleptic Gregorian days, Easter (Western
//! and Orthodox), the holiday rules, US Eastern daylight saving, and the timestamps of
//! a stock history's intervals.

/// The date the simulated world is frozen at (a Tuesday; US Eastern summer time).
pub const WORLD_DATE: (i64, u32, u32) = (2025, 7, 15);

#[derive(Debug, Clone, Copy)]
pub(super) enum When {
    /// Month, day.
    Fixed(u32, u32),
    /// Days after Western Easter Sunday.
    Easter(i64),
    /// Days after Orthodox Easter Sunday (as a Gregorian date).
    Orthodox(i64),
    /// The `n`th (1-based; 0 = last) weekday (0 = Monday) of a month.
    Nth { month: u32, weekday: i64, n: i64 },
}

impl When {
    /// Days since 1970-01-01.
    pub(super) fn day(self, year: i64) -> i64 {
        match self {
            When::Fixed(m, d) => days_from_civil(year, m, d),
            When::Easter(off) => {
                let (m, d) = western_easter(year);
                days_from_civil(year, m, d) + off
            }
            When::Orthodox(off) => orthodox_easter(year) + off,
            When::Nth { month, weekday, n } => {
                if n == 0 {
                    let next = if month == 12 {
                        days_from_civil(year + 1, 1, 1)
                    } else {
                        days_from_civil(year, month + 1, 1)
                    };
                    let last = next - 1;
                    last - (weekday_of(last) - weekday).rem_euclid(7)
                } else {
                    let first = days_from_civil(year, month, 1);
                    first + (weekday - weekday_of(first)).rem_euclid(7) + 7 * (n - 1)
                }
            }
        }
    }
}

pub(super) struct Holiday {
    pub(super) when: When,
    pub(super) local: &'static str,
    pub(super) name: &'static str,
    pub(super) since: Option<i64>,
    pub(super) until: Option<i64>,
}

pub(super) const fn hol(when: When, local: &'static str, name: &'static str) -> Holiday {
    Holiday {
        when,
        local,
        name,
        since: None,
        until: None,
    }
}

pub(super) const fn hol_years(
    when: When,
    local: &'static str,
    name: &'static str,
    since: Option<i64>,
    until: Option<i64>,
) -> Holiday {
    Holiday {
        when,
        local,
        name,
        since,
        until,
    }
}

/// Gregorian Easter Sunday (anonymous Gregorian algorithm): (month, day).
pub(super) fn western_easter(y: i64) -> (u32, u32) {
    let a = y % 19;
    let b = y / 100;
    let c = y % 100;
    let d = b / 4;
    let e = b % 4;
    let f = (b + 8) / 25;
    let g = (b - f + 1) / 3;
    let h = (19 * a + b - d - g + 15) % 30;
    let i = c / 4;
    let k = c % 4;
    let l = (32 + 2 * e + 2 * i - h - k) % 7;
    let m = (a + 11 * h + 22 * l) / 451;
    let month = (h + l - 7 * m + 114) / 31;
    let day = (h + l - 7 * m + 114) % 31 + 1;
    (month as u32, day as u32)
}

/// Orthodox Easter Sunday (Meeus' Julian algorithm, shifted to the Gregorian
/// calendar), as days since 1970-01-01.
pub(super) fn orthodox_easter(y: i64) -> i64 {
    let a = y % 4;
    let b = y % 7;
    let c = y % 19;
    let d = (19 * c + 15) % 30;
    let e = (2 * a + 4 * b - d + 34) % 7;
    let month = (d + e + 114) / 31;
    let day = (d + e + 114) % 31 + 1;
    let julian_to_gregorian = y / 100 - y / 400 - 2;
    days_from_civil(y, month as u32, day as u32) + julian_to_gregorian
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
pub(super) fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (i64::from(m) + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

/// Inverse of [`days_from_civil`].
pub(super) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// 0 = Monday.
pub(super) fn weekday_of(days: i64) -> i64 {
    (days + 3).rem_euclid(7)
}

/// UTC offset of New York on that day, in hours (-4 in summer time, else -5; the
/// post-2007 rule: second Sunday of March to first Sunday of November).
pub(super) fn new_york_offset_hours(days: i64) -> i64 {
    let (y, _, _) = civil_from_days(days);
    let start = When::Nth {
        month: 3,
        weekday: 6,
        n: 2,
    }
    .day(y);
    let end = When::Nth {
        month: 11,
        weekday: 6,
        n: 1,
    }
    .day(y);
    if (start..end).contains(&days) {
        -4
    } else {
        -5
    }
}

// -- stock history ------------------------------------------------------------------

pub(super) struct IntervalSpec {
    pub(super) name: &'static str,
    /// Bar length in minutes for intraday intervals; 0 for daily and longer.
    pub(super) minutes: i64,
    /// Relative size of one bar's move.
    pub(super) vol: f64,
    /// Typical volume of one bar.
    pub(super) volume: i64,
}

#[rustfmt::skip]
pub(super) const INTERVALS: [IntervalSpec; 8] = [
    IntervalSpec { name: "5m", minutes: 5, vol: 0.002, volume: 600_000 },
    IntervalSpec { name: "15m", minutes: 15, vol: 0.0035, volume: 1_600_000 },
    IntervalSpec { name: "30m", minutes: 30, vol: 0.005, volume: 3_000_000 },
    IntervalSpec { name: "1h", minutes: 60, vol: 0.007, volume: 5_500_000 },
    IntervalSpec { name: "1d", minutes: 0, vol: 0.015, volume: 55_000_000 },
    IntervalSpec { name: "1wk", minutes: 0, vol: 0.03, volume: 270_000_000 },
    IntervalSpec { name: "1mo", minutes: 0, vol: 0.06, volume: 1_100_000_000 },
    IntervalSpec { name: "3mo", minutes: 0, vol: 0.1, volume: 3_400_000_000 },
];

/// The last `n` bar start times up to [`WORLD_DATE`] (oldest first) as
/// (unix seconds, date text). Daily and longer bars start at New York midnight; intraday
/// bars lie in the 9:30-16:00 New York session of weekdays.
pub(super) fn history_timestamps(spec: &IntervalSpec, n: usize) -> Vec<(i64, String)> {
    let (wy, wm, wd) = WORLD_DATE;
    let today = days_from_civil(wy, wm, wd);
    let midnight = |day: i64| day * 86400 - new_york_offset_hours(day) * 3600;
    let date = |day: i64| {
        let (y, m, d) = civil_from_days(day);
        format!("{y:04}-{m:02}-{d:02}")
    };
    let prev_weekday = |mut day: i64| {
        day -= 1;
        while weekday_of(day) >= 5 {
            day -= 1;
        }
        day
    };
    let mut out = Vec::with_capacity(n);
    match spec.name {
        "1d" => {
            let mut day = today + 1;
            while out.len() < n {
                day = prev_weekday(day);
                out.push((midnight(day), date(day)));
            }
        }
        "1wk" => {
            let monday = today - weekday_of(today);
            for k in 0..n as i64 {
                let day = monday - 7 * k;
                out.push((midnight(day), date(day)));
            }
        }
        "1mo" | "3mo" => {
            let step = if spec.name == "1mo" { 1 } else { 3 };
            let mut month_index = wy * 12 + i64::from(wm) - 1;
            month_index -= month_index.rem_euclid(12) % step;
            for _ in 0..n {
                let day = days_from_civil(
                    month_index.div_euclid(12),
                    (month_index.rem_euclid(12) + 1) as u32,
                    1,
                );
                out.push((midnight(day), date(day)));
                month_index -= step;
            }
        }
        _ => {
            let step = spec.minutes.max(1);
            let last_offset = (389 / step) * step; // minutes after 9:30
            let mut day = today;
            let mut offset = last_offset;
            while out.len() < n {
                let local_minutes = 9 * 60 + 30 + offset;
                let ts = midnight(day) + local_minutes * 60;
                let (y, m, d) = civil_from_days(day);
                out.push((
                    ts,
                    format!(
                        "{y:04}-{m:02}-{d:02} {:02}:{:02}:00",
                        local_minutes / 60,
                        local_minutes % 60
                    ),
                ));
                offset -= step;
                if offset < 0 {
                    day = prev_weekday(day);
                    offset = last_offset;
                }
            }
        }
    }
    out.reverse();
    out
}
