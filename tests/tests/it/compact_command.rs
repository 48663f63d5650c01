#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `boxctl compact SESSION` end to end: the real fakellama, loopd and boxctl binaries.

use bxcore::{LogRecord, SessionId};
use e2e::{Stack, StackOptions};
use std::process::Output;

/// A phrase of `config/compact.md`, for the script to match compaction requests on.
const COMPACT_PHRASE: &str = "is about to be replaced by a summary";
/// The summary the script's model writes.
const SUMMARY: &str = "The user said hello and was greeted back.";
/// The carry: the summary, then the owner's own words, word for word (issue 34).
const CARRY: &str = "The user said hello and was greeted back.\n\nThe owner's own words earlier \
     in this conversation (word for word):\n> hi";

fn show(out: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn boxctl_compact_begins_an_epoch_and_says_so() {
    let stack = Stack::start(StackOptions {
        script: format!(
            "default_reply = \"Hello.\"\n[[rule]]\nwhen_contains = \"{COMPACT_PHRASE}\"\n\
             reply = \"{SUMMARY}\"\n"
        ),
        ..StackOptions::default()
    })
    .unwrap();
    let out = stack.boxctl(&["task", "--session", "s", "hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));

    let out = stack.boxctl(&["compact", "s"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        said,
        format!(
            "s: epoch 1 began; its carry has {} characters, written by the model; 0 memory \
             notes stored\n",
            CARRY.len()
        )
    );
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    let records = store.read(&SessionId::new("s").unwrap()).unwrap();
    assert!(
        matches!(records.last(), Some(LogRecord::EpochStart { epoch: 1, carry, .. }) if carry == CARRY),
        "{records:?}"
    );

    // The new epoch holds nothing yet; no session is unknown.
    let out = stack.boxctl(&["compact", "s"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    assert!(show(&out).contains("nothing to compact"), "{}", show(&out));
    let out = stack.boxctl(&["compact", "nope"]);
    assert_eq!(out.status.code(), Some(4), "{}", show(&out));

    // The session goes on from the carry.
    let out = stack.boxctl(&["task", "--session", "s", "and now?"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}
