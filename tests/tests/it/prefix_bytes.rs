#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The fixed prefix of every model call, the system prompt and the tools array, stays within
//! its budget: with the shipped configs here, in the demo's layout in `demo`. These bytes go
//! out with every call, so they are what a short tool schema saves.

use e2e::{Stack, StackOptions, show, start_brokerd, workspace_root};

/// The most bytes the shipped configs' prefix may take.
pub const SHIPPED_PREFIX_BUDGET_BYTES: usize = 2_048;
/// The most bytes the demo's prefix may take (every file tool and `exec` in the array).
pub const DEMO_PREFIX_BUDGET_BYTES: usize = 3_000;

/// The bytes of the system prompt and of the tools array (compact JSON, as sent) of the first
/// baseline in a session log's text; panics when the log holds none.
pub fn prefix_bytes(log_text: &str) -> usize {
    let baseline = log_text
        .lines()
        .map(|line| serde_json::from_str::<serde_json::Value>(line).unwrap())
        .find(|record| record["type"] == "baseline")
        .unwrap_or_else(|| panic!("no baseline record in:\n{log_text}"));
    let body = &baseline["baseline"];
    let system = body["system"].as_str().unwrap().len();
    let tools = serde_json::to_string(&body["tools"]).unwrap().len();
    system + tools
}

/// The line of `file` (a shipped config) that starts with `key`.
fn shipped_line(file: &str, key: &str) -> String {
    let text = std::fs::read_to_string(workspace_root().join(file)).unwrap();
    text.lines()
        .find(|line| line.starts_with(key))
        .unwrap_or_else(|| panic!("{file} has no {key} line"))
        .to_owned()
}

#[test]
fn the_shipped_configs_prefix_is_within_its_budget() {
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    std::fs::create_dir(&files).unwrap();
    // The shipped grants, with their directory moved here.
    let shipped = std::fs::read_to_string(workspace_root().join("config/brokerd.toml")).unwrap();
    let grants = &shipped[shipped.find("[[grants]]").unwrap()..];
    let grants = grants.replace("/var/lib/boxmaker/files", files.to_str().unwrap());
    let _brokerd = start_brokerd(dir.path(), &grants);
    let stack = Stack::start(StackOptions {
        script: "[[rule]]\nreply = \"ok\"\n".into(),
        loopd_toml: format!(
            "[broker]\nsocket = {:?}\n{}\n",
            dir.path().join("brokerd.sock"),
            shipped_line("config/loopd.toml", "core_tools")
        ),
        ..StackOptions::default()
    })
    .unwrap();
    let out = stack.boxctl(&["task", "--session", "prefix", "hello"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let log = stack.log_text("prefix");
    let bytes = prefix_bytes(&log);
    assert!(
        bytes <= SHIPPED_PREFIX_BUDGET_BYTES,
        "{bytes} bytes, over {SHIPPED_PREFIX_BUDGET_BYTES}:\n{log}"
    );
    // The core tools the shipped loopd.toml names are in it, so the check saw them.
    assert!(log.contains("\"name\":\"read_file\""), "{log}");
    assert!(log.contains("\"name\":\"list_dir\""), "{log}");
}
