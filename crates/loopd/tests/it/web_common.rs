//! What the web console's tests share: the console over the API tests' stand-in on a
//! loopback port, plain HTTP/1.1 requests to it, and a signed-in browser's cookie and token.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use crate::api_common::{Stub, bounded};
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use loopd::config::Web;
use loopd::web::{Console, serve};
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::watch;

/// A console served over the stand-in.
pub struct WebServed {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its sign-ins and origin.
    pub console: Arc<Console>,
    /// The stand-in behind it.
    pub stub: Arc<Stub>,
    stop: watch::Sender<bool>,
    server: tokio::task::JoinHandle<()>,
}

/// Serves a console with `[web]` = `web` (its `listen` replaced by a free loopback port).
pub async fn start_web(web: Web) -> WebServed {
    let listener = loopd::web::bind("127.0.0.1:0".parse().unwrap())
        .await
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let console = Arc::new(
        Console::from_config(&Web {
            listen: Some(addr),
            ..web
        })
        .unwrap(),
    );
    let stub = Arc::new(Stub::new(4));
    let (stop, stopped) = watch::channel(false);
    let server = tokio::spawn(serve(
        listener,
        Arc::clone(&stub),
        Arc::clone(&console),
        stopped,
    ));
    WebServed {
        addr,
        console,
        stub,
        stop,
        server,
    }
}

/// An answer: status, headers, body as text.
pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

impl Answer {
    /// Header `name` as text ("" when absent).
    pub fn header(&self, name: &str) -> String {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    }
}

/// A signed-in browser: its cookie header and CSRF token.
pub struct Browser {
    pub cookie: String,
    pub csrf: String,
}

impl WebServed {
    /// Sends `method path` with `headers` (Host is the console's unless given) and `body`.
    pub async fn send(
        &self,
        method: Method,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Answer {
        let stream = tokio::net::TcpStream::connect(self.addr).await.unwrap();
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .unwrap();
        tokio::spawn(connection);
        let mut builder = Request::builder().method(method).uri(path);
        if !headers.iter().any(|(n, _)| n.eq_ignore_ascii_case("host")) {
            builder = builder.header("host", self.addr.to_string());
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        let request = builder
            .body(Full::new(Bytes::from(body.to_string())))
            .unwrap();
        let response = bounded(sender.send_request(request)).await.unwrap();
        let (parts, body) = response.into_parts();
        let bytes = bounded(body.collect()).await.unwrap().to_bytes();
        Answer {
            status: parts.status,
            headers: parts.headers,
            body: String::from_utf8_lossy(&bytes).into_owned(),
        }
    }

    /// `GET path` with `headers`.
    pub async fn get(&self, path: &str, headers: &[(&str, &str)]) -> Answer {
        self.send(Method::GET, path, headers, "").await
    }

    /// Signs a browser in with a fresh link; its cookie and CSRF token (read off a page).
    pub async fn sign_in(&self) -> Browser {
        let link = self.console.sign_ins.mint_link().unwrap();
        let answer = self
            .get(&format!("/signin?token={}", link.token), &[])
            .await;
        assert_eq!(answer.status, StatusCode::SEE_OTHER, "{}", answer.body);
        let set = answer.header("set-cookie");
        let cookie = set.split(';').next().unwrap().to_string();
        let page = self.get("/", &[("cookie", &cookie)]).await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        let csrf = between(&page.body, "name=\"csrf-token\" content=\"", "\"").to_string();
        assert_eq!(csrf.len(), 64, "{}", page.body);
        Browser { cookie, csrf }
    }

    /// Stops the console and waits (bounded) until it has.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        bounded(self.server).await.unwrap();
    }
}

/// The text of `haystack` between the first `start` and the next `end` after it.
pub fn between<'a>(haystack: &'a str, start: &str, end: &str) -> &'a str {
    let from = haystack.find(start).map(|at| at + start.len()).unwrap_or(0);
    let rest = &haystack[from..];
    &rest[..rest.find(end).unwrap_or(rest.len())]
}
