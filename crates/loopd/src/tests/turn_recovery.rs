#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Sessions that must survive what a weak model does (issue 12, points 2 and 7): a tool call
//! cut at the token limit is kept in the log but never sent back as a call (llama-server
//! refuses a history holding one whose arguments are not JSON), logs written before that rule
//! are healed when read, a model call the server refuses fails its turn, not the session, and
//! a model that repeats a call is told so and its turn ends early.

use crate::config::Config;
use crate::llama::tests::support::Fake;
use crate::session::{Session, Store};
use crate::tools::{FakeTools, Registry};
use crate::turn::{CUT_CALL, Runtime, Stop, run_turn, start_turn};
use bxcore::{CallId, LogRecord, SessionId, Timestamp, ToolCall, ToolOutcome, TurnEnd};
use serde_json::Value;

const SYSTEM: &str = "You are a test.";

/// A cut `call_tool` of echo: its arguments end inside a string, as a cut answer's do.
const CUT_ARGUMENTS: &str = r#"{"name":"echo","arguments":{"text":"word word wo"#;

struct Bed {
    fake: Fake,
    _state: tempfile::TempDir,
    store: Store,
    cfg: Config,
}

impl Bed {
    fn new(script: &str) -> Bed {
        let state = tempfile::tempdir().unwrap();
        Bed {
            fake: Fake::script(script),
            store: Store::new(state.path()).unwrap(),
            _state: state,
            cfg: Config::default(),
        }
    }

    /// Runs one task on `session` with a client tweaked by `max_tokens`; returns the end.
    /// Nothing reaches the tool port.
    fn task(&self, session: &mut Session, text: &str, max_tokens: Option<u32>) -> TurnEnd {
        let (end, calls) = self.task_with_port(session, text, max_tokens);
        assert!(calls.is_empty(), "no call reached the port: {calls:?}");
        end
    }

    /// [`Bed::task`], also giving what reached the tool port.
    fn task_with_port(
        &self,
        session: &mut Session,
        text: &str,
        max_tokens: Option<u32>,
    ) -> (TurnEnd, Vec<proto::ToolRequest>) {
        let blocking = self.fake.blocking();
        let client = self.fake.client_with(|o| o.max_tokens = max_tokens);
        let registry = Registry::m2b();
        let port = FakeTools::new();
        let rt = Runtime {
            cfg: &self.cfg,
            models: &crate::route::Targets::of(&client, &crate::config::Slots::default()),
            blocking: &blocking,
            port: &port,
            registry: &registry,
            system: SYSTEM,
            n_ctx: fakellama::DEFAULT_N_CTX,
            children: &crate::subagent::Subagents,
            owner: &crate::turn::NoOwner,
            meter: &crate::turn::NoMeter,
        };
        start_turn(session, text).unwrap();
        let end = run_turn(&rt, session, &Stop::default(), &mut |_| {}).unwrap();
        (end, port.calls())
    }
}

/// The messages of a recorded request body.
fn messages(body: &Value) -> Vec<Value> {
    body["messages"].as_array().unwrap().clone()
}

/// Whether any message of `body` carries tool calls.
fn has_tool_calls(body: &Value) -> bool {
    messages(body)
        .iter()
        .any(|m| m["tool_calls"].as_array().is_some_and(|c| !c.is_empty()))
}

#[test]
fn a_call_cut_at_the_token_limit_is_logged_but_never_sent_back_as_a_call() {
    let long_text = "word ".repeat(80);
    let script = format!(
        r#"
[[rule]]
when_role = "user"
times = 1
tool_calls = [{{ name = "call_tool", arguments = "{{\"name\":\"echo\",\"arguments\":{{\"text\":\"{long_text}\"}}}}" }}]
[[rule]]
when_role = "user"
when_contains = "cut off"
reply = "ok"
"#
    );
    let bed = Bed::new(&script);
    let mut session = bed.store.create(&SessionId::new("cut").unwrap()).unwrap();
    assert_eq!(
        bed.task(&mut session, "echo a lot", Some(40)),
        TurnEnd::Done
    );
    // For the record: the cut call as the model wrote it, and the "not run" result.
    let cut_call = session.records().iter().find_map(|r| match r {
        LogRecord::Assistant { tool_calls, .. } => tool_calls.first().cloned(),
        _ => None,
    });
    let cut_call = cut_call.expect("the cut call is in the log");
    assert!(serde_json::from_str::<Value>(&cut_call.arguments).is_err());
    let found: Vec<(String, ToolOutcome)> = session
        .records()
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult {
                content, outcome, ..
            } => Some((content.clone(), *outcome)),
            _ => None,
        })
        .collect();
    assert_eq!(found, [(CUT_CALL.to_string(), ToolOutcome::Failed)]);
    // To the model: the answer without the call, then the result as a user message.
    let requests = bed.fake.server.requests();
    assert_eq!(requests.len(), 2);
    assert!(requests.iter().all(|r| r.status == 200), "{requests:?}");
    let sent = messages(&requests[1].body);
    assert!(!has_tool_calls(&requests[1].body), "{sent:?}");
    let last = sent.last().unwrap();
    assert_eq!(last["role"], "user");
    assert_eq!(
        last["content"],
        format!("Result of your call to call_tool: {CUT_CALL}")
    );
    assert_eq!(sent[sent.len() - 2]["role"], "assistant");
}

/// A log as loopd wrote it before calls were left out: a cut call, its "not run" result and
/// the 500 that failed the turn; then a call whose arguments were never JSON, refused by
/// loopd, next to a good one.
fn write_old_turns(session: &mut Session) {
    let time = Timestamp::now();
    let call = |id: &str, name: &str, arguments: &str| ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: arguments.into(),
    };
    let result = |n: u64, id: &str, content: &str, outcome| LogRecord::ToolResult {
        time,
        call: CallId(n),
        tool_call_id: id.into(),
        content: content.into(),
        class: bxcore::DataClass::Public,
        untrusted: false,
        truncated: false,
        outcome,
        by_loopd: true,
    };
    let records = vec![
        LogRecord::User {
            time,
            turn: 1,
            content: "echo a lot".into(),
            task_id: None,
        },
        LogRecord::Assistant {
            time,
            content: String::new(),
            reasoning: None,
            tool_calls: vec![call("cut-1", "call_tool", CUT_ARGUMENTS)],
            usage: None,
        },
        result(1, "cut-1", CUT_CALL, ToolOutcome::Failed),
        LogRecord::TurnEnd {
            time,
            turn: 1,
            end: TurnEnd::Failed {
                reason: "llama-server failed (HTTP 500, server_error): Failed to parse tool \
                         call arguments as JSON"
                    .into(),
            },
        },
        LogRecord::User {
            time,
            turn: 2,
            content: "what time is it?".into(),
            task_id: None,
        },
        LogRecord::Assistant {
            time,
            content: "Let me see.".into(),
            reasoning: None,
            tool_calls: vec![call("bad-2", "clock", "{tz:"), call("ok-3", "clock", "{}")],
            usage: None,
        },
        result(
            2,
            "bad-2",
            "The arguments of clock are not valid JSON.",
            ToolOutcome::Failed,
        ),
        result(3, "ok-3", "2026-01-01T00:00:00Z", ToolOutcome::Ok),
        LogRecord::TurnEnd {
            time,
            turn: 2,
            end: TurnEnd::Interrupted,
        },
    ];
    for record in records {
        session.append(record).unwrap();
    }
}

#[test]
fn a_log_written_with_cut_calls_before_the_fix_takes_new_tasks() {
    let bed = Bed::new("default_reply = \"Fine.\"\n");
    let mut session = bed.store.create(&SessionId::new("old").unwrap()).unwrap();
    write_old_turns(&mut session);
    assert_eq!(bed.task(&mut session, "and now?", None), TurnEnd::Done);
    let requests = bed.fake.server.requests();
    assert_eq!(requests[0].status, 200, "{:?}", requests[0]);
    let sent = messages(&requests[0].body);
    let calls: Vec<&str> = sent
        .iter()
        .filter_map(|m| m["tool_calls"].as_array())
        .flatten()
        .map(|c| c["id"].as_str().unwrap())
        .collect();
    assert_eq!(calls, ["ok-3"], "only the good call is sent as a call");
    let roles: Vec<&str> = sent.iter().map(|m| m["role"].as_str().unwrap()).collect();
    assert_eq!(
        roles,
        [
            "system",
            "user",
            "assistant",
            "user",
            "user",
            "assistant",
            "tool",
            "user",
            "user"
        ]
    );
    assert_eq!(
        sent[3]["content"],
        format!("Result of your call to call_tool: {CUT_CALL}")
    );
    assert_eq!(
        sent[7]["content"],
        "Result of your call to clock: The arguments of clock are not valid JSON."
    );
}

#[test]
fn a_model_call_refused_as_malformed_fails_its_turn_and_the_next_task_works() {
    let script = r#"
[[rule]]
when_contains = "first"
times = 1
error = { status = 400, type = "invalid_request_error", message = "Invalid message" }
[[rule]]
when_contains = "second"
times = 1
error = { status = 500, type = "server_error", message = "Failed to parse the messages" }
"#;
    let bed = Bed::new(&format!("default_reply = \"Fine.\"\n{script}"));
    let mut session = bed.store.create(&SessionId::new("r").unwrap()).unwrap();
    for text in ["first", "second"] {
        let end = bed.task(&mut session, text, None);
        assert!(
            matches!(&end, TurnEnd::Failed { reason } if reason.contains("llama-server failed")),
            "{end:?}"
        );
    }
    assert_eq!(bed.task(&mut session, "third", None), TurnEnd::Done);
    let ends: Vec<bool> = session
        .records()
        .iter()
        .filter_map(|r| match r {
            LogRecord::TurnEnd { end, .. } => Some(*end == TurnEnd::Done),
            _ => None,
        })
        .collect();
    assert_eq!(ends, [false, false, true]);
}

#[test]
fn a_model_that_repeats_a_call_is_told_so_and_its_turn_ends_early_as_max_steps() {
    let echo = r#"{\"name\":\"echo\",\"arguments\":{\"text\":\"x\"}}"#;
    let mut bed = Bed::new(&format!(
        "[[rule]]\ntool_calls = [{{ name = \"call_tool\", arguments = \"{echo}\" }}]\n"
    ));
    // Counted repeats (`max_repeated_calls`), not the refusal of a repeat at once.
    bed.cfg.r#loop.refuse_repeat_at_once = false;
    assert_eq!(bed.cfg.r#loop.max_steps, 32);
    let mut session = bed.store.create(&SessionId::new("loop").unwrap()).unwrap();
    let (end, calls) = bed.task_with_port(&mut session, "echo x", None);
    assert_eq!(end, TurnEnd::MaxSteps);
    assert_eq!(calls.len(), 2, "two calls ran: {calls:?}");
    // Two refusals (the model was told, then did it again); after the first, one call with no
    // tools asks for its answer, and the turn ended after one last call with no tools (issue
    // 34; this model only calls echo, so it gives no answer either time).
    assert_eq!(bed.fake.server.requests().len(), 6);
    let results: Vec<(ToolOutcome, bool)> = session
        .records()
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult {
                content, outcome, ..
            } => Some((
                *outcome,
                content.starts_with("Not run: you already called echo"),
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            (ToolOutcome::Ok, false),
            (ToolOutcome::Ok, false),
            (ToolOutcome::Failed, true),
            (ToolOutcome::Failed, true)
        ]
    );
    let note = session.records().iter().any(
        |r| matches!(r, LogRecord::Note { text, .. } if text.contains("loop.max_repeated_calls")),
    );
    assert!(note, "the log says why the turn ended");
}
