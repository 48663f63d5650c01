#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 36, turns in flight = slots: with 64 main slots, 64 sessions' tasks at once make 64
//! model calls at once. fakellama holds each call, once it has its slot, until 64 slots have
//! been busy at once (`--hold-until-busy`, bounded), so the test waits on that condition and
//! times nothing; with a fixed pool of 8 turn workers only 8 calls were ever in flight.

use e2e::real::heavy;
use e2e::{Stack, StackOptions, show};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::Child;

/// Sessions, main slots, and the calls that must be in flight at once.
const SESSIONS: usize = 64;

/// fakellama's `GET /fakellama/stats` at `llama_url` (`http://HOST:PORT`), as JSON.
fn stats(llama_url: &str) -> serde_json::Value {
    let address = llama_url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(address).unwrap();
    stream
        .write_all(b"GET /fakellama/stats HTTP/1.0\r\nHost: fakellama\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (_, body) = answer.split_once("\r\n\r\n").unwrap();
    serde_json::from_str(body).unwrap()
}

#[test]
fn sixty_four_main_slots_serve_sixty_four_turns_at_once() {
    let _heavy = heavy();
    let main: Vec<String> = (0..SESSIONS).map(|n| n.to_string()).collect();
    let stack = Stack::start(StackOptions {
        script: "default_reply = \"fine\"\n".into(),
        fakellama_args: [
            "--slots",
            &(SESSIONS + 2).to_string(),
            "--hold-until-busy",
            &SESSIONS.to_string(),
        ]
        .map(String::from)
        .to_vec(),
        loopd_toml: format!(
            "[slots]\nmain = [{}]\nbackground = {SESSIONS}\nsubagent = {}\n",
            main.join(", "),
            SESSIONS + 1
        ),
        ..StackOptions::default()
    })
    .unwrap();
    let tasks: Vec<Child> = (0..SESSIONS)
        .map(|n| stack.spawn_boxctl(&["task", "--session", &format!("s-{n}"), "hello"]))
        .collect();
    for task in tasks {
        let out = task.wait_with_output().unwrap();
        assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    }
    assert_eq!(
        stats(&stack.llama_url)["max_busy_slots"],
        SESSIONS,
        "model calls in flight at once"
    );
}
