//! brokerd's MCP layer against a real MCP server: `@modelcontextprotocol/server-everything` from
//! npm, installed by `scripts/fetch-mcp-test-server.sh` (`MCP_EVERYTHING` = its entry .js).
//! Without `MCP_EVERYTHING` these tests skip with a note, unless `BOXMAKER_REQUIRE_MCP=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use brokerd::config::{Grant, McpServer};
use brokerd::mcp::{McpOptions, McpServers, ServerState};
use brokerd::secrets::SecretStore;
use brokerd::tool::{CallContext, Tool, ToolError, ToolOutput};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A result cap no test comes near, in bytes.
const BIG_CAP: usize = 1 << 20;
/// A call time limit no test comes near, in milliseconds.
const TIMEOUT_MS: u64 = 20_000;
/// The longest a test waits for a server to change state.
const STATE_WAIT: Duration = Duration::from_secs(30);

/// The server's entry .js, or `None` (with a note) when the test should skip.
fn everything() -> Option<String> {
    match std::env::var("MCP_EVERYTHING") {
        Ok(path) if !path.is_empty() => Some(path),
        _ => {
            let hint = "run: eval \"$(scripts/fetch-mcp-test-server.sh --print-paths)\"";
            if std::env::var("BOXMAKER_REQUIRE_MCP").as_deref() == Ok("1") {
                panic!("MCP_EVERYTHING is not set and BOXMAKER_REQUIRE_MCP=1; {hint}");
            }
            eprintln!("skipping: MCP_EVERYTHING is not set; {hint}");
            None
        }
    }
}

fn config(entry: &str) -> McpServer {
    McpServer {
        name: "everything".into(),
        command: "node".into(),
        args: vec![entry.into(), "stdio".into()],
        env: BTreeMap::new(),
        prefix: "ev".into(),
        description_class: bxcore::DataClass::Public,
        description_untrusted: true,
    }
}

fn tool(servers: &McpServers, name: &str) -> Arc<dyn Tool> {
    let tools = servers.tools();
    let names: Vec<&str> = tools.iter().map(|(n, _)| n.as_str()).collect();
    tools
        .iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| t.clone())
        .unwrap_or_else(|| panic!("no tool {name} among {names:?}"))
}

async fn call_with(
    tool: &dyn Tool,
    args: Value,
    cap: usize,
    timeout_ms: u64,
) -> Result<ToolOutput, ToolError> {
    let grant: Grant = serde_json::from_value(json!({"tool": tool.schema().name})).unwrap();
    let ctx = CallContext {
        grant: &grant,
        result_cap_bytes: cap,
        timeout_ms,
        secrets: &brokerd::secrets::Secrets::default(),
        record: None,
    };
    tool.call(&args, ctx).await
}

async fn call(tool: &dyn Tool, args: Value) -> Result<ToolOutput, ToolError> {
    call_with(tool, args, BIG_CAP, TIMEOUT_MS).await
}

fn kill(pid: u32) {
    let status = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -KILL {pid} failed");
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

#[tokio::test]
async fn mcp_everything_offers_its_tools_with_prefix_and_schemas() {
    let Some(entry) = everything() else { return };
    let servers = McpServers::start(&[config(&entry)], &SecretStore::default())
        .await
        .unwrap();
    let echo = tool(&servers, "ev_echo").schema();
    assert_eq!(echo.name, "ev_echo");
    assert!(!echo.description.is_empty());
    assert_eq!(echo.parameters["type"], "object", "{}", echo.parameters);
    assert_eq!(echo.parameters["properties"]["message"]["type"], "string");
    let sum = tool(&servers, "ev_get-sum").schema();
    assert_eq!(sum.parameters["required"], json!(["a", "b"]));
    assert!(
        servers
            .tools()
            .iter()
            .all(|(n, t)| n.starts_with("ev_") && t.schema().name == *n)
    );
    let status = servers.status("everything").unwrap();
    assert_eq!(status.state, ServerState::Up);
    assert_eq!(status.starts, 1);
    assert_eq!(status.tools, servers.tools().len());
    servers.shutdown().await;
}

#[tokio::test]
async fn mcp_everything_calls_return_text_images_described_and_env_passed() {
    let Some(entry) = everything() else { return };
    let mut cfg = config(&entry);
    cfg.env
        .insert("BOXMAKER_MCP_TEST_VAR".into(), "from-brokerd".into());
    let servers = McpServers::start(&[cfg], &SecretStore::default())
        .await
        .unwrap();

    let out = call(&*tool(&servers, "ev_echo"), json!({"message": "hi"}))
        .await
        .unwrap();
    assert!(out.content.contains("hi"), "{out:?}");
    assert!(!out.truncated);

    let out = call(&*tool(&servers, "ev_get-sum"), json!({"a": 1, "b": 2}))
        .await
        .unwrap();
    assert!(out.content.contains('3'), "{out:?}");

    let out = call(&*tool(&servers, "ev_get-tiny-image"), json!({}))
        .await
        .unwrap();
    assert!(out.content.contains("[image: image/png, "), "{out:?}");
    assert!(
        !out.content.contains("iVBOR"),
        "image data must not be inlined: {out:?}"
    );

    let out = call(&*tool(&servers, "ev_get-env"), Value::Null)
        .await
        .unwrap();
    assert!(out.content.contains("from-brokerd"), "{out:?}");
    servers.shutdown().await;
}

#[tokio::test]
async fn mcp_everything_errors_caps_and_timeouts() {
    let Some(entry) = everything() else { return };
    let servers = McpServers::start(&[config(&entry)], &SecretStore::default())
        .await
        .unwrap();
    let echo = tool(&servers, "ev_echo");

    // The server's own error (missing `message`): isError → Failed with its text.
    match call(&*echo, json!({})).await {
        Err(ToolError::Failed(text)) => assert!(text.contains("message"), "{text}"),
        other => panic!("expected Failed, got {other:?}"),
    }
    // Arguments that are not an object never reach the server.
    assert!(matches!(
        call(&*echo, json!([1, 2])).await,
        Err(ToolError::InvalidArguments(_))
    ));

    let long = "é".repeat(500);
    let out = call_with(&*echo, json!({"message": long}), 100, TIMEOUT_MS)
        .await
        .unwrap();
    assert!(out.truncated, "{out:?}");
    assert!(out.content.ends_with("\n[truncated]"), "{out:?}");
    assert!(
        out.content.len() <= 100 + "\n[truncated]".len(),
        "{}",
        out.content.len()
    );

    let slow = tool(&servers, "ev_trigger-long-running-operation");
    let args = json!({"duration": 30, "steps": 3});
    match call_with(&*slow, args, BIG_CAP, 300).await {
        Err(ToolError::Failed(text)) => assert!(text.contains("300 ms"), "{text}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    // The server is still usable after a call timed out.
    let out = call(&*echo, json!({"message": "still here"}))
        .await
        .unwrap();
    assert!(out.content.contains("still here"), "{out:?}");
    servers.shutdown().await;
}

#[tokio::test]
async fn mcp_everything_restarts_a_killed_server_and_its_tools_work_again() {
    let Some(entry) = everything() else { return };
    // A long first backoff makes the "down" window wide enough to call into.
    let options = McpOptions {
        restart_backoff_initial: Duration::from_secs(2),
        ..McpOptions::default()
    };
    let servers = McpServers::start_with(&[config(&entry)], &SecretStore::default(), options)
        .await
        .unwrap();
    let echo = tool(&servers, "ev_echo");
    let first = servers.status("everything").unwrap().pid.unwrap();

    kill(first);
    let down = servers
        .wait_for_status("everything", STATE_WAIT, |s| {
            s.state == ServerState::Restarting
        })
        .await
        .expect("the server is seen down");
    assert!(down.last_error.is_some(), "{down:?}");
    match call(&*echo, json!({"message": "x"})).await {
        Err(ToolError::Failed(text)) => assert!(text.contains("restarting"), "{text}"),
        other => panic!("expected Failed while restarting, got {other:?}"),
    }

    let up = servers
        .wait_for_status("everything", STATE_WAIT, |s| {
            s.state == ServerState::Up && s.starts == 2
        })
        .await
        .expect("the server is restarted");
    let second = up.pid.unwrap();
    assert_ne!(first, second);
    assert!(!alive(first), "the killed child {first} is not reaped");
    assert!(up.tools > 0, "tools are listed again: {up:?}");
    // The tool handle taken before the restart works on the new connection.
    let out = call(&*echo, json!({"message": "again"})).await.unwrap();
    assert!(out.content.contains("again"), "{out:?}");

    servers.shutdown().await;
    assert!(!alive(second), "child {second} left after shutdown");
    match call(&*echo, json!({"message": "x"})).await {
        Err(ToolError::Failed(text)) => assert!(text.contains("shut down"), "{text}"),
        other => panic!("expected Failed after shutdown, got {other:?}"),
    }
}

#[tokio::test]
async fn mcp_everything_gives_up_on_a_server_that_keeps_failing() {
    let Some(entry) = everything() else { return };
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("started-once");
    // Runs the real server the first time only; every restart exits at once.
    let script = r#"if [ -e "$1" ]; then echo "refusing to start again" >&2; exit 3; fi
: > "$1"; exec node "$2" stdio"#;
    let cfg = McpServer {
        command: "sh".into(),
        args: vec![
            "-c".into(),
            script.into(),
            "sh".into(),
            marker.display().to_string(),
            entry,
        ],
        ..config("")
    };
    let options = McpOptions {
        restart_backoff_initial: Duration::from_millis(10),
        restart_backoff_max: Duration::from_millis(40),
        max_restarts_in_row: 3,
        ..McpOptions::default()
    };
    let servers = McpServers::start_with(&[cfg], &SecretStore::default(), options)
        .await
        .unwrap();
    let echo = tool(&servers, "ev_echo");
    kill(servers.status("everything").unwrap().pid.unwrap());

    let gave_up = servers
        .wait_for_status("everything", STATE_WAIT, |s| s.state == ServerState::GaveUp)
        .await
        .expect("brokerd gives up after 3 failed restarts");
    let error = gave_up.last_error.unwrap();
    assert!(error.contains("refusing to start again"), "{error}");
    assert_eq!(gave_up.starts, 1);
    match call(&*echo, json!({"message": "x"})).await {
        Err(ToolError::Failed(text)) => assert!(text.contains("3 times in a row"), "{text}"),
        other => panic!("expected Failed, got {other:?}"),
    }
    servers.shutdown().await;
}
