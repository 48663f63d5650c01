//! What a small local model sends: every optional key filled with its empty value. Qwen2.5-
//! Coder-0.5B calls `exec` with `"cwd": "", "stdin": "", "timeout_ms": 0` every time (the
//! demo's task showed it); those mean "not given", so the call runs in the grant's defaults
//! instead of being refused for a relative cwd or a zero timeout.

use super::{Tree, succeeded, walls};
use crate::common::request;
use brokerd::builtin::exec::Sandbox;
use serde_json::json;

#[tokio::test]
async fn empty_optional_arguments_mean_not_given() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    std::fs::write(tree.work.join("notes.txt"), "one\ntwo\n").unwrap();
    let b = tree.broker(
        Sandbox::Ready(walls),
        vec![tree.grant(json!({"programs": ["wc"]}))],
    );
    let args = json!({"argv": ["wc", "-l", "notes.txt"], "cwd": "", "stdin": "", "timeout_ms": 0});
    let r = b.call(&request("main", 1, "exec", &args.to_string())).await;
    assert!(succeeded(&r), "{r:?}");
    assert!(super::content(&r).contains("2 notes.txt"), "{r:?}");
}
