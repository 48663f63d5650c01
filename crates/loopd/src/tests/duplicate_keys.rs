#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Tool calls whose arguments hold a key twice (issue 32.6): serde_json keeps the last `path`,
//! the owner reading the approval the first. loopd refuses such a call before anything is sent
//! to brokerd, at any depth (a `call_tool`'s inner arguments too), and tells the model which
//! key to give once.

use crate::config::Config;
use crate::llama::tests::support::Fake;
use crate::tools::tests::asking::AskingPort;
use crate::tools::{Entry, Registry, echo_schema};
use crate::turn::{Runtime, Stop, run_turn, start_turn};
use bxcore::{LogRecord, SessionId, ToolOutcome, TurnEnd};

/// The model calls `echo` (a core tool here, so the call goes to the port as it is written)
/// with `path` twice, then `call_tool` with `path` twice inside its `arguments`, then
/// `call_tool` naming the tool twice; then it is done.
const SCRIPT: &str = r#"default_reply = "done"
[[rule]]
when_role = "user"
tool_calls = [
  { name = "echo", arguments = '{"path":"/safe","path":"/etc/evil"}' },
  { name = "call_tool", arguments = '{"name":"echo","arguments":{"path":"/safe","content":"x","path":"/etc/evil"}}' },
  { name = "call_tool", arguments = '{"name":"clock","arguments":{},"name":"echo"}' },
]
"#;

#[test]
fn arguments_holding_a_key_twice_are_refused_in_loopd_and_never_reach_brokerd() {
    let fake = Fake::script(SCRIPT);
    let state = tempfile::tempdir().unwrap();
    let store = crate::session::Store::new(state.path()).unwrap();
    let cfg = Config::default();
    let blocking = fake.blocking();
    let client = fake.client();
    // One tool left out of the array, so call_tool is offered (issue 34: it is not when
    // every tool is in the array).
    let note = proto::ToolSchema {
        name: "note".to_string(),
        ..echo_schema()
    };
    let registry = Registry::m2b()
        .with(Entry {
            schema: echo_schema(),
            core: true,
        })
        .with(Entry {
            schema: note,
            core: false,
        });
    // A port that asks the owner about every `echo`: a call that got there would be an
    // approval request.
    let port = AskingPort::new();
    let rt = Runtime {
        cfg: &cfg,
        models: &crate::route::Targets::of(&client, &crate::config::Slots::default()),
        blocking: &blocking,
        port: &port,
        registry: &registry,
        system: "You are a test.",
        n_ctx: fakellama::DEFAULT_N_CTX,
        children: &crate::subagent::Subagents,
        owner: &crate::turn::NoOwner,
        meter: &crate::turn::NoMeter,
    };
    let mut session = store.create(&SessionId::new("s").unwrap()).unwrap();
    start_turn(&mut session, "write it").unwrap();
    let end = run_turn(&rt, &mut session, &Stop::default(), &mut |_| {}).unwrap();
    assert_eq!(end, TurnEnd::Done);

    assert!(port.requests().is_empty(), "{:?}", port.requests());
    let records = session.records();
    assert!(
        !records
            .iter()
            .any(|r| matches!(r, LogRecord::ApprovalRequested { .. })),
        "the owner was never asked"
    );
    let results: Vec<(&str, ToolOutcome)> = records
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult {
                content, outcome, ..
            } => Some((content.as_str(), *outcome)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            (
                "The arguments of echo hold the key \"path\" twice: give each key once.",
                ToolOutcome::Failed
            ),
            (
                "The arguments of call_tool hold the key \"path\" twice: give each key once.",
                ToolOutcome::Failed
            ),
            (
                "The arguments of call_tool hold the key \"name\" twice: give each key once.",
                ToolOutcome::Failed
            ),
        ]
    );
}
