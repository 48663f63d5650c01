//! Which day it is, in `[budgets] timezone`: the usage accounts' and the day budget's day. The
//! time zone's rules are looked up once a day: the day's bounds in UTC are kept, and an
//! instant within them is that day with no lookup (every model call asks).

use crate::zone::Zone;
use chrono::{DateTime, Duration, LocalResult, NaiveDate, NaiveTime, TimeZone, Utc};
use std::sync::Mutex;

/// The step by which a day's start is looked for past a gap in local time (a zone whose clocks
/// skip midnight): offsets and their changes are whole quarter hours.
const GAP_STEP_MINUTES: i64 = 15;
/// The most steps looked at past midnight: a gap is at most a few hours.
const GAP_MAX_STEPS: i64 = 4 * 24;

/// A day and the UTC instants it runs between, `from` included.
#[derive(Debug, Clone, Copy)]
struct Bounds {
    day: NaiveDate,
    from: DateTime<Utc>,
    until: DateTime<Utc>,
}

/// The days of one time zone.
#[derive(Debug)]
pub struct Days {
    tz: Zone,
    last: Mutex<Option<Bounds>>,
}

impl Days {
    /// Days in `tz`.
    pub fn new(tz: Zone) -> Days {
        Days {
            tz,
            last: Mutex::new(None),
        }
    }

    /// The time zone.
    pub fn tz(&self) -> &Zone {
        &self.tz
    }

    /// The day `now` falls on.
    pub fn day_of(&self, now: DateTime<Utc>) -> NaiveDate {
        let mut last = self.last.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(b) = *last
            && b.from <= now
            && now < b.until
        {
            return b.day;
        }
        let day = now.with_timezone(&self.tz).date_naive();
        let from = start_of(&self.tz, day);
        let until = day
            .succ_opt()
            .map_or(DateTime::<Utc>::MAX_UTC, |next| start_of(&self.tz, next));
        // Only bounds that hold `now` are kept (a zone's odd rules can never make a wrong day
        // stick).
        *last = (from <= now && now < until).then_some(Bounds { day, from, until });
        day
    }
}

/// The first instant of `day` in `tz`, in UTC: local midnight, or the first local time after it
/// when the clocks skip midnight.
fn start_of(tz: &Zone, day: NaiveDate) -> DateTime<Utc> {
    let midnight = day.and_time(NaiveTime::MIN);
    for step in 0..=GAP_MAX_STEPS {
        let local = midnight + Duration::minutes(step * GAP_STEP_MINUTES);
        match tz.from_local_datetime(&local) {
            LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => return t.with_timezone(&Utc),
            LocalResult::None => continue,
        }
    }
    Utc.from_utc_datetime(&midnight)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_kept_day_is_the_zones_day_across_midnight_and_clock_changes() {
        // Around clock changes: Berlin (at 02:00), Havana (at midnight: the day starts at
        // 01:00), Lord Howe (half an hour), Kolkata (half-hour offset), and UTC.
        let cases = [
            ("UTC", "2026-03-28T00:00:00Z"),
            ("Europe/Berlin", "2026-03-28T00:00:00Z"),
            ("Europe/Berlin", "2026-10-24T00:00:00Z"),
            ("America/Havana", "2026-03-07T00:00:00Z"),
            ("America/Havana", "2026-10-31T00:00:00Z"),
            ("Australia/Lord_Howe", "2026-04-03T00:00:00Z"),
            ("Asia/Kolkata", "2026-12-01T00:00:00Z"),
        ];
        for (zone, start) in cases {
            let tz = Zone::named(zone).unwrap();
            let days = Days::new(tz.clone());
            let start: DateTime<Utc> = start.parse().unwrap();
            // Every five minutes for three days, and back again (a clock set back).
            let steps: Vec<i64> = (0..864).chain((0..864).rev()).collect();
            for step in steps {
                let now = start + Duration::minutes(5 * step);
                let expected = now.with_timezone(&tz).date_naive();
                assert_eq!(days.day_of(now), expected, "{zone} at {now}");
            }
        }
    }

    #[test]
    fn a_day_that_skips_midnight_starts_at_its_first_local_time() {
        let havana = Zone::named("America/Havana").unwrap();
        let day: NaiveDate = "2026-03-08".parse().unwrap();
        // Cuba's clocks go from 00:00 to 01:00 that day: its first instant is 01:00 CDT.
        assert_eq!(
            start_of(&havana, day).to_rfc3339(),
            "2026-03-08T05:00:00+00:00"
        );
    }
}
