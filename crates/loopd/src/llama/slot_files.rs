//! A slot's KV cache to a file and back (`POST /slots/{id}?action=save|restore|erase`,
//! llama-server started with `--slot-save-path DIR`; `docs/llama-slot-files.md`). The file
//! name is relative to that directory; the server checks it and writes the file in place.

use serde::Deserialize;

use super::error::InferError;
use super::kept::Kept;
use super::measure::post_within;
use super::options::ClientOptions;

/// How long one save or restore may take, in milliseconds: a large context's cache is
/// hundreds of megabytes to write or read.
pub const SLOT_FILE_TIMEOUT_MS: u64 = 120_000;

/// What a save wrote.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Saved {
    /// Tokens the file holds (the slot's cached prompt and reply).
    pub n_saved: u64,
    /// Bytes written.
    pub n_written: u64,
}

/// What a restore read.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Restored {
    /// Tokens now cached in the slot.
    pub n_restored: u64,
    /// Bytes read.
    pub n_read: u64,
}

fn body(filename: &str) -> Vec<u8> {
    serde_json::json!({ "filename": filename })
        .to_string()
        .into_bytes()
}

/// Saves slot `slot`'s cache to `filename`.
pub(super) async fn save(
    options: &ClientOptions,
    kept: &Kept,
    slot: u32,
    filename: &str,
) -> Result<Saved, InferError> {
    let path = format!("/slots/{slot}?action=save");
    post_within(options, kept, &path, body(filename), SLOT_FILE_TIMEOUT_MS).await
}

/// Fills slot `slot`'s cache from `filename`. On any failure the server has emptied the slot.
pub(super) async fn restore(
    options: &ClientOptions,
    kept: &Kept,
    slot: u32,
    filename: &str,
) -> Result<Restored, InferError> {
    let path = format!("/slots/{slot}?action=restore");
    post_within(options, kept, &path, body(filename), SLOT_FILE_TIMEOUT_MS).await
}
