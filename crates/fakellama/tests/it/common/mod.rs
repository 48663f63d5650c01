//! A tiny HTTP/1.1 client and helpers for fakellama's integration tests.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use std::ffi::OsStr;
use std::io::BufRead;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use fakellama::{Handle, Listen, Options, Script};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};

/// The most time one request may take in a test.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(20);

/// A response read in full.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: String,
    pub body: Bytes,
}

/// One item of an event stream.
#[derive(Debug, Clone, PartialEq)]
pub enum Sse {
    Data(Value),
    Done,
    Comment(String),
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// Parses `text/event-stream`: each event must end with a blank line.
    pub fn events(&self) -> Vec<Sse> {
        let text = self.text();
        assert!(
            text.ends_with("\n\n"),
            "stream does not end with an event: {text:?}"
        );
        text.trim_end_matches('\n')
            .split("\n\n")
            .map(|event| {
                if let Some(comment) = event.strip_prefix(':') {
                    Sse::Comment(comment.trim().to_owned())
                } else if event == "data: [DONE]" {
                    Sse::Done
                } else {
                    let data = event.strip_prefix("data: ").expect("data event");
                    Sse::Data(serde_json::from_str(data).expect("event JSON"))
                }
            })
            .collect()
    }

    /// The error `type` of an error answer.
    pub fn error_type(&self) -> String {
        self.json()["error"]["type"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

/// Sends one request over an open connection.
pub async fn send_on<S>(
    stream: S,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Reply
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(conn);
    let mut builder = hyper::Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost");
    for (k, v) in headers {
        builder = builder.header(*k, *v);
    }
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    let request = builder
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .unwrap();
    tokio::time::timeout(REQUEST_TIMEOUT, async {
        let response = sender.send_request(request).await.unwrap();
        let status = response.status().as_u16();
        let content_type = response
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            content_type,
            body,
        }
    })
    .await
    .expect("request timed out")
}

pub async fn send(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: Option<Vec<u8>>,
) -> Reply {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    send_on(stream, method, path, headers, body).await
}

pub async fn get(addr: SocketAddr, path: &str) -> Reply {
    send(addr, "GET", path, &[], None).await
}

pub async fn post(addr: SocketAddr, path: &str, body: &Value) -> Reply {
    send(addr, "POST", path, &[], Some(body.to_string().into_bytes())).await
}

/// POSTs a chat request to `/v1/chat/completions`.
pub async fn chat(addr: SocketAddr, body: &Value) -> Reply {
    post(addr, "/v1/chat/completions", body).await
}

/// A server on 127.0.0.1:0 with these options (listen is overridden).
pub async fn server(options: Options) -> (Handle, SocketAddr) {
    let handle = fakellama::start(options).await.unwrap();
    let Listen::Tcp(addr) = handle.addr().clone() else {
        panic!("not tcp")
    };
    (handle, addr)
}

/// A server running this script, otherwise defaults.
pub async fn scripted(toml: &str) -> (Handle, SocketAddr) {
    server(Options {
        script: Script::parse(toml).unwrap(),
        ..Options::default()
    })
    .await
}

/// A user message body.
pub fn user(text: &str) -> Value {
    json!({"messages":[{"role":"user","content":text}]})
}

/// The data events of a stream.
pub fn data(events: &[Sse]) -> Vec<Value> {
    events
        .iter()
        .filter_map(|e| match e {
            Sse::Data(v) => Some(v.clone()),
            _ => None,
        })
        .collect()
}

/// The concatenated `delta.<field>` strings of a stream.
pub fn joined_delta(events: &[Sse], field: &str) -> String {
    data(events)
        .iter()
        .filter_map(|v| v["choices"][0]["delta"][field].as_str().map(str::to_owned))
        .collect()
}

/// Kills the child when dropped, so a failing test leaves no process behind.
pub struct Child(pub std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the fakellama binary on `127.0.0.1:0` with these further arguments and waits (at
/// most 30 s) for its `fakellama listening on ADDR` line.
pub fn spawn_binary<'a>(args: impl IntoIterator<Item = &'a OsStr>) -> (Child, SocketAddr) {
    let mut child = Child(
        std::process::Command::new(env!("CARGO_BIN_EXE_fakellama"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("no listening line");
    let addr = line
        .trim()
        .strip_prefix("fakellama listening on ")
        .unwrap_or_else(|| panic!("unexpected line {line:?}"))
        .parse()
        .unwrap();
    (child, addr)
}
