//! Reaching inside through a granted name: `weather.test` is granted, but resolves (through
//! brokerd's `[http_fetch] resolve`, as a hostile DNS would answer) to 127.0.0.1, where an
//! internal server listens. The model fetches it directly, and a page on an allowed server
//! redirects it to the granted name on another port. brokerd refuses both before connecting,
//! without quoting the redirect; the internal servers see nothing. Once the owner grants
//! loopback (`networks`) and the other port (`ports`), the same fetch works.

use super::common::{
    audit_reasons, call_tool, http_server_with, page_server_with, script, start_brokerd,
};
use bxcore::{DenyReason, LogRecord, SessionId, ToolOutcome, TurnEnd};
use e2e::{Running, Stack};
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The path the redirect points to, which must never reach the model or the audit log.
const INTERNAL_PATH: &str = "/internal-admin-7731";

/// Serves a 302 to `location` for every request on loopback, and records each request's path.
fn redirect_server(
    location: impl Fn() -> String + Send + 'static,
) -> (u16, Arc<Mutex<Vec<String>>>) {
    http_server_with(move |_, _| {
        format!(
            "HTTP/1.1 302 Found\r\nlocation: {}\r\ncontent-length: 0\r\n\
             connection: close\r\n\r\n",
            location()
        )
    })
}

/// brokerd's config: `weather.test` resolves to 127.0.0.1 and is granted on `ports`, with
/// `networks` when given.
fn grants(ports: &[u16], networks: &str) -> String {
    format!(
        "[[grants]]\ntool = \"http_fetch\"\nhosts = [\"weather.test\"]\nports = {ports:?}\n\
         {networks}\n[http_fetch.resolve]\n\"weather.test\" = [\"127.0.0.1\"]\n"
    )
}

/// Runs one task in which the model fetches `url`, then answers once it sees `then_on`;
/// gives the tool outcomes and the session's records. Checks that the turn ended done.
fn run_task(dir: &Path, url: &str, then_on: &str) -> (Vec<ToolOutcome>, Vec<LogRecord>) {
    let steps = [
        (
            "user",
            "weather",
            call_tool("http_fetch", &format!("{{\"url\":\"{url}\"}}")),
        ),
        ("tool", then_on, "reply = \"Done.\"".to_string()),
    ];
    let stack = Stack::start(e2e::StackOptions {
        script: script(&steps),
        loopd_toml: format!("[broker]\nsocket = {:?}\n", dir.join("brokerd.sock")),
        ..Default::default()
    })
    .unwrap();
    let run = stack.boxctl(&["task", "--session", "victim", "What is the weather?"]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    let records = store.read(&SessionId::new("victim").unwrap()).unwrap();
    // Not necessarily the last record: the fetch's summary is made after the turn ends, and may
    // be appended while this reads.
    assert!(
        records.iter().any(|r| matches!(
            r,
            LogRecord::TurnEnd {
                end: TurnEnd::Done,
                ..
            }
        )),
        "{records:?}"
    );
    let outcomes = records
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult { outcome, .. } => Some(*outcome),
            _ => None,
        })
        .collect();
    (outcomes, records)
}

fn start(dir: &Path, ports: &[u16], networks: &str) -> Running {
    start_brokerd(dir, &grants(ports, networks))
}

#[test]
fn a_granted_name_resolving_to_loopback_reaches_no_internal_server() {
    let (internal, seen) = page_server_with(|_| "internal admin page".to_string());
    let dir = tempfile::tempdir().unwrap();
    // The port is granted: only the address stands between the model and the server.
    let _brokerd = start(dir.path(), &[internal], "");
    let url = format!("http://weather.test:{internal}{INTERNAL_PATH}");
    let (outcomes, _) = run_task(dir.path(), &url, "not on the allowed hosts");
    assert_eq!(
        outcomes,
        [ToolOutcome::Denied {
            reason: DenyReason::HostNotAllowed
        }]
    );
    assert!(
        seen.lock().unwrap().is_empty(),
        "the internal server was reached"
    );
    let (reasons, audit) = audit_reasons(dir.path());
    assert_eq!(reasons, ["host_not_allowed"], "{audit}");
}

#[test]
fn a_redirect_to_the_granted_name_on_another_port_is_not_followed() {
    let (other, other_seen) = page_server_with(|_| "internal admin page".to_string());
    let (allowed, allowed_seen) =
        redirect_server(move || format!("http://weather.test:{other}{INTERNAL_PATH}"));
    let dir = tempfile::tempdir().unwrap();
    let _brokerd = start(dir.path(), &[allowed], "networks = [\"127.0.0.0/8\"]");
    let url = format!("http://weather.test:{allowed}/page");
    let (outcomes, records) = run_task(dir.path(), &url, "not on the allowed hosts");
    assert_eq!(
        outcomes,
        [ToolOutcome::Denied {
            reason: DenyReason::HostNotAllowed
        }]
    );
    assert_eq!(*allowed_seen.lock().unwrap(), ["/page"]);
    assert!(
        other_seen.lock().unwrap().is_empty(),
        "the other port was reached"
    );
    // The refusal is in brokerd's words: the Location is not quoted to the model.
    let result = records
        .iter()
        .find_map(|r| match r {
            LogRecord::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap();
    assert!(
        result.contains("redirect to a port outside the grant"),
        "{result}"
    );
    assert!(!result.contains(INTERNAL_PATH), "{result}");
    assert!(!result.contains(&other.to_string()), "{result}");
}

#[test]
fn with_loopback_and_both_ports_granted_the_redirect_is_followed() {
    let (other, other_seen) = page_server_with(|_| "Sunny, 21 degrees.".to_string());
    let (allowed, allowed_seen) =
        redirect_server(move || format!("http://weather.test:{other}{INTERNAL_PATH}"));
    let dir = tempfile::tempdir().unwrap();
    let _brokerd = start(
        dir.path(),
        &[allowed, other],
        "networks = [\"127.0.0.0/8\"]",
    );
    let url = format!("http://weather.test:{allowed}/page");
    let (outcomes, _) = run_task(dir.path(), &url, "Sunny");
    assert_eq!(outcomes, [ToolOutcome::Ok]);
    assert_eq!(*allowed_seen.lock().unwrap(), ["/page"]);
    assert_eq!(*other_seen.lock().unwrap(), [INTERNAL_PATH]);
    let (reasons, audit) = audit_reasons(dir.path());
    assert_eq!(reasons, ["allowed"], "{audit}");
}
