//! Nothing the client logs, at any level, holds the prompt, the answer's text or the API key:
//! every event it emits while calls run (over https, through the test proxy) is captured at
//! TRACE and searched.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cell::RefCell;
use std::io::Write;
use std::sync::Once;

use tracing_subscriber::Layer;
use tracing_subscriber::layer::SubscriberExt;

use crate::config::Llama;
use crate::llama::tests::support::{Fake, user};
use crate::llama::tests::tls_proxy::{TlsProxy, test_tls_for, upstream_of};
use crate::llama::{ChatEvent, Client, ClientOptions};

const PROMPT: &str = "PROMPT-zanzibar-4471 tell me the secret plan";
const ANSWER: &str = "ANSWER-quixotic-9182 the plan is hidden";
const KEY: &str = "KEY-marmalade-3141";

thread_local! {
    /// What the global test subscriber wrote for this thread, while a capture runs on it.
    static CAPTURED: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
}

/// Writes into this thread's capture (nothing when none runs).
struct ThreadBuffer;

impl Write for ThreadBuffer {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        CAPTURED.with(|c| {
            if let Some(out) = c.borrow_mut().as_mut() {
                out.extend_from_slice(buf);
            }
        });
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Runs `f` with every event this thread emits, at any level, captured, and gives them.
///
/// One global subscriber, installed once, whose layer is enabled only on a thread with a
/// capture running: a scoped subscriber (`with_default`) can miss events when another test
/// thread fixes a callsite's interest first, which made log tests fail now and then.
fn capture<R>(f: impl FnOnce() -> R) -> (R, String) {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let layer = tracing_subscriber::fmt::layer()
            .with_ansi(false)
            .with_writer(|| ThreadBuffer)
            .with_filter(tracing_subscriber::filter::filter_fn(|_| {
                CAPTURED.with(|c| c.borrow().is_some())
            }));
        let subscriber = tracing_subscriber::registry().with(layer);
        // Another test binary's subscriber cannot be here: this is the only one loopd's
        // unit tests install.
        tracing::subscriber::set_global_default(subscriber).unwrap();
    });
    CAPTURED.with(|c| *c.borrow_mut() = Some(Vec::new()));
    let result = f();
    let logged = CAPTURED.with(|c| c.borrow_mut().take()).unwrap_or_default();
    (result, String::from_utf8(logged).unwrap())
}

#[test]
fn the_prompt_and_the_answer_are_never_logged() {
    let fake = Fake::start(fakellama::Options {
        api_key: Some(KEY.into()),
        script: fakellama::Script::parse(&format!(
            "[[rule]]\ntimes = 1\nreply = {ANSWER:?}\n[[rule]]\nerror = {{ status = 503, type = \
             \"unavailable_error\", message = \"Loading model\" }}\n"
        ))
        .unwrap(),
        ..Default::default()
    });
    let tls = test_tls_for(&["localhost"]).unwrap();
    let proxy = TlsProxy::start(
        &fake.rt,
        tls.acceptor,
        upstream_of(&fake.server.url()).unwrap(),
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (ca, key) = (dir.path().join("ca.pem"), dir.path().join("llama.key"));
    std::fs::write(&ca, &tls.ca_pem).unwrap();
    std::fs::write(&key, KEY).unwrap();
    let llama = Llama {
        retry_max_attempts: 2,
        retry_initial_backoff_ms: 1,
        retry_max_backoff_ms: 1,
        ..Llama::default()
    };
    let url = format!("https://localhost:{}", proxy.port);
    let options =
        ClientOptions::for_endpoint(&llama, "llama", &url, Some(&key), Some(&ca)).unwrap();
    let client = Client::new(options);

    // The client runs on a runtime of this thread, so every event it (and the connection
    // tasks it spawns) emits is this thread's.
    let ((answer, failed), logs) = capture(|| {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            let never = tokio_util::sync::CancellationToken::new();
            let mut text = String::new();
            let mut note = |e: &ChatEvent| {
                if let ChatEvent::Content(t) = e {
                    text.push_str(t);
                }
            };
            client
                .chat_with_retry(&user(PROMPT), &mut note, &never)
                .await
                .unwrap();
            client.prompt_tokens(&user(PROMPT)).await.unwrap();
            // The second rule: 503 on every try, retried, then logged as failed.
            let failed = client
                .chat_with_retry(&user(PROMPT), &mut |_: &ChatEvent| {}, &never)
                .await;
            (text, failed)
        })
    });
    assert_eq!(answer, ANSWER, "the answer did come through");
    assert!(failed.is_err());

    assert!(logs.contains("llama-server call"), "{logs}");
    assert!(logs.contains("llama-server answered"), "{logs}");
    assert!(logs.contains("retrying"), "{logs}");
    for secret in ["zanzibar", "quixotic", "marmalade"] {
        assert!(!logs.contains(secret), "{secret} was logged:\n{logs}");
    }
}
