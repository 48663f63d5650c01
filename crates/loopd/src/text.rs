//! Cutting text to a bound: the bottom layer of loopd, used by every layer above (results,
//! stored outputs, summaries, carries, memory notes). Depends on nothing of loopd's.

/// The marker [`cap_result`] appends when it cuts.
const TRUNCATED: &str = "\n[truncated]";

/// Cuts to at most `cap` bytes on a character boundary and appends "\n[truncated]" if it cut.
///
/// The marker comes on top of the cap, so a cut result is at most `cap + 12` bytes. The flag
/// says whether it cut. A text of exactly `cap` bytes is not cut.
pub fn cap_result(text: &str, cap: usize) -> (String, bool) {
    if text.len() <= cap {
        return (text.to_string(), false);
    }
    let end = floor_boundary(text, cap);
    let mut capped = String::with_capacity(end + TRUNCATED.len());
    capped.push_str(&text[..end]);
    capped.push_str(TRUNCATED);
    (capped, true)
}

/// The largest character boundary of `text` at or below `at`.
pub fn floor_boundary(text: &str, at: usize) -> usize {
    let mut end = at.min(text.len());
    // Byte 0 is always a boundary, so this stops.
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

/// `text` cut to at most `max_chars` characters (on a character boundary).
pub fn cap_chars(text: &str, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        Some((end, _)) => text[..end].to_string(),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cap_chars_cuts_on_characters() {
        assert_eq!(cap_chars("héllo", 2), "hé");
        assert_eq!(cap_chars("hi", 5), "hi");
    }

    #[test]
    fn floor_boundary_never_splits_a_character() {
        assert_eq!(floor_boundary("hé", 2), 1);
        assert_eq!(floor_boundary("hé", 9), 3);
    }
}
