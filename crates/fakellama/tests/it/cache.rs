//! Slots and the prompt cache: cache_n / prompt_n, slot choice, waiting for a busy slot.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::*;
use fakellama::Options;
use serde_json::{Value, json};

fn on_slot(mut body: Value, slot: i64) -> Value {
    body["id_slot"] = json!(slot);
    body
}

fn cache_n(v: &Value) -> u64 {
    v["timings"]["cache_n"].as_u64().unwrap()
}

fn prompt_n(v: &Value) -> u64 {
    v["timings"]["prompt_n"].as_u64().unwrap()
}

fn prompt_tokens(v: &Value) -> u64 {
    v["usage"]["prompt_tokens"].as_u64().unwrap()
}

fn completion_tokens(v: &Value) -> u64 {
    v["usage"]["completion_tokens"].as_u64().unwrap()
}

#[tokio::test]
async fn a_follow_up_reuses_the_answer_but_its_last_token() {
    // As llama-server: the end-of-turn token counts among completion_tokens, is sampled
    // but never evaluated, so the slot keeps prompt + completion - 1 tokens, and a follow-up
    // that sends the answer back reuses exactly those (observed there: 102 + 6 - 1 = 107).
    let reply = "Hi there, friend.";
    let (server, addr) = server(Options {
        script: fakellama::Script::fixed(reply),
        ..Options::default()
    })
    .await;
    let mut messages = vec![json!({"role":"user","content":"Say hi."})];
    let first = chat(addr, &on_slot(json!({ "messages": messages }), 0))
        .await
        .json();
    let reply_tokens = fakellama::tokenize::count_tokens(reply) as u64;
    assert_eq!(
        completion_tokens(&first),
        reply_tokens + 1,
        "end-of-turn counted"
    );
    assert_eq!(first["timings"]["predicted_n"], completion_tokens(&first));
    let slots = get(addr, "/slots").await.json();
    assert_eq!(
        slots[0]["n_prompt_tokens"].as_u64().unwrap(),
        prompt_tokens(&first) + completion_tokens(&first) - 1
    );
    messages.push(first["choices"][0]["message"].clone());
    messages.push(json!({"role":"user","content":"Again."}));
    let second = chat(addr, &on_slot(json!({ "messages": messages }), 0))
        .await
        .json();
    assert_eq!(
        cache_n(&second),
        prompt_tokens(&first) + completion_tokens(&first) - 1
    );
    server.shutdown().await;
}

#[tokio::test]
async fn an_idle_server_picks_the_highest_slot_first() {
    // llama-server's LRU choice takes the last of the equally old slots: on an idle server
    // with two slots the first request without id_slot goes to slot 1.
    let (server, addr) = server(Options {
        slots: 2,
        ..Options::default()
    })
    .await;
    chat(addr, &user("hello")).await;
    assert_eq!(server.requests()[0].slot_used, Some(1));
    server.shutdown().await;
}

#[tokio::test]
async fn same_request_twice_reuses_all_but_one_token() {
    let (server, addr) = server(Options::default()).await;
    let body = on_slot(user("tell me a story"), 0);
    let first = chat(addr, &body).await.json();
    assert_eq!(cache_n(&first), 0);
    assert_eq!(prompt_n(&first), prompt_tokens(&first));
    let second = chat(addr, &body).await.json();
    assert_eq!(cache_n(&second), prompt_tokens(&second) - 1);
    assert_eq!(prompt_n(&second), 1);
    assert_eq!(
        second["usage"]["prompt_tokens_details"]["cached_tokens"],
        cache_n(&second)
    );
    server.shutdown().await;
}

#[tokio::test]
async fn extended_conversation_reuses_prompt_and_reply() {
    let (server, addr) = scripted(
        "[[rule]]\ntimes = 1\nreasoning = \"need the clock\"\nreply = \"Let me look.\"\n\
         tool_calls = [{ name = \"clock\", arguments = '{\"tz\":\"UTC\"}' }]\n\
         [[rule]]\nwhen_role = \"tool\"\nreply = \"It is noon.\"\n",
    )
    .await;
    let tools = json!([{"type":"function","function":{"name":"clock","parameters":{}}}]);
    let mut messages = vec![
        json!({"role":"system","content":"You are terse."}),
        json!({"role":"user","content":"What time is it?"}),
    ];
    let body = json!({"messages": messages, "tools": tools, "id_slot": 1});
    let first = chat(addr, &body).await.json();
    let message = first["choices"][0]["message"].clone();
    let call_id = message["tool_calls"][0]["id"].clone();
    messages.push(message);
    messages.push(json!({"role":"tool","tool_call_id":call_id,"content":"12:00"}));
    let body = json!({"messages": messages, "tools": tools, "id_slot": 1});
    let second = chat(addr, &body).await.json();
    assert_eq!(second["choices"][0]["message"]["content"], "It is noon.");
    assert_eq!(
        cache_n(&second),
        prompt_tokens(&first) + completion_tokens(&first) - 1,
        "the earlier prompt and the reply but its end-of-turn token are reused"
    );
    assert_eq!(prompt_n(&second), prompt_tokens(&second) - cache_n(&second));

    // And once more with the final answer sent back.
    messages.push(second["choices"][0]["message"].clone());
    messages.push(json!({"role":"user","content":"Thanks"}));
    let body = json!({"messages": messages, "tools": tools, "id_slot": 1});
    let third = chat(addr, &body).await.json();
    assert_eq!(
        cache_n(&third),
        prompt_tokens(&second) + completion_tokens(&second) - 1
    );
    server.shutdown().await;
}

#[tokio::test]
async fn cache_prompt_false_reuses_nothing() {
    let (server, addr) = server(Options::default()).await;
    let body = on_slot(user("hello"), 0);
    chat(addr, &body).await;
    let mut no_cache = body.clone();
    no_cache["cache_prompt"] = json!(false);
    let v = chat(addr, &no_cache).await.json();
    assert_eq!(cache_n(&v), 0);
    assert_eq!(prompt_n(&v), prompt_tokens(&v));
    server.shutdown().await;
}

#[tokio::test]
async fn slots_do_not_share_caches() {
    let (server, addr) = server(Options::default()).await;
    chat(addr, &on_slot(user("hello"), 0)).await;
    let v = chat(addr, &on_slot(user("hello"), 1)).await.json();
    assert_eq!(cache_n(&v), 0);
    // id_slot k means slot k % n_slots: 3 is slot 0 with 3 slots.
    let v = chat(addr, &on_slot(user("hello"), 3)).await.json();
    assert_eq!(cache_n(&v), prompt_tokens(&v) - 1);
    assert_eq!(server.requests()[2].slot_used, Some(0));
    server.shutdown().await;
}

#[tokio::test]
async fn server_chosen_slot_has_the_longest_prefix() {
    let (server, addr) = server(Options::default()).await;
    let alpha = json!({"messages":[{"role":"system","content":"alpha alpha alpha"},{"role":"user","content":"one"}]});
    let beta =
        json!({"messages":[{"role":"system","content":"beta"},{"role":"user","content":"one"}]});
    chat(addr, &on_slot(alpha.clone(), 2)).await;
    chat(addr, &on_slot(beta, 0)).await;
    let mut alpha_two = alpha.clone();
    alpha_two["messages"][1]["content"] = json!("two");
    let v = chat(addr, &on_slot(alpha_two, -1)).await.json();
    assert!(cache_n(&v) > 5);
    // Without id_slot at all, an unrelated prompt (sharing only the template's first tokens,
    // under 10% of it) goes to the least recently used slot (1).
    chat(addr, &user(&"zzz ".repeat(50))).await;
    let records = server.requests();
    assert_eq!(records[2].slot_used, Some(2));
    assert_eq!(records[3].slot_used, Some(1));
    assert_eq!(records[3].cache_n, 0);
    server.shutdown().await;
}

#[tokio::test]
async fn a_busy_slot_is_waited_for() {
    let (server, addr) =
        scripted("[[rule]]\nname = \"slow\"\ntimes = 1\ndelay_ms = 400\nreply = \"slowly\"\n")
            .await;
    let body = on_slot(user("same prompt"), 0);
    let slow = tokio::spawn({
        let body = body.clone();
        async move { chat(addr, &body).await.json() }
    });
    let mut busy = false;
    for _ in 0..200 {
        if get(addr, "/slots").await.json()[0]["is_processing"] == true {
            busy = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(busy, "slot 0 never showed as processing");
    let fast = chat(addr, &body).await.json();
    let slow = slow.await.unwrap();
    assert_eq!(slow["choices"][0]["message"]["content"], "slowly");
    assert_eq!(
        fast["choices"][0]["message"]["content"],
        fakellama::FIXED_REPLY
    );
    // The second request ran after the first released the slot: it found its cache.
    assert_eq!(cache_n(&fast), prompt_tokens(&fast) - 1);
    let records = server.requests();
    assert_eq!(records[0].rule.as_deref(), Some("slow"));
    assert_eq!(records[1].rule, None);
    server.shutdown().await;
}
