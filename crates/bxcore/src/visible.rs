//! Text an owner decides on, with nothing hidden: every character that shows nothing, or that
//! changes how the text around it shows, is written out as an escape (`\u{202e}`).
//!
//! An approval asks the owner about a call's arguments. A right-to-left override (U+202E)
//! makes `/etc/txt.evil` read as `/etc/live.txt`; a zero-width space makes two different paths
//! look the same; a terminal control can rewrite the line. [`visible`] escapes all of them,
//! so what the owner reads is, character for character, what runs: boxctl's approval lines and
//! the web console's approvals page show arguments through it.
//!
//! A backslash is left as it is: arguments are JSON, where a literal backslash is already
//! written `\\`, so an escape [`visible`] writes cannot be forged by the text itself.

use std::borrow::Cow;
use unicode_general_category::{GeneralCategory, get_general_category};

/// Whether `c` is written as an escape by [`visible`]: controls other than newline (C0, DEL,
/// C1), format characters (the bidi embeddings, overrides, isolates and marks, zero-width
/// spaces and joiners, the soft hyphen, tag characters), line and paragraph separators,
/// spaces other than the plain one, private-use and unassigned code points, and the invisible
/// marks and fillers that are not format characters (variation selectors, the combining
/// grapheme joiner, the Hangul fillers).
pub fn is_hidden(c: char) -> bool {
    if c == '\n' || c == ' ' {
        return false;
    }
    use GeneralCategory::{
        Control, Format, LineSeparator, ParagraphSeparator, PrivateUse, SpaceSeparator, Surrogate,
        Unassigned,
    };
    matches!(
        get_general_category(c),
        Control
            | Format
            | LineSeparator
            | ParagraphSeparator
            | SpaceSeparator
            | PrivateUse
            | Surrogate
            | Unassigned
    ) || matches!(
        c,
        '\u{034f}'
            | '\u{115f}'
            | '\u{1160}'
            | '\u{3164}'
            | '\u{ffa0}'
            | '\u{fe00}'..='\u{fe0f}'
            | '\u{e0100}'..='\u{e01ef}'
    )
}

/// `text` with every [`is_hidden`] character written as `\u{hex}` (lowercase, as Rust writes
/// it); text without one comes back borrowed. Newlines stay: a caller that wants one line
/// folds them its own way.
pub fn visible(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if is_hidden(c) {
            out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn bidi_controls_and_invisibles_are_written_out() {
        assert_eq!(visible("/etc/\u{202e}txt.evil"), "/etc/\\u{202e}txt.evil");
        for (c, escaped) in [
            ('\u{202a}', "\\u{202a}"),
            ('\u{202d}', "\\u{202d}"),
            ('\u{2066}', "\\u{2066}"),
            ('\u{2069}', "\\u{2069}"),
            ('\u{200e}', "\\u{200e}"),
            ('\u{200f}', "\\u{200f}"),
            ('\u{061c}', "\\u{61c}"),
            ('\u{200b}', "\\u{200b}"),
            ('\u{200d}', "\\u{200d}"),
            ('\u{2060}', "\\u{2060}"),
            ('\u{feff}', "\\u{feff}"),
            ('\u{00ad}', "\\u{ad}"),
            ('\u{e0041}', "\\u{e0041}"),
            ('\u{fe0f}', "\\u{fe0f}"),
            ('\u{3164}', "\\u{3164}"),
            ('\u{2028}', "\\u{2028}"),
            ('\u{00a0}', "\\u{a0}"),
            ('\u{e000}', "\\u{e000}"),
            ('\u{1b}', "\\u{1b}"),
            ('\r', "\\u{d}"),
            ('\t', "\\u{9}"),
            ('\u{7f}', "\\u{7f}"),
            ('\u{9b}', "\\u{9b}"),
        ] {
            assert_eq!(visible(&format!("a{c}b")), format!("a{escaped}b"), "{c:?}");
        }
    }

    #[test]
    fn ordinary_text_comes_back_borrowed() {
        for text in [
            "{\"path\":\"/srv/notes/a.txt\"}",
            "line one\nline two",
            "Grüße, 東京, مرحبا, 🙂",
            "C:\\\\path",
        ] {
            assert!(
                matches!(visible(text), Cow::Borrowed(t) if t == text),
                "{text}"
            );
        }
    }
}
