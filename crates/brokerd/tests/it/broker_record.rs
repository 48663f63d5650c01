//! What brokerd records and how it labels what its tools say: the decision is audited before a
//! tool runs, a refusal made from the arguments alone carries no label, and the catalogue
//! labels each tool's description.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use brokerd::audit::{AUDIT_FILE, AuditDecision, AuditEvent, AuditLog, args_sha256};
use brokerd::config::Limits;
use brokerd::tool::Tool;
use bxcore::{DataClass, DenyReason, Labels};
use common::{Fixed, broker, config, grant, request, sid, tools};
use proto::ToolResponse;
use std::sync::Arc;

fn limits(cap: usize, timeout_ms: u64) -> Limits {
    Limits {
        call_timeout_ms: timeout_ms,
        result_cap_bytes: cap,
        ..Limits::default()
    }
}

/// A tool that says when its call started, then never finishes: an `http_fetch` that has
/// reached the outside when brokerd dies.
struct Started {
    name: String,
    started: tokio::sync::mpsc::UnboundedSender<()>,
}

impl Tool for Started {
    fn schema(&self) -> proto::ToolSchema {
        Fixed::text(&self.name, "").schema()
    }
    fn call<'a>(
        &'a self,
        _arguments: &'a serde_json::Value,
        _ctx: brokerd::tool::CallContext<'a>,
    ) -> brokerd::tool::CallFuture<'a> {
        let _ = self.started.send(());
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn the_decision_is_audited_before_the_tool_runs() {
    let dir = tempfile::tempdir().unwrap();
    let (tx, mut started) = tokio::sync::mpsc::unbounded_channel();
    let tool = Arc::new(Started {
        name: "reach".into(),
        started: tx,
    });
    let cfg = config(
        dir.path(),
        vec![grant("reach", &["*"])],
        limits(1_000, 60_000),
    );
    let b = Arc::new(broker(&cfg, tools(vec![tool])));
    let args = r#"{"url":"https://example.org/?q=1"}"#;
    let call = {
        let b = Arc::clone(&b);
        tokio::spawn(async move { b.call(&request("main", 2, "reach", args)).await })
    };
    started.recv().await.unwrap();
    // The tool runs and has not answered: were brokerd killed now, this line would remain.
    let records = AuditLog::read(&cfg.state_dir.join(AUDIT_FILE)).unwrap();
    let [decided] = records.as_slice() else {
        panic!("{records:?}")
    };
    assert_eq!(decided.event, AuditEvent::Decided);
    assert_eq!(decided.decision, AuditDecision::Allowed);
    assert_eq!((decided.turn, decided.tool.as_str()), (2, "reach"));
    assert_eq!(decided.args_sha256, args_sha256(args));
    call.abort();
}

/// A tool whose description some outside author wrote.
struct Described(Labels);

impl Tool for Described {
    fn schema(&self) -> proto::ToolSchema {
        Fixed::text("outside_tool", "").schema()
    }
    fn description_labels(&self) -> Labels {
        self.0
    }
    fn call<'a>(
        &'a self,
        _arguments: &'a serde_json::Value,
        _ctx: brokerd::tool::CallContext<'a>,
    ) -> brokerd::tool::CallFuture<'a> {
        Box::pin(std::future::pending())
    }
}

#[tokio::test]
async fn the_catalogue_labels_each_tools_description() {
    let dir = tempfile::tempdir().unwrap();
    let untrusted = Labels::new(DataClass::Public, true);
    let grants = vec![grant("echo", &["*"]), grant("outside_tool", &["*"])];
    let b = broker(
        &config(dir.path(), grants, Limits::default()),
        tools(vec![Arc::new(Described(untrusted))]),
    );
    let labels: Vec<(String, Labels)> = b
        .catalogue(&sid("main"))
        .tools
        .into_iter()
        .map(|t| (t.schema.name, t.labels))
        .collect();
    assert_eq!(
        labels,
        [
            ("echo".to_string(), Labels::PUBLIC),
            ("outside_tool".to_string(), untrusted)
        ]
    );
}

#[tokio::test]
async fn a_refusal_on_the_arguments_alone_carries_no_label_one_after_running_does() {
    let dir = tempfile::tempdir().unwrap();
    let mut fetch = grant("http_fetch", &["*"]);
    fetch.hosts = vec!["example.org".into()];
    let cfg = config(dir.path(), vec![fetch], Limits::default());
    let b = broker(&cfg, tools(vec![]));
    // A host the grant does not name: refused from the model's own URL, before anything is
    // resolved, so a mistyped host does not make the session untrusted.
    let r = b
        .call(&request(
            "main",
            1,
            "http_fetch",
            r#"{"url":"http://exampel.org/"}"#,
        ))
        .await;
    assert!(
        matches!(
            &r,
            ToolResponse::Denied {
                reason: DenyReason::HostNotAllowed,
                labels: None,
                ..
            }
        ),
        "{r:?}"
    );
    // Audited as one decision: the tool never ran.
    let records = AuditLog::read(&cfg.state_dir.join(AUDIT_FILE)).unwrap();
    let [line] = records.as_slice() else {
        panic!("{records:?}")
    };
    assert_eq!(
        (line.event, line.decision, line.reason),
        (
            AuditEvent::Decided,
            AuditDecision::Denied,
            Some(DenyReason::HostNotAllowed)
        )
    );
}
