//! UTC timestamps, written as RFC 3339.
//!
//! Decision: `chrono` is the workspace's one date-time library (schedules and budgets need its
//! time zones), so timestamps use it too rather than a second library of the same kind.

use crate::ValueError;
use chrono::{DateTime, Datelike, Timelike, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A point in time, always in UTC, written as RFC 3339 (`2026-11-29T22:51:03.123456789Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Timestamp(DateTime<Utc>);

impl Timestamp {
    /// The current time.
    pub fn now() -> Timestamp {
        Timestamp(Utc::now())
    }

    /// Parses RFC 3339 text with any offset and converts it to UTC.
    pub fn parse(text: &str) -> Result<Timestamp, ValueError> {
        DateTime::parse_from_rfc3339(text)
            .map(|t| Timestamp(t.with_timezone(&Utc)))
            .map_err(|e| ValueError::new("timestamp", format!("{text:?} is not RFC 3339: {e}")))
    }

    /// The time as RFC 3339 text in UTC (`Z`): whole seconds, then the fraction with its
    /// trailing zeros left out (none when it is zero), the form the logs have always had.
    pub fn to_rfc3339(&self) -> String {
        let t = &self.0;
        let mut text = format!(
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
            t.year(),
            t.month(),
            t.day(),
            t.hour(),
            t.minute(),
            t.second()
        );
        let nanos = self.0.nanosecond() % 1_000_000_000;
        if nanos != 0 {
            let fraction = format!("{nanos:09}");
            text.push('.');
            text.push_str(fraction.trim_end_matches('0'));
        }
        text.push('Z');
        text
    }

    /// Seconds since the Unix epoch.
    pub fn unix_seconds(&self) -> i64 {
        self.0.timestamp()
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_rfc3339())
    }
}

impl TryFrom<String> for Timestamp {
    type Error = ValueError;
    fn try_from(s: String) -> Result<Timestamp, ValueError> {
        Timestamp::parse(&s)
    }
}

impl From<Timestamp> for String {
    fn from(t: Timestamp) -> String {
        t.to_rfc3339()
    }
}

#[cfg(test)]
mod tests {
    use super::Timestamp;

    #[test]
    fn the_text_form_trims_the_fraction_and_is_always_utc() {
        let cases = [
            ("2026-11-29T22:51:03Z", "2026-11-29T22:51:03Z"),
            ("2026-11-29T22:51:03.000Z", "2026-11-29T22:51:03Z"),
            ("2026-11-29T22:51:03.1Z", "2026-11-29T22:51:03.1Z"),
            ("2026-11-29T22:51:03.120Z", "2026-11-29T22:51:03.12Z"),
            (
                "2026-11-29T22:51:03.123456789Z",
                "2026-11-29T22:51:03.123456789Z",
            ),
            ("2026-11-30T00:51:03.5+02:00", "2026-11-29T22:51:03.5Z"),
        ];
        for (text, want) in cases {
            let parsed = Timestamp::parse(text).unwrap();
            assert_eq!(parsed.to_rfc3339(), want, "{text}");
            assert_eq!(Timestamp::parse(want).unwrap(), parsed, "{text}");
        }
    }

    #[test]
    fn text_that_is_not_rfc_3339_is_refused_and_named() {
        for bad in ["", "2026-11-29", "2026-11-29 22:51", "yesterday"] {
            let err = Timestamp::parse(bad).unwrap_err().to_string();
            assert!(err.contains("is not RFC 3339"), "{bad}: {err}");
        }
    }

    #[test]
    fn unix_seconds_counts_from_the_epoch() {
        let t = Timestamp::parse("1970-01-02T00:00:00Z").unwrap();
        assert_eq!(t.unix_seconds(), 86_400);
    }
}
