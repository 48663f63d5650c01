//! `GET /v1/status` of the loopd binary against a stand-in brokerd whose health answer the
//! test sets: the `exec` walls brokerd reports reach `broker.exec` (issue 15), an older
//! brokerd's plain `{"status":"ok"}` gives none, and a health answer loopd cannot read shows
//! the broker as not answering, with the reason.

use crate::api_common::{get, json, send};
use crate::daemon_faults::Daemon;
use proto::api::{BrokerStatus, Status};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// The largest request head the stand-in reads, in bytes (loopd's are a few hundred).
const MAX_HEAD_BYTES: usize = 16 << 10;

/// A stand-in brokerd that answers every request with the current `health` body.
struct StandIn {
    _dir: tempfile::TempDir,
    socket: PathBuf,
    health: Arc<Mutex<String>>,
}

impl StandIn {
    fn start() -> StandIn {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("brokerd.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let health = Arc::new(Mutex::new(String::new()));
        let answers = Arc::clone(&health);
        // Threads of a test process end with it; the socket's directory goes with `_dir`.
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let answers = Arc::clone(&answers);
                std::thread::spawn(move || serve(stream, &answers));
            }
        });
        StandIn {
            _dir: dir,
            socket,
            health,
        }
    }

    fn answer(&self, body: &str) {
        *self.health.lock().unwrap() = body.to_string();
    }
}

/// Answers each request (a head with no body: loopd asks only `GET /v1/health` here) on one
/// kept-open connection until the client closes it.
fn serve(mut stream: UnixStream, health: &Mutex<String>) {
    let mut pending = Vec::new();
    loop {
        while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            pending.drain(..end + 4);
            let body = health.lock().unwrap().clone();
            let answer = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            if stream.write_all(answer.as_bytes()).is_err() {
                return;
            }
        }
        assert!(pending.len() < MAX_HEAD_BYTES, "an endless request head");
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
        }
    }
}

/// loopd's status now, its broker part.
fn broker_status(daemon: &Daemon) -> BrokerStatus {
    daemon.fake.rt.block_on(async {
        let (code, _, body) = send(&daemon.socket, get("/v1/status")).await;
        assert_eq!(code, http::StatusCode::OK);
        let status: Status = serde_json::from_value(json(body).await).unwrap();
        status.broker
    })
}

fn loopd_on(socket: &Path) -> Daemon {
    Daemon::start_configured(
        |_| Command::new(env!("CARGO_BIN_EXE_loopd")),
        Stdio::null(),
        &format!("[broker]\nsocket = {socket:?}\n"),
    )
}

#[test]
fn status_shows_the_exec_walls_brokerd_reports() {
    let brokerd = StandIn::start();
    brokerd.answer(r#"{"status":"ok","exec":"bubblewrap + Landlock v4"}"#);
    let daemon = loopd_on(&brokerd.socket);

    let broker = broker_status(&daemon);
    assert!(broker.ok, "{broker:?}");
    assert_eq!(broker.kind, "brokerd");
    assert_eq!(broker.exec.as_deref(), Some("bubblewrap + Landlock v4"));

    brokerd.answer(r#"{"status":"ok","exec":"unavailable: user namespaces are disabled"}"#);
    let broker = broker_status(&daemon);
    assert!(broker.ok, "{broker:?}");
    assert_eq!(
        broker.exec.as_deref(),
        Some("unavailable: user namespaces are disabled")
    );
}

#[test]
fn status_of_an_older_brokerd_has_no_exec_and_an_unreadable_health_is_not_ok() {
    let brokerd = StandIn::start();
    // A brokerd from before issue 15.
    brokerd.answer(r#"{"status":"ok"}"#);
    let daemon = loopd_on(&brokerd.socket);
    let broker = broker_status(&daemon);
    assert!(broker.ok, "{broker:?}");
    assert_eq!(broker.exec, None);

    brokerd.answer(r#"{"status":"ok","exec":7}"#);
    let broker = broker_status(&daemon);
    assert!(!broker.ok, "{broker:?}");
    assert!(
        broker.note.contains("not a health answer"),
        "{}",
        broker.note
    );
    assert_eq!(broker.exec, None);
}
