#![allow(clippy::unwrap_used, clippy::expect_used)]
//! loopd's brokerd port when brokerd is not there: the model is told, the turn goes on.

use bxcore::{CallId, Labels, SessionId};
use loopd::blocking::Blocking;
use loopd::broker::{Broker, BrokerError, UNAVAILABLE};
use loopd::tools::ToolPort;
use proto::{ToolRequest, ToolResponse};

#[test]
fn a_broker_that_is_down_gives_failed_tool_broker_unavailable() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let blocking = Blocking::new(rt.handle().clone());
    let broker = Broker::new(dir.path().join("brokerd.sock"), 1_000, blocking.clone());
    let request = ToolRequest {
        session: SessionId::new("s").unwrap(),
        turn: 1,
        call: CallId(1),
        tool: "read_file".into(),
        arguments: "{}".into(),
        context: Labels::PUBLIC,
        counts_for: None,
        approval: None,
    };
    match ToolPort::call(&broker, &request) {
        ToolResponse::Failed { message, .. } => {
            assert!(message.starts_with(UNAVAILABLE), "{message}");
            assert!(message.contains("brokerd.sock"), "{message}");
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    let err = blocking
        .wait(broker.catalogue(&SessionId::new("s").unwrap()))
        .unwrap_err();
    assert!(err.to_string().starts_with(UNAVAILABLE), "{err}");
}

#[test]
fn the_port_called_inside_an_async_task_fails_the_call_instead_of_panicking() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::new(
        dir.path().join("brokerd.sock"),
        1_000,
        Blocking::new(rt.handle().clone()),
    );
    let request = ToolRequest {
        session: SessionId::new("s").unwrap(),
        turn: 1,
        call: CallId(1),
        tool: "read_file".into(),
        arguments: "{}".into(),
        context: Labels::PUBLIC,
        counts_for: None,
        approval: None,
    };
    let (response, catalogue) = rt.block_on(async move {
        tokio::spawn(async move {
            let session = SessionId::new("s").unwrap();
            (
                ToolPort::call(&broker, &request),
                ToolPort::catalogue(&broker, &session),
            )
        })
        .await
        .unwrap()
    });
    match response {
        ToolResponse::Failed { message, .. } => {
            assert!(message.contains("only for turn threads"), "{message}");
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    assert!(catalogue.is_none());
    let e = BrokerError::from(loopd::blocking::OnRuntimeThread);
    assert!(e.to_string().contains("only for turn threads"), "{e}");
}
