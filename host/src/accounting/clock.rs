//! Time for budgets: a clock the book reads (so tests can move it across a
//! period boundary) and the calendar periods budgets count in.
//!
//! Periods are calendar days and months at a fixed offset from UTC
//! (`budget_timezone`: `"UTC"` or `"+02:00"`). There is no time-zone database:
//! an offset does not follow daylight saving, so an operator who wants local
//! midnight all year sets the offset they care about most.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// What the budget book asks the time from.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> SystemTime;
}

/// The system's wall clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that moves only when told: for tests and simulations.
#[derive(Debug)]
pub struct ManualClock {
    now: Mutex<SystemTime>,
}

impl ManualClock {
    pub fn new(now: SystemTime) -> Self {
        Self { now: Mutex::new(now) }
    }

    pub fn set(&self, now: SystemTime) {
        *self.now.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = now;
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *now += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        *self.now.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// A budget's period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Period {
    Day,
    Month,
}

impl Period {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Day => "day",
            Self::Month => "month",
        }
    }
}

/// A fixed offset from UTC, in seconds east.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Timezone {
    offset_secs: i64,
}

const DAY_SECS: i64 = 86_400;

impl Timezone {
    pub const UTC: Timezone = Timezone { offset_secs: 0 };

    /// `"UTC"` (or `"Z"`), or a fixed offset `+HH:MM` / `-HH:MM` (at most 14 hours).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if text.eq_ignore_ascii_case("utc") || text == "Z" {
            return Ok(Self::UTC);
        }
        let bad = || {
            format!(
                "`budget_timezone = \"{text}\"`: use \"UTC\" or a fixed offset like \"+02:00\" \
                 (time-zone names are not read)"
            )
        };
        let (sign, rest) = match text.as_bytes().first() {
            Some(b'+') => (1, &text[1..]),
            Some(b'-') => (-1, &text[1..]),
            _ => return Err(bad()),
        };
        let (hours, minutes) = rest.split_once(':').ok_or_else(bad)?;
        let digits = |part: &str| part.len() == 2 && part.bytes().all(|b| b.is_ascii_digit());
        if !digits(hours) || !digits(minutes) {
            return Err(bad());
        }
        let hours: i64 = hours.parse().map_err(|_| bad())?;
        let minutes: i64 = minutes.parse().map_err(|_| bad())?;
        if hours > 14 || minutes > 59 {
            return Err(bad());
        }
        Ok(Self { offset_secs: sign * (hours * 3600 + minutes * 60) })
    }

    /// The start (inclusive) and end (exclusive) of the `period` holding `at`.
    pub fn bounds(self, period: Period, at: SystemTime) -> (SystemTime, SystemTime) {
        let local = unix_secs(at) + self.offset_secs;
        let day = local.div_euclid(DAY_SECS);
        let (start_day, end_day) = match period {
            Period::Day => (day, day + 1),
            Period::Month => {
                let (year, month, _) = civil_from_days(day);
                let next = if month == 12 { (year + 1, 1) } else { (year, month + 1) };
                (days_from_civil(year, month, 1), days_from_civil(next.0, next.1, 1))
            }
        };
        let to_time = |days: i64| from_unix_secs(days * DAY_SECS - self.offset_secs);
        (to_time(start_day), to_time(end_day))
    }
}

fn unix_secs(at: SystemTime) -> i64 {
    match at.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_secs()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_secs()).unwrap_or(i64::MAX),
    }
}

fn from_unix_secs(secs: i64) -> SystemTime {
    if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    }
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31), proleptic Gregorian
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// (year, month 1-12, day 1-31) to days since 1970-01-01.
fn days_from_civil(year: i64, month: u32, day: u32) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let yoe = year.rem_euclid(400);
    let month = i64::from(month);
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> SystemTime {
        humantime::parse_rfc3339(text).unwrap()
    }

    #[test]
    fn days_and_months_are_calendar_periods_in_utc() {
        let now = at("2026-02-28T23:59:59Z");
        assert_eq!(Timezone::UTC.bounds(Period::Day, now), (at("2026-02-28T00:00:00Z"), at("2026-03-01T00:00:00Z")));
        assert_eq!(Timezone::UTC.bounds(Period::Month, now), (at("2026-02-01T00:00:00Z"), at("2026-03-01T00:00:00Z")));
        let december = at("2026-12-31T12:00:00Z");
        assert_eq!(Timezone::UTC.bounds(Period::Month, december).1, at("2027-01-01T00:00:00Z"));
        let leap = at("2028-02-29T05:00:00Z");
        assert_eq!(Timezone::UTC.bounds(Period::Month, leap).1, at("2028-03-01T00:00:00Z"));
    }

    #[test]
    fn a_fixed_offset_moves_midnight() {
        let plus_two = Timezone::parse("+02:00").unwrap();
        // 23:30 UTC on the 31st is 01:30 on the 1st at +02:00.
        let now = at("2026-05-31T23:30:00Z");
        assert_eq!(plus_two.bounds(Period::Day, now), (at("2026-05-31T22:00:00Z"), at("2026-06-01T22:00:00Z")));
        assert_eq!(plus_two.bounds(Period::Month, now).0, at("2026-05-31T22:00:00Z"));
        let minus = Timezone::parse("-05:30").unwrap();
        assert_eq!(minus.bounds(Period::Day, at("2026-05-01T03:00:00Z")).0, at("2026-04-30T05:30:00Z"));
    }

    #[test]
    fn only_utc_and_fixed_offsets_are_read() {
        assert_eq!(Timezone::parse("UTC"), Ok(Timezone::UTC));
        for bad in ["Europe/Paris", "+2", "+02", "02:00", "+15:00", "+02:60", ""] {
            let message = Timezone::parse(bad).unwrap_err();
            assert!(message.contains("fixed offset"), "{bad}: {message}");
        }
    }
}
