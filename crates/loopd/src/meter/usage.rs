//! The usage accounts in memory: each day's totals per session (`proto::api::UsageTotals`),
//! and which days changed since they were last written (`store` writes those).

use bxcore::SessionId;
use chrono::NaiveDate;
use proto::api::{SessionUsage, UsageReport, UsageTotals};
use std::collections::{BTreeMap, HashMap};

/// One day's totals, by session, sorted: as a day is written and read.
pub type Day = BTreeMap<SessionId, UsageTotals>;

/// One day's totals in memory: found with one hash (every model call adds to one).
type Live = HashMap<SessionId, UsageTotals>;

/// Every day's accounts, as loaded at start and added to since.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Accounts {
    days: BTreeMap<NaiveDate, Live>,
    /// Days added to since they were last written (one, or two across midnight); kept
    /// allocated, so an add makes no allocation.
    dirty: Vec<NaiveDate>,
}

/// `into` plus `delta`, field by field (saturating: a counter never wraps).
pub fn add_totals(into: &mut UsageTotals, delta: &UsageTotals) {
    into.turns = into.turns.saturating_add(delta.turns);
    into.model_calls = into.model_calls.saturating_add(delta.model_calls);
    into.evaluated_tokens = into.evaluated_tokens.saturating_add(delta.evaluated_tokens);
    into.cached_tokens = into.cached_tokens.saturating_add(delta.cached_tokens);
    into.generated_tokens = into.generated_tokens.saturating_add(delta.generated_tokens);
    into.model_ms = into.model_ms.saturating_add(delta.model_ms);
    into.tool_calls = into.tool_calls.saturating_add(delta.tool_calls);
}

impl Accounts {
    /// Accounts holding `days`, none of them to be written.
    pub fn from_days(days: BTreeMap<NaiveDate, Day>) -> Accounts {
        Accounts {
            days: days
                .into_iter()
                .map(|(day, sessions)| (day, sessions.into_iter().collect()))
                .collect(),
            dirty: Vec::new(),
        }
    }

    /// Adds `delta` to `session`'s account of `day`.
    pub fn add(&mut self, day: NaiveDate, session: &SessionId, delta: &UsageTotals) {
        let accounts = self.days.entry(day).or_default();
        match accounts.get_mut(session) {
            Some(totals) => add_totals(totals, delta),
            None => {
                accounts.insert(session.clone(), *delta);
            }
        }
        if !self.dirty.contains(&day) {
            self.dirty.push(day);
        }
    }

    /// Every session's sums on `day`.
    pub fn day_totals(&self, day: NaiveDate) -> UsageTotals {
        let mut totals = UsageTotals::default();
        for session in self.days.get(&day).into_iter().flat_map(HashMap::values) {
            add_totals(&mut totals, session);
        }
        totals
    }

    /// Whether any day holds an account of `session`.
    pub fn knows(&self, session: &SessionId) -> bool {
        self.days.values().any(|day| day.contains_key(session))
    }

    /// The days added to since they were last written, each with its accounts now; they
    /// count as written from here on (see [`Accounts::unwritten`]).
    pub fn take_dirty(&mut self) -> Vec<(NaiveDate, Day)> {
        let days = &self.days;
        self.dirty
            .drain(..)
            .filter_map(|day| {
                let sessions = days.get(&day)?;
                Some((
                    day,
                    sessions.iter().map(|(id, t)| (id.clone(), *t)).collect(),
                ))
            })
            .collect()
    }

    /// `day` could not be written: it is written again at the next save.
    pub fn unwritten(&mut self, day: NaiveDate) {
        if !self.dirty.contains(&day) {
            self.dirty.push(day);
        }
    }

    /// The report of `GET /v1/usage` (its semantics are `UsageReport`'s): `session` over
    /// `day`, or over its whole life when `day` is `None` and a session is given; every
    /// session on `day` (today when `None`) otherwise.
    pub fn report(
        &self,
        session: Option<&SessionId>,
        day: Option<NaiveDate>,
        today: NaiveDate,
        timezone: &str,
    ) -> UsageReport {
        match session {
            Some(session) => {
                let mut totals = UsageTotals::default();
                let days: Vec<&Live> = match day {
                    Some(day) => self.days.get(&day).into_iter().collect(),
                    None => self.days.values().collect(),
                };
                for account in days.into_iter().filter_map(|d| d.get(session)) {
                    add_totals(&mut totals, account);
                }
                UsageReport {
                    day: day.map(|d| d.to_string()),
                    timezone: timezone.to_string(),
                    session: Some(session.clone()),
                    totals,
                    sessions: Vec::new(),
                }
            }
            None => {
                let day = day.unwrap_or(today);
                let mut sessions: Vec<SessionUsage> = self
                    .days
                    .get(&day)
                    .into_iter()
                    .flat_map(HashMap::iter)
                    .map(|(id, totals)| SessionUsage {
                        session: id.clone(),
                        totals: *totals,
                    })
                    .collect();
                // Largest generated first; the ids break ties.
                sessions.sort_by(|a, b| {
                    b.totals
                        .generated_tokens
                        .cmp(&a.totals.generated_tokens)
                        .then_with(|| a.session.cmp(&b.session))
                });
                UsageReport {
                    day: Some(day.to_string()),
                    timezone: timezone.to_string(),
                    session: None,
                    totals: self.day_totals(day),
                    sessions,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn id(s: &str) -> SessionId {
        SessionId::new(s).unwrap()
    }

    fn date(s: &str) -> NaiveDate {
        s.parse().unwrap()
    }

    fn generated(n: u64) -> UsageTotals {
        UsageTotals {
            model_calls: 1,
            generated_tokens: n,
            ..UsageTotals::default()
        }
    }

    #[test]
    fn reports_answer_per_day_per_session_and_a_sessions_whole_life() {
        let mut accounts = Accounts::default();
        let (d1, d2) = (date("2026-12-01"), date("2026-12-02"));
        accounts.add(d1, &id("a"), &generated(5));
        accounts.add(d1, &id("b"), &generated(7));
        accounts.add(d1, &id("a"), &generated(1));
        accounts.add(d2, &id("a"), &generated(100));

        let today = accounts.report(None, None, d1, "UTC");
        assert_eq!(today.day.as_deref(), Some("2026-12-01"));
        assert_eq!(today.totals.generated_tokens, 13);
        assert_eq!(today.totals.model_calls, 3);
        let order: Vec<_> = today.sessions.iter().map(|s| s.session.as_str()).collect();
        assert_eq!(order, ["b", "a"], "largest generated first");

        let life = accounts.report(Some(&id("a")), None, d1, "UTC");
        assert_eq!((life.day, life.totals.generated_tokens), (None, 106));
        assert!(life.sessions.is_empty());
        let one = accounts.report(Some(&id("a")), Some(d2), d1, "UTC");
        assert_eq!(one.totals.generated_tokens, 100);
        let none = accounts.report(Some(&id("c")), Some(d1), d1, "UTC");
        assert_eq!(none.totals, UsageTotals::default());
        assert!(accounts.knows(&id("b")) && !accounts.knows(&id("c")));
        assert_eq!(
            accounts.day_totals(date("2026-11-30")),
            UsageTotals::default()
        );
    }

    #[test]
    fn the_dirty_days_are_handed_out_once_and_again_when_unwritten() {
        let mut accounts = Accounts::default();
        let d1 = date("2026-12-01");
        accounts.add(d1, &id("a"), &generated(5));
        let dirty = accounts.take_dirty();
        assert_eq!(dirty.len(), 1);
        assert!(accounts.take_dirty().is_empty());
        accounts.unwritten(d1);
        assert_eq!(accounts.take_dirty(), dirty);
    }
}
