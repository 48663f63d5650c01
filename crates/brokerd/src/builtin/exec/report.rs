//! The result text of one run: how it ended, the wall time, then stdout and stderr, each
//! with its size and, when capped, how much was kept of how much.

use bxsandbox::{Outcome, Output};
use std::fmt::Write;

/// The first line's prefix; the audit line takes the exit status from it.
pub(crate) const STATUS_PREFIX: &str = "status: ";

/// The text the model gets for `outcome`.
pub(crate) fn text(outcome: &Outcome) -> String {
    let mut text = format!(
        "{STATUS_PREFIX}{}\nwall_ms: {}\n",
        outcome.status, outcome.wall_ms
    );
    stream(&mut text, "stdout", &outcome.stdout);
    stream(&mut text, "stderr", &outcome.stderr);
    text
}

fn stream(text: &mut String, name: &str, output: &Output) {
    // Writing to a String cannot fail.
    let _ = if output.truncated {
        writeln!(
            text,
            "{name} (first {} of {} bytes; the rest was not kept, max_output_bytes):",
            output.bytes.len(),
            output.total_bytes
        )
    } else {
        writeln!(text, "{name} ({} bytes):", output.total_bytes)
    };
    text.push_str(&String::from_utf8_lossy(&output.bytes));
    if !output.bytes.is_empty() && !output.bytes.ends_with(b"\n") {
        text.push('\n');
    }
}

/// The exit status the text of a run gives on its first line.
pub(crate) fn status_of(text: &str) -> Option<&str> {
    text.lines().next()?.strip_prefix(STATUS_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bxsandbox::Status;

    #[test]
    fn a_capped_stream_says_how_much_was_kept_of_how_much() {
        let outcome = Outcome {
            status: Status::Exited(0),
            stdout: Output {
                bytes: b"abc".to_vec(),
                total_bytes: 10,
                truncated: true,
            },
            stderr: Output::default(),
            wall_ms: 7,
        };
        let text = text(&outcome);
        assert_eq!(
            text,
            "status: exited with status 0\nwall_ms: 7\n\
             stdout (first 3 of 10 bytes; the rest was not kept, max_output_bytes):\nabc\n\
             stderr (0 bytes):\n"
        );
        assert_eq!(status_of(&text), Some("exited with status 0"));
    }
}
