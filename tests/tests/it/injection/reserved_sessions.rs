//! Grants choose by session id (`sub-*` for subagents, `heartbeat`), so a client must not be
//! able to name its session like one of loopd's own: such a task is refused with the reason and
//! creates nothing.

use e2e::{Stack, StackOptions};

#[test]
fn a_client_cannot_take_a_subagents_or_the_heartbeats_session_id() {
    let stack = Stack::start(StackOptions {
        script: "[[rule]]\nwhen_role = \"user\"\nreply = \"hi\"\n".to_string(),
        ..Default::default()
    })
    .unwrap();
    for id in ["sub-evil", "sub-main-1", "heartbeat"] {
        let run = stack.boxctl(&["task", "--session", id, "hello"]);
        let stderr = String::from_utf8_lossy(&run.stderr);
        assert_ne!(run.status.code(), Some(0), "{id} was accepted");
        assert!(
            stderr.contains("cannot be used by a client"),
            "{id}: {stderr}"
        );
        assert!(
            !stack.dir.path().join("state/sessions").join(id).exists(),
            "{id} was created"
        );
    }
    // An ordinary id still works.
    let run = stack.boxctl(&["task", "--session", "subway", "hello"]);
    assert_eq!(run.status.code(), Some(0));
}
