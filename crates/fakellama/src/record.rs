//! Chat requests recorded for assertions (`Handle::requests`, `GET /fakellama/requests`).

use std::collections::VecDeque;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The most requests kept; older ones are dropped first.
pub const MAX_RECORDED_REQUESTS: usize = 10_000;

/// One chat request as fakellama saw and answered it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecordedRequest {
    /// The request path (`/v1/chat/completions` or `/chat/completions`).
    pub path: String,
    /// The HTTP status answered (200 for a stream, even one that fails mid-way).
    pub status: u16,
    /// The slot that answered; `None` when the request failed before taking one.
    pub slot_used: Option<usize>,
    /// The request body (a JSON string holding the raw text when it was not JSON).
    pub body: Value,
    /// The rendered prompt (empty when the request was not valid).
    pub prompt: String,
    /// Tokens in the prompt.
    pub prompt_tokens: usize,
    /// Prompt tokens reused from the slot's cache.
    pub cache_n: usize,
    /// Prompt tokens evaluated anew.
    pub prompt_n: usize,
    /// Tokens generated.
    pub completion_tokens: usize,
    /// Whether the answer was streamed.
    pub stream: bool,
    /// The rule that answered (its name, or `rule N`); `None` for the default reply.
    pub rule: Option<String>,
}

impl RecordedRequest {
    /// A record of a request to `path` with `body`, all counts zero.
    pub fn new(path: &str, body: Value) -> Self {
        Self {
            path: path.to_owned(),
            status: 200,
            slot_used: None,
            body,
            prompt: String::new(),
            prompt_tokens: 0,
            cache_n: 0,
            prompt_n: 0,
            completion_tokens: 0,
            stream: false,
            rule: None,
        }
    }
}

/// The bounded list of records.
#[derive(Debug, Default)]
pub struct Recorder {
    records: Mutex<VecDeque<RecordedRequest>>,
}

impl Recorder {
    /// Appends a record, dropping the oldest past [`MAX_RECORDED_REQUESTS`].
    pub fn push(&self, record: RecordedRequest) {
        let mut records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        if records.len() >= MAX_RECORDED_REQUESTS {
            records.pop_front();
        }
        records.push_back(record);
    }

    /// All records, oldest first.
    pub fn all(&self) -> Vec<RecordedRequest> {
        let records = self.records.lock().unwrap_or_else(|p| p.into_inner());
        records.iter().cloned().collect()
    }

    /// Forgets all records.
    pub fn clear(&self) {
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}
