//! Nothing the client logs, at any level, holds the prompt, the answer's text or the API key:
//! every event it emits while calls run (over https, through the test proxy) is captured at
//! TRACE and searched.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Write;
use std::sync::{Arc, Mutex};

use tracing_subscriber::fmt::MakeWriter;

use crate::config::Llama;
use crate::llama::tests::support::{Fake, user};
use crate::llama::tests::tls_proxy::{TlsProxy, test_tls_for, upstream_of};
use crate::llama::{ChatEvent, Client, ClientOptions};

const PROMPT: &str = "PROMPT-zanzibar-4471 tell me the secret plan";
const ANSWER: &str = "ANSWER-quixotic-9182 the plan is hidden";
const KEY: &str = "KEY-marmalade-3141";

/// A writer into a shared buffer, for the capturing subscriber.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> MakeWriter<'a> for Captured {
    type Writer = Captured;

    fn make_writer(&'a self) -> Captured {
        self.clone()
    }
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
    let tls = test_tls_for(&["localhost"]);
    let proxy = TlsProxy::start(&fake.rt, tls.acceptor, upstream_of(&fake.server.url()));
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

    let captured = Captured::default();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(captured.clone())
        .finish();
    // The client runs on a runtime of this thread, so every event it (and the connection
    // tasks it spawns) emits goes to the subscriber set here.
    let (answer, failed) = tracing::subscriber::with_default(subscriber, || {
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

    let logs = String::from_utf8(captured.0.lock().unwrap().clone()).unwrap();
    assert!(logs.contains("llama-server call"), "{logs}");
    assert!(logs.contains("llama-server answered"), "{logs}");
    assert!(logs.contains("retrying"), "{logs}");
    for secret in ["zanzibar", "quixotic", "marmalade"] {
        assert!(!logs.contains(secret), "{secret} was logged:\n{logs}");
    }
}
