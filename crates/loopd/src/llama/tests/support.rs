//! Shared by the llama client's tests and every test that needs a model: fakellama on its own
//! runtime, and a client for it.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use crate::blocking::Blocking;
use crate::llama::{
    ChatEvent, ChatMessage, ChatRequest, Client, ClientOptions, Completion, InferError,
};

/// Fast retries, so tests of backoff do not wait.
pub const TEST_BACKOFF_INITIAL_MS: u64 = 1;
/// The cap of the fast retries.
pub const TEST_BACKOFF_MAX_MS: u64 = 4;
/// Tries in all.
pub const TEST_ATTEMPTS: u32 = 3;

/// A fakellama server and the runtime it (and the client) runs on. The server is dropped
/// first.
pub struct Fake {
    pub server: fakellama::Handle,
    pub rt: tokio::runtime::Runtime,
}

pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

impl Fake {
    pub fn start(options: fakellama::Options) -> Fake {
        let rt = runtime();
        let server = rt.block_on(fakellama::start(options)).unwrap();
        Fake { server, rt }
    }

    pub fn script(toml: &str) -> Fake {
        Fake::start(fakellama::Options {
            script: fakellama::Script::parse(toml).unwrap(),
            ..Default::default()
        })
    }

    /// The blocking adapter on the runtime fakellama runs on.
    pub fn blocking(&self) -> Blocking {
        Blocking::new(self.rt.handle().clone())
    }

    pub fn client(&self) -> Client {
        self.client_with(|_| {})
    }

    pub fn client_with(&self, tweak: impl FnOnce(&mut ClientOptions)) -> Client {
        client_for(&self.server.url(), tweak)
    }
}

/// A client for `url` with fast retries.
pub fn client_for(url: &str, tweak: impl FnOnce(&mut ClientOptions)) -> Client {
    let mut options = ClientOptions::for_url(url).unwrap();
    options.retry_max_attempts = TEST_ATTEMPTS;
    options.retry_initial_backoff_ms = TEST_BACKOFF_INITIAL_MS;
    options.retry_max_backoff_ms = TEST_BACKOFF_MAX_MS;
    tweak(&mut options);
    Client::new(options)
}

/// A URL where nothing listens: a port that was just free.
pub fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}")
}

/// A request of one user message on slot 0, no tools, thinking off.
pub fn user(text: &str) -> ChatRequest {
    ChatRequest {
        slot: 0,
        messages: vec![ChatMessage::User {
            content: text.to_owned(),
        }],
        tools: vec![],
        thinking: false,
        banned: Vec::new(),
    }
}

/// `chat_with_retry` (never cancelled), waited for through `blocking`, with the events it
/// reported.
pub fn chat_retry(
    blocking: &Blocking,
    client: &Client,
    request: &ChatRequest,
) -> (Vec<ChatEvent>, Result<Completion, InferError>) {
    let mut events = Vec::new();
    let never = tokio_util::sync::CancellationToken::new();
    let mut note = |e: &ChatEvent| events.push(e.clone());
    let result = blocking.wait(client.chat_with_retry(request, &mut note, &never));
    (events, result)
}

/// One try (`chat`), with the events it reported.
pub fn chat_once(
    blocking: &Blocking,
    client: &Client,
    request: &ChatRequest,
) -> (Vec<ChatEvent>, Result<Completion, InferError>) {
    let mut events = Vec::new();
    let never = tokio_util::sync::CancellationToken::new();
    let mut note = |e: &ChatEvent| events.push(e.clone());
    let result = blocking.wait(client.chat(request, &mut note, &never));
    (events, result)
}

/// The text of the content events, joined.
pub fn content_of(events: &[ChatEvent]) -> String {
    events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::Content(t) => Some(t.as_str()),
            _ => None,
        })
        .collect()
}

/// The attempt events as `(attempt, delay_ms)`.
pub fn attempts_of(events: &[ChatEvent]) -> Vec<(u32, u64)> {
    events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::Attempt {
                attempt, delay_ms, ..
            } => Some((*attempt, *delay_ms)),
            _ => None,
        })
        .collect()
}
