//! fakellama's non-chat endpoints, API key, loading period, listening, the binary.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::*;
use fakellama::{Listen, Options};
use serde_json::json;

#[tokio::test]
async fn health_is_ok() {
    let (server, addr) = server(Options::default()).await;
    for path in ["/health", "/v1/health"] {
        let reply = get(addr, path).await;
        assert_eq!(reply.status, 200);
        assert_eq!(reply.json(), json!({"status":"ok"}));
    }
    server.shutdown().await;
}

#[tokio::test]
async fn loading_period_answers_503_then_ready() {
    let (server, addr) = server(Options {
        loading_ms: 2000,
        ..Options::default()
    })
    .await;
    for path in ["/health", "/props", "/v1/chat/completions"] {
        let reply = get(addr, path).await;
        assert_eq!(reply.status, 503, "{path}");
        assert_eq!(
            reply.json(),
            json!({"error":{"code":503,"message":"Loading model","type":"unavailable_error"}})
        );
    }
    let mut ready = false;
    for _ in 0..200 {
        if get(addr, "/health").await.status == 200 {
            ready = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(ready, "never became ready");
    assert_eq!(chat(addr, &user("hi")).await.status, 200);
    server.shutdown().await;
}

#[tokio::test]
async fn props_and_slots_reflect_options() {
    let (server, addr) = server(Options {
        n_ctx: 4096,
        slots: 2,
        ..Options::default()
    })
    .await;
    let props = get(addr, "/props").await.json();
    // As llama-server b1-0c1e570: only n_ctx and params in the generation settings.
    let settings = props["default_generation_settings"].as_object().unwrap();
    let mut keys: Vec<&str> = settings.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["n_ctx", "params"]);
    assert_eq!(props["default_generation_settings"]["n_ctx"], 4096);
    assert!(props["default_generation_settings"]["params"].is_object());
    assert_eq!(props["total_slots"], 2);
    // Started without --alias, llama-server's alias is its model path.
    assert_eq!(props["model_path"], "/models/fakellama.gguf");
    assert_eq!(props["model_alias"], props["model_path"]);
    assert!(
        props["chat_template"]
            .as_str()
            .unwrap()
            .contains("<|im_start|>")
    );
    let build = props["build_info"].as_str().unwrap();
    assert!(build.starts_with('b') && build.contains('-'), "{build}");
    assert_eq!(props["chat_template_caps"]["supports_tools"], true);
    assert_eq!(props["chat_template_caps"]["supports_tool_calls"], true);
    assert_eq!(props["bos_token"], "<|im_start|>");
    assert_eq!(props["eos_token"], "<|im_end|>");
    assert_eq!(props["endpoint_slots"], true);
    assert_eq!(props["endpoint_props"], false);
    assert_eq!(props["endpoint_metrics"], false);
    assert_eq!(props["is_sleeping"], false);
    assert!(props["model_ftype"].is_string());
    let models = get(addr, "/v1/models").await.json();
    assert_eq!(models["data"][0]["id"], fakellama::MODEL_PATH);

    let slots = get(addr, "/slots").await.json();
    let slots = slots.as_array().unwrap();
    assert_eq!(slots.len(), 2);
    for (i, slot) in slots.iter().enumerate() {
        assert_eq!(slot["id"], i);
        assert_eq!(slot["n_ctx"], 4096);
        assert_eq!(slot["is_processing"], false);
        assert_eq!(slot["n_prompt_tokens"], 0);
    }
    // After a request on slot 1, it holds the prompt and the reply but its last token.
    let mut body = user("hello");
    body["id_slot"] = json!(1);
    let usage = chat(addr, &body).await.json()["usage"].clone();
    let slots = get(addr, "/slots").await.json();
    assert_eq!(
        slots[1]["n_prompt_tokens"].as_u64().unwrap(),
        usage["total_tokens"].as_u64().unwrap() - 1
    );
    assert_eq!(slots[0]["n_prompt_tokens"], 0);
    server.shutdown().await;
}

#[tokio::test]
async fn api_key_is_required_except_for_health() {
    let (server, addr) = server(Options {
        api_key: Some("sekrit".into()),
        ..Options::default()
    })
    .await;
    let body = Some(user("hi").to_string().into_bytes());
    let unauthorized =
        json!({"error":{"code":401,"message":"Invalid API Key","type":"authentication_error"}});
    for (path, method) in [
        ("/props", "GET"),
        ("/slots", "GET"),
        ("/v1/chat/completions", "POST"),
    ] {
        let reply = send(addr, method, path, &[], body.clone()).await;
        assert_eq!(reply.status, 401, "{path}");
        assert_eq!(reply.json(), unauthorized);
        let wrong = send(
            addr,
            method,
            path,
            &[("authorization", "Bearer nope")],
            body.clone(),
        )
        .await;
        assert_eq!(wrong.status, 401, "{path}");
    }
    let bearer = send(
        addr,
        "POST",
        "/v1/chat/completions",
        &[("authorization", "Bearer sekrit")],
        body.clone(),
    )
    .await;
    assert_eq!(bearer.status, 200);
    let x_key = send(addr, "GET", "/props", &[("x-api-key", "sekrit")], None).await;
    assert_eq!(x_key.status, 200);
    assert_eq!(get(addr, "/health").await.status, 200);
    server.shutdown().await;
}

#[tokio::test]
async fn unknown_path_is_404() {
    let (server, addr) = server(Options::default()).await;
    let reply = get(addr, "/nope").await;
    assert_eq!(reply.status, 404);
    assert_eq!(reply.json()["error"]["code"], 404);
    assert_eq!(reply.error_type(), "not_found_error");
    server.shutdown().await;
}

#[tokio::test]
async fn oversized_body_is_rejected() {
    let (server, addr) = server(Options::default()).await;
    let big = vec![b' '; fakellama::MAX_BODY_BYTES + 1];
    let reply = send(addr, "POST", "/v1/chat/completions", &[], Some(big)).await;
    assert_eq!(reply.status, 413);
    assert!(
        reply.json()["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exceeds")
    );
    let reply = send(
        addr,
        "POST",
        "/v1/chat/completions",
        &[],
        Some(b"{not json".to_vec()),
    )
    .await;
    assert_eq!(reply.status, 400);
    assert_eq!(reply.error_type(), "invalid_request_error");
    server.shutdown().await;
}

#[tokio::test]
async fn requests_are_recorded_in_process_and_over_http() {
    let (server, addr) =
        scripted("[[rule]]\nname = \"greet\"\nwhen_contains = \"hi\"\nreply = \"hello\"\n").await;
    let mut body = user("hi there");
    body["stream"] = json!(true);
    chat(addr, &body).await;
    chat(addr, &user("other")).await;
    let records = server.requests();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0].path, "/v1/chat/completions");
    assert_eq!(records[0].rule.as_deref(), Some("greet"));
    assert!(records[0].stream);
    assert_eq!(records[0].body, body);
    assert_eq!(
        records[0].cache_n + records[0].prompt_n,
        records[0].prompt_tokens
    );
    assert!(records[0].prompt.contains("hi there"));
    assert_eq!(records[1].rule, None);
    assert!(!records[1].stream);

    let over_http: Vec<fakellama::RecordedRequest> =
        serde_json::from_value(get(addr, "/fakellama/requests").await.json()).unwrap();
    assert_eq!(over_http, records);
    assert_eq!(
        send(addr, "DELETE", "/fakellama/requests", &[], None)
            .await
            .status,
        200
    );
    assert!(server.requests().is_empty());
    server.shutdown().await;
}

#[tokio::test]
async fn listens_on_a_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("llama.sock");
    let server = fakellama::start(Options {
        listen: Listen::Unix(path.clone()),
        ..Options::default()
    })
    .await
    .unwrap();
    assert_eq!(server.url(), format!("unix:{}", path.display()));
    let stream = tokio::net::UnixStream::connect(&path).await.unwrap();
    let reply = send_on(stream, "GET", "/health", &[], None).await;
    assert_eq!(reply.status, 200);
    let stream = tokio::net::UnixStream::connect(&path).await.unwrap();
    let reply = send_on(
        stream,
        "POST",
        "/v1/chat/completions",
        &[],
        Some(user("hi").to_string().into_bytes()),
    )
    .await;
    assert_eq!(
        reply.json()["choices"][0]["message"]["content"],
        fakellama::FIXED_REPLY
    );
    server.shutdown().await;
    assert!(!path.exists(), "socket file removed on shutdown");
}

#[tokio::test]
async fn binary_prints_its_address_and_answers() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("script.toml");
    std::fs::write(&script, "default_reply = \"from the binary\"\n").unwrap();
    let (child, addr) = spawn_binary([
        "--slots".as_ref(),
        "2".as_ref(),
        "--n-ctx".as_ref(),
        "1024".as_ref(),
        "--no-tool-template".as_ref(),
        "--script".as_ref(),
        script.as_os_str(),
    ]);
    assert_eq!(get(addr, "/health").await.status, 200);
    let props = get(addr, "/props").await.json();
    assert_eq!(props["total_slots"], 2);
    assert_eq!(props["chat_template_caps"]["supports_tools"], false);
    let reply = chat(addr, &user("hi")).await.json();
    assert_eq!(reply["choices"][0]["message"]["content"], "from the binary");
    drop(child);
}

#[test]
fn binary_rejects_a_bad_script() {
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("bad.toml");
    std::fs::write(&script, "[[rule]]\nname = \"x\"\nbogus = 1\n").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_fakellama"))
        .args(["--listen", "127.0.0.1:0", "--script"])
        .arg(&script)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("rule 1 (\"x\")") && stderr.contains("bogus"),
        "{stderr}"
    );
}

#[tokio::test]
async fn apply_template_and_tokenize_measure_what_a_chat_request_reports() {
    let (server, addr) = server(Options::default()).await;
    let body = json!({
        "messages": [
            {"role": "system", "content": "You are a test."},
            {"role": "user", "content": "my locker code is 4471"},
        ],
        "tools": [{"type": "function", "function": {"name": "clock", "parameters": {}}}],
    });
    let rendered = post(addr, "/apply-template", &body).await;
    assert_eq!(rendered.status, 200, "{}", rendered.text());
    let prompt = rendered.json()["prompt"].clone();
    assert!(prompt.as_str().unwrap().contains("clock"), "{prompt}");
    let tokens = post(addr, "/tokenize", &json!({ "content": prompt })).await;
    assert_eq!(tokens.status, 200, "{}", tokens.text());
    let count = tokens.json()["tokens"].as_array().unwrap().len();
    assert_eq!(chat(addr, &body).await.status, 200);
    assert_eq!(server.requests()[0].prompt_tokens, count);

    let bad = post(addr, "/tokenize", &json!({ "text": "x" })).await;
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("content"), "{}", bad.text());
    server.shutdown().await;
}
