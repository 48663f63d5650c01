//! Unit tests of the approval table: ids, binding, single use, expiry, the bounds.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use bxcore::{CallId, Labels};

const EXPIRE_MS: u64 = 1_000;

fn table(max_pending: usize) -> ApprovalTable {
    ApprovalTable::new(&ApprovalSettings {
        expire_ms: EXPIRE_MS,
        max_pending,
    })
}

fn request(session: &str, tool: &str, arguments: &str) -> ToolRequest {
    ToolRequest {
        session: SessionId::new(session).unwrap(),
        turn: 1,
        call: CallId(1),
        tool: tool.to_string(),
        arguments: arguments.to_string(),
        context: Labels::PUBLIC,
        counts_for: None,
        approval: None,
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

#[test]
fn ids_are_ap_and_twelve_of_a_z_0_9_and_differ() {
    let mut t = table(64);
    let now = Instant::now();
    let mut seen = std::collections::HashSet::new();
    // A session each: one session may have only MAX_PENDING_PER_SESSION outstanding.
    for n in 0..64 {
        let r = request(&format!("s{n}"), "write_file", "{}");
        let id = t.mint(&r, now).unwrap();
        let random = id.as_str().strip_prefix("ap-").unwrap();
        assert_eq!(random.len(), APPROVAL_ID_RANDOM_CHARS, "{id}");
        assert!(
            random
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
            "{id}"
        );
        assert!(seen.insert(id.clone()), "{id} minted twice");
    }
}

#[test]
fn an_approval_is_used_once_for_its_own_call() {
    let mut t = table(64);
    let now = Instant::now();
    let r = request("main", "write_file", r#"{"path":"/a","content":"x"}"#);
    let id = t.mint(&r, now).unwrap();
    assert_eq!(t.pending(), 1);
    t.consume(&id, &r, now).unwrap();
    assert_eq!(t.pending(), 0);
    assert_eq!(t.consume(&id, &r, now), Err(Refusal::Used(id.clone())));
    let text = Refusal::Used(id.clone()).to_string();
    assert!(text.contains("used already"), "{text}");
}

#[test]
fn an_approval_for_another_call_is_refused_saying_which_binding_failed_and_stays_for_its_own() {
    let mut t = table(64);
    let now = Instant::now();
    let r = request("main", "write_file", r#"{"path":"/a","content":"SECRET"}"#);
    let id = t.mint(&r, now).unwrap();

    let other_args = request("main", "write_file", r#"{"path":"/a","content":"other"}"#);
    let refusal = t.consume(&id, &other_args, now).unwrap_err();
    assert_eq!(refusal, Refusal::OtherArguments(id.clone()));
    let text = refusal.to_string();
    assert!(text.contains("other arguments"), "{text}");
    assert!(
        !text.contains("SECRET") && !text.contains("other\""),
        "{text}"
    );

    let other_session = request("sub-1", "write_file", &r.arguments);
    let refusal = t.consume(&id, &other_session, now).unwrap_err();
    assert!(
        matches!(refusal, Refusal::OtherSession { .. }),
        "{refusal:?}"
    );
    assert!(refusal.to_string().contains("\"sub-1\""), "{refusal}");

    let other_tool = request("main", "echo", &r.arguments);
    let refusal = t.consume(&id, &other_tool, now).unwrap_err();
    assert!(matches!(refusal, Refusal::OtherTool { .. }), "{refusal:?}");
    assert!(refusal.to_string().contains("\"echo\""), "{refusal}");

    // Arguments that differ by one space are other arguments: the digest is of the text.
    let spaced = request("main", "write_file", r#"{"path": "/a","content":"SECRET"}"#);
    assert_eq!(
        t.consume(&id, &spaced, now),
        Err(Refusal::OtherArguments(id.clone()))
    );
    // None of them used it up.
    t.consume(&id, &r, now).unwrap();
}

#[test]
fn an_id_never_minted_is_unknown() {
    let mut t = table(64);
    let forged = ApprovalId::new("ap-aaaaaaaaaaaa").unwrap();
    let refusal = t
        .consume(&forged, &request("main", "echo", "{}"), Instant::now())
        .unwrap_err();
    assert_eq!(refusal, Refusal::Unknown(forged));
    assert!(refusal.to_string().contains("restarted"), "{refusal}");
}

#[test]
fn an_approval_expires_after_expire_ms_and_is_forgotten() {
    let mut t = table(64);
    let t0 = Instant::now();
    let r = request("main", "write_file", "{}");
    let late = t.mint(&r, t0).unwrap();
    let refusal = t.consume(&late, &r, t0 + ms(EXPIRE_MS)).unwrap_err();
    assert_eq!(
        refusal,
        Refusal::Expired {
            id: late.clone(),
            expire_ms: EXPIRE_MS
        }
    );
    assert!(
        refusal.to_string().contains("approvals.expire_ms"),
        "{refusal}"
    );
    // Forgotten: asked again it is unknown, and it holds no place.
    assert_eq!(
        t.consume(&late, &r, t0 + ms(EXPIRE_MS)),
        Err(Refusal::Unknown(late))
    );
    assert_eq!(t.pending(), 0);

    let in_time = t.mint(&r, t0).unwrap();
    t.consume(&in_time, &r, t0 + ms(EXPIRE_MS - 1)).unwrap();
}

#[test]
fn max_pending_bounds_the_outstanding_approvals_until_used_or_expired() {
    let mut t = table(2);
    let t0 = Instant::now();
    let r = request("main", "write_file", "{}");
    let first = t.mint(&r, t0).unwrap();
    t.mint(&r, t0).unwrap();
    let full = t.mint(&r, t0).unwrap_err();
    assert_eq!(full, MintError::Full { max_pending: 2 });
    assert!(full.to_string().contains("approvals.max_pending"), "{full}");
    // Using one frees its place; expiry frees the rest.
    t.consume(&first, &r, t0).unwrap();
    t.mint(&r, t0).unwrap();
    assert!(t.mint(&r, t0).is_err());
    t.mint(&r, t0 + ms(EXPIRE_MS)).unwrap();
    assert_eq!(t.pending(), 1);
}

#[test]
fn one_session_cannot_take_every_place_from_the_others() {
    let mut t = table(64);
    let t0 = Instant::now();
    for n in 0..MAX_PENDING_PER_SESSION {
        let r = request("loud", "write_file", &format!("{{\"n\":{n}}}"));
        t.mint(&r, t0).unwrap();
    }
    let one_more = request("loud", "write_file", "{\"n\":-1}");
    let refused = t.mint(&one_more, t0).unwrap_err();
    assert!(
        matches!(&refused, MintError::SessionFull { session, max } if session == "loud" && *max == MAX_PENDING_PER_SESSION),
        "{refused:?}"
    );
    assert!(refused.to_string().contains("\"loud\""), "{refused}");
    // Another session is still asked about.
    t.mint(&request("quiet", "write_file", "{}"), t0).unwrap();
    // The loud one's expire and free its places.
    t.mint(&one_more, t0 + ms(EXPIRE_MS)).unwrap();
}

#[test]
fn a_turn_allowance_holds_for_its_session_turn_and_tool_until_it_expires() {
    let mut t = table(64);
    let t0 = Instant::now();
    let main = SessionId::new("main").unwrap();
    let other = SessionId::new("other").unwrap();
    let id = ApprovalId::new("ap-000000000001").unwrap();
    t.allow_turn(&main, 3, "write_file", id.clone(), t0);
    assert_eq!(t.allowance(&main, 3, "write_file", t0), Some(id.clone()));
    assert_eq!(t.allowance(&main, 4, "write_file", t0), None);
    assert_eq!(t.allowance(&main, 3, "echo", t0), None);
    assert_eq!(t.allowance(&other, 3, "write_file", t0), None);
    assert_eq!(
        t.allowance(&main, 3, "write_file", t0 + ms(EXPIRE_MS - 1)),
        Some(id)
    );
    assert_eq!(
        t.allowance(&main, 3, "write_file", t0 + ms(EXPIRE_MS)),
        None
    );
    assert_eq!(t.allowances(), 0);
}

#[test]
fn turn_allowances_are_bounded_forgetting_the_oldest() {
    let mut t = table(64);
    let t0 = Instant::now();
    let main = SessionId::new("main").unwrap();
    let id = ApprovalId::new("ap-000000000001").unwrap();
    for turn in 0..=MAX_TURN_ALLOWANCES as u64 {
        let granted = t0 + Duration::from_micros(turn);
        t.allow_turn(&main, turn, "write_file", id.clone(), granted);
    }
    assert_eq!(t.allowances(), MAX_TURN_ALLOWANCES);
    assert_eq!(t.allowance(&main, 0, "write_file", t0), None);
    assert_eq!(
        t.allowance(&main, MAX_TURN_ALLOWANCES as u64, "write_file", t0),
        Some(id)
    );
    assert_eq!(MAX_TURN_ALLOWANCES, 4_096);
}

#[test]
fn used_approvals_are_remembered_within_a_bound() {
    let mut t = table(MAX_REMEMBERED_USED + 1);
    let t0 = Instant::now();
    // A session each: one session may have only MAX_PENDING_PER_SESSION outstanding.
    let of = |n: usize| request(&format!("s{n}"), "echo", "{}");
    let r = of(0);
    let mut ids = Vec::new();
    for n in 0..=MAX_REMEMBERED_USED {
        let id = t
            .mint(&of(n), t0 + Duration::from_micros(n as u64))
            .unwrap();
        ids.push(id);
    }
    for (n, id) in ids.iter().enumerate() {
        t.consume(id, &of(n), t0 + ms(1)).unwrap();
    }
    // The oldest was forgotten: still refused, as unknown; the newest as used.
    assert_eq!(
        t.consume(&ids[0], &r, t0 + ms(1)),
        Err(Refusal::Unknown(ids[0].clone()))
    );
    let last = ids.last().unwrap();
    assert_eq!(
        t.consume(last, &r, t0 + ms(1)),
        Err(Refusal::Used(last.clone()))
    );
}
