//! What brokerd's tests share: test-only tools, grants and requests, a broker over a temporary
//! audit log, and requests sent with bxhttp's client.
#![allow(clippy::unwrap_used, clippy::expect_used, dead_code)]

use brokerd::audit::AuditLog;
use brokerd::config::{Approve, Config, DEFAULT_PORTS, Grant, GrantDefaults, HOST_TOOLS, Limits};
use brokerd::tool::{CallContext, CallFuture, Tool, ToolError, ToolOutput};
use brokerd::{Broker, ToolSet};
use bxcore::{CallId, DataClass, Labels, SessionId};
use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use proto::{ToolRequest, ToolSchema};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::{Arc, Mutex};
use tokio::sync::oneshot;

pub mod web;

/// A session id.
pub fn sid(s: &str) -> SessionId {
    SessionId::new(s).unwrap()
}

/// A grant of `tool` to `sessions` with the tool's defaults.
pub fn grant(tool: &str, sessions: &[&str]) -> Grant {
    let d = GrantDefaults::for_tool(tool);
    Grant {
        tool: tool.to_string(),
        sessions: sessions.iter().map(|s| s.to_string()).collect(),
        paths: Vec::new(),
        hosts: Vec::new(),
        ports: if HOST_TOOLS.contains(&tool) {
            DEFAULT_PORTS.to_vec()
        } else {
            Vec::new()
        },
        networks: Vec::new(),
        result_class: d.result_class,
        result_untrusted: d.result_untrusted,
        max_context_class: d.max_context_class,
        when_untrusted: d.when_untrusted,
        approve: Approve::Never,
        max_calls_per_turn: None,
        exec: Default::default(),
        http: brokerd::config::HttpGrant {
            methods: if tool == "http_fetch" {
                vec!["GET".to_string()]
            } else {
                Vec::new()
            },
            ..Default::default()
        },
    }
}

/// A request from `session` in `turn` for `tool` with `arguments`, context public and trusted.
pub fn request(session: &str, turn: u64, tool: &str, arguments: &str) -> ToolRequest {
    ToolRequest {
        session: sid(session),
        turn,
        call: CallId(1),
        tool: tool.to_string(),
        arguments: arguments.to_string(),
        context: Labels::PUBLIC,
        counts_for: None,
        approval: None,
    }
}

/// `request` with context label `class`, `untrusted`.
pub fn with_context(mut r: ToolRequest, class: DataClass, untrusted: bool) -> ToolRequest {
    r.context = Labels::new(class, untrusted);
    r
}

fn schema(name: &str) -> ToolSchema {
    ToolSchema {
        name: name.to_string(),
        description: format!("test tool {name}"),
        parameters: json!({"type": "object", "properties": {}}),
    }
}

/// A tool that never finishes; tells `dropped` when its call is dropped (stopped).
pub struct Hang {
    /// The name.
    pub name: String,
    /// Sends when a call is dropped (the sender inside the call future is dropped with it).
    pub dropped: Mutex<Option<oneshot::Sender<()>>>,
}

impl Hang {
    /// A hanging tool and the receiver that resolves when its call is stopped.
    pub fn new(name: &str) -> (Arc<Hang>, oneshot::Receiver<()>) {
        let (tx, rx) = oneshot::channel();
        let tool = Hang {
            name: name.to_string(),
            dropped: Mutex::new(Some(tx)),
        };
        (Arc::new(tool), rx)
    }
}

impl Tool for Hang {
    fn schema(&self) -> ToolSchema {
        schema(&self.name)
    }
    fn call<'a>(&'a self, _arguments: &'a Value, _ctx: CallContext<'a>) -> CallFuture<'a> {
        let guard = self.dropped.lock().unwrap().take();
        Box::pin(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(ToolOutput {
                content: String::new(),
                truncated: false,
            })
        })
    }
}

/// A tool that answers with a fixed result or error.
pub struct Fixed {
    /// The name.
    pub name: String,
    /// What every call gives.
    pub answer: Result<ToolOutput, ToolError>,
}

impl Fixed {
    /// A tool named `name` whose every call gives `answer`.
    pub fn new(name: &str, answer: Result<ToolOutput, ToolError>) -> Arc<Fixed> {
        Arc::new(Fixed {
            name: name.to_string(),
            answer,
        })
    }

    /// A tool named `name` that returns `content`.
    pub fn text(name: &str, content: &str) -> Arc<Fixed> {
        Fixed::new(
            name,
            Ok(ToolOutput {
                content: content.to_string(),
                truncated: false,
            }),
        )
    }
}

impl Tool for Fixed {
    fn schema(&self) -> ToolSchema {
        schema(&self.name)
    }
    fn call<'a>(&'a self, _arguments: &'a Value, _ctx: CallContext<'a>) -> CallFuture<'a> {
        let answer = self.answer.clone();
        Box::pin(async move { answer })
    }
}

/// A tool that panics.
pub struct Panics;

impl Tool for Panics {
    fn schema(&self) -> ToolSchema {
        schema("panics")
    }
    fn call<'a>(&'a self, _arguments: &'a Value, _ctx: CallContext<'a>) -> CallFuture<'a> {
        Box::pin(async { panic!("test tool panics on purpose") })
    }
}

/// The built-ins plus `extra`.
pub fn tools(extra: Vec<Arc<dyn Tool>>) -> ToolSet {
    let mut set = ToolSet::with_builtins().unwrap();
    for tool in extra {
        set.insert(tool).unwrap();
    }
    set
}

/// A config with `grants` and `limits`, its socket and state dir under `dir`.
pub fn config(dir: &Path, grants: Vec<Grant>, limits: Limits) -> Config {
    Config {
        socket: dir.join("brokerd.sock"),
        state_dir: dir.join("state"),
        limits,
        grants,
        ..Config::default()
    }
}

/// A broker for `cfg` over `tools`, auditing under `cfg.state_dir`.
pub fn broker(cfg: &Config, tools: ToolSet) -> Broker {
    let audit = Arc::new(AuditLog::open(&cfg.state_dir).unwrap());
    Broker::new(cfg, tools, audit).unwrap()
}

/// One HTTP/1.1 request over the Unix socket at `socket`: status and body.
pub async fn http(
    socket: &Path,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
) -> (StatusCode, Vec<u8>) {
    let (status, _, bytes) = exchange(socket, method, path, body).await;
    (status, bytes)
}

/// One HTTP/1.1 request over the Unix socket at `socket`: status, headers and body.
pub async fn exchange(
    socket: &Path,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
) -> (StatusCode, HeaderMap, Vec<u8>) {
    let mut builder = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "brokerd");
    if body.is_some() {
        builder = builder.header("content-type", "application/json");
    }
    let request = builder
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .unwrap();
    let response = bxhttp::client::send(socket, request).await.unwrap();
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.unwrap().to_bytes();
    (parts.status, parts.headers, bytes.to_vec())
}

/// `http` whose body is JSON.
pub async fn http_json(
    socket: &Path,
    method: Method,
    path: &str,
    body: Option<Vec<u8>>,
) -> (StatusCode, Value) {
    let (status, bytes) = http(socket, method, path, body).await;
    let value = serde_json::from_slice(&bytes)
        .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&bytes)));
    (status, value)
}

/// Waits (at most `wait_ms`) until `child`, a brokerd started with its stderr piped, logs that
/// it serves; its stderr is read on to the end on a thread of its own.
pub fn wait_serving(child: &mut std::process::Child, wait_ms: u64) {
    use std::io::BufRead;
    let stderr = child.stderr.take().expect("brokerd's stderr is piped");
    let lines = std::io::BufReader::new(stderr).lines();
    let (send, serving) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in lines.map_while(Result::ok) {
            if line.contains(brokerd::daemon::SERVING) {
                let _ = send.send(());
            }
        }
    });
    let waited = std::time::Instant::now();
    let served = serving.recv_timeout(std::time::Duration::from_millis(wait_ms));
    assert!(
        served.is_ok(),
        "brokerd did not say {:?} within {:?}",
        brokerd::daemon::SERVING,
        waited.elapsed()
    );
}
