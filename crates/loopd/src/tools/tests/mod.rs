//! The tools seam (seed M2b-03): registry, dispatch table and the fake tools (the result cap is
//! tested beside it, in `text`). `asking`: a stand-in for brokerd's approvals, shared by the
//! tests of turns that wait for the owner.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

pub(crate) mod asking;

use crate::tools::{
    CALL_TOOL, Dispatch, Entry, FIND_TOOL, FakeTools, Registry, ToolPort, clock_schema, dispatch,
    echo_schema,
};
use bxcore::{CallId, DataClass, DenyReason, Labels, SessionId, Timestamp};
use proto::{ToolRequest, ToolResponse, ToolSchema};
use serde_json::json;

fn local(d: Dispatch) -> String {
    match d {
        Dispatch::Local(text) => text,
        other => panic!("expected Local, got {other:?}"),
    }
}

fn schema(name: &str, description: &str) -> ToolSchema {
    ToolSchema {
        name: name.to_string(),
        description: description.to_string(),
        parameters: json!({"type": "object", "properties": {}}),
    }
}

/// A registry with a mix of core and non-core tools, for the search rules.
fn files_registry() -> Registry {
    Registry::new(vec![
        Entry {
            schema: schema("read_file", "Reads a FILE under an allowed root."),
            core: false,
        },
        Entry {
            schema: schema("clock", "The current date and time."),
            core: true,
        },
        Entry {
            schema: schema("List_Dir", "Lists a directory."),
            core: false,
        },
        Entry {
            schema: schema("note", "Keep a note."),
            core: true,
        },
    ])
}

// ---- dispatch: find_tool ----

#[test]
fn find_tool_with_matches_lists_schemas_as_compact_json() {
    let text = local(dispatch(
        &Registry::m2b(),
        FIND_TOOL,
        r#"{"query": "ECHO"}"#,
    ));
    let line = serde_json::to_string(&echo_schema()).unwrap();
    assert!(line.starts_with(
        r#"{"name":"echo","description":"Returns its text argument unchanged.","parameters":{"#
    ));
    assert_eq!(
        text,
        format!("1 tool(s) match:\n{line}\nCall it with call_tool.")
    );

    // Two matches, one line each, in registry order.
    let registry = files_registry();
    let text = local(dispatch(&registry, FIND_TOOL, r#"{"query":"s a"}"#));
    assert_eq!(
        text,
        format!(
            "2 tool(s) match:\n{}\n{}\nCall it with call_tool.",
            serde_json::to_string(&registry.get("read_file").unwrap().schema).unwrap(),
            serde_json::to_string(&registry.get("List_Dir").unwrap().schema).unwrap()
        )
    );
}

#[test]
fn find_tool_without_match_or_with_bad_arguments_says_no_tool_matches() {
    let registry = Registry::m2b();
    for arguments in [
        r#"{"query": "teleport"}"#,
        r#"{"query": ""}"#,
        "not json",
        "",
        r#"{"query": 42}"#,
        r#"{"query": null}"#,
        r#"{"q": "echo"}"#,
        r#""echo""#,
        r#"["echo"]"#,
    ] {
        assert_eq!(
            local(dispatch(&registry, FIND_TOOL, arguments)),
            "No tool matches.",
            "arguments {arguments:?}"
        );
    }
}

// ---- dispatch: call_tool ----

#[test]
fn call_tool_of_a_non_core_tool_goes_to_the_port_as_that_tool() {
    let d = dispatch(
        &Registry::m2b(),
        CALL_TOOL,
        r#"{"name": "echo", "arguments": {"text": "hi \"there\""}}"#,
    );
    let Dispatch::Port { tool, arguments } = d else {
        panic!("expected Port, got {d:?}");
    };
    assert_eq!(tool, "echo");
    assert_eq!(arguments, r#"{"text":"hi \"there\""}"#);
    let value: serde_json::Value = serde_json::from_str(&arguments).unwrap();
    assert_eq!(value, json!({"text": "hi \"there\""}));
}

#[test]
fn call_tool_without_arguments_sends_an_empty_object() {
    let d = dispatch(&Registry::m2b(), CALL_TOOL, r#"{"name": "echo"}"#);
    assert_eq!(
        d,
        Dispatch::Port {
            tool: "echo".to_string(),
            arguments: "{}".to_string()
        }
    );
}

fn redirect(d: Dispatch) -> String {
    match d {
        Dispatch::Redirect(text) => text,
        other => panic!("expected Redirect, got {other:?}"),
    }
}

#[test]
fn call_tool_of_a_core_tool_is_redirected_saying_to_call_it_directly() {
    let text = redirect(dispatch(
        &Registry::m2b(),
        CALL_TOOL,
        r#"{"name": "clock", "arguments": {}}"#,
    ));
    assert!(text.contains("core tool"), "{text}");
    assert!(text.contains("directly"), "{text}");
    assert!(text.contains("clock"), "{text}");

    // find_tool and call_tool are core too, though they are not registry entries.
    for name in [FIND_TOOL, CALL_TOOL] {
        let arguments = json!({"name": name, "arguments": {"query": "x"}}).to_string();
        let text = redirect(dispatch(&Registry::m2b(), CALL_TOOL, &arguments));
        assert!(text.contains("core tool"), "{text}");
    }
}

#[test]
fn call_tool_of_an_unknown_or_missing_name_says_no_tool_named() {
    let registry = Registry::m2b();
    let text = local(dispatch(
        &registry,
        CALL_TOOL,
        r#"{"name": "teleport", "arguments": {}}"#,
    ));
    assert!(text.contains(r#"No tool named "teleport""#), "{text}");

    let text = local(dispatch(&registry, CALL_TOOL, r#"{"arguments": {}}"#));
    assert!(text.contains(r#"No tool named """#), "{text}");

    // An unknown name wins over bad arguments: the name is the first thing to fix.
    let text = local(dispatch(
        &registry,
        CALL_TOOL,
        r#"{"name": "teleport", "arguments": 3}"#,
    ));
    assert!(text.contains(r#"No tool named "teleport""#), "{text}");
}

#[test]
fn call_tool_with_non_object_arguments_needs_a_json_object() {
    let registry = Registry::m2b();
    for arguments in [
        "not json",
        "",
        "[1, 2]",
        r#""echo""#,
        "null",
        r#"{"name": "echo", "arguments": "{\"text\": \"hi\"}"}"#,
        r#"{"name": "echo", "arguments": [1]}"#,
        r#"{"name": "echo", "arguments": null}"#,
    ] {
        let text = local(dispatch(&registry, CALL_TOOL, arguments));
        assert!(
            text.contains("needs a JSON object"),
            "arguments {arguments:?}: {text}"
        );
    }
}

// ---- dispatch: everything else ----

#[test]
fn any_other_name_goes_to_the_port_unchanged() {
    let registry = Registry::m2b();
    for (name, arguments) in [
        ("echo", r#"{"text": "hi"}"#),
        ("teleport", r#"{"where": "mars"}"#),
        ("read_file", "not even json"),
        ("", ""),
    ] {
        assert_eq!(
            dispatch(&registry, name, arguments),
            Dispatch::Port {
                tool: name.to_string(),
                arguments: arguments.to_string()
            }
        );
    }
}

#[test]
fn clock_is_answered_locally_with_rfc3339() {
    let before = Timestamp::now();
    let text = local(dispatch(&Registry::m2b(), "clock", "{}"));
    let after = Timestamp::now();
    let at = Timestamp::parse(&text).unwrap();
    assert!(before <= at && at <= after, "{text}");
    assert!(text.ends_with('Z'), "{text}");
    // loopd's own tool: answered even by a registry that does not list it.
    let text = local(dispatch(&Registry::default(), "clock", "garbage"));
    Timestamp::parse(&text).unwrap();
}

// ---- Registry ----

#[test]
fn find_is_a_case_insensitive_substring_on_name_or_description() {
    let registry = files_registry();
    let names = |query: &str| -> Vec<String> {
        registry
            .find(query)
            .into_iter()
            .map(|s| s.name.clone())
            .collect()
    };
    assert_eq!(names("READ"), ["read_file"]);
    assert_eq!(names("list_dir"), ["List_Dir"]);
    assert_eq!(names("file"), ["read_file"]); // description "a FILE" and name "read_file"
    assert_eq!(names("directory"), ["List_Dir"]); // description only
    assert_eq!(names("e"), ["read_file", "clock", "List_Dir", "note"]); // registry order
    assert_eq!(names("time"), ["clock"]); // core tools are found too
    assert!(names("").is_empty());
    assert!(names("   ").is_empty());
    assert!(names("teleport").is_empty());
}

#[test]
fn core_schemas_are_core_entries_then_find_tool_then_call_tool() {
    let names: Vec<String> = files_registry()
        .core_schemas()
        .into_iter()
        .map(|s| s.name)
        .collect();
    assert_eq!(names, ["clock", "note", FIND_TOOL, CALL_TOOL]);

    let m2b = Registry::m2b().core_schemas();
    assert_eq!(m2b.len(), 3);
    assert_eq!(m2b[0], clock_schema());
}

#[test]
fn get_finds_an_entry_by_exact_name() {
    let registry = Registry::m2b();
    assert_eq!(
        registry.get("clock"),
        Some(&Entry {
            schema: clock_schema(),
            core: true
        })
    );
    assert_eq!(
        registry.get("echo"),
        Some(&Entry {
            schema: echo_schema(),
            core: false
        })
    );
    assert_eq!(registry.get("Echo"), None);
    assert_eq!(registry.get("find_tool"), None);
    assert_eq!(registry.get(""), None);
}

// ---- schemas ----

#[test]
fn the_four_schemas_read_as_the_seed_says() {
    let core = Registry::m2b().core_schemas();
    let find = &core[1];
    let call = &core[2];

    let clock = clock_schema();
    assert_eq!(clock.name, "clock");
    assert_eq!(
        clock.description,
        "The current date and time, as RFC 3339 in UTC."
    );
    assert_eq!(
        clock.parameters,
        json!({"type": "object", "properties": {}})
    );

    let echo = echo_schema();
    assert_eq!(echo.name, "echo");
    assert_eq!(echo.description, "Returns its text argument unchanged.");
    assert_eq!(echo.parameters["type"], "object");
    assert_eq!(echo.parameters["properties"]["text"]["type"], "string");
    assert_eq!(echo.parameters["required"], json!(["text"]));

    assert_eq!(find.name, "find_tool");
    assert_eq!(
        find.description,
        "Search for more tools by keyword. Returns the schemas of the tools that match."
    );
    assert_eq!(find.parameters["type"], "object");
    assert_eq!(find.parameters["properties"]["query"]["type"], "string");
    assert!(
        find.parameters["properties"]["query"]["description"]
            .as_str()
            .is_some_and(|d| !d.is_empty())
    );
    assert_eq!(find.parameters["required"], json!(["query"]));

    assert_eq!(call.name, "call_tool");
    assert_eq!(
        call.description,
        "Call a tool that find_tool returned. Pass its name and an arguments object that fits its schema."
    );
    assert_eq!(call.parameters["type"], "object");
    assert_eq!(call.parameters["properties"]["name"]["type"], "string");
    assert_eq!(
        call.parameters["properties"]["arguments"],
        json!({"type": "object"})
    );
    assert_eq!(call.parameters["required"], json!(["name", "arguments"]));
}

#[test]
fn tool_schema_round_trips_and_refuses_unknown_fields() {
    let echo = echo_schema();
    let text = serde_json::to_string(&echo).unwrap();
    assert_eq!(serde_json::from_str::<ToolSchema>(&text).unwrap(), echo);

    let extra = r#"{"name":"x","description":"d","parameters":{},"strict":true}"#;
    let err = serde_json::from_str::<ToolSchema>(extra).unwrap_err();
    assert!(err.to_string().contains("unknown field"), "{err}");
}

// ---- FakeTools ----

fn request(call: u64, tool: &str, arguments: &str) -> ToolRequest {
    ToolRequest {
        session: SessionId::new("main").unwrap(),
        turn: 1,
        call: CallId(call),
        tool: tool.to_string(),
        arguments: arguments.to_string(),
        context: Labels::PUBLIC,
        counts_for: None,
        approval: None,
    }
}

#[test]
fn fake_tools_answer_clock_with_the_time() {
    let fake = FakeTools::new();
    match fake.call(&request(1, "clock", "{}")) {
        ToolResponse::Result {
            content,
            class,
            untrusted,
            truncated,
        } => {
            Timestamp::parse(&content).unwrap();
            assert_eq!(class, DataClass::Public);
            assert!(!untrusted);
            assert!(!truncated);
        }
        other => panic!("expected Result, got {other:?}"),
    }
}

#[test]
fn fake_tools_echo_their_text() {
    let fake = FakeTools::new();
    assert_eq!(
        fake.call(&request(1, "echo", r#"{"text": "héllo\nworld"}"#)),
        ToolResponse::Result {
            content: "héllo\nworld".to_string(),
            class: DataClass::Public,
            untrusted: false,
            truncated: false,
        }
    );
    for arguments in ["{}", r#"{"text": 5}"#, "not json", r#""hi""#] {
        assert!(
            matches!(
                fake.call(&request(2, "echo", arguments)),
                ToolResponse::Failed { .. }
            ),
            "arguments {arguments:?}"
        );
    }
}

#[test]
fn fake_tools_deny_other_tools_and_record_every_call() {
    let fake = FakeTools::default();
    assert!(fake.calls().is_empty());
    assert_eq!(
        fake.call(&request(1, "read_file", r#"{"path": "/etc/passwd"}"#)),
        ToolResponse::denied(DenyReason::NoGrant, None)
    );
    fake.call(&request(2, "echo", r#"{"text": "a"}"#));
    fake.call(&request(3, "clock", "{}"));
    fake.call(&request(4, "echo", "{}"));
    let calls = fake.calls();
    assert_eq!(
        calls,
        vec![
            request(1, "read_file", r#"{"path": "/etc/passwd"}"#),
            request(2, "echo", r#"{"text": "a"}"#),
            request(3, "clock", "{}"),
            request(4, "echo", "{}"),
        ]
    );
}

#[test]
fn fake_tools_serve_as_a_shared_port() {
    // The turn engine holds the port as a trait object shared across sessions.
    let port: std::sync::Arc<dyn ToolPort> = std::sync::Arc::new(FakeTools::new());
    let threads: Vec<_> = (0..4)
        .map(|i| {
            let port = port.clone();
            std::thread::spawn(move || port.call(&request(i, "echo", r#"{"text": "x"}"#)))
        })
        .collect();
    for thread in threads {
        assert!(matches!(
            thread.join().unwrap(),
            ToolResponse::Result { .. }
        ));
    }
}

#[test]
fn denial_message_is_reexported() {
    assert_eq!(
        crate::tools::denial_message(DenyReason::NoGrant, None),
        bxcore::denial_message(DenyReason::NoGrant, None)
    );
}
