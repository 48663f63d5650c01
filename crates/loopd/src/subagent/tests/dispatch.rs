#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `subagent` is answered by loopd (seed M6a-02): both routes give `Dispatch::Subagent`, bad
//! arguments are invalid-arguments, and child ids are `sub-<parent>-<n>` or refused.

use crate::subagent::{SUBAGENT, child_id, depth, registry_for, schema};
use crate::tools::{Dispatch, Entry, Registry, dispatch};
use bxcore::{CallId, DenyReason, SessionId, denial_message};

fn registry() -> Registry {
    Registry::new(vec![Entry {
        schema: schema(),
        core: false,
    }])
}

fn invalid(detail: &str) -> Dispatch {
    Dispatch::Local(denial_message(DenyReason::InvalidArguments, Some(detail)))
}

#[test]
fn call_tool_and_a_direct_call_of_subagent_are_subagent_not_port() {
    let r = registry();
    let expected = Dispatch::Subagent {
        task: "sum it".into(),
    };
    assert_eq!(
        dispatch(
            &r,
            "call_tool",
            r#"{"name":"subagent","arguments":{"task":"sum it"}}"#
        ),
        expected
    );
    assert_eq!(dispatch(&r, SUBAGENT, r#"{"task":"sum it"}"#), expected);
}

#[test]
fn bad_subagent_arguments_are_invalid_arguments_on_both_routes() {
    let r = registry();
    let cases = [
        (r#"{"task":"x","extra":1}"#, "unknown field: extra"),
        ("{}", "task is required"),
        (r#"{"task":7}"#, "task must be a string"),
        ("[1]", "arguments must be a JSON object"),
        ("not json", "arguments must be a JSON object"),
    ];
    for (args, detail) in cases {
        assert_eq!(dispatch(&r, SUBAGENT, args), invalid(detail), "{args}");
    }
    for (args, detail) in &cases[..3] {
        let wrapped = format!(r#"{{"name":"subagent","arguments":{args}}}"#);
        assert_eq!(
            dispatch(&r, "call_tool", &wrapped),
            invalid(detail),
            "{args}"
        );
    }
    assert!(
        matches!(invalid("task is required"), Dispatch::Local(t) if t
            == "Denied: the arguments are not valid for this tool: task is required.")
    );
}

#[test]
fn child_ids_fit_a_session_id_or_come_back_raw() {
    let long = SessionId::new(&"a".repeat(59)).unwrap();
    let raw = child_id(&long, CallId(1)).unwrap_err();
    assert_eq!(raw.len(), 65);
    assert!(raw.len() > 64 && raw.starts_with("sub-"));
    let ok = child_id(&SessionId::new("mm-thread").unwrap(), CallId(3)).unwrap();
    assert_eq!(ok.as_str(), "sub-mm-thread-3");
    assert_eq!(depth(&ok), 1);
    assert_eq!(depth(&SessionId::new("sub-sub-x-1-2").unwrap()), 2);
}

#[test]
fn subagent_is_a_core_tool_only_when_enabled_and_above_the_depth_limit() {
    let mut cfg = crate::config::Config::default();
    let names = |id: &str, cfg: &crate::config::Config| -> Vec<String> {
        registry_for(&Registry::m2b(), &SessionId::new(id).unwrap(), cfg)
            .core_schemas()
            .into_iter()
            .map(|s| s.name)
            .collect()
    };
    assert!(!names("s", &cfg).contains(&SUBAGENT.to_string()));
    cfg.subagent.enabled = true;
    assert!(names("s", &cfg).contains(&SUBAGENT.to_string()));
    assert!(!names("sub-s-1", &cfg).contains(&SUBAGENT.to_string()));
    cfg.subagent.max_depth = 2;
    assert!(names("sub-s-1", &cfg).contains(&SUBAGENT.to_string()));
}
