//! brokerd's connection limits (`[limits] max_connections`, `header_read_timeout_ms`,
//! `idle_timeout_ms`): silent clients past the cap do not keep loopd out for longer than
//! their grace (bxhttp's `FIRST_BYTE_GRACE_MS`), a running tool call
//! is never cut to make room or for being quiet, a full server answers 503 with its error
//! body, and so does a request head hyper cannot read (431 here).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use brokerd::config::Limits;
use brokerd::server::{ServerOptions, bind_socket, serve};
use brokerd::tool::{CallContext, CallFuture, Tool, ToolOutput};
use common::{broker, config, grant, http, http_json, request, tools};
use http::{Method, StatusCode};
use proto::api::error_kind;
use proto::{ToolResponse, ToolSchema};
use serde_json::{Value, json};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;
use tokio::sync::{oneshot, watch};

/// The longest a test waits for something it expects.
const WAIT: Duration = Duration::from_secs(10);

/// A tool that says it started, then answers once released.
struct Gate {
    started: watch::Sender<usize>,
    open: watch::Receiver<bool>,
}

impl Tool for Gate {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: "gate".into(),
            description: "answers once released".into(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }

    fn call<'a>(&'a self, _arguments: &'a Value, _ctx: CallContext<'a>) -> CallFuture<'a> {
        let mut open = self.open.clone();
        self.started.send_modify(|n| *n += 1);
        Box::pin(async move {
            let _ = open.wait_for(|o| *o).await;
            Ok(ToolOutput {
                content: "released".into(),
                truncated: false,
            })
        })
    }
}

struct Served {
    socket: PathBuf,
    started: watch::Receiver<usize>,
    release: watch::Sender<bool>,
    _stop: oneshot::Sender<()>,
    _dir: tempfile::TempDir,
}

fn start(limits: Limits) -> Served {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), vec![grant("gate", &["*"])], limits);
    let (started_tx, started) = watch::channel(0);
    let (release, open) = watch::channel(false);
    let gate = Arc::new(Gate {
        started: started_tx,
        open,
    });
    let b = Arc::new(broker(&cfg, tools(vec![gate])));
    let options = ServerOptions::from_config(&cfg).unwrap();
    let listener = bind_socket(&cfg.socket, options.allowed_gid).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    tokio::spawn(serve(listener, b, options, async {
        let _ = stopped.await;
    }));
    Served {
        socket: cfg.socket.clone(),
        started,
        release,
        _stop: stop,
        _dir: dir,
    }
}

impl Served {
    /// Starts a call of the gate on its own connection and waits (bounded) until it runs.
    async fn gate_call(&mut self, nth: usize) -> tokio::task::JoinHandle<Value> {
        let socket = self.socket.clone();
        let body = serde_json::to_vec(&request("main", 1, "gate", "{}")).unwrap();
        let call = tokio::spawn(async move {
            let (status, value) = http_json(&socket, Method::POST, "/v1/call", Some(body)).await;
            assert_eq!(status, StatusCode::OK, "{value}");
            value
        });
        tokio::time::timeout(WAIT, self.started.wait_for(|n| *n >= nth))
            .await
            .expect("the call did not start")
            .unwrap();
        call
    }
}

/// Waits (bounded) until brokerd closes `stream`.
async fn closed(stream: &mut UnixStream) {
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(WAIT, stream.read(&mut byte))
        .await
        .expect("brokerd did not close the connection");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

fn assert_released(answer: Value) {
    let response: ToolResponse = serde_json::from_value(answer).unwrap();
    assert!(
        matches!(&response, ToolResponse::Result { content, .. } if content == "released"),
        "{response:?}"
    );
}

fn limits(max_connections: usize) -> Limits {
    Limits {
        max_connections,
        ..Limits::default()
    }
}

/// Waits (bounded) until at least `n` of `streams` are closed by brokerd.
async fn closed_at_least(streams: Vec<UnixStream>, n: usize) {
    let (closed_tx, mut closed_rx) = tokio::sync::mpsc::unbounded_channel();
    for mut stream in streams {
        let closed_tx = closed_tx.clone();
        tokio::spawn(async move {
            let mut byte = [0u8; 1];
            if let Ok(Ok(0)) = tokio::time::timeout(WAIT, stream.read(&mut byte)).await {
                let _ = closed_tx.send(());
            }
        });
    }
    drop(closed_tx);
    let mut closed = 0;
    while closed < n && closed_rx.recv().await.is_some() {
        closed += 1;
    }
    assert_eq!(closed, n, "brokerd did not close enough silent connections");
}

#[tokio::test]
async fn server_silent_connections_past_the_cap_do_not_keep_a_call_out() {
    let mut s = start(limits(2));
    let mut silent = Vec::new();
    for _ in 0..5 {
        silent.push(UnixStream::connect(&s.socket).await.unwrap());
    }
    // Just opened, they may be about to send: until their grace is over a newcomer is
    // answered 503 (bxhttp::FIRST_BYTE_GRACE_MS); then they are closed to make room.
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let (status, _) = http(&s.socket, Method::GET, "/v1/health", None).await;
        if status == StatusCode::OK {
            break;
        }
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(tokio::time::Instant::now() < deadline, "never served");
        // Pacing of the retries, as a client honouring Retry-After would (shorter here).
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let call = s.gate_call(1).await;
    // All but one were closed (to make room, or unanswered past the cap: they asked
    // nothing), long before the header-read timeout.
    closed_at_least(silent, 4).await;
    s.release.send_replace(true);
    assert_released(call.await.unwrap());
}

#[tokio::test]
async fn server_with_every_connection_running_a_call_answers_503_with_its_error_body() {
    let mut s = start(limits(2));
    let first = s.gate_call(1).await;
    let second = s.gate_call(2).await;

    let (status, error) = http_json(&s.socket, Method::GET, "/v1/health", None).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert_eq!(error["error"]["kind"], error_kind::UNAVAILABLE);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("limits.max_connections"), "{message}");

    s.release.send_replace(true);
    assert_released(first.await.unwrap());
    assert_released(second.await.unwrap());
    let (status, _) = http(&s.socket, Method::GET, "/v1/health", None).await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn server_a_running_call_outlives_both_timeouts() {
    let mut s = start(Limits {
        header_read_timeout_ms: 100,
        idle_timeout_ms: 100,
        ..Limits::default()
    });
    let call = s.gate_call(1).await;
    // A silent client is closed at the header-read timeout; the call, quiet just as long,
    // is not.
    let mut silent = UnixStream::connect(&s.socket).await.unwrap();
    closed(&mut silent).await;
    s.release.send_replace(true);
    assert_released(call.await.unwrap());
}

#[test]
fn server_options_take_the_connection_limits_from_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        vec![],
        Limits {
            max_connections: 7,
            header_read_timeout_ms: 8,
            idle_timeout_ms: 9,
            ..Limits::default()
        },
    );
    let options = ServerOptions::from_config(&cfg).unwrap();
    assert_eq!(
        (
            options.connections.max_connections,
            options.connections.header_read_timeout_ms,
            options.connections.idle_timeout_ms
        ),
        (7, 8, 9)
    );
}

#[tokio::test]
async fn server_a_head_with_too_many_fields_gets_431_with_its_error_body() {
    let s = start(limits(8));
    let fields: String = (0..=bxhttp::MAX_HEADER_FIELDS)
        .map(|i| format!("x-{i}: v\r\n"))
        .collect();
    let mut stream = UnixStream::connect(&s.socket).await.unwrap();
    let head = format!("GET /v1/health HTTP/1.1\r\nhost: b\r\n{fields}\r\n");
    stream.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut answer))
        .await
        .expect("brokerd did not close the connection")
        .unwrap();
    let answer = String::from_utf8(answer).unwrap();
    assert!(
        answer.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"),
        "{answer}"
    );
    let (_, body) = answer.split_once("\r\n\r\n").unwrap();
    let error: Value = serde_json::from_str(body).unwrap();
    assert_eq!(error["error"]["code"], 431);
    assert_eq!(error["error"]["kind"], error_kind::HEAD_TOO_LARGE);
    let message = error["error"]["message"].as_str().unwrap();
    assert!(message.contains("header fields"), "{message}");
}
