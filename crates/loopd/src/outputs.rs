//! Structured truncation: a tool result cut to the cap keeps its full text under a handle,
//! stored beside the session (`<session dir>/outputs/out-<call>.json`) with the result's labels,
//! and the model reads further pages of it with `read_output`, under the same labels.
//!
//! Handles are per session directory: a handle of another session is simply not found.
//! `read_output` is answered by loopd and never sent to the port.

pub use crate::text::floor_boundary;
use bxcore::sanitize::neutralise;
use bxcore::{CallId, DataClass, Labels};
use proto::ToolSchema;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};

/// The name of the tool that reads pages of a stored output.
pub const READ_OUTPUT: &str = proto::READ_OUTPUT;
pub use crate::session::OUTPUTS_DIR;
/// The version of the stored output format.
pub const OUTPUT_FORMAT_VERSION: u32 = 1;

/// One stored output: the full text of a result, as the model would have seen it uncut
/// (neutralised when untrusted), with its labels.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredOutput {
    /// [`OUTPUT_FORMAT_VERSION`].
    pub format: u32,
    /// The handle, `out-<call>`.
    pub handle: String,
    /// The result's class.
    pub class: DataClass,
    /// Whether the result came from outside.
    pub untrusted: bool,
    /// The full text.
    pub content: String,
}

impl StoredOutput {
    /// The labels of the output.
    pub fn labels(&self) -> Labels {
        Labels::new(self.class, self.untrusted)
    }
}

/// The handle of call `call`'s output.
pub fn handle(call: CallId) -> String {
    format!("out-{call}")
}

/// The schema of `read_output`.
pub fn read_output_schema() -> ToolSchema {
    ToolSchema {
        name: READ_OUTPUT.to_string(),
        description: "Read a page of a tool result that was cut short, by the handle the \
                      truncation note gave."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "handle": {"type": "string", "description": "The handle, such as \"out-3\"."},
                "offset": {"type": "integer", "description": "The byte to start at (default 0)."},
                "length": {"type": "integer", "description": "The most bytes to return (at most the result cap)."}
            },
            "required": ["handle"]
        }),
    }
}

/// Where `handle` is stored under `session_dir`, or `None` for a name that is not a handle
/// (so a handle can never name a path outside the outputs directory).
fn path(session_dir: &Path, handle: &str) -> Option<PathBuf> {
    let number = handle.strip_prefix("out-")?;
    if number.is_empty() || !number.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some(session_dir.join(OUTPUTS_DIR).join(format!("{handle}.json")))
}

/// Stores the full `content` of call `call` under `session_dir` with `labels`; returns the
/// handle. The file is written to a temporary name, synced, and renamed into place (a file left
/// by a call of the same number that never reached the log is replaced).
pub fn store(
    session_dir: &Path,
    call: CallId,
    content: &str,
    labels: Labels,
) -> std::io::Result<String> {
    let handle = handle(call);
    let dir = session_dir.join(OUTPUTS_DIR);
    std::fs::create_dir_all(&dir)?;
    let stored = StoredOutput {
        format: OUTPUT_FORMAT_VERSION,
        handle: handle.clone(),
        class: labels.class,
        untrusted: labels.untrusted,
        content: content.to_string(),
    };
    let bytes = serde_json::to_vec(&stored).map_err(std::io::Error::other)?;
    crate::session::replace_file(&dir.join(format!("{handle}.json")), &bytes)?;
    Ok(handle)
}

/// The stored output `handle` under `session_dir`, or `None` when there is none.
pub fn load(session_dir: &Path, handle: &str) -> Option<StoredOutput> {
    let bytes = std::fs::read(path(session_dir, handle)?).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The note that follows the first `shown` bytes of a result of `total` bytes stored under
/// `handle`; `direct` says whether `read_output` is in the tools array (otherwise it is
/// reached through `call_tool`).
pub fn truncation_note(handle: &str, shown: usize, total: usize, direct: bool) -> String {
    format!(
        "\n[truncated: {shown} of {total} bytes shown; read the rest with {}]",
        how_to_read(handle, shown, direct)
    )
}

fn how_to_read(handle: &str, offset: usize, direct: bool) -> String {
    let args = format!("{{\"handle\": \"{handle}\", \"offset\": {offset}}}");
    if direct {
        format!("{READ_OUTPUT} {args}")
    } else {
        format!("call_tool {{\"name\": \"{READ_OUTPUT}\", \"arguments\": {args}}}")
    }
}

/// What `read_output` answers: the page's text and labels, or a message for the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Page {
    /// A page, with the stored output's labels.
    Text {
        /// The page, followed by a note of where it lies.
        content: String,
        /// The stored output's labels.
        labels: Labels,
    },
    /// Why there is no page.
    Refused(String),
}

/// Reads the page `arguments` (JSON text: `handle`, `offset`, `length`) asks for from the
/// outputs under `session_dir`; a page is at most `cap` bytes and ends on a character
/// boundary. `direct` is as in [`truncation_note`].
pub fn read_page(session_dir: &Path, arguments: &str, cap: usize, direct: bool) -> Page {
    let Ok(Value::Object(args)) = bxcore::json::parse_no_duplicates(arguments) else {
        return Page::Refused(format!(
            "{READ_OUTPUT} needs a JSON object: {{\"handle\": \"out-N\", \"offset\": 0}}."
        ));
    };
    let Some(handle) = args.get("handle").and_then(Value::as_str) else {
        return Page::Refused(format!(
            "{READ_OUTPUT} needs a string \"handle\", as the truncation note gave it."
        ));
    };
    let number = |key: &str| match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value
            .as_u64()
            .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
            .ok_or_else(|| {
                format!("{READ_OUTPUT}: \"{key}\" must be a whole number of bytes, 0 or more.")
            }),
    };
    let (offset, length) = match (number("offset"), number("length")) {
        (Ok(offset), Ok(length)) => (offset.unwrap_or(0), length.unwrap_or(cap).min(cap)),
        (Err(e), _) | (_, Err(e)) => return Page::Refused(e),
    };
    let Some(stored) = load(session_dir, handle) else {
        return Page::Refused(format!("There is no output \"{handle}\" in this session."));
    };
    let text = &stored.content;
    let total = text.len();
    if offset >= total {
        return Page::Refused(format!(
            "Offset {offset} is past the end of \"{handle}\", which has {total} bytes: use an \
             offset below {total}."
        ));
    }
    let start = floor_boundary(text, offset);
    let mut end = floor_boundary(text, start.saturating_add(length.max(1)));
    if end == start {
        // A length shorter than the character at `start` still returns that character.
        end = (start + 1..=total)
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(total);
    }
    let page = &text[start..end];
    let page = if stored.untrusted {
        neutralise(page).into_owned()
    } else {
        page.to_string()
    };
    let note = if end < total {
        format!(
            "\n[bytes {start}..{end} of {total} shown; read on with {}]",
            how_to_read(handle, end, direct)
        )
    } else {
        format!("\n[bytes {start}..{end} of {total} shown; end of output]")
    };
    Page::Text {
        content: page + &note,
        labels: stored.labels(),
    }
}

/// The arguments (JSON text) of a `read_output` call, whether made directly or through
/// `call_tool`; `None` for any other call.
pub fn read_output_call(name: &str, arguments: &str) -> Option<String> {
    if name == READ_OUTPUT {
        return Some(arguments.to_string());
    }
    if name != crate::tools::CALL_TOOL {
        return None;
    }
    let Ok(Value::Object(call)) = bxcore::json::parse_no_duplicates(arguments) else {
        return None;
    };
    if call.get("name").and_then(Value::as_str) != Some(READ_OUTPUT) {
        return None;
    }
    let inner = call
        .get("arguments")
        .cloned()
        .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
    Some(serde_json::to_string(&inner).unwrap_or_else(|_| "null".to_string()))
}
