//! fakellama round trip: one non-streamed chat request over a kept-alive loopback
//! connection, the server rendering, tokenising and matching the slot's cache.
//!
//! `cargo bench -p fakellama --bench round_trip`

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use serde_json::json;

fn round_trip(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let handle = rt
        .block_on(fakellama::start(fakellama::Options::default()))
        .unwrap();
    let authority = handle.url().trim_start_matches("http://").to_string();
    let mut sender = rt.block_on(async {
        let stream = tokio::net::TcpStream::connect(&authority).await.unwrap();
        let (sender, connection) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        sender
    });
    let body = json!({
        "messages": [
            {"role": "system", "content": "You are a helpful assistant. ".repeat(40)},
            {"role": "user", "content": "What time is it?"}
        ],
        "id_slot": 0, "cache_prompt": true,
    })
    .to_string();
    c.bench_function("fakellama_chat_round_trip", |b| {
        b.iter(|| {
            rt.block_on(async {
                let request = hyper::Request::post("/v1/chat/completions")
                    .header("host", &authority)
                    .header("content-type", "application/json")
                    .body(Full::new(Bytes::from(body.clone())))
                    .unwrap();
                sender.ready().await.unwrap();
                let response = sender.send_request(request).await.unwrap();
                assert!(response.status().is_success());
                response
                    .into_body()
                    .collect()
                    .await
                    .unwrap()
                    .to_bytes()
                    .len()
            })
        })
    });
    rt.block_on(handle.shutdown());
}

criterion_group!(benches, round_trip);
criterion_main!(benches);
