//! Script rules: order, times, conditions, default reply, scripted errors, parse errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use fakellama::{Script, ScriptError};
use serde_json::json;

fn content(v: &serde_json::Value) -> String {
    v["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

#[tokio::test]
async fn rules_answer_in_order_with_times() {
    let (server, addr) = scripted(
        "default_reply = \"fallback\"\n\
         [[rule]]\nname = \"step 1\"\ntimes = 1\nreply = \"first\"\n\
         [[rule]]\nname = \"step 2\"\ntimes = 2\nreply = \"second\"\n\
         [[rule]]\nwhen_contains = \"never\"\nreply = \"unused\"\n",
    )
    .await;
    let mut got = Vec::new();
    for _ in 0..4 {
        got.push(content(&chat(addr, &user("go")).await.json()));
    }
    assert_eq!(got, ["first", "second", "second", "fallback"]);
    let rules: Vec<_> = server.requests().into_iter().map(|r| r.rule).collect();
    assert_eq!(
        rules,
        [
            Some("step 1".into()),
            Some("step 2".into()),
            Some("step 2".into()),
            None
        ]
    );
    server.shutdown().await;
}

#[tokio::test]
async fn rules_match_role_and_content_of_the_last_message() {
    let (server, addr) = scripted(
        "[[rule]]\nwhen_role = \"tool\"\nreply = \"got the tool result\"\n\
         [[rule]]\nwhen_role = \"user\"\nwhen_contains = \"weather\"\nreply = \"sunny\"\n\
         [[rule]]\nwhen_contains = \"time\"\nreply = \"noon\"\n",
    )
    .await;
    assert_eq!(
        content(&chat(addr, &user("what's the weather")).await.json()),
        "sunny"
    );
    assert_eq!(
        content(&chat(addr, &user("what time")).await.json()),
        "noon"
    );
    assert_eq!(
        content(&chat(addr, &user("hello")).await.json()),
        fakellama::FIXED_REPLY
    );
    let tool = json!({"messages":[
        {"role":"user","content":"weather"},
        {"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function","function":{"name":"w","arguments":"{}"}}]},
        {"role":"tool","tool_call_id":"a","content":"rain"}]});
    assert_eq!(
        content(&chat(addr, &tool).await.json()),
        "got the tool result"
    );
    // Content given as text parts is matched too.
    let parts =
        json!({"messages":[{"role":"user","content":[{"type":"text","text":"the weather?"}]}]});
    assert_eq!(content(&chat(addr, &parts).await.json()), "sunny");
    server.shutdown().await;
}

#[tokio::test]
async fn scripted_error_has_its_status_and_type() {
    let (server, addr) = scripted(
        "[[rule]]\nname = \"down\"\ntimes = 1\nerror = { status = 503, type = \"unavailable_error\", message = \"Loading model\" }\n",
    )
    .await;
    let reply = chat(addr, &user("x")).await;
    assert_eq!(reply.status, 503);
    assert_eq!(
        reply.json(),
        json!({"error":{"code":503,"message":"Loading model","type":"unavailable_error"}})
    );
    assert_eq!(
        chat(addr, &user("x")).await.status,
        200,
        "times = 1 used up"
    );
    let records = server.requests();
    assert_eq!(records[0].status, 503);
    assert_eq!(records[0].slot_used, None);
    assert_eq!(records[1].status, 200);
    server.shutdown().await;
}

fn rule_error(text: &str) -> (String, String) {
    match Script::parse(text).unwrap_err() {
        ScriptError::Rule { rule, reason } => (rule, reason),
        other => panic!("not a rule error: {other}"),
    }
}

#[test]
fn parse_errors_name_the_rule_and_the_key() {
    let (rule, reason) =
        rule_error("[[rule]]\nreply = \"a\"\n[[rule]]\nname = \"step two\"\nrepyl = \"b\"\n");
    assert_eq!(rule, "rule 2 (\"step two\")");
    assert!(reason.contains("repyl"), "{reason}");

    let (rule, reason) = rule_error("[[rule]]\ntimes = \"twice\"\n");
    assert_eq!(rule, "rule 1");
    assert!(
        reason.contains("times") || reason.contains("integer"),
        "{reason}"
    );

    let (rule, reason) = rule_error("[[rule]]\ntool_calls = [{ name = \"x\", args = \"{}\" }]\n");
    assert_eq!(rule, "rule 1");
    assert!(reason.contains("args"), "{reason}");

    let err = Script::parse("defualt_reply = \"x\"\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("defualt_reply"), "{err}");
}

#[test]
fn contradictory_rules_are_rejected() {
    let cases = [
        (
            "[[rule]]\nname = \"e\"\nreply = \"x\"\nerror = { status = 500, type = \"server_error\", message = \"m\" }\n",
            "reply",
        ),
        (
            "[[rule]]\nname = \"e\"\nerror = { status = 200, type = \"server_error\", message = \"m\" }\n",
            "status",
        ),
        ("[[rule]]\nname = \"e\"\ntimes = 0\n", "times"),
        (
            "[[rule]]\nname = \"e\"\ntool_calls = [{ name = \"c\" }]\nerror_mid_stream = { type = \"server_error\", message = \"m\" }\n",
            "tool_calls",
        ),
    ];
    for (text, word) in cases {
        let (rule, reason) = rule_error(text);
        assert_eq!(rule, "rule 1 (\"e\")");
        assert!(reason.contains(word), "{reason} should mention {word}");
    }
}

#[test]
fn load_reads_a_file_and_names_a_missing_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.toml");
    std::fs::write(&path, "default_reply = \"hey\"\n[[rule]]\nreply = \"r\"\n").unwrap();
    let script = Script::load(&path).unwrap();
    assert_eq!(script.default_reply(), "hey");
    assert_eq!(script.rules().len(), 1);
    let err = Script::load(dir.path().join("missing.toml"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing.toml"), "{err}");
}
