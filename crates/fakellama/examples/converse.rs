//! A two-turn streamed conversation with a llama-server (or fakellama) at a URL, printing the
//! answer as it streams in and what the server's prompt cache reused on each turn.
//!
//! `cargo run -p fakellama --example converse -- http://127.0.0.1:8080 "Hello" "And again?"`

#![allow(clippy::print_stdout)]

use anyhow::{Context, bail};
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::io::Write;

/// The slot the conversation runs on, so its cache is reused turn after turn.
const SLOT: u32 = 0;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let url = args.next().context("usage: converse URL [MESSAGE...]")?;
    let mut user_messages: Vec<String> = args.collect();
    if user_messages.is_empty() {
        user_messages = vec!["Hello! Who are you?".into(), "And what can you do?".into()];
    }
    let authority = url
        .strip_prefix("http://")
        .context("converse speaks plain http:// to a loopback server")?
        .trim_end_matches('/')
        .to_string();
    let mut messages = vec![json!({"role":"system","content":"You are a helpful assistant."})];
    for (turn, text) in user_messages.iter().enumerate() {
        messages.push(json!({"role":"user","content":text}));
        println!("\n[turn {}] user: {text}", turn + 1);
        print!("[turn {}] assistant: ", turn + 1);
        let (answer, usage) = chat(&authority, &messages).await?;
        println!();
        let timings = &usage["timings"];
        println!(
            "[turn {}] prompt {} tokens: {} reused from the slot's cache, {} evaluated; {} generated",
            turn + 1,
            usage["usage"]["prompt_tokens"],
            timings["cache_n"],
            timings["prompt_n"],
            usage["usage"]["completion_tokens"],
        );
        messages.push(json!({"role":"assistant","content":answer}));
    }
    Ok(())
}

/// Sends one streamed chat request; prints content as it arrives; returns the whole answer
/// and the final chunk (usage and timings).
async fn chat(authority: &str, messages: &[Value]) -> anyhow::Result<(String, Value)> {
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .with_context(|| format!("cannot connect to {authority}"))?;
    let (mut sender, connection) = http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(connection);
    let body = json!({
        "messages": messages, "stream": true, "stream_options": {"include_usage": true},
        "id_slot": SLOT, "cache_prompt": true,
    });
    let request = hyper::Request::post("/v1/chat/completions")
        .header("host", authority)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_string())))?;
    let mut response = sender.send_request(request).await?;
    if !response.status().is_success() {
        let text = response.into_body().collect().await?.to_bytes();
        bail!("the server answered: {}", String::from_utf8_lossy(&text));
    }
    let (mut answer, mut last, mut pending) = (String::new(), Value::Null, String::new());
    while let Some(frame) = response.body_mut().frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        };
        pending.push_str(&String::from_utf8_lossy(&data));
        while let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            let Some(json) = event.trim().strip_prefix("data: ") else {
                continue;
            };
            if json == "[DONE]" {
                return Ok((answer, last));
            }
            let chunk: Value = serde_json::from_str(json)?;
            if let Some(error) = chunk.get("error") {
                bail!("the server failed mid-stream: {error}");
            }
            if let Some(text) = chunk["choices"][0]["delta"]["content"].as_str() {
                print!("{text}");
                std::io::stdout().flush()?;
                answer.push_str(text);
            }
            if chunk.get("usage").is_some() {
                last = chunk;
            }
        }
    }
    bail!("the stream ended without [DONE]")
}
