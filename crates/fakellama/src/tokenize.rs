//! The deterministic stand-in tokeniser.
//!
//! Rule: a token is either a piece of at most [`MAX_ALNUM_TOKEN_BYTES`] bytes cut, from its
//! start, out of a maximal run of ASCII letters and digits, or one single other character
//! (a Unicode scalar value: punctuation, whitespace, non-ASCII letters each count as one).
//! So `"Hello, world"` is `["Hell", "o", ",", " ", "worl", "d"]`.
//!
//! Properties the rest of the crate relies on: the same text always gives the same tokens,
//! concatenating the tokens gives the text back, and for two texts `a` and `b` where the
//! last character of `a` or the first of `b` is not ASCII alphanumeric,
//! `tokenize(a + b) == tokenize(a) ++ tokenize(b)` (no token spans such a boundary).

/// The longest token cut out of a run of ASCII alphanumerics, in bytes.
pub const MAX_ALNUM_TOKEN_BYTES: usize = 4;

/// Splits `text` into tokens by the rule in the module documentation.
pub fn tokenize(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut rest = text;
    while let Some(first) = rest.chars().next() {
        let len = if first.is_ascii_alphanumeric() {
            rest.bytes()
                .take(MAX_ALNUM_TOKEN_BYTES)
                .take_while(u8::is_ascii_alphanumeric)
                .count()
        } else {
            first.len_utf8()
        };
        let (token, tail) = rest.split_at(len);
        tokens.push(token.to_owned());
        rest = tail;
    }
    tokens
}

/// The number of tokens in `text`, without building them.
pub fn count_tokens(text: &str) -> usize {
    let mut count = 0;
    let mut run = 0;
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            if run % MAX_ALNUM_TOKEN_BYTES == 0 {
                count += 1;
            }
            run += 1;
        } else {
            run = 0;
            count += 1;
        }
    }
    count
}

/// The length of the longest common prefix of two token sequences.
pub fn common_prefix_len(a: &[String], b: &[String]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn splits_runs_and_other_characters() {
        assert_eq!(
            tokenize("Hello, world"),
            ["Hell", "o", ",", " ", "worl", "d"]
        );
        assert_eq!(tokenize("ab12cd"), ["ab12", "cd"]);
        assert_eq!(tokenize("é<|x|>"), ["é", "<", "|", "x", "|", ">"]);
        assert!(tokenize("").is_empty());
    }

    #[test]
    fn common_prefix() {
        let a = tokenize("abc def");
        let b = tokenize("abc dxf");
        assert_eq!(common_prefix_len(&a, &b), 2);
        assert_eq!(common_prefix_len(&a, &a), a.len());
    }

    proptest! {
        #[test]
        fn lossless_and_deterministic(text in ".*") {
            let tokens = tokenize(&text);
            prop_assert_eq!(tokens.concat(), text.clone());
            prop_assert_eq!(&tokens, &tokenize(&text));
            prop_assert_eq!(tokens.len(), count_tokens(&text));
            for t in &tokens {
                prop_assert!(!t.is_empty() && t.len() <= MAX_ALNUM_TOKEN_BYTES);
            }
        }

        #[test]
        fn separable_at_non_alphanumeric(a in "[a-z0-9 ,<>]*", b in "[a-z0-9 ,<>]*") {
            let joined = format!("{a}\n{b}");
            let mut parts = tokenize(&a);
            parts.extend(tokenize(&format!("\n{b}")));
            prop_assert_eq!(tokenize(&joined), parts);
        }
    }
}
