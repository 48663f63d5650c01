//! The shapes of chat answers: plain, streamed, tools, errors, limits.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use common::*;
use fakellama::Options;
use serde_json::{Value, json};

const TOOLS: &str = r#"[{"type":"function","function":{"name":"clock","parameters":{"type":"object","properties":{}}}}]"#;

fn tools() -> Value {
    serde_json::from_str(TOOLS).unwrap()
}

#[tokio::test]
async fn non_streaming_shape() {
    let (server, addr) = scripted("[[rule]]\nreasoning = \"let me think\"\ntool_calls = [{ name = \"clock\", arguments = \"{}\" }]\n").await;
    let mut body = user("what time is it?");
    body["model"] = json!("my-model");
    body["tools"] = tools();
    let reply = chat(addr, &body).await;
    assert_eq!(reply.status, 200);
    assert!(reply.content_type.starts_with("application/json"));
    let v = reply.json();
    assert!(v["id"].as_str().unwrap().starts_with("chatcmpl-"));
    assert_eq!(v["object"], "chat.completion");
    assert!(v["created"].as_u64().unwrap() > 1_600_000_000);
    assert_eq!(
        v["model"],
        fakellama::MODEL_PATH,
        "the request's model is ignored"
    );
    let choice = &v["choices"][0];
    assert_eq!(choice["index"], 0);
    assert_eq!(choice["finish_reason"], "tool_calls");
    let message = &choice["message"];
    assert_eq!(message["role"], "assistant");
    assert_eq!(message["content"], "", "content is \"\" not null");
    assert_eq!(message["reasoning_content"], "let me think");
    let call = &message["tool_calls"][0];
    assert_eq!(call["type"], "function");
    assert!(call["id"].as_str().unwrap().len() >= 16);
    assert_eq!(call["function"], json!({"name":"clock","arguments":"{}"}));

    let usage = &v["usage"];
    let timings = &v["timings"];
    let prompt = usage["prompt_tokens"].as_u64().unwrap();
    let completion = usage["completion_tokens"].as_u64().unwrap();
    assert!(prompt > 0 && completion > 0);
    assert_eq!(usage["total_tokens"].as_u64().unwrap(), prompt + completion);
    assert_eq!(usage["prompt_tokens_details"]["cached_tokens"], 0);
    assert_eq!(timings["cache_n"], 0);
    assert_eq!(timings["prompt_n"].as_u64().unwrap(), prompt);
    assert_eq!(timings["predicted_n"].as_u64().unwrap(), completion);
    for key in [
        "prompt_ms",
        "predicted_ms",
        "prompt_per_second",
        "predicted_per_second",
    ] {
        assert!(timings[key].as_f64().unwrap() > 0.0, "{key}");
    }

    server.shutdown().await;
}

#[tokio::test]
async fn default_reply_without_reasoning_fields() {
    let (server, addr) = server(Options::default()).await;
    let v = chat(addr, &user("hi")).await.json();
    let message = &v["choices"][0]["message"];
    assert_eq!(message["content"], fakellama::FIXED_REPLY);
    assert!(message.get("reasoning_content").is_none());
    assert!(message.get("tool_calls").is_none());
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    server.shutdown().await;
}

#[tokio::test]
async fn streaming_shape() {
    let (server, addr) =
        scripted("[[rule]]\nreasoning = \"hmm, well\"\nreply = \"The time is noon.\"\n").await;
    let mut body = user("time?");
    body["stream"] = json!(true);
    body["stream_options"] = json!({"include_usage": true});
    let reply = chat(addr, &body).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.content_type, "text/event-stream");
    let events = reply.events();
    let data = data(&events);
    assert_eq!(
        data[0]["choices"][0]["delta"],
        json!({"role":"assistant","content":null})
    );
    for chunk in &data {
        assert_eq!(chunk["object"], "chat.completion.chunk");
        assert!(chunk["id"].as_str().unwrap().starts_with("chatcmpl-"));
        assert!(chunk["created"].is_u64());
        assert_eq!(chunk["model"], fakellama::MODEL_PATH);
    }
    assert_eq!(joined_delta(&events, "reasoning_content"), "hmm, well");
    assert_eq!(joined_delta(&events, "content"), "The time is noon.");
    let content_chunks = data
        .iter()
        .filter(|c| c["choices"][0]["delta"]["content"].is_string())
        .count();
    assert!(content_chunks > 3, "content arrives in several chunks");

    let n = data.len();
    let finish = &data[n - 2];
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert_eq!(finish["choices"][0]["delta"], json!({}));
    let last = &data[n - 1];
    assert_eq!(last["choices"], json!([]));
    assert!(last["usage"]["completion_tokens"].as_u64().unwrap() > 0);
    assert!(last["timings"]["predicted_n"].as_u64().unwrap() > 0);
    assert_eq!(events.last(), Some(&Sse::Done));

    // Without include_usage: no usage chunk, timings on the finish chunk.
    body["stream_options"] = json!({"include_usage": false});
    let events = chat(addr, &body).await.events();
    let data = common::data(&events);
    let finish = data.last().unwrap();
    assert_eq!(finish["choices"][0]["finish_reason"], "stop");
    assert!(finish.get("usage").is_none());
    assert!(finish["timings"].is_object());
    assert_eq!(events.last(), Some(&Sse::Done));
    server.shutdown().await;
}

#[tokio::test]
async fn ping_comment_mid_stream() {
    let (server, addr) = scripted("[[rule]]\nreply = \"a b c\"\nping = true\n").await;
    let mut body = user("x");
    body["stream"] = json!(true);
    let events = chat(addr, &body).await.events();
    let ping = events
        .iter()
        .position(|e| *e == Sse::Comment(String::new()))
        .expect("a ping");
    assert!(
        ping > 0 && ping < events.len() - 2,
        "ping in the middle: {events:?}"
    );
    assert_eq!(joined_delta(&events, "content"), "a b c");
    assert_eq!(events.last(), Some(&Sse::Done));
    server.shutdown().await;
}

#[tokio::test]
async fn error_mid_stream() {
    let (server, addr) = scripted("[[rule]]\nreply = \"partial answer\"\nerror_mid_stream = { type = \"server_error\", message = \"boom\" }\n").await;
    let mut body = user("x");
    body["stream"] = json!(true);
    let reply = chat(addr, &body).await;
    assert_eq!(reply.status, 200);
    let events = reply.events();
    assert_eq!(joined_delta(&events, "content"), "partial answer");
    assert!(!events.contains(&Sse::Done));
    let Some(Sse::Data(last)) = events.last() else {
        panic!("{events:?}")
    };
    assert_eq!(last["error"]["type"], "server_error");
    assert_eq!(last["error"]["message"], "boom");
    assert!(
        data(&events)
            .iter()
            .all(|c| c["choices"][0]["finish_reason"].is_null())
    );

    // Not streamed: an HTTP 500 with that error.
    let reply = chat(addr, &user("x")).await;
    assert_eq!(reply.status, 500);
    assert_eq!(reply.error_type(), "server_error");
    server.shutdown().await;
}

#[tokio::test]
async fn tool_calls_are_streamed_as_fragments() {
    let (server, addr) = scripted(
        "[[rule]]\nreply = \"Checking.\"\ntool_calls = [{ name = \"clock\", arguments = '{\"tz\":\"UTC\"}' }, { name = \"echo\", arguments = '{\"text\":\"hello world\"}' }]\n",
    )
    .await;
    let mut body = user("x");
    body["tools"] = tools();
    body["stream"] = json!(true);
    let events = chat(addr, &body).await.events();
    let data = data(&events);
    let mut ids = Vec::new();
    let mut names = Vec::new();
    let mut arguments = vec![String::new(), String::new()];
    for chunk in &data {
        let Some(calls) = chunk["choices"][0]["delta"]["tool_calls"].as_array() else {
            continue;
        };
        for call in calls {
            let i = call["index"].as_u64().unwrap() as usize;
            if let Some(id) = call["id"].as_str() {
                // As llama-server: id, name and the first argument fragment together.
                assert_eq!(call["type"], "function");
                assert_eq!(call["function"]["arguments"], "{");
                ids.push(id.to_owned());
                names.push(call["function"]["name"].as_str().unwrap().to_owned());
                arguments[i].push('{');
            } else {
                assert!(call.get("type").is_none() && call["function"].get("name").is_none());
                assert_eq!(ids.len(), i + 1, "fragments follow their call's start");
                arguments[i].push_str(call["function"]["arguments"].as_str().unwrap());
            }
        }
    }
    assert_eq!(names, ["clock", "echo"]);
    assert_eq!(ids.len(), 2);
    assert_ne!(ids[0], ids[1]);
    assert_eq!(arguments, [r#"{"tz":"UTC"}"#, r#"{"text":"hello world"}"#]);
    let fragments = data
        .iter()
        .filter(|c| {
            c["choices"][0]["delta"]["tool_calls"][0]["id"].is_null()
                && c["choices"][0]["delta"]["tool_calls"].is_array()
        })
        .count();
    assert!(fragments > 2, "arguments arrive in several fragments");
    assert_eq!(joined_delta(&events, "content"), "Checking.");
    assert_eq!(
        data[data.len() - 1]["choices"][0]["finish_reason"],
        "tool_calls"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn tool_call_without_tools_comes_back_as_content() {
    let (server, addr) =
        scripted("[[rule]]\ntool_calls = [{ name = \"clock\", arguments = \"{}\" }]\n").await;
    let v = chat(addr, &user("x")).await.json();
    let message = &v["choices"][0]["message"];
    assert!(message.get("tool_calls").is_none());
    assert_eq!(message["content"], r#"{"name":"clock","arguments":{}}"#);
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    // tool_choice "none" too.
    let mut body = user("x");
    body["tools"] = tools();
    body["tool_choice"] = json!("none");
    let v = chat(addr, &body).await.json();
    assert!(v["choices"][0]["message"].get("tool_calls").is_none());
    server.shutdown().await;
}

#[tokio::test]
async fn invalid_arguments_are_sent_verbatim() {
    let (server, addr) =
        scripted("[[rule]]\ntool_calls = [{ name = \"clock\", arguments = \"{not json\" }]\n")
            .await;
    let mut body = user("x");
    body["tools"] = tools();
    let v = chat(addr, &body).await.json();
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{not json"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn bad_requests_are_400() {
    let (server, addr) = server(Options::default()).await;
    let bad = [
        json!({"messages":[{"role":"user","content":"x"}],"tool_choice":{"type":"function"}}),
        json!({"messages":[{"role":"user","content":"x"}],"tool_choice":"sometimes"}),
        json!({"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":"false"}}),
        json!({"messages":[]}),
        json!({"messages":"hi"}),
        json!({"messages":[{"content":"no role"}]}),
        json!({"messages":[{"role":7,"content":"x"}]}),
        json!({"messages":["x"]}),
        json!({"prompt":"x"}),
    ];
    for body in bad {
        let reply = chat(addr, &body).await;
        assert_eq!(reply.status, 400, "{body}");
        assert_eq!(reply.error_type(), "invalid_request_error", "{body}");
        assert_eq!(reply.json()["error"]["code"], 400);
    }
    // Unknown fields are ignored.
    let mut body = user("x");
    body["temperature"] = json!(0.2);
    body["whatever"] = json!({"a": 1});
    assert_eq!(chat(addr, &body).await.status, 200);
    assert_eq!(
        post(addr, "/chat/completions", &user("x")).await.status,
        200
    );
    server.shutdown().await;
}

#[tokio::test]
async fn thinking_disabled_drops_reasoning() {
    let (server, addr) =
        scripted("[[rule]]\nreasoning = \"secret thoughts\"\nreply = \"done\"\n").await;
    let mut body = user("x");
    body["chat_template_kwargs"] = json!({"enable_thinking": false});
    let v = chat(addr, &body).await.json();
    assert!(
        v["choices"][0]["message"]
            .get("reasoning_content")
            .is_none()
    );
    assert_eq!(v["choices"][0]["message"]["content"], "done");
    body["stream"] = json!(true);
    let events = chat(addr, &body).await.events();
    assert_eq!(joined_delta(&events, "reasoning_content"), "");
    server.shutdown().await;
}

#[tokio::test]
async fn max_tokens_cuts_with_length() {
    let (server, addr) = scripted("[[rule]]\nreply = \"one two three four five six\"\n").await;
    let mut body = user("x");
    body["max_tokens"] = json!(3);
    let v = chat(addr, &body).await.json();
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(v["choices"][0]["message"]["content"], "one two");
    assert_eq!(v["usage"]["completion_tokens"], 3);
    body["stream"] = json!(true);
    let events = chat(addr, &body).await.events();
    assert_eq!(joined_delta(&events, "content"), "one two");
    let data = data(&events);
    assert_eq!(
        data.last().unwrap()["choices"][0]["finish_reason"],
        "length"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn context_ceiling_cuts_with_length_and_overflow_is_an_error() {
    let reply = "word ".repeat(200);
    let (server, addr) = server(Options {
        n_ctx: 100,
        script: fakellama::Script::fixed(reply),
        ..Options::default()
    })
    .await;
    let v = chat(addr, &user("hi")).await.json();
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    let usage = &v["usage"];
    assert_eq!(
        usage["total_tokens"], 100,
        "prompt + reply fill the context"
    );

    let long = "x ".repeat(100);
    let reply = chat(addr, &user(&long)).await;
    assert_eq!(reply.status, 400);
    let error = &reply.json()["error"];
    assert_eq!(error["type"], "exceed_context_size_error");
    assert_eq!(error["code"], 400);
    assert_eq!(error["n_ctx"], 100);
    let n = error["n_prompt_tokens"].as_u64().unwrap();
    assert!(n >= 200);
    assert_eq!(
        error["message"],
        format!(
            "request ({n} tokens) exceeds the available context size (100 tokens), try increasing it"
        )
    );
    server.shutdown().await;
}

#[tokio::test]
async fn delay_applies_per_streamed_chunk() {
    let (server, addr) = server(Options {
        delay_ms: 20,
        script: fakellama::Script::fixed("a b"),
        ..Options::default()
    })
    .await;
    let mut body = user("x");
    body["stream"] = json!(true);
    let started = std::time::Instant::now();
    let events = chat(addr, &body).await.events();
    let chunks = data(&events).len() as u32;
    assert!(chunks >= 5);
    assert!(started.elapsed() >= std::time::Duration::from_millis(20) * chunks);
    let started = std::time::Instant::now();
    chat(addr, &user("x")).await;
    assert!(started.elapsed() >= std::time::Duration::from_millis(20));
    server.shutdown().await;
}
