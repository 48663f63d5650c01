//! brokerd's HTTP server end to end over a temporary Unix socket: health, catalogue, calls,
//! 400 for a bad body, 413 over the body limit, 404 and 405, the socket's mode, and shutdown.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use brokerd::config::Limits;
use brokerd::server::{SOCKET_MODE_PRIVATE, ServerOptions, bind_socket, peer_allowed, serve};
use bxcore::{DataClass, DenyReason};
use common::{broker, config, exchange, grant, http, http_json, request, sid, tools};
use http::{Method, StatusCode};
use proto::{Catalogue, ToolResponse};
use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::sync::Arc;
use tokio::sync::oneshot;

/// The body limit the test server runs with, in bytes.
const MAX_BODY_BYTES: usize = 512;

struct Running {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    state_dir: PathBuf,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
}

async fn start() -> Running {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        max_body_bytes: MAX_BODY_BYTES,
        ..Limits::default()
    };
    let cfg = config(
        dir.path(),
        vec![grant("echo", &["*"]), grant("clock", &["main"])],
        limits,
    );
    let b = Arc::new(broker(&cfg, tools(vec![])));
    let options = ServerOptions::from_config(&cfg).unwrap();
    let listener = bind_socket(&cfg.socket, options.allowed_gid).unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(serve(listener, b, options, async {
        let _ = stopped.await;
    }));
    Running {
        socket: cfg.socket.clone(),
        state_dir: cfg.state_dir.clone(),
        _dir: dir,
        stop,
        server,
    }
}

fn body(value: &impl serde::Serialize) -> Option<Vec<u8>> {
    Some(serde_json::to_vec(value).unwrap())
}

#[tokio::test]
async fn server_health_catalogue_and_calls() {
    let s = start().await;
    let mode = std::fs::metadata(&s.socket).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, SOCKET_MODE_PRIVATE);

    let (status, health) = http_json(&s.socket, Method::GET, "/v1/health", None).await;
    assert_eq!(
        (status, health),
        (
            StatusCode::OK,
            // A tool set made without a probe has no sandbox: exec fails closed.
            serde_json::json!({
                "status": "ok",
                "exec": "unavailable: the sandbox was not probed",
                // A broker made without the daemon's checkpoint store records no writes.
                "checkpoints": "off"
            })
        )
    );

    let (status, bytes) = http(&s.socket, Method::GET, "/v1/catalogue?session=main", None).await;
    assert_eq!(status, StatusCode::OK);
    let catalogue: Catalogue = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(catalogue.session, sid("main"));
    let names: Vec<_> = catalogue
        .tools
        .iter()
        .map(|t| t.schema.name.as_str())
        .collect();
    assert_eq!(names, ["clock", "echo"]);
    // Asked again with the version it holds, the client gets 304 and no body.
    let (_, headers, _) =
        exchange(&s.socket, Method::GET, "/v1/catalogue?session=main", None).await;
    let etag = headers.get(http::header::ETAG).unwrap().clone();
    let asking = http::Request::get("/v1/catalogue?session=main")
        .header("host", "brokerd")
        .header(http::header::IF_NONE_MATCH, etag.clone())
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let response = bxhttp::client::send(&s.socket, asking).await.unwrap();
    assert_eq!(response.status(), StatusCode::NOT_MODIFIED);
    assert_eq!(response.headers().get(http::header::ETAG), Some(&etag));
    let unmodified = http_body_util::BodyExt::collect(response.into_body())
        .await
        .unwrap();
    assert!(unmodified.to_bytes().is_empty());
    let (_, bytes) = http(&s.socket, Method::GET, "/v1/catalogue?session=sub-1", None).await;
    let catalogue: Catalogue = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(catalogue.tools.len(), 1);

    let call = request("main", 1, "echo", r#"{"text":"hi"}"#);
    let (status, bytes) = http(&s.socket, Method::POST, "/v1/call", body(&call)).await;
    assert_eq!(status, StatusCode::OK);
    let response: ToolResponse = serde_json::from_slice(&bytes).unwrap();
    assert_eq!(
        response,
        ToolResponse::Result {
            content: "hi".into(),
            class: DataClass::Public,
            untrusted: false,
            truncated: false
        }
    );
    // A denial is a decided call too: 200.
    let call = request("sub-1", 1, "clock", "{}");
    let (status, bytes) = http(&s.socket, Method::POST, "/v1/call", body(&call)).await;
    assert_eq!(status, StatusCode::OK);
    let response: ToolResponse = serde_json::from_slice(&bytes).unwrap();
    assert!(
        matches!(
            response,
            ToolResponse::Denied {
                reason: DenyReason::NoGrant,
                ..
            }
        ),
        "{response:?}"
    );

    let audit = std::fs::read_to_string(s.state_dir.join("audit.jsonl")).unwrap();
    // The allowed call's decided and finished lines, and the denial's one.
    assert_eq!(audit.lines().count(), 3, "{audit}");

    s.stop.send(()).unwrap();
    s.server.await.unwrap();
    assert!(!s.socket.exists(), "the socket file is removed at shutdown");
}

#[tokio::test]
async fn server_refuses_bad_requests_saying_why() {
    let s = start().await;
    let kind = |v: &serde_json::Value| v["error"]["kind"].as_str().unwrap().to_string();
    let message = |v: &serde_json::Value| v["error"]["message"].as_str().unwrap().to_string();

    let (status, v) = http_json(
        &s.socket,
        Method::POST,
        "/v1/call",
        Some(b"not json".to_vec()),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(kind(&v), "bad_request");
    assert!(message(&v).contains("not a ToolRequest"), "{v}");

    let mut call = serde_json::to_value(request("main", 1, "echo", "{}")).unwrap();
    call["extra"] = serde_json::json!(1);
    let (status, v) = http_json(&s.socket, Method::POST, "/v1/call", body(&call)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(message(&v).contains("extra"), "{v}");

    let mut call = serde_json::to_value(request("main", 1, "echo", "{}")).unwrap();
    call["session"] = serde_json::json!("../etc");
    let (status, _) = http_json(&s.socket, Method::POST, "/v1/call", body(&call)).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);

    let big = request(
        "main",
        1,
        "echo",
        &format!(r#"{{"text":"{}"}}"#, "x".repeat(MAX_BODY_BYTES)),
    );
    let (status, v) = http_json(&s.socket, Method::POST, "/v1/call", body(&big)).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    assert_eq!(kind(&v), "too_large");
    assert!(message(&v).contains("limits.max_body_bytes"), "{v}");

    for (path, why) in [
        ("/v1/catalogue", "required"),
        ("/v1/catalogue?session=", "session"),
        ("/v1/catalogue?session=main&x=1", "unknown query parameter"),
    ] {
        let (status, v) = http_json(&s.socket, Method::GET, path, None).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{path}");
        assert!(message(&v).contains(why), "{path}: {v}");
    }

    let (status, v) = http_json(&s.socket, Method::GET, "/v1/nothing", None).await;
    assert_eq!(
        (status, kind(&v).as_str()),
        (StatusCode::NOT_FOUND, "not_found")
    );
    let (status, v) = http_json(&s.socket, Method::GET, "/v1/call", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);
    assert!(message(&v).contains("POST"), "{v}");
    let (status, _) = http_json(&s.socket, Method::POST, "/v1/health", None).await;
    assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED);

    // Nothing was decided, so nothing was audited.
    let audit = std::fs::read_to_string(s.state_dir.join("audit.jsonl")).unwrap();
    assert!(audit.is_empty(), "{audit}");
    s.stop.send(()).unwrap();
    s.server.await.unwrap();
}

#[tokio::test]
async fn a_wrong_method_is_told_the_method_the_path_takes() {
    let s = start().await;
    for (method, path, allowed) in [
        (Method::GET, "/v1/call", "POST"),
        (Method::POST, "/v1/health", "GET"),
        (Method::DELETE, "/v1/catalogue?session=main", "GET"),
    ] {
        let (status, headers, _) = exchange(&s.socket, method, path, None).await;
        assert_eq!(status, StatusCode::METHOD_NOT_ALLOWED, "{path}");
        let allow = headers
            .get(http::header::ALLOW)
            .map(|v| v.to_str().unwrap());
        assert_eq!(
            allow,
            Some(allowed),
            "405 for {path} names the method it takes"
        );
    }
    s.stop.send(()).unwrap();
    s.server.await.unwrap();
}

#[tokio::test]
async fn binding_refuses_a_live_socket_and_replaces_a_stale_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.sock");
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    let listener = bind_socket(&path, None).unwrap();
    let err = bind_socket(&path, None).unwrap_err().to_string();
    assert!(err.contains("another process"), "{err}");
    drop(listener);
    let file = dir.path().join("file");
    std::fs::write(&file, b"keep").unwrap();
    assert!(
        bind_socket(&file, None)
            .unwrap_err()
            .to_string()
            .contains("not a socket")
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"keep");
}

#[tokio::test]
async fn binding_with_a_group_gives_mode_0660_and_the_group() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("g.sock");
    let gid = nix::unistd::getegid().as_raw();
    let _listener = bind_socket(&path, Some(gid)).unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!((meta.mode() & 0o777, meta.gid()), (0o660, gid));
}

#[test]
fn peers_allowed_are_root_our_user_and_the_group() {
    const OWN: u32 = 990;
    const GROUP: u32 = 980;
    assert!(peer_allowed(0, 0, &[], OWN, None));
    assert!(peer_allowed(OWN, 5, &[], OWN, None));
    assert!(!peer_allowed(1000, GROUP, &[GROUP], OWN, None));
    assert!(peer_allowed(1000, GROUP, &[], OWN, Some(GROUP)));
    assert!(peer_allowed(1000, 1000, &[1000, GROUP], OWN, Some(GROUP)));
    assert!(!peer_allowed(1000, 1000, &[1000], OWN, Some(GROUP)));
}

#[test]
fn server_options_name_an_unknown_group() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path(), vec![], Limits::default());
    cfg.socket_group = Some("no-such-group-brokerd-test".into());
    let err = ServerOptions::from_config(&cfg).unwrap_err().to_string();
    assert!(
        err.contains("no-such-group-brokerd-test") && err.contains("no such group"),
        "{err}"
    );
}
