//! An MCP server's own words, redacted: the [`Redactor`] of what a server says (its stderr,
//! errors that quote it), and what brokerd's log says of the name it gives itself, its tool
//! names and its log notifications. The server chose them, so they may hold a secret it was
//! given (an `env` value it echoes) or a forged log line: each is redacted, cut to a limit and
//! kept on one line before it is logged. rmcp's own log events, which quote the server
//! verbatim, never reach brokerd's log (`crate::logging`).

use crate::secrets::{SecretStore, Secrets};
// The MCP logging notification is deprecated (SEP-2577), but servers still send it.
#[allow(deprecated)]
use rmcp::model::LoggingMessageNotificationParam;
use std::sync::Arc;

/// Redacts what a server says with the guard of the secrets it was started with and of those
/// brokerd holds now: after a reload the server still holds the old values, and brokerd's
/// guard knows only the new ones.
#[derive(Debug, Clone)]
pub(super) struct Redactor {
    started: Arc<Secrets>,
    store: SecretStore,
}

impl Redactor {
    /// A redactor for a server started with `started`, brokerd's secrets being `store`.
    pub(super) fn new(started: Arc<Secrets>, store: SecretStore) -> Redactor {
        Redactor { started, store }
    }

    /// `text` with every secret's value (in any listed form) replaced by `{secret:NAME}`.
    pub(super) fn redact(&self, text: &str) -> String {
        let once = self.started.guard().redact(text).text.into_owned();
        let current = self.store.current();
        if Arc::ptr_eq(&current, &self.started) {
            return once;
        }
        current.guard().redact(&once).text.into_owned()
    }
}

/// The most bytes of a name a server chose (its `serverInfo.name`, a tool name) that are logged.
pub(super) const MAX_LOGGED_NAME_BYTES: usize = 256;
/// The most bytes of one log notification's text that are logged; the rest is dropped.
pub(super) const MAX_LOGGED_NOTIFICATION_BYTES: usize = super::STDERR_LINE_MAX_BYTES;

/// `text`, from a server, as brokerd logs it: its first `2 * max_bytes` redacted, then every
/// control character escaped (one line, no terminal codes), then cut to `max_bytes`. Cut after
/// redacting, so a secret across the cut is not left half there.
pub(super) fn server_words(redactor: &Redactor, text: &str, max_bytes: usize) -> String {
    let scanned = cut(text, max_bytes.saturating_mul(2));
    let redacted = redactor.redact(scanned);
    let mut line = String::with_capacity(redacted.len().min(max_bytes));
    for c in redacted.chars() {
        match c {
            '\n' => line.push_str("\\n"),
            '\r' => line.push_str("\\r"),
            '\t' => line.push_str("\\t"),
            c if c.is_control() => line.push_str(&c.escape_unicode().to_string()),
            c => line.push(c),
        }
        if line.len() > max_bytes {
            break;
        }
    }
    cut(&line, max_bytes).to_owned()
}

/// A name a server chose, as brokerd logs it ([`MAX_LOGGED_NAME_BYTES`]).
pub(super) fn name(redactor: &Redactor, name: &str) -> String {
    server_words(redactor, name, MAX_LOGGED_NAME_BYTES)
}

/// The text brokerd logs for a log notification: `<logger>: <data>` (the data as it is when it
/// is a string, as JSON otherwise), through [`server_words`].
#[allow(deprecated)]
pub(super) fn notification_text(
    redactor: &Redactor,
    params: &LoggingMessageNotificationParam,
) -> String {
    let data = match &params.data {
        serde_json::Value::String(text) => text.clone(),
        other => other.to_string(),
    };
    let text = match &params.logger {
        Some(logger) => format!("{logger}: {data}"),
        None => data,
    };
    server_words(redactor, &text, MAX_LOGGED_NOTIFICATION_BYTES)
}

/// Logs a server's log notification, redacted ([`notification_text`]), under target
/// `brokerd::mcp::log` with the server's configured name. Its levels above warning are logged as
/// warnings: they are the server's troubles, not brokerd's.
#[allow(deprecated)]
pub(super) fn notification(
    server: &str,
    redactor: &Redactor,
    params: &LoggingMessageNotificationParam,
) {
    use rmcp::model::LoggingLevel;
    let text = notification_text(redactor, params);
    match params.level {
        LoggingLevel::Debug => tracing::debug!(target: "brokerd::mcp::log", %server, "{text}"),
        LoggingLevel::Info | LoggingLevel::Notice => {
            tracing::info!(target: "brokerd::mcp::log", %server, "{text}");
        }
        _ => tracing::warn!(target: "brokerd::mcp::log", %server, "{text}"),
    }
}

/// `text`'s longest start of at most `max_bytes` bytes that ends on a character boundary.
fn cut(text: &str, max_bytes: usize) -> &str {
    let mut end = max_bytes.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const VALUE: &str = "sk-live-0123456789abcdef";

    fn redactor() -> Redactor {
        let store = SecretStore::new(Secrets::from_values([("x", VALUE)]));
        Redactor::new(store.current(), store)
    }

    #[test]
    fn a_name_a_server_chose_is_logged_redacted_on_one_line_and_cut() {
        let r = redactor();
        let chosen = format!("srv-{VALUE}\n2026-01-01 INFO forged\x1b[2J");
        let logged = name(&r, &chosen);
        assert_eq!(logged, "srv-{secret:x}\\n2026-01-01 INFO forged\\u{1b}[2J");
        let hex = format!("tool_{}", hex::encode(VALUE));
        assert_eq!(name(&r, &hex), "tool_{secret:x}");
        let long = "é".repeat(MAX_LOGGED_NAME_BYTES);
        let logged = name(&r, &long);
        assert!(logged.len() <= MAX_LOGGED_NAME_BYTES, "{}", logged.len());
        assert!(long.starts_with(&logged));
    }

    #[test]
    fn a_secret_across_the_cut_is_not_left_half_there() {
        let r = redactor();
        let text = format!("{}{VALUE}", "a".repeat(MAX_LOGGED_NAME_BYTES - 6));
        let logged = name(&r, &text);
        assert!(!logged.contains("sk-liv"), "{logged}");
        assert!(logged.len() <= MAX_LOGGED_NAME_BYTES);
    }

    #[test]
    #[allow(deprecated)]
    fn a_log_notification_is_logged_redacted_on_one_line() {
        let r = redactor();
        let mut params = LoggingMessageNotificationParam::new(
            rmcp::model::LoggingLevel::Info,
            serde_json::Value::String(format!("using key {VALUE}\nsecond line")),
        );
        params.logger = Some(String::from("auth"));
        assert_eq!(
            notification_text(&r, &params),
            "auth: using key {secret:x}\\nsecond line"
        );
        params.logger = None;
        params.data = serde_json::json!({ "env": { "API_KEY": VALUE }, "b64": base64_of(VALUE) });
        let logged = notification_text(&r, &params);
        assert!(!logged.contains(VALUE), "{logged}");
        assert!(!logged.contains(&base64_of(VALUE)), "{logged}");
        assert!(logged.contains("{secret:x}"), "{logged}");
    }

    fn base64_of(text: &str) -> String {
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.encode(text)
    }
}
