//! `http_fetch` against a local test server on 127.0.0.1 (`common::web`): bodies, caps,
//! statuses, the host allow-list (checked before any connection and on every redirect), the
//! redirect limit, the time limit, what a GET-only grant refuses, and HTTPS with a test CA.
//! The grants here list loopback in `networks` and the server's port in `ports`;
//! `http_fetch_reach.rs` tests what happens without them, `http_fetch_secrets.rs` methods,
//! headers, bodies and secrets.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::web::{Server, test_tls};
use brokerd::builtin::http_fetch::{HttpFetch, MAX_REDIRECTS};
use brokerd::config::Grant;
use brokerd::tool::{CallContext, Tool, ToolError, ToolOutput};
use serde_json::{Value, json};

/// A result cap large enough for every test that does not test the cap.
const BIG_CAP: usize = 1 << 20;
/// A call time limit no test but the timeout test comes near.
const TIMEOUT_MS: u64 = 10_000;

/// A grant of `hosts` on the port `url` names, which may reach loopback (the test server).
fn grant(hosts: &[&str], url: &str) -> Grant {
    let port = url
        .parse::<http::Uri>()
        .ok()
        .and_then(|u| u.port_u16())
        .unwrap_or(80);
    serde_json::from_value(json!({
        "tool": "http_fetch",
        "hosts": hosts,
        "ports": [port],
        "networks": ["127.0.0.0/8", "::1"],
    }))
    .unwrap()
}

async fn fetch_with(
    tool: &HttpFetch,
    hosts: &[&str],
    args: Value,
    cap: usize,
    timeout_ms: u64,
) -> Result<ToolOutput, ToolError> {
    let grant = grant(hosts, args["url"].as_str().unwrap_or_default());
    let ctx = CallContext {
        grant: &grant,
        result_cap_bytes: cap,
        timeout_ms,
        secrets: &brokerd::secrets::Secrets::default(),
        record: None,
    };
    tool.call(&args, ctx).await
}

async fn fetch(hosts: &[&str], url: &str) -> Result<ToolOutput, ToolError> {
    fetch_with(
        &HttpFetch::new(),
        hosts,
        json!({ "url": url }),
        BIG_CAP,
        TIMEOUT_MS,
    )
    .await
}

fn failed_message(r: Result<ToolOutput, ToolError>) -> String {
    match r {
        Err(ToolError::Failed(m)) => m,
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[test]
fn the_schema_takes_a_url_and_optionally_a_method_headers_and_a_body() {
    let schema = HttpFetch::new().schema();
    assert_eq!(schema.name, "http_fetch");
    for word in ["GET", "method", "headers", "body", "granted"] {
        assert!(
            schema.description.contains(word),
            "{word}: {}",
            schema.description
        );
    }
    let p = schema.parameters;
    assert_eq!(p["required"], json!(["url"]));
    assert_eq!(p["additionalProperties"], false);
    assert_eq!(p["properties"].as_object().unwrap().len(), 4);
    assert_eq!(p["properties"]["url"]["type"], "string");
    assert_eq!(p["properties"]["method"]["type"], "string");
    assert_eq!(p["properties"]["body"]["type"], "string");
    assert_eq!(p["properties"]["headers"]["type"], "object");
    assert_eq!(
        p["properties"]["headers"]["additionalProperties"],
        json!({"type": "string"})
    );
}

#[tokio::test]
async fn fetches_a_page_with_get() {
    let server = Server::start(None).await;
    let out = fetch(&["127.0.0.1"], &server.url("/ok")).await.unwrap();
    assert_eq!(
        out,
        ToolOutput {
            content: "hello".to_string(),
            truncated: false
        }
    );
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[0].target, "/ok");
    assert_eq!(seen[0].host, server.addr.to_string());
}

#[tokio::test]
async fn a_get_only_grant_refuses_other_methods_a_body_and_malformed_headers() {
    let server = Server::start(None).await;
    let tool = HttpFetch::new();
    let url = server.url("/ok");
    for (extra, value, words) in [
        ("method", json!("POST"), ["\"POST\"", "allows GET"]),
        ("body", json!("x"), ["body", "GET"]),
        (
            "headers",
            json!("POST"),
            ["\"headers\"", "an object of strings"],
        ),
        (
            "headers",
            json!({"X-A": 1}),
            ["\"headers\"", "an object of strings"],
        ),
    ] {
        let mut args = json!({ "url": url });
        args[extra] = value;
        let r = fetch_with(&tool, &["127.0.0.1"], args, BIG_CAP, TIMEOUT_MS).await;
        assert!(
            matches!(&r, Err(ToolError::InvalidArguments(m)) if words.iter().all(|w| m.contains(w))),
            "{extra}: {r:?}"
        );
    }
    let r = fetch_with(&tool, &["127.0.0.1"], json!({}), BIG_CAP, TIMEOUT_MS).await;
    assert!(
        matches!(&r, Err(ToolError::InvalidArguments(m)) if m.contains("missing key \"url\"")),
        "{r:?}"
    );
    let r = fetch_with(
        &tool,
        &["127.0.0.1"],
        json!({"url": 1}),
        BIG_CAP,
        TIMEOUT_MS,
    )
    .await;
    assert!(
        matches!(&r, Err(ToolError::InvalidArguments(m)) if m.contains("must be a string")),
        "{r:?}"
    );
    assert_eq!(server.connections(), 0);
}

#[tokio::test]
async fn refuses_urls_that_are_not_http() {
    for url in [
        "ftp://127.0.0.1/x",
        "file:///etc/passwd",
        "127.0.0.1/ok",
        "http://u:p@127.0.0.1/",
    ] {
        let r = fetch(&["*"], url).await;
        assert!(
            matches!(r, Err(ToolError::InvalidArguments(_))),
            "{url}: {r:?}"
        );
    }
}

#[tokio::test]
async fn the_body_is_cut_at_the_cap_and_reading_stops() {
    let server = Server::start(None).await;
    let tool = HttpFetch::new();
    let args = json!({"url": server.url("/endless")});
    let out = fetch_with(&tool, &["127.0.0.1"], args, 5000, TIMEOUT_MS)
        .await
        .unwrap();
    assert_eq!(out.content, "x".repeat(5000));
    assert!(out.truncated);
    // A multi-byte character across the cap is dropped whole: "ab" + "é" (2 bytes), cap 3.
    let args = json!({"url": server.url("/utf8")});
    let out = fetch_with(&tool, &["127.0.0.1"], args.clone(), 3, TIMEOUT_MS)
        .await
        .unwrap();
    assert_eq!(
        out,
        ToolOutput {
            content: "ab".to_string(),
            truncated: true
        }
    );
    let out = fetch_with(&tool, &["127.0.0.1"], args, 6, TIMEOUT_MS)
        .await
        .unwrap();
    assert_eq!(
        out,
        ToolOutput {
            content: "abécd".to_string(),
            truncated: false
        }
    );
}

#[tokio::test]
async fn a_status_other_than_2xx_fails_naming_it() {
    let server = Server::start(None).await;
    let m = failed_message(fetch(&["127.0.0.1"], &server.url("/status/404")).await);
    assert!(m.contains("404"), "{m}");
    let m = failed_message(fetch(&["127.0.0.1"], &server.url("/status/500")).await);
    assert!(m.contains("500"), "{m}");
}

#[tokio::test]
async fn a_host_not_allowed_is_refused_before_any_connection() {
    let server = Server::start(None).await;
    let r = fetch(&["example.org", "*.example.org"], &server.url("/ok")).await;
    assert!(
        matches!(&r, Err(ToolError::HostNotAllowed(m)) if m.contains("127.0.0.1") && !m.contains("example.org")),
        "{r:?}"
    );
    // An allowed fetch afterwards is the first connection the server accepts: the refused
    // call never connected (connections are accepted in order).
    fetch(&["127.0.0.1"], &server.url("/ok")).await.unwrap();
    assert_eq!(server.connections(), 1);
    assert_eq!(server.seen().len(), 1);
}

#[tokio::test]
async fn hosts_match_case_insensitively() {
    let server = Server::start(None).await;
    let url = format!("http://LocalHost:{}/ok", server.addr.port());
    let out = fetch(&["LOCALHOST"], &url).await.unwrap();
    assert_eq!(out.content, "hello");
}

#[tokio::test]
async fn a_redirect_to_an_allowed_host_is_followed() {
    let server = Server::start(None).await;
    let to = format!("http://localhost:{}/ok", server.addr.port());
    let out = fetch(
        &["127.0.0.1", "localhost"],
        &server.url(&format!("/redirect?to={to}")),
    )
    .await
    .unwrap();
    assert_eq!(out.content, "hello");
    let seen = server.seen();
    assert_eq!(seen.len(), 2);
    assert_eq!(seen[1].target, "/ok");
    assert_eq!(seen[1].host, format!("localhost:{}", server.addr.port()));
}

#[tokio::test]
async fn a_redirect_to_a_host_not_allowed_is_refused() {
    let server = Server::start(None).await;
    let to = format!("http://localhost:{}/ok", server.addr.port());
    let r = fetch(&["127.0.0.1"], &server.url(&format!("/redirect?to={to}"))).await;
    // The refusal is in brokerd's words: the Location is the server's, never echoed.
    assert!(
        matches!(&r, Err(ToolError::HostNotAllowed(m)) if m == "redirect to a host outside the grant"),
        "{r:?}"
    );
    let targets: Vec<String> = server.seen().into_iter().map(|s| s.target).collect();
    assert_eq!(targets, [format!("/redirect?to={to}")]);
}

#[tokio::test]
async fn redirects_stop_at_the_limit() {
    let server = Server::start(None).await;
    let out = fetch(
        &["127.0.0.1"],
        &server.url(&format!("/chain/{MAX_REDIRECTS}")),
    )
    .await
    .unwrap();
    assert_eq!(out.content, "end");
    let m = failed_message(
        fetch(
            &["127.0.0.1"],
            &server.url(&format!("/chain/{}", MAX_REDIRECTS + 1)),
        )
        .await,
    );
    assert!(m.contains("redirects"), "{m}");
    let before = server.seen().len();
    let m = failed_message(fetch(&["127.0.0.1"], &server.url("/loop")).await);
    assert!(m.contains(&format!("{MAX_REDIRECTS} redirects")), "{m}");
    assert_eq!(server.seen().len() - before, MAX_REDIRECTS + 1);
}

#[tokio::test]
async fn a_server_that_never_answers_is_cut_off_at_the_time_limit() {
    let server = Server::start(None).await;
    let args = json!({"url": server.url("/hang")});
    let started = std::time::Instant::now();
    let r = fetch_with(&HttpFetch::new(), &["127.0.0.1"], args, BIG_CAP, 200).await;
    let m = failed_message(r);
    assert!(m.contains("time limit of 200 ms"), "{m}");
    assert!(started.elapsed() < std::time::Duration::from_millis(TIMEOUT_MS));
}

#[tokio::test]
async fn fetches_over_https_and_checks_the_certificate() {
    let (roots, acceptor) = test_tls();
    let server = Server::start(Some(acceptor)).await;
    let url = format!("https://localhost:{}/ok", server.addr.port());
    let trusting = HttpFetch::with_root_certificates(roots);
    let out = fetch_with(
        &trusting,
        &["localhost"],
        json!({ "url": url }),
        BIG_CAP,
        TIMEOUT_MS,
    )
    .await
    .unwrap();
    assert_eq!(out.content, "hello");
    // With Mozilla's roots only, the test CA is unknown.
    let m = failed_message(fetch(&["localhost"], &url).await);
    assert!(m.contains("TLS"), "{m}");
    // The allow-list holds for https too, before any connection.
    let r = fetch(&["example.org"], &url).await;
    assert!(matches!(r, Err(ToolError::HostNotAllowed(_))), "{r:?}");
    assert_eq!(server.connections(), 2);
}
