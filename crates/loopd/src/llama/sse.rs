//! An incremental parser of server-sent events (`text/event-stream`).
//!
//! Bytes arrive in chunks split anywhere: inside a line, inside a UTF-8 character, between
//! the `\r` and `\n` of a line end, or inside the blank line that ends an event. Lines end at
//! `\n`, `\r\n` or `\r`; a line starting with `:` is a comment (llama-server's `: ping`);
//! `data:` lines are joined with `\n`; a blank line ends the event. Older llama-server builds
//! sent errors as an `error:` field, so that field makes an [`SseEvent::Error`].

/// The longest event (or single line) accepted, in bytes; a longer one is a broken stream.
pub const MAX_SSE_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One complete event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseEvent {
    /// The event's `data` (lines joined with `\n`).
    Data(String),
    /// The event carried an `error` field (older llama-server builds); its value.
    Error(String),
}

/// What makes a stream unreadable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line is not UTF-8.
    #[error("the event stream is not UTF-8 text")]
    NotUtf8,
    /// An event grew past [`MAX_SSE_EVENT_BYTES`].
    #[error("an event of the stream is larger than {MAX_SSE_EVENT_BYTES} bytes")]
    TooLarge,
}

/// The parser's state between chunks.
#[derive(Debug, Default)]
pub struct SseParser {
    /// Bytes of an unfinished line.
    line: Vec<u8>,
    /// The last chunk ended with `\r`: a `\n` starting the next one belongs to that line end.
    after_cr: bool,
    /// The `data` of the event being read.
    data: String,
    /// Whether the event being read has a `data` field (even an empty one).
    has_data: bool,
    /// The `error` field of the event being read, if any.
    error: Option<String>,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Feeds the next chunk; appends the events it completes to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        let mut rest = chunk;
        if self.after_cr {
            self.after_cr = false;
            if let Some(stripped) = rest.strip_prefix(b"\n") {
                rest = stripped;
            }
        }
        while let Some(end) = rest.iter().position(|b| *b == b'\n' || *b == b'\r') {
            self.extend_line(&rest[..end])?;
            let line = std::mem::take(&mut self.line);
            self.line_done(&line, out)?;
            self.line = line;
            self.line.clear();
            let terminator = rest[end];
            rest = &rest[end + 1..];
            if terminator == b'\r' {
                match rest.first() {
                    Some(b'\n') => rest = &rest[1..],
                    Some(_) => {}
                    None => self.after_cr = true,
                }
            }
        }
        self.extend_line(rest)
    }

    /// Whether the stream stopped in the middle of an event (bytes or fields not yet ended by
    /// a blank line).
    pub fn is_mid_event(&self) -> bool {
        !self.line.is_empty() || self.has_data || self.error.is_some()
    }

    fn extend_line(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + self.data.len() + bytes.len() > MAX_SSE_EVENT_BYTES {
            return Err(SseError::TooLarge);
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn line_done(&mut self, line: &[u8], out: &mut Vec<SseEvent>) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line.first() == Some(&b':') {
            tracing::trace!("event stream comment");
            return Ok(());
        }
        let line = std::str::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "error" => self.error = Some(value.to_owned()),
            _ => tracing::trace!(field, "event stream field ignored"),
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<SseEvent>) {
        let data = std::mem::take(&mut self.data);
        let has_data = std::mem::replace(&mut self.has_data, false);
        if let Some(error) = self.error.take() {
            out.push(SseEvent::Error(error));
        } else if has_data {
            out.push(SseEvent::Data(data));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use proptest::prelude::*;

    fn parse_in(chunks: &[&[u8]]) -> (Vec<SseEvent>, bool) {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.push(chunk, &mut out).unwrap();
        }
        (out, parser.is_mid_event())
    }

    fn data(s: &str) -> SseEvent {
        SseEvent::Data(s.to_owned())
    }

    #[test]
    fn llama_sse_events_comments_and_done() {
        let (events, mid) = parse_in(&[b"data: {\"a\":1}\n\n: ping\n\ndata: [DONE]\n\n"]);
        assert_eq!(events, [data("{\"a\":1}"), data("[DONE]")]);
        assert!(!mid);
    }

    #[test]
    fn llama_sse_line_ends_and_multi_line_data() {
        let (events, _) = parse_in(&[b"data:x\r\ndata: y\r\rdata\n\nid: 3\nevent: e\n\n"]);
        assert_eq!(events, [data("x\ny"), data("")]);
    }

    #[test]
    fn llama_sse_cr_at_chunk_end_is_one_line_end() {
        let (events, mid) = parse_in(&[b"data: a\r", b"\n\r", b"\ndata: b\n", b"\n"]);
        assert_eq!(events, [data("a"), data("b")]);
        assert!(!mid);
    }

    #[test]
    fn llama_sse_error_field_and_unfinished_event() {
        let (events, mid) = parse_in(&[b"error: {\"message\":\"m\"}\n\ndata: half"]);
        assert_eq!(events, [SseEvent::Error("{\"message\":\"m\"}".into())]);
        assert!(mid);
        let (_, mid) = parse_in(&[b"data: whole\n"]);
        assert!(mid);
    }

    #[test]
    fn llama_sse_rejects_bad_utf8_and_huge_events() {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        assert_eq!(
            parser.push(b"data: \xff\n", &mut out),
            Err(SseError::NotUtf8)
        );
        let mut parser = SseParser::new();
        let big = vec![b'x'; MAX_SSE_EVENT_BYTES + 1];
        assert_eq!(parser.push(&big, &mut out), Err(SseError::TooLarge));
    }

    /// Text for `data` lines: anything without line ends, with multi-byte characters.
    fn payload() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just('a'),
                Just(' '),
                Just(':'),
                Just('é'),
                Just('€'),
                Just('🦀'),
                Just('{'),
                Just('"'),
            ],
            0..12,
        )
        .prop_map(|chars| chars.into_iter().collect())
    }

    fn line_end() -> impl Strategy<Value = &'static str> {
        prop_oneof![Just("\n"), Just("\r\n"), Just("\r")]
    }

    proptest! {
        #[test]
        fn llama_sse_any_chunk_split_gives_the_same_events(
            events in proptest::collection::vec((payload(), any::<bool>(), line_end()), 0..8),
            cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..10),
        ) {
            let mut wire = String::new();
            let mut expected = Vec::new();
            for (text, ping, end) in &events {
                if *ping {
                    wire.push_str(": ping");
                    wire.push_str(end);
                }
                wire.push_str("data: ");
                wire.push_str(text);
                wire.push_str(end);
                wire.push_str(end);
                expected.push(SseEvent::Data(text.clone()));
            }
            let bytes = wire.as_bytes();
            let mut points: Vec<usize> = cuts.iter().map(|i| i.index(bytes.len() + 1)).collect();
            points.sort_unstable();
            let mut chunks: Vec<&[u8]> = Vec::new();
            let mut from = 0;
            for point in points {
                chunks.push(&bytes[from..point]);
                from = point;
            }
            chunks.push(&bytes[from..]);
            let (got, mid) = parse_in(&chunks);
            prop_assert_eq!(got, expected);
            prop_assert!(!mid);
        }
    }
}
