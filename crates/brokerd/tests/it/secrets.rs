//! Secrets in the broker (issue 19): every text a call gives back is redacted before it is
//! audited or answered, a call that would carry a secret out is denied `leak` and its audit
//! line names the secret, and the catalogue is redacted and says where brokerd authenticates.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use base64::Engine;
use brokerd::Broker;
use brokerd::audit::{AuditDecision, AuditEvent, AuditLog, AuditRecord};
use brokerd::broker::AUTHENTICATED_NOTE;
use brokerd::config::{Config, Limits};
use brokerd::secrets::guard::CUT_PREFIX_MIN_BYTES;
use brokerd::secrets::{SecretConfig, SecretStore, Secrets};
use brokerd::tool::{CallContext, CallFuture, Tool, ToolError, ToolOutput};
use bxcore::{DenyReason, Labels};
use common::{Fixed, config, grant, request, sid, tools};
use proto::{ToolResponse, ToolSchema};
use serde_json::{Value, json};
use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

const VALUE: &str = "ghp_Secr3tValue/with+chars";
const PLACEHOLDER: &str = "{secret:github}";

fn secrets() -> SecretStore {
    SecretStore::new(Secrets::from_values([("github", VALUE)]))
}

fn base64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text)
}

/// A broker with `secrets` over the built-ins and `extra`, granting every tool to `main`.
fn broker_with(dir: &std::path::Path, extra: Vec<Arc<dyn Tool>>, cap_bytes: usize) -> Broker {
    let names: Vec<String> = extra.iter().map(|tool| tool.schema().name).collect();
    let grants = names
        .iter()
        .map(String::as_str)
        .chain(["echo"])
        .map(|tool| grant(tool, &["main"]))
        .collect();
    let limits = Limits {
        result_cap_bytes: cap_bytes,
        ..Limits::default()
    };
    let cfg = config(dir, grants, limits);
    common::broker(&cfg, tools(extra)).with_secrets(secrets())
}

/// The audit log's lines and its whole text.
fn audit(broker: &Broker) -> (Vec<AuditRecord>, String) {
    let path = broker.audit().path();
    (
        AuditLog::read(path).unwrap(),
        std::fs::read_to_string(path).unwrap(),
    )
}

/// Asserts that no form of the value this file uses is in `text`.
fn assert_no_value(text: &str) {
    for form in [
        VALUE.to_string(),
        base64(VALUE),
        base64(&format!("k={VALUE}")),
    ] {
        assert!(!text.contains(&form), "{form} in {text}");
    }
}

/// A tool whose `check` and `call` give back what it was made with.
struct Scripted {
    name: &'static str,
    check: Result<(), ToolError>,
    call: Result<ToolOutput, ToolError>,
    description: String,
    parameters: Value,
    authenticated: bool,
}

impl Scripted {
    fn new(name: &'static str) -> Scripted {
        Scripted {
            name,
            check: Ok(()),
            call: Ok(ToolOutput {
                content: "ok".into(),
                truncated: false,
            }),
            description: format!("test tool {name}"),
            parameters: json!({"type": "object", "properties": {}}),
            authenticated: false,
        }
    }
}

impl Tool for Scripted {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: self.name.to_string(),
            description: self.description.clone(),
            parameters: self.parameters.clone(),
        }
    }
    fn authenticated(&self) -> bool {
        self.authenticated
    }
    fn check(&self, _arguments: &Value, _ctx: CallContext<'_>) -> Result<(), ToolError> {
        self.check.clone()
    }
    fn call<'a>(&'a self, _arguments: &'a Value, _ctx: CallContext<'a>) -> CallFuture<'a> {
        let answer = self.call.clone();
        Box::pin(async move { answer })
    }
}

#[tokio::test]
async fn a_result_carrying_a_secret_or_its_base64_reaches_the_model_and_the_audit_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let b = broker_with(dir.path(), vec![], 4096);
    let text = format!(
        "env: API_KEY={VALUE}\nencoded: {}",
        base64(&format!("k={VALUE}"))
    );
    let arguments = json!({ "text": text }).to_string();
    let answer = b.call(&request("main", 1, "echo", &arguments)).await;
    let ToolResponse::Result { content, .. } = &answer else {
        panic!("{answer:?}");
    };
    assert!(
        content.starts_with(&format!("env: API_KEY={PLACEHOLDER}\nencoded: ")),
        "{content}"
    );
    assert_eq!(content.matches(PLACEHOLDER).count(), 2, "{content}");
    assert_no_value(content);
    let (lines, whole) = audit(&b);
    let finished = lines.last().unwrap();
    assert_eq!(finished.event, AuditEvent::Finished);
    assert_eq!(finished.redacted, ["github"]);
    assert_eq!(finished.result_bytes, content.len() as u64);
    assert_no_value(&whole);
}

#[tokio::test]
async fn a_failure_and_a_denial_carrying_a_secret_are_redacted_and_keep_their_labels() {
    let dir = tempfile::tempdir().unwrap();
    let failing = Fixed::new(
        "failing",
        Err(ToolError::Failed(format!("server said: bad token {VALUE}"))),
    );
    let mut refusing = Scripted::new("refusing");
    // The value in base64url, a third of the way into the encoded text.
    let encoded = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("abc{VALUE}"));
    refusing.call = Err(ToolError::InvalidArguments(format!(
        "unknown key {encoded}"
    )));
    let mut checked = Scripted::new("checked");
    checked.check = Err(ToolError::InvalidArguments(format!("no {VALUE} here")));
    let b = broker_with(
        dir.path(),
        vec![failing, Arc::new(refusing), Arc::new(checked)],
        4096,
    );
    let g = grant("failing", &["main"]);
    let grant_labels = Some(Labels::new(g.result_class, g.result_untrusted));

    let failed = b.call(&request("main", 1, "failing", "{}")).await;
    assert_eq!(
        failed,
        ToolResponse::Failed {
            message: format!("server said: bad token {PLACEHOLDER}"),
            labels: grant_labels,
        }
    );
    let denied = b.call(&request("main", 1, "refusing", "{}")).await;
    assert_eq!(
        denied,
        ToolResponse::Denied {
            reason: DenyReason::InvalidArguments,
            // What is left is "abc" and the padding bits of the last character.
            detail: Some(format!("unknown key YWJj{PLACEHOLDER}M")),
            labels: grant_labels,
        }
    );
    // Refused by its check, before it ran: unlabelled, redacted all the same.
    let checked = b.call(&request("main", 1, "checked", "{}")).await;
    assert_eq!(
        checked,
        ToolResponse::Denied {
            reason: DenyReason::InvalidArguments,
            detail: Some(format!("no {PLACEHOLDER} here")),
            labels: None,
        }
    );
    let (lines, whole) = audit(&b);
    let redacted: Vec<_> = lines
        .iter()
        .map(|line| (line.tool.as_str(), line.event, line.redacted.clone()))
        .collect();
    let named = vec!["github".to_string()];
    assert_eq!(
        redacted,
        [
            ("failing", AuditEvent::Decided, vec![]),
            ("failing", AuditEvent::Finished, named.clone()),
            ("refusing", AuditEvent::Decided, vec![]),
            ("refusing", AuditEvent::Finished, named.clone()),
            ("checked", AuditEvent::Decided, named),
        ]
    );
    assert_no_value(&whole);
}

#[tokio::test]
async fn a_result_is_redacted_before_the_cap_and_a_value_a_tool_cut_leaves_no_start() {
    let dir = tempfile::tempdir().unwrap();
    // The cap falls in the middle of the value as the tool gave it.
    let padded = Fixed::text("padded", &format!("key: {VALUE} and more text after it"));
    // The tool itself cut at the cap, at the end of its text, in the middle of the value (a
    // page `http_fetch` read no further than the cap).
    let half = &VALUE[..VALUE.len() / 2];
    let cut = Fixed::new(
        "cut",
        Ok(ToolOutput {
            content: format!("API_KEY={half}"),
            truncated: true,
        }),
    );
    let b = broker_with(dir.path(), vec![padded, cut], 5 + VALUE.len() / 2);
    let answer = b.call(&request("main", 1, "padded", "{}")).await;
    let ToolResponse::Result {
        content, truncated, ..
    } = &answer
    else {
        panic!("{answer:?}");
    };
    assert!(*truncated);
    assert!(content.starts_with("key: {secret:"), "{content}");
    assert!(!content.contains(&VALUE[..4]), "{content}");
    let answer = b.call(&request("main", 1, "cut", "{}")).await;
    let ToolResponse::Result { content, .. } = &answer else {
        panic!("{answer:?}");
    };
    assert!(content.starts_with("API_KEY={secret:"), "{content}");
    assert!(!content.contains(&VALUE[..4]), "{content}");
    let (lines, whole) = audit(&b);
    assert_eq!(lines.last().unwrap().redacted, ["github"]);
    assert!(!whole.contains(half), "{whole}");

    // A cap that would keep fewer of the value's bytes than the guard takes for a cut start:
    // only redacting first keeps them out.
    let dir = tempfile::tempdir().unwrap();
    let short = CUT_PREFIX_MIN_BYTES - 1;
    let padded = Fixed::text("padded", &format!("key: {VALUE}"));
    let b = broker_with(dir.path(), vec![padded], 5 + short);
    let answer = b.call(&request("main", 1, "padded", "{}")).await;
    let ToolResponse::Result { content, .. } = &answer else {
        panic!("{answer:?}");
    };
    assert!(!content.contains(&VALUE[..short]), "{content}");
}

#[tokio::test]
async fn a_leak_from_check_or_call_is_denied_leak_and_its_audit_line_names_the_secret() {
    let dir = tempfile::tempdir().unwrap();
    let mut before = Scripted::new("before");
    before.check = Err(ToolError::leak("github", "the URL"));
    let mut redirect = Scripted::new("redirect");
    redirect.call = Err(ToolError::leak("github", "redirect 1's URL"));
    let b = broker_with(dir.path(), vec![Arc::new(before), Arc::new(redirect)], 4096);

    let answer = b.call(&request("main", 1, "before", "{}")).await;
    assert_eq!(
        answer,
        ToolResponse::Denied {
            reason: DenyReason::Leak,
            detail: Some("the URL would carry the secret \"github\"; nothing was sent".into()),
            labels: None,
        }
    );
    let answer = b.call(&request("main", 1, "redirect", "{}")).await;
    assert!(
        matches!(
            &answer,
            ToolResponse::Denied {
                reason: DenyReason::Leak,
                labels: Some(_),
                ..
            }
        ),
        "{answer:?}"
    );
    let (lines, _) = audit(&b);
    let leaks: Vec<_> = lines
        .iter()
        .map(|line| {
            (
                line.tool.as_str(),
                line.event,
                line.decision,
                line.reason,
                line.leak.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        leaks,
        [
            (
                "before",
                AuditEvent::Decided,
                AuditDecision::Denied,
                Some(DenyReason::Leak),
                Some("github")
            ),
            (
                "redirect",
                AuditEvent::Decided,
                AuditDecision::Allowed,
                None,
                None
            ),
            (
                "redirect",
                AuditEvent::Finished,
                AuditDecision::Denied,
                Some(DenyReason::Leak),
                Some("github")
            ),
        ]
    );
}

#[tokio::test]
async fn the_catalogue_is_redacted_and_says_where_brokerd_authenticates() {
    let dir = tempfile::tempdir().unwrap();
    let mut leaky = Scripted::new("leaky");
    leaky.description = format!("Runs with API_KEY={VALUE} set.");
    leaky.parameters = json!({
        "type": "object",
        "properties": {"token": {"type": "string", "default": base64(VALUE)}}
    });
    let mut mcp = Scripted::new("mcp_search");
    mcp.authenticated = true;
    let mut github = grant("http_fetch", &["main"]);
    github.hosts = vec!["api.github.com".into()];
    github
        .http
        .headers
        .insert("Authorization".into(), "Bearer {secret:github}".into());
    let plain = grant("http_fetch", &["other"]);
    let cfg = Config {
        secrets: vec![SecretConfig {
            name: "github".into(),
            file: Some("/run/secrets/github".into()),
        }],
        ..config(
            dir.path(),
            vec![
                grant("leaky", &["*"]),
                grant("mcp_search", &["*"]),
                grant("echo", &["*"]),
                github,
                plain,
            ],
            Limits::default(),
        )
    };
    let b =
        common::broker(&cfg, tools(vec![Arc::new(leaky), Arc::new(mcp)])).with_secrets(secrets());

    let catalogue = b.catalogue(&sid("main"));
    let text = serde_json::to_string(&catalogue).unwrap();
    assert_no_value(&text);
    let described = |name: &str| {
        catalogue
            .tools
            .iter()
            .find(|tool| tool.schema.name == name)
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .schema
            .clone()
    };
    let leaky = described("leaky");
    assert_eq!(
        leaky.description,
        format!("Runs with API_KEY={PLACEHOLDER} set.")
    );
    // The base64 of the whole value ends in characters made partly of padding bits.
    let default = leaky.parameters["properties"]["token"]["default"].as_str();
    assert!(default.unwrap().starts_with(PLACEHOLDER), "{default:?}");
    let authenticated = "authenticated as configured";
    for name in ["mcp_search", "http_fetch"] {
        let description = described(name).description.to_lowercase();
        assert!(description.contains(authenticated), "{name}: {description}");
        assert!(described(name).description.ends_with(AUTHENTICATED_NOTE));
    }
    for name in ["leaky", "echo"] {
        let description = described(name).description.to_lowercase();
        assert!(
            !description.contains(authenticated),
            "{name}: {description}"
        );
    }
    // The session whose grant of http_fetch attaches nothing is told nothing of it.
    let other = b.catalogue(&sid("other"));
    let fetch = other
        .tools
        .iter()
        .find(|tool| tool.schema.name == "http_fetch")
        .unwrap();
    assert!(
        !fetch
            .schema
            .description
            .to_lowercase()
            .contains(authenticated),
        "{}",
        fetch.schema.description
    );
}

#[tokio::test]
async fn after_a_reload_the_new_value_is_redacted() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("github");
    std::fs::write(&file, VALUE).unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let configs = [SecretConfig {
        name: "github".into(),
        file: Some(file.clone()),
    }];
    let store = SecretStore::load(&configs, None).unwrap();
    let cfg = config(
        dir.path(),
        vec![grant("echo", &["main"])],
        Limits::default(),
    );
    let b = common::broker(&cfg, tools(vec![])).with_secrets(store.clone());
    let new = "a-brand-new-token-value";
    std::fs::write(&file, new).unwrap();
    assert!(store.reload(&configs, None).is_empty());
    let arguments = json!({ "text": format!("{new} / {VALUE}") }).to_string();
    let answer = b.call(&request("main", 1, "echo", &arguments)).await;
    let ToolResponse::Result { content, .. } = answer else {
        panic!("{answer:?}");
    };
    // The old value is still looked for: a server started before the reload may hold it.
    assert_eq!(content, format!("{PLACEHOLDER} / {PLACEHOLDER}"));
}
