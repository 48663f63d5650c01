//! Where the scheduler's time comes from: the system clock with tokio's timers in loopd, a
//! clock the tests advance by hand in theirs (no test sleeps to see a schedule run).

use chrono::{DateTime, Utc};
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// The longest the system clock sleeps at once, in milliseconds: a wall clock set forward or
/// back (NTP at boot, a resumed laptop) is noticed within it.
pub const MAX_SLEEP_MS: u64 = 60_000;

/// A future a clock resolves when its time comes.
pub type Sleep<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// The scheduler's clock.
pub trait Clock: Send + Sync + 'static {
    /// The time now, in UTC.
    fn now(&self) -> DateTime<Utc>;
    /// Resolves at `t` or later (or a little before, on the system clock: the caller looks at
    /// [`Clock::now`] again and sleeps on).
    fn sleep_until(&self, t: DateTime<Utc>) -> Sleep<'_>;
}

/// The system clock, with tokio's timers.
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> DateTime<Utc> {
        Utc::now()
    }

    fn sleep_until(&self, t: DateTime<Utc>) -> Sleep<'_> {
        let left = (t - Utc::now())
            .to_std()
            .unwrap_or(Duration::ZERO)
            .min(Duration::from_millis(MAX_SLEEP_MS));
        Box::pin(tokio::time::sleep(left))
    }
}

/// A clock that moves only when a test advances it; whoever sleeps on it wakes once it is
/// advanced to their time.
#[cfg(test)]
#[derive(Debug)]
pub struct FakeClock {
    now: tokio::sync::watch::Sender<DateTime<Utc>>,
}

#[cfg(test)]
impl FakeClock {
    /// A clock at `start`.
    pub fn at(start: DateTime<Utc>) -> std::sync::Arc<FakeClock> {
        std::sync::Arc::new(FakeClock {
            now: tokio::sync::watch::Sender::new(start),
        })
    }

    /// Moves it forward by `by`, waking whoever sleeps until then.
    pub fn advance(&self, by: Duration) {
        self.now.send_modify(|now| {
            *now += chrono::Duration::from_std(by).unwrap_or(chrono::Duration::zero());
        });
    }

    /// Sets it to `t`.
    pub fn set(&self, t: DateTime<Utc>) {
        self.now.send_replace(t);
    }
}

#[cfg(test)]
impl Clock for FakeClock {
    fn now(&self) -> DateTime<Utc> {
        *self.now.borrow()
    }

    fn sleep_until(&self, t: DateTime<Utc>) -> Sleep<'_> {
        let mut now = self.now.subscribe();
        Box::pin(async move {
            // The sender lives as long as the clock, which outlives this borrow.
            let _ = now.wait_for(|now| *now >= t).await;
        })
    }
}
