#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A burst of clients at loopd's socket far past its connection cap (issue 33.5): 1 000
//! clients at once, each submitting a task, with loopd's default limits. Every one gets an
//! HTTP answer (202: its turn started; 429: too many tasks wait; 503: no connection free,
//! with `Retry-After`), none a reset; and 429 is reached at the defaults, since waiting tasks
//! hold their connections and `[api] max_waiting_tasks` leaves connections over.

use e2e::real::heavy;
use e2e::{Stack, StackOptions};
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

/// Clients at once: far past loopd's default `[api] max_connections` (256).
const CLIENTS: usize = 1_000;
/// Descriptors the test process needs besides its clients' sockets (its own files, the
/// stack's pipes, the other tests running beside it).
const OTHER_OPEN_FILES: u64 = 512;
/// The longest one client waits for its answer, in milliseconds: a waiting task's answer
/// comes once the turns before it ran (one main slot, so one after the other).
const ANSWER_LIMIT_MS: u64 = 120_000;

/// Raises this process's soft limit on open files to what the clients need (within the hard
/// limit), so the test measures loopd and not this process. loopd, started after, inherits it.
fn raise_open_files() {
    let needed = CLIENTS as u64 + OTHER_OPEN_FILES;
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
    assert!(
        hard >= needed,
        "the hard limit on open files is {hard}; this test needs {needed} (ulimit -Hn)"
    );
    if soft < needed {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    }
}

/// One client: connect, submit a task to its own session, read the whole answer. The status
/// line and headers, or why there was none.
async fn submit(socket: &Path, n: usize) -> Result<String, String> {
    let mut stream = UnixStream::connect(socket)
        .await
        .map_err(|e| format!("connect: {e}"))?;
    let body = format!(r#"{{"session":"burst-{n}","text":"hello"}}"#);
    let request = format!(
        "POST /v1/tasks HTTP/1.1\r\nhost: loopd\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    stream
        .write_all(request.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut answer = Vec::new();
    let limit = Duration::from_millis(ANSWER_LIMIT_MS);
    let read = tokio::time::timeout(limit, stream.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    match read {
        Err(_) => Err(format!("no answer within {ANSWER_LIMIT_MS} ms")),
        Ok(Err(e)) => Err(format!("read: {e} after {answer:?}")),
        Ok(Ok(_)) => match answer.split_once("\r\n\r\n") {
            Some((head, _)) if head.starts_with("HTTP/1.1 ") => Ok(head.to_string()),
            _ => Err(format!("closed without an answer: {answer:?}")),
        },
    }
}

#[test]
fn a_thousand_clients_at_once_each_get_an_answer_and_429_is_reached() {
    let _heavy = heavy();
    raise_open_files();
    let stack = Stack::start(StackOptions {
        script: "default_reply = \"fine\"\n".into(),
        ..StackOptions::default()
    })
    .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let outcomes = runtime.block_on(async {
        let clients: Vec<_> = (0..CLIENTS)
            .map(|n| {
                let socket = stack.socket.clone();
                tokio::spawn(async move { submit(&socket, n).await })
            })
            .collect();
        let mut outcomes = Vec::new();
        for client in clients {
            outcomes.push(client.await.unwrap());
        }
        outcomes
    });

    let mut statuses: BTreeMap<u16, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for outcome in outcomes {
        match outcome {
            Ok(head) => {
                let status: u16 = head[9..12].parse().unwrap();
                assert!(matches!(status, 202 | 429 | 503), "{head}");
                if status == 503 {
                    assert!(head.contains("retry-after: 1\r\n"), "{head}");
                }
                *statuses.entry(status).or_default() += 1;
            }
            Err(why) => failures.push(why),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {CLIENTS} clients got no answer ({statuses:?} answered), e.g. {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    // Tasks ran, and one too many for the waiting cap was told so rather than left without a
    // connection.
    assert!(statuses.get(&202).is_some_and(|n| *n > 0), "{statuses:?}");
    assert!(statuses.get(&429).is_some_and(|n| *n > 0), "{statuses:?}");
    println!("{CLIENTS} clients at once: {statuses:?}");
}
