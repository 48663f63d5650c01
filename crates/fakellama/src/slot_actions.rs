//! `POST /slots/{id}?action=save|restore|erase`: a slot's cache to a file, back, or away,
//! with llama-server's order of checks, statuses, error types and messages
//! (`post_slots` and the slot tasks of its `server-context.cpp`).
//!
//! Checks, in order: no slot save path → 501 `not_supported_error`; an id that C++'s
//! `std::stoi` refuses → 400 "Invalid slot ID"; an action other than the three → 400
//! "Invalid action"; for save and restore, a body that is not JSON or has no string
//! `filename` → 500 `server_error`, a name [`valid_filename`] refuses → 400 "Invalid
//! filename". Then the slot (`id % n_slots`, the answer echoing the id asked for) is waited
//! for while busy, and the action runs.

use std::path::Path;
use std::time::Instant;

use bytes::Bytes;
use http::StatusCode;
use serde_json::{Value, json};

use crate::error::ApiError;
use crate::slot_files::{SlotFileError, decode, encode, valid_filename};
use crate::state::State;

/// The 501 answer without a slot save path (llama-server's message).
pub const NOT_SUPPORTED: &str =
    "This server does not support slots action. Start it with `--slot-save-path`";
/// The restore failure reason for every unreadable, malformed or foreign file.
const INVALID_FILE: &str = "No available space in KV cache or invalid slot save file";
/// The restore failure reason for a file holding more tokens than a slot's context.
const DOES_NOT_FIT: &str = "Restored prompt does not fit in the slot context";

/// Answers `POST /slots/{id}` with this query string and body (the body is only read by
/// save and restore, so an error reading it matters only there).
pub async fn slot_action(
    state: &State,
    id: &str,
    query: Option<&str>,
    body: Result<Bytes, ApiError>,
) -> Result<Value, ApiError> {
    let Some(dir) = state.slot_save_path.as_deref() else {
        return Err(ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            "not_supported_error",
            NOT_SUPPORTED,
        ));
    };
    let Some(id_slot) = parse_slot_id(&percent_decode(id, false)) else {
        return Err(ApiError::invalid_request("Invalid slot ID"));
    };
    let action = query.and_then(|q| query_param(q, "action"));
    match action.as_deref() {
        Some("save") => save(state, dir, id_slot, &body?).await,
        Some("restore") => restore(state, dir, id_slot, &body?).await,
        Some("erase") => Ok(erase(state, id_slot).await),
        _ => Err(ApiError::invalid_request("Invalid action")),
    }
}

/// The slot key for [`crate::slots::Slots::hold`]: the id as C++ converts an `int` to a
/// `size_t` (so `-1` is 2^64 - 1), to be taken modulo the number of slots.
fn slot_key(id_slot: i32) -> u64 {
    i64::from(id_slot).cast_unsigned()
}

fn server_error(message: String) -> ApiError {
    ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "server_error", message)
}

/// The `filename` of a save or restore body, checked: a body llama-server fails to read
/// (nlohmann's exceptions) is a 500 `server_error`, a bad name a 400.
fn filename(body: &[u8]) -> Result<String, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|e| {
        server_error(format!(
            "the body is not JSON ({e}); send {{\"filename\": NAME}}"
        ))
    })?;
    let name = match value.get("filename") {
        Some(Value::String(name)) => name.clone(),
        Some(other) => {
            return Err(server_error(format!(
                "\"filename\" must be a string, but is {}",
                json_kind(other)
            )));
        }
        None => {
            return Err(server_error(
                "the body has no \"filename\"; send {\"filename\": NAME}".to_owned(),
            ));
        }
    };
    if !valid_filename(&name) {
        return Err(ApiError::invalid_request("Invalid filename"));
    }
    Ok(name)
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Takes as long as moving `tokens` through a slot file takes in the profile.
async fn moving(state: &State, tokens: usize) {
    let us = state
        .profile
        .slot_file_us_per_token
        .saturating_mul(tokens as u64);
    if us > 0 {
        tokio::time::sleep(std::time::Duration::from_micros(us)).await;
    }
}

fn elapsed_ms(started: Instant) -> f64 {
    started.elapsed().as_secs_f64() * 1000.0
}

async fn save(state: &State, dir: &Path, id_slot: i32, body: &[u8]) -> Result<Value, ApiError> {
    let name = filename(body)?;
    let path = dir.join(&name);
    let lease = state.slots.hold(slot_key(id_slot)).await;
    let started = Instant::now();
    moving(state, lease.cache().len()).await;
    let bytes = encode(&state.model_path, state.n_ctx, lease.cache());
    // In place, as llama-server writes (truncate and write; no temporary file, no rename).
    if let Err(e) = tokio::fs::write(&path, &bytes).await {
        tracing::warn!(slot = lease.id(), path = %path.display(), "cannot save the slot: {e}");
        return Err(server_error("Unable to save slot".to_owned()));
    }
    tracing::info!(slot = lease.id(), path = %path.display(), n_saved = lease.cache().len(), "slot saved");
    Ok(json!({
        "id_slot": id_slot,
        "filename": name,
        "n_saved": lease.cache().len(),
        "n_written": bytes.len(),
        "timings": { "save_ms": elapsed_ms(started) },
    }))
}

/// Why a slot file was not restored.
#[derive(Debug, thiserror::Error)]
enum RestoreError {
    #[error("cannot read it: {0}")]
    Read(std::io::Error),
    #[error("it is not a slot file: {0}")]
    Malformed(SlotFileError),
    #[error("it was saved by a server of model {file:?}, this one serves {ours:?}")]
    OtherModel { file: String, ours: String },
    #[error("it holds {n_tokens} tokens, more than the slot context of {n_ctx}")]
    DoesNotFit { n_tokens: usize, n_ctx: u32 },
}

/// Reads and checks the file at `path`: its tokens and its size in bytes.
async fn read_slot_file(state: &State, path: &Path) -> Result<(Vec<String>, usize), RestoreError> {
    let bytes = tokio::fs::read(path).await.map_err(RestoreError::Read)?;
    let file = decode(&bytes).map_err(RestoreError::Malformed)?;
    if file.model != state.model_path {
        return Err(RestoreError::OtherModel {
            file: file.model,
            ours: state.model_path.clone(),
        });
    }
    if file.tokens.len() > usize::try_from(state.n_ctx).unwrap_or(usize::MAX) {
        return Err(RestoreError::DoesNotFit {
            n_tokens: file.tokens.len(),
            n_ctx: state.n_ctx,
        });
    }
    Ok((file.tokens, bytes.len()))
}

async fn restore(state: &State, dir: &Path, id_slot: i32, body: &[u8]) -> Result<Value, ApiError> {
    let name = filename(body)?;
    let path = dir.join(&name);
    let mut lease = state.slots.hold(slot_key(id_slot)).await;
    let started = Instant::now();
    match read_slot_file(state, &path).await {
        Ok((tokens, n_read)) => {
            let n_restored = tokens.len();
            moving(state, n_restored).await;
            lease.set_cache(tokens);
            tracing::info!(slot = lease.id(), path = %path.display(), n_restored, "slot restored");
            Ok(json!({
                "id_slot": id_slot,
                "filename": name,
                "n_restored": n_restored,
                "n_read": n_read,
                "timings": { "restore_ms": elapsed_ms(started) },
            }))
        }
        Err(e) => {
            // As llama-server: a failed restore leaves the slot empty.
            lease.set_cache(Vec::new());
            tracing::warn!(slot = lease.id(), path = %path.display(), "slot not restored, cleared: {e}");
            let reason = match e {
                RestoreError::DoesNotFit { .. } => DOES_NOT_FIT,
                _ => INVALID_FILE,
            };
            Err(ApiError::invalid_request(format!(
                "Unable to restore slot: {reason}"
            )))
        }
    }
}

async fn erase(state: &State, id_slot: i32) -> Value {
    let mut lease = state.slots.hold(slot_key(id_slot)).await;
    let n_erased = lease.cache().len();
    lease.set_cache(Vec::new());
    tracing::info!(slot = lease.id(), n_erased, "slot erased");
    json!({ "id_slot": id_slot, "n_erased": n_erased })
}

/// The slot id as C++'s `std::stoi` reads it: leading whitespace, an optional sign, at least
/// one digit, anything after the digits ignored (`"1abc"` is 1); `None` where `stoi` throws
/// (no digits, or outside `int`).
pub fn parse_slot_id(text: &str) -> Option<i32> {
    let rest = text.trim_start_matches([' ', '\t', '\n', '\u{b}', '\u{c}', '\r']);
    let (sign, rest) = match rest.as_bytes().first() {
        Some(b'-') => ("-", &rest[1..]),
        Some(b'+') => ("", &rest[1..]),
        _ => ("", rest),
    };
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 {
        return None;
    }
    format!("{sign}{}", &rest[..digits]).parse().ok()
}

/// The first value of `key` in a query string (`a=1&b=2`), percent-decoded with `+` as a
/// space, as cpp-httplib reads query parameters; a key without `=` has the empty value.
pub fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        (percent_decode(k, true) == key).then(|| percent_decode(v, true))
    })
}

/// `%XX` escapes decoded (and `+` as a space when `plus_is_space`); a `%` not followed by
/// two hex digits stays as it is, bytes that are not UTF-8 become U+FFFD.
fn percent_decode(text: &str, plus_is_space: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let escaped = (bytes[i] == b'%')
            .then(|| bytes.get(i + 1..i + 3))
            .flatten()
            .filter(|hex| hex.iter().all(u8::is_ascii_hexdigit))
            .and_then(|hex| std::str::from_utf8(hex).ok())
            .and_then(|hex| u8::from_str_radix(hex, 16).ok());
        match (escaped, bytes[i]) {
            (Some(byte), _) => {
                out.push(byte);
                i += 3;
            }
            (None, b'+') if plus_is_space => {
                out.push(b' ');
                i += 1;
            }
            (None, byte) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_ids_read_like_stoi() {
        assert_eq!(parse_slot_id("0"), Some(0));
        assert_eq!(parse_slot_id("  +7"), Some(7));
        assert_eq!(parse_slot_id("-1"), Some(-1));
        assert_eq!(parse_slot_id("1abc"), Some(1));
        assert_eq!(parse_slot_id("007"), Some(7));
        assert_eq!(parse_slot_id("2147483647"), Some(i32::MAX));
        assert_eq!(parse_slot_id("-2147483648"), Some(i32::MIN));
        for bad in [
            "",
            "abc",
            "+",
            "-",
            " x1",
            "2147483648",
            "99999999999999999999",
        ] {
            assert_eq!(parse_slot_id(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn ids_wrap_like_size_t() {
        assert_eq!(slot_key(5) % 3, 2);
        assert_eq!(slot_key(-1), u64::MAX);
        assert_eq!(slot_key(-1) % 2, 1);
    }

    #[test]
    fn query_params_are_decoded() {
        assert_eq!(
            query_param("x=1&action=save", "action").as_deref(),
            Some("save")
        );
        assert_eq!(
            query_param("action=%73ave", "action").as_deref(),
            Some("save")
        );
        assert_eq!(query_param("action=a+b", "action").as_deref(), Some("a b"));
        assert_eq!(query_param("action", "action").as_deref(), Some(""));
        assert_eq!(
            query_param("action=erase&action=save", "action").as_deref(),
            Some("erase")
        );
        assert_eq!(query_param("actions=save", "action"), None);
        assert_eq!(percent_decode("100%", false), "100%");
        assert_eq!(percent_decode("%zz+", false), "%zz+");
        assert_eq!(percent_decode("%+1", false), "%+1");
    }

    #[test]
    fn bodies_without_a_string_filename_are_server_errors() {
        for body in [&b""[..], b"{", b"[]", b"{}", b"{\"filename\":3}"] {
            let error = filename(body).unwrap_err();
            assert_eq!(error.status, StatusCode::INTERNAL_SERVER_ERROR, "{body:?}");
            assert_eq!(error.kind, "server_error");
        }
        let error = filename(b"{\"filename\":\"../x\"}").unwrap_err();
        assert_eq!(
            (error.status, error.message.as_str()),
            (StatusCode::BAD_REQUEST, "Invalid filename")
        );
        assert_eq!(filename(b"{\"filename\":\"s.bin\"}").unwrap(), "s.bin");
    }
}
