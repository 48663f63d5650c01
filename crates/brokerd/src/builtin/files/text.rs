//! Bytes to result text within a cap: lossy UTF-8, cut on a character boundary.

/// `bytes` as text of at most `cap` bytes, and whether anything was cut.
///
/// `bytes` may hold more than `cap` (a reader reads `cap + 1` to know the source goes on): then
/// the text is cut. A multi-byte character the cut splits is dropped whole, never half kept.
/// Invalid UTF-8 becomes U+FFFD (the replacement character); since that takes three bytes where
/// the invalid byte took one, the text is cut again, on a character boundary, if it grew past
/// `cap`.
pub(crate) fn capped_text(bytes: &[u8], cap: usize) -> (String, bool) {
    let mut truncated = bytes.len() > cap;
    let mut kept = &bytes[..bytes.len().min(cap)];
    if truncated {
        kept = &kept[..complete_prefix_len(kept)];
    }
    let mut text = String::from_utf8_lossy(kept).into_owned();
    if text.len() > cap {
        let mut end = cap;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        truncated = true;
    }
    (text, truncated)
}

/// The length of `bytes` without a UTF-8 sequence that the end cuts short.
fn complete_prefix_len(bytes: &[u8]) -> usize {
    /// The longest UTF-8 sequence, in bytes.
    const MAX_UTF8_LEN: usize = 4;
    let n = bytes.len();
    for back in 1..=n.min(MAX_UTF8_LEN - 1) {
        let byte = bytes[n - back];
        if byte & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: look further back for its lead byte
        }
        let needed = match byte {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if back < needed { n - back } else { n };
    }
    n
}

#[cfg(test)]
mod tests {
    use super::capped_text;

    #[test]
    fn short_text_is_kept_whole() {
        assert_eq!(capped_text(b"hello", 5), ("hello".to_string(), false));
    }

    #[test]
    fn a_cut_never_splits_a_character() {
        // "aé€😀": 1 + 2 + 3 + 4 bytes.
        let s = "aé€😀".as_bytes();
        assert_eq!(capped_text(s, 2), ("a".to_string(), true));
        assert_eq!(capped_text(s, 3), ("aé".to_string(), true));
        assert_eq!(capped_text(s, 4), ("aé".to_string(), true));
        assert_eq!(capped_text(s, 5), ("aé".to_string(), true));
        assert_eq!(capped_text(s, 6), ("aé€".to_string(), true));
        assert_eq!(capped_text(s, 9), ("aé€".to_string(), true));
        assert_eq!(capped_text(s, 10), ("aé€😀".to_string(), false));
    }

    #[test]
    fn invalid_bytes_become_replacement_characters_within_the_cap() {
        assert_eq!(
            capped_text(b"a\xffb", 10),
            ("a\u{fffd}b".to_string(), false)
        );
        // "a" + U+FFFD is 4 bytes: with a cap of 3 only "a" fits.
        assert_eq!(capped_text(b"a\xffb", 3), ("a".to_string(), true));
    }
}
