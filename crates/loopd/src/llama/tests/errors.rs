//! The llama client's errors, retries, timeouts and cancelling, against fakellama.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::mpsc;
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

use crate::blocking::Blocking;
use crate::llama::tests::support::{
    Fake, TEST_ATTEMPTS, attempts_of, chat_retry, client_for, content_of, dead_url, runtime, user,
};
use crate::llama::{ChatEvent, InferError};

/// How long a cancel may take to be noticed, with room for a slow test machine.
const CANCEL_NOTICED_WITHIN_MS: u128 = 1_000;
/// How long the bounded waits in these tests may take at most.
const EVENT_WAIT_MS: u64 = 10_000;

const LOADING_503: &str =
    r#"error = { status = 503, type = "unavailable_error", message = "Loading model" }"#;

#[test]
fn error_mid_stream_is_a_stream_error_with_the_servers_message() {
    let fake = Fake::script(
        r#"
        [[rule]]
        reply = "partial answer"
        error_mid_stream = { type = "server_error", message = "the model fell over" }
        "#,
    );
    let (events, e) = chat_retry(&fake.blocking(), &fake.client(), &user("go"));
    assert_eq!(content_of(&events), "partial answer");
    assert_eq!(
        e.unwrap_err(),
        InferError::Stream {
            kind: Some("server_error".into()),
            message: "the model fell over".into()
        }
    );
    assert_eq!(fake.server.requests().len(), 1, "not retried");
}

#[test]
fn unavailable_after_content_is_not_retried() {
    let fake = Fake::script(
        r#"
        [[rule]]
        reply = "half of it"
        error_mid_stream = { type = "unavailable_error", message = "going down" }
        "#,
    );
    let (events, e) = chat_retry(&fake.blocking(), &fake.client(), &user("go"));
    assert!(attempts_of(&events).is_empty(), "{events:?}");
    assert!(matches!(e, Err(InferError::Unavailable { .. })), "{e:?}");
    assert_eq!(fake.server.requests().len(), 1);
}

#[test]
fn context_overflow_is_session_full_with_the_counts() {
    let fake = Fake::start(fakellama::Options {
        n_ctx: 32,
        ..Default::default()
    });
    let long = "many words ".repeat(40);
    let (events, e) = chat_retry(&fake.blocking(), &fake.client(), &user(&long));
    assert!(events.is_empty());
    let seen = fake.server.requests();
    assert_eq!(seen.len(), 1);
    let e = e.unwrap_err();
    let InferError::SessionFull {
        n_prompt_tokens,
        n_ctx,
        message,
    } = &e
    else {
        panic!("expected SessionFull, got {e:?}");
    };
    assert_eq!(*n_prompt_tokens, seen[0].prompt_tokens as u64);
    assert_eq!(*n_ctx, 32);
    assert!(message.contains("exceeds"), "{message}");
    assert!(e.to_string().contains("a slot holds 32"), "{e}");
}

#[test]
fn unavailable_is_retried_with_backoff_then_succeeds() {
    let fake = Fake::script(&format!(
        "[[rule]]\ntimes = 2\n{LOADING_503}\n[[rule]]\nreply = \"back again\"\n"
    ));
    let (events, done) = chat_retry(&fake.blocking(), &fake.client(), &user("hi"));
    assert_eq!(attempts_of(&events), [(1, 1), (2, 2)]);
    let ChatEvent::Attempt { error, .. } = &events[0] else {
        panic!("{events:?}")
    };
    assert!(error.contains("Loading model"), "{error}");
    assert_eq!(content_of(&events), "back again");
    assert_eq!(done.unwrap().content.as_deref(), Some("back again"));
    assert_eq!(fake.server.requests().len(), 3);
}

#[test]
fn unavailable_on_every_try_gives_up() {
    let fake = Fake::script(&format!("[[rule]]\n{LOADING_503}\n"));
    let (events, e) = chat_retry(&fake.blocking(), &fake.client(), &user("hi"));
    assert_eq!(attempts_of(&events).len(), TEST_ATTEMPTS as usize - 1);
    assert_eq!(
        e.unwrap_err(),
        InferError::Unavailable {
            message: "Loading model".into()
        }
    );
    assert_eq!(fake.server.requests().len(), TEST_ATTEMPTS as usize);
}

#[test]
fn refused_connection_is_retried_then_a_connect_error() {
    let rt = runtime();
    let url = dead_url();
    let client = client_for(&url, |_| {});
    let (events, e) = chat_retry(
        &Blocking::new(rt.handle().clone()),
        &client,
        &user("anyone?"),
    );
    assert_eq!(attempts_of(&events), [(1, 1), (2, 2)]);
    let e = e.unwrap_err();
    assert!(matches!(&e, InferError::Connect { .. }), "{e:?}");
    assert!(
        e.to_string()
            .starts_with(&format!("cannot reach llama-server at {url}: ")),
        "{e}"
    );
}

#[test]
fn server_error_is_reported_with_its_message_and_not_retried() {
    let fake = Fake::script(
        "[[rule]]\nerror = { status = 500, type = \"server_error\", message = \"kaboom\" }\n",
    );
    let (events, e) = chat_retry(&fake.blocking(), &fake.client(), &user("hi"));
    assert!(events.is_empty());
    let e = e.unwrap_err();
    assert_eq!(
        e,
        InferError::Server {
            status: 500,
            kind: "server_error".into(),
            message: "kaboom".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "llama-server failed (HTTP 500, server_error): kaboom"
    );
    assert_eq!(fake.server.requests().len(), 1);
}

#[test]
fn cancel_from_another_thread_stops_a_slow_stream_promptly() {
    // 100 ms per chunk and a long reply: the whole stream would take seconds.
    let fake = Fake::start(fakellama::Options {
        delay_ms: 100,
        script: fakellama::Script::parse(&format!(
            "[[rule]]\nreply = \"{}\"\n",
            "word ".repeat(60)
        ))
        .unwrap(),
        ..Default::default()
    });
    let client = fake.client();
    let cancelled = CancellationToken::new();
    let (first_content, content_seen) = mpsc::channel::<()>();
    let (outcome, set_at, events) = std::thread::scope(|s| {
        let flag = &cancelled;
        let canceller = s.spawn(move || {
            content_seen
                .recv_timeout(Duration::from_millis(EVENT_WAIT_MS))
                .unwrap();
            let at = Instant::now();
            flag.cancel();
            at
        });
        let mut events = Vec::new();
        let mut note = |e: &ChatEvent| {
            if matches!(e, ChatEvent::Content(_)) {
                let _ = first_content.send(());
            }
            events.push(e.clone());
        };
        let outcome =
            fake.blocking()
                .wait(client.chat_with_retry(&user("talk"), &mut note, &cancelled));
        (outcome, canceller.join().unwrap(), events)
    });
    let noticed_after = set_at.elapsed().as_millis();
    assert_eq!(outcome.unwrap_err(), InferError::Cancelled);
    assert!(
        noticed_after < CANCEL_NOTICED_WITHIN_MS,
        "{noticed_after} ms"
    );
    assert!(content_of(&events).len() < "word ".repeat(60).len());
}

#[test]
fn cancel_during_the_backoff_wait_is_prompt() {
    let rt = runtime();
    let client = client_for(&dead_url(), |o| {
        o.retry_initial_backoff_ms = 60_000;
        o.retry_max_backoff_ms = 60_000;
    });
    let cancelled = CancellationToken::new();
    let (attempted, attempt_seen) = mpsc::channel::<()>();
    let (outcome, set_at) = std::thread::scope(|s| {
        let flag = &cancelled;
        let canceller = s.spawn(move || {
            attempt_seen
                .recv_timeout(Duration::from_millis(EVENT_WAIT_MS))
                .unwrap();
            let at = Instant::now();
            flag.cancel();
            at
        });
        let mut note = |e: &ChatEvent| {
            if matches!(e, ChatEvent::Attempt { .. }) {
                let _ = attempted.send(());
            }
        };
        let outcome = Blocking::new(rt.handle().clone()).wait(client.chat_with_retry(
            &user("hi"),
            &mut note,
            &cancelled,
        ));
        (outcome, canceller.join().unwrap())
    });
    assert_eq!(outcome.unwrap_err(), InferError::Cancelled);
    assert!(set_at.elapsed().as_millis() < CANCEL_NOTICED_WITHIN_MS);
}

#[test]
fn a_cancelled_flag_stops_before_sending() {
    let fake = Fake::start(fakellama::Options::default());
    let cancelled = CancellationToken::new();
    cancelled.cancel();
    let e = fake.blocking().wait(fake.client().chat(
        &user("hi"),
        &mut |_: &ChatEvent| {},
        &cancelled,
    ));
    assert_eq!(e.unwrap_err(), InferError::Cancelled);
    assert!(fake.server.requests().is_empty());
}

#[test]
fn a_slow_answer_times_out() {
    let fake = Fake::start(fakellama::Options {
        delay_ms: 2_000,
        ..Default::default()
    });
    let client = fake.client_with(|o| o.request_timeout_ms = 200);
    let (events, e) = chat_retry(&fake.blocking(), &client, &user("hi"));
    assert_eq!(e.unwrap_err(), InferError::Timeout { after_ms: 200 });
    assert!(attempts_of(&events).is_empty(), "a timeout is not retried");
}

#[test]
fn a_server_that_stops_sending_fails_the_call_at_the_stall_limit() {
    // fakellama waits 2 s before each chunk: after the answer's head nothing comes for 2 s,
    // far less than the request limit (600 s by default) but more than the stall limit.
    let fake = Fake::start(fakellama::Options {
        delay_ms: 2_000,
        ..Default::default()
    });
    let client = fake.client_with(|o| o.stall_timeout_ms = 200);
    let started = Instant::now();
    let (events, e) = chat_retry(&fake.blocking(), &client, &user("hi"));
    let e = e.unwrap_err();
    assert_eq!(e, InferError::Stalled { after_ms: 200 });
    assert!(e.to_string().contains("llama.stall_timeout_ms"), "{e}");
    assert!(started.elapsed() < Duration::from_millis(2_000));
    assert!(attempts_of(&events).is_empty(), "a stall is not retried");
}
