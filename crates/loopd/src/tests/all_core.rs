#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 34: when every tool is in the tools array, find_tool and call_tool are not offered
//! (a small model given them calls them at random and loops), and a call of a tool the array
//! lacks is answered with the tools the model has, never with a pointer to find_tool.

use crate::config::Config;
use crate::llama::tests::support::Fake;
use crate::tools::tests::asking::AskingPort;
use crate::tools::{CALL_TOOL, Entry, FIND_TOOL, Registry, clock_schema, echo_schema};
use crate::turn::{Runtime, Stop, run_turn, start_turn};
use bxcore::{LogRecord, SessionId, TurnEnd};

/// The model calls `call_tool` (not offered here), then answers.
const SCRIPT: &str = r#"default_reply = "done"
[[rule]]
when_role = "user"
tool_calls = [
  { name = "call_tool", arguments = '{"name":"echo","arguments":{"text":"hi"}}' },
]
"#;

#[test]
fn with_every_tool_core_the_model_is_told_its_tools_not_find_tool() {
    let fake = Fake::script(SCRIPT);
    let state = tempfile::tempdir().unwrap();
    let store = crate::session::Store::new(state.path()).unwrap();
    let cfg = Config::default();
    let blocking = fake.blocking();
    let client = fake.client();
    let registry = Registry::m2b().with(Entry {
        schema: echo_schema(),
        core: true,
    });
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
    start_turn(&mut session, "say hi").unwrap();
    let end = run_turn(&rt, &mut session, &Stop::default(), &mut |_| {}).unwrap();
    assert_eq!(end, TurnEnd::Done);
    let tools: Vec<String> = session
        .current_baseline()
        .unwrap()
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(tools, ["clock", "echo"]);
    let result = session
        .records()
        .iter()
        .find_map(|r| match r {
            LogRecord::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        result,
        "There is no tool named \"call_tool\" in your tools array: your tools are clock, echo; \
         if none of them can do it, tell the owner so."
    );
    assert!(port.requests().is_empty());
}

/// The model echoes a long text, then reads the rest of the cut result with read_output,
/// called directly though the array does not show it.
const READ_ON: &str = r#"default_reply = "done"
[[rule]]
when_role = "user"
tool_calls = [
  { name = "echo", arguments = '{"text":"0123456789012345678901234567890123456789012345678901234567890123456789"}' },
]
[[rule]]
when_role = "tool"
times = 1
tool_calls = [
  { name = "read_output", arguments = '{"handle":"out-1","offset":40}' },
]
"#;

#[test]
fn with_every_tool_core_a_cut_result_is_read_on_with_read_output_directly() {
    let fake = Fake::script(READ_ON);
    let state = tempfile::tempdir().unwrap();
    let store = crate::session::Store::new(state.path()).unwrap();
    let mut cfg = Config::default();
    cfg.r#loop.tool_result_cap_bytes = Some(40);
    let blocking = fake.blocking();
    let client = fake.client();
    let registry = Registry::m2b().with(Entry {
        schema: echo_schema(),
        core: true,
    });
    let rt = Runtime {
        cfg: &cfg,
        models: &crate::route::Targets::of(&client, &crate::config::Slots::default()),
        blocking: &blocking,
        port: &crate::tools::FakeTools::new(),
        registry: &registry,
        system: "You are a test.",
        n_ctx: fakellama::DEFAULT_N_CTX,
        children: &crate::subagent::Subagents,
        owner: &crate::turn::NoOwner,
        meter: &crate::turn::NoMeter,
    };
    let mut session = store.create(&SessionId::new("s").unwrap()).unwrap();
    start_turn(&mut session, "echo it").unwrap();
    run_turn(&rt, &mut session, &Stop::default(), &mut |_| {}).unwrap();
    let results: Vec<String> = session
        .records()
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert!(
        results[0].contains("read the rest with read_output {\"handle\": \"out-1\""),
        "{}",
        results[0]
    );
    assert!(results[1].starts_with("0123456789"), "{}", results[1]);
}

/// Issue 34: when every tool is in the array, find_tool and call_tool are left out (a small
/// model given them calls them at random and loops), and so is read_output (called directly
/// when a cut result says so, see `turn::call`).
#[test]
fn with_every_tool_core_there_is_nothing_to_find_and_no_call_tool() {
    let all_core = Registry::new(vec![
        Entry {
            schema: clock_schema(),
            core: true,
        },
        Entry {
            schema: echo_schema(),
            core: true,
        },
        Entry {
            schema: proto::ToolSchema {
                name: proto::READ_OUTPUT.to_string(),
                ..echo_schema()
            },
            core: false,
        },
    ]);
    let names: Vec<String> = all_core
        .core_schemas()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["clock", "echo"]);
    assert!(Registry::default().core_schemas().is_empty());
    // One tool left out, and both come back, with read_output reached through them.
    let one_out = all_core.with(Entry {
        schema: echo_schema(),
        core: false,
    });
    let names: Vec<String> = one_out.core_schemas().into_iter().map(|s| s.name).collect();
    assert_eq!(names, ["clock", FIND_TOOL, CALL_TOOL]);
}
