//! loopd's approval routes over the real socket against the stand-in backend (issue 16): the
//! list, an answer relayed with the answering peer's uid, 404 for an id nothing waits under,
//! and 400 for a bad id or a deny reason longer than the model may read.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_common;

use api_common::{get, request, send, start, stub_pending_approval, test_options, text};
use http::{Method, StatusCode};
use proto::api::{
    ApiError, ApprovalAnswer, ApprovalAnswered, ApprovalList, MAX_DENY_REASON_BYTES, OwnerAnswer,
    error_kind,
};

/// Options whose body cap leaves room for the longest reason and more.
fn roomy() -> loopd::api::ApiOptions {
    loopd::api::ApiOptions {
        max_body_bytes: 4 * MAX_DENY_REASON_BYTES,
        ..test_options()
    }
}

async fn post(socket: &std::path::Path, id: &str, body: &str) -> (StatusCode, String) {
    let path = format!("/v1/approvals/{id}");
    let (status, _, body) = send(socket, request(Method::POST, &path, &[], body)).await;
    (status, text(body).await)
}

fn kind(body: &str) -> String {
    let error: ApiError = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
    error.error.kind
}

#[tokio::test]
async fn the_waiting_calls_are_listed() {
    let served = start(test_options());
    let (status, _, body) = send(&served.socket, get("/v1/approvals")).await;
    assert_eq!(status, StatusCode::OK);
    let list: ApprovalList = serde_json::from_str(&text(body).await).unwrap();
    assert_eq!(list.approvals, [stub_pending_approval()]);
    served.stop().await;
}

#[tokio::test]
async fn an_answer_reaches_the_backend_with_the_answering_peers_uid() {
    let served = start(test_options());
    let (status, body) = post(&served.socket, "ap-1", r#"{"answer":"approve_for_turn"}"#).await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let answered: ApprovalAnswered = serde_json::from_str(&body).unwrap();
    assert_eq!(answered.decision, bxcore::ApprovalDecision::ApprovedForTurn);
    let relayed = served.stub.answered.lock().unwrap().clone();
    let me = nix::unistd::getuid().as_raw();
    assert_eq!(
        relayed,
        [(
            ApprovalAnswer {
                answer: OwnerAnswer::ApproveForTurn,
                reason: None,
            },
            Some(me)
        )]
    );
    served.stop().await;
}

#[tokio::test]
async fn an_id_nothing_waits_under_is_404_and_a_bad_one_400() {
    let served = start(test_options());
    let (status, body) = post(&served.socket, "ap-2", r#"{"answer":"deny"}"#).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert_eq!(kind(&body), error_kind::NOT_FOUND);
    let (status, body) = post(&served.socket, ".ap", r#"{"answer":"deny"}"#).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(body.contains("bad approval id"), "{body}");
    assert!(served.stub.answered.lock().unwrap().is_empty());
    served.stop().await;
}

#[tokio::test]
async fn a_deny_reason_longer_than_the_limit_is_400_and_never_reaches_the_backend() {
    let served = start(roomy());
    let answer = |reason: String| {
        serde_json::to_string(&ApprovalAnswer {
            answer: OwnerAnswer::Deny,
            reason: Some(reason),
        })
        .unwrap()
    };
    let long = "x".repeat(MAX_DENY_REASON_BYTES + 1);
    let (status, body) = post(&served.socket, "ap-1", &answer(long)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert_eq!(kind(&body), error_kind::BAD_REQUEST);
    assert!(body.contains(&MAX_DENY_REASON_BYTES.to_string()), "{body}");
    assert!(served.stub.answered.lock().unwrap().is_empty());
    // At the limit it is relayed.
    let most = "x".repeat(MAX_DENY_REASON_BYTES);
    let (status, _) = post(&served.socket, "ap-1", &answer(most.clone())).await;
    assert_eq!(status, StatusCode::OK);
    let relayed = served.stub.answered.lock().unwrap().clone();
    assert_eq!(relayed[0].0.reason.as_deref(), Some(most.as_str()));
    served.stop().await;
}

#[tokio::test]
async fn an_answer_that_is_not_one_of_the_words_is_400_naming_them() {
    let served = start(test_options());
    for body in [
        r#"{"answer":1}"#,
        r#"{"answer":"maybe"}"#,
        r#"{"answer":null}"#,
        r#"{"reason":"no answer"}"#,
    ] {
        let (status, answer) = post(&served.socket, "ap-1", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {answer}");
        assert_eq!(kind(&answer), error_kind::BAD_REQUEST);
        for word in [r#"\"approve\""#, r#"\"approve_for_turn\""#, r#"\"deny\""#] {
            assert!(answer.contains(word), "{body}: {word} not in {answer}");
        }
    }
    assert!(served.stub.answered.lock().unwrap().is_empty());
    served.stop().await;
}
