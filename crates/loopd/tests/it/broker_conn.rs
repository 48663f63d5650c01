#![allow(clippy::unwrap_used, clippy::expect_used)]
//! loopd's connections to brokerd, against a stand-in brokerd that counts what reaches it:
//! calls reuse one kept-open connection, a connection the server closed between calls is
//! replaced without failing the call, and a request that reached the server is never sent
//! again (the call fails once with "tool broker unavailable"), unless it is a `GET` (the
//! catalogue, health), which asks for nothing to be done and is sent once more on a new
//! connection.

use bxcore::{CallId, DataClass, Labels, SessionId};
use loopd::blocking::Blocking;
use loopd::broker::{Broker, MAX_IDLE_CONNECTIONS, STOPPED_DURING_CALL, UNAVAILABLE};
use loopd::tools::ToolPort;
use proto::{ToolRequest, ToolResponse};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};

/// The version the stand-in gives its catalogue (its `ETag`).
const CATALOGUE_VERSION: &str = "\"v1\"";

/// The longest a test waits for the stand-in to see something, in milliseconds.
const WAIT_MS: u64 = 10_000;

/// What the stand-in does with one request it has read.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Action {
    /// Answers and keeps the connection open.
    Answer,
    /// Answers, then closes the connection (as brokerd's idle timeout or a restart would).
    AnswerThenClose,
    /// Closes the connection without answering (brokerd killed mid-call).
    Swallow,
    /// Waits until `hold` requests are in flight, then answers.
    AnswerWhenAllHeld,
    /// Never answers, and keeps the connection open (a tool that runs for long).
    Never,
}

/// What the stand-in saw.
#[derive(Default)]
struct Counts {
    connections: AtomicUsize,
    requests: AtomicUsize,
    /// Connections whose client closed them (EOF between requests).
    closed_by_client: AtomicUsize,
    /// Connections the stand-in closed after an answer.
    closed_by_server: AtomicUsize,
    /// Catalogue requests answered `304 Not Modified`.
    unmodified: AtomicUsize,
    /// Told of every close, so a test can wait for one.
    closed: tokio::sync::Notify,
}

/// `plan(connection, request on it)`: what to do with each request, both counted from 0.
type Plan = dyn Fn(usize, usize) -> Action + Send + Sync;

/// A stand-in brokerd on a temporary socket; runs until the test ends.
struct StandIn {
    _dir: tempfile::TempDir,
    rt: tokio::runtime::Runtime,
    counts: Arc<Counts>,
    broker: Broker,
}

fn request(n: u64) -> ToolRequest {
    ToolRequest {
        session: SessionId::new("s").unwrap(),
        turn: 1,
        call: CallId(n),
        tool: "write_file".into(),
        arguments: format!("{{\"n\":{n}}}"),
        context: Labels::PUBLIC,
        counts_for: None,
        approval: None,
    }
}

fn answer_body() -> Vec<u8> {
    serde_json::to_vec(&ToolResponse::Result {
        content: "written".into(),
        class: DataClass::Public,
        untrusted: false,
        truncated: false,
    })
    .unwrap()
}

/// Reads one request (head and `content-length` body); its head, lowercased, `None` at a
/// clean EOF before a head.
async fn read_request(stream: &mut UnixStream, buffer: &mut Vec<u8>) -> Option<String> {
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.ok()?;
        if n == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..n]);
    }
    buffer.drain(..head_end + length);
    Some(head)
}

async fn serve(
    mut stream: UnixStream,
    index: usize,
    plan: Arc<Plan>,
    counts: Arc<Counts>,
    held: Arc<tokio::sync::Barrier>,
) {
    let mut buffer = Vec::new();
    for nth in 0.. {
        let Some(head) = read_request(&mut stream, &mut buffer).await else {
            counts.closed_by_client.fetch_add(1, Ordering::SeqCst);
            counts.closed.notify_waiters();
            return;
        };
        counts.requests.fetch_add(1, Ordering::SeqCst);
        let action = plan(index, nth);
        if action == Action::Swallow {
            return;
        }
        if action == Action::Never {
            std::future::pending::<()>().await;
        }
        if action == Action::AnswerWhenAllHeld {
            let all = tokio::time::timeout(Duration::from_millis(WAIT_MS), held.wait()).await;
            assert!(all.is_ok(), "the calls did not all arrive at once");
        }
        let mut status = "200 OK";
        let mut fields = String::new();
        let body = if head.starts_with("get /v1/health ") {
            br#"{"status":"ok"}"#.to_vec()
        } else if head.starts_with("get /v1/catalogue") {
            // Version "v1" of the catalogue, current throughout.
            fields.push_str(&format!("etag: {CATALOGUE_VERSION}\r\n"));
            if head.contains(&format!("\r\nif-none-match: {CATALOGUE_VERSION}\r\n")) {
                counts.unmodified.fetch_add(1, Ordering::SeqCst);
                status = "304 Not Modified";
                Vec::new()
            } else {
                br#"{"session":"s","tools":[]}"#.to_vec()
            }
        } else {
            answer_body()
        };
        let answer_head = format!(
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{fields}content-length: {}\r\n\r\n",
            body.len()
        );
        stream.write_all(answer_head.as_bytes()).await.unwrap();
        stream.write_all(&body).await.unwrap();
        if action == Action::AnswerThenClose {
            drop(stream);
            counts.closed_by_server.fetch_add(1, Ordering::SeqCst);
            counts.closed.notify_waiters();
            return;
        }
    }
}

impl StandIn {
    /// Starts the stand-in; `hold` is how many requests `AnswerWhenAllHeld` waits for.
    fn start(
        hold: usize,
        plan: impl Fn(usize, usize) -> Action + Send + Sync + 'static,
    ) -> StandIn {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("brokerd.sock");
        let counts = Arc::new(Counts::default());
        let plan: Arc<Plan> = Arc::new(plan);
        let held = Arc::new(tokio::sync::Barrier::new(hold.max(1)));
        let listener = rt.block_on(async { UnixListener::bind(&socket) }).unwrap();
        let serving = Arc::clone(&counts);
        rt.spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let index = serving.connections.fetch_add(1, Ordering::SeqCst);
                let (plan, counts, held) =
                    (Arc::clone(&plan), Arc::clone(&serving), Arc::clone(&held));
                tokio::spawn(serve(stream, index, plan, counts, held));
            }
        });
        let broker = Broker::new(socket, 5_000, Blocking::new(rt.handle().clone()));
        StandIn {
            _dir: dir,
            rt,
            counts,
            broker,
        }
    }

    fn connections(&self) -> usize {
        self.counts.connections.load(Ordering::SeqCst)
    }

    fn requests(&self) -> usize {
        self.counts.requests.load(Ordering::SeqCst)
    }

    fn socket(&self) -> &Path {
        self.broker.socket()
    }

    /// Waits (at most [`WAIT_MS`]) until `count` (one of `counts`' close counters) is `n`.
    fn wait_closed(&self, count: fn(&Counts) -> &AtomicUsize, n: usize) {
        let counts = &self.counts;
        let all_closed = async {
            loop {
                let closed = counts.closed.notified();
                if count(counts).load(Ordering::SeqCst) >= n {
                    return;
                }
                closed.await;
            }
        };
        let waited = self.rt.block_on(async {
            tokio::time::timeout(Duration::from_millis(WAIT_MS), all_closed).await
        });
        assert!(waited.is_ok(), "{n} connections were not closed");
    }
}

fn assert_answered(response: ToolResponse) {
    assert!(
        matches!(&response, ToolResponse::Result { content, .. } if content == "written"),
        "{response:?}"
    );
}

fn assert_unavailable(response: ToolResponse) {
    match response {
        ToolResponse::Failed { message, labels } => {
            assert!(message.starts_with(UNAVAILABLE), "{message}");
            assert_eq!(labels, None);
        }
        other => panic!("expected Failed, got {other:?}"),
    }
}

#[test]
fn calls_reuse_one_connection() {
    let stand_in = StandIn::start(0, |_, _| Action::Answer);
    for n in 0..5 {
        assert_answered(ToolPort::call(&stand_in.broker, &request(n)));
    }
    stand_in.rt.block_on(stand_in.broker.health()).unwrap();
    assert_eq!(stand_in.requests(), 6);
    assert_eq!(stand_in.connections(), 1, "{}", stand_in.socket().display());
}

#[test]
fn a_connection_the_server_closed_between_calls_does_not_fail_the_next_call() {
    // Every connection answers one request and closes (as brokerd's idle timeout or a
    // restart would); the next call starts as soon as the close is made, so loopd may pick the
    // connection before it has seen the EOF.
    let stand_in = StandIn::start(0, |_, _| Action::AnswerThenClose);
    for n in 0..20 {
        assert_answered(ToolPort::call(&stand_in.broker, &request(n)));
        stand_in.wait_closed(|c| &c.closed_by_server, n as usize + 1);
    }
    assert_eq!(stand_in.requests(), 20);
    assert_eq!(stand_in.connections(), 20);
}

#[test]
fn a_call_cut_on_a_reused_connection_fails_once_and_is_never_sent_again() {
    // The first connection answers its first request, then reads the second and closes
    // without answering; any later connection answers.
    let stand_in = StandIn::start(0, |connection, nth| {
        if connection == 0 && nth == 1 {
            Action::Swallow
        } else {
            Action::Answer
        }
    });
    assert_answered(ToolPort::call(&stand_in.broker, &request(1)));
    assert_unavailable(ToolPort::call(&stand_in.broker, &request(2)));
    assert_eq!(stand_in.requests(), 2, "the cut request was sent again");
    assert_eq!(stand_in.connections(), 1);
    // The port recovers: the next call goes out on a new connection.
    assert_answered(ToolPort::call(&stand_in.broker, &request(3)));
    assert_eq!(stand_in.connections(), 2);
}

#[test]
fn a_call_cut_on_a_new_connection_fails_once_and_is_never_sent_again() {
    let stand_in = StandIn::start(0, |connection, _| {
        if connection == 0 {
            Action::Swallow
        } else {
            Action::Answer
        }
    });
    assert_unavailable(ToolPort::call(&stand_in.broker, &request(1)));
    assert_eq!(stand_in.requests(), 1, "the cut request was sent again");
    assert_eq!(stand_in.connections(), 1);
}

#[test]
fn concurrent_calls_use_their_own_connections_and_at_most_the_limit_stay_open() {
    let concurrent = MAX_IDLE_CONNECTIONS + 2;
    let stand_in = StandIn::start(concurrent, |_, nth| {
        if nth == 0 {
            Action::AnswerWhenAllHeld
        } else {
            Action::Answer
        }
    });
    let broker = &stand_in.broker;
    std::thread::scope(|scope| {
        let calls: Vec<_> = (0..concurrent)
            .map(|n| scope.spawn(move || ToolPort::call(broker, &request(n as u64))))
            .collect();
        for call in calls {
            assert_answered(call.join().unwrap());
        }
    });
    assert_eq!(stand_in.connections(), concurrent);
    // The connections beyond the limit are closed, not kept idle.
    stand_in.wait_closed(|c| &c.closed_by_client, concurrent - MAX_IDLE_CONNECTIONS);
    for n in 0..concurrent {
        assert_answered(ToolPort::call(&stand_in.broker, &request(n as u64)));
    }
    assert_eq!(
        stand_in.connections(),
        concurrent,
        "a kept connection was not reused"
    );
    assert_eq!(
        stand_in.counts.closed_by_client.load(Ordering::SeqCst),
        concurrent - MAX_IDLE_CONNECTIONS
    );
}

#[test]
fn a_call_brokerd_has_not_answered_is_given_up_when_its_turn_stops_and_never_resent() {
    // The stop comes while brokerd holds the call (a budget's max_turn_ms, a cancel).
    let stop = tokio_util::sync::CancellationToken::new();
    let stopping = stop.clone();
    let stand_in = StandIn::start(0, move |connection, _| {
        if connection == 0 {
            stopping.cancel();
            Action::Never
        } else {
            Action::Answer
        }
    });
    let started = std::time::Instant::now();
    match stand_in.broker.call_until(&request(1), &stop) {
        ToolResponse::Failed { message, labels } => {
            assert!(message.starts_with(STOPPED_DURING_CALL), "{message}");
            assert!(message.contains("write_file"), "{message}");
            assert_eq!(labels, None);
        }
        other => panic!("expected Failed, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_millis(WAIT_MS));
    assert_eq!(stand_in.requests(), 1);
    // The next call goes out on a new connection; the given-up one is not sent again.
    assert_answered(ToolPort::call(&stand_in.broker, &request(2)));
    assert_eq!(stand_in.requests(), 2);
    assert_eq!(stand_in.connections(), 2);
}

#[test]
fn a_catalogue_request_cut_on_a_reused_connection_is_sent_again_on_a_new_one() {
    // brokerd closed the kept connection to make room at its cap just as loopd sent the
    // catalogue request on it (a flood of slow clients): the GET asks for nothing to be done,
    // so it goes out once more instead of leaving the turn with loopd's own tools only.
    let stand_in = StandIn::start(0, |connection, nth| {
        if connection == 0 && nth == 1 {
            Action::Swallow
        } else {
            Action::Answer
        }
    });
    let session = SessionId::new("s").unwrap();
    stand_in.rt.block_on(stand_in.broker.health()).unwrap();
    let catalogue = ToolPort::catalogue(&stand_in.broker, &session);
    assert_eq!(catalogue.map(|c| c.session), Some(session));
    assert_eq!(
        stand_in.requests(),
        3,
        "the catalogue request was not sent again"
    );
    assert_eq!(stand_in.connections(), 2);
}

#[test]
fn a_catalogue_request_cut_on_a_new_connection_is_not_sent_again() {
    // A new connection that reads the request and closes: that is the server's answer to
    // this request, not a race with a kept connection's close, so it fails once.
    let stand_in = StandIn::start(0, |connection, _| {
        if connection == 0 {
            Action::Swallow
        } else {
            Action::Answer
        }
    });
    let session = SessionId::new("s").unwrap();
    assert_eq!(ToolPort::catalogue(&stand_in.broker, &session), None);
    assert_eq!(stand_in.requests(), 1);
}

#[test]
fn a_catalogue_brokerd_says_is_unchanged_is_not_sent_again() {
    let stand_in = StandIn::start(0, |_, _| Action::Answer);
    let session = SessionId::new("s").unwrap();
    let first = ToolPort::catalogue(&stand_in.broker, &session).unwrap();
    assert_eq!(stand_in.broker.catalogues().len(), 1);
    for _ in 0..3 {
        let again = ToolPort::catalogue(&stand_in.broker, &session);
        assert_eq!(again.as_ref(), Some(&first));
    }
    // Every fetch asked brokerd; the last three were answered 304, with no body.
    assert_eq!(stand_in.requests(), 4);
    assert_eq!(stand_in.counts.unmodified.load(Ordering::SeqCst), 3);
}

#[test]
fn at_its_start_loopd_asks_again_until_brokerd_answers() {
    // brokerd started beside loopd (boxd's `with_previous`): its first connections close
    // unanswered, and one health request alone fails.
    let stand_in = StandIn::start(0, |connection, _| {
        if connection < 3 {
            Action::Swallow
        } else {
            Action::Answer
        }
    });
    assert!(stand_in.rt.block_on(stand_in.broker.health()).is_err());
    stand_in
        .rt
        .block_on(stand_in.broker.wait_up(WAIT_MS))
        .unwrap();
    assert_eq!(stand_in.connections(), 4);
}

#[test]
fn a_brokerd_that_never_comes_up_is_given_up_after_the_wait() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let broker = Broker::new(
        dir.path().join("absent.sock"),
        5_000,
        Blocking::new(rt.handle().clone()),
    );
    let error = rt.block_on(broker.wait_up(20)).unwrap_err();
    assert!(error.to_string().starts_with(UNAVAILABLE), "{error}");
}
