//! Slot files (issue 22): `POST /slots/{id}?action=save|restore|erase` as llama-server answers
//! them. Here the order of checks (statuses, error types and messages), file names, erase,
//! the API key and the binary's flags; saving and restoring in [`restore`].
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod restore;

use crate::common;

use std::net::SocketAddr;
use std::path::Path;

use common::*;
use fakellama::Options;
use serde_json::{Value, json};

const INVALID_FILE: &str =
    "Unable to restore slot: No available space in KV cache or invalid slot save file";
const DOES_NOT_FIT: &str =
    "Unable to restore slot: Restored prompt does not fit in the slot context";

/// POSTs `/slots/{id}?{query}` with this raw body (none: empty).
async fn slot_post(addr: SocketAddr, id: &str, query: &str, body: Option<&str>) -> Reply {
    let path = format!("/slots/{id}?{query}");
    send(
        addr,
        "POST",
        &path,
        &[],
        body.map(|b| b.as_bytes().to_vec()),
    )
    .await
}

/// `action` (save or restore) of `filename` on slot `id`, answered 200.
async fn file_action(addr: SocketAddr, id: i64, action: &str, filename: &str) -> Value {
    let body = json!({ "filename": filename }).to_string();
    let reply = slot_post(
        addr,
        &id.to_string(),
        &format!("action={action}"),
        Some(&body),
    )
    .await;
    assert_eq!(reply.status, 200, "{action} {filename}: {}", reply.text());
    reply.json()
}

/// `action` of `filename` on slot `id`, expected to fail with this status, type and message.
async fn file_action_fails(
    addr: SocketAddr,
    id: i64,
    action: &str,
    filename: &str,
    (status, kind, message): (u16, &str, &str),
) {
    let body = json!({ "filename": filename }).to_string();
    let reply = slot_post(
        addr,
        &id.to_string(),
        &format!("action={action}"),
        Some(&body),
    )
    .await;
    assert_eq!(
        reply.json(),
        json!({"error":{"code":status,"message":message,"type":kind}}),
        "{action} {filename:?}"
    );
    assert_eq!(reply.status, status);
}

async fn erase(addr: SocketAddr, id: &str) -> Value {
    let reply = slot_post(addr, id, "action=erase", None).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()
}

fn on_slot(mut body: Value, slot: i64) -> Value {
    body["id_slot"] = json!(slot);
    body
}

/// A chat request answered 200 on this slot.
async fn chat_on(addr: SocketAddr, body: &Value, slot: i64) -> Value {
    let reply = chat(addr, &on_slot(body.clone(), slot)).await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    reply.json()
}

fn count(v: &Value, section: &str, field: &str) -> u64 {
    v[section][field].as_u64().unwrap()
}

/// What a slot holds after this answer: the prompt and the reply but its last token.
fn held(answer: &Value) -> u64 {
    count(answer, "usage", "prompt_tokens") + count(answer, "usage", "completion_tokens") - 1
}

async fn n_cached(addr: SocketAddr, slot: usize) -> u64 {
    get(addr, "/slots").await.json()[slot]["n_prompt_tokens"]
        .as_u64()
        .unwrap()
}

async fn with_dir(dir: &Path, options: Options) -> (fakellama::Handle, SocketAddr) {
    server(Options {
        slot_save_path: Some(dir.to_path_buf()),
        ..options
    })
    .await
}

fn conversation() -> Value {
    json!({"messages":[
        {"role":"system","content":"You are a careful assistant."},
        {"role":"user","content":"Remember the locker code 4471."},
    ]})
}

#[tokio::test]
async fn without_a_save_path_every_slot_action_is_501() {
    let (server, addr) = server(Options::default()).await;
    let expected = json!({"error":{"code":501,
        "message":"This server does not support slots action. Start it with `--slot-save-path`",
        "type":"not_supported_error"}});
    for (id, query, body) in [
        ("0", "action=save", Some(r#"{"filename":"a.bin"}"#)),
        ("0", "action=erase", None),
        ("abc", "action=bogus", Some("not json")),
    ] {
        let reply = slot_post(addr, id, query, body).await;
        assert_eq!(
            (reply.status, reply.json()),
            (501, expected.clone()),
            "{id}?{query}"
        );
    }
    server.shutdown().await;
}

#[tokio::test]
async fn a_save_path_that_is_not_a_directory_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("file");
    std::fs::write(&file, "x").unwrap();
    for path in [file.clone(), dir.path().join("missing")] {
        let error = fakellama::start(Options {
            slot_save_path: Some(path.clone()),
            ..Options::default()
        })
        .await
        .unwrap_err();
        assert_eq!(
            error.to_string(),
            format!("not a directory: {}", path.display())
        );
    }
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_fakellama"))
        .args(["--listen", "127.0.0.1:0", "--slot-save-path"])
        .arg(&file)
        .output()
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    let expected = format!("not a directory: {}", file.display());
    assert!(stderr.contains(&expected), "{stderr}");
}

#[tokio::test]
async fn ids_actions_and_bodies_are_checked_in_llama_server_order() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = with_dir(dir.path(), Options::default()).await;
    let invalid = |message: &str| json!({"error":{"code":400,"message":message,"type":"invalid_request_error"}});
    for (id, query, message) in [
        ("abc", "action=save", "Invalid slot ID"),
        ("", "action=erase", "Invalid slot ID"),
        ("99999999999", "action=erase", "Invalid slot ID"),
        ("abc", "action=bogus", "Invalid slot ID"),
        ("0", "action=bogus", "Invalid action"),
        ("0", "", "Invalid action"),
        ("0", "action=SAVE", "Invalid action"),
    ] {
        let reply = slot_post(addr, id, query, Some(r#"{"filename":"a.bin"}"#)).await;
        assert_eq!(
            (reply.status, reply.json()),
            (400, invalid(message)),
            "{id}?{query}"
        );
    }
    // Bodies that are not JSON with a string filename: nlohmann's exceptions, a 500.
    for action in ["save", "restore"] {
        for body in [
            None,
            Some(""),
            Some("{"),
            Some("[]"),
            Some("{}"),
            Some(r#"{"filename":3}"#),
        ] {
            let reply = slot_post(addr, "0", &format!("action={action}"), body).await;
            assert_eq!(reply.status, 500, "{action} {body:?}: {}", reply.text());
            assert_eq!(reply.error_type(), "server_error");
            assert_eq!(reply.json()["error"]["code"], 500);
        }
    }
    // stoi: trailing junk is ignored; erase needs no body.
    assert_eq!(erase(addr, "1abc").await, json!({"id_slot":1,"n_erased":0}));
    // An unknown method or a deeper path is not this route.
    assert_eq!(
        send(addr, "GET", "/slots/0?action=erase", &[], None)
            .await
            .status,
        404
    );
    assert_eq!(
        slot_post(addr, "0/x", "action=erase", None).await.status,
        404
    );
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    server.shutdown().await;
}

#[tokio::test]
async fn filenames_are_validated_like_llama_cpp() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = with_dir(dir.path(), Options::default()).await;
    let bad = (400, "invalid_request_error", "Invalid filename");
    let long = "x".repeat(256);
    for name in [
        "../x", "a/b", "a\\b", "", ".", "x.", "a..b", " x", "x ", "a:b", "a\nb", &long,
    ] {
        file_action_fails(addr, 0, "save", name, bad).await;
        file_action_fails(addr, 0, "restore", name, bad).await;
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    for name in [&"x".repeat(255), ".hidden", "été.bin"] {
        assert_eq!(file_action(addr, 0, "save", name).await["n_saved"], 0);
        assert!(dir.path().join(name).is_file(), "{name}");
    }
    server.shutdown().await;
}

#[tokio::test]
async fn erase_empties_the_slot() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = with_dir(
        dir.path(),
        Options {
            slots: 2,
            ..Options::default()
        },
    )
    .await;
    let first = chat_on(addr, &conversation(), 1).await;
    chat_on(addr, &conversation(), 0).await;
    // -1 as a size_t modulo 2 is slot 1; the answer echoes -1.
    assert_eq!(
        erase(addr, "-1").await,
        json!({"id_slot":-1,"n_erased":held(&first)})
    );
    assert_eq!(n_cached(addr, 1).await, 0);
    assert_eq!(n_cached(addr, 0).await, held(&first), "slot 0 is untouched");
    let after = chat_on(addr, &conversation(), 1).await;
    assert_eq!(count(&after, "timings", "cache_n"), 0);
    assert_eq!(erase(addr, "1").await["n_erased"], held(&after));
    assert_eq!(erase(addr, "1").await, json!({"id_slot":1,"n_erased":0}));
    server.shutdown().await;
}

#[tokio::test]
async fn slot_actions_need_the_api_key() {
    let dir = tempfile::tempdir().unwrap();
    let (server, addr) = with_dir(
        dir.path(),
        Options {
            api_key: Some("sekrit".into()),
            ..Options::default()
        },
    )
    .await;
    let reply = slot_post(addr, "0", "action=erase", None).await;
    assert_eq!(reply.status, 401);
    assert_eq!(reply.error_type(), "authentication_error");
    let path = "/slots/0?action=erase";
    let reply = send(
        addr,
        "POST",
        path,
        &[("authorization", "Bearer sekrit")],
        None,
    )
    .await;
    assert_eq!(reply.status, 200, "{}", reply.text());
    server.shutdown().await;
}

#[tokio::test]
async fn the_binary_takes_a_save_path_and_a_model() {
    let dir = tempfile::tempdir().unwrap();
    let (child, addr) = spawn_binary([
        "--slot-save-path".as_ref(),
        dir.path().as_os_str(),
        "--model".as_ref(),
        "/models/x.gguf".as_ref(),
    ]);
    assert_eq!(
        get(addr, "/props").await.json()["model_path"],
        "/models/x.gguf"
    );
    chat_on(addr, &conversation(), 0).await;
    let saved = file_action(addr, 0, "save", "bin.bin").await;
    let text = std::fs::read_to_string(dir.path().join("bin.bin")).unwrap();
    let header: Value = serde_json::from_str(text.lines().nth(1).unwrap()).unwrap();
    assert_eq!(
        header,
        json!({"model":"/models/x.gguf","n_ctx":fakellama::DEFAULT_N_CTX,"n_tokens":saved["n_saved"]})
    );
    drop(child);
}
