//! The client's [`Faults`](crate::llama::Faults): what its calls and probes record, and that
//! its clones share them.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::llama::tests::support::{Fake, chat_once, chat_retry, client_for, runtime, user};
use crate::llama::{FaultState, Health};

#[test]
fn a_refused_connection_fails_the_endpoint_until_a_later_success() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("llama.sock");
    let url = format!("unix:{}", socket.display());
    let client = client_for(&url, |_| {});
    let shared = client.with_max_tokens(16);
    let rt = runtime();
    let blocking = crate::blocking::Blocking::new(rt.handle().clone());

    let (_, done) = chat_retry(&blocking, &client, &user("anyone there?"));
    assert!(done.is_err());
    let state = client.faults().snapshot();
    assert!(state.failing, "{state:?}");
    let last = state.last_error.unwrap();
    assert!(last.contains(&url), "names the URL: {last}");
    assert!(shared.faults().snapshot().failing, "with_max_tokens shares");

    // Now a server comes up on that socket: the next success clears the fault.
    let fake = Fake::start(fakellama::Options {
        listen: fakellama::Listen::Unix(socket.clone()),
        ..Default::default()
    });
    let (_, done) = chat_once(&fake.blocking(), &shared, &user("hello"));
    done.unwrap();
    assert_eq!(client.faults().snapshot(), FaultState::default());
    assert_eq!(client.clone().faults().snapshot(), FaultState::default());
}

#[test]
fn probes_leave_the_faults_alone_and_clients_keep_their_own() {
    let fake = Fake::start(fakellama::Options {
        loading_ms: 600_000,
        ..Default::default()
    });
    let client = fake.client();
    let blocking = fake.blocking();
    assert!(matches!(
        blocking.wait(client.health()).unwrap(),
        Health::Loading { .. }
    ));
    // A look is the router's to judge; a good one must not end a call's fault either.
    assert_eq!(client.faults().snapshot(), FaultState::default());
    let (_, done) = chat_once(&blocking, &client, &user("x"));
    assert!(done.is_err(), "a loading server cannot take a call");
    assert!(client.faults().snapshot().failing);

    let ready = Fake::start(fakellama::Options::default());
    let other = ready.client();
    let (_, done) = chat_once(&ready.blocking(), &other, &user("x"));
    done.unwrap();
    assert!(!other.faults().snapshot().failing);
    assert!(
        client.faults().snapshot().failing,
        "separate clients, separate faults"
    );
    other
        .faults()
        .record(&crate::llama::InferError::Stalled { after_ms: 1 });
    blocking.wait(other.health()).unwrap();
    blocking.wait(other.props()).unwrap();
    assert!(
        other.faults().snapshot().failing,
        "a good look clears no fault"
    );
}

#[test]
fn a_refused_key_is_not_an_endpoint_fault() {
    let fake = Fake::start(fakellama::Options {
        api_key: Some("sekrit".into()),
        ..Default::default()
    });
    let client = fake.client();
    let (_, done) = chat_retry(&fake.blocking(), &client, &user("hi"));
    assert!(done.is_err());
    assert_eq!(client.faults().snapshot(), FaultState::default());
}
