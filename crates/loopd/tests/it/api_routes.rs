//! loopd's API routes against a stand-in backend: each route's answer, and every error
//! status with its JSON body.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_common;

use api_common::{Chunks, S1_RECORDS, get, json, request, send, start, test_options, text};
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use proto::api::{
    ApiError, CancelAnswer, CompactAnswer, RecordsPage, SessionList, Status, TaskAccepted,
    error_kind,
};
use std::os::unix::fs::MetadataExt;

async fn error_of(body: bxhttp::client::AnswerBody) -> ApiError {
    let raw = text(body).await;
    serde_json::from_str(&raw).unwrap_or_else(|e| panic!("not an ApiError ({e}): {raw}"))
}

#[tokio::test]
async fn api_socket_has_mode_0660_and_our_own_uid_may_connect() {
    let served = start(test_options());
    let mode = std::fs::metadata(&served.socket).unwrap().mode();
    assert_eq!(mode & 0o777, 0o660, "{mode:o}");
    let (status, _, _) = send(&served.socket, get("/v1/status")).await;
    assert_eq!(status, StatusCode::OK);
    let socket = served.socket.clone();
    served.stop().await;
    assert!(!socket.exists(), "the socket file is removed at shutdown");
}

#[tokio::test]
async fn api_post_task_without_event_stream_answers_202_with_session_and_turn() {
    let served = start(test_options());
    let body = r#"{"session":"s1","text":"what time is it?"}"#;
    let (status, headers, body) = send(
        &served.socket,
        request(Method::POST, "/v1/tasks", &[], body),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(headers["content-type"], "application/json");
    let accepted: TaskAccepted = serde_json::from_str(&text(body).await).unwrap();
    assert_eq!(accepted.session.as_str(), "s1");
    assert_eq!(accepted.turn, 3);
    let submitted = served.stub.submitted.lock().unwrap().clone();
    assert_eq!(submitted.len(), 1);
    assert_eq!(submitted[0].text, "what time is it?");
    served.stop().await;
}

#[tokio::test]
async fn api_post_task_without_session_starts_a_new_one() {
    let served = start(test_options());
    let req = request(Method::POST, "/v1/tasks", &[], r#"{"text":"hi"}"#);
    let (status, _, body) = send(&served.socket, req).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    assert_eq!(json(body).await["session"], "new-1");
    served.stop().await;
}

#[tokio::test]
async fn api_sessions_lists_every_session() {
    let served = start(test_options());
    let (status, _, body) = send(&served.socket, get("/v1/sessions")).await;
    assert_eq!(status, StatusCode::OK);
    let list: SessionList = serde_json::from_str(&text(body).await).unwrap();
    assert_eq!(list.sessions.len(), 1);
    assert_eq!(list.sessions[0].id.as_str(), "s1");
    assert!(list.sessions[0].busy);
    assert_eq!(list.sessions[0].queued, 2);
    served.stop().await;
}

#[tokio::test]
async fn api_records_page_by_default_size_and_by_query() {
    let served = start(test_options());
    let (status, _, body) = send(&served.socket, get("/v1/sessions/s1")).await;
    assert_eq!(status, StatusCode::OK);
    let page: RecordsPage = serde_json::from_str(&text(body).await).unwrap();
    assert_eq!((page.from, page.records.len(), page.next), (0, 2, Some(2)));
    assert_eq!(*served.stub.last_page.lock().unwrap(), Some((0, 2)));

    let (_, _, body) = send(&served.socket, get("/v1/sessions/s1?from=3&limit=50")).await;
    let page: RecordsPage = serde_json::from_str(&text(body).await).unwrap();
    assert_eq!(page.records.len() as u64, S1_RECORDS - 3);
    assert_eq!(page.next, None);
    assert_eq!(page.records[0], api_common::s1_record(3));

    let (_, _, _) = send(&served.socket, get("/v1/sessions/s1?limit=5000000")).await;
    let capped = served.stub.last_page.lock().unwrap().unwrap().1;
    assert_eq!(capped, loopd::api::MAX_PAGE_RECORDS);
    served.stop().await;
}

#[tokio::test]
async fn api_cancel_and_status_answer_their_bodies() {
    let served = start(test_options());
    let req = request(Method::POST, "/v1/sessions/s1/cancel", &[], "");
    let (status, _, body) = send(&served.socket, req).await;
    assert_eq!(status, StatusCode::OK);
    let cancel: CancelAnswer = serde_json::from_str(&text(body).await).unwrap();
    assert!(cancel.cancelled);
    assert_eq!(cancel.dropped, 2);

    let (status, _, body) = send(&served.socket, get("/v1/status")).await;
    assert_eq!(status, StatusCode::OK);
    let answer: Status = serde_json::from_str(&text(body).await).unwrap();
    assert_eq!(answer, api_common::status());
    served.stop().await;
}

#[tokio::test]
async fn api_compact_answers_the_new_epoch_and_says_why_it_could_not() {
    let served = start(test_options());
    let req = request(Method::POST, "/v1/sessions/s1/compact", &[], "");
    let (status, _, body) = send(&served.socket, req).await;
    assert_eq!(status, StatusCode::OK);
    let answer: CompactAnswer = serde_json::from_str(&text(body).await).unwrap();
    assert_eq!((answer.session.as_str(), answer.epoch), ("s1", 2));

    for (session, code, kind) in [
        ("empty", StatusCode::BAD_REQUEST, error_kind::BAD_REQUEST),
        ("busy", StatusCode::CONFLICT, error_kind::BUSY),
        ("nope", StatusCode::NOT_FOUND, error_kind::NOT_FOUND),
    ] {
        let path = format!("/v1/sessions/{session}/compact");
        let (status, _, body) = send(&served.socket, request(Method::POST, &path, &[], "")).await;
        assert_eq!(status, code, "{session}");
        assert_eq!(error_of(body).await.error.kind, kind, "{session}");
    }
    let (status, headers, _) = send(&served.socket, get("/v1/sessions/s1/compact")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers["allow"], "POST");
    served.stop().await;
}

#[tokio::test]
async fn api_body_over_the_limit_by_content_length_is_413() {
    let served = start(test_options());
    let big = format!(r#"{{"text":"{}"}}"#, "x".repeat(2000));
    let (status, _, body) = send(
        &served.socket,
        request(Method::POST, "/v1/tasks", &[], &big),
    )
    .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    let error = error_of(body).await;
    assert_eq!(error.error.kind, error_kind::TOO_LARGE);
    assert_eq!(error.error.code, 413);
    assert!(error.error.message.contains("1024 bytes"), "{error:?}");
    assert!(served.stub.submitted.lock().unwrap().is_empty());
    served.stop().await;
}

#[tokio::test]
async fn api_chunked_body_over_the_limit_is_413() {
    let served = start(test_options());
    let chunks = Chunks(
        [
            Bytes::from(r#"{"text":""#),
            Bytes::from("y".repeat(600)),
            Bytes::from("y".repeat(600)),
            Bytes::from(r#""}"#),
        ]
        .into(),
    );
    let req = Request::post("http://loopd/v1/tasks")
        .header("host", "loopd")
        .body(chunks)
        .unwrap();
    assert!(req.headers().get("content-length").is_none());
    let (status, _, body) = send(&served.socket, req).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(error_of(body).await.error.kind, error_kind::TOO_LARGE);
    served.stop().await;
}

#[tokio::test]
async fn api_bad_json_and_unknown_fields_are_400_with_serdes_message() {
    let served = start(test_options());
    let cases = [
        (r#"{"text": "#, "EOF while parsing"),
        (r#"{"text":"hi","priority":1}"#, "unknown field `priority`"),
        (r#"{"session":"../x","text":"hi"}"#, "invalid session id"),
        (
            r#"{"text":"hi","task_id":"a b"}"#,
            "only A-Z a-z 0-9 . _ - are allowed",
        ),
    ];
    for (body, says) in cases {
        let req = request(Method::POST, "/v1/tasks", &[], body);
        let (status, _, answer) = send(&served.socket, req).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
        let error = error_of(answer).await;
        assert_eq!(error.error.kind, error_kind::BAD_REQUEST);
        assert!(error.error.message.contains(says), "{body}: {error:?}");
    }
    served.stop().await;
}

#[tokio::test]
async fn api_bad_session_id_or_query_in_the_path_is_400_saying_why() {
    let served = start(test_options());
    let cases = [
        ("/v1/sessions/.hidden", "starts with '.'"),
        ("/v1/sessions/a%2Fb", "contains '%'"),
        ("/v1/sessions/", "it is empty"),
        ("/v1/sessions/.x/events", "bad session id in the path"),
        ("/v1/sessions/s1?limit=0", "at least 1"),
        ("/v1/sessions/s1?page=2", "unknown query parameter"),
    ];
    for (path, says) in cases {
        let (status, _, body) = send(&served.socket, get(path)).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
        let error = error_of(body).await;
        assert!(error.error.message.contains(says), "{path}: {error:?}");
    }
    served.stop().await;
}

#[tokio::test]
async fn api_unknown_session_and_unknown_path_are_404() {
    let served = start(test_options());
    for path in ["/v1/sessions/nope", "/v1/sessions/nope/events"] {
        let (status, _, body) = send(&served.socket, get(path)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{path}");
        let error = error_of(body).await;
        assert_eq!(error.error.kind, error_kind::NOT_FOUND);
        assert!(error.error.message.contains("nope"), "{error:?}");
    }
    let req = request(Method::POST, "/v1/sessions/nope/cancel", &[], "");
    assert_eq!(send(&served.socket, req).await.0, StatusCode::NOT_FOUND);
    let req = request(
        Method::POST,
        "/v1/tasks",
        &[],
        r#"{"session":"gone","text":"x"}"#,
    );
    assert_eq!(send(&served.socket, req).await.0, StatusCode::NOT_FOUND);
    let (status, _, body) = send(&served.socket, get("/v2/anything")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(error_of(body).await.error.message.contains("/v2/anything"));
    served.stop().await;
}

#[tokio::test]
async fn api_wrong_method_is_405_naming_the_right_one() {
    let served = start(test_options());
    let (status, headers, body) = send(&served.socket, get("/v1/tasks")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(headers["allow"], "POST");
    assert_eq!(
        error_of(body).await.error.kind,
        error_kind::METHOD_NOT_ALLOWED
    );
    let req = request(Method::DELETE, "/v1/sessions/s1", &[], "");
    assert_eq!(
        send(&served.socket, req).await.0,
        StatusCode::METHOD_NOT_ALLOWED
    );
    served.stop().await;
}

#[tokio::test]
async fn api_full_queue_is_409_busy() {
    let served = start(test_options());
    let req = request(
        Method::POST,
        "/v1/tasks",
        &[],
        r#"{"session":"busy","text":"x"}"#,
    );
    let (status, _, body) = send(&served.socket, req).await;
    assert_eq!(status, StatusCode::CONFLICT);
    let error = error_of(body).await;
    assert_eq!(error.error.kind, error_kind::BUSY);
    assert_eq!(error.error.code, 409);
    assert!(error.error.message.contains("8 tasks wait"), "{error:?}");
    served.stop().await;
}

#[tokio::test]
async fn api_a_full_disk_is_507_with_the_reason() {
    let served = start(test_options());
    let req = request(
        Method::POST,
        "/v1/tasks",
        &[],
        r#"{"session":"full","text":"x"}"#,
    );
    let (status, _, body) = send(&served.socket, req).await;
    assert_eq!(status, StatusCode::INSUFFICIENT_STORAGE);
    let error = error_of(body).await;
    assert_eq!(error.error.kind, error_kind::INSUFFICIENT_STORAGE);
    assert_eq!(error.error.code, 507);
    assert_eq!(error.error.message, api_common::DISK_FULL);
}

#[tokio::test]
async fn api_a_task_id_reaches_the_backend() {
    let served = start(test_options());
    let body = r#"{"session":"s1","text":"hi","task_id":"retry-1"}"#;
    let (status, _, _) = send(
        &served.socket,
        request(Method::POST, "/v1/tasks", &[], body),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let submitted = served.stub.submitted.lock().unwrap().clone();
    assert_eq!(submitted[0].task_id.as_ref().unwrap().as_str(), "retry-1");
    served.stop().await;
}
