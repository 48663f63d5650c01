//! Behaviours checked against the real llama-server (b1-0c1e570, see `docs/real-model.md`):
//! tool calls cut by the token budget, per-chunk `created`, templates without tool support,
//! errors in the middle of a stream, a history holding a call whose arguments are not JSON.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::*;
use fakellama::tokenize::count_tokens;
use fakellama::{Options, Script};
use serde_json::{Value, json};

/// A call of `clock` with arguments `{"tz":"UTC"}` and nothing else.
const CLOCK_CALL: &str =
    "[[rule]]\ntool_calls = [{ name = \"clock\", arguments = '{\"tz\":\"UTC\"}' }]\n";

/// What fakellama's template writes before a `clock` call's arguments.
const CLOCK_CALL_START: &str = "<tool_call>\n{\"name\":\"clock\",\"arguments\":";

/// Delay per streamed chunk when a test needs the stream to last over a second, in ms.
const SLOW_CHUNK_MS: u64 = 250;

fn with_tools(mut body: Value) -> Value {
    body["tools"] = json!([{"type":"function","function":{"name":"clock","parameters":{}}}]);
    body
}

fn streamed(mut body: Value) -> Value {
    body["stream"] = json!(true);
    body
}

/// The `tool_calls` deltas of a stream.
fn call_deltas(events: &[Sse]) -> Vec<Value> {
    data(events)
        .iter()
        .filter_map(|c| c["choices"][0]["delta"]["tool_calls"].as_array().cloned())
        .flatten()
        .collect()
}

#[tokio::test]
async fn a_tool_call_cut_in_its_arguments_comes_back_cut_with_length() {
    let (server, addr) = scripted(CLOCK_CALL).await;
    let mut body = with_tools(user("time?"));
    body["max_tokens"] = json!(count_tokens(CLOCK_CALL_START) + 2);
    let v = chat(addr, &body).await.json();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "length");
    let call = &choice["message"]["tool_calls"][0];
    assert_eq!(call["function"], json!({"name":"clock","arguments":"{\""}));
    assert!(call["id"].as_str().is_some_and(|id| !id.is_empty()));

    let events = chat(addr, &streamed(body)).await.events();
    let deltas = call_deltas(&events);
    assert_eq!(
        deltas[0]["function"],
        json!({"name":"clock","arguments":"{"})
    );
    assert_eq!(deltas[1]["function"], json!({"arguments":"\""}));
    assert_eq!(deltas.len(), 2);
    let data = data(&events);
    assert_eq!(
        data.last().unwrap()["choices"][0]["finish_reason"],
        "length"
    );
    assert_eq!(events.last(), Some(&Sse::Done));
    server.shutdown().await;
}

#[tokio::test]
async fn a_tool_call_cut_by_the_context_comes_back_cut_too() {
    let body = with_tools(user("time?"));
    let (probe, addr) = scripted(CLOCK_CALL).await;
    let prompt_tokens = chat(addr, &body).await.json()["usage"]["prompt_tokens"]
        .as_u64()
        .unwrap();
    probe.shutdown().await;
    let room = u64::try_from(count_tokens(CLOCK_CALL_START)).unwrap() + 1;
    let (server, addr) = server(Options {
        n_ctx: u32::try_from(prompt_tokens + room).unwrap(),
        script: Script::parse(CLOCK_CALL).unwrap(),
        ..Options::default()
    })
    .await;
    let v = chat(addr, &body).await.json();
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    assert_eq!(
        v["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"],
        "{"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_tool_call_cut_before_its_name_ends_is_raw_content_and_never_streamed() {
    let (server, addr) = scripted(CLOCK_CALL).await;
    let mut body = with_tools(user("time?"));
    // `<tool_call>` and the newline: the name is not written yet.
    body["max_tokens"] = json!(6);
    let v = chat(addr, &body).await.json();
    let choice = &v["choices"][0];
    assert_eq!(choice["finish_reason"], "length");
    assert_eq!(choice["message"]["content"], "<tool_call>\n");
    assert!(choice["message"].get("tool_calls").is_none());
    assert_eq!(v["usage"]["completion_tokens"], 6);

    // Streamed: the role chunk and the finish chunk, nothing between.
    let events = chat(addr, &streamed(body)).await.events();
    let data = data(&events);
    assert_eq!(data.len(), 2, "{data:?}");
    assert_eq!(
        data[0]["choices"][0]["delta"],
        json!({"role":"assistant","content":null})
    );
    assert_eq!(data[1]["choices"][0]["delta"], json!({}));
    assert_eq!(data[1]["choices"][0]["finish_reason"], "length");
    server.shutdown().await;
}

#[tokio::test]
async fn every_chunk_is_stamped_when_it_is_sent() {
    let (server, addr) = server(Options {
        delay_ms: SLOW_CHUNK_MS,
        script: Script::fixed("a b c d"),
        ..Options::default()
    })
    .await;
    let before = unix_now();
    let events = chat(addr, &streamed(user("x"))).await.events();
    let after = unix_now();
    let created: Vec<u64> = data(&events)
        .iter()
        .map(|c| c["created"].as_u64().unwrap())
        .collect();
    // Each chunk is sent after its delay: the first and the last are over a second apart.
    let spread = Duration::from_millis(SLOW_CHUNK_MS) * u32::try_from(created.len() - 1).unwrap();
    assert!(spread > Duration::from_secs(1), "{created:?}");
    assert!(
        created.iter().all(|c| (before..=after).contains(c)),
        "{created:?}"
    );
    assert!(created.windows(2).all(|w| w[0] <= w[1]), "{created:?}");
    assert!(
        created[created.len() - 1] > created[0],
        "stamped per chunk, not once per request: {created:?}"
    );
    server.shutdown().await;
}

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[tokio::test]
async fn without_a_tool_template_tools_are_ignored() {
    let (no_tools, addr) = server(Options {
        tool_template: false,
        script: Script::parse(CLOCK_CALL).unwrap(),
        ..Options::default()
    })
    .await;
    let props = get(addr, "/props").await.json();
    assert_eq!(props["chat_template_caps"]["supports_tools"], false);
    assert!(!props["chat_template"].as_str().unwrap().contains("tools"));

    let call_text = r#"{"name":"clock","arguments":{"tz":"UTC"}}"#;
    let v = chat(addr, &with_tools(user("time?"))).await.json();
    let message = &v["choices"][0]["message"];
    assert_eq!(message["content"], call_text);
    assert!(message.get("tool_calls").is_none());
    assert_eq!(v["choices"][0]["finish_reason"], "stop");
    let events = chat(addr, &streamed(with_tools(user("time?"))))
        .await
        .events();
    assert_eq!(joined_delta(&events, "content"), call_text);
    assert!(call_deltas(&events).is_empty());

    // The tools are not rendered into the prompt either.
    let records = no_tools.requests();
    assert!(
        !records[0].prompt.contains("<tools>"),
        "{}",
        records[0].prompt
    );
    let (plain, plain_addr) = server(Options::default()).await;
    chat(plain_addr, &with_tools(user("time?"))).await;
    assert!(plain.requests()[0].prompt.contains("<tools>"));
    assert!(records[0].prompt_tokens < plain.requests()[0].prompt_tokens);
    plain.shutdown().await;
    no_tools.shutdown().await;
}

#[tokio::test]
async fn an_error_mid_stream_without_content_follows_the_role_chunk() {
    let (server, addr) = scripted(
        "[[rule]]\nerror_mid_stream = { type = \"server_error\", message = \"The model produced output that does not match the expected peg-native format\" }\n",
    )
    .await;
    let reply = chat(addr, &streamed(user("x"))).await;
    assert_eq!(reply.status, 200);
    let events = reply.events();
    assert_eq!(events.len(), 2, "{events:?}");
    let Sse::Data(role) = &events[0] else {
        panic!("{events:?}")
    };
    assert_eq!(
        role["choices"][0]["delta"],
        json!({"role":"assistant","content":null})
    );
    let Sse::Data(error) = &events[1] else {
        panic!("{events:?}")
    };
    assert_eq!(
        *error,
        json!({"error":{"code":500,"type":"server_error",
            "message":"The model produced output that does not match the expected peg-native format"}})
    );
    server.shutdown().await;
}

/// A history whose earlier `clock` call has `arguments`, answered by a tool message.
fn history_with_call(arguments: &str) -> Value {
    json!({"messages":[
        {"role":"user","content":"time?"},
        {"role":"assistant","content":"","tool_calls":[{"id":"a","type":"function",
            "function":{"name":"clock","arguments":arguments}}]},
        {"role":"tool","tool_call_id":"a","content":"Not run"}
    ]})
}

#[tokio::test]
async fn a_history_holding_a_call_whose_arguments_are_not_json_is_refused() {
    let (fake, addr) = scripted("default_reply = \"ok\"\n").await;
    for (arguments, why) in [
        (r#"{"tz": "U"#, "EOF while parsing a string"),
        ("", "EOF while parsing a value"),
    ] {
        for body in [
            history_with_call(arguments),
            streamed(with_tools(history_with_call(arguments))),
        ] {
            let reply = chat(addr, &body).await;
            assert_eq!(reply.status, 500, "{}", reply.text());
            let error = &reply.json()["error"];
            assert_eq!(error["type"], "server_error");
            let message = error["message"].as_str().unwrap();
            assert!(
                message.starts_with("Failed to parse tool call arguments as JSON: ")
                    && message.contains(why),
                "{message}"
            );
        }
    }
    // JSON that is not an object passes, as it does in llama-server.
    assert_eq!(chat(addr, &history_with_call("[1]")).await.status, 200);
    assert_eq!(fake.requests()[0].status, 500);
    fake.shutdown().await;

    // A template without tool support never parses the arguments.
    let (no_tools, addr) = server(Options {
        tool_template: false,
        ..Options::default()
    })
    .await;
    let reply = chat(addr, &history_with_call(r#"{"tz": "U"#)).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    no_tools.shutdown().await;
}
