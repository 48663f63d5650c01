//! `GET /v1/usage` and `GET /metrics` against the stand-in backend: the query checked before
//! the backend sees it, and the exposition in the format the scraper asks for.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_common;

use api_common::{get, request, send, start, test_options, text};
use http::{Method, StatusCode};
use proto::api::{ApiError, UsageReport, error_kind};

#[tokio::test]
async fn usage_answers_the_query_it_was_given() {
    let served = start(test_options());
    let (status, headers, body) = send(&served.socket, get("/v1/usage")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/json");
    let report: UsageReport = serde_json::from_str(&text(body).await).unwrap();
    assert_eq!((report.day, report.session), (None, None));
    assert_eq!(report.totals.generated_tokens, 40);

    let (status, _, body) = send(&served.socket, get("/v1/usage?session=s1&day=2026-11-30")).await;
    assert_eq!(status, StatusCode::OK);
    let report: UsageReport = serde_json::from_str(&text(body).await).unwrap();
    assert_eq!(report.day.as_deref(), Some("2026-11-30"));
    assert_eq!(report.session.unwrap().as_str(), "s1");
    served.stop().await;
}

#[tokio::test]
async fn a_bad_usage_query_is_400_naming_it_and_an_unknown_session_404() {
    let served = start(test_options());
    for (query, named) in [
        ("day=2026-13-01", "day=\"2026-13-01\""),
        ("day=1.12.2026", "day=\"1.12.2026\""),
        ("session=..", "session=\"..\""),
        ("sort=generated", "\"sort\""),
    ] {
        let (status, _, body) = send(&served.socket, get(&format!("/v1/usage?{query}"))).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}");
        let error: ApiError = serde_json::from_str(&text(body).await).unwrap();
        assert_eq!(error.error.kind, error_kind::BAD_REQUEST);
        assert!(
            error.error.message.contains(named),
            "{query}: {}",
            error.error.message
        );
    }
    let (status, _, body) = send(&served.socket, get("/v1/usage?session=gone")).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(text(body).await.contains("no session gone"));
    let (status, _, _) = send(
        &served.socket,
        request(Method::POST, "/v1/usage", &[], "{}"),
    )
    .await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    served.stop().await;
}

#[tokio::test]
async fn metrics_are_classic_text_for_anyone_and_openmetrics_for_prometheus() {
    let served = start(test_options());
    let (status, headers, body) = send(&served.socket, get("/metrics")).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers["content-type"],
        bxmetrics::exposition::CLASSIC_CONTENT_TYPE
    );
    let classic = text(body).await;
    assert!(
        classic.contains("# TYPE loopd_turns_total counter\n"),
        "{classic}"
    );
    assert!(!classic.contains("# EOF"), "{classic}");

    let accept = [(
        "accept",
        "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5",
    )];
    let (status, headers, body) = send(
        &served.socket,
        request(Method::GET, "/metrics", &accept, ""),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        headers["content-type"],
        bxmetrics::exposition::OPENMETRICS_CONTENT_TYPE
    );
    let open = text(body).await;
    assert!(
        open.contains("# TYPE loopd_turns counter\n") && open.ends_with("# EOF\n"),
        "{open}"
    );

    let (status, _, _) = send(&served.socket, request(Method::POST, "/metrics", &[], "")).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    served.stop().await;
}
