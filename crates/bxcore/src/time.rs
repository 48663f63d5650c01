//! UTC timestamps, written as RFC 3339.

use crate::ValueError;
use serde::{Deserialize, Serialize};
use std::fmt;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;

/// A point in time, always in UTC, written as RFC 3339 (`2026-11-29T22:51:03.123456789Z`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Timestamp(OffsetDateTime);

impl Timestamp {
    /// The current time.
    pub fn now() -> Timestamp {
        Timestamp(OffsetDateTime::now_utc())
    }

    /// Parses RFC 3339 text with any offset and converts it to UTC.
    pub fn parse(text: &str) -> Result<Timestamp, ValueError> {
        OffsetDateTime::parse(text, &Rfc3339)
            .map(|t| Timestamp(t.to_offset(time::UtcOffset::UTC)))
            .map_err(|e| ValueError::new("timestamp", format!("{text:?} is not RFC 3339: {e}")))
    }

    /// The time as RFC 3339 text in UTC (`Z`).
    pub fn to_rfc3339(&self) -> String {
        // Formatting a UTC time with a four-digit year cannot fail; the fallback keeps the
        // function total for years past 9999.
        self.0
            .format(&Rfc3339)
            .unwrap_or_else(|_| format!("{}", self.0.unix_timestamp()))
    }

    /// Seconds since the Unix epoch.
    pub fn unix_seconds(&self) -> i64 {
        self.0.unix_timestamp()
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
