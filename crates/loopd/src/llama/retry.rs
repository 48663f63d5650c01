//! Bounded exponential backoff, and a wait that ends when the call is cancelled.

use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The wait after failed try `attempt` (from 1): `initial_ms` doubled for each earlier
/// failure, at most `max_ms`.
pub fn backoff_ms(attempt: u32, initial_ms: u64, max_ms: u64) -> u64 {
    let doublings = attempt.saturating_sub(1).min(u64::BITS - 1);
    initial_ms.saturating_mul(1u64 << doublings).min(max_ms)
}

/// Waits `delay_ms`; returns `false` (early) when `cancelled` is cancelled.
pub async fn wait_unless_cancelled(delay_ms: u64, cancelled: &CancellationToken) -> bool {
    tokio::select! {
        () = tokio::time::sleep(Duration::from_millis(delay_ms)) => true,
        () = cancelled.cancelled() => false,
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
