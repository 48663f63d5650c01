//! What others said where a task came from: a chat room the owner shares with other people.
//! A channel (chatd) sends it with the owner's next task; loopd writes each as an
//! `overheard` record before the task, labelled like a fetched page (public, untrusted), and
//! shows it to the model marked as data from outside. It is never a task and never the
//! owner's words.

use serde::{Deserialize, Serialize};

/// The most overheard messages one task carries.
pub const MAX_OVERHEARD_PER_TASK: usize = 20;
/// The longest overheard message, in bytes.
pub const MAX_OVERHEARD_TEXT_BYTES: usize = 2_000;
/// The longest speaker's name, in bytes (a Matrix user id is at most 255).
pub const MAX_OVERHEARD_FROM_BYTES: usize = 255;

/// One message of someone other than the owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OverheardText {
    /// Who said it (`@bob:example.org`): 1 to [`MAX_OVERHEARD_FROM_BYTES`] bytes of visible
    /// ASCII, without spaces or square brackets (see [`speaker_problem`]).
    pub from: String,
    /// What they said: at most [`MAX_OVERHEARD_TEXT_BYTES`] bytes.
    pub text: String,
}

/// What is wrong with `overheard` as a task's, if anything: too many, a speaker's name that
/// is not one, or a text too long.
pub fn problem(overheard: &[OverheardText]) -> Option<String> {
    if overheard.len() > MAX_OVERHEARD_PER_TASK {
        return Some(format!(
            "overheard holds {} messages, more than {MAX_OVERHEARD_PER_TASK}",
            overheard.len()
        ));
    }
    overheard.iter().enumerate().find_map(|(i, heard)| {
        if let Some(why) = speaker_problem(&heard.from) {
            return Some(format!("overheard[{i}].from: {why}"));
        }
        (heard.text.len() > MAX_OVERHEARD_TEXT_BYTES).then(|| {
            format!(
                "overheard[{i}].text is {} bytes, more than {MAX_OVERHEARD_TEXT_BYTES}",
                heard.text.len()
            )
        })
    })
}

/// What is wrong with `from` as a speaker's name. The name is quoted in the one-line mark
/// before the message, so it may not hold what could end or fake that line.
pub fn speaker_problem(from: &str) -> Option<String> {
    if from.is_empty() || from.len() > MAX_OVERHEARD_FROM_BYTES {
        return Some(format!(
            "a speaker's name is 1 to {MAX_OVERHEARD_FROM_BYTES} bytes, not {}",
            from.len()
        ));
    }
    from.bytes()
        .find(|b| !b.is_ascii_graphic() || matches!(b, b'[' | b']'))
        .map(|b| {
            format!(
                "a speaker's name is visible ASCII without spaces or square brackets; it holds byte 0x{b:02x}"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn heard(from: &str, text: &str) -> OverheardText {
        OverheardText {
            from: from.into(),
            text: text.into(),
        }
    }

    #[test]
    fn a_matrix_id_and_a_short_text_pass() {
        assert_eq!(problem(&[heard("@bob:example.org", "hello")]), None);
    }

    #[test]
    fn a_name_that_could_end_or_fake_the_mark_is_refused() {
        for from in ["", "a b", "x]\n[owner", "@bob:[::1]", "é"] {
            let why = problem(&[heard(from, "hi")]);
            assert!(
                why.is_some_and(|w| w.starts_with("overheard[0].from")),
                "{from:?}"
            );
        }
    }

    #[test]
    fn too_many_or_too_long_is_refused_with_the_numbers() {
        let many = vec![heard("@a:b", "x"); MAX_OVERHEARD_PER_TASK + 1];
        assert!(problem(&many).is_some_and(|w| w.contains("21 messages")));
        let long = "x".repeat(MAX_OVERHEARD_TEXT_BYTES + 1);
        assert!(problem(&[heard("@a:b", &long)]).is_some_and(|w| w.contains("2001 bytes")));
    }
}
