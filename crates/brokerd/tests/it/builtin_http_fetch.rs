//! `http_fetch` against a local test server on 127.0.0.1: bodies, caps, statuses, the host
//! allow-list (checked before any connection and on every redirect), the redirect limit, the
//! time limit, GET only, and HTTPS with a test CA. The grants here list loopback in `networks`
//! and the server's port in `ports`; `http_fetch_reach.rs` tests what happens without them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use brokerd::builtin::http_fetch::{HttpFetch, MAX_REDIRECTS};
use brokerd::config::Grant;
use brokerd::tool::{CallContext, Tool, ToolError, ToolOutput};
use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A result cap large enough for every test that does not test the cap.
const BIG_CAP: usize = 1 << 20;
/// A call time limit no test but the timeout test comes near.
const TIMEOUT_MS: u64 = 10_000;

type TestBody = BoxBody<Bytes, Infallible>;

/// One request the server saw: method, path and query, `Host` header.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    method: String,
    target: String,
    host: String,
}

/// The local test server. Routes:
/// `/ok` 200 `hello`; `/utf8` 200 `abécd`; `/endless` 200 with a body that never ends;
/// `/status/N` status N; `/redirect?to=URL` 302 to URL; `/loop` 302 to itself;
/// `/chain/N` N redirects then 200 `end`; `/hang` never answers.
struct Server {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
    task: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    async fn start(tls: Option<tokio_rustls::TlsAcceptor>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (c, s) = (connections.clone(), seen.clone());
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                c.fetch_add(1, Ordering::SeqCst);
                let (s, tls) = (s.clone(), tls.clone());
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let s = s.clone();
                        async move { Ok::<_, Infallible>(route(req, &s).await) }
                    });
                    let http = hyper::server::conn::http1::Builder::new();
                    match tls {
                        None => {
                            let _ = http.serve_connection(TokioIo::new(stream), service).await;
                        }
                        Some(acceptor) => {
                            if let Ok(stream) = acceptor.accept(stream).await {
                                let _ = http.serve_connection(TokioIo::new(stream), service).await;
                            }
                        }
                    }
                });
            }
        });
        Server {
            addr,
            connections,
            seen,
            task,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

/// A body of `x`s that never ends.
struct Endless;

impl Body for Endless {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(&[b'x'; 1024])))))
    }
}

fn text(status: StatusCode, body: &'static str) -> Response<TestBody> {
    let mut r = Response::new(Full::new(Bytes::from_static(body.as_bytes())).boxed());
    *r.status_mut() = status;
    r
}

fn redirect(to: &str) -> Response<TestBody> {
    let mut r = text(StatusCode::FOUND, "");
    r.headers_mut()
        .insert(http::header::LOCATION, to.parse().unwrap());
    r
}

async fn route(req: Request<Incoming>, seen: &Mutex<Vec<Seen>>) -> Response<TestBody> {
    let target = req.uri().path_and_query().unwrap().as_str().to_string();
    let host = req
        .headers()
        .get(http::header::HOST)
        .map(|h| h.to_str().unwrap().to_string())
        .unwrap_or_default();
    seen.lock().unwrap().push(Seen {
        method: req.method().to_string(),
        target: target.clone(),
        host,
    });
    let path = req.uri().path();
    if let Some(code) = path.strip_prefix("/status/") {
        return text(StatusCode::from_u16(code.parse().unwrap()).unwrap(), "oops");
    }
    if let Some(n) = path.strip_prefix("/chain/") {
        let n: usize = n.parse().unwrap();
        return if n == 0 {
            text(StatusCode::OK, "end")
        } else {
            redirect(&format!("/chain/{}", n - 1))
        };
    }
    match path {
        "/ok" => text(StatusCode::OK, "hello"),
        "/utf8" => text(StatusCode::OK, "abécd"),
        "/endless" => Response::new(Endless.boxed()),
        "/redirect" => redirect(req.uri().query().unwrap().strip_prefix("to=").unwrap()),
        "/loop" => redirect("/loop"),
        "/hang" => std::future::pending().await,
        _ => text(StatusCode::NOT_FOUND, "no such page"),
    }
}

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
fn the_schema_takes_a_url_and_nothing_else() {
    let schema = HttpFetch::new().schema();
    assert_eq!(schema.name, "http_fetch");
    assert!(schema.description.contains("GET"));
    let p = schema.parameters;
    assert_eq!(p["required"], json!(["url"]));
    assert_eq!(p["additionalProperties"], false);
    assert_eq!(p["properties"].as_object().unwrap().len(), 1);
    assert_eq!(p["properties"]["url"]["type"], "string");
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
async fn no_method_body_or_header_can_be_chosen() {
    let server = Server::start(None).await;
    let tool = HttpFetch::new();
    for extra in ["method", "body", "headers"] {
        let mut args = json!({"url": server.url("/ok")});
        args[extra] = json!("POST");
        let r = fetch_with(&tool, &["127.0.0.1"], args, BIG_CAP, TIMEOUT_MS).await;
        assert!(
            matches!(&r, Err(ToolError::InvalidArguments(m)) if m.contains(extra)),
            "{r:?}"
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

/// A test CA, and a TLS acceptor for `localhost` with a certificate it signed.
fn test_tls() -> (rustls::RootCertStore, tokio_rustls::TlsAcceptor) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca)
        .unwrap();
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    let key = rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(vec![leaf.der().clone()], key)
        .unwrap();
    (roots, tokio_rustls::TlsAcceptor::from(Arc::new(config)))
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
