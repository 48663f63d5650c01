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

    #[test]
    fn cap_result_leaves_short_text_alone() {
        assert_eq!(cap_result("hello", 10), ("hello".to_string(), false));
        assert_eq!(cap_result("", 0), (String::new(), false));
    }

    #[test]
    fn cap_result_keeps_text_of_exactly_the_cap() {
        assert_eq!(cap_result("hello", 5), ("hello".to_string(), false));
        assert_eq!(
            cap_result("hello!", 5),
            ("hello\n[truncated]".to_string(), true)
        );
    }

    #[test]
    fn cap_result_cuts_on_a_character_boundary() {
        // "é" is 2 bytes, "€" is 3: byte 3 and 4 fall inside "€".
        let text = "aé€b";
        assert_eq!(cap_result(text, 3), ("aé\n[truncated]".to_string(), true));
        assert_eq!(cap_result(text, 4), ("aé\n[truncated]".to_string(), true));
        assert_eq!(cap_result(text, 5), ("aé\n[truncated]".to_string(), true));
        assert_eq!(cap_result(text, 6), ("aé€\n[truncated]".to_string(), true));
        assert_eq!(cap_result(text, 7), (text.to_string(), false));
        assert_eq!(cap_result("€", 2), ("\n[truncated]".to_string(), true));
        assert_eq!(cap_result("abc", 0), ("\n[truncated]".to_string(), true));
        // The marker comes on top of the cap.
        let (capped, cut) = cap_result(&"x".repeat(100), 10);
        assert!(cut);
        assert_eq!(capped.len(), 10 + "\n[truncated]".len());
    }
}
