//! The level of a line a daemon wrote on stderr, so that boxd, which reads its children's
//! stderr, logs each line at the level the child gave it. The daemons' stderr log (tracing's
//! fmt format, no colours when stderr is no terminal) starts every event's first line with
//! its time and its level: `2026-12-06T19:57:03.123456Z ERROR loopd::daemon: message`.

use tracing::Level;

/// Splits a daemon's stderr log line into its level and what follows the level (target,
/// message and fields), leaving out the time; `None` for a line that is not one (a
/// continuation line, another program's output).
pub fn split_log_line(line: &str) -> Option<(Level, &str)> {
    let (time, rest) = line.split_once(' ')?;
    if !is_time(time) {
        return None;
    }
    // Levels are right-aligned to five characters: ` INFO`, ` WARN`.
    let rest = rest.trim_start_matches(' ');
    let (word, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let level = match word {
        "ERROR" => Level::ERROR,
        "WARN" => Level::WARN,
        "INFO" => Level::INFO,
        "DEBUG" => Level::DEBUG,
        "TRACE" => Level::TRACE,
        _ => return None,
    };
    Some((level, rest))
}

/// Whether `word` looks like the fmt format's time: RFC 3339 in UTC (`2026-12-06T19:57:03.1Z`).
fn is_time(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_digit()) && word.contains('T') && word.ends_with('Z')
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn each_level_is_read_and_the_time_left_out() {
        let cases = [
            (
                "2026-12-06T19:57:03.123456Z ERROR loopd: it failed",
                Level::ERROR,
                "loopd: it failed",
            ),
            (
                "2026-12-06T19:57:03.123456Z  WARN brokerd::mcp: odd",
                Level::WARN,
                "brokerd::mcp: odd",
            ),
            (
                "2026-12-06T19:57:03.123456Z  INFO loopd: started",
                Level::INFO,
                "loopd: started",
            ),
            (
                "2026-12-06T19:57:03.123456Z DEBUG loopd: detail",
                Level::DEBUG,
                "loopd: detail",
            ),
            (
                "2026-12-06T19:57:03.123456Z TRACE loopd: more",
                Level::TRACE,
                "loopd: more",
            ),
        ];
        for (line, level, rest) in cases {
            assert_eq!(split_log_line(line), Some((level, rest)), "{line:?}");
        }
    }

    #[test]
    fn other_lines_have_no_level() {
        for line in [
            "",
            "ERROR at the start",
            "llama_model_loader: loaded meta data",
            "srv  update_slots: all slots are idle",
            "thread 'main' panicked at src/main.rs:1:1:",
            "2026-12-06T19:57:03.123456Z",
            "2026-12-06T19:57:03.123456Z NOTICE loopd: not a tracing level",
            "2026-12-06T19:57:03.123456Z error loopd: lowercase",
            "    at loopd/src/main.rs:3",
            "boxd --exec-child: cannot execute /x",
        ] {
            assert_eq!(split_log_line(line), None, "{line:?}");
        }
    }
}
