//! The client's kept connections to a model server: a turn's calls and the
//! start's probes share one connection, and a request that a kept connection's close lost
//! before any answer is sent again on a new connection, at once, instead of failing or
//! waiting out a retry's backoff. The same over TCP (where reads acknowledge at once).
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::llama::tests::support::{Fake, chat_retry, client_for, user};
use crate::llama::{ChatEvent, Health};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

/// fakellama on a Unix socket in `dir`.
fn on_socket(dir: &Path) -> Fake {
    Fake::start(fakellama::Options {
        listen: fakellama::Listen::Unix(dir.join("llama.sock")),
        ..Default::default()
    })
}

#[test]
fn probes_and_calls_share_one_connection() {
    let dir = tempfile::tempdir().unwrap();
    let fake = on_socket(dir.path());
    let client = fake.client();
    let blocking = fake.blocking();
    assert_eq!(fake.rt.block_on(client.health()).unwrap(), Health::Ok);
    fake.rt.block_on(client.props()).unwrap();
    for n in 0..3 {
        let (events, done) = chat_retry(&blocking, &client, &user(&format!("call {n}")));
        done.unwrap();
        assert!(
            !events
                .iter()
                .any(|e| matches!(e, ChatEvent::Attempt { .. }))
        );
    }
    // A clone bounded apart (a compaction's) shares them too.
    let (_, done) = chat_retry(&blocking, &client.with_max_tokens(16), &user("short"));
    done.unwrap();
    assert_eq!(fake.server.connections(), 1);
}

#[test]
fn over_tcp_probes_and_calls_share_one_connection_too() {
    let fake = Fake::start(fakellama::Options::default());
    let client = fake.client();
    assert_eq!(fake.rt.block_on(client.health()).unwrap(), Health::Ok);
    for n in 0..3 {
        let (_, done) = chat_retry(&fake.blocking(), &client, &user(&format!("call {n}")));
        done.unwrap();
    }
    assert_eq!(fake.server.connections(), 1);
}

/// A stand-in model server on a Unix socket: `/health` answers `ok`, except the requests `cut`
/// names (by connection and request on it, both from 0), which it reads and then closes the
/// connection without answering, as a server's idle close can meet a request just sent.
struct StandIn {
    _dir: tempfile::TempDir,
    url: String,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

impl StandIn {
    fn start(cut: fn(usize, usize) -> bool) -> StandIn {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("llama.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        let url = format!("unix:{}", socket.display());
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let (counted, asked) = (Arc::clone(&connections), Arc::clone(&requests));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let index = counted.fetch_add(1, Ordering::SeqCst);
                let asked = Arc::clone(&asked);
                std::thread::spawn(move || serve(stream.unwrap(), index, cut, &asked));
            }
        });
        StandIn {
            _dir: dir,
            url,
            connections,
            requests,
        }
    }
}

fn serve(stream: UnixStream, index: usize, cut: fn(usize, usize) -> bool, asked: &AtomicUsize) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    for nth in 0.. {
        // A GET's head, to its empty line.
        let mut line = String::new();
        loop {
            line.clear();
            if reader.read_line(&mut line).unwrap_or(0) == 0 {
                return;
            }
            if line == "\r\n" {
                break;
            }
        }
        asked.fetch_add(1, Ordering::SeqCst);
        if cut(index, nth) {
            return;
        }
        let body = r#"{"status":"ok"}"#;
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
            body.len()
        );
        writer.write_all(answer.as_bytes()).unwrap();
    }
}

#[test]
fn a_request_a_kept_connections_close_lost_goes_out_again_on_a_new_one() {
    let stand_in = StandIn::start(|connection, nth| connection == 0 && nth == 1);
    let client = client_for(&stand_in.url, |o| o.retry_max_attempts = 1);
    let rt = crate::llama::tests::support::runtime();
    assert_eq!(rt.block_on(client.health()).unwrap(), Health::Ok);
    // Sent on the kept connection, which closes under it: sent again on a new one.
    assert_eq!(rt.block_on(client.health()).unwrap(), Health::Ok);
    assert_eq!(stand_in.requests.load(Ordering::SeqCst), 3);
    assert_eq!(stand_in.connections.load(Ordering::SeqCst), 2);
    // And kept from then on.
    assert_eq!(rt.block_on(client.health()).unwrap(), Health::Ok);
    assert_eq!(stand_in.connections.load(Ordering::SeqCst), 2);
}

#[test]
fn a_request_a_new_connection_lost_is_not_sent_again() {
    let stand_in = StandIn::start(|connection, _| connection == 0);
    let client = client_for(&stand_in.url, |o| o.retry_max_attempts = 1);
    let rt = crate::llama::tests::support::runtime();
    let failed = rt.block_on(client.health()).unwrap_err().to_string();
    assert!(failed.contains("closed before an answer"), "{failed}");
    assert_eq!(stand_in.requests.load(Ordering::SeqCst), 1);
}
