//! The leak guard: one multi-pattern automaton (`aho-corasick`) over every form of every
//! secret ([`super::encodings`]), to find a secret in outgoing text and to redact it from
//! incoming text.

use super::encodings::{caseless_forms, exact_forms};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use std::borrow::Cow;

/// How many times outgoing text is percent-decoded while looking for a secret, so that
/// `%2541`-style double encoding is seen through too.
pub const MAX_DECODE_ROUNDS: usize = 3;

/// Why the automaton could not be built (only with absurdly many or long secrets).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot build the leak guard's matcher: {0}")]
pub struct GuardError(String);

/// One automaton, and which secret each of its patterns belongs to.
#[derive(Debug, Clone)]
struct Matcher {
    automaton: AhoCorasick,
    /// `owner[pattern]` is the index of its secret in [`Guard::names`].
    owner: Vec<usize>,
}

impl Matcher {
    fn build(
        patterns: Vec<(usize, Vec<u8>)>,
        caseless: bool,
    ) -> Result<Option<Matcher>, GuardError> {
        if patterns.is_empty() {
            return Ok(None);
        }
        let (owner, bytes): (Vec<usize>, Vec<Vec<u8>>) = patterns.into_iter().unzip();
        let automaton = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .ascii_case_insensitive(caseless)
            .build(bytes)
            .map_err(|e| GuardError(e.to_string()))?;
        Ok(Some(Matcher { automaton, owner }))
    }

    fn first(&self, haystack: &[u8]) -> Option<usize> {
        self.automaton
            .find(haystack)
            .map(|m| self.owner[m.pattern().as_usize()])
    }
}

/// Finds secrets in text: [`Guard::find`] for what goes out, [`Guard::redact`] for what
/// comes in.
#[derive(Debug, Clone, Default)]
pub struct Guard {
    names: Vec<String>,
    exact: Option<Matcher>,
    caseless: Option<Matcher>,
}

/// Text with every secret found in it replaced by `{secret:NAME}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Redacted<'a> {
    /// The text, borrowed when nothing was replaced.
    pub text: Cow<'a, str>,
    /// The names of the secrets replaced, sorted, without repeats.
    pub names: Vec<String>,
}

impl Guard {
    /// A guard for `secrets`, as `(name, value)`.
    pub fn new<'a>(
        secrets: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Guard, GuardError> {
        let mut names = Vec::new();
        let mut exact = Vec::new();
        let mut caseless = Vec::new();
        for (i, (name, value)) in secrets.into_iter().enumerate() {
            names.push(name.to_string());
            exact.extend(exact_forms(value).into_iter().map(|form| (i, form)));
            caseless.extend(caseless_forms(value).into_iter().map(|form| (i, form)));
        }
        Ok(Guard {
            names,
            exact: Matcher::build(exact, false)?,
            caseless: Matcher::build(caseless, true)?,
        })
    }

    /// The name of a secret `text` carries in any listed form, also once percent-decoded (up
    /// to [`MAX_DECODE_ROUNDS`] times): what an outgoing request must not hold.
    pub fn find(&self, text: &[u8]) -> Option<&str> {
        if self.names.is_empty() {
            return None;
        }
        let mut current: Cow<[u8]> = Cow::Borrowed(text);
        for _ in 0..=MAX_DECODE_ROUNDS {
            if let Some(i) = self.first(&current) {
                return Some(&self.names[i]);
            }
            let decoded: Vec<u8> = percent_encoding::percent_decode(&current).collect();
            if decoded == *current {
                break;
            }
            current = Cow::Owned(decoded);
        }
        None
    }

    /// The name of the first secret in any string of `value` (keys included), a JSON value
    /// such as a tool's arguments: strings are scanned as decoded, so JSON escapes hide
    /// nothing.
    pub fn find_in_json(&self, value: &serde_json::Value) -> Option<&str> {
        use serde_json::Value;
        match value {
            Value::String(s) => self.find(s.as_bytes()),
            Value::Array(items) => items.iter().find_map(|item| self.find_in_json(item)),
            Value::Object(map) => map.iter().find_map(|(key, item)| {
                self.find(key.as_bytes())
                    .or_else(|| self.find_in_json(item))
            }),
            Value::Null | Value::Bool(_) | Value::Number(_) => None,
        }
    }

    /// `text` with every listed form of every secret replaced by `{secret:NAME}`.
    pub fn redact<'a>(&self, text: &'a str) -> Redacted<'a> {
        let mut found = Vec::new();
        let mut out = Cow::Borrowed(text);
        for matcher in [&self.exact, &self.caseless].into_iter().flatten() {
            if let Some(replaced) = self.replace(matcher, &out, &mut found) {
                out = Cow::Owned(replaced);
            }
        }
        found.sort();
        found.dedup();
        Redacted {
            text: out,
            names: found.into_iter().map(|i| self.names[i].clone()).collect(),
        }
    }

    /// `text` with `matcher`'s matches replaced, or None when it has none.
    fn replace(&self, matcher: &Matcher, text: &str, found: &mut Vec<usize>) -> Option<String> {
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for m in matcher.automaton.find_iter(text) {
            let owner = matcher.owner[m.pattern().as_usize()];
            // A form always starts and ends on a character boundary of a valid UTF-8 text
            // except in the middle of a multi-byte character, which a form of a whole value
            // cannot start in; keep whole characters regardless.
            let (Some(before), Some(_)) = (text.get(last..m.start()), text.get(m.start()..m.end()))
            else {
                continue;
            };
            out.push_str(before);
            out.push_str(&format!("{}{}}}", super::template::OPEN, self.names[owner]));
            last = m.end();
            found.push(owner);
        }
        if last == 0 {
            return None;
        }
        out.push_str(&text[last..]);
        Some(out)
    }

    fn first(&self, haystack: &[u8]) -> Option<usize> {
        [&self.exact, &self.caseless]
            .into_iter()
            .flatten()
            .find_map(|matcher| matcher.first(haystack))
    }
}
