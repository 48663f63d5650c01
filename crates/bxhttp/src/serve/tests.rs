#![allow(clippy::unwrap_used, clippy::expect_used)]
//! One connection's task (`connection`) driven by hand: a request that is already in the
//! socket when the accept loop asks an idle keep-alive connection to close (to make room at
//! the cap) is read and answered, never reset; asked with nothing there, it closes. A client that sent it cannot tell a reset
//! from a request that ran, so loopd fails such a tool call ("tool broker unavailable").

use super::connection;
use crate::activity::Activity;
use crate::answer::Body;
use crate::{Handler, Limits, Names, RequestBody};
use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::watch;

/// How many times the race is set up: whether the task sees the ask to close or the request
/// first is the runtime's choice (`select!` picks a branch at random), so one round may miss it.
const ROUNDS: usize = 32;
/// The longest a test waits for an answer or a close.
const WAIT: Duration = Duration::from_secs(10);
const REQUEST: &[u8] = b"GET /x HTTP/1.1\r\nhost: t\r\n\r\n";

/// Answers every request `ok`.
struct Ok200;

impl Handler<UnixStream> for Ok200 {
    type Body = Body;
    const NAMES: Names = Names::new("testd", "test.socket_group", "test");

    async fn check_peer(&self, _stream: &UnixStream) -> Result<(), String> {
        Ok(())
    }

    fn handle(
        &self,
        _request: Request<RequestBody>,
    ) -> impl Future<Output = Response<Body>> + Send + use<> {
        std::future::ready(Response::new(Full::new(Bytes::from_static(b"ok")).boxed()))
    }
}

fn limits() -> Limits {
    Limits {
        max_connections: 1,
        header_read_timeout_ms: 60_000,
        idle_timeout_ms: 60_000,
        shutdown_drain_ms: 1_000,
    }
}

/// Reads one whole answer of `ok`; how reading ended otherwise (a close, a reset).
async fn answer_on(client: &mut UnixStream) -> Result<(), String> {
    let mut all = Vec::new();
    let mut chunk = [0u8; 1024];
    while !all.ends_with(b"\r\n\r\nok") {
        match tokio::time::timeout(WAIT, client.read(&mut chunk)).await {
            Err(_) => return Err("no answer in time".into()),
            Ok(Ok(0)) => return Err(format!("closed after {:?}", String::from_utf8_lossy(&all))),
            Ok(Ok(n)) => all.extend_from_slice(&chunk[..n]),
            Ok(Err(e)) => return Err(format!("{e} after {:?}", String::from_utf8_lossy(&all))),
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_request_in_the_socket_of_an_idle_connection_asked_to_close_is_answered() {
    for round in 0..ROUNDS {
        let (server, mut client) = UnixStream::pair().unwrap();
        let activity = Arc::new(Activity::new());
        let (_stop, stopped) = watch::channel(false);
        let task = tokio::spawn(connection(
            server,
            Arc::new(Ok200),
            Arc::clone(&activity),
            limits(),
            "testd",
            stopped,
        ));
        client.write_all(REQUEST).await.unwrap();
        answer_on(&mut client).await.unwrap();
        // Idle between requests. Without yielding to the connection's task: the client's next
        // request reaches the socket, and the accept loop asks the connection to close.
        assert_eq!(client.try_write(REQUEST).unwrap(), REQUEST.len());
        activity.ask_to_close();
        assert_eq!(answer_on(&mut client).await, Ok(()), "round {round}");
        // Asked again with nothing in the socket, it closes.
        activity.ask_to_close();
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(WAIT, client.read_to_end(&mut rest)).await;
        assert!(matches!(closed, Ok(Ok(_))), "round {round}: {closed:?}");
        tokio::time::timeout(WAIT, task).await.unwrap().unwrap();
    }
}
