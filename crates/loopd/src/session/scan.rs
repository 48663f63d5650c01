//! Reading a log from its bytes: every line checked, a torn tail found.

use super::StoreError;
use super::line::{self, GENESIS_DIGEST};
use bxcore::{LOG_FORMAT_VERSION, LogRecord, SessionId};
use std::path::Path;

/// What a log's bytes hold.
#[derive(Debug)]
pub struct Scan {
    /// Every whole record, in order.
    pub records: Vec<LogRecord>,
    /// The digest of the last whole line (the genesis digest for none).
    pub last_digest: String,
    /// The bytes up to and including the last newline: the part that stays.
    pub whole_bytes: u64,
    /// Bytes after the last newline: a line torn by a crash mid-write.
    pub torn_bytes: u64,
}

/// Checks every line of `bytes` (the log at `path` of session `id`). A damaged or misplaced
/// line is an error naming it; the bytes after the last newline are reported as torn, not
/// read.
pub fn scan(path: &Path, id: &SessionId, bytes: &[u8]) -> Result<Scan, StoreError> {
    let whole = bytes
        .iter()
        .rposition(|b| *b == b'\n')
        .map_or(0, |at| at + 1);
    let mut records = Vec::new();
    let mut digest = GENESIS_DIGEST.to_string();
    let corrupt = |line: u64, why: String| StoreError::Corrupt {
        path: path.to_path_buf(),
        line,
        why,
    };
    // Without the final newline, so that splitting yields exactly the whole lines.
    let lines = bytes[..whole.saturating_sub(1)].split(|b| *b == b'\n');
    for (index, raw) in lines.enumerate().take_while(|_| whole > 0) {
        let number = index as u64 + 1;
        let text =
            std::str::from_utf8(raw).map_err(|e| corrupt(number, format!("not UTF-8: {e}")))?;
        let decoded = line::decode(text, number, &digest).map_err(|why| corrupt(number, why))?;
        check_place(&decoded.record, number, id).map_err(|why| corrupt(number, why))?;
        digest = decoded.digest;
        records.push(decoded.record);
    }
    Ok(Scan {
        records,
        last_digest: digest,
        whole_bytes: whole as u64,
        torn_bytes: (bytes.len() - whole) as u64,
    })
}

/// A header comes first and only first, for this session, in a version this build reads.
fn check_place(record: &LogRecord, number: u64, id: &SessionId) -> Result<(), String> {
    match (record, number) {
        (
            LogRecord::Header {
                version, session, ..
            },
            1,
        ) => {
            if *version > LOG_FORMAT_VERSION {
                return Err(format!(
                    "log format version {version} is newer than this loopd reads \
                     ({LOG_FORMAT_VERSION}); upgrade loopd"
                ));
            }
            if session != id {
                return Err(format!("the header names session {session}, not {id}"));
            }
            Ok(())
        }
        (_, 1) => Err(format!(
            "the first record is a {}, not a header",
            record.kind()
        )),
        (LogRecord::Header { .. }, _) => Err("a second header".to_string()),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bxcore::Timestamp;

    fn header(version: u32, session: &str) -> Vec<u8> {
        let record = LogRecord::Header {
            version,
            session: SessionId::new(session).unwrap(),
            time: Timestamp::now(),
        };
        line::encode(&record, 1, GENESIS_DIGEST)
            .unwrap()
            .0
            .into_bytes()
    }

    fn why(bytes: &[u8]) -> String {
        let id = SessionId::new("s").unwrap();
        match scan(Path::new("log.jsonl"), &id, bytes) {
            Err(StoreError::Corrupt { line: 1, why, .. }) => why,
            other => panic!("expected line 1 to be refused, got {other:?}"),
        }
    }

    #[test]
    fn a_log_from_a_newer_loopd_is_refused() {
        assert!(why(&header(LOG_FORMAT_VERSION + 1, "s")).contains("upgrade loopd"));
    }

    #[test]
    fn a_header_for_another_session_is_refused() {
        assert!(why(&header(LOG_FORMAT_VERSION, "t")).contains("names session t"));
    }

    #[test]
    fn a_log_must_start_with_its_header() {
        let note = LogRecord::Note {
            time: Timestamp::now(),
            text: "x".into(),
        };
        let bytes = line::encode(&note, 1, GENESIS_DIGEST)
            .unwrap()
            .0
            .into_bytes();
        assert!(why(&bytes).contains("not a header"));
    }

    #[test]
    fn bytes_after_the_last_newline_are_torn() {
        let mut bytes = header(LOG_FORMAT_VERSION, "s");
        let whole = bytes.len() as u64;
        bytes.extend_from_slice(b"{\"type\":\"no");
        let found = scan(
            Path::new("log.jsonl"),
            &SessionId::new("s").unwrap(),
            &bytes,
        )
        .unwrap();
        assert_eq!(found.records.len(), 1);
        assert_eq!((found.whole_bytes, found.torn_bytes), (whole, 11));
    }
}
