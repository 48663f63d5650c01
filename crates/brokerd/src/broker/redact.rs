//! Secrets kept out of what brokerd gives back: every text of a call's answer (a result, a
//! failure's message, a denial's detail) and the catalogue's descriptions, redacted with the
//! leak guard ([`crate::secrets::Guard::redact`]) before they are audited or answered.

use crate::secrets::{SecretStore, Secrets};
use proto::{CatalogueTool, ToolResponse};
use serde_json::Value;
use std::sync::Arc;

/// What the catalogue adds to the description of a tool that carries a credential brokerd
/// attaches (an MCP server started with one, a grant that injects one): the model must not
/// try to authenticate by itself, nor ask anyone for a secret.
pub const AUTHENTICATED_NOTE: &str = " Authenticated as configured: brokerd attaches the \
     credentials; never put a password, token or key in the arguments.";

/// The redaction of one call's texts, and the names of the secrets it replaced.
///
/// It redacts with the secrets the call started with and, when a SIGHUP replaced them
/// meanwhile, with the new ones too: a tool may have read either (an MCP server that restarted
/// during the call started with the new values).
pub(super) struct Redaction {
    call: Arc<Secrets>,
    store: SecretStore,
    names: Vec<String>,
}

impl Redaction {
    /// A redaction with `call`'s secrets and whatever `store` holds when it redacts.
    pub(super) fn new(call: &Arc<Secrets>, store: &SecretStore) -> Redaction {
        Redaction {
            call: Arc::clone(call),
            store: store.clone(),
            names: Vec::new(),
        }
    }

    /// `text` with every secret replaced by `{secret:NAME}`.
    pub(super) fn text(&mut self, text: String) -> String {
        self.redact(text, false)
    }

    /// [`Redaction::text`] of a result its tool cut at the end (`truncated`): the start of a
    /// value the cut went through goes too ([`crate::secrets::Guard::redact_cut`]).
    pub(super) fn cut_text(&mut self, text: String) -> String {
        self.redact(text, true)
    }

    fn redact(&mut self, text: String, cut: bool) -> String {
        let now = self.store.current();
        let sets = if Arc::ptr_eq(&self.call, &now) {
            vec![now]
        } else {
            vec![Arc::clone(&self.call), now]
        };
        let mut text = text;
        for secrets in &sets {
            let redacted = if cut {
                secrets.guard().redact_cut(&text)
            } else {
                secrets.guard().redact(&text)
            };
            if redacted.names.is_empty() {
                continue;
            }
            self.names.extend(redacted.names);
            text = redacted.text.into_owned();
        }
        text
    }

    /// `response` with its texts redacted: a result's content, a failure's message, a
    /// denial's detail. An approval's question is brokerd's own words about the call.
    pub(super) fn response(&mut self, response: ToolResponse) -> ToolResponse {
        match response {
            ToolResponse::Result {
                content,
                class,
                untrusted,
                truncated,
            } => ToolResponse::Result {
                content: self.text(content),
                class,
                untrusted,
                truncated,
            },
            ToolResponse::Failed { message, labels } => ToolResponse::Failed {
                message: self.text(message),
                labels,
            },
            ToolResponse::Denied {
                reason,
                detail,
                labels,
            } => ToolResponse::Denied {
                reason,
                detail: detail.map(|detail| self.text(detail)),
                labels,
            },
            ask @ ToolResponse::Ask { .. } => ask,
        }
    }

    /// The names of the secrets replaced so far, sorted, without repeats.
    pub(super) fn names(&self) -> Vec<String> {
        let mut names = self.names.clone();
        names.sort();
        names.dedup();
        names
    }
}

/// `tool` as the catalogue lists it with `secrets` held: its description and every string
/// (and key) of its parameters redacted (an MCP server writes them, and may put its own
/// environment there), and [`AUTHENTICATED_NOTE`] added when `authenticated`.
pub(super) fn catalogue_entry(
    mut tool: CatalogueTool,
    secrets: &Secrets,
    authenticated: bool,
) -> CatalogueTool {
    let guard = secrets.guard();
    let mut description = guard.redact(&tool.schema.description).text.into_owned();
    if authenticated {
        description.push_str(AUTHENTICATED_NOTE);
    }
    tool.schema.description = description;
    tool.schema.parameters = redact_json(std::mem::take(&mut tool.schema.parameters), secrets);
    tool
}

/// `value` with every string and object key redacted.
fn redact_json(value: Value, secrets: &Secrets) -> Value {
    let redact = |text: &str| secrets.guard().redact(text).text.into_owned();
    match value {
        Value::String(text) => Value::String(redact(&text)),
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|item| redact_json(item, secrets))
                .collect(),
        ),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(key, item)| (redact(&key), redact_json(item, secrets)))
                .collect(),
        ),
        other @ (Value::Null | Value::Bool(_) | Value::Number(_)) => other,
    }
}
