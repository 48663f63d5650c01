//! The broker: built-in `clock` and `echo`, labels and caps on results, tool errors as
//! denials or failures, a hanging tool stopped at its time limit, the catalogue per session,
//! and the audit log read back.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use brokerd::audit::{AUDIT_FILE, AuditDecision, AuditEvent, AuditLog, args_sha256};
use brokerd::config::Limits;
use brokerd::result::{TRUNCATED_MARKER, cap_result};
use brokerd::tool::{ToolError, ToolOutput};
use bxcore::{DataClass, DenyReason, Labels, Timestamp};
use common::{Fixed, Hang, Panics, broker, config, grant, request, sid, tools, with_context};
use proto::ToolResponse;
use std::sync::Arc;

fn limits(cap: usize, timeout_ms: u64) -> Limits {
    Limits {
        call_timeout_ms: timeout_ms,
        result_cap_bytes: cap,
        ..Limits::default()
    }
}

#[tokio::test]
async fn builtin_clock_and_echo_answer_as_loopds_seed_tools() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        vec![grant("clock", &["*"]), grant("echo", &["*"])],
        Limits::default(),
    );
    let b = broker(&cfg, tools(vec![]));
    match b.call(&request("main", 1, "clock", "{}")).await {
        ToolResponse::Result {
            content,
            class,
            untrusted,
            truncated,
        } => {
            Timestamp::parse(&content).unwrap();
            assert!(content.ends_with('Z'), "{content}");
            assert_eq!(
                (class, untrusted, truncated),
                (DataClass::Public, false, false)
            );
        }
        other => panic!("{other:?}"),
    }
    let echoed = b
        .call(&request("main", 1, "echo", r#"{"text":"hé"}"#))
        .await;
    assert_eq!(
        echoed,
        ToolResponse::Result {
            content: "hé".into(),
            class: DataClass::Public,
            untrusted: false,
            truncated: false
        }
    );
    let no_text = b.call(&request("main", 1, "echo", "{}")).await;
    assert_eq!(
        no_text,
        ToolResponse::Denied {
            reason: DenyReason::InvalidArguments,
            detail: Some("\"text\" is required".into()),
            // Refused on its arguments alone (`Tool::check`): brokerd's own words, no label.
            labels: None,
        }
    );
    let names = b.tools().names();
    for builtin in [
        "clock",
        "echo",
        "http_fetch",
        "list_dir",
        "read_file",
        "write_file",
    ] {
        assert!(names.iter().any(|n| n == builtin), "{builtin}: {names:?}");
    }
}

#[tokio::test]
async fn results_get_the_grants_labels() {
    let dir = tempfile::tempdir().unwrap();
    let mut echo = grant("echo", &["*"]);
    echo.result_class = DataClass::Internal;
    echo.result_untrusted = true;
    let cfg = config(
        dir.path(),
        vec![echo, grant("ev_search", &["*"])],
        Limits::default(),
    );
    let b = broker(&cfg, tools(vec![Fixed::text("ev_search", "found")]));
    let r = b.call(&request("main", 1, "echo", r#"{"text":"x"}"#)).await;
    assert!(
        matches!(
            r,
            ToolResponse::Result {
                class: DataClass::Internal,
                untrusted: true,
                ..
            }
        ),
        "{r:?}"
    );
    // An MCP-style tool under the defaults: private and untrusted.
    let r = b.call(&request("main", 1, "ev_search", "{}")).await;
    assert!(
        matches!(
            r,
            ToolResponse::Result {
                class: DataClass::Private,
                untrusted: true,
                ..
            }
        ),
        "{r:?}"
    );
}

#[test]
fn cap_cuts_on_a_char_boundary_and_marks_it() {
    assert_eq!(cap_result("abc".into(), 3), ("abc".into(), false));
    assert_eq!(
        cap_result("abcd".into(), 3),
        (format!("abc{TRUNCATED_MARKER}"), true)
    );
    // "é" is two bytes: a cap of 3 keeps one and a half, so one.
    assert_eq!(
        cap_result("ééé".into(), 3),
        (format!("é{TRUNCATED_MARKER}"), true)
    );
    assert_eq!(TRUNCATED_MARKER, "\n[truncated]");
}

#[tokio::test]
async fn results_are_capped_and_the_tools_own_cut_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let grants = vec![grant("big", &["*"]), grant("cut", &["*"])];
    let cfg = config(dir.path(), grants, limits(10, 5_000));
    let cut = Fixed::new(
        "cut",
        Ok(ToolOutput {
            content: "short".into(),
            truncated: true,
        }),
    );
    let b = broker(&cfg, tools(vec![Fixed::text("big", &"x".repeat(100)), cut]));
    match b.call(&request("main", 1, "big", "{}")).await {
        ToolResponse::Result {
            content, truncated, ..
        } => {
            assert_eq!(content, format!("{}{TRUNCATED_MARKER}", "x".repeat(10)));
            assert!(truncated);
        }
        other => panic!("{other:?}"),
    }
    let r = b.call(&request("main", 1, "cut", "{}")).await;
    assert!(
        matches!(
            r,
            ToolResponse::Result {
                truncated: true,
                ..
            }
        ),
        "{r:?}"
    );
}

#[tokio::test]
async fn tool_errors_become_denials_or_failures_with_the_grants_labels() {
    let dir = tempfile::tempdir().unwrap();
    // The tools are nobody's built-ins: their grants default to private and untrusted, and so
    // does whatever the tools say, failures and refusals included (they may quote what the tool
    // read: an MCP server's error, a page's redirect).
    let tools_labels = Some(Labels::new(DataClass::Private, true));
    let cases: [(&str, ToolError, ToolResponse); 4] = [
        (
            "paths",
            ToolError::PathNotAllowed("/etc/passwd is outside the roots".into()),
            ToolResponse::Denied {
                reason: DenyReason::PathNotAllowed,
                detail: Some("/etc/passwd is outside the roots".into()),
                labels: tools_labels,
            },
        ),
        (
            "hosts",
            ToolError::HostNotAllowed("evil.example is not allowed".into()),
            ToolResponse::Denied {
                reason: DenyReason::HostNotAllowed,
                detail: Some("evil.example is not allowed".into()),
                labels: tools_labels,
            },
        ),
        (
            "args",
            ToolError::InvalidArguments("\"path\" is required".into()),
            ToolResponse::Denied {
                reason: DenyReason::InvalidArguments,
                detail: Some("\"path\" is required".into()),
                labels: tools_labels,
            },
        ),
        (
            "fails",
            ToolError::Failed("disk on fire".into()),
            ToolResponse::Failed {
                message: "disk on fire".into(),
                labels: tools_labels,
            },
        ),
    ];
    let grants = cases
        .iter()
        .map(|(name, _, _)| grant(name, &["*"]))
        .collect();
    let set = tools(
        cases
            .iter()
            .map(|(n, e, _)| Fixed::new(n, Err(e.clone())) as _)
            .collect(),
    );
    let b = broker(&config(dir.path(), grants, Limits::default()), set);
    for (name, _, expect) in &cases {
        assert_eq!(
            &b.call(&request("main", 1, name, "{}")).await,
            expect,
            "{name}"
        );
    }
}

#[tokio::test]
async fn a_hanging_tool_is_stopped_at_the_time_limit() {
    let dir = tempfile::tempdir().unwrap();
    let (hang, stopped) = Hang::new("hang");
    let cfg = config(dir.path(), vec![grant("hang", &["*"])], limits(1_000, 30));
    let b = broker(&cfg, tools(vec![hang]));
    match b.call(&request("main", 1, "hang", "{}")).await {
        ToolResponse::Failed { message, .. } => {
            assert!(message.contains("time limit of 30 ms"), "{message}");
            assert!(message.contains("limits.call_timeout_ms"), "{message}");
        }
        other => panic!("{other:?}"),
    }
    // The call's future was dropped: its sender is gone.
    assert!(stopped.await.is_err());
    let records = AuditLog::read(&cfg.state_dir.join(AUDIT_FILE)).unwrap();
    assert_eq!(
        (records[0].event, records[0].decision),
        (AuditEvent::Decided, AuditDecision::Allowed)
    );
    assert_eq!(
        (records[1].event, records[1].decision),
        (AuditEvent::Finished, AuditDecision::Failed)
    );
    assert!(records[1].detail.as_deref().unwrap().contains("time limit"));
}

#[tokio::test]
async fn a_panicking_tool_fails_the_call_not_brokerd() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(
        dir.path(),
        vec![grant("panics", &["*"]), grant("echo", &["*"])],
        Limits::default(),
    );
    let b = broker(&cfg, tools(vec![Arc::new(Panics)]));
    let r = b.call(&request("main", 1, "panics", "{}")).await;
    assert!(
        matches!(&r, ToolResponse::Failed { message, .. } if message.contains("crashed")),
        "{r:?}"
    );
    let r = b
        .call(&request("main", 1, "echo", r#"{"text":"still here"}"#))
        .await;
    assert!(matches!(r, ToolResponse::Result { .. }), "{r:?}");
}

#[tokio::test]
async fn the_catalogue_holds_only_what_some_grant_lets_the_session_call_sorted() {
    let dir = tempfile::tempdir().unwrap();
    let grants = vec![
        grant("echo", &["*"]),
        grant("clock", &["main"]),
        grant("zeta", &["sub-*"]),
        grant("alpha", &["sub-*", "main"]),
        grant("ghost_tool", &["*"]),
    ];
    let extra = vec![
        Fixed::text("zeta", "z") as _,
        Fixed::text("alpha", "a") as _,
        Fixed::text("ungranted", "u") as _,
    ];
    let b = broker(&config(dir.path(), grants, Limits::default()), tools(extra));
    let names = |s: &str| -> Vec<String> {
        let c = b.catalogue(&sid(s));
        assert_eq!(c.session, sid(s));
        c.tools.into_iter().map(|t| t.schema.name).collect()
    };
    assert_eq!(names("main"), ["alpha", "clock", "echo"]);
    assert_eq!(names("sub-1"), ["alpha", "echo", "zeta"]);
    assert_eq!(names("heartbeat"), ["echo"]);
    let echo = b
        .catalogue(&sid("main"))
        .tools
        .into_iter()
        .find(|t| t.schema.name == "echo")
        .unwrap();
    assert_eq!(
        echo.schema.description,
        "Returns its text argument unchanged."
    );
}

#[tokio::test]
async fn audit_lines_record_every_decision_without_the_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let secret = "SECRET-ARGUMENT-4242";
    let mut fetch = grant("fetch", &["*"]);
    fetch.max_context_class = DataClass::Public;
    let grants = vec![grant("echo", &["*"]), grant("quoting", &["*"]), fetch];
    let quoting = Fixed::new(
        "quoting",
        Err(ToolError::PathNotAllowed(format!("/x/{secret} is outside"))),
    );
    let cfg = config(dir.path(), grants, limits(4, 5_000));
    let b = broker(&cfg, tools(vec![quoting, Fixed::text("fetch", "page")]));
    let echo_args = format!(r#"{{"text":"{secret}"}}"#);
    let mut calls = [
        with_context(
            request("main", 3, "echo", &echo_args),
            DataClass::Internal,
            true,
        ),
        request(
            "main",
            3,
            "quoting",
            &format!(r#"{{"path":"/x/{secret}"}}"#),
        ),
        with_context(
            request(
                "main",
                3,
                "fetch",
                &format!(r#"{{"url":"http://a/?q={secret}"}}"#),
            ),
            DataClass::Private,
            false,
        ),
        request("main", 3, "nope", &echo_args),
    ];
    for (i, r) in calls.iter_mut().enumerate() {
        r.call = bxcore::CallId(i as u64 + 1);
        b.call(r).await;
    }
    let path = cfg.state_dir.join(AUDIT_FILE);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(!text.contains(secret), "{text}");
    // An allowed call has a line before it runs and one after; a denial has one.
    assert_eq!(text.lines().count(), 6);
    let records = AuditLog::read(&path).unwrap();
    let [echo_decided, echo, quoting_decided, quoting, fetch, nope] = records.as_slice() else {
        panic!("{records:?}")
    };
    for (decided, finished) in [(echo_decided, echo), (quoting_decided, quoting)] {
        assert_eq!(decided.event, AuditEvent::Decided);
        assert_eq!(decided.decision, AuditDecision::Allowed);
        assert_eq!(decided.args_sha256, finished.args_sha256);
        assert_eq!((decided.call, decided.result), (finished.call, None));
        assert_eq!(finished.event, AuditEvent::Finished);
    }
    for denied in [fetch, nope] {
        assert_eq!(
            (denied.event, denied.decision),
            (AuditEvent::Decided, AuditDecision::Denied)
        );
    }

    assert_eq!(echo.session, sid("main"));
    assert_eq!((echo.turn, echo.call.0, echo.tool.as_str()), (3, 1, "echo"));
    assert_eq!(echo.args_sha256, args_sha256(&echo_args));
    assert_eq!(echo.args_sha256.len(), 64);
    assert_eq!(echo.context, Labels::new(DataClass::Internal, true));
    assert_eq!(echo.decision, AuditDecision::Allowed);
    assert_eq!((echo.reason, echo.detail.as_deref()), (None, None));
    // The cap is 4 bytes: the result is cut, and the size is what loopd got.
    assert_eq!(echo.result_bytes, (4 + TRUNCATED_MARKER.len()) as u64);
    assert_eq!(echo.result, Some(Labels::new(DataClass::Public, false)));
    assert!(echo.truncated);
    assert!(echo.time <= Timestamp::now());

    assert_eq!(quoting.decision, AuditDecision::Denied);
    assert_eq!(quoting.reason, Some(DenyReason::PathNotAllowed));
    assert_eq!(quoting.detail, None, "a tool's own text is not recorded");
    // The tool refused: the refusal carries its grant's labels.
    assert_eq!(
        (quoting.result, quoting.result_bytes),
        (Some(Labels::new(DataClass::Private, true)), 0)
    );

    assert_eq!(fetch.reason, Some(DenyReason::Egress));
    assert!(fetch.detail.as_deref().unwrap().contains("private"));
    assert_eq!(nope.reason, Some(DenyReason::UnknownTool));
    assert!(
        text.contains(r#""decision":"denied""#) && text.contains(r#""time":""#),
        "{text}"
    );
}

#[test]
fn the_audit_log_cannot_open_where_the_state_dir_is_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("state");
    std::fs::write(&file, b"").unwrap();
    let err = AuditLog::open(&file).unwrap_err().to_string();
    assert!(err.contains("state"), "{err}");
}
