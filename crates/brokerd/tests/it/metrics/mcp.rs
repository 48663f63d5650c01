//! The MCP series of brokerd's metrics with `brokerd-test-mcp` as the server: up while it
//! runs, a restart counted when it is killed and comes back, and down, with every attempt
//! counted, once it cannot start again and brokerd gives up on it.

use super::sample;
use brokerd::config::McpServer;
use brokerd::mcp::{McpOptions, McpServers, ServerState, ServerStatus};
use brokerd::metrics::Metrics;
use brokerd::secrets::SecretStore;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The longest a test waits for the server to change state.
const STATE_WAIT: Duration = Duration::from_secs(30);
/// How many failures in a row the test's brokerd restarts the server through.
const MAX_RESTARTS_IN_ROW: u32 = 3;

/// `[[mcp]]` `flaky`: `brokerd-test-mcp tools SPEC` while the file `marker` exists, otherwise
/// a command that fails at once.
fn flaky(dir: &Path, marker: &Path) -> McpServer {
    let spec = dir.join("spec.json");
    let tools =
        r#"{"tools": [{"name": "hello", "description": "d", "text": "hi", "is_error": false}]}"#;
    std::fs::write(&spec, tools).unwrap();
    let server = env!("CARGO_BIN_EXE_brokerd-test-mcp");
    let script = format!(
        "test -f '{}' && exec '{server}' tools '{}'",
        marker.display(),
        spec.display()
    );
    McpServer {
        name: "flaky".into(),
        command: "/bin/sh".into(),
        args: vec!["-c".into(), script],
        env: BTreeMap::new(),
        prefix: "fl".into(),
        description_class: bxcore::DataClass::Public,
        description_untrusted: true,
    }
}

fn scrape(metrics: &Metrics) -> String {
    bxmetrics::scrape(metrics, None).unwrap().body
}

async fn wait(servers: &McpServers, what: &str, cond: impl FnMut(&ServerStatus) -> bool) {
    let found = servers.wait_for_status("flaky", STATE_WAIT, cond).await;
    assert!(found.is_some(), "{what}: {:?}", servers.status("flaky"));
}

fn kill_server(servers: &McpServers) {
    let pid = servers.status("flaky").unwrap().pid.unwrap();
    kill(Pid::from_raw(i32::try_from(pid).unwrap()), Signal::SIGKILL).unwrap();
}

#[tokio::test]
async fn metrics_mcp_servers_up_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("may-start");
    std::fs::write(&marker, "").unwrap();
    let options = McpOptions {
        restart_backoff_initial: Duration::from_millis(10),
        restart_backoff_max: Duration::from_millis(20),
        max_restarts_in_row: MAX_RESTARTS_IN_ROW,
        ..McpOptions::default()
    };
    let servers = McpServers::start_with(
        &[flaky(dir.path(), &marker)],
        &SecretStore::default(),
        options,
    )
    .await
    .unwrap();
    let servers = Arc::new(servers);
    let metrics = Metrics::new();
    metrics.watch_mcp(&servers);
    let up = "brokerd_mcp_servers_up{server=\"flaky\"}";
    let restarts = "brokerd_mcp_restarts_total{server=\"flaky\"}";
    let text = scrape(&metrics);
    assert_eq!(sample(&text, up), Some(1.0), "{text}");
    assert_eq!(sample(&text, restarts), Some(0.0), "{text}");

    kill_server(&servers);
    wait(&servers, "restarted", |s| {
        s.starts == 2 && s.state == ServerState::Up
    })
    .await;
    let text = scrape(&metrics);
    assert_eq!(sample(&text, up), Some(1.0), "{text}");
    assert_eq!(sample(&text, restarts), Some(1.0), "{text}");

    // Now it cannot start again: brokerd tries until its failures in a row pass the limit.
    std::fs::remove_file(&marker).unwrap();
    kill_server(&servers);
    wait(&servers, "given up", |s| s.state == ServerState::GaveUp).await;
    let text = scrape(&metrics);
    assert_eq!(sample(&text, up), Some(0.0), "{text}");
    // The first death's restart, then the second death's attempts: failures 2 and 3 in a row.
    let attempts = 1 + (MAX_RESTARTS_IN_ROW - 1);
    assert_eq!(sample(&text, restarts), Some(f64::from(attempts)), "{text}");

    let servers = Arc::try_unwrap(servers).unwrap();
    servers.shutdown().await;
}
