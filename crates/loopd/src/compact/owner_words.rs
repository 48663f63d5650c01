//! The owner's own words, kept word for word through compactions (issue 34: asked for a locker
//! code given in turn 1, after two compactions, neither real model still had it; a summary is
//! the model's paraphrase, and a small model drops facts from it).
//!
//! At each compaction loopd (not the model) writes a section at the end of the new carry: a
//! fixed heading ([`OWNER_WORDS_HEADING`]) and one quoted line per message the owner wrote
//! ([`QUOTE_PREFIX`]), oldest first. The messages are the `user` records of the epoch being
//! compacted (the owner's tasks; never tool results or the model's words) and the section of
//! the carry before ([`split`]), so words given in epoch 0 are still there after any number of
//! compactions. A session started by another session (a subagent: its request is its parent
//! model's words) has no section.
//!
//! What does not fit `[compact] owner_words_chars` is chosen by a small extractive rule, never
//! a paraphrase ([`section`]): first the sentences that state something plainly for later (a
//! "my ... is", "remember", "always", "don't": [`Kind::Stated`]), then other sentences that
//! hold a fact (a digit, a name: [`Kind::Fact`]), each newest first, then whole messages,
//! newest first; left-out sentences are marked [`OMISSION_MARK`]. A heading the model writes
//! itself (an echo, or one an injected page asked for) is taken out of its summary
//! ([`strip`]), so the last heading of a carry is always loopd's.

use crate::session::Session;
use bxcore::LogRecord;
use bxcore::sanitize::neutralise;
use std::borrow::Cow;

/// The first line of the section.
pub const OWNER_WORDS_HEADING: &str =
    "The owner's own words earlier in this conversation (word for word):";
/// What each of the section's lines starts with.
pub const QUOTE_PREFIX: &str = "> ";
/// What stands for the sentences of a message left out.
pub const OMISSION_MARK: &str = "[...]";
/// The share of a carry's room (1/N) the section may take at most, so that the summary keeps
/// room too.
pub const OWNER_WORDS_ROOM_DIVISOR: usize = 2;
/// How a message the owner asks to be remembered starts (lowercase): it also becomes a memory
/// note.
pub const REMEMBER_OPENERS: [&str; 2] = ["remember", "note that"];
/// Phrases (lowercase words, one space apart) that make a sentence [`Kind::Stated`].
const STATED_PHRASES: [&str; 14] = [
    "remember",
    "keep in mind",
    "keep it in mind",
    "note that",
    "always",
    "never",
    "don't",
    "do not",
    "must not",
    "from now on",
    "call me",
    "decided",
    "prefer",
    "instead of",
];
/// Owners and verbs of the "my ... is" statements, which are [`Kind::Stated`].
const OWNERS: [&str; 2] = ["my", "our"];
/// See [`OWNERS`].
const STATEMENT_VERBS: [&str; 4] = ["is", "are", "was", "were"];
/// Words (lowercase) that make a sentence a [`Kind::Fact`].
const FACT_WORDS: [&str; 7] = ["my", "mine", "our", "must", "should", "named", "called"];
/// Words starting with a capital that are no name.
const NOT_NAMES: [&str; 5] = ["I", "I'm", "I've", "I'll", "I'd"];

/// The carry's body and the owner's words of its section (oldest first); a carry without a
/// section is all body.
pub fn split(carry: &str) -> (&str, Vec<String>) {
    let mut at = None;
    let mut offset = 0;
    for line in carry.split_inclusive('\n') {
        if line.trim_end_matches(['\n', '\r']) == OWNER_WORDS_HEADING {
            at = Some(offset);
        }
        offset += line.len();
    }
    let Some(at) = at else {
        return (carry, Vec::new());
    };
    let words = carry[at..]
        .lines()
        .skip(1)
        .filter_map(|line| line.strip_prefix(QUOTE_PREFIX))
        .map(str::to_string)
        .collect();
    (carry[..at].trim_end(), words)
}

/// `body` without any line holding the heading and the quoted lines after it: a section the
/// model wrote is not loopd's.
pub fn strip(body: &str) -> Cow<'_, str> {
    if !body.contains(OWNER_WORDS_HEADING) {
        return Cow::Borrowed(body);
    }
    let mut kept = Vec::new();
    let mut in_section = false;
    for line in body.lines() {
        if line.contains(OWNER_WORDS_HEADING) {
            in_section = true;
            continue;
        }
        if in_section && line.trim_start().starts_with('>') {
            continue;
        }
        in_section = false;
        kept.push(line);
    }
    Cow::Owned(kept.join("\n").trim().to_string())
}

/// The carry of the new epoch: `body`, a blank line, `section`.
pub fn attach(body: &str, section: &str) -> String {
    let body = strip(body);
    match (body.trim().is_empty(), section.is_empty()) {
        (_, true) => body.into_owned(),
        (true, false) => section.to_string(),
        (false, false) => format!("{}\n\n{section}", body.trim_end()),
    }
}

/// The section of `previous` (the words of the carry before, oldest first) and `new` (the
/// epoch's), in at most `budget_chars` characters; empty when nothing fits or there are no
/// words. Each message is neutralised and put on one line; a message given twice is kept once,
/// where it came last. All fit: all are kept whole. Otherwise sentence by sentence, each kind
/// in turn ([`Kind::Stated`], then [`Kind::Fact`]), newest message first, each sentence that
/// fits; then whole messages, newest first, that fit; what does not fit leaves room for the
/// rest. Nothing fits that way: the newest message's first sentences (the first cut inside,
/// marked, when even that is too long).
pub fn section(previous: &[String], new: &[String], budget_chars: usize) -> String {
    let messages = distinct(previous.iter().chain(new));
    let fixed = OWNER_WORDS_HEADING.chars().count();
    if messages.is_empty() || budget_chars <= fixed {
        return String::new();
    }
    let mut chosen = Chosen {
        room: budget_chars - fixed,
        used: 0,
        keep: messages.iter().map(|m| vec![false; m.len()]).collect(),
        messages: &messages,
    };
    let all: Vec<Vec<bool>> = messages.iter().map(|m| vec![true; m.len()]).collect();
    let whole_chars: usize = messages.iter().map(|m| line_chars(&m.join(" "))).sum();
    let mut lines: Vec<Option<String>> = if whole_chars <= chosen.room {
        messages.iter().map(|m| Some(m.join(" "))).collect()
    } else {
        for wanted in [Kind::Stated, Kind::Fact] {
            for (i, sentences) in messages.iter().enumerate().rev() {
                for (at, sentence) in sentences.iter().enumerate() {
                    if kind(sentence) == wanted {
                        let mut keep = chosen.keep[i].clone();
                        keep[at] = true;
                        chosen.try_keep(i, keep);
                    }
                }
            }
        }
        for (i, keep) in all.into_iter().enumerate().rev() {
            chosen.try_keep(i, keep);
        }
        chosen.lines()
    };
    if lines.iter().all(Option::is_none)
        && let Some(newest) = messages.last()
    {
        let line = first_sentences(newest, chosen.room);
        if line_chars(&line) <= chosen.room {
            lines = vec![Some(line)];
        }
    }
    if lines.iter().all(Option::is_none) {
        return String::new();
    }
    let mut out = OWNER_WORDS_HEADING.to_string();
    for line in lines.into_iter().flatten() {
        out.push('\n');
        out.push_str(QUOTE_PREFIX);
        out.push_str(&line);
    }
    out
}

/// The sentences chosen so far for a section that does not hold every message whole.
struct Chosen<'a> {
    /// Characters the lines may take.
    room: usize,
    /// Characters they take.
    used: usize,
    /// Per message, per sentence: kept.
    keep: Vec<Vec<bool>>,
    /// The messages, as sentences.
    messages: &'a [Vec<String>],
}

impl Chosen<'_> {
    /// Message `i` with the sentences `keep` marks, when its line still fits.
    fn try_keep(&mut self, i: usize, keep: Vec<bool>) {
        let before = self.cost(i, &self.keep[i]);
        let after = self.cost(i, &keep);
        if self.used - before + after <= self.room {
            self.used = self.used - before + after;
            self.keep[i] = keep;
        }
    }

    /// The characters of message `i`'s line with the sentences `keep` marks; 0 for none.
    fn cost(&self, i: usize, keep: &[bool]) -> usize {
        if keep.contains(&true) {
            line_chars(&render(&self.messages[i], keep))
        } else {
            0
        }
    }

    /// Each message's line, `None` for one left out.
    fn lines(&self) -> Vec<Option<String>> {
        self.messages
            .iter()
            .zip(&self.keep)
            .map(|(sentences, keep)| keep.contains(&true).then(|| render(sentences, keep)))
            .collect()
    }
}

/// The owner's words of the current epoch, oldest first: the request re-stated after its
/// carry (its turn is over now) and the epoch's `user` records, but the open turn's request
/// (the new epoch re-states it after the carry: it joins the section once its turn is over).
/// None in a session another session started: its request is that session's model's words.
pub fn of_epoch(session: &Session) -> Vec<String> {
    if session.root_turn().is_some() {
        return Vec::new();
    }
    let open = session.open_turn();
    let carried = super::carried_user(session).filter(|(turn, _)| Some(*turn) != open);
    let epoch = session.epoch_records().iter().filter_map(|r| match r {
        LogRecord::User { turn, content, .. } if Some(*turn) != open => {
            Some((*turn, content.as_str()))
        }
        _ => None,
    });
    carried
        .into_iter()
        .chain(epoch)
        .map(|(_, content)| content.to_string())
        .collect()
}

/// The messages among `words` that ask for something to be remembered (they start with one of
/// [`REMEMBER_OPENERS`]), each on one line, neutralised, at most `max_chars`, each once.
pub fn remembered(words: &[String], max_chars: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for text in words {
        let line = one_line(&neutralise(text));
        let lower = line.to_lowercase();
        let asks = REMEMBER_OPENERS.iter().any(|opener| {
            lower
                .strip_prefix(opener)
                .is_some_and(|rest| !rest.starts_with(char::is_alphanumeric))
        });
        let note = crate::text::cap_chars(&line, max_chars);
        if asks && !out.contains(&note) {
            out.push(note);
        }
    }
    out
}

/// What a sentence of the owner's is, for choosing what to keep when not all fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Said plainly for later: an instruction, a decision or a statement about the owner
    /// ("remember", "keep in mind", "always", "never", "don't", "do not", "prefer", "decided",
    /// "my ... is").
    Stated,
    /// Holds a fact: a digit, a name (a capitalised word not at its start, "I" aside), or
    /// "my", "our", "must", "should", "named", "called".
    Fact,
    /// Anything else, and every question.
    Other,
}

/// The [`Kind`] of `sentence`.
pub fn kind(sentence: &str) -> Kind {
    let sentence = sentence.trim();
    if sentence.ends_with('?') {
        return Kind::Other;
    }
    let words: Vec<&str> = sentence
        .split(|c: char| !(c.is_alphanumeric() || c == '\''))
        .filter(|w| !w.is_empty())
        .collect();
    let lower: Vec<String> = words.iter().map(|w| w.to_lowercase()).collect();
    let joined = format!(" {} ", lower.join(" "));
    let owner = lower.iter().position(|w| OWNERS.contains(&w.as_str()));
    let statement = owner.is_some_and(|at| {
        lower[at..]
            .iter()
            .any(|w| STATEMENT_VERBS.contains(&w.as_str()))
    });
    if statement
        || STATED_PHRASES
            .iter()
            .any(|phrase| joined.contains(&format!(" {phrase} ")))
    {
        return Kind::Stated;
    }
    let name = words
        .iter()
        .skip(1)
        .any(|w| w.starts_with(char::is_uppercase) && !NOT_NAMES.contains(w));
    if name
        || sentence.chars().any(|c| c.is_ascii_digit())
        || lower.iter().any(|w| FACT_WORDS.contains(&w.as_str()))
    {
        return Kind::Fact;
    }
    Kind::Other
}

/// The messages of `texts`, each split into sentences, without empty ones and keeping only
/// the last of messages given more than once.
fn distinct<'a>(texts: impl DoubleEndedIterator<Item = &'a String>) -> Vec<Vec<String>> {
    let mut seen: Vec<String> = Vec::new();
    let mut out = Vec::new();
    for text in texts.rev() {
        let sentences = sentences(&neutralise(text));
        let whole = sentences.join(" ");
        if sentences.is_empty() || seen.contains(&whole) {
            continue;
        }
        seen.push(whole);
        out.push(sentences);
    }
    out.reverse();
    out
}

/// `text` split into sentences (at line breaks, and after `.`, `!` or `?` before a space),
/// each on one line.
fn sentences(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut start = 0;
        let mut chars = line.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            let ends = matches!(c, '.' | '!' | '?')
                && chars.peek().is_none_or(|(_, next)| next.is_whitespace());
            if ends {
                let end = at + c.len_utf8();
                out.push(one_line(&line[start..end]));
                start = end;
            }
        }
        out.push(one_line(&line[start..]));
    }
    out.retain(|s| !s.is_empty());
    out
}

/// The sentences `keep` marks, in order, each run of left-out ones as [`OMISSION_MARK`].
fn render(sentences: &[String], keep: &[bool]) -> String {
    let mut pieces: Vec<&str> = Vec::new();
    for (sentence, kept) in sentences.iter().zip(keep) {
        if *kept {
            pieces.push(sentence);
        } else if pieces.last() != Some(&OMISSION_MARK) {
            pieces.push(OMISSION_MARK);
        }
    }
    pieces.join(" ")
}

/// The first of `sentences` whose line fits `room`; when even the first does not, the first
/// cut to fit, marked.
fn first_sentences(sentences: &[String], room: usize) -> String {
    let mut keep = vec![false; sentences.len()];
    let mut best = None;
    for i in 0..sentences.len() {
        keep[i] = true;
        let line = render(sentences, &keep);
        if line_chars(&line) > room {
            break;
        }
        best = Some(line);
    }
    best.unwrap_or_else(|| {
        let fixed = QUOTE_PREFIX.chars().count() + 1 + OMISSION_MARK.chars().count() + 1;
        let first = sentences.first().map_or("", String::as_str);
        format!(
            "{} {OMISSION_MARK}",
            crate::text::cap_chars(first, room.saturating_sub(fixed))
        )
    })
}

/// What a kept message costs in the section: a line break, the quote prefix and its text.
fn line_chars(text: &str) -> usize {
    1 + QUOTE_PREFIX.chars().count() + text.chars().count()
}

/// `text` on one line, its runs of white space made one space.
fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests;
