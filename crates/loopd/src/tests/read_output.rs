#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Structured truncation: a capped result is stored under a handle beside the session with its
//! labels, and `read_output` reads pages of it back under the same labels.

use crate::config::Config;
use crate::llama::tests::support::Fake;
use crate::outputs::{self, Page, READ_OUTPUT};
use crate::session::{Session, Store};
use crate::tools::{Registry, ToolPort};
use crate::turn::{Runtime, Stop, run_turn, start_turn};
use bxcore::{CallId, DataClass, Labels, LogRecord, SessionId, ToolOutcome, TurnEnd};
use proto::{Catalogue, ToolRequest, ToolResponse};

const SYSTEM: &str = "You are a test.";
const CAP: usize = 40;

/// A port whose `echo` answers a long private, untrusted page.
struct LongPort;

fn long_text() -> String {
    (0..40).map(|i| format!("line {i} é\n")).collect()
}

impl ToolPort for LongPort {
    fn call(&self, request: &ToolRequest) -> ToolResponse {
        assert_ne!(
            request.tool, READ_OUTPUT,
            "read_output never reaches the port"
        );
        ToolResponse::Result {
            content: long_text(),
            class: DataClass::Private,
            untrusted: true,
            truncated: false,
        }
    }
}

struct Bed {
    _state: tempfile::TempDir,
    store: Store,
    cfg: Config,
}

impl Bed {
    fn new() -> Bed {
        let state = tempfile::tempdir().unwrap();
        let mut cfg = Config::default();
        cfg.r#loop.tool_result_cap_bytes = Some(CAP);
        Bed {
            store: Store::new(state.path()).unwrap(),
            _state: state,
            cfg,
        }
    }

    fn task(&self, script: &str, registry: &Registry, id: &str) -> (TurnEnd, Session) {
        let fake = Fake::script(script);
        let blocking = fake.blocking();
        let client = fake.client();
        let rt = Runtime {
            cfg: &self.cfg,
            models: &crate::route::Targets::of(&client, &crate::config::Slots::default()),
            blocking: &blocking,
            port: &LongPort,
            registry,
            system: SYSTEM,
            n_ctx: fakellama::DEFAULT_N_CTX,
            children: &crate::subagent::Subagents,
            owner: &crate::turn::NoOwner,
            meter: &crate::turn::NoMeter,
        };
        let mut session = self
            .store
            .open_or_create(&SessionId::new(id).unwrap())
            .unwrap();
        start_turn(&mut session, "go").unwrap();
        let end = run_turn(&rt, &mut session, &Stop::default(), &mut |_| {}).unwrap();
        (end, session)
    }
}

fn results(session: &Session) -> Vec<(String, Labels, bool, ToolOutcome)> {
    session
        .records()
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult {
                content,
                class,
                untrusted,
                truncated,
                outcome,
                ..
            } => Some((
                content.clone(),
                Labels::new(*class, *untrusted),
                *truncated,
                *outcome,
            )),
            _ => None,
        })
        .collect()
}

/// A script: the user's message calls echo, then each tool result is answered by the next of
/// `calls` (a tool name and JSON arguments, escaped for TOML), then "ok".
fn script(calls: &[(&str, &str)]) -> String {
    let mut s = String::from(
        "[[rule]]\nwhen_role = \"user\"\ntimes = 1\ntool_calls = [{ name = \"call_tool\", \
         arguments = \"{\\\"name\\\":\\\"echo\\\",\\\"arguments\\\":{\\\"text\\\":\\\"x\\\"}}\" }]\n",
    );
    // fakellama takes the first rule that matches and has answers left, so each call is a
    // one-time rule in order.
    for (name, args) in calls {
        s.push_str(&format!(
            "[[rule]]\nwhen_role = \"tool\"\ntimes = 1\ntool_calls = [{{ name = \"{name}\", arguments = \"{args}\" }}]\n"
        ));
    }
    s.push_str("[[rule]]\nwhen_role = \"tool\"\nreply = \"ok\"\n");
    s
}

#[test]
fn a_capped_result_is_stored_with_its_labels_and_the_model_is_told_the_handle() {
    let bed = Bed::new();
    let (end, session) = bed.task(&script(&[]), &Registry::m2b(), "store");
    assert_eq!(end, TurnEnd::Done);
    let (content, labels, truncated, outcome) = results(&session).remove(0);
    assert_eq!(outcome, ToolOutcome::Ok);
    assert!(truncated);
    assert_eq!(labels, Labels::new(DataClass::Private, true));
    let full = long_text();
    assert!(content.starts_with(&full[..CAP]), "{content}");
    assert!(
        content.contains(&format!(
            "[truncated: {CAP} of {} bytes shown; read the rest with call_tool \
             {{\"name\": \"read_output\", \"arguments\": {{\"handle\": \"out-1\", \"offset\": {CAP}}}}}]",
            full.len()
        )),
        "{content}"
    );
    let stored = outputs::load(session.dir(), "out-1").unwrap();
    assert_eq!(stored.content, full);
    assert_eq!(stored.labels(), Labels::new(DataClass::Private, true));
    assert!(session.dir().join("outputs/out-1.json").is_file());
}

#[test]
fn read_output_returns_later_pages_under_the_stored_labels() {
    let bed = Bed::new();
    let page = r#"{\"name\":\"read_output\",\"arguments\":{\"handle\":\"out-1\",\"offset\":40}}"#;
    let last = r#"{\"name\":\"read_output\",\"arguments\":{\"handle\":\"out-1\",\"offset\":400,\"length\":1000}}"#;
    let (end, session) = bed.task(
        &script(&[("call_tool", page), ("call_tool", last)]),
        &Registry::m2b(),
        "pages",
    );
    assert_eq!(end, TurnEnd::Done);
    let found = results(&session);
    assert_eq!(found.len(), 3, "{found:?}");
    let full = long_text();
    let (second, labels, truncated, outcome) = &found[1];
    assert_eq!(*outcome, ToolOutcome::Ok);
    assert!(!truncated);
    assert_eq!(
        *labels,
        Labels::new(DataClass::Private, true),
        "labels kept"
    );
    let end_of_page = outputs::floor_boundary(&full, 2 * CAP);
    assert!(
        second.starts_with(&format!("{}\n[bytes 40..", &full[CAP..end_of_page])),
        "{second}"
    );
    assert!(
        second.contains(&format!("\"offset\": {end_of_page}")),
        "{second}"
    );
    let (third, labels, _, _) = &found[2];
    assert_eq!(*labels, Labels::new(DataClass::Private, true));
    // The length asked for is held to the cap.
    let end_of_last = outputs::floor_boundary(&full, 400 + CAP);
    assert!(third.starts_with(&full[400..end_of_last]), "{third}");
    assert!(
        third.contains(&format!("bytes 400..{end_of_last} of")),
        "{third}"
    );
    assert_eq!(
        crate::baseline::context_labels(&session),
        Labels::new(DataClass::Private, true)
    );
}

#[test]
fn read_output_refuses_unknown_handles_and_offsets_past_the_end() {
    let bed = Bed::new();
    let unknown = r#"{\"name\":\"read_output\",\"arguments\":{\"handle\":\"out-99\"}}"#;
    let past =
        r#"{\"name\":\"read_output\",\"arguments\":{\"handle\":\"out-1\",\"offset\":100000}}"#;
    let (_, session) = bed.task(
        &script(&[("call_tool", unknown), ("call_tool", past)]),
        &Registry::m2b(),
        "refuse",
    );
    let found = results(&session);
    assert_eq!(found[1].3, ToolOutcome::Failed);
    assert_eq!(found[1].0, "There is no output \"out-99\" in this session.");
    assert_eq!(found[1].1, Labels::PUBLIC);
    assert_eq!(found[2].3, ToolOutcome::Failed);
    assert!(
        found[2].0.contains("past the end of \"out-1\""),
        "{}",
        found[2].0
    );
    drop(session);

    // Another session's handle is not found: handles are per session.
    let other = r#"{\"name\":\"read_output\",\"arguments\":{\"handle\":\"out-1\"}}"#;
    let fake = Fake::script(&format!(
        "[[rule]]\nwhen_role = \"user\"\ntimes = 1\ntool_calls = [{{ name = \"call_tool\", arguments = \"{other}\" }}]\n\
         [[rule]]\nwhen_role = \"tool\"\nreply = \"ok\"\n"
    ));
    let blocking = fake.blocking();
    let client = fake.client();
    let registry = Registry::m2b();
    let rt = Runtime {
        cfg: &bed.cfg,
        models: &crate::route::Targets::of(&client, &crate::config::Slots::default()),
        blocking: &blocking,
        port: &LongPort,
        registry: &registry,
        system: SYSTEM,
        n_ctx: fakellama::DEFAULT_N_CTX,
        children: &crate::subagent::Subagents,
        owner: &crate::turn::NoOwner,
        meter: &crate::turn::NoMeter,
    };
    let mut session = bed.store.create(&SessionId::new("other").unwrap()).unwrap();
    start_turn(&mut session, "go").unwrap();
    run_turn(&rt, &mut session, &Stop::default(), &mut |_| {}).unwrap();
    let found = results(&session);
    assert_eq!(found[0].0, "There is no output \"out-1\" in this session.");
    assert_eq!(found[0].3, ToolOutcome::Failed);
}

#[test]
fn read_output_in_the_tools_array_is_called_directly() {
    let bed = Bed::new();
    let registry = crate::toolset::registry(
        &Catalogue {
            session: SessionId::new("direct").unwrap(),
            tools: vec![proto::CatalogueTool {
                schema: crate::tools::echo_schema(),
                labels: bxcore::Labels::PUBLIC,
            }],
        },
        &[READ_OUTPUT.to_string()],
    );
    let names: Vec<String> = registry
        .core_schemas()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["clock", READ_OUTPUT, "find_tool", "call_tool"]);
    let direct = r#"{\"handle\":\"out-1\",\"offset\":40}"#;
    let (end, session) = bed.task(&script(&[(READ_OUTPUT, direct)]), &registry, "direct");
    assert_eq!(end, TurnEnd::Done);
    let found = results(&session);
    assert!(
        found[0]
            .0
            .contains("read the rest with read_output {\"handle\": \"out-1\", \"offset\": 40}"),
        "{}",
        found[0].0
    );
    assert_eq!(found[1].3, ToolOutcome::Ok, "{}", found[1].0);
    assert_eq!(found[1].1, Labels::new(DataClass::Private, true));
}

#[test]
fn pages_respect_the_cap_and_character_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let text = "é".repeat(50);
    let labels = Labels::new(DataClass::Private, false);
    let handle = outputs::store(dir.path(), CallId(7), &text, labels).unwrap();
    assert_eq!(handle, "out-7");
    let page = |args: &str| outputs::read_page(dir.path(), args, 11, true);
    // 11 bytes is five and a half characters: the page stops at five.
    match page(r#"{"handle": "out-7", "offset": 1, "length": 500}"#) {
        Page::Text { content, labels: l } => {
            assert_eq!(l, labels);
            assert!(content.starts_with(&format!("{}\n[bytes 0..10 of 100", "é".repeat(5))));
            assert!(content.contains("read_output {\"handle\": \"out-7\", \"offset\": 10}"));
        }
        other => panic!("{other:?}"),
    }
    // A length shorter than one character still returns that character.
    match page(r#"{"handle": "out-7", "offset": 98, "length": 1}"#) {
        Page::Text { content, .. } => {
            assert_eq!(content, "é\n[bytes 98..100 of 100 shown; end of output]");
        }
        other => panic!("{other:?}"),
    }
    for (args, why) in [
        (r#"{"handle": "out-7", "offset": 100}"#, "past the end"),
        (r#"{"handle": "out-7", "offset": -1}"#, "whole number"),
        (r#"{"handle": "../x"}"#, "no output"),
        (r#"{"handle": "out-1/../out-7"}"#, "no output"),
        (r#"{"offset": 0}"#, "needs a string \"handle\""),
        ("[]", "needs a JSON object"),
    ] {
        match page(args) {
            Page::Refused(message) => assert!(message.contains(why), "{args}: {message}"),
            other => panic!("{args}: {other:?}"),
        }
    }
}
