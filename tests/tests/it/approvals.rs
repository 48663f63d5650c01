#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Approvals end to end (issue 16): fakellama, the real brokerd and loopd, and the owner
//! answering with the real `boxctl`. The call waits for the owner, runs once when approved,
//! never when denied; a crash of loopd while it waits voids it (and the owner is told), while
//! brokerd keeps it across a restart of its own.

use crate::injection::common::{call_tool, records, stack_with_brokerd, start_brokerd};
use bxcore::{ApprovalDecision, DenyReason, LogRecord, ToolOutcome, TurnEnd};
use e2e::{Stack, show};
use proto::api::{ApprovalList, PendingApproval};
use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

/// The longest a test waits for something to happen, in milliseconds.
const WAIT_MS: u64 = 30_000;

/// brokerd's grants: `write_file` under `dir/out`, asking the owner first.
fn ask_grants(out: &Path) -> String {
    format!("[[grants]]\ntool = \"write_file\"\npaths = [{out:?}]\napprove = \"always\"\n")
}

/// A fakellama step that writes `content` to `path` through `call_tool`.
pub(crate) fn write(path: &Path, content: &str) -> String {
    call_tool(
        "write_file",
        &serde_json::json!({ "path": path, "content": content }).to_string(),
    )
}

/// A fakellama step that writes `content` to `path` through `call_tool`, over what is there.
pub(crate) fn overwrite(path: &Path, content: &str) -> String {
    call_tool(
        "write_file",
        &serde_json::json!({ "path": path, "content": content, "overwrite": true }).to_string(),
    )
}

/// A fakellama step that answers `text`.
pub(crate) fn reply(text: &str) -> String {
    format!("reply = {:?}", text)
}

/// The calls waiting now, as `boxctl approvals --json` says.
pub(crate) fn pending(stack: &Stack) -> Vec<PendingApproval> {
    let out = stack.boxctl(&["approvals", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let list: ApprovalList = serde_json::from_slice(&out.stdout).unwrap();
    list.approvals
}

/// Waits (bounded) until a call of `session` waits for the owner, and gives it.
pub(crate) fn wait_for_approval(stack: &Stack, session: &str) -> PendingApproval {
    let deadline = Instant::now() + Duration::from_millis(WAIT_MS);
    loop {
        if let Some(found) = pending(stack)
            .into_iter()
            .find(|p| p.session.as_str() == session)
        {
            return found;
        }
        assert!(
            Instant::now() < deadline,
            "no approval asked for {session}; its log:\n{}",
            stack.log_text(session)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (bounded) for a spawned boxctl and gives its exit code and output.
pub(crate) fn finish(child: Child) -> (Option<i32>, String) {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx
        .recv_timeout(Duration::from_millis(WAIT_MS))
        .expect("boxctl did not end")
        .unwrap();
    (out.status.code(), show(&out))
}

pub(crate) fn answer(stack: &Stack, args: &[&str]) {
    let out = stack.boxctl(args);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
}

/// The decisions of the session's approvals, in order.
pub(crate) fn decisions(records: &[LogRecord]) -> Vec<ApprovalDecision> {
    records
        .iter()
        .filter_map(|r| match r {
            LogRecord::ApprovalDecided { decision, .. } => Some(*decision),
            _ => None,
        })
        .collect()
}

/// The outcomes of the session's tool calls, in order.
pub(crate) fn outcomes(records: &[LogRecord]) -> Vec<ToolOutcome> {
    records
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult { outcome, .. } => Some(*outcome),
            _ => None,
        })
        .collect()
}

/// The owner's task: `words`, then where to save (`out`), as an owner says it. loopd runs a
/// `write_file` only for a path the owner gave (`[loop] owner_paths_tools`), and these tests
/// are about the owner's approval of such a call.
pub(crate) fn saving_into(words: &str, out: &Path) -> String {
    format!("{words}, saving into {}", out.display())
}

pub(crate) fn out_dir(dir: &Path) -> std::path::PathBuf {
    let out = dir.join("out");
    std::fs::create_dir_all(&out).unwrap();
    out
}

pub(crate) const NOT_APPROVED: ToolOutcome = ToolOutcome::Denied {
    reason: DenyReason::NotApproved,
};

#[test]
fn an_approved_call_runs_once_a_denied_one_never_and_approve_for_turn_holds_for_one_turn() {
    let dir = tempfile::tempdir().unwrap();
    let out = out_dir(dir.path());
    let (a, b, c) = (out.join("a.txt"), out.join("b.txt"), out.join("c.txt"));
    let _brokerd = start_brokerd(dir.path(), &ask_grants(&out));
    let steps = [
        ("user", "first task", write(&a, "one")),
        ("tool", "a.txt", write(&b, "two")),
        ("tool", "owner denied", reply("Saved a; b was refused.")),
        ("user", "second task", overwrite(&c, "three")),
        ("tool", "c.txt", overwrite(&c, "three")),
        ("tool", "c.txt", reply("Saved c twice.")),
        ("user", "third task", overwrite(&c, "three")),
        ("tool", "no answer", reply("Nobody answered.")),
    ];
    // The same write again at the next step is what `--for-turn` must cover here; loopd would
    // refuse it as a repeat first (`loop.refuse_repeat_at_once`).
    let stack = stack_with_brokerd(
        dir.path(),
        &steps,
        "[approvals]\ntimeout_ms = 4000\n[loop]\nrefuse_repeat_at_once = false\n",
    );

    // Approve once, then deny with a reason.
    let task = stack.spawn_boxctl(&[
        "task",
        "--session",
        "owner",
        &saving_into("first task", &out),
    ]);
    let first = wait_for_approval(&stack, "owner");
    assert_eq!(first.tool, "write_file");
    assert!(first.arguments.contains("a.txt"), "{first:?}");
    assert!(!a.exists(), "nothing is written before the owner answers");
    answer(&stack, &["approve", first.id.as_str()]);
    let second = wait_for_approval(&stack, "owner");
    assert_ne!(second.id, first.id);
    answer(
        &stack,
        &["deny", second.id.as_str(), "--reason", "not into b"],
    );
    let (code, output) = finish(task);
    assert_eq!(code, Some(0), "{output}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "one");
    assert!(!b.exists());
    let log = records(&stack, "owner");
    assert_eq!(
        decisions(&log),
        [ApprovalDecision::Approved, ApprovalDecision::Denied]
    );
    assert_eq!(outcomes(&log), [ToolOutcome::Ok, NOT_APPROVED]);
    let denial = log.iter().rev().find_map(|r| match r {
        LogRecord::ToolResult { content, .. } => Some(content.clone()),
        _ => None,
    });
    assert_eq!(
        denial.as_deref(),
        Some("the owner denied this call: not into b")
    );
    let uid = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata(dir.path()).unwrap());
    assert!(
        log.iter().any(|r| matches!(
            r,
            LogRecord::ApprovalDecided { uid: Some(u), decision: ApprovalDecision::Approved, .. } if *u == uid
        )),
        "the deciding peer's uid is recorded"
    );

    // Approved for the turn: the identical second call is not asked about.
    let task = stack.spawn_boxctl(&[
        "task",
        "--session",
        "owner",
        &saving_into("second task", &out),
    ]);
    let asked = wait_for_approval(&stack, "owner");
    answer(&stack, &["approve", asked.id.as_str(), "--for-turn"]);
    let (code, output) = finish(task);
    assert_eq!(code, Some(0), "{output}");
    let log = records(&stack, "owner");
    assert_eq!(
        decisions(&log),
        [
            ApprovalDecision::Approved,
            ApprovalDecision::Denied,
            ApprovalDecision::ApprovedForTurn
        ]
    );
    assert_eq!(
        outcomes(&log),
        [
            ToolOutcome::Ok,
            NOT_APPROVED,
            ToolOutcome::Ok,
            ToolOutcome::Ok
        ]
    );

    // The next turn asks again, and silence is a no.
    let run = stack.boxctl(&[
        "task",
        "--session",
        "owner",
        &saving_into("third task", &out),
    ]);
    assert_eq!(run.status.code(), Some(0), "{}", show(&run));
    let log = records(&stack, "owner");
    assert_eq!(decisions(&log).last(), Some(&ApprovalDecision::TimedOut));
    assert_eq!(outcomes(&log).last(), Some(&NOT_APPROVED));
    assert!(pending(&stack).is_empty());
}

#[test]
fn two_sessions_wait_at_once_and_are_answered_out_of_order() {
    let dir = tempfile::tempdir().unwrap();
    let out = out_dir(dir.path());
    let (a, b) = (out.join("a.txt"), out.join("b.txt"));
    let _brokerd = start_brokerd(dir.path(), &ask_grants(&out));
    let steps = [
        ("user", "note A", write(&a, "A")),
        ("user", "note B", write(&b, "B")),
        ("tool", "a.txt", reply("Saved A.")),
        ("tool", "b.txt", reply("Saved B.")),
    ];
    let stack = stack_with_brokerd(dir.path(), &steps, "");
    let first = stack.spawn_boxctl(&["task", "--session", "one", &saving_into("note A", &out)]);
    let asked_a = wait_for_approval(&stack, "one");
    // loopd has one main slot: the second session's turn runs only because the first gave
    // its slot back while it waits.
    let second = stack.spawn_boxctl(&["task", "--session", "two", &saving_into("note B", &out)]);
    let asked_b = wait_for_approval(&stack, "two");
    assert_eq!(pending(&stack).len(), 2);
    answer(&stack, &["approve", asked_b.id.as_str()]);
    let (code, output) = finish(second);
    assert_eq!(code, Some(0), "{output}");
    assert!(b.exists() && !a.exists());
    answer(&stack, &["approve", asked_a.id.as_str()]);
    let (code, output) = finish(first);
    assert_eq!(code, Some(0), "{output}");
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "A");
}

#[test]
fn loopd_killed_while_a_call_waits_voids_the_approval_and_interrupts_the_turn() {
    let dir = tempfile::tempdir().unwrap();
    let out = out_dir(dir.path());
    let a = out.join("a.txt");
    let _brokerd = start_brokerd(dir.path(), &ask_grants(&out));
    let steps = [
        ("user", "note A", write(&a, "A")),
        ("user", "after the crash", reply("Back again.")),
    ];
    let mut stack = stack_with_brokerd(dir.path(), &steps, "");
    let task = stack.spawn_boxctl(&["task", "--session", "crash", &saving_into("note A", &out)]);
    let asked = wait_for_approval(&stack, "crash");
    drop(stack.loopd.take()); // SIGKILL
    let (code, _) = finish(task);
    assert_ne!(code, Some(0));
    stack
        .start_loopd(&format!(
            "[broker]\nsocket = {:?}\n",
            dir.path().join("brokerd.sock")
        ))
        .unwrap();
    assert!(pending(&stack).is_empty(), "a restart forgets the wait");
    let late = stack.boxctl(&["approve", asked.id.as_str()]);
    assert_ne!(late.status.code(), Some(0), "{}", show(&late));
    // The start ended the turn (issue 33): the approval is void, the turn interrupted, and
    // the owner told.
    let told = stack.boxctl(&["notifications", "--json"]);
    let told: proto::api::NotificationList = serde_json::from_slice(&told.stdout).unwrap();
    assert!(
        told.notifications
            .iter()
            .any(|n| n.session.as_str() == "crash"
                && n.text.contains(asked.id.as_str())
                && n.text.contains("did not run")),
        "{told:?}"
    );
    let run = stack.boxctl(&["task", "--session", "crash", "after the crash"]);
    assert_eq!(run.status.code(), Some(0), "{}", show(&run));
    let log = records(&stack, "crash");
    assert_eq!(decisions(&log), [ApprovalDecision::Void]);
    assert!(log.iter().any(|r| matches!(
        r,
        LogRecord::TurnEnd {
            turn: 1,
            end: TurnEnd::Interrupted,
            ..
        }
    )));
    assert!(!a.exists());
}

#[test]
fn brokerd_restarted_while_a_call_waits_keeps_the_approval_and_the_approved_call_runs_once() {
    // Issue 33: brokerd kept its approvals in memory only, so the owner's approve got 200
    // "approved" for a call the restarted brokerd then refused. It keeps them in its state dir.
    let dir = tempfile::tempdir().unwrap();
    let out = out_dir(dir.path());
    let a = out.join("a.txt");
    let brokerd = start_brokerd(dir.path(), &ask_grants(&out));
    let steps = [
        ("user", "note A", write(&a, "A")),
        ("tool", "a.txt", reply("Saved.")),
    ];
    let stack = stack_with_brokerd(dir.path(), &steps, "");
    let task = stack.spawn_boxctl(&["task", "--session", "restart", &saving_into("note A", &out)]);
    let asked = wait_for_approval(&stack, "restart");
    drop(brokerd); // SIGKILL
    let _brokerd = start_brokerd(dir.path(), &ask_grants(&out));
    let approved = stack.boxctl(&["approve", asked.id.as_str(), "--json"]);
    assert_eq!(approved.status.code(), Some(0), "{}", show(&approved));
    let answered: proto::api::ApprovalAnswered = serde_json::from_slice(&approved.stdout).unwrap();
    assert_eq!(answered.decision, ApprovalDecision::Approved);
    let (code, output) = finish(task);
    assert_eq!(code, Some(0), "{output}");
    let log = records(&stack, "restart");
    assert_eq!(decisions(&log), [ApprovalDecision::Approved]);
    assert_eq!(outcomes(&log), [ToolOutcome::Ok]);
    assert_eq!(std::fs::read_to_string(&a).unwrap(), "A");
    // The restarted brokerd ran it, once, under the approval minted before the restart.
    let audit = std::fs::read_to_string(dir.path().join("brokerd-state/audit.jsonl")).unwrap();
    let ran: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|l| l["event"] == "decided" && l["decision"] == "allowed")
        .collect();
    assert_eq!(ran.len(), 1, "{audit}");
    assert_eq!(ran[0]["approval"], asked.id.as_str());
}
