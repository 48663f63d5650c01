//! The query of `GET /v1/usage[?session=ID][&day=YYYY-MM-DD]`, checked before the backend
//! sees it.

use bxcore::SessionId;
use chrono::NaiveDate;

/// What a usage report is asked for (see `proto::api::UsageReport`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct UsageQuery {
    /// One session; every session when `None`.
    pub session: Option<SessionId>,
    /// One day (in `[budgets] timezone`); today, or a session's whole life, when `None`.
    pub day: Option<NaiveDate>,
}

impl UsageQuery {
    /// The query of `?session=ID&day=YYYY-MM-DD` (both optional, each at most once); anything
    /// else in it is an error that says what.
    pub fn parse(query: Option<&str>) -> Result<UsageQuery, String> {
        let mut parsed = UsageQuery::default();
        for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            let given = match key {
                "session" => parsed.session.is_some(),
                "day" => parsed.day.is_some(),
                _ => false,
            };
            // Which one was meant is not for loopd to guess.
            if given {
                return Err(format!(
                    "query parameter {key:?} is given more than once; give it once"
                ));
            }
            match key {
                "session" => {
                    let id = SessionId::new(value).map_err(|e| {
                        format!("query parameter session={value:?} is not a session id: {e}")
                    })?;
                    parsed.session = Some(id);
                }
                "day" => parsed.day = Some(parse_day(value)?),
                _ => {
                    return Err(format!(
                        "unknown query parameter {key:?}; use session and day"
                    ));
                }
            }
        }
        Ok(parsed)
    }
}

/// A day written `YYYY-MM-DD`, a date that exists.
pub fn parse_day(text: &str) -> Result<NaiveDate, String> {
    let refused = || format!("day={text:?} is not a date written YYYY-MM-DD");
    let day: NaiveDate = text.parse().map_err(|_| refused())?;
    // chrono also reads `2026-1-5` and `+2026-01-05`; loopd writes and names days one way.
    if day.to_string() != text {
        return Err(refused());
    }
    Ok(day)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_query_names_a_session_a_day_both_or_neither() {
        assert_eq!(UsageQuery::parse(None), Ok(UsageQuery::default()));
        let both = UsageQuery::parse(Some("session=a&day=2026-12-01")).unwrap();
        assert_eq!(both.session.unwrap().as_str(), "a");
        assert_eq!(both.day.unwrap().to_string(), "2026-12-01");
    }

    #[test]
    fn a_bad_day_session_or_key_is_refused_by_name() {
        for (query, named) in [
            ("day=2026-02-30", "day=\"2026-02-30\""),
            ("day=2026-1-5", "day=\"2026-1-5\""),
            ("day=yesterday", "day=\"yesterday\""),
            ("session=..", "session=\"..\""),
            ("session=", "session=\"\""),
            ("sessions=a", "\"sessions\""),
        ] {
            let err = UsageQuery::parse(Some(query)).unwrap_err();
            assert!(err.contains(named), "{query}: {err}");
        }
    }

    #[test]
    fn a_key_given_twice_is_refused_by_name() {
        for (query, key) in [
            ("session=a&session=b", "session"),
            ("day=2026-12-01&session=a&day=2026-12-02", "day"),
        ] {
            let err = UsageQuery::parse(Some(query)).unwrap_err();
            assert!(
                err.contains(&format!("{key:?}")) && err.contains("more than once"),
                "{query}: {err}"
            );
        }
    }
}
