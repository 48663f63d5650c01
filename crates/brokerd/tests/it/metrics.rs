//! brokerd's metrics (`docs/metrics.md`) through `GET /metrics` on its socket: the counts
//! match the calls made (allowed, denied by reason, asked), the tool label stays bounded
//! however many tool names a model invents, and the format follows the `Accept` header. The
//! MCP series are in `metrics/mcp.rs`; the running daemon, its TCP listener and
//! `promtool check metrics` in `metrics/daemon.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod daemon;
mod labels;
mod mcp;

use crate::common;

use brokerd::config::{Approve, Limits};
use brokerd::server::{ServerOptions, bind_socket, serve};
use bytes::Bytes;
use common::{Fixed, broker, config, grant, request, tools};
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use proto::{ToolRequest, ToolResponse};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::oneshot;

/// How many invented tool names the attack sends.
const INVENTED_TOOLS: usize = 300;

/// A brokerd serving in this process.
struct Running {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.server.await.unwrap();
    }
}

/// brokerd with `echo` granted to every session, `clock` to `main` only, and `note` (a test
/// tool) to every session under `approve = "always"`.
async fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let mut note = grant("note", &["*"]);
    note.approve = Approve::Always;
    let grants = vec![grant("echo", &["*"]), grant("clock", &["main"]), note];
    let cfg = config(dir.path(), grants, Limits::default());
    let b = Arc::new(broker(&cfg, tools(vec![Fixed::text("note", "noted")])));
    let options = ServerOptions::from_config(&cfg).unwrap();
    let listener = bind_socket(&cfg.socket, options.allowed_gid).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, b, options, async {
        let _ = stopped.await;
    }));
    Running {
        socket: cfg.socket.clone(),
        _dir: dir,
        stop,
        server,
    }
}

async fn call(socket: &Path, r: &ToolRequest) -> ToolResponse {
    let body = Some(serde_json::to_vec(r).unwrap());
    let (status, bytes) = common::http(socket, Method::POST, "/v1/call", body).await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    serde_json::from_slice(&bytes).unwrap()
}

/// `GET /metrics` with `accept`, if any: the content type and the text.
pub(crate) async fn scrape(socket: &Path, accept: Option<&str>) -> (String, String) {
    let mut builder = Request::builder()
        .method(Method::GET)
        .uri("/metrics")
        .header("host", "brokerd");
    if let Some(accept) = accept {
        builder = builder.header("accept", accept);
    }
    let request = builder.body(Full::new(Bytes::new())).unwrap();
    let response = bxhttp::client::send(socket, request).await.unwrap();
    let (parts, body) = response.into_parts();
    let text = String::from_utf8(body.collect().await.unwrap().to_bytes().to_vec()).unwrap();
    assert_eq!(parts.status, StatusCode::OK, "{text}");
    let content_type = parts.headers["content-type"].to_str().unwrap().to_owned();
    (content_type, text)
}

/// The value of the sample `series` (name and labels, exactly as written) in `text`.
pub(crate) fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.parse().ok()
    })
}

/// The samples of the metric `name` in `text` (its lines that are not comments).
pub(crate) fn series_of<'t>(text: &'t str, name: &str) -> Vec<&'t str> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) || l.starts_with(&format!("{name} ")))
        .collect()
}

fn calls(tool: &str, decision: &str, reason: &str) -> String {
    format!("brokerd_calls_total{{tool=\"{tool}\",decision=\"{decision}\",reason=\"{reason}\"}}")
}

#[tokio::test]
async fn metrics_count_calls_by_tool_decision_and_reason() {
    let s = start().await;
    for turn in 1..=2 {
        let r = call(
            &s.socket,
            &request("main", turn, "echo", r#"{"text":"hi"}"#),
        )
        .await;
        assert!(matches!(r, ToolResponse::Result { .. }), "{r:?}");
    }
    let r = call(&s.socket, &request("other", 1, "clock", "{}")).await;
    assert!(matches!(r, ToolResponse::Denied { .. }), "{r:?}");
    let r = call(&s.socket, &request("main", 1, "echo", "not json")).await;
    assert!(matches!(r, ToolResponse::Denied { .. }), "{r:?}");
    let r = call(&s.socket, &request("main", 1, "note", "{}")).await;
    assert!(matches!(r, ToolResponse::Ask { .. }), "{r:?}");
    let r = call(&s.socket, &request("main", 1, "no_such_tool", "{}")).await;
    assert!(matches!(r, ToolResponse::Denied { .. }), "{r:?}");

    let (content_type, text) = scrape(&s.socket, None).await;
    assert_eq!(content_type, bxmetrics::exposition::CLASSIC_CONTENT_TYPE);
    let expected = [
        (calls("echo", "allowed", "none"), 2.0),
        (calls("clock", "denied", "no_grant"), 1.0),
        (calls("echo", "denied", "invalid_arguments"), 1.0),
        (calls("note", "asked", "none"), 1.0),
        (calls("unknown", "denied", "unknown_tool"), 1.0),
        (
            "brokerd_call_duration_seconds_count{tool=\"echo\"}".to_owned(),
            2.0,
        ),
    ];
    for (series, value) in expected {
        assert_eq!(sample(&text, &series), Some(value), "{series} in\n{text}");
    }
    // Only allowed calls have a duration: the denied and asked ones ran nothing.
    let durations = series_of(&text, "brokerd_call_duration_seconds_count");
    assert_eq!(durations.len(), 1, "{text}");
    assert_eq!(series_of(&text, "brokerd_calls_total").len(), 5, "{text}");

    let (content_type, open) = scrape(&s.socket, Some("application/openmetrics-text")).await;
    assert_eq!(
        content_type,
        bxmetrics::exposition::OPENMETRICS_CONTENT_TYPE
    );
    assert!(open.ends_with("# EOF\n"), "{open}");
    assert!(open.contains("# TYPE brokerd_calls counter"), "{open}");
    s.stop().await;
}

#[tokio::test]
async fn metrics_an_invented_tool_name_adds_no_series() {
    let s = start().await;
    let r = call(&s.socket, &request("main", 1, "echo", r#"{"text":"hi"}"#)).await;
    assert!(matches!(r, ToolResponse::Result { .. }), "{r:?}");
    let (_, before) = scrape(&s.socket, None).await;
    for i in 0..INVENTED_TOOLS {
        let name = format!("invented_tool_{i}");
        let r = call(&s.socket, &request("main", 1, &name, "{}")).await;
        assert!(matches!(r, ToolResponse::Denied { .. }), "{r:?}");
    }
    let (_, after) = scrape(&s.socket, None).await;
    assert!(!after.contains("invented_tool"), "{after}");
    let unknown = calls("unknown", "denied", "unknown_tool");
    assert_eq!(sample(&after, &unknown), Some(INVENTED_TOOLS as f64));
    let samples = |text: &str| text.lines().filter(|l| !l.starts_with('#')).count();
    // One series more than before the attack: `unknown`'s.
    assert_eq!(
        samples(&after),
        samples(&before) + 1,
        "{before}\n---\n{after}"
    );
    s.stop().await;
}

#[tokio::test]
async fn metrics_take_get_only() {
    let s = start().await;
    let (status, _) = common::http(&s.socket, Method::POST, "/metrics", Some(Vec::new())).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    s.stop().await;
}
