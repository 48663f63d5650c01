//! Slot files: fakellama's format for a slot's cached tokens (`POST /slots/{id}?action=save`
//! writes one, `action=restore` reads one back), and llama.cpp's rules for their names.
//!
//! A file is UTF-8 text, lines each ending with `\n`:
//!
//! ```text
//! fakellama-slot-file 1
//! {"model":"/models/fakellama.gguf","n_ctx":8192,"n_tokens":3}
//! "<|im_start|>"
//! "user"
//! "\n"
//! ```
//!
//! The magic and the format version ([`SLOT_FILE_MAGIC`], [`SLOT_FILE_VERSION`]); a JSON
//! header with the model path of the server that saved it, that server's slot context and
//! the number of tokens; then the tokens, each a JSON string on its own line. llama-server's
//! own files (magic `ggsq`, token ids, then the slot's KV cache) hold state no stand-in has;
//! what matters to a client is the same: a file restores into any slot of a server of the
//! same model, with a context at least as large as the tokens it holds.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The first word of every slot file.
pub const SLOT_FILE_MAGIC: &str = "fakellama-slot-file";
/// The format version, after the magic on the first line.
pub const SLOT_FILE_VERSION: u32 = 1;
/// The longest slot file name accepted, in bytes (llama.cpp's `fs_validate_filename`).
pub const MAX_FILENAME_BYTES: usize = 255;

/// The JSON header, the second line.
#[derive(Debug, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Header {
    model: String,
    n_ctx: u32,
    n_tokens: usize,
}

/// A slot file read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotFile {
    /// The model path of the server that saved it.
    pub model: String,
    /// That server's context per slot, in tokens.
    pub n_ctx: u32,
    /// The slot's cached tokens.
    pub tokens: Vec<String>,
}

/// Why bytes are not a slot file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotFileError {
    /// The file is not UTF-8 text.
    #[error("the file is not UTF-8 text")]
    NotText,
    /// The file does not end with a newline: it was cut short, or is not a slot file.
    #[error("the file does not end with a newline (cut short?)")]
    Unterminated,
    /// The first line is not the magic and this version.
    #[error("the first line is {found:?}, not \"{SLOT_FILE_MAGIC} {SLOT_FILE_VERSION}\"")]
    Magic {
        /// The first line (at most 64 characters of it).
        found: String,
    },
    /// The second line is missing or not the JSON header.
    #[error("the header (line 2) is not valid: {0}")]
    Header(String),
    /// A token line is not a JSON string.
    #[error("line {line} is not a token (a JSON string): {reason}")]
    Token {
        /// The line number, from 1.
        line: usize,
        /// serde's reason.
        reason: String,
    },
    /// The header's token count differs from the token lines.
    #[error("the header says {expected} tokens but the file holds {found}")]
    Count {
        /// The header's `n_tokens`.
        expected: usize,
        /// The token lines found.
        found: usize,
    },
}

/// The bytes of a slot file holding `tokens`, saved by a server of `model` with slot
/// context `n_ctx`.
pub fn encode(model: &str, n_ctx: u32, tokens: &[String]) -> Vec<u8> {
    let header = Header {
        model: model.to_owned(),
        n_ctx,
        n_tokens: tokens.len(),
    };
    let mut out = format!("{SLOT_FILE_MAGIC} {SLOT_FILE_VERSION}\n");
    out.push_str(&serde_json::to_string(&header).unwrap_or_default());
    out.push('\n');
    for token in tokens {
        out.push_str(&Value::String(token.clone()).to_string());
        out.push('\n');
    }
    out.into_bytes()
}

/// Reads a slot file written by [`encode`].
pub fn decode(bytes: &[u8]) -> Result<SlotFile, SlotFileError> {
    let text = std::str::from_utf8(bytes).map_err(|_| SlotFileError::NotText)?;
    let magic = format!("{SLOT_FILE_MAGIC} {SLOT_FILE_VERSION}");
    let first = text.split('\n').next().unwrap_or_default();
    if first != magic {
        return Err(SlotFileError::Magic {
            found: first.chars().take(64).collect(),
        });
    }
    let Some(body) = text.strip_suffix('\n') else {
        return Err(SlotFileError::Unterminated);
    };
    let mut lines = body.split('\n').skip(1);
    let header_line = lines
        .next()
        .ok_or_else(|| SlotFileError::Header("it is missing".to_owned()))?;
    let header: Header =
        serde_json::from_str(header_line).map_err(|e| SlotFileError::Header(e.to_string()))?;
    let tokens = lines
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str::<String>(line).map_err(|e| SlotFileError::Token {
                line: i + 3,
                reason: e.to_string(),
            })
        })
        .collect::<Result<Vec<String>, SlotFileError>>()?;
    if tokens.len() != header.n_tokens {
        return Err(SlotFileError::Count {
            expected: header.n_tokens,
            found: tokens.len(),
        });
    }
    Ok(SlotFile {
        model: header.model,
        n_ctx: header.n_ctx,
        tokens,
    })
}

/// Whether `name` is a safe slot file name by llama.cpp's `fs_validate_filename` (no
/// subdirectories): 1 to [`MAX_FILENAME_BYTES`] bytes; no control characters (C0, DEL, C1),
/// no `/ \ : * ? " < > |`, no look-alikes (U+FF0E, U+2215, U+2216), no U+FFFD or U+FEFF;
/// no leading or trailing space, no trailing `.`, no `..` anywhere, not `.`. (A Rust string
/// is well-formed UTF-8 without surrogates, which the rest of those rules refuse.)
pub fn valid_filename(name: &str) -> bool {
    let forbidden = |c: char| {
        let code = u32::from(c);
        code <= 0x1f
            || code == 0x7f
            || (0x80..=0x9f).contains(&code)
            || matches!(
                c,
                '\u{ff0e}'
                    | '\u{2215}'
                    | '\u{2216}'
                    | '\u{fffd}'
                    | '\u{feff}'
                    | ':'
                    | '*'
                    | '?'
                    | '"'
                    | '<'
                    | '>'
                    | '|'
                    | '/'
                    | '\\'
            )
    };
    !name.is_empty()
        && name.len() <= MAX_FILENAME_BYTES
        && !name.chars().any(forbidden)
        && !name.starts_with(' ')
        && !name.ends_with(' ')
        && !name.ends_with('.')
        && !name.contains("..")
        && name != "."
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tokenize::tokenize;

    #[test]
    fn round_trips_any_tokens() {
        let mut tokens = tokenize("<|im_start|>user\nhé \"quoted\"\t\\ ok");
        tokens.push(String::new());
        let bytes = encode("/models/m.gguf", 4096, &tokens);
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.starts_with("fakellama-slot-file 1\n{\"model\":\"/models/m.gguf\""));
        assert_eq!(text.lines().count(), 2 + tokens.len());
        let file = decode(&bytes).unwrap();
        assert_eq!(file.model, "/models/m.gguf");
        assert_eq!(file.n_ctx, 4096);
        assert_eq!(file.tokens, tokens);
        let empty = decode(&encode("m", 1, &[])).unwrap();
        assert!(empty.tokens.is_empty());
    }

    #[test]
    fn refuses_what_is_not_a_slot_file() {
        let good = encode("m", 8, &tokenize("a b"));
        assert_eq!(decode(&[0xff, 0xfe]), Err(SlotFileError::NotText));
        assert!(matches!(decode(b""), Err(SlotFileError::Magic { .. })));
        assert!(matches!(
            decode(b"fakellama-slot-file 2\n{}\n"),
            Err(SlotFileError::Magic { .. })
        ));
        assert_eq!(
            decode(&good[..good.len() - 1]),
            Err(SlotFileError::Unterminated)
        );
        assert!(matches!(
            decode(b"fakellama-slot-file 1\n"),
            Err(SlotFileError::Header(_))
        ));
        assert!(matches!(
            decode(b"fakellama-slot-file 1\n{\"model\":\"m\"}\n"),
            Err(SlotFileError::Header(_))
        ));
        let mut bad_token = good.clone();
        bad_token.extend_from_slice(b"not json\n");
        assert!(matches!(
            decode(&bad_token),
            Err(SlotFileError::Token { line: 6, .. })
        ));
        // Cut at a line end: one token is missing.
        let text = String::from_utf8(good).unwrap();
        let cut = text.rsplitn(3, '\n').nth(2).unwrap().to_owned() + "\n";
        assert_eq!(
            decode(cut.as_bytes()),
            Err(SlotFileError::Count {
                expected: 3,
                found: 2
            })
        );
    }

    #[test]
    fn filenames_follow_llama_cpp() {
        for good in [
            "slot1.bin",
            ".hidden",
            "a-b_c.bin",
            "été.bin",
            "a.b",
            &"x".repeat(255),
        ] {
            assert!(valid_filename(good), "{good:?}");
        }
        for bad in [
            "",
            ".",
            "..",
            "../x",
            "a..b",
            "a/b",
            "a\\b",
            "x.",
            " x",
            "x ",
            "a:b",
            "a*b",
            "a?b",
            "a\"b",
            "a<b",
            "a>b",
            "a|b",
            "a\0b",
            "a\nb",
            "a\u{7f}b",
            "a\u{85}b",
            "a\u{ff0e}b",
            "a\u{2215}b",
            "a\u{2216}b",
            "a\u{fffd}b",
            "\u{feff}a",
            &"x".repeat(256),
            &"é".repeat(128),
        ] {
            assert!(!valid_filename(bad), "{bad:?}");
        }
    }
}
