//! Making untrusted text safe to put in a prompt.
//!
//! Chat templates mark turns with special tokens (`<|im_start|>`, `<|eot_id|>`, `[INST]`, ...).
//! A tokeniser turns those strings into control tokens wherever they appear, so fetched text
//! that contains one could forge a turn ("<|im_start|>system ..."). [`neutralise`] defuses
//! them by replacing each one's first character with a look-alike that no template uses:
//! the text stays readable, but no control token survives.

use std::borrow::Cow;

/// Control-token spellings that do not start with `<|` (those are all caught by one rule).
/// Longest first where one is a prefix of another.
pub const KNOWN_TOKENS: &[&str] = &[
    "<</SYS>>",
    "<<SYS>>",
    "[/INST]",
    "[INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_CALLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "<start_of_turn>",
    "<end_of_turn>",
    "<tool_call>",
    "</tool_call>",
    "<tool_response>",
    "</tool_response>",
    "<think>",
    "</think>",
    "<s>",
    "</s>",
];

/// What replaces a token's leading `<`.
const ANGLE_STANDIN: char = '\u{2039}'; // ‹
/// What replaces a token's leading `[`.
const BRACKET_STANDIN: char = '\u{2045}'; // ⁅

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

/// The byte length of the control token at the start of `s`, if one is there.
fn token_at(s: &str) -> Option<usize> {
    if s.starts_with("<|") {
        // Any `<|...` is defused: every template that uses this family (ChatML, Llama 3,
        // Phi, Gemma's tool tokens, ...) has more names than a list could keep up with.
        return Some(2);
    }
    KNOWN_TOKENS
        .iter()
        .find(|token| s.starts_with(*token))
        .map(|token| token.len())
}

/// A quick scan so that clean text is returned without copying.
fn needs_work(text: &str) -> bool {
    text.chars().any(is_forbidden_control)
        || text.contains("<|")
        || KNOWN_TOKENS.iter().any(|token| text.contains(token))
}
