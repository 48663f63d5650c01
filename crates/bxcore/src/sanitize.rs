//! Making untrusted text safe to put in a prompt.
//!
//! Chat templates mark turns with special tokens (`<|im_start|>`, `<|eot_id|>`, `[INST]`, ...).
//! A tokeniser turns those strings into control tokens wherever they appear, so fetched text
//! that contains one could forge a turn ("<|im_start|>system ..."). [`neutralise`] defuses
//! them by replacing each one's first character with a look-alike that no template uses:
//! the text stays readable, but no control token survives.
//!
//! The spellings come from [`FAMILIES`], one entry per family of chat templates. A family whose
//! tokens share an opener that ordinary text never needs (`<|` for ChatML, Llama 3, Phi and
//! Command-R; the full-width `<｜` for DeepSeek) defuses every token with that opener, since
//! such families add names faster than a list could follow; the others list their tokens.

use std::borrow::Cow;

/// The control tokens of one family of chat templates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TokenFamily {
    /// The family, for tests and documentation.
    pub name: &'static str,
    /// Openers: any text starting with one is a token of this family, whatever follows.
    pub openers: &'static [&'static str],
    /// Exact spellings of the family's tokens that no opener covers.
    pub tokens: &'static [&'static str],
}

/// Every family whose control tokens [`neutralise`] defuses.
pub const FAMILIES: &[TokenFamily] = &[
    TokenFamily {
        name: "ChatML (Qwen, SmolLM, Phi, Command-R, ...)",
        openers: &["<|"],
        tokens: &[
            "<tool_call>",
            "</tool_call>",
            "<tool_response>",
            "</tool_response>",
            "<think>",
            "</think>",
        ],
    },
    TokenFamily {
        // `<|begin_of_text|>`, `<|start_header_id|>`, `<|eot_id|>`, `<|python_tag|>`: all `<|`.
        name: "Llama 3",
        openers: &["<|"],
        tokens: &[],
    },
    TokenFamily {
        name: "Llama 2",
        openers: &[],
        tokens: &["[INST]", "[/INST]", "<<SYS>>", "<</SYS>>"],
    },
    TokenFamily {
        name: "Mistral",
        openers: &[],
        tokens: &[
            "[INST]",
            "[/INST]",
            "[SYSTEM_PROMPT]",
            "[/SYSTEM_PROMPT]",
            "[AVAILABLE_TOOLS]",
            "[/AVAILABLE_TOOLS]",
            "[TOOL_CALLS]",
            "[TOOL_RESULTS]",
            "[/TOOL_RESULTS]",
            "[TOOL_CONTENT]",
            "[/TOOL_CONTENT]",
            "[ARGS]",
            "[CALL_ID]",
            "[THINK]",
            "[/THINK]",
        ],
    },
    TokenFamily {
        name: "Gemma",
        openers: &[],
        tokens: &[
            "<start_of_turn>",
            "<end_of_turn>",
            "<start_function_call>",
            "<end_function_call>",
            "<start_function_response>",
            "<end_function_response>",
            "<start_function_declaration>",
            "<end_function_declaration>",
        ],
    },
    TokenFamily {
        // Full-width bars (U+FF5C): `<｜begin▁of▁sentence｜>`, `<｜User｜>`, `<｜tool▁calls▁begin｜>`.
        name: "DeepSeek",
        openers: &["<\u{ff5c}"],
        tokens: &[],
    },
    TokenFamily {
        name: "sentence markers",
        openers: &[],
        tokens: &["<bos>", "<eos>", "<s>", "</s>", "<pad>", "<unk>"],
    },
];

/// What replaces a token's leading `<`.
const ANGLE_STANDIN: char = '\u{2039}'; // ‹
/// What replaces a token's leading `[`.
const BRACKET_STANDIN: char = '\u{2045}'; // ⁅

/// Every opener of [`FAMILIES`].
pub fn openers() -> impl Iterator<Item = &'static str> {
    FAMILIES.iter().flat_map(|f| f.openers.iter().copied())
}

/// Every exact token spelling of [`FAMILIES`].
pub fn known_tokens() -> impl Iterator<Item = &'static str> {
    FAMILIES.iter().flat_map(|f| f.tokens.iter().copied())
}

/// Returns `text` with every chat-template control token defused and every control character
/// other than tab, newline and carriage return removed. Text with neither comes back borrowed,
/// unchanged. Idempotent: `neutralise(neutralise(x)) == neutralise(x)`.
pub fn neutralise(text: &str) -> Cow<'_, str> {
    if !needs_work(text) {
        return Cow::Borrowed(text);
    }
    // Controls go first: removing one must not be able to join the halves of a token
    // (`<\u{0}|im_start|>`), so tokens are looked for in the text without them.
    let visible: String = text.chars().filter(|c| !is_forbidden_control(*c)).collect();
    let mut out = String::with_capacity(visible.len());
    let mut rest = visible.as_str();
    while let Some(c) = rest.chars().next() {
        if let Some(len) = token_at(rest) {
            out.push(if c == '[' {
                BRACKET_STANDIN
            } else {
                ANGLE_STANDIN
            });
            out.push_str(&rest[1..len]);
            rest = &rest[len..];
            continue;
        }
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    Cow::Owned(out)
}

/// True for a character that a prompt never needs and a template may treat specially.
fn is_forbidden_control(c: char) -> bool {
    c.is_control() && !matches!(c, '\t' | '\n' | '\r')
}

/// The byte length of the control token (or opener) at the start of `s`, if one is there: the
/// longest that matches, so a token that another one starts with is never cut short.
fn token_at(s: &str) -> Option<usize> {
    openers()
        .chain(known_tokens())
        .filter(|token| s.starts_with(*token))
        .map(str::len)
        .max()
}

/// A quick scan so that clean text is returned without copying.
fn needs_work(text: &str) -> bool {
    text.chars().any(is_forbidden_control)
        || openers().chain(known_tokens()).any(|t| text.contains(t))
}
