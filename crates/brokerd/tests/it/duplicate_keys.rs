//! Arguments that hold a key twice (issue 32.6): serde_json keeps the last `path`, a person
//! reading the approval the first. brokerd refuses such arguments, at any depth, before any
//! check, approval or run, naming the key; and the owner is asked about the arguments as
//! brokerd parsed them (the value it checks and runs), never a differently read text.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use brokerd::audit::{AuditDecision, AuditLog};
use brokerd::config::{ApprovalSettings, Approve, Grant, Limits};
use brokerd::server::{ServerOptions, bind_socket, serve};
use bxcore::DenyReason;
use common::{Fixed, broker, config, grant, http, request, tools};
use http::{Method, StatusCode};
use proto::{ApprovalUse, ToolRequest, ToolResponse};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::sync::oneshot;

/// A brokerd on a temporary socket whose every grant asks the owner, with a `files` root.
struct Bed {
    dir: tempfile::TempDir,
    socket: PathBuf,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
}

impl Bed {
    async fn start() -> Bed {
        let dir = tempfile::tempdir().unwrap();
        let files = dir.path().join("files");
        std::fs::create_dir(&files).unwrap();
        let asks = |mut g: Grant| {
            g.approve = Approve::Always;
            g
        };
        let mut write = grant("write_file", &["*"]);
        write.paths = vec![files];
        let mut cfg = config(
            dir.path(),
            vec![asks(write), asks(grant("note", &["*"]))],
            Limits::default(),
        );
        cfg.approvals = ApprovalSettings {
            expire_ms: 60_000,
            max_pending: 8,
        };
        let b = Arc::new(broker(&cfg, tools(vec![Fixed::text("note", "noted")])));
        let options = ServerOptions::from_config(&cfg).unwrap();
        let listener = bind_socket(&cfg.socket, options.allowed_gid).unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, b, options, async {
            let _ = stopped.await;
        }));
        Bed {
            socket: cfg.socket.clone(),
            dir,
            stop,
            server,
        }
    }

    /// `name` under the write root, JSON-quoted.
    fn path(&self, name: &str) -> String {
        serde_json::to_string(&self.dir.path().join("files").join(name)).unwrap()
    }

    fn exists(&self, name: &str) -> bool {
        self.dir.path().join("files").join(name).exists()
    }

    fn asked_lines(&self) -> usize {
        AuditLog::read(&self.dir.path().join("state").join("audit.jsonl"))
            .unwrap()
            .iter()
            .filter(|l| l.decision == AuditDecision::Asked)
            .count()
    }

    async fn call(&self, r: &ToolRequest) -> ToolResponse {
        let (status, bytes) = post(&self.socket, serde_json::to_vec(r).unwrap()).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{}",
            String::from_utf8_lossy(&bytes)
        );
        serde_json::from_slice(&bytes).unwrap()
    }

    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.server.await.unwrap();
    }
}

async fn post(socket: &Path, body: Vec<u8>) -> (StatusCode, Vec<u8>) {
    http(socket, Method::POST, "/v1/call", Some(body)).await
}

#[track_caller]
fn refused_naming(response: ToolResponse, key: &str) {
    match response {
        ToolResponse::Denied {
            reason: DenyReason::InvalidArguments,
            detail: Some(detail),
            ..
        } => assert!(
            detail.contains(&format!(
                "they hold the key \"{key}\" twice: give each key once"
            )),
            "{detail}"
        ),
        other => panic!("expected invalid_arguments naming {key:?}, got {other:?}"),
    }
}

#[tokio::test]
async fn a_write_whose_path_is_given_twice_is_refused_and_never_asked_about() {
    let bed = Bed::start().await;
    let arguments = format!(
        r#"{{"path":{},"content":"x","path":{}}}"#,
        bed.path("safe.txt"),
        bed.path("evil.txt")
    );
    let response = bed
        .call(&request("main", 1, "write_file", &arguments))
        .await;
    refused_naming(response, "path");
    assert_eq!(bed.asked_lines(), 0, "the owner was never asked");
    assert!(!bed.exists("safe.txt") && !bed.exists("evil.txt"));
    bed.stop().await;
}

#[tokio::test]
async fn a_key_given_twice_in_a_nested_object_is_refused() {
    let bed = Bed::start().await;
    let arguments = r#"{"options":{"mode":"read","mode":"delete"},"text":"x"}"#;
    refused_naming(
        bed.call(&request("main", 1, "note", arguments)).await,
        "mode",
    );
    assert_eq!(bed.asked_lines(), 0);
    bed.stop().await;
}

#[tokio::test]
async fn the_owner_is_asked_about_the_arguments_as_brokerd_parsed_them() {
    let bed = Bed::start().await;
    // Spaces, an escape and an order of brokerd's serialiser's own: the owner reads the value
    // that is checked and runs, written out one way.
    let raw = format!(
        "{{ \"overwrite\": true,\n  \"content\": \"h\\u0069\", \"path\": {} }}",
        bed.path("a.txt")
    );
    let r = request("main", 1, "write_file", &raw);
    let ask = match bed.call(&r).await {
        ToolResponse::Ask { approval } => approval,
        other => panic!("expected an ask, got {other:?}"),
    };
    let parsed: Value = serde_json::from_str(&raw).unwrap();
    assert_eq!(ask.arguments, serde_json::to_string(&parsed).unwrap());
    assert_ne!(ask.arguments, raw);
    // The approval is bound to the text the call was sent with: sent again, it runs.
    let mut again = r.clone();
    again.approval = Some(ApprovalUse {
        id: ask.id,
        for_turn: false,
    });
    let ran = bed.call(&again).await;
    assert!(matches!(ran, ToolResponse::Result { .. }), "{ran:?}");
    let written = std::fs::read_to_string(bed.dir.path().join("files").join("a.txt")).unwrap();
    assert_eq!(written, "hi");
    bed.stop().await;
}

/// The request body itself: serde's derived `ToolRequest` refuses a field given twice, so a
/// second `tool` or `arguments` cannot slip past what was checked (this held before issue 32;
/// the test keeps it so).
#[tokio::test]
async fn a_request_body_that_gives_a_field_twice_is_a_400() {
    let bed = Bed::start().await;
    let body = br#"{"session":"main","turn":1,"call":1,"tool":"note","arguments":"{}","context":{"class":"public","untrusted":false},"arguments":"{\"text\":\"y\"}"}"#;
    let (status, bytes) = post(&bed.socket, body.to_vec()).await;
    let text = String::from_utf8_lossy(&bytes);
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
    assert!(text.contains("duplicate field `arguments`"), "{text}");
    assert_eq!(bed.asked_lines(), 0);
    bed.stop().await;
}
