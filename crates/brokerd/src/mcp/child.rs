//! Starting one MCP server's child process: the command in its own process group, its `env`
//! filled from brokerd's secrets, stdio piped, stderr read line by line (redacted) into the
//! log, and the `initialize` handshake and `tools/list`. The child is registered with
//! [`crate::reaper`], so the orphan reaper leaves it to tokio.

use super::redact::{self, Redactor};
use super::{
    McpError, McpOptions, STDERR_LINE_MAX_BYTES, STDERR_LINE_SCAN_BYTES, STDERR_TAIL_LINES,
};
use crate::config::McpServer;
use crate::reaper;
use crate::secrets::{SecretStore, Secrets, Template};
use process_wrap::tokio::{CommandWrap, ProcessGroup};
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, InitializeRequestParams, ProtocolVersion,
};
// The MCP logging notification is deprecated (SEP-2577), but servers still send it.
#[allow(deprecated)]
use rmcp::model::LoggingMessageNotificationParam;
use rmcp::service::{ClientInitializeError, NotificationContext, RoleClient, RunningService};
use rmcp::transport::TokioChildProcess;
use rmcp::{ClientHandler, ServiceExt};
use std::collections::VecDeque;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::sync::Notify;
use tokio::task::JoinHandle;

/// How long to wait for a dead child's stderr to reach its end, to quote it, in milliseconds.
const STDERR_DRAIN_TIMEOUT_MS: u64 = 500;

/// The client side of one connection: says who brokerd is, passes on "the tools changed" and
/// logs the server's log notifications, redacted.
#[derive(Debug)]
pub(super) struct Handler {
    relist: Arc<Notify>,
    /// The server's configured name, for the log.
    server: String,
    redactor: Redactor,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        InitializeRequestParams::new(
            ClientCapabilities::default(),
            Implementation::new("boxmaker-brokerd", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.relist.notify_one();
    }

    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        redact::notification(&self.server, &self.redactor, &params);
    }
}

/// The last lines a child wrote to stderr.
#[derive(Debug, Clone, Default)]
pub(super) struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    fn push(&self, line: String) {
        let mut lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.len() == STDERR_TAIL_LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// `" (stderr: a | b)"`, or nothing when it wrote nothing.
    pub(super) fn quote(&self) -> String {
        let lines = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if lines.is_empty() {
            String::new()
        } else {
            let joined: Vec<&str> = lines.iter().map(String::as_str).collect();
            format!(" (stderr: {})", joined.join(" | "))
        }
    }
}

/// One running, initialized server.
pub(super) struct Child {
    /// The rmcp client service; its task owns the child process.
    pub(super) service: RunningService<RoleClient, Handler>,
    /// The child's process id.
    pub(super) pid: Option<u32>,
    /// Notified when the server says its tool list changed.
    pub(super) relist: Arc<Notify>,
    /// Its stderr, read into the log until the pipe closes.
    pub(super) stderr: Option<JoinHandle<()>>,
    /// The last lines of its stderr.
    pub(super) tail: StderrTail,
    /// Redacts what it says.
    pub(super) redactor: Redactor,
}

impl Child {
    /// Waits (bounded) for the stderr reader to finish, then quotes the last lines.
    pub(super) async fn drain_stderr(stderr: Option<JoinHandle<()>>, tail: &StderrTail) -> String {
        if let Some(reader) = stderr {
            let limit = Duration::from_millis(STDERR_DRAIN_TIMEOUT_MS);
            if tokio::time::timeout(limit, reader).await.is_err() {
                tracing::debug!("stderr of an MCP server still open after it stopped");
            }
        }
        tail.quote()
    }
}

/// `config`'s `env` with its `{secret:NAME}` placeholders filled from `secrets`.
fn environment(config: &McpServer, secrets: &Secrets) -> Result<Vec<(String, String)>, McpError> {
    config
        .env
        .iter()
        .map(|(variable, value)| {
            let filled = Template::parse(value)
                .map_err(|e| e.to_string())
                .and_then(|t| t.render(secrets).map_err(|e| e.to_string()))
                .map_err(|detail| McpError::Env {
                    server: config.name.clone(),
                    variable: variable.clone(),
                    detail,
                })?;
            Ok((variable.clone(), filled))
        })
        .collect()
}

/// Runs `config`'s command, its `env` filled from the secrets `store` holds now, and does
/// the `initialize` handshake, within `options`.
pub(super) async fn spawn(
    config: &McpServer,
    options: &McpOptions,
    store: &SecretStore,
) -> Result<Child, McpError> {
    let started = store.current();
    let env = environment(config, &started)?;
    let redactor = Redactor::new(started, store.clone());
    let mut command = tokio::process::Command::new(&config.command);
    // Not where brokerd's own credentials lie: a server gets the secrets its env names and
    // no pointer to the rest (defence in depth; it runs as brokerd's user, docs/secrets.md).
    command
        .args(&config.args)
        .env_remove(crate::secrets::CREDENTIALS_DIRECTORY)
        .envs(env)
        .kill_on_drop(true);
    let mut wrapped = CommandWrap::from(command);
    wrapped.wrap(ProcessGroup::leader());
    let builder = TokioChildProcess::builder(wrapped)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // Registered with the orphan reaper, which must leave this child to tokio.
    let (transport, stderr) = reaper::spawn_registered(|| builder.spawn(), |(t, _)| t.id())
        .map_err(|e| McpError::Spawn {
            server: config.name.clone(),
            command: config.command.clone(),
            detail: e.to_string(),
        })?;
    let pid = transport.id();
    tracing::info!(server = %config.name, command = %config.command, ?pid, "MCP server started");
    let tail = StderrTail::default();
    let stderr = stderr.map(|pipe| {
        let reader = log_stderr(config.name.clone(), pipe, tail.clone(), redactor.clone());
        tokio::spawn(reader)
    });
    let relist = Arc::new(Notify::new());
    let handler = Handler {
        relist: relist.clone(),
        server: config.name.clone(),
        redactor: redactor.clone(),
    };
    let limit = options.initialize_timeout;
    let service = match tokio::time::timeout(limit, handler.serve(transport)).await {
        Ok(Ok(service)) => service,
        Ok(Err(error)) => {
            let quoted = Child::drain_stderr(stderr, &tail).await;
            // The tail is redacted line by line; the client's words may quote the server's.
            let detail = format!("{}{quoted}", describe_init_error(&error));
            return Err(McpError::Initialize {
                server: config.name.clone(),
                detail: redactor.redact(&detail),
            });
        }
        Err(_) => {
            return Err(McpError::Timeout {
                server: config.name.clone(),
                step: "initialize",
                limit_ms: millis(limit),
            });
        }
    };
    if let Some(info) = service.peer_info() {
        // The name it gives itself and the version it answers are its own words: redacted
        // like its stderr.
        let peer = info
            .server_info
            .as_ref()
            .map(|i| redact::name(&redactor, &i.name));
        let protocol = redact::name(&redactor, &info.protocol_version.to_string());
        tracing::info!(server = %config.name, peer = ?peer, %protocol,
            "MCP server initialized");
    }
    Ok(Child {
        service,
        pid,
        relist,
        stderr,
        tail,
        redactor,
    })
}

/// A duration in whole milliseconds, for messages.
pub(super) fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn describe_init_error(error: &ClientInitializeError) -> String {
    match error {
        ClientInitializeError::ConnectionClosed(_) => {
            String::from("the server exited or closed its stdout before answering")
        }
        // A server that exits at once may be gone before the request is even written: the
        // write then fails with a broken pipe, which says the same thing less clearly.
        other if other.to_string().contains("Broken pipe") => {
            format!("the server exited or closed its stdin before the handshake ({other})")
        }
        other => other.to_string(),
    }
}

/// Logs each line of `pipe` (its first [`STDERR_LINE_SCAN_BYTES`] redacted, then cut at
/// [`STDERR_LINE_MAX_BYTES`]) with the server's name, until the pipe closes.
async fn log_stderr(
    server: String,
    pipe: impl AsyncRead + Unpin,
    tail: StderrTail,
    redactor: Redactor,
) {
    let mut reader = BufReader::new(pipe);
    let mut line: Vec<u8> = Vec::new();
    loop {
        let (used, complete) = match reader.fill_buf().await {
            Ok([]) => break,
            Ok(buf) => {
                let end = buf.iter().position(|&b| b == b'\n');
                let part = &buf[..end.unwrap_or(buf.len())];
                let room = STDERR_LINE_SCAN_BYTES.saturating_sub(line.len());
                line.extend_from_slice(&part[..part.len().min(room)]);
                (end.map_or(buf.len(), |e| e + 1), end.is_some())
            }
            Err(error) => {
                tracing::debug!(%server, %error, "reading an MCP server's stderr failed");
                break;
            }
        };
        reader.consume(used);
        if complete {
            emit(&server, &line, &tail, &redactor);
            line.clear();
        }
    }
    if !line.is_empty() {
        emit(&server, &line, &tail, &redactor);
    }
}

/// Logs one line and keeps it in the tail, redacted: a server that prints its environment
/// (or an error quoting its key) must not put a secret in brokerd's log or error messages.
fn emit(server: &str, line: &[u8], tail: &StderrTail, redactor: &Redactor) {
    let Some(text) = stderr_line(line, redactor) else {
        return;
    };
    tracing::info!(target: "brokerd::mcp::stderr", %server, "{text}");
    tail.push(text);
}

/// What brokerd logs and keeps of one stderr line: redacted, then cut to
/// `STDERR_LINE_MAX_BYTES`; None for an empty line. The log and the tail take this one text,
/// so a test of it is a test of what reaches the log (no log capture, which races with other
/// test threads over tracing's callsite interest).
fn stderr_line(line: &[u8], redactor: &Redactor) -> Option<String> {
    let text = String::from_utf8_lossy(line);
    let text = text.trim_end_matches('\r');
    if text.is_empty() {
        return None;
    }
    let mut text = redactor.redact(text);
    // Cut after redacting, so a secret across the cut is not left half there.
    if text.len() > STDERR_LINE_MAX_BYTES {
        let mut end = STDERR_LINE_MAX_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    Some(text)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_stderr_line_is_redacted_in_the_log_and_the_tail() {
        let value = "sk-live-0123456789abcdef";
        let store = SecretStore::new(Secrets::from_values([("x", value)]));
        let redactor = Redactor::new(store.current(), store.clone());
        let tail = StderrTail::default();
        let line = format!("starting with key {value} (hex {})", hex::encode(value));
        let logged = stderr_line(line.as_bytes(), &redactor).unwrap();
        assert_eq!(logged, "starting with key {secret:x} (hex {secret:x})");
        emit("srv", line.as_bytes(), &tail, &redactor);
        assert_eq!(
            tail.quote(),
            " (stderr: starting with key {secret:x} (hex {secret:x}))"
        );
        assert_eq!(stderr_line(b"\r", &redactor), None);
    }

    #[tokio::test]
    async fn a_secret_across_the_cut_of_a_long_line_is_not_left_half_there() {
        let value = "sk-live-0123456789abcdef";
        let store = SecretStore::new(Secrets::from_values([("x", value)]));
        let redactor = Redactor::new(store.current(), store.clone());
        let tail = StderrTail::default();
        // The value starts 6 bytes before the cut.
        let padding = "é".repeat((STDERR_LINE_MAX_BYTES - 6) / 2);
        let stderr = format!("{padding}{value} and more\nnext line\n");
        log_stderr("srv".into(), stderr.as_bytes(), tail.clone(), redactor).await;
        let kept = tail.0.lock().unwrap().front().cloned().unwrap();
        assert!(kept.len() <= STDERR_LINE_MAX_BYTES, "{}", kept.len());
        assert!(kept.starts_with(&padding));
        assert!(!kept.contains("sk-liv"), "{}", &kept[padding.len()..]);
    }
}
