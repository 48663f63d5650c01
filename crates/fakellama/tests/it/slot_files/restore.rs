//! Slot files saved and restored: what a restored slot gives the next chat request, the
//! files a restore refuses (and the slot it clears), a failed save, a busy slot.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;

#[tokio::test]
async fn save_then_restore_into_another_slot_reuses_the_saved_prefix() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = with_dir(dir.path(), Options::default()).await;
    let first = chat_on(addr, &conversation(), 0).await;
    let saved = file_action(addr, 0, "save", "chat.bin").await;
    let bytes = std::fs::read(dir.path().join("chat.bin")).unwrap();
    assert!(bytes.starts_with(b"fakellama-slot-file 1\n"));
    assert_eq!(saved["id_slot"], 0);
    assert_eq!(saved["filename"], "chat.bin");
    assert_eq!(saved["n_saved"], held(&first));
    assert_eq!(saved["n_written"], bytes.len());
    assert!(saved["timings"]["save_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(
        n_cached(addr, 0).await,
        held(&first),
        "saving keeps the slot"
    );

    // 4 % 3 is slot 1; the answer names the slot as asked.
    let restored = file_action(addr, 4, "restore", "chat.bin").await;
    assert_eq!(restored["id_slot"], 4);
    assert_eq!(restored["filename"], "chat.bin");
    assert_eq!(restored["n_restored"], held(&first));
    assert_eq!(restored["n_read"], bytes.len());
    assert!(restored["timings"]["restore_ms"].as_f64().unwrap() >= 0.0);
    assert_eq!(n_cached(addr, 1).await, held(&first));

    // The conversation goes on in slot 1: only the new tokens are evaluated.
    let mut next = conversation();
    let messages = next["messages"].as_array_mut().unwrap();
    messages.push(first["choices"][0]["message"].clone());
    messages.push(json!({"role":"user","content":"What was the code?"}));
    let second = chat_on(addr, &next, 1).await;
    assert_eq!(count(&second, "timings", "cache_n"), held(&first));
    assert_eq!(
        count(&second, "timings", "prompt_n"),
        count(&second, "usage", "prompt_tokens") - held(&first)
    );

    // Restored into slot 2, the first request again finds its whole prompt: one token
    // is evaluated, as for a repeat.
    file_action(addr, 2, "restore", "chat.bin").await;
    let again = chat_on(addr, &conversation(), 2).await;
    assert_eq!(count(&again, "timings", "prompt_n"), 1);
    assert_eq!(
        count(&again, "timings", "cache_n"),
        count(&again, "usage", "prompt_tokens") - 1
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_file_restores_on_another_server_of_the_same_model() {
    let dir = tempfile::tempdir().unwrap();
    let (small, small_addr) = with_dir(
        dir.path(),
        Options {
            n_ctx: 256,
            ..Options::default()
        },
    )
    .await;
    let first = chat_on(small_addr, &conversation(), 0).await;
    file_action(small_addr, 0, "save", "small.bin").await;
    small.shutdown().await;
    // A file from a smaller context restores into a larger one.
    let (big, addr) = with_dir(dir.path(), Options::default()).await;
    let restored = file_action(addr, 1, "restore", "small.bin").await;
    assert_eq!(restored["n_restored"], held(&first));
    let again = chat_on(addr, &conversation(), 1).await;
    assert_eq!(count(&again, "timings", "prompt_n"), 1);
    big.shutdown().await;
}

#[tokio::test]
async fn a_file_of_another_model_is_refused_and_the_slot_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let (ours, addr) = with_dir(dir.path(), Options::default()).await;
    chat_on(addr, &conversation(), 0).await;
    file_action(addr, 0, "save", "ours.bin").await;
    let (other, other_addr) = with_dir(
        dir.path(),
        Options {
            model_path: "/models/other.gguf".into(),
            ..Options::default()
        },
    )
    .await;
    let props = get(other_addr, "/props").await.json();
    assert_eq!(props["model_path"], "/models/other.gguf");
    assert_eq!(props["model_alias"], "/models/other.gguf");
    let answer = chat_on(other_addr, &conversation(), 0).await;
    assert_eq!(answer["model"], "/models/other.gguf");
    assert!(n_cached(other_addr, 0).await > 0);
    let refused = (400, "invalid_request_error", INVALID_FILE);
    file_action_fails(other_addr, 0, "restore", "ours.bin", refused).await;
    assert_eq!(
        n_cached(other_addr, 0).await,
        0,
        "a failed restore clears the slot"
    );
    let after = chat_on(other_addr, &conversation(), 0).await;
    assert_eq!(count(&after, "timings", "cache_n"), 0);
    other.shutdown().await;
    ours.shutdown().await;
}

#[tokio::test]
async fn a_file_larger_than_the_context_is_refused_and_the_slot_cleared() {
    let dir = tempfile::tempdir().unwrap();
    let (big, addr) = with_dir(dir.path(), Options::default()).await;
    let long = json!({"messages":[{"role":"user","content":"word ".repeat(40)}]});
    let first = chat_on(addr, &long, 0).await;
    let saved = file_action(addr, 0, "save", "long.bin").await;
    assert!(saved["n_saved"].as_u64().unwrap() > 64, "{saved}");
    assert_eq!(saved["n_saved"], held(&first));
    let (small, small_addr) = with_dir(
        dir.path(),
        Options {
            n_ctx: 64,
            ..Options::default()
        },
    )
    .await;
    let short = json!({"messages":[{"role":"user","content":"hi"}]});
    chat_on(small_addr, &short, 0).await;
    let refused = (400, "invalid_request_error", DOES_NOT_FIT);
    file_action_fails(small_addr, 0, "restore", "long.bin", refused).await;
    assert_eq!(n_cached(small_addr, 0).await, 0);
    let after = chat_on(small_addr, &short, 0).await;
    assert_eq!(count(&after, "timings", "cache_n"), 0);
    small.shutdown().await;
    big.shutdown().await;
}

#[tokio::test]
async fn missing_and_malformed_files_are_refused_and_clear_the_slot() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = with_dir(dir.path(), Options::default()).await;
    chat_on(addr, &conversation(), 0).await;
    file_action(addr, 0, "save", "good.bin").await;
    let good = std::fs::read(dir.path().join("good.bin")).unwrap();
    std::fs::write(dir.path().join("cut.bin"), &good[..good.len() / 2]).unwrap();
    std::fs::write(dir.path().join("junk.bin"), b"ggsq\x03\x00\x00\x00").unwrap();
    std::fs::create_dir(dir.path().join("a-directory")).unwrap();
    let refused = (400, "invalid_request_error", INVALID_FILE);
    for name in ["missing.bin", "cut.bin", "junk.bin", "a-directory"] {
        file_action(addr, 0, "restore", "good.bin").await;
        assert!(n_cached(addr, 0).await > 0);
        file_action_fails(addr, 0, "restore", name, refused).await;
        assert_eq!(n_cached(addr, 0).await, 0, "{name}");
    }
    let after = chat_on(addr, &conversation(), 0).await;
    assert_eq!(count(&after, "timings", "cache_n"), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn a_save_that_cannot_write_is_a_500() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = with_dir(dir.path(), Options::default()).await;
    chat_on(addr, &conversation(), 0).await;
    std::fs::create_dir(dir.path().join("taken.bin")).unwrap();
    let failed = (500, "server_error", "Unable to save slot");
    file_action_fails(addr, 0, "save", "taken.bin", failed).await;
    assert!(n_cached(addr, 0).await > 0, "a failed save keeps the slot");
    server.shutdown().await;
}

#[tokio::test]
async fn a_slot_action_waits_for_the_request_on_its_slot() {
    // Each streamed chunk waits 50 ms, so the stream holds slot 0 for a while after its
    // first chunk arrives; the save, sent then, must wait for the slot to be released and
    // so finds the whole answer cached (the slot takes it only when released).
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = with_dir(
        dir.path(),
        Options {
            delay_ms: 50,
            ..Options::default()
        },
    )
    .await;
    let mut body = on_slot(conversation(), 0);
    body["stream"] = json!(true);
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let request = hyper::Request::post("/v1/chat/completions")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .unwrap();
    let response = sender.send_request(request).await.unwrap();
    assert_eq!(response.status(), 200);
    let mut events = response.into_body();
    let first_frame = events.frame().await.unwrap().unwrap();
    assert!(first_frame.is_data());
    let rest = tokio::spawn(async move { events.collect().await.unwrap().to_bytes() });

    let saved = file_action(addr, 0, "save", "busy.bin").await;
    let record = server.requests().pop().unwrap();
    let expected = record.prompt_tokens + record.completion_tokens - 1;
    assert_eq!(saved["n_saved"], expected);
    assert!(String::from_utf8_lossy(&rest.await.unwrap()).ends_with("data: [DONE]\n\n"));
    server.shutdown().await;
}
