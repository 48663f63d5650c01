//! One line of a session log: a record, its sequence number and a digest chained to the line
//! before.
//!
//! A line is the record's own JSON with two keys added at the end:
//! `{"type":"user",...,"seq":5,"digest":"<sha256 hex>"}`. The digest covers the previous
//! line's digest and this line's bytes up to (not including) `,"digest"`, so a changed,
//! dropped or reordered line breaks the chain where it happened. Verification works on the
//! exact bytes read, never on a re-serialisation.

use bxcore::LogRecord;
use sha2::{Digest, Sha256};

/// The digest the first line is chained to.
pub const GENESIS_DIGEST: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The bytes of a sha256 digest written as hex.
const DIGEST_HEX_BYTES: usize = 64;
const SEQ_KEY: &str = ",\"seq\":";
const DIGEST_KEY: &str = ",\"digest\":\"";
const DIGEST_END: &str = "\"}";

/// A line that was read and checked.
#[derive(Debug)]
pub struct DecodedLine {
    /// The record on the line.
    pub record: LogRecord,
    /// Its digest, which the next line chains to.
    pub digest: String,
}

/// Writes `record` as line `seq`, chained to `prev_digest`. Returns the line, newline
/// included, and its digest.
pub fn encode(
    record: &LogRecord,
    seq: u64,
    prev_digest: &str,
) -> Result<(String, String), serde_json::Error> {
    let json = serde_json::to_string(record)?;
    // A record always serialises to a JSON object, so it ends with `}`.
    let open = json.strip_suffix('}').unwrap_or(&json);
    let body = format!("{open}{SEQ_KEY}{seq}}}");
    let digest = chain(prev_digest, &body);
    let body_open = &body[..body.len() - 1];
    let line = format!("{body_open}{DIGEST_KEY}{digest}{DIGEST_END}\n");
    Ok((line, digest))
}

/// Reads one line (without its newline) that should follow `prev_digest` as number
/// `expected_seq`. The error says what is wrong with it.
pub fn decode(line: &str, expected_seq: u64, prev_digest: &str) -> Result<DecodedLine, String> {
    let (body, digest) = split_digest(line)?;
    let (record_json, seq) = split_seq(&body)?;
    if seq != expected_seq {
        return Err(format!(
            "sequence number {seq} where {expected_seq} was expected: a record was dropped, \
             duplicated or reordered"
        ));
    }
    if chain(prev_digest, &body) != digest {
        return Err(
            "digest does not match: the record was changed, or the one before it was".to_string(),
        );
    }
    let record = serde_json::from_str(&record_json)
        .map_err(|e| format!("not a log record of this version: {e}"))?;
    Ok(DecodedLine {
        record,
        digest: digest.to_string(),
    })
}

/// The digest of `body` chained to `prev_digest`.
fn chain(prev_digest: &str, body: &str) -> String {
    let mut hasher = Sha256::new();
    hasher.update(prev_digest.as_bytes());
    hasher.update(body.as_bytes());
    hex::encode(hasher.finalize())
}

/// Splits a line into the body the digest covers (with its closing `}` restored) and the
/// digest.
fn split_digest(line: &str) -> Result<(String, &str), String> {
    let missing = || "no digest at the end of the line".to_string();
    let rest = line.strip_suffix(DIGEST_END).ok_or_else(missing)?;
    if rest.len() < DIGEST_HEX_BYTES + DIGEST_KEY.len()
        || !rest.is_char_boundary(rest.len() - DIGEST_HEX_BYTES)
    {
        return Err(missing());
    }
    let (head, digest) = rest.split_at(rest.len() - DIGEST_HEX_BYTES);
    if !digest
        .bytes()
        .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
    {
        return Err(missing());
    }
    let open = head.strip_suffix(DIGEST_KEY).ok_or_else(missing)?;
    Ok((format!("{open}}}"), digest))
}

/// Splits a body into the record's JSON and the sequence number.
fn split_seq(body: &str) -> Result<(String, u64), String> {
    let missing = || "no sequence number at the end of the record".to_string();
    // Inside a JSON string a `"` is always escaped, so `,"seq":` can only be our key.
    let at = body.rfind(SEQ_KEY).ok_or_else(missing)?;
    let digits = body[at + SEQ_KEY.len()..]
        .strip_suffix('}')
        .ok_or_else(missing)?;
    let seq = digits.parse::<u64>().map_err(|_| missing())?;
    Ok((format!("{}}}", &body[..at]), seq))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bxcore::Timestamp;

    fn note(text: &str) -> LogRecord {
        LogRecord::Note {
            time: Timestamp::now(),
            text: text.into(),
        }
    }

    #[test]
    fn a_line_decodes_to_what_was_encoded() {
        let record = note("tricky ,\"seq\":9} ,\"digest\":\"x\"}");
        let (line, digest) = encode(&record, 4, GENESIS_DIGEST).unwrap();
        assert!(line.ends_with('\n') && line.starts_with("{\"type\":\"note\""));
        let decoded = decode(line.trim_end_matches('\n'), 4, GENESIS_DIGEST).unwrap();
        assert_eq!(decoded.record, record);
        assert_eq!(decoded.digest, digest);
    }

    #[test]
    fn a_changed_byte_or_a_wrong_place_is_named() {
        let (line, _) = encode(&note("hello"), 2, GENESIS_DIGEST).unwrap();
        let line = line.trim_end_matches('\n');
        let changed = line.replace("hello", "hellp");
        assert!(
            decode(&changed, 2, GENESIS_DIGEST)
                .unwrap_err()
                .contains("digest")
        );
        assert!(
            decode(line, 3, GENESIS_DIGEST)
                .unwrap_err()
                .contains("sequence number 2")
        );
        let other_prev = "1".repeat(64);
        assert!(decode(line, 2, &other_prev).unwrap_err().contains("digest"));
        assert!(
            decode("{\"type\":\"note\"}", 1, GENESIS_DIGEST)
                .unwrap_err()
                .contains("no digest")
        );
        assert!(decode("", 1, GENESIS_DIGEST).is_err());
    }
}
