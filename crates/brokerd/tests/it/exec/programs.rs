//! A `programs` grant runs its program and nothing the program would run (issue 32.5): the
//! programs that run others on request (`sort --compress-program`, `find -exec`, the loader
//! `ld.so` reached through one) get "Permission denied" from the kernel, and a `shell` grant
//! still runs what its shell runs.

use super::*;
use brokerd::secrets::{SecretStore, Secrets};

/// The line each way around tries to run; it would make `marker`.
fn touch_line(marker: &Path) -> String {
    format!("touch {}\n", marker.display())
}

/// The loader (`PT_INTERP`) of the system's programs.
fn loader() -> String {
    let sort = bxsandbox::program::resolve("sort").unwrap();
    let files = bxsandbox::interp::exec_files(&sort);
    files[1].to_str().unwrap().to_owned()
}

/// `exec` of `argv` with `stdin`, as `main`.
async fn exec_stdin(b: &Broker, argv: &[&str], stdin: &str) -> ToolResponse {
    let args = json!({ "argv": argv, "stdin": stdin }).to_string();
    let response = b.call(&request("main", 1, "exec", &args)).await;
    eprintln!("{argv:?}: {response:?}");
    response
}

fn permission_denied(r: &ToolResponse) -> bool {
    // sort says "couldn't execute compress program: errno 13" (EACCES).
    content(r).contains("Permission denied") || content(r).contains("errno 13")
}

#[tokio::test]
async fn a_programs_grant_runs_its_program_and_nothing_it_would_run() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let b = tree.broker(
        Sandbox::Ready(walls),
        vec![tree.grant(json!({"programs": ["sort", "find"]}))],
    );
    // The program itself runs.
    let r = exec_stdin(&b, &["sort"], "b\na\n").await;
    assert!(succeeded(&r), "{r:?}");
    assert!(content(&r).contains("a\nb\n"), "{r:?}");

    let marker = tree.work.join("marker");
    let m = marker.to_str().unwrap();
    let work = tree.work.to_str().unwrap();
    // sort pipes what it spills through its compress program: `sh` would run each line.
    let lines = touch_line(&marker).repeat(400);
    let spill = ["sort", "-S", "1K", "--compress-program=sh", "-T", "/tmp"];
    let find = ["find", work, "-maxdepth", "0", "-exec", "touch", m, ";"];
    let loader = loader();
    let via_loader = [
        "find",
        work,
        "-maxdepth",
        "0",
        "-exec",
        &loader,
        "/usr/bin/touch",
        m,
        ";",
    ];
    for (argv, stdin) in [(&spill[..], lines.as_str()), (&find, ""), (&via_loader, "")] {
        let r = exec_stdin(&b, argv, stdin).await;
        assert!(!marker.exists(), "{argv:?} ran another program: {r:?}");
        assert!(permission_denied(&r), "{argv:?}: {r:?}");
    }
}

#[tokio::test]
async fn a_shell_grant_still_runs_what_its_shell_runs() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    let b = tree.broker(
        Sandbox::Ready(walls),
        vec![tree.grant(json!({"shell": true}))],
    );
    let marker = tree.work.join("marker");
    let line = format!(
        "touch {} && sort --version >/dev/null && echo ran",
        marker.display()
    );
    let r = exec(&b, &["sh", "-c", &line]).await;
    assert!(content(&r).contains("ran"), "{r:?}");
    assert!(marker.exists());
}

/// The secret of the docs' example with an env: a token the model must never see.
const TOKEN: &str = "ghp_docs0example0token0value";

#[tokio::test]
async fn the_docs_read_only_example_with_a_secret_in_env_gives_no_way_to_run_a_shell() {
    let Some(walls) = walls().await else { return };
    let tree = Tree::new();
    // docs/exec.md's "Counting and searching, read-only" grant, with a secret in its env.
    let grant: Grant = serde_json::from_value(json!({
        "tool": "exec",
        "sessions": ["main"],
        "programs": ["grep", "wc", "ls", "head", "sort"],
        "ro_paths": [tree.work],
        "timeout_ms": 10000,
        "env": {"TOKEN": "{secret:token}"},
    }))
    .unwrap();
    let mut cfg = common::config(&tree.root, vec![grant], Limits::default());
    cfg.state_dir = tree.root.join("state");
    let tools = ToolSet::with_builtins_and_sandbox(&cfg, Sandbox::Ready(walls)).unwrap();
    let b = common::broker(&cfg, tools)
        .with_secrets(SecretStore::new(Secrets::from_values([("token", TOKEN)])));
    // The red team's way: sort's compress program is a shell fed the model's lines, which
    // prints the token one character at a time (shell builtins only) past the redaction.
    let reshape = "x=$TOKEN; while [ -n \"$x\" ]; do printf '%s-' \"${x%\"${x#?}\"}\" >&2; \
                   x=${x#?}; done\n";
    let lines = reshape.repeat(200);
    let spill = ["sort", "-S", "1K", "--compress-program=sh", "-T", "/tmp"];
    let r = exec_stdin(&b, &spill, &lines).await;
    let spaced: String = TOKEN.chars().map(|c| format!("{c}-")).collect();
    assert!(
        !content(&r).contains(&spaced),
        "the token came back reshaped: {r:?}"
    );
    assert!(permission_denied(&r), "{r:?}");
}
