//! Fail closed: with no bubblewrap on the probe's `PATH`, `exec` is in no catalogue, a call
//! is denied with the probe's reason, and health says the sandbox is unavailable. Needs no
//! bubblewrap, so it always runs.

use super::*;

#[tokio::test]
async fn without_bubblewrap_exec_is_offered_to_no_one_and_denied_with_the_reason() {
    let tree = Tree::new();
    let empty = tempfile::tempdir().unwrap();
    let sandbox = Sandbox::probe(&ProbeOptions {
        search_path: empty.path().as_os_str().to_owned(),
        shim: Some(shim()),
    })
    .await;
    let reason = "bubblewrap is not installed (no bwrap on PATH)";
    assert_eq!(sandbox.unavailable(), Some(reason));
    let b = tree.broker(sandbox, vec![tree.grant(json!({"programs": ["touch"]}))]);

    let marker = tree.work.join("marker");
    let r = exec(&b, &["touch", marker.to_str().unwrap()]).await;
    match &r {
        ToolResponse::Denied {
            reason: DenyReason::UnknownTool,
            detail: Some(detail),
            ..
        } => assert!(detail.contains(reason), "{detail}"),
        other => panic!("expected a denial with the reason, got {other:?}"),
    }
    assert!(!marker.exists());

    let (names, health) = served(b, &tree.root.join("brokerd.sock")).await;
    assert!(!names.iter().any(|n| n == "exec"), "{names:?}");
    assert_eq!(
        health,
        json!({"status": "ok", "exec": format!("unavailable: {reason}"), "checkpoints": "off"})
    );
}

#[tokio::test]
async fn with_the_sandbox_exec_is_in_the_catalogue_and_health_names_the_walls() {
    let Some(walls) = walls().await else { return };
    let described = walls.describe();
    let tree = Tree::new();
    let b = tree.broker(
        Sandbox::Ready(walls),
        vec![tree.grant(json!({"programs": ["true"]}))],
    );
    let (names, health) = served(b, &tree.root.join("brokerd.sock")).await;
    assert!(names.iter().any(|n| n == "exec"), "{names:?}");
    assert!(described.starts_with("bubblewrap"), "{described}");
    assert_eq!(
        health,
        json!({"status": "ok", "exec": described, "checkpoints": "off"})
    );
}

#[test]
fn check_config_warns_when_a_grant_names_exec_and_the_sandbox_cannot_be_made() {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    std::io::Write::write_all(
        &mut f,
        b"[[grants]]\ntool = \"exec\"\nprograms = [\"wc\"]\n",
    )
    .unwrap();
    // No PATH at all: no bwrap to find.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_brokerd"))
        .env_clear()
        .args(["--check-config", f.path().to_str().unwrap()])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("grants[0].tool"), "{stderr}");
    assert!(
        stderr.contains("exec is unavailable here (bubblewrap is not installed"),
        "{stderr}"
    );
}
