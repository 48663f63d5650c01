//! Text from the model, a tool or brokerd made safe to print: no control characters, and on
//! one line where a line is wanted; what the owner decides on, with every hidden character
//! written out. Below every module that prints (`format`, `approvals`).

use std::borrow::Cow;

/// `text` without control characters other than newline and tab, so that no escape sequence
/// from a model or a tool reaches the terminal.
pub fn terminal_safe(text: &str) -> Cow<'_, str> {
    let bad = |c: char| c.is_control() && c != '\n' && c != '\t';
    if text.chars().any(bad) {
        Cow::Owned(text.chars().filter(|&c| !bad(c)).collect())
    } else {
        Cow::Borrowed(text)
    }
}

/// `text` on one line (newlines shown as ` ⏎ `), terminal-safe, cut to `max_chars` with `…`.
pub fn one_line(text: &str, max_chars: Option<usize>) -> String {
    let flat = terminal_safe(text.trim_end())
        .replace("\r\n", "\n")
        .replace('\n', " ⏎ ");
    match max_chars {
        Some(max) if flat.chars().count() > max => {
            let mut cut: String = flat.chars().take(max).collect();
            cut.push('…');
            cut
        }
        _ => flat,
    }
}

/// `text` as the owner must read what they decide on (an approval's arguments, tool and
/// reason): on one line (newlines shown as ` ⏎ `), every control, bidi, zero-width or other
/// hidden character written out as `\u{..}` (`bxcore::visible`) rather than dropped, and never
/// cut, however long: a path cut short, or reordered by U+202E, could hide what runs.
pub fn in_full(text: &str) -> String {
    // Only plain spaces and newlines are trimmed: `str::trim` would also drop the Unicode
    // spaces at the ends that `visible` is there to show.
    bxcore::visible::visible(text.trim_matches([' ', '\n'])).replace('\n', " ⏎ ")
}
