//! The sandbox is probed after brokerd's socket is bound: meanwhile health says `probing`,
//! `exec` is in no catalogue, and a catalogue or call that needs `exec` waits for the probe
//! (at most `PROBE_WAIT_MS`); nothing runs without walls, and a probe that never settles
//! leaves `exec` denied.

use super::*;
use brokerd::toolset::{ExecProbe, PROBE_WAIT_MS};
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// A broker over `tree` with one grant of `exec` to all, whose `exec` comes from the probe
/// returned beside it (not settled yet).
fn probing_broker(tree: &Tree) -> (Broker, Arc<ExecProbe>) {
    let grants = vec![tree.grant(json!({"programs": ["true", "touch"]}))];
    let probe = Arc::new(ExecProbe::running(&grants));
    let mut cfg = common::config(&tree.root, grants, Limits::default());
    cfg.state_dir = tree.root.join("state");
    let tools = ToolSet::with_builtins_and_probe(&cfg, Arc::clone(&probe)).unwrap();
    (common::broker(&cfg, tools), probe)
}

/// Whether `future`, polled once, is still waiting.
fn waits<F: Future>(future: std::pin::Pin<&mut F>) -> bool {
    let mut cx = Context::from_waker(Waker::noop());
    matches!(future.poll(&mut cx), Poll::Pending)
}

#[tokio::test]
async fn a_call_and_a_catalogue_made_while_probing_wait_and_then_see_the_walls() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let (b, probe) = probing_broker(&tree);
    assert_eq!(b.exec_status(), "probing");
    let session = common::sid("main");
    assert!(
        !b.catalogue(&session)
            .tools
            .iter()
            .any(|t| t.schema.name == "exec")
    );

    let mut catalogue = pin!(async {
        b.probed_for(&session).await;
        b.catalogue(&session)
    });
    let mut call = pin!(exec(&b, &["true"]));
    assert!(waits(catalogue.as_mut()), "the catalogue did not wait");
    assert!(waits(call.as_mut()), "the call did not wait");
    probe.settle(Sandbox::Ready(walls));
    let names: Vec<String> = catalogue
        .await
        .tools
        .into_iter()
        .map(|t| t.schema.name)
        .collect();
    assert!(names.iter().any(|n| n == "exec"), "{names:?}");
    assert!(succeeded(&call.await));
    assert_ne!(b.exec_status(), "probing");
}

#[tokio::test]
async fn a_probe_that_never_settles_leaves_exec_denied_and_nothing_runs() {
    let tree = Tree::new();
    let (b, _probe) = probing_broker(&tree);
    let marker = tree.work.join("marker");
    let started = tokio::time::Instant::now();
    let r = exec(&b, &["touch", marker.to_str().unwrap()]).await;
    assert!(started.elapsed() >= Duration::from_millis(PROBE_WAIT_MS));
    match &r {
        ToolResponse::Denied {
            reason: DenyReason::UnknownTool,
            detail: Some(detail),
            ..
        } => assert!(detail.contains("still probing"), "{detail}"),
        other => panic!("expected a denial while probing, got {other:?}"),
    }
    assert!(!marker.exists());
    let (names, health) = served(b, &tree.root.join("brokerd.sock")).await;
    assert!(!names.iter().any(|n| n == "exec"), "{names:?}");
    assert_eq!(
        health,
        json!({"status": "ok", "exec": "probing", "checkpoints": "off"})
    );
}

#[tokio::test]
async fn a_probe_that_finds_no_sandbox_denies_with_its_reason() {
    let tree = Tree::new();
    let (b, probe) = probing_broker(&tree);
    probe.settle(Sandbox::Unavailable("no bwrap here".into()));
    match exec(&b, &["true"]).await {
        ToolResponse::Denied {
            reason: DenyReason::UnknownTool,
            detail: Some(detail),
            ..
        } => assert!(detail.contains("no bwrap here"), "{detail}"),
        other => panic!("expected a denial with the reason, got {other:?}"),
    }
    assert_eq!(b.exec_status(), "unavailable: no bwrap here");
}
