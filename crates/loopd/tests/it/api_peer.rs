//! The peer check over a real connection: a process of another user is refused with a 403
//! unless it is in the configured group.
//!
//! Needs root (to start the other user's process, this test binary run as `nobody`); skipped
//! with a note otherwise. The pure rule is unit-tested in `loopd::api::peer`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_common;

use api_common::{bounded, get, send, start, test_options, text};
use http::StatusCode;
use loopd::api::ApiOptions;
use proto::api::{ApiError, error_kind};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The uid and gid of `nobody` on Debian-like systems.
const NOBODY: u32 = 65_534;
/// Where the child finds the socket.
const SOCKET_ENV: &str = "LOOPD_API_PEER_SOCKET";
/// The child's answer line prefix.
const ANSWER: &str = "peer-answer:";

/// What the child, run as `nobody`, got: status code and error kind (empty when none).
/// `None` when the check cannot run here.
async fn as_nobody(options: ApiOptions) -> Option<(u16, String)> {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to run a client as another user");
        return None;
    }
    let served = start(options);
    let dir = served.socket.parent().unwrap().to_path_buf();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::set_permissions(&served.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            "api_peer::child_asks_for_status",
            "--ignored",
            "--nocapture",
        ])
        .env(SOCKET_ENV, &served.socket)
        .uid(NOBODY)
        .gid(NOBODY); // std drops root's supplementary groups with the uid
    let output = match bounded(tokio::task::spawn_blocking(move || child.output()))
        .await
        .unwrap()
    {
        Ok(output) => output,
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            eprintln!("skipped: nobody cannot run this test binary here: {e}");
            served.stop().await;
            return None;
        }
        Err(e) => panic!("cannot start the child: {e}"),
    };
    served.stop().await;
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix(ANSWER))
        .unwrap_or_else(|| {
            panic!(
                "the child said nothing: {stdout}\n{}",
                String::from_utf8_lossy(&output.stderr)
            )
        });
    let (code, kind) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
    Some((code.parse().unwrap(), kind.to_string()))
}

#[tokio::test]
async fn api_peer_of_another_user_is_refused_with_403() {
    let options = ApiOptions {
        allowed_gid: None,
        ..test_options()
    };
    if let Some((code, kind)) = as_nobody(options).await {
        assert_eq!(code, 403);
        assert_eq!(kind, error_kind::FORBIDDEN);
    }
}

#[tokio::test]
async fn api_peer_in_the_configured_group_is_allowed() {
    let options = ApiOptions {
        allowed_gid: Some(NOBODY),
        ..test_options()
    };
    if let Some((code, kind)) = as_nobody(options).await {
        assert_eq!((code, kind.as_str()), (200, ""));
    }
}

/// Run by the tests above as `nobody`: asks for the status and prints what came back.
#[tokio::test]
#[ignore = "run as another user by the tests above"]
async fn child_asks_for_status() {
    let socket = std::path::PathBuf::from(std::env::var(SOCKET_ENV).unwrap());
    let (status, _, body) = send(&socket, get("/v1/status")).await;
    let kind = match status {
        StatusCode::OK => String::new(),
        _ => {
            serde_json::from_str::<ApiError>(&text(body).await)
                .unwrap()
                .error
                .kind
        }
    };
    println!("{ANSWER}{} {kind}", status.as_u16());
}
