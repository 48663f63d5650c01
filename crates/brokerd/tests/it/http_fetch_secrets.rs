//! `http_fetch` with methods, headers, bodies and secrets (issue 19), against local servers
//! (`common::web`, TLS with a test CA for `localhost` and `api.test`, which `[http_fetch]
//! resolve` sends to 127.0.0.1): a grant's `Authorization = "Bearer {secret:github}"` reaches
//! the server and nothing the model gets holds it; it stays at its origin across redirects;
//! plain http with it needs `allow_http_secrets`; a server that puts it into a redirect is
//! stopped at that hop; every way the model tries to send a secret out is refused `Leak`
//! before any connection; methods, headers and bodies within the grant's limits.
//!
//! Each call runs as the broker runs it: `check`, then `call` ([`run`]).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::grant;
use crate::common::web::{Server, test_tls_for};
use base64::Engine;
use brokerd::builtin::http_fetch::{HttpFetch, MAX_HEADERS};
use brokerd::config::{Grant, HttpFetchSettings};
use brokerd::secrets::Secrets;
use brokerd::tool::{CallContext, Tool, ToolError, ToolOutput};
use serde_json::{Value, json};

const CAP: usize = 1 << 16;
const TIMEOUT_MS: u64 = 10_000;

/// The secret's value; its name is `github`.
const TOKEN: &str = "ghp_Zx81TestTokenValue42";

fn secrets() -> Secrets {
    Secrets::from_values([("github", TOKEN)])
}

/// Which step of a call answered with an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Step {
    Check,
    Call,
}

/// Two TLS servers on 127.0.0.1 with the same certificate (`localhost`, `api.test`), and the
/// tool that trusts its CA and resolves `api.test` to 127.0.0.1.
struct Bed {
    one: Server,
    two: Server,
    tool: HttpFetch,
}

impl Bed {
    async fn new() -> Bed {
        let (roots, acceptor) = test_tls_for(&["localhost", "api.test"]);
        let mut settings = HttpFetchSettings::default();
        settings
            .resolve
            .insert("api.test".into(), vec!["127.0.0.1".parse().unwrap()]);
        Bed {
            one: Server::start(Some(acceptor.clone())).await,
            two: Server::start(Some(acceptor)).await,
            tool: HttpFetch::with_root_certificates(roots).with_settings(&settings),
        }
    }

    /// A grant of `localhost` and `api.test` on both servers' ports, with `headers`.
    fn grant(&self, methods: &[&str], headers: &[(&str, &str)]) -> Grant {
        allowing(&[&self.one, &self.two], methods, headers)
    }
}

/// An `http_fetch` grant of `localhost` and `api.test` on the ports of `servers` (loopback
/// allowed), with `methods` and the attached `headers`.
fn allowing(servers: &[&Server], methods: &[&str], headers: &[(&str, &str)]) -> Grant {
    let mut g = grant("http_fetch", &["*"]);
    g.hosts = vec!["localhost".into(), "api.test".into()];
    g.ports = servers.iter().map(|s| s.addr.port()).collect();
    g.networks = vec!["127.0.0.0/8".into()];
    g.http.methods = methods.iter().map(|m| m.to_string()).collect();
    g.http.headers = headers
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    g
}

/// The header every injecting grant here attaches.
const BEARER: [(&str, &str); 1] = [("Authorization", "Bearer {secret:github}")];

/// Runs a call as the broker does: `check`, then `call`.
async fn run(
    tool: &HttpFetch,
    grant: &Grant,
    secrets: &Secrets,
    args: Value,
) -> Result<ToolOutput, (Step, ToolError)> {
    let ctx = CallContext {
        grant,
        result_cap_bytes: CAP,
        timeout_ms: TIMEOUT_MS,
        secrets,
        record: None,
    };
    tool.check(&args, ctx).map_err(|e| (Step::Check, e))?;
    tool.call(&args, ctx).await.map_err(|e| (Step::Call, e))
}

/// The `Authorization` header of the `i`th request `server` saw, if it had one.
fn authorization(server: &Server, i: usize) -> Option<String> {
    server.seen()[i]
        .headers
        .get("authorization")
        .map(|v| v.to_str().unwrap().to_string())
}

/// Asserts `r` is a `Leak` of `github` from `step`, naming `place`, quoting no form of it.
fn assert_leak(r: &Result<ToolOutput, (Step, ToolError)>, step: Step, place: &str) {
    match r {
        Err((s, ToolError::Leak { secret, detail })) => {
            assert_eq!((*s, secret.as_str()), (step, "github"), "{detail}");
            assert!(detail.contains(place), "{detail}");
            assert!(
                secrets().guard().find(detail.as_bytes()).is_none(),
                "{detail}"
            );
        }
        other => panic!("expected a leak at {place}, got {other:?}"),
    }
}

#[tokio::test]
async fn an_https_grant_attaches_the_secret_and_nothing_the_model_gets_holds_it() {
    let bed = Bed::new().await;
    let g = bed.grant(&["GET"], &BEARER);
    let out = run(
        &bed.tool,
        &g,
        &secrets(),
        json!({"url": bed.one.local("https", "/ok")}),
    )
    .await
    .unwrap();
    assert_eq!(out.content, "hello");
    assert_eq!(authorization(&bed.one, 0), Some(format!("Bearer {TOKEN}")));
    // A failure's words hold none of it either.
    let r = run(
        &bed.tool,
        &g,
        &secrets(),
        json!({"url": bed.one.local("https", "/status/401")}),
    )
    .await;
    let m = match r {
        Err((Step::Call, ToolError::Failed(m))) => m,
        other => panic!("{other:?}"),
    };
    assert!(m.contains("401"), "{m}");
    assert!(!m.contains(TOKEN), "{m}");
    assert_eq!(authorization(&bed.one, 1), Some(format!("Bearer {TOKEN}")));
}

#[tokio::test]
async fn the_header_follows_same_origin_redirects_only_and_does_not_come_back() {
    let bed = Bed::new().await;
    let g = bed.grant(&["GET"], &BEARER);
    let secrets = secrets();
    let get = |url: String| run(&bed.tool, &g, &secrets, json!({ "url": url }));
    let bearer = Some(format!("Bearer {TOKEN}"));
    // Same origin: a relative redirect keeps it.
    get(bed.one.local("https", "/redirect?to=/ok"))
        .await
        .unwrap();
    assert_eq!(authorization(&bed.one, 0), bearer);
    assert_eq!(authorization(&bed.one, 1), bearer);
    // Another port is another origin.
    let to_two = bed.two.local("https", "/ok");
    get(bed.one.local("https", &format!("/redirect?to={to_two}")))
        .await
        .unwrap();
    assert_eq!(authorization(&bed.one, 2), bearer);
    assert_eq!(bed.two.seen()[0].target, "/ok");
    assert_eq!(authorization(&bed.two, 0), None);
    // Another host on the same port is another origin.
    let from_api = format!(
        "https://api.test:{}/redirect?to={}",
        bed.one.addr.port(),
        bed.one.local("https", "/ok")
    );
    get(from_api).await.unwrap();
    assert_eq!(authorization(&bed.one, 3), bearer);
    assert_eq!(
        bed.one.seen()[4].host,
        format!("localhost:{}", bed.one.addr.port())
    );
    assert_eq!(authorization(&bed.one, 4), None);
    // Away and back: the way back was chosen by a server that was not meant to hold it.
    let back = bed.one.local("https", "/ok");
    let away = bed.two.local("https", &format!("/redirect?to={back}"));
    get(bed.one.local("https", &format!("/redirect?to={away}")))
        .await
        .unwrap();
    assert_eq!(authorization(&bed.one, 5), bearer);
    assert_eq!(authorization(&bed.two, 1), None);
    assert_eq!(bed.one.seen()[6].target, "/ok");
    assert_eq!(authorization(&bed.one, 6), None);
}

#[tokio::test]
async fn plain_http_with_an_attached_secret_needs_allow_http_secrets() {
    let server = Server::start(None).await;
    let tool = HttpFetch::new();
    let url = server.local("http", "/ok");
    let mut g = allowing(&[&server], &["GET"], &BEARER);
    let r = run(&tool, &g, &secrets(), json!({ "url": url })).await;
    assert!(
        matches!(&r, Err((Step::Check, ToolError::InvalidArguments(m)))
            if m.contains("https") && m.contains("allow_http_secrets = true")),
        "{r:?}"
    );
    assert_eq!(server.connections(), 0);
    g.http.allow_http_secrets = true;
    run(&tool, &g, &secrets(), json!({ "url": url }))
        .await
        .unwrap();
    assert_eq!(authorization(&server, 0), Some(format!("Bearer {TOKEN}")));
    // A header without a secret needs no https.
    let plain = allowing(&[&server], &["GET"], &[("X-Client", "boxmaker")]);
    run(&tool, &plain, &secrets(), json!({ "url": url }))
        .await
        .unwrap();
    assert_eq!(server.seen()[1].headers["x-client"], "boxmaker");
}

#[tokio::test]
async fn a_redirect_carrying_the_attached_secret_is_stopped_at_that_hop() {
    let bed = Bed::new().await;
    let g = bed.grant(&["GET"], &BEARER);
    for how in ["plain", "base64"] {
        for to in [bed.two.local("https", "/ok"), "/ok".to_string()] {
            let before = bed.one.seen().len();
            let url = bed.one.local("https", &format!("/reflect/{how}?to={to}"));
            let r = run(&bed.tool, &g, &secrets(), json!({ "url": url })).await;
            assert_leak(&r, Step::Call, "redirect 1's URL");
            // Only the request that was answered with the redirect was made.
            assert_eq!(bed.one.seen().len(), before + 1, "{how} {to}");
        }
    }
    assert_eq!(bed.two.connections(), 0);
}

#[tokio::test]
async fn every_way_the_model_tries_to_send_a_secret_out_is_refused_before_connecting() {
    let bed = Bed::new().await;
    let g = bed.grant(&["GET", "POST"], &BEARER);
    let url = |q: &str| bed.one.local("https", &format!("/ok{q}"));
    let percent: String = TOKEN.bytes().map(|b| format!("%{b:02X}")).collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("user:{TOKEN}"));
    let hex = hex::encode(TOKEN);
    let attempts = [
        (json!({"url": url(&format!("?q={TOKEN}"))}), "the URL"),
        (json!({"url": url(&format!("?q={percent}"))}), "the URL"),
        (json!({"url": url(&format!("?q=x{}", &hex))}), "the URL"),
        (
            json!({"url": url(""), "headers": {"X-Note": TOKEN}}),
            "header \"X-Note\"",
        ),
        (
            json!({"url": url(""), "headers": {"X-Auth": format!("Basic {b64}")}}),
            "header \"X-Auth\"",
        ),
        (
            json!({"url": url(""), "headers": {TOKEN: "x"}}),
            "a header's name",
        ),
        (
            json!({"url": url(""), "method": "POST", "body": format!("{{\"t\":\"{TOKEN}\"}}")}),
            "the body",
        ),
        (json!({"url": url(""), "method": TOKEN}), "the arguments"),
    ];
    for (args, place) in attempts {
        let r = run(&bed.tool, &g, &secrets(), args.clone()).await;
        assert_leak(&r, Step::Check, place);
        // `call` alone refuses it too.
        let ctx = CallContext {
            grant: &g,
            result_cap_bytes: CAP,
            timeout_ms: TIMEOUT_MS,
            secrets: &secrets(),
            record: None,
        };
        let r = bed.tool.call(&args, ctx).await.map_err(|e| (Step::Call, e));
        assert_leak(&r, Step::Call, place);
    }
    // The same secret through a grant that attaches nothing: still refused.
    let bare = bed.grant(&["GET"], &[]);
    let r = run(
        &bed.tool,
        &bare,
        &secrets(),
        json!({"url": url(&format!("?q={TOKEN}"))}),
    )
    .await;
    assert_leak(&r, Step::Check, "the URL");
    assert_eq!(bed.one.connections(), 0);
}

#[tokio::test]
async fn the_model_cannot_set_a_header_the_grant_attaches_and_a_reserved_one_is_left_out() {
    let bed = Bed::new().await;
    let g = bed.grant(&["GET"], &BEARER);
    let url = bed.one.local("https", "/ok");
    let many: serde_json::Map<String, Value> = (0..=MAX_HEADERS)
        .map(|i| (format!("X-H{i}"), json!("v")))
        .collect();
    let too_many = format!("the most is {MAX_HEADERS}");
    for (headers, words) in [
        (
            json!({"authorization": "Bearer mine"}),
            "attached by this session's grant",
        ),
        (json!({"bad name": "v"}), "not a valid header name"),
        (json!({"X-A": "one\r\nX-B: two"}), "not valid in HTTP"),
        (json!({"x-a": "1", "X-A": "2"}), "given twice"),
        (Value::Object(many), too_many.as_str()),
    ] {
        let r = run(
            &bed.tool,
            &g,
            &secrets(),
            json!({ "url": url, "headers": headers }),
        )
        .await;
        assert!(
            matches!(&r, Err((Step::Check, ToolError::InvalidArguments(m))) if m.contains(words)),
            "{headers}: {r:?}"
        );
    }
    assert_eq!(bed.one.connections(), 0);
    // A header of the model's own goes out beside the grant's.
    run(
        &bed.tool,
        &g,
        &secrets(),
        json!({"url": url, "headers": {"Accept": "application/json", "X-Trace": "7"}}),
    )
    .await
    .unwrap();
    let seen = &bed.one.seen()[0];
    assert_eq!(seen.headers["accept"], "application/json");
    assert_eq!(seen.headers["x-trace"], "7");
    assert_eq!(seen.headers.get_all("accept").iter().count(), 1);
    assert_eq!(authorization(&bed.one, 0), Some(format!("Bearer {TOKEN}")));
    // A header the tool sets itself is left out, not refused (small models add `Host`): the
    // tool's own value is the one that goes.
    run(
        &bed.tool,
        &g,
        &secrets(),
        json!({"url": url, "headers": {"Host": "evil.test", "Transfer-Encoding": "chunked"}}),
    )
    .await
    .unwrap();
    let seen = &bed.one.seen()[1];
    assert_eq!(seen.headers.get_all("host").iter().count(), 1);
    assert_ne!(seen.headers["host"], "evil.test");
    assert!(seen.headers.get("transfer-encoding").is_none());
}

#[tokio::test]
async fn post_put_and_head_send_what_was_asked() {
    let bed = Bed::new().await;
    let g = bed.grant(&["POST", "PUT", "HEAD"], &BEARER);
    let url = bed.one.local("https", "/ok");
    for (i, method) in ["POST", "put"].into_iter().enumerate() {
        let body = format!("{{\"n\": {i}, \"text\": \"hé\"}}");
        let out = run(
            &bed.tool,
            &g,
            &secrets(),
            json!({"url": url, "method": method, "body": body,
                   "headers": {"Content-Type": "application/json"}}),
        )
        .await
        .unwrap();
        assert_eq!(out.content, "hello");
        let seen = &bed.one.seen()[i];
        assert_eq!(seen.method, method.to_ascii_uppercase());
        assert_eq!(seen.body, body.as_bytes());
        assert_eq!(seen.headers["content-type"], "application/json");
        assert_eq!(authorization(&bed.one, i), Some(format!("Bearer {TOKEN}")));
    }
    let out = run(
        &bed.tool,
        &g,
        &secrets(),
        json!({"url": url, "method": "HEAD"}),
    )
    .await
    .unwrap();
    assert_eq!(out.content, "");
    assert_eq!(bed.one.seen()[2].method, "HEAD");
}

#[tokio::test]
async fn a_method_outside_the_grant_and_a_body_without_one_are_refused() {
    let bed = Bed::new().await;
    let url = bed.one.local("https", "/ok");
    let get_only = bed.grant(&["GET"], &[]);
    let post_only = bed.grant(&["POST"], &[]);
    let big = "x".repeat(brokerd::builtin::http_fetch::MAX_BODY_BYTES + 1);
    for (g, args, words) in [
        (
            &get_only,
            json!({"url": url, "method": "DELETE"}),
            ["\"DELETE\"", "allows GET"],
        ),
        (
            &post_only,
            json!({"url": url}),
            ["\"GET\" (the default)", "allows POST"],
        ),
        (&get_only, json!({"url": url, "body": "x"}), ["body", "GET"]),
        (
            &post_only,
            json!({"url": url, "method": "POST", "body": big}),
            ["bytes", "the most is"],
        ),
    ] {
        let r = run(&bed.tool, g, &secrets(), args).await;
        assert!(
            matches!(&r, Err((Step::Check, ToolError::InvalidArguments(m))) if words.iter().all(|w| m.contains(w))),
            "{words:?}: {r:?}"
        );
    }
    assert_eq!(bed.one.connections(), 0);
}

#[tokio::test]
async fn only_get_and_head_follow_redirects() {
    let bed = Bed::new().await;
    let g = bed.grant(&["GET", "POST"], &[]);
    let url = bed.one.local("https", "/redirect?to=/ok");
    let r = run(
        &bed.tool,
        &g,
        &secrets(),
        json!({"url": url, "method": "POST", "body": "data"}),
    )
    .await;
    assert!(
        matches!(&r, Err((Step::Call, ToolError::Failed(m))) if m.contains("302") && m.contains("GET and HEAD")),
        "{r:?}"
    );
    let targets: Vec<String> = bed.one.seen().into_iter().map(|s| s.target).collect();
    assert_eq!(targets, ["/redirect?to=/ok"]);
    let out = run(&bed.tool, &g, &secrets(), json!({ "url": url }))
        .await
        .unwrap();
    assert_eq!(out.content, "hello");
}

#[tokio::test]
async fn a_secret_brokerd_does_not_hold_fails_the_call_naming_it() {
    let bed = Bed::new().await;
    let g = bed.grant(&["GET"], &BEARER);
    let r = run(
        &bed.tool,
        &g,
        &Secrets::default(),
        json!({"url": bed.one.local("https", "/ok")}),
    )
    .await;
    assert!(
        matches!(&r, Err((Step::Call, ToolError::Failed(m)))
            if m.contains("\"github\"") && m.contains("\"Authorization\"")),
        "{r:?}"
    );
    assert_eq!(bed.one.connections(), 0);
}
