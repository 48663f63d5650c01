//! The approval keys: a grant's `approve` and `when_untrusted = "ask"`, and `[approvals]`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const WRITE: &str = "[[grants]]\ntool = \"write_file\"\npaths = [\"/srv\"]\n";

#[test]
fn approvals_default_to_never_15_minutes_and_64_pending() {
    let cfg = valid(WRITE);
    assert_eq!(cfg.grants[0].approve, Approve::Never);
    assert_eq!(cfg.grants[0].when_untrusted, WhenUntrusted::Deny);
    assert_eq!(cfg.approvals.expire_ms, 900_000);
    assert_eq!(cfg.approvals.max_pending, 64);
    let cfg = valid("[approvals]\nexpire_ms = 5\nmax_pending = 2\n");
    assert_eq!(
        cfg.approvals,
        ApprovalSettings {
            expire_ms: 5,
            max_pending: 2
        }
    );
}

#[test]
fn approve_and_when_untrusted_ask_parse() {
    let g = &valid(&format!("{WRITE}approve = \"always\"\n")).grants[0];
    assert_eq!(g.approve, Approve::Always);
    // always asks in a trusted context; the tool's default still denies in an untrusted one.
    assert_eq!(g.when_untrusted, WhenUntrusted::Deny);
    let g = &valid(&format!("{WRITE}when_untrusted = \"ask\"\n")).grants[0];
    assert_eq!(
        (g.approve, g.when_untrusted),
        (Approve::Never, WhenUntrusted::Ask)
    );
}

#[test]
fn approve_when_untrusted_sets_ask_over_the_tools_default() {
    for extra in ["", "when_untrusted = \"ask\"\n"] {
        let g = &valid(&format!("{WRITE}approve = \"when_untrusted\"\n{extra}")).grants[0];
        assert_eq!(g.approve, Approve::WhenUntrusted);
        assert_eq!(g.when_untrusted, WhenUntrusted::Ask, "{extra}");
    }
}

#[test]
fn approve_when_untrusted_beside_allow_or_deny_is_refused_saying_why() {
    for value in ["allow", "deny"] {
        let found = invalid(&format!(
            "{WRITE}approve = \"when_untrusted\"\nwhen_untrusted = \"{value}\"\n"
        ));
        assert_eq!(keys(&found), ["grants[0].when_untrusted"], "{value}");
        let message = &found[0].message;
        assert!(message.contains("contradict"), "{message}");
        assert!(message.contains(&format!("\"{value}\"")), "{message}");
    }
}

#[test]
fn a_bad_approve_value_names_the_key_and_the_values() {
    let f = file(&format!("{WRITE}approve = \"sometimes\"\n"));
    let found = problems(load_from::<Config>(f.path(), ENV_PREFIX, Vec::new()).unwrap_err());
    assert_eq!(keys(&found), ["grants[0].approve"]);
    assert!(found[0].message.contains("when_untrusted"), "{}", found[0]);
}

#[test]
fn approvals_limits_must_be_at_least_1() {
    let found = invalid("[approvals]\nexpire_ms = 0\nmax_pending = 0\n");
    assert_eq!(
        keys(&found),
        ["approvals.expire_ms", "approvals.max_pending"]
    );
}

#[test]
fn the_resolved_toml_of_an_approving_grant_loads_back() {
    let text = format!("{WRITE}approve = \"when_untrusted\"\n");
    let f = file(&text);
    let bxconfig::CheckOutcome::Valid(resolved) =
        bxconfig::check_config::<Config>(&Loader::new(f.path(), ENV_PREFIX))
    else {
        panic!("should be valid");
    };
    assert!(
        resolved.contains("approve = \"when_untrusted\""),
        "{resolved}"
    );
    assert!(resolved.contains("when_untrusted = \"ask\""), "{resolved}");
    assert!(resolved.contains("[approvals]"), "{resolved}");
    let again = file(&resolved);
    let back: Config = Loader::new(again.path(), ENV_PREFIX).load_valid().unwrap();
    assert_eq!(back, valid(&text));
}

#[test]
fn the_shipped_config_keeps_approvals_at_their_defaults() {
    let cfg: Config = Loader::new(SHIPPED, ENV_PREFIX).load_valid().unwrap();
    assert_eq!(cfg.approvals, ApprovalSettings::default());
    assert!(cfg.grants.iter().all(|g| g.approve == Approve::Never));
}
