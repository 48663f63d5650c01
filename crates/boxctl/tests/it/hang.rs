//! A loopd that hangs (issue 33.6): boxctl gives up within its limits, says so in one line and
//! exits 8, never waiting forever; a stream kept alive by pings, and a task whose turn waits
//! while loopd answers a status request, are not cut off. The servers are raw sockets that
//! answer exactly as each test needs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use boxctl::cli::EXIT_TIMEOUT;
use bxcore::{SessionId, TurnEnd, TurnEvent};
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The longest any of these runs may take, in milliseconds: far above the limits set, far
/// below the "forever" of the bug.
const BOUND_MS: u64 = 20_000;
/// The small limit the tests set, in milliseconds.
const LIMIT_MS: &str = "300";
/// The largest request head a test server reads, in bytes.
const MAX_HEAD_BYTES: usize = 64 * 1024;

/// Runs boxctl on `socket` with `args` and only `env`; its output and how long it ran.
fn boxctl(socket: &Path, args: &[&str], env: &[(&str, &str)]) -> (Output, Duration) {
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_boxctl"));
    cmd.env_clear().arg("--socket").arg(socket).args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = started + Duration::from_millis(BOUND_MS);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("boxctl {args:?} ran past {BOUND_MS} ms: it hangs");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().unwrap();
    (out, started.elapsed())
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A socket in a temp dir, and its listener.
fn listen() -> (tempfile::TempDir, PathBuf, UnixListener) {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("loopd.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    (dir, socket, listener)
}

/// Serves `listener` on a thread: each connection's request head goes to `answer`, which
/// writes what it likes; the connections are kept open until the test ends.
fn serve(listener: UnixListener, answer: impl Fn(&str, &mut UnixStream) + Send + Sync + 'static) {
    std::thread::spawn(move || {
        let answer = std::sync::Arc::new(answer);
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let answer = answer.clone();
            std::thread::spawn(move || {
                let head = read_head(&mut conn);
                answer(&head, &mut conn);
                // Held open: the client must be the one to give up.
                let mut rest = Vec::new();
                let _ = conn.read_to_end(&mut rest);
            });
        }
    });
}

/// The request's head (its body, small JSON, is left unread).
fn read_head(conn: &mut UnixStream) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < MAX_HEAD_BYTES {
        match conn.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => break,
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

const SSE_HEAD: &str = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                        transfer-encoding: chunked\r\n\r\n";

/// One chunk of a chunked body.
fn chunk(conn: &mut UnixStream, data: &str) {
    let _ = write!(conn, "{:x}\r\n{data}\r\n", data.len());
    let _ = conn.flush();
}

fn turn_frame(event: &TurnEvent) -> String {
    format!(
        "event: turn\ndata: {}\n\n",
        serde_json::to_string(event).unwrap()
    )
}

fn started() -> TurnEvent {
    TurnEvent::Started {
        session: SessionId::new("s1").unwrap(),
        turn: 1,
    }
}

fn ended() -> TurnEvent {
    TurnEvent::Ended {
        turn: 1,
        end: TurnEnd::Done,
        context: Default::default(),
    }
}

#[test]
fn a_socket_that_accepts_and_never_answers_ends_task_and_status_with_exit_8() {
    let (_dir, socket, listener) = listen();
    serve(listener, |_, _| {});
    for args in [
        vec!["--response-timeout-ms", LIMIT_MS, "task", "hello"],
        vec!["--response-timeout-ms", LIMIT_MS, "status"],
        vec!["--response-timeout-ms", LIMIT_MS, "show", "s1", "--follow"],
    ] {
        let (out, took) = boxctl(&socket, &args, &[]);
        let err = text(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(i32::from(EXIT_TIMEOUT)),
            "{args:?}: {err}"
        );
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!("boxctl: loopd at {} ", socket.display())),
            "{err}"
        );
        assert!(err.contains("no answer within 300 ms"), "{err}");
        assert!(err.contains("--response-timeout-ms"), "{err}");
        assert!(took < Duration::from_millis(BOUND_MS), "{took:?}");
    }
}

#[test]
fn the_response_timeout_comes_from_the_environment_too() {
    let (_dir, socket, listener) = listen();
    serve(listener, |_, _| {});
    let env = [("BOXCTL_RESPONSE_TIMEOUT_MS", LIMIT_MS)];
    let (out, _) = boxctl(&socket, &["task", "hello"], &env);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(i32::from(EXIT_TIMEOUT)), "{err}");
    assert!(err.contains("no answer within 300 ms"), "{err}");
}

#[test]
fn a_stream_silent_after_started_ends_with_a_clear_error_and_exit_8() {
    let (_dir, socket, listener) = listen();
    serve(listener, |_, conn| {
        let _ = conn.write_all(SSE_HEAD.as_bytes());
        chunk(conn, &turn_frame(&started()));
    });
    let args = ["--stream-idle-timeout-ms", LIMIT_MS, "task", "hello"];
    let (out, _) = boxctl(&socket, &args, &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(i32::from(EXIT_TIMEOUT)), "{err}");
    assert_eq!(
        err.lines().last().unwrap(),
        format!(
            "boxctl: loopd at {} went silent: nothing on the event stream for 300 ms, not even \
             its pings (--stream-idle-timeout-ms); the turn may go on in loopd",
            socket.display()
        ),
        "{err}"
    );
    let env = [("BOXCTL_STREAM_IDLE_TIMEOUT_MS", LIMIT_MS)];
    let (out, _) = boxctl(&socket, &["task", "hello"], &env);
    assert_eq!(out.status.code(), Some(i32::from(EXIT_TIMEOUT)));
}

#[test]
fn pings_keep_a_quiet_stream_alive() {
    let (_dir, socket, listener) = listen();
    serve(listener, |_, conn| {
        let _ = conn.write_all(SSE_HEAD.as_bytes());
        chunk(conn, &turn_frame(&started()));
        // Quiet for four times the limit, but for pings every fifth of it.
        for _ in 0..20 {
            std::thread::sleep(Duration::from_millis(100));
            chunk(conn, ": ping\n\n");
        }
        chunk(conn, &turn_frame(&ended()));
        chunk(conn, "");
    });
    let args = ["--stream-idle-timeout-ms", "500", "task", "hello"];
    let (out, took) = boxctl(&socket, &args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(took >= Duration::from_millis(2_000), "{took:?}");
}

#[test]
fn a_task_that_waits_for_its_turn_is_not_cut_off_while_loopd_answers_status() {
    let (_dir, socket, listener) = listen();
    let (probed, was_probed) = mpsc::channel::<()>();
    let was_probed = std::sync::Mutex::new(was_probed);
    serve(listener, move |head, conn| {
        if head.starts_with("GET ") && head.contains("/v1/status HTTP/1.1") {
            let _ = probed.send(());
            let body = "{}";
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                body.len()
            );
            return;
        }
        // A busy session: the answer's head comes once the turn starts, here once boxctl has
        // waited past its response timeout and asked whether loopd is alive.
        let waited = was_probed
            .lock()
            .unwrap()
            .recv_timeout(Duration::from_millis(BOUND_MS));
        assert!(waited.is_ok(), "boxctl never asked for the status");
        let _ = conn.write_all(SSE_HEAD.as_bytes());
        chunk(conn, &turn_frame(&started()));
        chunk(conn, &turn_frame(&ended()));
        chunk(conn, "");
    });
    let args = ["--response-timeout-ms", LIMIT_MS, "task", "hello"];
    let (out, took) = boxctl(&socket, &args, &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(took >= Duration::from_millis(300), "{took:?}");
}

#[test]
fn a_zero_limit_is_refused_as_a_usage_error() {
    let (out, _) = boxctl(
        Path::new("/nonexistent.sock"),
        &["--stream-idle-timeout-ms", "0", "status"],
        &[],
    );
    assert_eq!(out.status.code(), Some(64));
}
