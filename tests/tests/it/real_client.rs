#![allow(clippy::unwrap_used, clippy::expect_used)]
//! loopd's model client alone against the real llama-server and SmolLM2 (no daemon): the
//! usage and timings it parses, the slot's cache on a repeated request, and a banned text.
//! Without the real parts the test says so and passes, unless BOXMAKER_REQUIRE_REAL_MODEL=1;
//! it runs one at a time with the other real-model tests (`one_at_a_time`).

use e2e::real::{LlamaServer, RealParts, one_at_a_time};

#[test]
fn loopds_client_parses_the_real_usage_and_timings() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    let _one = one_at_a_time();
    let server = LlamaServer::start(
        &parts.llama_server,
        &parts.smollm2,
        &[
            "-c",
            "3072",
            "--parallel",
            "3",
            "--temp",
            "0",
            "--seed",
            "7",
            "-lv",
            "2",
        ],
    )
    .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let client =
        loopd::llama::Client::new(loopd::llama::ClientOptions::for_url(&server.url).unwrap());
    let blocking = loopd::blocking::Blocking::new(runtime.handle().clone());
    let never = loopd::turn::Stop::new();
    let request = loopd::llama::ChatRequest {
        slot: 0,
        tools: vec![],
        thinking: false,
        messages: vec![loopd::llama::ChatMessage::User {
            content: "Say hello.".to_string(),
        }],
        banned: vec![],
    };
    let mut pieces = 0;
    let mut count = |_: &loopd::llama::ChatEvent| pieces += 1;
    let done = blocking
        .wait(client.chat_with_retry(&request, &mut count, never.token()))
        .unwrap();
    assert!(pieces > 0);
    assert_eq!(done.finish_reason, "stop");
    let timings = done.timings.expect("the server's timings");
    assert_eq!(timings.prompt_n + timings.cache_n, done.usage.prompt_tokens);
    assert!(timings.prompt_n > 0 && timings.prompt_ms > 0.0);
    assert_eq!(timings.predicted_n, done.usage.completion_tokens);
    // The same request again: everything but one token comes from the slot's cache.
    let mut ignore = |_: &loopd::llama::ChatEvent| {};
    let again = blocking
        .wait(client.chat_with_retry(&request, &mut ignore, never.token()))
        .unwrap();
    let timings = again.timings.expect("the server's timings");
    assert_eq!(timings.prompt_n, 1);
    assert_eq!(timings.cache_n, again.usage.prompt_tokens - 1);
    assert_eq!(again.usage.cached_tokens, timings.cache_n);
    // A banned text (the last word's code fence, sent as `logit_bias` false) is never
    // written, where the same request without the ban writes it.
    let fence = loopd::turn::LAST_WORD_BANNED;
    let mut asked = loopd::llama::ChatRequest {
        messages: vec![loopd::llama::ChatMessage::User {
            content: "Write the JSON object {\"a\": 1} in a ```json code block.".to_string(),
        }],
        ..request
    };
    let free = blocking
        .wait(client.chat_with_retry(&asked, &mut ignore, never.token()))
        .unwrap();
    let free = free.content.unwrap_or_default();
    assert!(free.contains(fence), "{free}");
    asked.banned = vec![fence.to_string()];
    let banned = blocking
        .wait(client.chat_with_retry(&asked, &mut ignore, never.token()))
        .unwrap();
    let banned = banned.content.unwrap_or_default();
    assert!(!banned.contains(fence), "{banned}");
    assert!(!banned.trim().is_empty());
}
