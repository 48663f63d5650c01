//! Bounded exponential backoff, and waits that notice a cancel flag promptly.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use tokio::time::Instant;

/// How often a wait (or a running request) looks at the cancel flag, in milliseconds.
pub const CANCEL_POLL_INTERVAL_MS: u64 = 10;

/// The wait after failed try `attempt` (from 1): `initial_ms` doubled for each earlier
/// failure, at most `max_ms`.
pub fn backoff_ms(attempt: u32, initial_ms: u64, max_ms: u64) -> u64 {
    let doublings = attempt.saturating_sub(1).min(u64::BITS - 1);
    initial_ms.saturating_mul(1u64 << doublings).min(max_ms)
}

/// Waits `delay_ms`; returns `false` (early) when `cancelled` is set.
pub async fn wait_unless_cancelled(delay_ms: u64, cancelled: &AtomicBool) -> bool {
    let deadline = Instant::now() + Duration::from_millis(delay_ms);
    loop {
        if cancelled.load(Ordering::Relaxed) {
            return false;
        }
        let now = Instant::now();
        if now >= deadline {
            return true;
        }
        let step = Duration::from_millis(CANCEL_POLL_INTERVAL_MS).min(deadline - now);
        tokio::time::sleep(step).await;
    }
}

/// Resolves once `cancelled` is set (checked every [`CANCEL_POLL_INTERVAL_MS`]).
pub async fn until_cancelled(cancelled: &AtomicBool) {
    while !cancelled.load(Ordering::Relaxed) {
        tokio::time::sleep(Duration::from_millis(CANCEL_POLL_INTERVAL_MS)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_retry_backoff_doubles_up_to_the_cap() {
        let waits: Vec<u64> = (1..=6).map(|a| backoff_ms(a, 250, 5_000)).collect();
        assert_eq!(waits, [250, 500, 1_000, 2_000, 4_000, 5_000]);
        assert_eq!(backoff_ms(200, 250, 5_000), 5_000);
        assert_eq!(backoff_ms(64, u64::MAX / 2, u64::MAX), u64::MAX);
    }
}
