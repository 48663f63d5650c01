//! The forms of a secret's value the guard looks for: the value, reversed, percent-encoded,
//! JSON-escaped, hex, and base64 and base64url at each of the three alignments a value can take inside a
//! longer encoded text.
//!
//! Base64 turns three bytes into four characters, so the characters that encode a value
//! depend on where it starts in the encoded input (its offset modulo 3) and on the bytes
//! around it. For each offset the guard keeps only the characters made of the value's bits
//! alone: those appear in *any* base64 text that encodes the value at that offset, whatever
//! comes before or after it.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// What URL-encoding leaves as it is (RFC 3986's unreserved characters).
const UNRESERVED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// The forms matched case-sensitively: the value, reversed, percent-encoded (upper- and
/// lower-case hex), JSON-escaped (with and without `\/`), base64 and base64url at each
/// alignment. Without repeats.
pub fn exact_forms(value: &str) -> Vec<Vec<u8>> {
    let mut forms: Vec<Vec<u8>> = vec![
        value.as_bytes().to_vec(),
        value.chars().rev().collect::<String>().into_bytes(),
    ];
    let upper = utf8_percent_encode(value, UNRESERVED).to_string();
    forms.push(lower_percent_hex(&upper).into_bytes());
    forms.push(upper.into_bytes());
    // Inside a JSON string (an MCP server's structured content, an API's answer): a PEM key's
    // newlines as `\n`, a quote as `\"`, and `/` as `\/` as some encoders write it.
    if let Ok(quoted) = serde_json::to_string(value) {
        let escaped = &quoted[1..quoted.len() - 1];
        forms.push(escaped.as_bytes().to_vec());
        forms.push(escaped.replace('/', "\\/").into_bytes());
    }
    for engine in [STANDARD_NO_PAD, URL_SAFE_NO_PAD] {
        for shift in 0..3 {
            if let Some(core) = base64_core(&engine, value.as_bytes(), shift) {
                forms.push(core);
            }
        }
    }
    forms.sort();
    forms.dedup();
    forms
}

/// The forms matched ignoring ASCII case: hex.
pub fn caseless_forms(value: &str) -> Vec<Vec<u8>> {
    vec![hex::encode(value.as_bytes()).into_bytes()]
}

/// `%2F` as `%2f`: the hex digits after each `%` in lower case.
fn lower_percent_hex(encoded: &str) -> String {
    let mut out = String::with_capacity(encoded.len());
    let mut hex_left = 0;
    for c in encoded.chars() {
        if hex_left > 0 {
            out.push(c.to_ascii_lowercase());
            hex_left -= 1;
        } else {
            if c == '%' {
                hex_left = 2;
            }
            out.push(c);
        }
    }
    out
}

/// The characters of the base64 encoding of `value` preceded by `shift` bytes that are made of
/// the value's bits alone. None when that leaves nothing (a value too short to have any).
fn base64_core(
    engine: &base64::engine::GeneralPurpose,
    value: &[u8],
    shift: usize,
) -> Option<Vec<u8>> {
    let mut input = vec![0u8; shift];
    input.extend_from_slice(value);
    let encoded = engine.encode(&input);
    // Character i holds bits [6i, 6i + 6) of the input; the value holds bits
    // [8 * shift, 8 * (shift + len)).
    let first = (8 * shift).div_ceil(6);
    let end = (8 * (shift + value.len())) / 6;
    (end > first).then(|| encoded.as_bytes()[first..end].to_vec())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn found_in(haystack: &str, forms: &[Vec<u8>]) -> bool {
        forms.iter().any(|form| {
            haystack
                .as_bytes()
                .windows(form.len())
                .any(|window| window == form.as_slice())
        })
    }

    #[test]
    fn a_value_inside_longer_base64_is_found_at_every_offset() {
        let value = "s3cr3t-v4lue+/?";
        let forms = exact_forms(value);
        for prefix in ["", "a", "ab", "abc", "key=", "Authorization: "] {
            for suffix in ["", "x", "yz"] {
                let input = format!("{prefix}{value}{suffix}");
                for engine in [
                    base64::engine::general_purpose::STANDARD,
                    base64::engine::general_purpose::URL_SAFE,
                ] {
                    let encoded = engine.encode(input.as_bytes());
                    assert!(found_in(&encoded, &forms), "{input:?} as {encoded}");
                }
            }
        }
    }

    #[test]
    fn every_listed_form_is_there() {
        let value = "tok en/1";
        let forms = exact_forms(value);
        assert!(found_in("tok en/1", &forms));
        assert!(found_in("1/ne kot", &forms));
        assert!(found_in("tok%20en%2F1", &forms));
        assert!(found_in("tok%20en%2f1", &forms));
        assert_eq!(caseless_forms(value), [b"746f6b20656e2f31".to_vec()]);
    }
}
