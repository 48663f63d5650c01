//! Who may answer approvals and ask for a web console link: never a descendant of brokerd (an
//! MCP server, or something one started), whatever happens to brokerd's socket file (issue 32).
//!
//! brokerd is played by this test process, which answers on a socket as brokerd does; its
//! children (this test binary run again, `child_answers`) play MCP servers. The owner is this
//! test process itself: brokerd is not its own descendant.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_common;

use api_common::{Served, bounded, request, send, start, test_options, text};
use bxhttp::pool::Pool;
use http::Method;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Where a child finds loopd's socket (`child_answers`) or the path to serve on
/// (`child_serves`).
const SOCKET_ENV: &str = "LOOPD_API_OWNER_SOCKET";
/// What `child_answers` asks for: an approval's path, or the web console link's.
const PATH_ENV: &str = "LOOPD_API_OWNER_PATH";
/// The approval the stand-in backend waits on.
const APPROVAL: &str = "/v1/approvals/ap-1";
/// The web console's sign-in link (the stand-in has the console off: 400 once let through).
const LINK: &str = "/v1/web/link";
/// The prefix of the line a child prints with what loopd answered it.
const ANSWER: &str = "owner-answer:";
/// The line `child_serves` prints once it listens.
const LISTENING: &str = "owner-listening";

/// Answers every connection on `listener` as brokerd's health does, until the listener goes.
fn answer_as_brokerd(listener: UnixListener) {
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                line.clear();
            }
            let body = r#"{"status":"ok"}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
}

/// A stand-in brokerd in this process, at `dir/brokerd.sock`.
fn brokerd_here(dir: &Path) -> PathBuf {
    let path = dir.join("brokerd.sock");
    answer_as_brokerd(UnixListener::bind(&path).unwrap());
    path
}

/// loopd's API with its connections to brokerd at `broker` (as the daemon gives it those its
/// tool calls go out on); the pool too.
fn serve_with_broker(broker: &Path) -> (Served, Pool) {
    let pool = Pool::new(broker.to_path_buf(), "brokerd");
    let served = start(loopd::api::ApiOptions {
        broker: Some(pool.clone()),
        ..test_options()
    });
    (served, pool)
}

/// This process (brokerd itself, no descendant of its own) answers approval `id`: the status
/// and body.
async fn answer_here(served: &Served, id: &str) -> (u16, String) {
    let path = format!("/v1/approvals/{id}");
    let answer = request(Method::POST, &path, &[], r#"{"answer":"approve"}"#);
    let (status, _, body) = send(&served.socket, answer).await;
    (status.as_u16(), text(body).await)
}

/// A child of this process (an MCP server of this "brokerd") posts to `path` on `served`
/// (an approval's answer, a link): the status and body loopd gave it.
async fn post_from_a_child(served: &Served, path: &str) -> (u16, String) {
    let mut child = Command::new(std::env::current_exe().unwrap());
    child
        .args([
            "--exact",
            "api_owner::child_answers",
            "--ignored",
            "--nocapture",
        ])
        .env(SOCKET_ENV, &served.socket)
        .env(PATH_ENV, path);
    let output = bounded(tokio::task::spawn_blocking(move || child.output()))
        .await
        .unwrap()
        .unwrap();
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
    let (code, body) = line.split_once(' ').unwrap();
    (code.parse().unwrap(), body.to_string())
}

/// Asserts that `answer` is loopd's refusal of a descendant of brokerd, and that the stand-in
/// backend never got an answer.
fn assert_refused_as_descendant(served: &Served, (code, body): &(u16, String)) {
    assert_eq!(*code, 403, "{body}");
    assert!(body.contains("descends from brokerd"), "{body}");
    assert!(served.stub.answered.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_descendant_of_brokerd_is_refused_when_brokerds_socket_was_moved_aside() {
    let dir = tempfile::tempdir().unwrap();
    let broker = brokerd_here(dir.path());
    let (served, _pool) = serve_with_broker(&broker);
    // The owner's answer goes through while brokerd answers (404: nothing waits under ap-2).
    let (code, body) = answer_here(&served, "ap-2").await;
    assert_eq!(code, 404, "{body}");
    // The MCP server moves brokerd's socket out of loopd's way, then approves its own call,
    // and asks for a link to sign a browser in (which answers approvals too).
    std::fs::rename(&broker, dir.path().join("moved-aside.sock")).unwrap();
    let answer = post_from_a_child(&served, APPROVAL).await;
    assert_refused_as_descendant(&served, &answer);
    let (code, body) = post_from_a_child(&served, LINK).await;
    assert_eq!(code, 403, "{body}");
    assert!(body.contains("may not get a web console link"), "{body}");
    served.stop().await;
}

#[tokio::test]
async fn while_brokerd_was_never_reached_no_answer_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let broker = brokerd_here(dir.path());
    std::fs::rename(&broker, dir.path().join("moved-aside.sock")).unwrap();
    let (served, _pool) = serve_with_broker(&broker);
    let (code, body) = post_from_a_child(&served, APPROVAL).await;
    assert_eq!(code, 503, "{body}");
    assert!(
        body.contains("cannot tell whether the caller descends from brokerd"),
        "{body}"
    );
    assert!(body.contains("brokerd is not reachable"), "{body}");
    assert!(body.contains("again when it is"), "{body}");
    let (code, body) = post_from_a_child(&served, LINK).await;
    assert_eq!(code, 503, "{body}");
    // The owner too: loopd cannot tell the owner from an MCP server without brokerd.
    let (code, body) = answer_here(&served, "ap-1").await;
    assert_eq!(code, 503, "{body}");
    assert!(served.stub.answered.lock().unwrap().is_empty());
    // brokerd back: the owner's answer goes through.
    std::fs::rename(dir.path().join("moved-aside.sock"), &broker).unwrap();
    let (code, body) = answer_here(&served, "ap-1").await;
    assert_eq!(code, 200, "{body}");
    served.stop().await;
}

#[tokio::test]
async fn a_socket_path_that_leads_to_another_process_does_not_change_whose_descendants_are_refused()
{
    let dir = tempfile::tempdir().unwrap();
    let broker = brokerd_here(dir.path());
    let (served, pool) = serve_with_broker(&broker);
    let (code, body) = answer_here(&served, "ap-2").await;
    assert_eq!(code, 404, "{body}");
    // The MCP server puts a socket of its own (another process's) where brokerd's was, and
    // loopd's next connection (a tool call's) reaches it.
    std::fs::rename(&broker, dir.path().join("moved-aside.sock")).unwrap();
    let impostor = Impostor::serve(&broker);
    health(&pool).await; // on the connection kept from before, which brokerd then closes
    health(&pool).await; // on a new one, to the impostor
    let pids: Vec<u32> = pool.servers().unwrap().iter().map(|p| p.pid()).collect();
    assert_eq!(pids, [std::process::id(), impostor.0.id()]);
    let answer = post_from_a_child(&served, APPROVAL).await;
    assert_refused_as_descendant(&served, &answer);
    served.stop().await;
}

/// Asks for brokerd's health on `pool`, as loopd does, and expects 200.
async fn health(pool: &Pool) {
    let request = http::Request::builder()
        .uri("/v1/health")
        .header("host", "brokerd")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let answer = bounded(pool.send(request, 1 << 16)).await.unwrap();
    assert_eq!(answer.status, 200, "{:?}", answer.body);
}

/// Another process answering as brokerd at a path (`child_serves`), killed on drop.
struct Impostor(std::process::Child);

impl Impostor {
    /// Starts it at `path` and waits (bounded by the child's own timeout) until it listens.
    fn serve(path: &Path) -> Impostor {
        let child = Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "api_owner::child_serves",
                "--ignored",
                "--nocapture",
            ])
            .env(SOCKET_ENV, path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut impostor = Impostor(child);
        let stdout = impostor.0.stdout.take().unwrap();
        let listening = BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .any(|line| line.contains(LISTENING));
        assert!(listening, "the impostor never listened");
        impostor
    }
}

impl Drop for Impostor {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Run by the tests above as a child: posts an approval's answer (or asks for a link) and
/// prints what came back.
#[tokio::test]
#[ignore = "run as a child by the tests above"]
async fn child_answers() {
    let socket = PathBuf::from(std::env::var(SOCKET_ENV).unwrap());
    let path = std::env::var(PATH_ENV).unwrap();
    let answer = request(Method::POST, &path, &[], r#"{"answer":"approve"}"#);
    let (status, _, body) = send(&socket, answer).await;
    let body = text(body).await.replace('\n', " ");
    println!("{ANSWER}{} {body}", status.as_u16());
}

/// Run by the tests above as a child: answers as brokerd on the path it is given until its
/// stdin closes (the test kills it first).
#[test]
#[ignore = "run as a child by the tests above"]
fn child_serves() {
    let path = PathBuf::from(std::env::var(SOCKET_ENV).unwrap());
    answer_as_brokerd(UnixListener::bind(path).unwrap());
    println!("{LISTENING}");
    let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut Vec::new());
}
