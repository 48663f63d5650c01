//! Approvals through brokerd's socket (issue 16): a grant that asks answers with an approval
//! and runs nothing; the approval sent back runs exactly that call once; a replayed, forged,
//! expired approval, or one for other arguments, another session or tool, is refused and
//! audited; `for_turn`, `when_untrusted = "ask"`, the rate limit, `max_pending`, and a
//! restarted brokerd that refuses what the previous one minted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use brokerd::audit::{ApprovalScope, AuditDecision, AuditEvent, AuditLog, AuditRecord};
use brokerd::config::{ApprovalSettings, Approve, Grant, Limits, WhenUntrusted};
use brokerd::server::{ServerOptions, bind_socket, serve};
use bxcore::{ApprovalId, DataClass, DenyReason};
use common::{Fixed, broker, config, grant, http, request, tools, with_context};
use http::{Method, StatusCode};
use proto::{ApprovalAsk, ApprovalUse, ToolRequest, ToolResponse};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How long approvals hold in these tests unless a test says otherwise.
const EXPIRE_MS: u64 = 60_000;

/// A temporary directory for one brokerd (and its restarts): socket, state, files.
struct Bed {
    dir: tempfile::TempDir,
}

/// A brokerd serving on the bed's socket.
struct Running {
    socket: PathBuf,
    stop: oneshot::Sender<()>,
    server: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn stop(self) {
        self.stop.send(()).unwrap();
        self.server.await.unwrap();
    }
}

impl Bed {
    fn new() -> Bed {
        let bed = Bed {
            dir: tempfile::tempdir().unwrap(),
        };
        std::fs::create_dir(bed.files()).unwrap();
        bed
    }

    /// The root `write_file` may write under.
    fn files(&self) -> PathBuf {
        self.dir.path().join("files")
    }

    /// A brokerd with `grants` and `approvals`, serving until stopped.
    async fn start(&self, grants: Vec<Grant>, approvals: ApprovalSettings) -> Running {
        let mut cfg = config(self.dir.path(), grants, Limits::default());
        cfg.approvals = approvals;
        // `note`: a tool without a check of its own, that any arguments reach.
        let b = Arc::new(broker(&cfg, tools(vec![Fixed::text("note", "noted")])));
        let options = ServerOptions::from_config(&cfg).unwrap();
        let listener = bind_socket(&cfg.socket, options.allowed_gid).unwrap();
        let (stop, stopped) = oneshot::channel::<()>();
        let server = tokio::spawn(serve(listener, b, options, async {
            let _ = stopped.await;
        }));
        Running {
            socket: cfg.socket.clone(),
            stop,
            server,
        }
    }

    /// `write_file` under the bed's root, asking as `approve` says.
    fn write_grant(&self, approve: Approve) -> Grant {
        let mut g = grant("write_file", &["*"]);
        g.paths = vec![self.files()];
        g.approve = approve;
        g
    }

    /// A `write_file` call in `turn` of `main` that writes `content` to `name`.
    fn write(&self, turn: u64, name: &str, content: &str) -> ToolRequest {
        let path = self.files().join(name);
        let arguments = serde_json::json!({"path": path, "content": content, "overwrite": true});
        request("main", turn, "write_file", &arguments.to_string())
    }

    fn audit(&self) -> Vec<AuditRecord> {
        AuditLog::read(&self.dir.path().join("state").join("audit.jsonl")).unwrap()
    }

    fn audit_text(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("state").join("audit.jsonl")).unwrap()
    }

    fn read(&self, name: &str) -> Option<String> {
        std::fs::read_to_string(self.files().join(name)).ok()
    }
}

fn settings(expire_ms: u64, max_pending: usize) -> ApprovalSettings {
    ApprovalSettings {
        expire_ms,
        max_pending,
    }
}

async fn call(socket: &Path, r: &ToolRequest) -> ToolResponse {
    let (status, bytes) = http(
        socket,
        Method::POST,
        "/v1/call",
        Some(serde_json::to_vec(r).unwrap()),
    )
    .await;
    assert_eq!(
        status,
        StatusCode::OK,
        "{}",
        String::from_utf8_lossy(&bytes)
    );
    serde_json::from_slice(&bytes).unwrap()
}

fn approved(mut r: ToolRequest, id: &ApprovalId, for_turn: bool) -> ToolRequest {
    r.approval = Some(ApprovalUse {
        id: id.clone(),
        for_turn,
    });
    r
}

#[track_caller]
fn asked(response: ToolResponse) -> ApprovalAsk {
    match response {
        ToolResponse::Ask { approval } => approval,
        other => panic!("expected an ask, got {other:?}"),
    }
}

#[track_caller]
fn ran(response: &ToolResponse) {
    assert!(
        matches!(response, ToolResponse::Result { .. }),
        "{response:?}"
    );
}

#[track_caller]
fn refused(response: ToolResponse, reason: DenyReason, words: &str) {
    match response {
        ToolResponse::Denied {
            reason: r,
            detail: Some(detail),
            labels: None,
        } if r == reason => assert!(detail.contains(words), "{detail}"),
        other => panic!("expected {reason:?} ({words}), got {other:?}"),
    }
}

/// The audit lines about approval `id`.
fn lines_of(audit: &[AuditRecord], id: &ApprovalId) -> Vec<AuditRecord> {
    audit
        .iter()
        .filter(|l| l.approval.as_ref() == Some(id))
        .cloned()
        .collect()
}

#[tokio::test]
async fn approve_always_asks_runs_nothing_then_the_approval_runs_the_call_exactly_once() {
    let bed = Bed::new();
    let b = bed
        .start(
            vec![bed.write_grant(Approve::Always)],
            settings(EXPIRE_MS, 8),
        )
        .await;
    let r = bed.write(1, "note.txt", "SECRET-NOTE");
    let ask = asked(call(&b.socket, &r).await);
    assert_eq!(ask.tool, "write_file");
    assert_eq!(
        ask.arguments, r.arguments,
        "the whole arguments as brokerd parsed them, written out (this text is so already)"
    );
    assert_eq!((&ask.session, ask.context), (&r.session, r.context));
    assert_eq!(
        ask.reason,
        "write_file asks the owner first (approve = \"always\")"
    );
    assert_eq!(ask.expires_in_ms, EXPIRE_MS);
    assert_eq!(bed.read("note.txt"), None, "nothing ran");
    let asked_line = &lines_of(&bed.audit(), &ask.id)[0];
    assert_eq!(asked_line.decision, AuditDecision::Asked);
    assert_eq!(
        asked_line.args_sha256,
        brokerd::audit::args_sha256(&r.arguments)
    );

    ran(&call(&b.socket, &approved(r.clone(), &ask.id, false)).await);
    assert_eq!(bed.read("note.txt").as_deref(), Some("SECRET-NOTE"));
    let lines = lines_of(&bed.audit(), &ask.id);
    let events: Vec<_> = lines.iter().map(|l| (l.event, l.decision)).collect();
    assert_eq!(
        events,
        [
            (AuditEvent::Decided, AuditDecision::Asked),
            (AuditEvent::Decided, AuditDecision::Allowed),
            (AuditEvent::Finished, AuditDecision::Allowed),
        ]
    );
    assert_eq!(lines[2].approval_scope, Some(ApprovalScope::Call));

    // Sent again, the same approval runs nothing: the file, removed, stays gone.
    std::fs::remove_file(bed.files().join("note.txt")).unwrap();
    let replay = call(&b.socket, &approved(r, &ask.id, false)).await;
    refused(replay, DenyReason::ApprovalRefused, "used already");
    assert_eq!(bed.read("note.txt"), None);
    let last = bed.audit().pop().unwrap();
    assert_eq!(
        (last.decision, last.reason, last.approval),
        (
            AuditDecision::Denied,
            Some(DenyReason::ApprovalRefused),
            Some(ask.id)
        )
    );
    assert!(
        !bed.audit_text().contains("SECRET-NOTE"),
        "never the arguments"
    );
    b.stop().await;
}

#[tokio::test]
async fn an_approval_holds_only_for_its_arguments_session_and_tool_and_a_forged_one_for_none() {
    let bed = Bed::new();
    let grants = vec![bed.write_grant(Approve::Always), grant("note", &["*"])];
    let b = bed.start(grants, settings(EXPIRE_MS, 8)).await;
    let r = bed.write(1, "a.txt", "approved text");
    let ask = asked(call(&b.socket, &r).await);

    let other_arguments = approved(bed.write(1, "b.txt", "other text"), &ask.id, false);
    let response = call(&b.socket, &other_arguments).await;
    refused(response, DenyReason::ApprovalRefused, "other arguments");
    let mut other_session = approved(r.clone(), &ask.id, false);
    other_session.session = common::sid("other");
    let response = call(&b.socket, &other_session).await;
    refused(response, DenyReason::ApprovalRefused, "session \"main\"");
    // An approval on a call that needs none is checked all the same.
    let other_tool = approved(request("main", 1, "note", &r.arguments), &ask.id, false);
    let response = call(&b.socket, &other_tool).await;
    refused(response, DenyReason::ApprovalRefused, "tool \"write_file\"");
    let forged = ApprovalId::new("ap-000000000000").unwrap();
    let response = call(&b.socket, &approved(r.clone(), &forged, false)).await;
    refused(response, DenyReason::ApprovalRefused, "unknown");
    assert_eq!((bed.read("a.txt"), bed.read("b.txt")), (None, None));

    let audit = bed.audit();
    let refusals: Vec<_> = audit
        .iter()
        .filter(|l| l.reason == Some(DenyReason::ApprovalRefused))
        .map(|l| l.approval.clone().unwrap())
        .collect();
    assert_eq!(
        refusals,
        [&ask.id, &ask.id, &ask.id, &forged].map(Clone::clone)
    );
    // None of them used it up: the call it was minted for still runs with it.
    ran(&call(&b.socket, &approved(r, &ask.id, false)).await);
    assert_eq!(bed.read("a.txt").as_deref(), Some("approved text"));
    b.stop().await;
}

#[tokio::test]
async fn an_approval_older_than_expire_ms_is_refused() {
    const SHORT_EXPIRE_MS: u64 = 50;
    let bed = Bed::new();
    let b = bed
        .start(
            vec![bed.write_grant(Approve::Always)],
            settings(SHORT_EXPIRE_MS, 8),
        )
        .await;
    let r = bed.write(1, "late.txt", "too late");
    let ask = asked(call(&b.socket, &r).await);
    // brokerd minted it before this answer came: once this much has passed here, it has there.
    let received = Instant::now();
    let bound = Instant::now() + Duration::from_secs(10);
    while received.elapsed() <= Duration::from_millis(SHORT_EXPIRE_MS) {
        assert!(Instant::now() < bound, "the clock did not move");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let response = call(&b.socket, &approved(r, &ask.id, false)).await;
    refused(response, DenyReason::ApprovalRefused, "expired");
    assert_eq!(bed.read("late.txt"), None);
    b.stop().await;
}

#[tokio::test]
async fn for_turn_runs_the_tool_again_in_that_turn_without_asking_and_asks_in_the_next() {
    let bed = Bed::new();
    let b = bed
        .start(
            vec![bed.write_grant(Approve::Always)],
            settings(EXPIRE_MS, 8),
        )
        .await;
    let r = bed.write(1, "t.txt", "first");
    let ask = asked(call(&b.socket, &r).await);
    ran(&call(&b.socket, &approved(r.clone(), &ask.id, true)).await);
    std::fs::remove_file(bed.files().join("t.txt")).unwrap();
    // A second identical call in the same turn: no question.
    ran(&call(&b.socket, &r).await);
    assert_eq!(bed.read("t.txt").as_deref(), Some("first"));
    let scopes: Vec<_> = lines_of(&bed.audit(), &ask.id)
        .iter()
        .filter(|l| l.event == AuditEvent::Finished)
        .map(|l| l.approval_scope)
        .collect();
    assert_eq!(
        scopes,
        [Some(ApprovalScope::Turn), Some(ApprovalScope::Allowance)]
    );
    // The next turn asks again.
    asked(call(&b.socket, &bed.write(2, "t.txt", "first")).await);
    b.stop().await;
}

#[tokio::test]
async fn when_untrusted_ask_runs_in_a_trusted_context_and_asks_in_an_untrusted_one() {
    let bed = Bed::new();
    let mut g = bed.write_grant(Approve::Never);
    g.when_untrusted = WhenUntrusted::Ask;
    let b = bed.start(vec![g], settings(EXPIRE_MS, 8)).await;
    ran(&call(&b.socket, &bed.write(1, "trusted.txt", "ok")).await);
    assert_eq!(bed.read("trusted.txt").as_deref(), Some("ok"));
    let untrusted = with_context(bed.write(1, "injected.txt", "x"), DataClass::Public, true);
    let ask = asked(call(&b.socket, &untrusted).await);
    assert_eq!(
        ask.reason,
        "write_file after untrusted text entered the session (when_untrusted = \"ask\")"
    );
    assert!(ask.context.untrusted);
    assert_eq!(bed.read("injected.txt"), None);
    b.stop().await;
}

#[tokio::test]
async fn only_a_call_every_other_check_passes_is_asked_about() {
    let bed = Bed::new();
    let b = bed
        .start(
            vec![bed.write_grant(Approve::Always)],
            settings(EXPIRE_MS, 8),
        )
        .await;
    // write_file's default when_untrusted = deny comes first.
    let untrusted = with_context(bed.write(1, "u.txt", "x"), DataClass::Public, true);
    let response = call(&b.socket, &untrusted).await;
    refused(
        response,
        DenyReason::UntrustedContext,
        "when_untrusted = deny",
    );
    // So does the tool's own check (a relative path).
    let relative = request("main", 1, "write_file", r#"{"path":"u.txt","content":"x"}"#);
    let response = call(&b.socket, &relative).await;
    assert!(
        matches!(response, ToolResponse::Denied { .. }),
        "{response:?}"
    );
    // So does the grant's roots: a path outside them is refused before anyone is asked.
    let outside = bed.dir.path().join("elsewhere.txt");
    let arguments = serde_json::json!({ "path": outside, "content": "x" }).to_string();
    let response = call(&b.socket, &request("main", 1, "write_file", &arguments)).await;
    refused(
        response,
        DenyReason::PathNotAllowed,
        "outside the allowed paths",
    );
    // The same call in a trusted context with an absolute path is the first one asked about.
    let ask = asked(call(&b.socket, &bed.write(1, "u.txt", "x")).await);
    let asked_about: Vec<_> = bed
        .audit()
        .into_iter()
        .filter(|l| l.decision == AuditDecision::Asked)
        .filter_map(|l| l.approval)
        .collect();
    assert_eq!(asked_about, [ask.id]);
    b.stop().await;
}

#[tokio::test]
async fn asks_do_not_use_up_the_rate_limit() {
    let bed = Bed::new();
    let mut g = bed.write_grant(Approve::Always);
    g.max_calls_per_turn = Some(1);
    let b = bed.start(vec![g], settings(EXPIRE_MS, 8)).await;
    let r = bed.write(1, "limited.txt", "once");
    let first = asked(call(&b.socket, &r).await);
    let second = asked(call(&b.socket, &r).await);
    ran(&call(&b.socket, &approved(r.clone(), &second.id, false)).await);
    // That call used the turn's one call; the other approval cannot make a second.
    let response = call(&b.socket, &approved(r, &first.id, false)).await;
    refused(response, DenyReason::RateLimit, "1 times per turn");
    b.stop().await;
}

#[tokio::test]
async fn past_max_pending_a_call_that_needs_an_approval_is_denied_and_audited() {
    let bed = Bed::new();
    let b = bed
        .start(
            vec![bed.write_grant(Approve::Always)],
            settings(EXPIRE_MS, 2),
        )
        .await;
    for n in 0..2 {
        asked(call(&b.socket, &bed.write(1, &format!("{n}.txt"), "x")).await);
    }
    let response = call(&b.socket, &bed.write(1, "2.txt", "x")).await;
    refused(response, DenyReason::NotApproved, "approvals.max_pending");
    let last = bed.audit().pop().unwrap();
    assert_eq!(
        (last.decision, last.reason),
        (AuditDecision::Denied, Some(DenyReason::NotApproved))
    );
    b.stop().await;
}

#[tokio::test]
async fn a_restarted_brokerd_refuses_an_approval_the_previous_one_minted() {
    let bed = Bed::new();
    let grants = vec![bed.write_grant(Approve::Always)];
    let first = bed.start(grants.clone(), settings(EXPIRE_MS, 8)).await;
    let r = bed.write(1, "restart.txt", "x");
    let ask = asked(call(&first.socket, &r).await);
    first.stop().await;

    let second = bed.start(grants, settings(EXPIRE_MS, 8)).await;
    let response = call(&second.socket, &approved(r, &ask.id, false)).await;
    refused(response, DenyReason::ApprovalRefused, "restarted");
    assert_eq!(bed.read("restart.txt"), None);
    let lines = lines_of(&bed.audit(), &ask.id);
    let decisions: Vec<_> = lines.iter().map(|l| l.decision).collect();
    assert_eq!(decisions, [AuditDecision::Asked, AuditDecision::Denied]);
    second.stop().await;
}
