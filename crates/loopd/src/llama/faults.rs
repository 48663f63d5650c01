//! What a client saw go wrong with its endpoint, shared by the clones of a
//! [`Client`](super::Client): the final outcome of each model call and probe is recorded, so
//! routing can keep new turns off an endpoint that is failing and `boxctl status` can say why.

use std::sync::Mutex;

use super::error::InferError;

/// The endpoint's state as the client last saw it. `Send + Sync`; the default is a healthy
/// endpoint with no error.
#[derive(Debug, Default)]
pub struct Faults {
    /// The state; a lock held only to copy or replace it.
    state: Mutex<FaultState>,
}

/// A snapshot of [`Faults`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaultState {
    /// Whether the last call or probe that ended failed for the endpoint's own fault (see
    /// [`InferError::is_endpoint_fault`]).
    pub failing: bool,
    /// That failure's message (naming the URL where it was a connection's); `None` when not
    /// failing.
    pub last_error: Option<String>,
    /// When that failure was recorded: routing keeps new turns off the endpoint for a while
    /// after it, whatever `/health` says (a hung GPU still answers it).
    pub since: Option<std::time::Instant>,
}

impl Faults {
    /// The state now.
    pub fn snapshot(&self) -> FaultState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// A call or probe ended in `error`: an endpoint fault (connect, stall, timeout, a
    /// broken or unreadable answer, 503 after the retries, a gateway's 502/504) marks the
    /// endpoint failing with its message. Any other error (the session's context is full,
    /// a 4xx, the call cancelled, loopd misconfigured) says nothing about the endpoint's
    /// health and changes nothing.
    pub fn record(&self, error: &InferError) {
        if !error.is_endpoint_fault() {
            return;
        }
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.failing = true;
        state.last_error = Some(error.to_string());
        state.since = Some(std::time::Instant::now());
    }

    /// A call or probe succeeded: the endpoint is no longer failing, and its error is
    /// forgotten.
    pub fn clear(&self) {
        *self.state.lock().unwrap_or_else(|p| p.into_inner()) = FaultState::default();
    }

    /// Records the outcome of a call or probe: [`Faults::clear`] on success,
    /// [`Faults::record`] on failure.
    pub(crate) fn note<T>(&self, outcome: &Result<T, InferError>) {
        match outcome {
            Ok(_) => self.clear(),
            Err(error) => self.record(error),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn connect() -> InferError {
        InferError::Connect {
            url: "http://127.0.0.1:9".into(),
            message: "refused".into(),
        }
    }

    #[test]
    fn llama_faults_are_send_sync_and_start_healthy() {
        fn shared<T: Send + Sync + Default>() {}
        shared::<Faults>();
        assert_eq!(Faults::default().snapshot(), FaultState::default());
    }

    #[test]
    fn llama_faults_record_endpoint_faults_and_clear_on_success() {
        let faults = Faults::default();
        faults.record(&connect());
        let state = faults.snapshot();
        assert!(state.failing);
        assert!(
            state
                .last_error
                .as_deref()
                .unwrap()
                .contains("http://127.0.0.1:9"),
            "{state:?}"
        );
        faults.note(&Ok::<(), InferError>(()));
        assert_eq!(faults.snapshot(), FaultState::default());
    }

    #[test]
    fn llama_faults_ignore_what_is_not_the_endpoints_fault() {
        let faults = Faults::default();
        for error in [
            InferError::Cancelled,
            InferError::SessionFull {
                n_prompt_tokens: 9,
                n_ctx: 8,
                message: "too long".into(),
            },
            InferError::Server {
                status: 401,
                kind: "authentication_error".into(),
                message: "Invalid API Key".into(),
            },
            InferError::BadConfig {
                message: "bad".into(),
            },
        ] {
            faults.record(&error);
            assert_eq!(faults.snapshot(), FaultState::default(), "{error:?}");
        }
        // And they leave a failing endpoint failing: only a success clears it.
        faults.record(&connect());
        faults.note(&Err::<(), _>(InferError::Cancelled));
        assert!(faults.snapshot().failing);
    }

    #[test]
    fn llama_faults_count_every_endpoint_fault() {
        for error in [
            connect(),
            InferError::Stalled { after_ms: 1 },
            InferError::Timeout { after_ms: 1 },
            InferError::Stream {
                kind: None,
                message: "cut".into(),
            },
            InferError::BadResponse {
                message: "junk".into(),
            },
            InferError::Unavailable {
                message: "Loading model".into(),
            },
            InferError::Server {
                status: 502,
                kind: String::new(),
                message: "Bad Gateway".into(),
            },
        ] {
            let faults = Faults::default();
            faults.record(&error);
            let state = faults.snapshot();
            assert!(state.failing, "{error:?}");
            assert_eq!(state.last_error, Some(error.to_string()));
        }
    }
}
