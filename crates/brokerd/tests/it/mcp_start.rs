//! Starting MCP servers that cannot work: a command that exits at once, one that does not
//! exist, one that never answers, duplicate names. Each gives a clear error, never a hang.
//! No MCP server is needed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use brokerd::config::McpServer;
use brokerd::mcp::{McpError, McpOptions, McpServers};
use brokerd::secrets::SecretStore;
use std::collections::BTreeMap;
use std::time::Duration;

/// The longest a failing start may take before the test calls it a hang.
const HANG: Duration = Duration::from_secs(20);

fn server(name: &str, command: &str, args: &[&str]) -> McpServer {
    McpServer {
        name: name.into(),
        command: command.into(),
        args: args.iter().map(|a| (*a).to_owned()).collect(),
        env: BTreeMap::new(),
        prefix: name.into(),
        description_class: bxcore::DataClass::Public,
        description_untrusted: true,
    }
}

async fn start(configs: &[McpServer], options: McpOptions) -> Result<McpServers, McpError> {
    tokio::time::timeout(
        HANG,
        McpServers::start_with(configs, &SecretStore::default(), options),
    )
    .await
    .expect("starting MCP servers hung")
}

#[tokio::test]
async fn mcp_no_servers_start_with_no_tools() {
    let servers = start(&[], McpOptions::default()).await.unwrap();
    assert!(servers.tools().is_empty());
    assert!(servers.names().is_empty());
    servers.shutdown().await;
}

#[tokio::test]
async fn mcp_a_server_that_exits_at_once_is_a_clear_start_error() {
    let error = start(&[server("quitter", "false", &[])], McpOptions::default())
        .await
        .unwrap_err();
    let McpError::Initialize { server, detail } = &error else {
        panic!("expected Initialize, got {error:?}");
    };
    assert_eq!(server, "quitter");
    assert!(detail.contains("exited"), "{detail}");
    assert!(error.to_string().contains("\"quitter\""), "{error}");
}

#[tokio::test]
async fn mcp_a_start_error_quotes_the_servers_stderr() {
    let cfg = server("talker", "sh", &["-c", "echo 'no config file' >&2; exit 1"]);
    let error = start(&[cfg], McpOptions::default()).await.unwrap_err();
    assert!(error.to_string().contains("no config file"), "{error}");
}

#[tokio::test]
async fn mcp_a_missing_command_is_a_spawn_error() {
    let error = start(
        &[server("ghost", "/nonexistent/mcp-server", &[])],
        McpOptions::default(),
    )
    .await
    .unwrap_err();
    assert!(
        matches!(&error, McpError::Spawn { server, .. } if server == "ghost"),
        "{error:?}"
    );
}

#[tokio::test]
async fn mcp_a_server_that_never_answers_times_out() {
    let options = McpOptions {
        initialize_timeout: Duration::from_millis(300),
        ..McpOptions::default()
    };
    let error = start(&[server("mute", "sleep", &["60"])], options)
        .await
        .unwrap_err();
    assert_eq!(
        error,
        McpError::Timeout {
            server: "mute".into(),
            step: "initialize",
            limit_ms: 300
        }
    );
}

#[tokio::test]
async fn mcp_one_failing_server_fails_the_start_and_names_it() {
    let configs = [
        server("first", "false", &[]),
        server("second", "/nonexistent/x", &[]),
    ];
    let error = start(&configs, McpOptions::default()).await.unwrap_err();
    // The first failure in config order.
    assert!(error.to_string().contains("\"first\""), "{error}");
}

#[tokio::test]
async fn mcp_duplicate_names_are_refused() {
    let configs = [server("twin", "false", &[]), server("twin", "false", &[])];
    let error = start(&configs, McpOptions::default()).await.unwrap_err();
    assert_eq!(error, McpError::DuplicateName("twin".into()));
}
