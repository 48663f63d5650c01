//! Unit tests of the approval step: when it asks, what an approval and a turn allowance let
//! run, and that only calls that run are counted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use crate::config::ApprovalSettings;
use bxcore::{CallId, Labels, SessionId};
use proto::ApprovalUse;
use serde_json::json;

fn grant(keys: serde_json::Value) -> Grant {
    serde_json::from_value(keys).unwrap()
}

fn always() -> Grant {
    grant(json!({"tool": "write_file", "paths": ["/srv"], "approve": "always"}))
}

fn table() -> ApprovalTable {
    ApprovalTable::new(&ApprovalSettings {
        expire_ms: 60_000,
        max_pending: 4,
    })
}

fn request(turn: u64, arguments: &str) -> ToolRequest {
    ToolRequest {
        session: SessionId::new("main").unwrap(),
        turn,
        call: CallId(1),
        tool: "write_file".into(),
        arguments: arguments.into(),
        context: Labels::PUBLIC,
        counts_for: None,
        approval: None,
    }
}

fn untrusted(mut r: ToolRequest) -> ToolRequest {
    r.context = Labels::new(bxcore::DataClass::Public, true);
    r
}

fn with(mut r: ToolRequest, id: &ApprovalId, for_turn: bool) -> ToolRequest {
    r.approval = Some(ApprovalUse {
        id: id.clone(),
        for_turn,
    });
    r
}

struct Bed {
    table: ApprovalTable,
    counters: CallCounters,
    now: Instant,
}

impl Bed {
    fn new() -> Bed {
        Bed {
            table: table(),
            counters: CallCounters::new(),
            now: Instant::now(),
        }
    }
    fn admit(&mut self, r: &ToolRequest, g: &Grant) -> Admission {
        let arguments = crate::policy::parse_arguments(&r.arguments).unwrap();
        admit(
            r,
            &arguments,
            g,
            &mut self.table,
            &mut self.counters,
            self.now,
        )
    }
    fn counted(&self, turn: u64) -> u32 {
        self.counters
            .count(&SessionId::new("main").unwrap(), turn, "write_file")
    }
}

#[track_caller]
fn asked(a: Admission) -> ApprovalAsk {
    match a {
        Admission::Ask(ask) => ask,
        other => panic!("expected an ask, got {other:?}"),
    }
}

#[test]
fn the_reason_names_the_tool_and_the_key() {
    let r = request(1, "{}");
    assert_eq!(
        ask_reason(&always(), &r).as_deref(),
        Some("write_file asks the owner first (approve = \"always\")")
    );
    let ask = grant(json!({"tool": "write_file", "paths": ["/srv"], "when_untrusted": "ask"}));
    assert_eq!(ask_reason(&ask, &r), None);
    assert_eq!(
        ask_reason(&ask, &untrusted(r.clone())).as_deref(),
        Some("write_file after untrusted text entered the session (when_untrusted = \"ask\")")
    );
    let via_approve =
        grant(json!({"tool": "write_file", "paths": ["/srv"], "approve": "when_untrusted"}));
    assert_eq!(ask_reason(&via_approve, &r), None);
    assert!(ask_reason(&via_approve, &untrusted(r.clone())).is_some());
    let plain = grant(json!({"tool": "write_file", "paths": ["/srv"]}));
    assert_eq!(ask_reason(&plain, &untrusted(r)), None);
}

#[test]
fn an_ask_carries_the_whole_call_and_counts_nothing() {
    let mut bed = Bed::new();
    let r = request(1, r#"{"path":"/srv/a","content":"hi"}"#);
    let ask = asked(bed.admit(&r, &always()));
    assert!(ask.id.as_str().starts_with("ap-"), "{}", ask.id);
    assert_eq!(ask.tool, "write_file");
    // The value the tool checked, written out (keys in order), not the text as sent.
    assert_eq!(ask.arguments, r#"{"content":"hi","path":"/srv/a"}"#);
    assert_eq!(ask.session, r.session);
    assert_eq!(ask.context, r.context);
    assert_eq!(ask.expires_in_ms, 60_000);
    assert_eq!(bed.counted(1), 0);
    assert_eq!(bed.table.pending(), 1);
}

#[test]
fn the_approval_runs_the_call_once_and_a_replay_is_refused() {
    let mut bed = Bed::new();
    let r = request(1, r#"{"path":"/srv/a","content":"hi"}"#);
    let ask = asked(bed.admit(&r, &always()));
    let approved = with(r.clone(), &ask.id, false);
    assert_eq!(
        bed.admit(&approved, &always()),
        Admission::Run {
            approval: Some((ask.id.clone(), ApprovalScope::Call))
        }
    );
    assert_eq!(bed.counted(1), 1);
    match bed.admit(&approved, &always()) {
        Admission::Deny {
            reason: DenyReason::ApprovalRefused,
            detail,
            approval,
        } => {
            assert!(detail.contains("used already"), "{detail}");
            assert_eq!(approval, Some(ask.id));
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(bed.counted(1), 1);
    // Without it, the same call asks again.
    asked(bed.admit(&r, &always()));
}

#[test]
fn an_approval_on_a_call_that_needs_none_is_checked_all_the_same() {
    let mut bed = Bed::new();
    let plain = grant(json!({"tool": "write_file", "paths": ["/srv"]}));
    let forged = ApprovalId::new("ap-zzzzzzzzzzzz").unwrap();
    let r = with(request(1, "{}"), &forged, false);
    assert!(matches!(
        bed.admit(&r, &plain),
        Admission::Deny {
            reason: DenyReason::ApprovalRefused,
            ..
        }
    ));
    assert_eq!(bed.counted(1), 0);
    assert_eq!(
        bed.admit(&request(1, "{}"), &plain),
        Admission::Run { approval: None }
    );
}

#[test]
fn for_turn_lets_the_tool_run_for_the_rest_of_that_turn_only() {
    let mut bed = Bed::new();
    let r = request(1, r#"{"path":"/srv/a","content":"hi"}"#);
    let ask = asked(bed.admit(&r, &always()));
    assert_eq!(
        bed.admit(&with(r.clone(), &ask.id, true), &always()),
        Admission::Run {
            approval: Some((ask.id.clone(), ApprovalScope::Turn))
        }
    );
    // The same call, and another of the same tool, in the same turn: no question.
    for arguments in [r.arguments.as_str(), r#"{"path":"/srv/b","content":"x"}"#] {
        assert_eq!(
            bed.admit(&request(1, arguments), &always()),
            Admission::Run {
                approval: Some((ask.id.clone(), ApprovalScope::Allowance))
            }
        );
    }
    assert_eq!(bed.counted(1), 3);
    // The next turn asks again.
    asked(bed.admit(&request(2, &r.arguments), &always()));
}

#[test]
fn when_untrusted_ask_runs_a_trusted_call_and_asks_about_an_untrusted_one() {
    let mut bed = Bed::new();
    let ask = grant(json!({"tool": "write_file", "paths": ["/srv"], "when_untrusted": "ask"}));
    assert_eq!(
        bed.admit(&request(1, "{}"), &ask),
        Admission::Run { approval: None }
    );
    let question = asked(bed.admit(&untrusted(request(1, "{}")), &ask));
    assert!(question.reason.contains("untrusted"), "{}", question.reason);
}

#[test]
fn asks_do_not_use_up_the_rate_limit_and_it_still_holds() {
    let mut bed = Bed::new();
    let limited = grant(json!({
        "tool": "write_file", "paths": ["/srv"], "approve": "always", "max_calls_per_turn": 1
    }));
    let r = request(1, "{}");
    let first = asked(bed.admit(&r, &limited));
    let second = asked(bed.admit(&r, &limited));
    assert_eq!(bed.counted(1), 0);
    assert!(matches!(
        bed.admit(&with(r.clone(), &first.id, false), &limited),
        Admission::Run { .. }
    ));
    // The limit is checked before the approval is used: the second stays unused.
    assert!(matches!(
        bed.admit(&with(r.clone(), &second.id, false), &limited),
        Admission::Deny {
            reason: DenyReason::RateLimit,
            ..
        }
    ));
    assert_eq!(bed.table.pending(), 1);
}

#[test]
fn past_max_pending_a_call_that_needs_an_approval_is_denied_naming_the_key() {
    let mut bed = Bed::new();
    for n in 0..4 {
        asked(bed.admit(&request(1, &format!("{{\"n\":{n}}}")), &always()));
    }
    match bed.admit(&request(1, "{}"), &always()) {
        Admission::Deny {
            reason: DenyReason::NotApproved,
            detail,
            approval: None,
        } => assert!(detail.contains("approvals.max_pending"), "{detail}"),
        other => panic!("{other:?}"),
    }
    // A call that needs none still runs.
    let plain = grant(json!({"tool": "write_file", "paths": ["/srv"]}));
    assert!(matches!(
        bed.admit(&request(1, "{}"), &plain),
        Admission::Run { .. }
    ));
}
