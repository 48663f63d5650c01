//! The daemons' log writer: stderr, with its write errors dropped.
//!
//! When boxd is killed, a daemon's stderr is a pipe nobody reads: each write fails with
//! `EPIPE`, and tracing's fmt layer reports a failed write with `eprintln!`, which panics on
//! that same broken stderr, in whatever thread logged (a turn's, taking its session with it).
//! A log line that cannot be written is lost; the daemon goes on.

use std::io::{self, Write};

/// `W` with every write reported done: what cannot be written is dropped.
#[derive(Debug)]
pub struct Lossy<W>(pub W);

impl<W: Write> Write for Lossy<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // A line that cannot be written is dropped whole; reporting the error would only
        // reach the same writer.
        let _ = self.0.write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        let _ = self.0.flush();
        Ok(())
    }
}

/// stderr for the log, losing what cannot be written (see the module's documentation).
pub fn lossy_stderr() -> Lossy<io::Stderr> {
    Lossy(io::stderr())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A writer whose every write fails, as a broken pipe's does.
    struct Broken;

    impl Write for Broken {
        fn write(&mut self, _buf: &[u8]) -> io::Result<usize> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
        fn flush(&mut self) -> io::Result<()> {
            Err(io::Error::from(io::ErrorKind::BrokenPipe))
        }
    }

    #[test]
    fn a_broken_writer_is_reported_as_written() {
        let mut lossy = Lossy(Broken);
        assert_eq!(lossy.write(b"a line\n").unwrap(), 7);
        lossy.write_all(b"another line\n").unwrap();
        lossy.flush().unwrap();
    }

    #[test]
    fn what_can_be_written_is_written() {
        let mut lossy = Lossy(Vec::new());
        lossy.write_all(b"a line\n").unwrap();
        assert_eq!(lossy.0, b"a line\n");
    }
}
