//! loopd's API at shutdown, against a stand-in backend: while the daemon's shutdown runs (the
//! engine ending its turns) the API still answers, and the events a turn sent as it ended
//! reach its stream before the stream closes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_common;

use api_common::{Stub, bounded, get, json, request, send, test_options, text, turn_events};
use bxcore::{TurnEnd, TurnEvent};
use http::{Method, StatusCode};
use loopd::api::{bind_socket, serve};
use std::sync::Arc;
use tokio::sync::oneshot;

/// Events the turn sends as it ends, all at once: far more than a stream that stopped at
/// random between them would pass on.
const LAST_EVENTS: usize = 50;

// One thread: the turn's last events and the server's stop are both ready when the stream
// next runs, as they are when loopd's engine ends its turns just before the server stops.
#[tokio::test(flavor = "current_thread")]
async fn api_events_sent_before_the_server_stops_reach_the_stream_before_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("loopd.sock");
    let listener = bind_socket(&socket, None).unwrap();
    let stub = Arc::new(Stub::new(4));
    let (signal, signalled) = oneshot::channel::<()>();
    let (grace, grace_over) = oneshot::channel::<()>();
    let ending = Arc::clone(&stub);
    let shutdown = async move {
        let _ = signalled.await;
        // The daemon's shutdown: the API goes on answering until the turns have ended.
        let _ = grace_over.await;
        let turn = ending.slow_turn.lock().unwrap().take().unwrap();
        for i in 0..LAST_EVENTS {
            turn.send(TurnEvent::Content {
                text: i.to_string(),
            })
            .unwrap();
        }
        turn.send(TurnEvent::Ended {
            turn: 3,
            end: TurnEnd::Interrupted,
            context: Default::default(),
        })
        .unwrap();
    };
    let server = tokio::spawn(serve(listener, Arc::clone(&stub), test_options(), shutdown));

    let req = request(
        Method::POST,
        "/v1/tasks",
        &[("accept", "text/event-stream")],
        r#"{"session":"slow","text":"hi"}"#,
    );
    let (status, _, body) = send(&socket, req).await;
    assert_eq!(status, StatusCode::OK);
    signal.send(()).unwrap();
    let (status, _, answer) = send(&socket, get("/v1/status")).await;
    assert_eq!(status, StatusCode::OK, "answered while the turns end");
    assert_eq!(json(answer).await["loopd"]["running"], 1);
    grace.send(()).unwrap();

    let events = turn_events(&text(body).await);
    assert_eq!(events.len(), LAST_EVENTS + 1, "{events:?}");
    assert_eq!(
        events.last(),
        Some(&TurnEvent::Ended {
            turn: 3,
            end: TurnEnd::Interrupted,
            context: Default::default(),
        })
    );
    bounded(server).await.unwrap();
}
