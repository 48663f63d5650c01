//! loopd's API event streams against a stand-in backend: SSE framing, order, the end after
//! `Ended`, pings on idle streams, and followers that fall behind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_common;

use api_common::{
    read_until, request, scripted_turn, send, start, test_options, text, turn_events,
};
use bxcore::{SessionId, TurnEnd, TurnEvent};
use http::{Method, StatusCode};

const SSE: (&str, &str) = ("accept", "text/event-stream");

#[tokio::test]
async fn api_task_stream_sends_the_turns_events_in_order_and_ends_after_ended() {
    let served = start(test_options());
    let req = request(
        Method::POST,
        "/v1/tasks",
        &[SSE],
        r#"{"session":"s1","text":"hi"}"#,
    );
    let (status, headers, body) = send(&served.socket, req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/event-stream");
    assert_eq!(headers["cache-control"], "no-cache");
    let all = text(body).await;
    let expected = scripted_turn(&SessionId::new("s1").unwrap(), 3);
    assert_eq!(turn_events(&all), expected);
    for frame in all.split_terminator("\n\n") {
        assert!(
            frame.starts_with("event: turn\ndata: {") || frame.starts_with(": "),
            "{frame:?}"
        );
        assert_eq!(
            frame.lines().count(),
            if frame.starts_with(':') { 1 } else { 2 }
        );
    }
    assert!(
        all.ends_with(
            "\"end\":\"done\",\"context\":{\"class\":\"public\",\"untrusted\":false}}\n\n"
        ),
        "{all}"
    );
    served.stop().await;
}

#[tokio::test]
async fn api_task_stream_pings_while_idle_and_goes_on_after() {
    let served = start(test_options());
    let req = request(
        Method::POST,
        "/v1/tasks",
        &[SSE],
        r#"{"session":"slow","text":"hi"}"#,
    );
    let (status, _, mut body) = send(&served.socket, req).await;
    assert_eq!(status, StatusCode::OK);
    let seen = read_until(&mut body, |s| s.contains(": ping\n\n")).await;
    assert!(turn_events(&seen).is_empty());
    let turn = served.stub.slow_turn.lock().unwrap().take().unwrap();
    turn.send(TurnEvent::Content {
        text: "late".into(),
    })
    .unwrap();
    turn.send(TurnEvent::Ended {
        turn: 3,
        end: TurnEnd::Cancelled,
        context: Default::default(),
    })
    .unwrap();
    drop(turn);
    let rest = text(body).await;
    assert_eq!(
        turn_events(&rest),
        vec![
            TurnEvent::Content {
                text: "late".into()
            },
            TurnEvent::Ended {
                turn: 3,
                end: TurnEnd::Cancelled,
                context: Default::default(),
            },
        ]
    );
    served.stop().await;
}

#[tokio::test]
async fn api_follow_streams_a_sessions_events_until_the_server_stops() {
    let served = start(test_options());
    let req = request(Method::GET, "/v1/sessions/s1/events", &[], "");
    let (status, headers, mut body) = send(&served.socket, req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "text/event-stream");
    // The answer's head arrives after the handler subscribed: these events are seen.
    let event = TurnEvent::Content { text: "a".into() };
    served.stub.follow.send(event.clone()).unwrap();
    let seen = read_until(&mut body, |s| s.contains("event: turn")).await;
    assert_eq!(turn_events(&seen), vec![event]);
    let stopping = tokio::spawn(served.stop());
    let rest = text(body).await;
    assert!(turn_events(&rest).is_empty(), "{rest}");
    api_common::bounded(stopping).await.unwrap();
}

#[tokio::test(flavor = "current_thread")]
async fn api_follower_that_falls_behind_is_told_and_goes_on() {
    let served = start(test_options());
    let req = request(Method::GET, "/v1/sessions/s1/events", &[], "");
    let (status, _, mut body) = send(&served.socket, req).await;
    assert_eq!(status, StatusCode::OK);
    // One thread and no await between the sends: the follower (capacity 4) misses 6 of 10.
    for i in 0..10 {
        let event = TurnEvent::Content {
            text: i.to_string(),
        };
        served.stub.follow.send(event).unwrap();
    }
    let seen = read_until(&mut body, |s| s.contains("\"text\":\"9\"")).await;
    assert!(seen.contains(": skipped 6 events"), "{seen}");
    let texts: Vec<String> = turn_events(&seen)
        .into_iter()
        .map(|e| match e {
            TurnEvent::Content { text } => text,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(texts, ["6", "7", "8", "9"]);
    served.stop().await;
}
