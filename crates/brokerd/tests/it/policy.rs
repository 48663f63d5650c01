//! `policy::decide`: the order of the checks, every reason it gives with its detail, session
//! globs, egress, untrusted contexts, per-turn rate limits, and the bounded counters.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use brokerd::config::{Grant, WhenUntrusted};
use brokerd::policy::{Admission, ApprovalTable, CallCounters, Decision, Grants, admit, decide};
use brokerd::{ToolSet, ToolSetError};
use bxcore::{DataClass, DenyReason, denial_message};
use common::{Fixed, grant, request, sid, with_context};
use proto::ToolRequest;
use serde_json::json;

fn decide_with(grants: &[Grant], request: &ToolRequest, known: bool) -> Decision {
    let grants = Grants::new(grants).unwrap();
    decide(request, &grants, known, &CallCounters::new())
}

/// `decide`, then for an allowed call the approval step as the broker takes it, which counts
/// the call (none of these grants asks the owner).
fn decide_and_count(
    request: &ToolRequest,
    grants: &Grants,
    known: bool,
    counters: &mut CallCounters,
) -> Decision {
    let decision = decide(request, grants, known, counters);
    if let Decision::Allow { grant, arguments } = &decision {
        let mut table = ApprovalTable::new(&Default::default());
        let admission = admit(
            request,
            arguments,
            grant,
            &mut table,
            counters,
            std::time::Instant::now(),
        );
        assert_eq!(admission, Admission::Run { approval: None });
    }
    decision
}

#[track_caller]
fn denied(decision: &Decision) -> (DenyReason, &str) {
    match decision {
        Decision::Deny { reason, detail } => (*reason, detail.as_str()),
        Decision::Allow { grant, .. } => panic!("allowed under {grant:?}"),
    }
}

#[track_caller]
fn allowed(decision: &Decision) -> &Grant {
    match decision {
        Decision::Allow { grant, .. } => grant,
        Decision::Deny { reason, detail } => panic!("denied {reason:?}: {detail}"),
    }
}

#[test]
fn policy_unknown_tool_is_denied_first_naming_it() {
    let d = decide_with(
        &[grant("echo", &["*"])],
        &request("main", 1, "nope", "[1]"),
        false,
    );
    let (reason, detail) = denied(&d);
    assert_eq!(reason, DenyReason::UnknownTool);
    assert!(detail.contains("\"nope\""), "{detail}");
    let text = denial_message(reason, Some(detail));
    assert!(
        text.starts_with("Denied: there is no tool of that name: "),
        "{text}"
    );
}

#[test]
fn policy_loopd_tools_are_unknown_to_brokerd_and_never_join_a_tool_set() {
    // The one list both daemons use; read_output was missing from brokerd's own copy.
    assert_eq!(
        proto::LOOPD_TOOLS,
        ["find_tool", "call_tool", "subagent", "read_output"]
    );
    for tool in proto::LOOPD_TOOLS {
        let d = decide_with(
            &[grant("echo", &["*"])],
            &request("main", 1, tool, "{}"),
            false,
        );
        let (reason, detail) = denied(&d);
        assert_eq!(reason, DenyReason::UnknownTool, "{tool}");
        assert!(detail.contains("answered by loopd"), "{detail}");
        let mut set = ToolSet::new();
        assert_eq!(
            set.insert(Fixed::text(tool, "x")),
            Err(ToolSetError::Reserved(tool.to_string()))
        );
    }
}

#[test]
fn tool_set_refuses_duplicate_names() {
    let mut set = ToolSet::with_builtins().unwrap();
    assert_eq!(
        set.insert(Fixed::text("echo", "x")),
        Err(ToolSetError::Duplicate("echo".to_string()))
    );
}

#[test]
fn policy_no_grant_for_the_tool_or_the_session() {
    let grants = [grant("clock", &["*"]), grant("echo", &["main"])];
    for r in [
        request("main", 1, "write_file", "{}"),
        request("other", 1, "echo", "{}"),
    ] {
        let d = decide_with(&grants, &r, true);
        let (reason, detail) = denied(&d);
        assert_eq!(reason, DenyReason::NoGrant);
        assert!(detail.contains(r.session.as_str()), "{detail}");
        assert!(detail.contains(&r.tool), "{detail}");
    }
    let d = decide_with(&[], &request("main", 1, "echo", "{}"), true);
    assert_eq!(denied(&d).0, DenyReason::NoGrant);
}

#[test]
fn policy_session_globs_star_prefix_and_exact() {
    let cases = [
        ("*", "main", true),
        ("*", "sub-7", true),
        ("sub-*", "sub-7", true),
        ("sub-*", "sub-", true),
        ("sub-*", "main", false),
        ("sub-*", "xsub-7", false),
        ("heartbeat", "heartbeat", true),
        ("heartbeat", "heartbeat-2", false),
        ("heartbeat", "Heartbeat", false),
    ];
    for (glob, session, expect) in cases {
        let d = decide_with(
            &[grant("echo", &[glob])],
            &request(session, 1, "echo", "{}"),
            true,
        );
        assert_eq!(
            matches!(d, Decision::Allow { .. }),
            expect,
            "{glob} vs {session}: {d:?}"
        );
    }
    let many = grant("echo", &["main", "sub-*"]);
    let d = decide_with(&[many], &request("sub-1", 1, "echo", "{}"), true);
    allowed(&d);
}

#[test]
fn policy_egress_denies_a_context_above_max_context_class() {
    let mut g = grant("echo", &["*"]);
    g.max_context_class = DataClass::Public;
    let r = with_context(request("main", 1, "echo", "{}"), DataClass::Private, false);
    let d = decide_with(std::slice::from_ref(&g), &r, true);
    let (reason, detail) = denied(&d);
    assert_eq!(reason, DenyReason::Egress);
    assert!(
        detail.contains("private") && detail.contains("public"),
        "{detail}"
    );
    // At the limit is fine.
    let r = with_context(request("main", 1, "echo", "{}"), DataClass::Public, false);
    allowed(&decide_with(&[g], &r, true));
}

#[test]
fn policy_http_fetch_defaults_to_public_context_only() {
    let mut g = grant("http_fetch", &["*"]);
    g.hosts = vec!["example.org".into()];
    let r = with_context(
        request("main", 1, "http_fetch", "{}"),
        DataClass::Internal,
        false,
    );
    assert_eq!(denied(&decide_with(&[g], &r, true)).0, DenyReason::Egress);
}

#[test]
fn policy_untrusted_context_against_when_untrusted() {
    let mut deny = grant("echo", &["*"]);
    deny.when_untrusted = WhenUntrusted::Deny;
    let mut allow = grant("echo", &["*"]);
    allow.when_untrusted = WhenUntrusted::Allow;
    let untrusted = with_context(request("main", 1, "echo", "{}"), DataClass::Public, true);
    let trusted = request("main", 1, "echo", "{}");
    let d = decide_with(std::slice::from_ref(&deny), &untrusted, true);
    let (reason, detail) = denied(&d);
    assert_eq!(reason, DenyReason::UntrustedContext);
    assert!(detail.contains("when_untrusted = deny"), "{detail}");
    allowed(&decide_with(std::slice::from_ref(&deny), &trusted, true));
    allowed(&decide_with(&[allow], &untrusted, true));
    // write_file's default is deny.
    let mut w = grant("write_file", &["*"]);
    w.paths = vec!["/tmp".into()];
    let r = with_context(
        request("main", 1, "write_file", "{}"),
        DataClass::Public,
        true,
    );
    assert_eq!(
        denied(&decide_with(&[w], &r, true)).0,
        DenyReason::UntrustedContext
    );
}

#[test]
fn policy_rate_limit_per_turn_and_a_new_turn_resets_it() {
    let mut g = grant("echo", &["*"]);
    g.max_calls_per_turn = Some(2);
    let grants = Grants::new(&[g]).unwrap();
    let mut counters = CallCounters::new();
    let mut call = |session: &str, turn: u64, tool: &str| {
        decide_and_count(
            &request(session, turn, tool, "{}"),
            &grants,
            true,
            &mut counters,
        )
    };
    allowed(&call("main", 1, "echo"));
    allowed(&call("main", 1, "echo"));
    let third = call("main", 1, "echo");
    let (reason, detail) = denied(&third);
    assert_eq!(reason, DenyReason::RateLimit);
    assert!(
        detail.contains("2 times per turn") && detail.contains("turn 1"),
        "{detail}"
    );
    // Another session has its own count; a tool without a limit is not limited.
    allowed(&call("other", 1, "echo"));
    // A new turn starts afresh; going back to an older turn number does not.
    allowed(&call("main", 2, "echo"));
    allowed(&call("main", 2, "echo"));
    assert_eq!(denied(&call("main", 2, "echo")).0, DenyReason::RateLimit);
    assert_eq!(denied(&call("main", 1, "echo")).0, DenyReason::RateLimit);
    allowed(&call("main", 3, "echo"));
}

#[test]
fn policy_denied_calls_do_not_count_against_the_rate_limit() {
    let mut g = grant("echo", &["*"]);
    g.max_calls_per_turn = Some(1);
    let grants = Grants::new(&[g]).unwrap();
    let mut counters = CallCounters::new();
    let bad = decide_and_count(
        &request("main", 1, "echo", "[]"),
        &grants,
        true,
        &mut counters,
    );
    assert_eq!(denied(&bad).0, DenyReason::InvalidArguments);
    allowed(&decide_and_count(
        &request("main", 1, "echo", "{}"),
        &grants,
        true,
        &mut counters,
    ));
    assert_eq!(counters.count(&sid("main"), 1, "echo"), 1);
}

#[test]
fn policy_invalid_arguments_say_why_without_quoting_them() {
    let g = [grant("echo", &["*"])];
    for (text, why) in [
        ("[\"SECRET\"]", "not an array"),
        ("\"SECRET\"", "not a string"),
        ("{\"text\": \"SECRET\"", "not valid JSON"),
        ("SECRET", "not valid JSON"),
        ("null", "not null"),
    ] {
        let d = decide_with(&g, &request("main", 1, "echo", text), true);
        let (reason, detail) = denied(&d);
        assert_eq!(reason, DenyReason::InvalidArguments, "{text}");
        assert!(detail.contains(why), "{text}: {detail}");
        assert!(!detail.contains("SECRET"), "{detail}");
    }
}

#[test]
fn policy_blank_arguments_are_an_empty_object() {
    for text in ["", "  "] {
        match decide_with(
            &[grant("clock", &["*"])],
            &request("main", 1, "clock", text),
            true,
        ) {
            Decision::Allow { arguments, .. } => assert_eq!(arguments, json!({})),
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn policy_checks_in_order_and_reports_the_first_failing_one() {
    let mut g = grant("echo", &["*"]);
    g.max_context_class = DataClass::Public;
    g.when_untrusted = WhenUntrusted::Deny;
    g.max_calls_per_turn = Some(1);
    let grants = Grants::new(std::slice::from_ref(&g)).unwrap();
    let mut counters = CallCounters::new();
    allowed(&decide_and_count(
        &request("main", 1, "echo", "{}"),
        &grants,
        true,
        &mut counters,
    ));
    let everything_wrong = with_context(request("main", 1, "echo", "[]"), DataClass::Secret, true);
    let reason = |r: &ToolRequest, known: bool, counters: &mut CallCounters| {
        denied(&decide_and_count(r, &grants, known, counters)).0
    };
    assert_eq!(
        reason(&everything_wrong, false, &mut counters),
        DenyReason::UnknownTool
    );
    let mut other_session = everything_wrong.clone();
    other_session.tool = "clock".into();
    assert_eq!(
        reason(&other_session, true, &mut counters),
        DenyReason::NoGrant
    );
    assert_eq!(
        reason(&everything_wrong, true, &mut counters),
        DenyReason::Egress
    );
    let untrusted = with_context(request("main", 1, "echo", "[]"), DataClass::Public, true);
    assert_eq!(
        reason(&untrusted, true, &mut counters),
        DenyReason::UntrustedContext
    );
    let limited = request("main", 1, "echo", "[]");
    assert_eq!(reason(&limited, true, &mut counters), DenyReason::RateLimit);
    let fresh_turn = request("main", 2, "echo", "[]");
    assert_eq!(
        reason(&fresh_turn, true, &mut counters),
        DenyReason::InvalidArguments
    );
}

#[test]
fn policy_tries_every_matching_grant_and_reports_the_first_ones_reason() {
    let mut strict = grant("echo", &["*"]);
    strict.max_context_class = DataClass::Public;
    let mut main_only = grant("echo", &["main"]);
    main_only.max_context_class = DataClass::Secret;
    main_only.result_class = DataClass::Internal;
    let grants = [strict, main_only];
    let private = |s: &str| with_context(request(s, 1, "echo", "{}"), DataClass::Private, false);
    let g = allowed(&decide_with(&grants, &private("main"), true)).clone();
    assert_eq!(g.result_class, DataClass::Internal);
    // For another session only the strict grant matches.
    assert_eq!(
        denied(&decide_with(&grants, &private("sub-1"), true)).0,
        DenyReason::Egress
    );
    // When no matching grant is usable, the first one's reason is given.
    let mut untrusting = grant("echo", &["*"]);
    untrusting.when_untrusted = WhenUntrusted::Deny;
    let mut egress = grant("echo", &["*"]);
    egress.max_context_class = DataClass::Public;
    let r = with_context(request("main", 1, "echo", "{}"), DataClass::Private, true);
    let d = decide_with(&[untrusting.clone(), egress.clone()], &r, true);
    assert_eq!(denied(&d).0, DenyReason::UntrustedContext);
    let d = decide_with(&[egress, untrusting], &r, true);
    assert_eq!(denied(&d).0, DenyReason::Egress);
}

#[test]
fn counters_track_a_bounded_number_of_sessions() {
    let mut counters = CallCounters::with_max_sessions(2);
    counters.record(&sid("a"), 1, "echo");
    counters.record(&sid("b"), 1, "echo");
    counters.record(&sid("a"), 1, "echo");
    counters.record(&sid("c"), 1, "echo");
    assert_eq!(counters.tracked_sessions(), 2);
    // b was used least recently, so it is the one forgotten.
    assert_eq!(counters.count(&sid("b"), 1, "echo"), 0);
    assert_eq!(counters.count(&sid("a"), 1, "echo"), 2);
    assert_eq!(counters.count(&sid("c"), 1, "echo"), 1);
    assert_eq!(brokerd::policy::MAX_TRACKED_SESSIONS, 4_096);
    assert_eq!(CallCounters::new().tracked_sessions(), 0);
}

#[test]
fn policy_subagents_calls_count_against_their_top_level_turn() {
    // Three children each calling a `max_calls_per_turn = 1` tool made four calls in one
    // user turn; they now share the parent's count.
    let mut g = grant("echo", &["*"]);
    g.max_calls_per_turn = Some(1);
    let grants = Grants::new(std::slice::from_ref(&g)).unwrap();
    let mut counters = CallCounters::new();
    let child = |n: u64| {
        let mut r = request(&format!("sub-main-{n}"), 1, "echo", "{}");
        r.counts_for = Some(proto::TurnRef {
            session: sid("main"),
            turn: 4,
        });
        r
    };
    allowed(&decide_and_count(
        &request("main", 4, "echo", "{}"),
        &grants,
        true,
        &mut counters,
    ));
    for n in 1..=3 {
        let decision = decide_and_count(&child(n), &grants, true, &mut counters);
        let (reason, detail) = denied(&decision);
        assert_eq!(reason, DenyReason::RateLimit, "child {n}");
        assert!(detail.contains("subagents"), "{detail}");
    }
    // The next user turn starts afresh, for the parent and its children alike.
    let mut next = child(4);
    next.counts_for = Some(proto::TurnRef {
        session: sid("main"),
        turn: 5,
    });
    allowed(&decide_and_count(&next, &grants, true, &mut counters));
}
