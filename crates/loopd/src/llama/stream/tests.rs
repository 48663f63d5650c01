//! Unit tests: this file is compiled only under #[cfg(test)] (see where its module is declared).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

fn run(events: &[&str]) -> (Vec<ChatEvent>, Result<Completion, InferError>) {
    let mut seen = Vec::new();
    let mut assembler = Assembler::new();
    for data in events {
        match assembler.data(data, &mut |e: &ChatEvent| seen.push(e.clone())) {
            Ok(Progress::More) => {}
            Ok(Progress::Done) => return (seen, Ok(assembler.finish())),
            Err(e) => return (seen, Err(e)),
        }
    }
    panic!("no [DONE]");
}

#[test]
fn llama_stream_text_usage_and_timings() {
    let (events, done) = run(&[
        r#"{"choices":[{"index":0,"finish_reason":null,"delta":{"role":"assistant","content":null}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"reasoning_content":"hm"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"Hel"}}]}"#,
        r#"{"choices":[{"index":0,"delta":{"content":"lo"}}]}"#,
        r#"{"choices":[{"index":0,"finish_reason":"stop","delta":{}}]}"#,
        r#"{"choices":[],"usage":{"prompt_tokens":237,"completion_tokens":35,"total_tokens":272,
            "prompt_tokens_details":{"cached_tokens":236}},
           "timings":{"cache_n":236,"prompt_n":1,"prompt_ms":30.9,"predicted_n":35,"predicted_ms":661}}"#,
        "[DONE]",
    ]);
    assert_eq!(
        events,
        [
            ChatEvent::Reasoning("hm".into()),
            ChatEvent::Content("Hel".into()),
            ChatEvent::Content("lo".into()),
        ]
    );
    let done = done.unwrap();
    assert_eq!(done.content.as_deref(), Some("Hello"));
    assert_eq!(done.reasoning.as_deref(), Some("hm"));
    assert_eq!(done.finish_reason, "stop");
    assert_eq!(
        done.usage,
        Usage {
            prompt_tokens: 237,
            completion_tokens: 35,
            cached_tokens: 236
        }
    );
    let t = done.timings.unwrap();
    assert_eq!((t.cache_n, t.prompt_n, t.predicted_n), (236, 1, 35));
}

#[test]
fn llama_stream_tool_calls_from_fragments() {
    let (events, done) = run(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"id":"A","type":"function","function":{"name":"clock","arguments":""}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"id":"B","function":{"name":"echo"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"arguments":"}"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"{\"t\":1}"}}]}}]}"#,
        r#"{"choices":[{"finish_reason":"tool_calls","delta":{}}]}"#,
        "[DONE]",
    ]);
    assert!(events.is_empty());
    let done = done.unwrap();
    let calls: Vec<(&str, &str, &str)> = done
        .tool_calls
        .iter()
        .map(|c| (c.id.as_str(), c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(calls, [("A", "clock", "{}"), ("B", "echo", "{\"t\":1}")]);
    assert_eq!(done.content, None);
    assert_eq!(done.finish_reason, "tool_calls");
}

#[test]
fn llama_stream_fragments_without_index_or_id() {
    let (_, done) = run(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"x","function":{"name":"a","arguments":"1"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"function":{"arguments":"2"}}]}}]}"#,
        r#"{"choices":[{"delta":{"tool_calls":[{"id":"y","function":{"name":"b"}}]}}]}"#,
        r#"{"choices":[{"delta":{"content":""}}]}"#,
        "[DONE]",
    ]);
    let done = done.unwrap();
    assert_eq!(done.tool_calls.len(), 2);
    assert_eq!(done.tool_calls[0].arguments, "12");
    assert_eq!(done.tool_calls[1].name, "b");
    assert_eq!(done.finish_reason, "stop");
    assert_eq!(done.usage, Usage::default());
    let (_, done) = run(&[
        r#"{"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"a"}}]}}]}"#,
        "[DONE]",
    ]);
    assert_eq!(done.unwrap().tool_calls[0].id, "call_0");
}

#[test]
fn llama_stream_error_events_keep_type_and_message() {
    let (events, done) = run(&[
        r#"{"choices":[{"delta":{"content":"par"}}]}"#,
        r#"{"error":{"code":500,"message":"boom","type":"server_error"}}"#,
    ]);
    assert_eq!(events, [ChatEvent::Content("par".into())]);
    let e = done.unwrap_err();
    assert_eq!(
        e,
        InferError::Stream {
            kind: Some("server_error".into()),
            message: "boom".into()
        }
    );
    assert_eq!(
        e.to_string(),
        "llama-server's answer broke off: boom (server_error)"
    );
    let (_, done) = run(&[
        r#"{"error":{"code":400,"type":"exceed_context_size_error","message":"m","n_prompt_tokens":9,"n_ctx":8}}"#,
    ]);
    assert!(matches!(
        done,
        Err(InferError::SessionFull {
            n_prompt_tokens: 9,
            n_ctx: 8,
            ..
        })
    ));
    let (_, done) = run(&["not json"]);
    assert!(matches!(done, Err(InferError::Stream { kind: None, .. })));
    let assembler = Assembler::new();
    assert_eq!(
        assembler.error_event(r#"{"message":"old","type":"server_error"}"#),
        InferError::Stream {
            kind: Some("server_error".into()),
            message: "old".into()
        }
    );
}

#[test]
fn llama_stream_has_streamed_only_after_output() {
    let mut a = Assembler::new();
    let mut ignore = |_: &ChatEvent| {};
    a.data(
        r#"{"choices":[{"delta":{"role":"assistant","content":null}}]}"#,
        &mut ignore,
    )
    .unwrap();
    assert!(!a.has_streamed());
    a.data(r#"{"choices":[{"delta":{"content":"x"}}]}"#, &mut ignore)
        .unwrap();
    assert!(a.has_streamed());
}
