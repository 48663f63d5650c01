//! The llama client against fakellama: streamed answers, the request body, tool calls,
//! reasoning, usage, the API key, and a Unix socket.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::llama::tests::support::{Fake, chat_once, chat_retry, client_for, content_of, user};
use crate::llama::{ChatEvent, ChatMessage, ChatRequest, Client, InferError, ToolSchema};
use bxcore::ToolCall;
use serde_json::{Value, json};

fn tools() -> Vec<ToolSchema> {
    vec![
        ToolSchema {
            name: "clock".into(),
            description: "The current time.".into(),
            parameters: json!({"type":"object","properties":{}}),
        },
        ToolSchema {
            name: "echo".into(),
            description: "Says it back.".into(),
            parameters: json!({"type":"object","properties":{"text":{"type":"string"}}}),
        },
    ]
}

#[test]
fn client_is_send_and_sync() {
    fn shared<T: Send + Sync>() {}
    shared::<Client>();
}

#[test]
fn plain_answer_streams_content_in_order_with_usage_and_timings() {
    let fake = Fake::start(fakellama::Options::default());
    let client = fake.client();
    let (events, done) = chat_retry(&fake.blocking(), &client, &user("hello there"));
    let done = done.unwrap();
    assert!(events.len() > 1, "one event per token: {events:?}");
    assert!(events.iter().all(|e| matches!(e, ChatEvent::Content(_))));
    assert_eq!(content_of(&events), fakellama::FIXED_REPLY);
    assert_eq!(done.content.as_deref(), Some(fakellama::FIXED_REPLY));
    assert_eq!(done.reasoning, None);
    assert!(done.tool_calls.is_empty());
    assert_eq!(done.finish_reason, "stop");

    let seen = fake.server.requests();
    assert_eq!(seen.len(), 1);
    let r = &seen[0];
    assert!(r.stream);
    assert_eq!(done.usage.prompt_tokens, r.prompt_tokens as u64);
    assert_eq!(done.usage.completion_tokens, r.completion_tokens as u64);
    let timings = done.timings.unwrap();
    assert_eq!(timings.prompt_n, r.prompt_n as u64);
    assert_eq!(timings.predicted_n, r.completion_tokens as u64);

    // The same prompt again: the slot's cache is reused and reported.
    let (_, again) = chat_retry(&fake.blocking(), &client, &user("hello there"));
    let again = again.unwrap();
    let r = &fake.server.requests()[1];
    assert!(r.cache_n > 0);
    assert_eq!(again.usage.cached_tokens, r.cache_n as u64);
    assert_eq!(again.timings.unwrap().cache_n, r.cache_n as u64);
}

#[test]
fn request_body_has_llama_server_fields_and_openai_messages() {
    let fake = Fake::start(fakellama::Options::default());
    let client = fake.client();
    let request = ChatRequest {
        slot: 1,
        messages: vec![
            ChatMessage::System {
                content: "be brief".into(),
            },
            ChatMessage::User {
                content: "time?".into(),
            },
            ChatMessage::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: "call-1".into(),
                    name: "clock".into(),
                    arguments: "{}".into(),
                }],
            },
            ChatMessage::Tool {
                tool_call_id: "call-1".into(),
                content: "12:00".into(),
            },
        ],
        tools: tools(),
        thinking: true,
        banned: Vec::new(),
    };
    chat_once(&fake.blocking(), &client, &request).1.unwrap();
    chat_once(&fake.blocking(), &client, &user("no tools"))
        .1
        .unwrap();

    let seen = fake.server.requests();
    let body = &seen[0].body;
    assert_eq!(seen[0].slot_used, Some(1));
    assert_eq!(body["id_slot"], 1);
    assert_eq!(body["cache_prompt"], true);
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"], json!({"include_usage": true}));
    assert_eq!(
        body["chat_template_kwargs"],
        json!({"enable_thinking": true})
    );
    assert_eq!(body["tool_choice"], "auto");
    assert_eq!(
        body["tools"][0],
        json!({"type":"function","function":{"name":"clock","description":"The current time.",
            "parameters":{"type":"object","properties":{}}}})
    );
    assert_eq!(body["tools"].as_array().unwrap().len(), 2);
    assert_eq!(
        body["messages"],
        json!([
            {"role":"system","content":"be brief"},
            {"role":"user","content":"time?"},
            {"role":"assistant","content":"","tool_calls":[
                {"id":"call-1","type":"function","function":{"name":"clock","arguments":"{}"}}]},
            {"role":"tool","tool_call_id":"call-1","content":"12:00"},
        ])
    );

    let body = seen[1].body.as_object().unwrap();
    assert!(!body.contains_key("tools"), "{body:?}");
    assert!(!body.contains_key("tool_choice"), "{body:?}");
    assert_eq!(
        body["chat_template_kwargs"]["enable_thinking"],
        Value::Bool(false)
    );
    assert_eq!(body["id_slot"], 0);
}

#[test]
fn tool_calls_are_assembled_from_fragments() {
    let fake = Fake::script(
        r#"
        [[rule]]
        tool_calls = [{ name = "clock", arguments = "{}" },
                      { name = "echo", arguments = '{"text": "hello there, a long-ish text"}' }]
        "#,
    );
    let mut request = user("what time is it?");
    request.tools = tools();
    let (events, done) = chat_retry(&fake.blocking(), &fake.client(), &request);
    let done = done.unwrap();
    assert!(events.is_empty(), "{events:?}");
    assert_eq!(done.finish_reason, "tool_calls");
    assert_eq!(done.content, None);
    let calls: Vec<(&str, &str)> = done
        .tool_calls
        .iter()
        .map(|c| (c.name.as_str(), c.arguments.as_str()))
        .collect();
    assert_eq!(
        calls,
        [
            ("clock", "{}"),
            ("echo", r#"{"text": "hello there, a long-ish text"}"#)
        ]
    );
    assert!(!done.tool_calls[0].id.is_empty());
    assert_ne!(done.tool_calls[0].id, done.tool_calls[1].id);
}

#[test]
fn reasoning_streams_as_its_own_events_when_thinking() {
    let fake = Fake::script(
        r#"
        [[rule]]
        reasoning = "Let me think about it."
        reply = "The answer."
        ping = true
        "#,
    );
    let client = fake.client();
    let mut request = user("question");
    request.thinking = true;
    let (events, done) = chat_retry(&fake.blocking(), &client, &request);
    let done = done.unwrap();
    let reasoning: String = events
        .iter()
        .filter_map(|e| match e {
            ChatEvent::Reasoning(t) => Some(t.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(reasoning, "Let me think about it.");
    let first_content = events
        .iter()
        .position(|e| matches!(e, ChatEvent::Content(_)))
        .unwrap();
    assert!(
        events[..first_content]
            .iter()
            .all(|e| matches!(e, ChatEvent::Reasoning(_)))
    );
    assert_eq!(content_of(&events), "The answer.");
    assert_eq!(done.reasoning.as_deref(), Some("Let me think about it."));

    let (events, done) = chat_retry(&fake.blocking(), &client, &user("question"));
    assert!(!events.iter().any(|e| matches!(e, ChatEvent::Reasoning(_))));
    assert_eq!(done.unwrap().reasoning, None);
}

#[test]
fn ping_comments_are_skipped() {
    let fake = Fake::script("[[rule]]\nreply = \"pong pong\"\nping = true\n");
    let (events, done) = chat_retry(&fake.blocking(), &fake.client(), &user("ping?"));
    assert_eq!(content_of(&events), "pong pong");
    assert_eq!(done.unwrap().content.as_deref(), Some("pong pong"));
}

#[test]
fn api_key_is_sent_and_its_absence_is_a_401() {
    let fake = Fake::start(fakellama::Options {
        api_key: Some("sekrit".into()),
        ..Default::default()
    });
    let keyed = fake.client_with(|o| o.api_key = Some("sekrit".into()));
    chat_retry(&fake.blocking(), &keyed, &user("hi")).1.unwrap();
    fake.blocking().wait(keyed.props()).unwrap();

    let (events, e) = chat_retry(&fake.blocking(), &fake.client(), &user("hi"));
    assert!(events.is_empty(), "a 401 is not retried: {events:?}");
    match e.unwrap_err() {
        InferError::Server {
            status,
            kind,
            message,
        } => {
            assert_eq!(status, 401);
            assert_eq!(kind, "authentication_error");
            assert_eq!(message, "Invalid API Key");
        }
        other => panic!("expected a 401, got {other:?}"),
    }
}

#[test]
fn api_key_file_from_the_config_is_used() {
    let fake = Fake::start(fakellama::Options {
        api_key: Some("from-file".into()),
        ..Default::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let key_file = dir.path().join("llama.key");
    std::fs::write(&key_file, "from-file\n").unwrap();
    let llama = crate::config::Llama {
        url: Some(fake.server.url()),
        api_key_file: Some(key_file),
        ..Default::default()
    };
    let options = crate::llama::ClientOptions::from_config(&llama).unwrap();
    let client = Client::new(options);
    chat_retry(&fake.blocking(), &client, &user("hi"))
        .1
        .unwrap();
}

#[test]
fn unix_socket_endpoint_works() {
    let dir = tempfile::tempdir().unwrap();
    let fake = Fake::start(fakellama::Options {
        listen: fakellama::Listen::Unix(dir.path().join("llama.sock")),
        ..Default::default()
    });
    let url = fake.server.url();
    assert!(url.starts_with("unix:"), "{url}");
    let client = client_for(&url, |_| {});
    let (events, done) = chat_retry(&fake.blocking(), &client, &user("over a socket"));
    assert_eq!(content_of(&events), fakellama::FIXED_REPLY);
    assert!(done.is_ok());
    let props = fake.blocking().wait(client.props()).unwrap();
    assert_eq!(props.n_ctx, fakellama::DEFAULT_N_CTX);
}

#[test]
fn the_async_client_runs_inside_tasks() {
    let fake = Fake::start(fakellama::Options::default());
    let client = fake.client();
    let got = fake.rt.block_on(async move {
        tokio::spawn(async move {
            let never = tokio_util::sync::CancellationToken::new();
            let mut count = 0usize;
            let done = client
                .chat_with_retry(&user("hi"), &mut |_: &_| count += 1, &never)
                .await;
            let health = client.health().await;
            (done.map(|d| d.content), count, health)
        })
        .await
        .unwrap()
    });
    assert_eq!(got.0.unwrap().as_deref(), Some(fakellama::FIXED_REPLY));
    assert!(got.1 > 0);
    assert_eq!(got.2.unwrap(), crate::llama::Health::Ok);
}

#[test]
fn a_blocking_wait_inside_an_async_task_is_an_error_not_a_panic() {
    let fake = Fake::start(fakellama::Options::default());
    let (client, blocking) = (fake.client(), fake.blocking());
    let got = fake.rt.block_on(async move {
        tokio::spawn(async move { blocking.wait(client.health()) })
            .await
            .unwrap()
    });
    let e = got.unwrap_err();
    assert!(matches!(e, InferError::OnRuntimeThread(_)), "{e:?}");
    assert!(e.to_string().contains("only for turn threads"), "{e}");
    assert!(fake.server.requests().is_empty(), "nothing may be sent");
}
