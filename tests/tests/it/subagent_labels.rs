#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Subagent labels end to end, with the real brokerd: a child that fetches an untrusted page
//! makes its parent's context untrusted, and brokerd then denies the parent a write.

use bxcore::{DenyReason, LogRecord, SessionId, ToolOutcome};
use e2e::{Stack, StackOptions};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

/// Serves one plain page on loopback.
fn page_server() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                line.clear();
            }
            let body = "Otters hold hands while they sleep.";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

fn call(name: &str, inner: &str) -> String {
    let arguments = format!("{{\"name\":\"{name}\",\"arguments\":{inner}}}");
    format!(
        "tool_calls = [{{ name = \"call_tool\", arguments = {} }}]",
        toml_string(&arguments)
    )
}

#[test]
fn an_untrusted_child_makes_the_parent_untrusted_and_brokerd_denies_its_write() {
    let port = page_server();
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    std::fs::create_dir_all(&out).unwrap();
    let target = out.join("note.txt");

    // brokerd: children may fetch from the page's host; anyone may write under out/ (but not
    // from an untrusted context: write_file's default).
    let socket = dir.path().join("brokerd.sock");
    let _brokerd = e2e::start_brokerd(
        dir.path(),
        &format!(
            "[[grants]]\ntool = \"http_fetch\"\nsessions = [\"sub-*\"]\nhosts = [\"127.0.0.1:{port}\"]\n\
             networks = [\"127.0.0.0/8\"]\n\
             [[grants]]\ntool = \"write_file\"\npaths = [{out:?}]\n"
        ),
    );

    // The parent hands the fetch to a child, then tries to write what came back.
    let page = format!("http://127.0.0.1:{port}/otters");
    let script = format!(
        "[[rule]]\nwhen_role = \"user\"\nwhen_contains = \"Find out\"\ntimes = 1\n\
         tool_calls = [{{ name = \"subagent\", arguments = {} }}]\n\
         [[rule]]\nwhen_role = \"user\"\nwhen_contains = \"Fetch\"\ntimes = 1\n{}\n\
         [[rule]]\nwhen_role = \"tool\"\nwhen_contains = \"Otters hold hands\"\ntimes = 1\n\
         reply = \"Otters hold hands while they sleep.\"\n\
         [[rule]]\nwhen_role = \"tool\"\nwhen_contains = \"Otters hold hands\"\ntimes = 1\n{}\n\
         [[rule]]\nwhen_role = \"tool\"\nwhen_contains = \"untrusted content\"\nreply = \"I could not save it.\"\n",
        toml_string(&format!(
            "{{\"task\":\"Fetch {page} and say what it says.\"}}"
        )),
        call("http_fetch", &format!("{{\"url\":\"{page}\"}}")),
        call(
            "write_file",
            &format!(
                "{{\"path\":\"{}\",\"content\":\"otters\"}}",
                target.display()
            )
        ),
    );
    let stack = Stack::start(StackOptions {
        script,
        loopd_toml: format!("[broker]\nsocket = {socket:?}\n[subagent]\nenabled = true\n"),
        ..Default::default()
    })
    .unwrap();
    // The owner says where to save (loopd runs a write only to a path the owner gave), so the
    // write reaches brokerd, which denies it for the child's untrusted page.
    let run = stack.boxctl(&[
        "task",
        "--session",
        "parent",
        &format!("Find out about otters and save it to {}.", target.display()),
    ]);
    let stdout = String::from_utf8_lossy(&run.stdout);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&run.stderr)
    );

    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    let child = store
        .read(&SessionId::new("sub-parent-1").unwrap())
        .unwrap();
    assert!(child.iter().any(|r| matches!(
        r,
        LogRecord::ToolResult {
            untrusted: true,
            outcome: ToolOutcome::Ok,
            ..
        }
    )));
    let parent = store.read(&SessionId::new("parent").unwrap()).unwrap();
    let results: Vec<(bool, ToolOutcome)> = parent
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult {
                untrusted, outcome, ..
            } => Some((*untrusted, *outcome)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            (true, ToolOutcome::Ok),
            (
                false,
                ToolOutcome::Denied {
                    reason: DenyReason::UntrustedContext
                }
            ),
        ],
        "{parent:?}"
    );
    assert!(!target.exists(), "nothing was written");
}
