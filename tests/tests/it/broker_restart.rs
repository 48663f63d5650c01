#![allow(clippy::unwrap_used, clippy::expect_used)]
//! loopd's broker port against the real brokerd killed with SIGKILL: between calls, the next
//! call finds the restarted brokerd although loopd kept a connection to the old one; mid-call,
//! the call fails once with "tool broker unavailable" and is never sent again, to either
//! brokerd.

use bxcore::{CallId, Labels, SessionId};
use e2e::{Running, start_brokerd};
use loopd::blocking::Blocking;
use loopd::broker::{Broker, UNAVAILABLE};
use loopd::tools::ToolPort;
use proto::{ToolRequest, ToolResponse};
use std::net::TcpListener;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

/// The longest a test waits for something to happen, in milliseconds.
const WAIT_MS: u64 = 20_000;

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

fn request(call: u64, tool: &str, arguments: String) -> ToolRequest {
    ToolRequest {
        session: SessionId::new("restart").unwrap(),
        turn: 1,
        call: CallId(call),
        tool: tool.into(),
        arguments,
        context: Labels::PUBLIC,
        counts_for: None,
        approval: None,
    }
}

fn write_request(call: u64, path: &Path, content: &str) -> ToolRequest {
    let arguments = serde_json::json!({ "path": path, "content": content }).to_string();
    request(call, "write_file", arguments)
}

fn assert_ran(response: &ToolResponse) {
    assert!(
        matches!(response, ToolResponse::Result { .. }),
        "{response:?}"
    );
}

/// SIGKILLs brokerd and reaps it, so its sockets are closed when this returns.
fn kill(brokerd: Running) {
    drop(brokerd);
}

/// The `decided` lines of the audit log for `tool`: one per request brokerd received.
fn decided(dir: &Path, tool: &str) -> usize {
    let audit = std::fs::read_to_string(dir.join("brokerd-state/audit.jsonl")).unwrap();
    audit
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|record| record["event"] == "decided" && record["tool"] == tool)
        .count()
}

#[test]
fn brokerd_killed_between_calls_is_found_again_on_the_next_call() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let grants = format!(
        "[[grants]]\ntool = \"echo\"\n[[grants]]\ntool = \"write_file\"\npaths = [{out:?}]\n"
    );
    let rt = runtime();
    let broker = Broker::new(
        dir.path().join("brokerd.sock"),
        10_000,
        Blocking::new(rt.handle().clone()),
    );

    let brokerd = start_brokerd(dir.path(), &grants);
    for call in 1..=3 {
        let echo = ToolPort::call(
            &broker,
            &request(call, "echo", "{\"text\":\"ping\"}".into()),
        );
        assert_ran(&echo);
    }
    kill(brokerd);
    let _brokerd = start_brokerd(dir.path(), &grants);

    let target = out.join("note.txt");
    let written = ToolPort::call(&broker, &write_request(4, &target, "once"));
    assert_ran(&written);
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "once");
    assert_eq!(decided(dir.path(), "write_file"), 1);
}

#[test]
fn brokerd_killed_mid_call_fails_the_call_once_and_never_runs_it_again() {
    // A page server that accepts and never answers: brokerd's http_fetch is in flight for as
    // long as the test wants. Every connection it gets is reported.
    let page = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = page.local_addr().unwrap().port();
    let (accepted, fetches) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in page.incoming() {
            // Held open (never answered) until the test ends.
            if accepted.send(stream).is_err() {
                return;
            }
        }
    });

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let grants = format!(
        "[[grants]]\ntool = \"http_fetch\"\nhosts = [\"127.0.0.1:{port}\"]\n\
         networks = [\"127.0.0.0/8\"]\n\
         [[grants]]\ntool = \"write_file\"\npaths = [{out:?}]\n"
    );
    let rt = runtime();
    let broker = Broker::new(
        dir.path().join("brokerd.sock"),
        10_000,
        Blocking::new(rt.handle().clone()),
    );
    let brokerd = start_brokerd(dir.path(), &grants);
    // A call first, so the cut call goes out on a kept connection.
    let target = out.join("note.txt");
    assert_ran(&ToolPort::call(
        &broker,
        &write_request(1, &target, "first"),
    ));

    let fetching = {
        let broker = broker.clone();
        let url = format!("{{\"url\":\"http://127.0.0.1:{port}/slow\"}}");
        std::thread::spawn(move || ToolPort::call(&broker, &request(2, "http_fetch", url)))
    };
    let held = fetches
        .recv_timeout(Duration::from_millis(WAIT_MS))
        .expect("brokerd did not start the fetch");
    kill(brokerd);
    let _brokerd = start_brokerd(dir.path(), &grants);

    match fetching.join().unwrap() {
        ToolResponse::Failed { message, labels } => {
            assert!(message.starts_with(UNAVAILABLE), "{message}");
            assert_eq!(labels, None);
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    // The next call runs on the new brokerd, and brokerd (old or new) got the fetch once.
    let second = out.join("second.txt");
    assert_ran(&ToolPort::call(
        &broker,
        &write_request(3, &second, "second"),
    ));
    assert_eq!(std::fs::read_to_string(&second).unwrap(), "second");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "first");
    assert_eq!(decided(dir.path(), "http_fetch"), 1);
    assert_eq!(decided(dir.path(), "write_file"), 2);
    assert!(fetches.try_recv().is_err(), "the fetch was run again");
    drop(held);
}
