#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Approved calls under a SIGKILL of loopd (issue 33): an approved call either runs exactly
//! once (brokerd's audit log says so) or the owner is told it may not have run; it never runs
//! twice. Fakellama, the real brokerd and loopd, the owner answering with the real `boxctl`.

use crate::approvals::{
    answer, decisions, finish, out_dir, outcomes, pending, reply, saving_into, wait_for_approval,
    write,
};
use crate::injection::common::{fetch, loopback_fetch_grant, records, stack_with_brokerd};
use bxcore::{ApprovalDecision, LogRecord, ToolOutcome, TurnEnd};
use e2e::{Stack, show, start_brokerd};
use proto::api::NotificationList;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The longest a test waits for something to happen, in milliseconds.
const WAIT_MS: u64 = 30_000;

/// A page server that accepts and never answers: a fetch of it runs for as long as the test
/// wants. Each connection it gets is sent on the receiver (and held open).
fn silent_page_server() -> (u16, mpsc::Receiver<TcpStream>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let (accepted, fetches) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            if accepted.send(stream.unwrap()).is_err() {
                return;
            }
        }
    });
    (port, fetches)
}

/// brokerd's `decided` lines of calls of `tool` that were let run (under an approval or not).
fn runs(dir: &Path, tool: &str) -> Vec<serde_json::Value> {
    let audit = std::fs::read_to_string(dir.join("brokerd-state/audit.jsonl")).unwrap();
    audit
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .filter(|l| l["event"] == "decided" && l["tool"] == tool && l["decision"] == "allowed")
        .collect()
}

/// Waits (bounded) until `holds()`, failing with `what`.
fn until(what: &str, mut holds: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    while !holds() {
        assert!(Instant::now() < deadline, "{what} within {WAIT_MS} ms");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGKILLs loopd and starts it again on the same state, with the same brokerd.
fn kill_and_restart_loopd(stack: &mut Stack, dir: &Path) {
    drop(stack.loopd.take()); // SIGKILL, reaped
    stack
        .start_loopd(&format!(
            "[broker]\nsocket = {:?}\n",
            dir.join("brokerd.sock")
        ))
        .unwrap();
}

/// How the turn `turn` of `records` ended, if it did.
fn end_of(records: &[LogRecord], turn: u64) -> Option<TurnEnd> {
    records.iter().find_map(|r| match r {
        LogRecord::TurnEnd { turn: t, end, .. } if *t == turn => Some(end.clone()),
        _ => None,
    })
}

/// The notifications, as `boxctl notifications --json` gives them.
fn notifications(stack: &Stack) -> NotificationList {
    let out = stack.boxctl(&["notifications", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn an_approved_call_runs_while_another_session_holds_the_slot_and_a_kill_then_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = out_dir(dir.path());
    let a = out.join("a.txt");
    let grants =
        format!("[[grants]]\ntool = \"write_file\"\npaths = [{out:?}]\napprove = \"always\"\n");
    let _brokerd = start_brokerd(dir.path(), &grants);
    // The busy session's model call is answered only after the test is over: its turn holds
    // the one main slot until loopd is killed (a turn gives its slot back in a tool call, so
    // only a model call holds it).
    let slow = format!("{}\ndelay_ms = {}", reply("Held."), 10 * WAIT_MS);
    let steps = [("user", "note A", write(&a, "A")), ("user", "hold", slow)];
    let mut stack = stack_with_brokerd(dir.path(), &steps, "");
    let asking = stack.spawn_boxctl(&["task", "--session", "ask", &saving_into("note A", &out)]);
    let asked = wait_for_approval(&stack, "ask");
    // Another session's turn takes the one main slot "ask" gave back: its user record is
    // written once it holds the slot, which it keeps in its model call.
    let busy = stack.spawn_boxctl(&["task", "--session", "busy", "hold the slot"]);
    until("the busy session's turn holds the slot", || {
        has_user_record(&stack, "busy")
    });
    answer(&stack, &["approve", asked.id.as_str()]);
    // Before issue 33 the approved call waited here for the slot, and a kill lost it.
    until("the approved write ran while the slot was held", || {
        std::fs::read_to_string(&a).is_ok_and(|t| t == "A")
    });
    until("its result is in the log", || {
        outcomes(&records(&stack, "ask")) == [ToolOutcome::Ok]
    });
    assert_eq!(
        end_of(&records(&stack, "busy"), 1),
        None,
        "busy still holds the slot"
    );

    kill_and_restart_loopd(&mut stack, dir.path());
    let (code, _) = finish(asking);
    assert_ne!(code, Some(0));
    let (code, _) = finish(busy);
    assert_ne!(code, Some(0));
    // Ended at start, before any task: the call ran once, its result kept.
    let log = records(&stack, "ask");
    assert_eq!(decisions(&log), [ApprovalDecision::Approved]);
    assert_eq!(outcomes(&log), [ToolOutcome::Ok]);
    assert_eq!(end_of(&log, 1), Some(TurnEnd::Interrupted));
    assert_eq!(
        end_of(&records(&stack, "busy"), 1),
        Some(TurnEnd::Interrupted)
    );
    let writes = runs(dir.path(), "write_file");
    assert_eq!(writes.len(), 1, "{writes:?}");
    assert_eq!(writes[0]["approval"], asked.id.as_str());
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "A");
    assert!(
        notifications(&stack)
            .notifications
            .iter()
            .all(|n| n.session.as_str() != "ask"),
        "nothing to tell of the call that ran"
    );
    assert!(pending(&stack).is_empty());
}

/// Whether session `session` of `stack` exists and holds a user record.
fn has_user_record(stack: &Stack, session: &str) -> bool {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    let id = bxcore::SessionId::new(session).unwrap();
    store.exists(&id)
        && store
            .read(&id)
            .is_ok_and(|log| log.iter().any(|r| matches!(r, LogRecord::User { .. })))
}

#[test]
fn loopd_killed_while_an_approved_call_runs_tells_the_owner_and_never_runs_it_again() {
    let (port, fetches) = silent_page_server();
    let dir = tempfile::tempdir().unwrap();
    let grants = format!("{}approve = \"always\"\n", loopback_fetch_grant(port));
    let _brokerd = start_brokerd(dir.path(), &grants);
    let url = format!("http://127.0.0.1:{port}/report");
    let steps = [
        ("user", "fetch the report", fetch(&url)),
        ("user", "after the crash", reply("Back again.")),
    ];
    let mut stack = stack_with_brokerd(dir.path(), &steps, "");
    let task = stack.spawn_boxctl(&["task", "--session", "fetcher", "fetch the report"]);
    let asked = wait_for_approval(&stack, "fetcher");
    answer(&stack, &["approve", asked.id.as_str()]);
    // brokerd runs the approved fetch; loopd is killed before its result comes back.
    let held = fetches
        .recv_timeout(Duration::from_millis(WAIT_MS))
        .expect("brokerd started the approved fetch");
    kill_and_restart_loopd(&mut stack, dir.path());
    let (code, _) = finish(task);
    assert_ne!(code, Some(0));

    // At start, before any task: the call's result says it may not have run, the turn is
    // ended, and the owner is told.
    let log = records(&stack, "fetcher");
    assert_eq!(decisions(&log), [ApprovalDecision::Approved]);
    assert_eq!(outcomes(&log), [ToolOutcome::Failed]);
    assert!(log.iter().any(|r| matches!(
        r,
        LogRecord::ToolResult { content, .. }
            if content == loopd::session::APPROVED_WITHOUT_RESULT
    )));
    assert_eq!(end_of(&log, 1), Some(TurnEnd::Interrupted));
    let told: Vec<_> = notifications(&stack)
        .notifications
        .into_iter()
        .filter(|n| n.session.as_str() == "fetcher")
        .collect();
    assert_eq!(told.len(), 1, "{told:?}");
    assert!(told[0].text.contains(asked.id.as_str()), "{}", told[0].text);
    assert!(
        told[0].text.contains("may not have run"),
        "{}",
        told[0].text
    );
    assert!(told[0].text.contains("http_fetch"), "{}", told[0].text);

    // The session goes on, and the fetch is never sent again.
    let run = stack.boxctl(&["task", "--session", "fetcher", "after the crash"]);
    assert_eq!(run.status.code(), Some(0), "{}", show(&run));
    let fetched = runs(dir.path(), "http_fetch");
    assert_eq!(fetched.len(), 1, "{fetched:?}");
    assert_eq!(fetched[0]["approval"], asked.id.as_str());
    assert!(fetches.try_recv().is_err(), "the fetch ran again");
    let told_now = notifications(&stack).notifications;
    assert_eq!(
        told_now
            .iter()
            .filter(|n| n.session.as_str() == "fetcher")
            .count(),
        1,
        "told once"
    );
    drop(held);
}
