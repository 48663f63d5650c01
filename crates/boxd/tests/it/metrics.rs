//! boxd's metrics (`docs/metrics.md`) on its socket and its TCP listener, with stand-in
//! children: a child is up once ready, a child killed by SIGKILL is counted as restarted with
//! last exit status 137 (128 + 9) and a later start time, boxd's build and process are there,
//! and `promtool check metrics` passes on what boxd serves
//! (skipped without `promtool`, unless `BOXMAKER_REQUIRE_PROMETHEUS=1`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;
use support::{Setup, wait_until};

const RESTART: &str =
    "initial_backoff_ms = 50\nmax_backoff_ms = 200\nmax_restarts = 2\nwindow_ms = 60000";

/// One HTTP/1.1 request `head` (without its final blank line) on `stream`: the whole answer.
fn exchange(mut stream: impl Read + Write, head: &str, host: &str) -> String {
    let request = format!("{head}\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer
}

/// `head` on boxd's socket.
fn on_socket(socket: &Path, head: &str) -> String {
    let stream = UnixStream::connect(socket).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_millis(support::WAIT_MS)))
        .unwrap();
    exchange(stream, head, "boxd")
}

/// The body of a 200 answer.
fn body(answer: &str) -> &str {
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    answer.split_once("\r\n\r\n").unwrap().1
}

/// The value of the sample `series` (name and labels, exactly as written) in `text`.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.parse().ok()
    })
}

/// Scrapes boxd's socket until `cond` holds for the text; returns that text.
fn scrape_until(socket: &Path, what: &str, mut cond: impl FnMut(&str) -> bool) -> String {
    let mut text = String::new();
    wait_until(what, || {
        text = body(&on_socket(socket, "GET /metrics HTTP/1.1")).to_owned();
        cond(&text)
    });
    text
}

/// The address in boxd's log line that says it serves metrics over TCP.
fn tcp_addr(stderr: &str) -> SocketAddr {
    let line = stderr
        .lines()
        .find(|l| l.contains("serving /metrics over TCP"))
        .unwrap_or_else(|| panic!("no TCP listener in boxd's log:\n{stderr}"));
    let rest = line.split_once("metrics=").unwrap().1;
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn metrics_say_which_child_is_up_and_count_a_killed_childs_restart() {
    let mut s = Setup::new(RESTART);
    let socket = s.dir.path().join("boxd.sock");
    s.top_level(&format!(
        "socket = {socket:?}\n[metrics]\nlisten = \"127.0.0.1:0\""
    ));
    s.child("a", &[], "");
    s.child("b", &[], "");
    let mut boxd = s.start(&[]);
    boxd.wait_for("b listening");
    let up = |child: &str| format!("boxd_child_up{{child=\"{child}\"}}");
    let restarts = |child: &str| format!("boxd_child_restarts_total{{child=\"{child}\"}}");
    let last_exit = "boxd_child_last_exit_status{child=\"a\"}";
    let text = scrape_until(&socket, "both children up", |t| {
        sample(t, &up("a")) == Some(1.0) && sample(t, &up("b")) == Some(1.0)
    });
    assert_eq!(sample(&text, &restarts("a")), Some(0.0), "{text}");
    assert_eq!(sample(&text, last_exit), None, "{text}");
    let uptime = sample(&text, "boxd_child_uptime_seconds{child=\"a\"}").unwrap();
    assert!(uptime > 0.0, "{text}");

    let first = boxd.pids_of("a start")[0];
    kill(Pid::from_raw(first), Signal::SIGKILL).unwrap();
    let text = scrape_until(&socket, "a restarted and up", |t| {
        sample(t, &restarts("a")) == Some(1.0) && sample(t, &up("a")) == Some(1.0)
    });
    assert_eq!(sample(&text, last_exit), Some(137.0), "{text}");
    assert_eq!(sample(&text, &restarts("b")), Some(0.0), "{text}");
    assert_eq!(boxd.pids_of("a start").len(), 2, "{:?}", boxd.lines());

    let addr = tcp_addr(&boxd.stderr());
    assert!(addr.ip().is_loopback(), "{addr}");
    let stream = TcpStream::connect(addr).unwrap();
    // The listener answers only a request that names it (DNS rebinding: docs/metrics.md).
    let over_tcp = exchange(stream, "GET /metrics HTTP/1.1", &addr.to_string());
    let scraped = body(&over_tcp);
    assert_eq!(sample(scraped, last_exit), Some(137.0), "{over_tcp}");
    // boxd's own build and process, and when a's second process started.
    assert!(scraped.contains("boxd_build_info{version=\""), "{scraped}");
    for name in bxmetrics::process::PROCESS_METRICS {
        assert!(sample(scraped, name).is_some(), "no {name} in\n{scraped}");
    }
    let boxd_start = sample(scraped, "process_start_time_seconds").unwrap();
    let a_start = sample(scraped, "boxd_child_start_time_seconds{child=\"a\"}").unwrap();
    let b_start = sample(scraped, "boxd_child_start_time_seconds{child=\"b\"}").unwrap();
    // Ticks of 10 ms for boxd's own start.
    assert!(
        boxd_start - 0.02 <= b_start && b_start <= a_start,
        "{scraped}"
    );

    if let Some(promtool) = bxmetrics::testing::promtool_or_skip() {
        bxmetrics::testing::promtool_check_with(&promtool, &text).unwrap();
    }

    boxd.signal(Signal::SIGTERM);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());
    assert!(!socket.exists(), "boxd left its socket behind");
}

#[test]
fn the_socket_answers_metrics_and_nothing_else() {
    let mut s = Setup::new(RESTART);
    let socket = s.dir.path().join("boxd.sock");
    s.top_level(&format!("socket = {socket:?}"));
    s.child("a", &[], "");
    let mut boxd = s.start(&[]);
    boxd.wait_for("a listening");
    let open = on_socket(
        &socket,
        "GET /metrics HTTP/1.1\r\naccept: application/openmetrics-text",
    );
    assert!(open.contains("application/openmetrics-text"), "{open}");
    assert!(body(&open).ends_with("# EOF\n"), "{open}");
    let other = on_socket(&socket, "GET /v1/status HTTP/1.1");
    assert!(other.starts_with("HTTP/1.1 404"), "{other}");
    let post = on_socket(&socket, "POST /metrics HTTP/1.1\r\ncontent-length: 0");
    assert!(post.starts_with("HTTP/1.1 405"), "{post}");
    boxd.signal(Signal::SIGTERM);
    assert_eq!(boxd.wait_exit().code(), Some(0), "{}", boxd.stderr());
}
