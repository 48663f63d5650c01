//! Starting a daemon's log: to journald when stderr is the journal (each event with its
//! priority), otherwise to stderr in tracing's fmt format, whose lines boxd reads back with
//! [`split_log_line`](super::split_log_line). The one init of every daemon.

use super::stderr_is_journal;
use std::io::IsTerminal;
use tracing_subscriber::Layer;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

/// For [`init_log`]'s `logged`: every target may be logged.
pub fn every_target(_target: &str) -> bool {
    true
}

/// Starts the log of daemon `name` at `level` (a tracing filter: `"info"`, or directives such
/// as `"info,boxd::child=trace"`); `RUST_LOG`, when set, wins. An event whose target `logged`
/// refuses is never written, whatever the level.
///
/// When stderr is the journal ([`stderr_is_journal`](super::stderr_is_journal): systemd's
/// `JOURNAL_STREAM` names fd 2) and journald answers, events go to journald with their
/// priority and `name` as `SYSLOG_IDENTIFIER`. Otherwise they go to stderr, one line each
/// starting with the time and the level, without colours unless stderr is a terminal; a line
/// that cannot be written is lost, never a panic ([`crate::Lossy`]).
pub fn init_log(name: &str, level: &str, logged: fn(&str) -> bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let keep = tracing_subscriber::filter::filter_fn(move |meta| logged(meta.target()));
    let journald = if stderr_is_journal() {
        tracing_journald::layer().ok()
    } else {
        None
    };
    // Set once per process; a second init (none is made) would keep the first.
    let _ = match journald {
        Some(journald) => tracing_subscriber::registry()
            .with(filter)
            .with(
                journald
                    .with_syslog_identifier(name.to_string())
                    .with_filter(keep),
            )
            .try_init(),
        None => tracing_subscriber::registry()
            .with(filter)
            .with(
                stderr_layer(crate::lossy_stderr, std::io::stderr().is_terminal())
                    .with_filter(keep),
            )
            .try_init(),
    };
}

/// The daemons' stderr log: tracing's fmt format to `writer`, colours only if `ansi`, and a
/// failed write never reported (it would go to the same stderr).
fn stderr_layer<S, W>(writer: W, ansi: bool) -> impl Layer<S>
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    tracing_subscriber::fmt::layer()
        .with_writer(writer)
        .log_internal_errors(false)
        .with_ansi(ansi)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use crate::log::split_log_line;
    use std::sync::{Arc, Mutex};
    use tracing::Level;

    /// A writer into a shared buffer.
    #[derive(Clone, Default)]
    struct Buffer(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Buffer {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn boxd_reads_back_the_level_of_each_line_a_daemon_writes() {
        let buffer = Buffer::default();
        let writer = buffer.clone();
        let subscriber = tracing_subscriber::registry()
            .with(stderr_layer(move || writer.clone(), false))
            .with(tracing_subscriber::filter::LevelFilter::TRACE);
        tracing::subscriber::with_default(subscriber, || {
            tracing::error!(session = "s1", "it failed");
            tracing::warn!("odd");
            tracing::info!("started");
            tracing::debug!("detail");
            tracing::trace!("more");
        });
        let text = String::from_utf8(buffer.0.lock().unwrap().clone()).unwrap();
        let read: Vec<(Level, String)> = text
            .lines()
            .map(|line| {
                let (level, rest) = split_log_line(line).unwrap_or_else(|| panic!("{line:?}"));
                (level, rest.to_string())
            })
            .collect();
        let target = module_path!();
        assert_eq!(
            read,
            [
                (Level::ERROR, format!("{target}: it failed session=\"s1\"")),
                (Level::WARN, format!("{target}: odd")),
                (Level::INFO, format!("{target}: started")),
                (Level::DEBUG, format!("{target}: detail")),
                (Level::TRACE, format!("{target}: more")),
            ]
        );
    }
}
