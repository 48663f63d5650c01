//! A server-sent-events parser: bytes in as they arrive, events and comments out.

/// The largest event (or comment) accepted, in bytes; a larger one is an error rather than
/// unbounded memory.
pub const MAX_SSE_EVENT_BYTES: usize = 16 * 1024 * 1024;

/// One thing an SSE stream said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SseItem {
    /// An event: its name (`message` when none was given) and its data lines joined by `\n`.
    Event {
        /// The `event:` field.
        name: String,
        /// The `data:` fields.
        data: String,
    },
    /// A comment line (`: text`), without the colon and one leading space.
    Comment(String),
}

/// The stream broke the SSE rules or the size limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// One event grew past [`MAX_SSE_EVENT_BYTES`].
    #[error("an event is larger than {MAX_SSE_EVENT_BYTES} bytes")]
    TooLarge,
    /// A line was not UTF-8.
    #[error("the event stream is not UTF-8")]
    NotUtf8,
}

/// An incremental SSE parser: feed it chunks with [`SseParser::push`].
#[derive(Debug, Default)]
pub struct SseParser {
    line: Vec<u8>,
    name: Option<String>,
    data: Option<String>,
    size: usize,
}

impl SseParser {
    /// A parser at the start of a stream.
    pub fn new() -> SseParser {
        SseParser::default()
    }

    /// Parses `chunk`, appending every complete item to `out`.
    pub fn push(&mut self, chunk: &[u8], out: &mut Vec<SseItem>) -> Result<(), SseError> {
        for &byte in chunk {
            if byte != b'\n' {
                self.line.push(byte);
                self.size += 1;
                if self.size > MAX_SSE_EVENT_BYTES {
                    return Err(SseError::TooLarge);
                }
                continue;
            }
            let mut line = std::mem::take(&mut self.line);
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            let line = String::from_utf8(line).map_err(|_| SseError::NotUtf8)?;
            self.line_done(&line, out);
        }
        Ok(())
    }

    fn line_done(&mut self, line: &str, out: &mut Vec<SseItem>) {
        if line.is_empty() {
            self.size = 0;
            let name = self.name.take();
            if let Some(data) = self.data.take() {
                out.push(SseItem::Event {
                    name: name.unwrap_or_else(|| "message".into()),
                    data,
                });
            }
            return;
        }
        if let Some(comment) = line.strip_prefix(':') {
            self.size = 0;
            let comment = comment.strip_prefix(' ').unwrap_or(comment);
            out.push(SseItem::Comment(comment.to_string()));
            return;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "event" => self.name = Some(value.to_string()),
            "data" => match &mut self.data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => self.data = Some(value.to_string()),
            },
            _ => {} // `id`, `retry` and unknown fields mean nothing to boxctl.
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn parse(chunks: &[&[u8]]) -> Vec<SseItem> {
        let mut parser = SseParser::new();
        let mut out = Vec::new();
        for chunk in chunks {
            parser.push(chunk, &mut out).unwrap();
        }
        out
    }

    fn event(name: &str, data: &str) -> SseItem {
        SseItem::Event {
            name: name.into(),
            data: data.into(),
        }
    }

    #[test]
    fn sse_events_and_comments_in_order_across_any_split() {
        let stream = b": ping\n\nevent: turn\ndata: {\"a\":1}\n\nevent: turn\r\ndata: x\r\n\r\n";
        let expected = vec![
            SseItem::Comment("ping".into()),
            event("turn", "{\"a\":1}"),
            event("turn", "x"),
        ];
        assert_eq!(parse(&[stream]), expected);
        for cut in 0..stream.len() {
            assert_eq!(
                parse(&[&stream[..cut], &stream[cut..]]),
                expected,
                "cut {cut}"
            );
        }
    }

    #[test]
    fn sse_data_lines_join_and_unnamed_events_are_messages() {
        assert_eq!(
            parse(&[b"data: a\ndata: b\n\n"]),
            vec![event("message", "a\nb")]
        );
        assert_eq!(parse(&[b"event: turn\n\n"]), vec![]);
        assert_eq!(
            parse(&[b"id: 3\nretry: 5\ndata:x\n\n"]),
            vec![event("message", "x")]
        );
    }

    #[test]
    fn sse_an_oversized_event_is_an_error() {
        let mut parser = SseParser::new();
        let big = vec![b'x'; MAX_SSE_EVENT_BYTES + 1];
        assert_eq!(parser.push(&big, &mut Vec::new()), Err(SseError::TooLarge));
    }
}
