//! A local web server for `http_fetch`'s tests, plain or TLS (a test CA: [`test_tls`]), that
//! records every request it gets (method, target, `Host`, headers, body) and serves fixed
//! routes.

use bytes::Bytes;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::{Body, Frame, Incoming};
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

type TestBody = BoxBody<Bytes, Infallible>;

/// One request the server saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The method.
    pub method: String,
    /// The path and query.
    pub target: String,
    /// The `Host` header ("" without one).
    pub host: String,
    /// Every header.
    pub headers: HeaderMap,
    /// The body.
    pub body: Vec<u8>,
}

/// The local test server. Routes:
/// `/ok` 200 `hello`; `/utf8` 200 `abécd`; `/endless` 200 with a body that never ends;
/// `/status/N` status N; `/redirect?to=URL` 302 to URL; `/loop` 302 to itself;
/// `/chain/N` N redirects then 200 `end`; `/hang` never answers;
/// `/reflect/plain?to=URL` and `/reflect/base64?to=URL`: 302 to `URL?t=CREDENTIAL`, the
/// credential of the `Authorization` header it was sent (after `Bearer `), as it is or in
/// base64: a server that tries to carry a secret on through a redirect.
pub struct Server {
    /// Where it listens (127.0.0.1).
    pub addr: SocketAddr,
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
    /// A server on 127.0.0.1, speaking TLS through `tls` when given.
    pub async fn start(tls: Option<tokio_rustls::TlsAcceptor>) -> Server {
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

    /// `http://127.0.0.1:PORT{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// `{scheme}://localhost:PORT{path}` (the name [`test_tls`]'s certificate holds).
    pub fn local(&self, scheme: &str, path: &str) -> String {
        format!("{scheme}://localhost:{}{path}", self.addr.port())
    }

    /// The requests seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// The connections accepted so far.
    pub fn connections(&self) -> usize {
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

/// The 302 of `/reflect/{how}`: to `to` with the credential of `headers`' `Authorization`.
fn reflect(how: &str, to: &str, headers: &HeaderMap) -> Response<TestBody> {
    use base64::Engine;
    let credential = headers
        .get(http::header::AUTHORIZATION)
        .map(|v| {
            v.to_str()
                .unwrap()
                .trim_start_matches("Bearer ")
                .to_string()
        })
        .unwrap_or_default();
    let carried = match how {
        "plain" => credential,
        "base64" => base64::engine::general_purpose::STANDARD.encode(credential),
        other => panic!("no reflection {other:?}"),
    };
    redirect(&format!("{to}?t={carried}"))
}

async fn route(req: Request<Incoming>, seen: &Mutex<Vec<Seen>>) -> Response<TestBody> {
    let (parts, body) = req.into_parts();
    let body = body.collect().await.unwrap().to_bytes().to_vec();
    let target = parts.uri.path_and_query().unwrap().as_str().to_string();
    let host = parts
        .headers
        .get(http::header::HOST)
        .map(|h| h.to_str().unwrap().to_string())
        .unwrap_or_default();
    seen.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        target: target.clone(),
        host,
        headers: parts.headers.clone(),
        body,
    });
    let path = parts.uri.path();
    let to = || parts.uri.query().unwrap().strip_prefix("to=").unwrap();
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
    if let Some(how) = path.strip_prefix("/reflect/") {
        return reflect(how, to(), &parts.headers);
    }
    match path {
        "/ok" => text(StatusCode::OK, "hello"),
        "/utf8" => text(StatusCode::OK, "abécd"),
        "/endless" => Response::new(Endless.boxed()),
        "/redirect" => redirect(to()),
        "/loop" => redirect("/loop"),
        "/hang" => std::future::pending().await,
        _ => text(StatusCode::NOT_FOUND, "no such page"),
    }
}

/// A test CA, and a TLS acceptor for `localhost` with a certificate it signed.
pub fn test_tls() -> (rustls::RootCertStore, tokio_rustls::TlsAcceptor) {
    test_tls_for(&["localhost"])
}

/// A test CA, and a TLS acceptor with a certificate it signed for `names`.
pub fn test_tls_for(names: &[&str]) -> (rustls::RootCertStore, tokio_rustls::TlsAcceptor) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let leaf_key = KeyPair::generate().unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let leaf = CertificateParams::new(names)
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
