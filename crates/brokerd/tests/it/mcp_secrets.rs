//! Secrets and MCP servers, with `brokerd-test-mcp tools` as the server: a `{secret:NAME}` in
//! a server's `env` reaches the server (filled again from the current values when it
//! restarts), its tools say they are authenticated, a call whose arguments carry a secret is
//! denied `leak` and never reaches the server, and the stderr quoted in errors is redacted.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use base64::Engine;
use brokerd::config::{Grant, McpServer};
use brokerd::mcp::{McpError, McpOptions, McpServers, ServerState};
use brokerd::secrets::{SecretConfig, SecretStore, Secrets};
use brokerd::tool::{CallContext, Tool, ToolError};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// The secret's value the tests hold, as `x`.
const VALUE: &str = "sk-live-0123456789abcdef";
/// Its value after a reload.
const ROTATED: &str = "sk-live-rotated-fedcba9876";
/// The longest a test waits for a server to change state, or for a start to fail.
const WAIT: Duration = Duration::from_secs(30);

/// The scripted tools: `echo_env` answers `$API_KEY`, `shout` writes it (and its base64) to
/// stderr and exits, `calls` counts the calls the server got.
fn spec(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("spec.json");
    let tools = json!({"tools": [
        {"name": "echo_env", "description": "says its key", "env": "API_KEY"},
        {"name": "shout", "description": "dies loudly", "env": "API_KEY_LINE",
         "stderr": true, "exit": true},
        {"name": "calls", "description": "counts", "count_calls": true},
        {"name": "hello", "description": "says hi", "text": "hi"},
    ]});
    std::fs::write(&path, tools.to_string()).unwrap();
    path
}

/// `[[mcp]] name` running the scripted tools, with `env`.
fn server(dir: &Path, name: &str, env: &[(&str, &str)]) -> McpServer {
    McpServer {
        name: name.into(),
        command: env!("CARGO_BIN_EXE_brokerd-test-mcp").into(),
        args: vec!["tools".into(), spec(dir).to_str().unwrap().into()],
        env: env
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect::<BTreeMap<_, _>>(),
        prefix: name.into(),
        description_class: bxcore::DataClass::Public,
        description_untrusted: true,
    }
}

/// The env of a server whose key is secret `x`: `API_KEY`, and `API_KEY_LINE` (what `shout`
/// writes to stderr before it dies).
fn keyed_env() -> Vec<(&'static str, &'static str)> {
    vec![
        ("API_KEY", "{secret:x}"),
        ("API_KEY_LINE", "key={secret:x}"),
    ]
}

async fn start(
    configs: &[McpServer],
    store: &SecretStore,
    options: McpOptions,
) -> Result<McpServers, McpError> {
    tokio::time::timeout(WAIT, McpServers::start_with(configs, store, options))
        .await
        .expect("starting MCP servers hung")
}

fn tool(servers: &McpServers, name: &str) -> Arc<dyn Tool> {
    servers
        .tools()
        .into_iter()
        .find(|(n, _)| n == name)
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no tool {name}"))
}

/// Checks, then calls, `tool` with `args`, as the broker does, the secrets being `secrets`.
async fn call(tool: &dyn Tool, args: Value, secrets: &Secrets) -> Result<String, ToolError> {
    let grant: Grant = serde_json::from_value(json!({"tool": tool.schema().name})).unwrap();
    let ctx = CallContext {
        grant: &grant,
        result_cap_bytes: 64 * 1024,
        timeout_ms: 10_000,
        secrets,
        record: None,
    };
    tool.check(&args, ctx)?;
    tool.call(&args, ctx).await.map(|out| out.content)
}

fn held() -> SecretStore {
    SecretStore::new(Secrets::from_values([("x", VALUE)]))
}

#[tokio::test]
async fn mcp_a_secret_in_env_reaches_the_server_and_its_tools_say_authenticated() {
    let dir = tempfile::tempdir().unwrap();
    let store = held();
    let configs = [
        server(dir.path(), "keyed", &keyed_env()),
        server(dir.path(), "plain", &[("API_KEY", "not a secret")]),
    ];
    let servers = start(&configs, &store, McpOptions::default())
        .await
        .unwrap();
    let secrets = store.current();
    let echo = tool(&servers, "keyed_echo_env");
    // The server echoed the value (only the value becomes the placeholder): the tool redacts
    // before it caps, and the broker again before the model.
    assert_eq!(
        call(&*echo, json!({}), &secrets).await.unwrap(),
        "{secret:x}"
    );
    assert!(echo.authenticated());
    let plain = tool(&servers, "plain_echo_env");
    assert_eq!(
        call(&*plain, json!({}), &secrets).await.unwrap(),
        "not a secret"
    );
    assert!(!plain.authenticated());
    servers.shutdown().await;
}

#[tokio::test]
async fn mcp_arguments_carrying_a_secret_are_denied_leak_and_never_reach_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let store = held();
    let configs = [server(dir.path(), "keyed", &keyed_env())];
    let servers = start(&configs, &store, McpOptions::default())
        .await
        .unwrap();
    let secrets = store.current();
    let hello = tool(&servers, "keyed_hello");
    let encoded = base64::engine::general_purpose::STANDARD.encode(VALUE);
    for args in [
        json!({"query": format!("https://evil.example/?k={VALUE}")}),
        json!({"nested": [{"data": encoded}]}),
        json!({ VALUE: 1 }),
    ] {
        let grant: Grant = serde_json::from_value(json!({"tool": "keyed_hello"})).unwrap();
        let ctx = CallContext {
            grant: &grant,
            result_cap_bytes: 64 * 1024,
            timeout_ms: 10_000,
            secrets: &secrets,
            record: None,
        };
        for refused in [
            hello.check(&args, ctx),
            hello.call(&args, ctx).await.map(|_| ()),
        ] {
            match refused {
                Err(ToolError::Leak { secret, detail }) => {
                    assert_eq!(secret, "x");
                    assert_eq!(
                        detail,
                        "the arguments would carry the secret \"x\"; nothing was sent"
                    );
                }
                other => panic!("expected a leak for {args}, got {other:?}"),
            }
        }
    }
    // The server got none of them: this is the first call it sees.
    let calls = tool(&servers, "keyed_calls");
    assert_eq!(call(&*calls, json!({}), &secrets).await.unwrap(), "0");
    servers.shutdown().await;
}

#[tokio::test]
async fn mcp_the_stderr_quoted_in_errors_is_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let store = held();
    let options = McpOptions {
        // Gives up at the first death, so calls quote why it died.
        max_restarts_in_row: 0,
        ..McpOptions::default()
    };
    let configs = [server(dir.path(), "keyed", &keyed_env())];
    let servers = start(&configs, &store, options).await.unwrap();
    let secrets = store.current();
    let shout = tool(&servers, "keyed_shout");
    let died = call(&*shout, json!({}), &secrets).await.unwrap_err();
    assert!(!died.to_string().contains(VALUE), "{died}");
    let status = servers
        .wait_for_status("keyed", WAIT, |s| s.state == ServerState::GaveUp)
        .await
        .expect("the server did not die");
    let why = status.last_error.unwrap();
    assert!(why.contains("(stderr: key={secret:x})"), "{why}");
    assert!(!why.contains(VALUE), "{why}");
    let hello = tool(&servers, "keyed_hello");
    let error = call(&*hello, json!({}), &secrets).await.unwrap_err();
    let ToolError::Failed(message) = &error else {
        panic!("expected a failure, got {error:?}");
    };
    assert!(message.contains("key={secret:x}"), "{message}");
    assert!(!message.contains(VALUE), "{message}");
    servers.shutdown().await;
}

#[tokio::test]
async fn mcp_a_start_error_quotes_the_servers_stderr_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let store = held();
    let mut cfg = server(dir.path(), "talker", &keyed_env());
    cfg.command = "sh".into();
    let encoded = "$(printf %s \"$API_KEY\" | base64)";
    cfg.args = vec![
        "-c".into(),
        format!("echo \"key=$API_KEY b64={encoded}\" >&2; exit 1"),
    ];
    let error = start(&[cfg], &store, McpOptions::default())
        .await
        .unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, McpError::Initialize { .. }), "{error:?}");
    assert!(text.contains("key={secret:x} b64={secret:x}"), "{text}");
    assert!(!text.contains(VALUE), "{text}");
}

#[tokio::test]
async fn mcp_a_secret_brokerd_does_not_hold_is_a_clear_start_error() {
    let dir = tempfile::tempdir().unwrap();
    let configs = [server(dir.path(), "keyed", &[("API_KEY", "{secret:gone}")])];
    let error = start(&configs, &held(), McpOptions::default())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "mcp server \"keyed\": env API_KEY: no secret named \"gone\" is loaded"
    );
}

/// A secret file readable by its owner only.
fn write_secret(path: &Path, value: &str) {
    std::fs::write(path, value).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[tokio::test]
async fn mcp_a_restart_takes_the_reloaded_value_and_the_old_one_stays_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("x.secret");
    write_secret(&file, VALUE);
    let configs = [SecretConfig {
        name: "x".into(),
        file: Some(file.clone()),
    }];
    let store = SecretStore::load(&configs, None).unwrap();
    let options = McpOptions {
        restart_backoff_initial: Duration::from_millis(10),
        restart_backoff_max: Duration::from_millis(20),
        ..McpOptions::default()
    };
    let servers = start(
        &[server(dir.path(), "keyed", &keyed_env())],
        &store,
        options,
    )
    .await
    .unwrap();

    // A reload: the running server keeps the value it started with.
    write_secret(&file, ROTATED);
    assert_eq!(store.reload(&configs, None), Vec::new());
    let secrets = store.current();
    let echo = tool(&servers, "keyed_echo_env");
    assert_eq!(
        call(&*echo, json!({}), &secrets).await.unwrap(),
        "{secret:x}"
    );

    // It dies printing the old value, which brokerd's guard still holds (retired): redacted.
    let shout = tool(&servers, "keyed_shout");
    let _ = call(&*shout, json!({}), &secrets).await;
    let status = servers
        .wait_for_status("keyed", WAIT, |s| {
            s.starts == 2 && s.state == ServerState::Up
        })
        .await
        .expect("the server did not come back");
    let why = status.last_error.unwrap();
    assert!(why.contains("key={secret:x}"), "{why}");
    assert!(!why.contains(VALUE), "{why}");

    // Started again with the reloaded value: the echo is the current secret, and so the
    // placeholder (the old value would be too, but the server has only the new one).
    let echo = tool(&servers, "keyed_echo_env");
    let echoed = call(&*echo, json!({}), &Secrets::from_values([("x", ROTATED)])).await;
    assert_eq!(echoed.unwrap(), "{secret:x}");
    let unguarded = call(&*echo, json!({}), &Secrets::default()).await;
    assert_eq!(unguarded.unwrap(), ROTATED);
    servers.shutdown().await;
}
