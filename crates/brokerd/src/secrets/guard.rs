//! The leak guard: one multi-pattern automaton (`aho-corasick`) over every form of every
//! secret ([`super::encodings`]), to find a secret in outgoing text and to redact it from
//! incoming text.
//!
//! A text that was cut (at a cap, before brokerd saw the rest) may end in the start of a
//! value, which no whole form matches. [`Guard::redact_cut`] also takes such a start at the
//! very end of the text ([`CUT_PREFIX_MIN_BYTES`] or more of it): whoever chooses where the
//! cut falls (a model that pads a page) would otherwise read the value's first bytes. Only the
//! tools know where they cut, so they ask for it there: the broker for a result a tool marked
//! truncated (`http_fetch` and `read_file` cut at the end), `exec` for each capped stream; an
//! MCP tool redacts before it caps. Anywhere else the rule would eat the ends of ordinary
//! lines (`size: 16768` ends like the hex of `ghp_`).

use super::encodings::{caseless_forms, exact_forms};
use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};
use std::borrow::Cow;

/// The fewest bytes of a form's start that [`Guard::redact_cut`] takes for a value cut short
/// at the end of a text. Fewer stay (a cut can leave up to 3 bytes of a value's start, or of
/// its end reversed): matching shorter starts would redact ordinary words at line ends.
pub const CUT_PREFIX_MIN_BYTES: usize = super::load::MIN_SECRET_BYTES / 2;

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

/// One form of one secret, kept whole to tell how much of it a cut text still holds.
#[derive(Debug, Clone)]
struct Form {
    /// The index of its secret in [`Guard::names`].
    owner: usize,
    bytes: Vec<u8>,
    /// Matched ignoring ASCII case (hex).
    caseless: bool,
}

/// The first [`CUT_PREFIX_MIN_BYTES`] of every form longer than that, ignoring case (a match
/// is then compared with its form as the form is matched).
#[derive(Debug, Clone)]
struct Starts {
    automaton: AhoCorasick,
    /// `form[pattern]` is the index of its form in [`Guard::forms`].
    form: Vec<usize>,
}

impl Starts {
    fn build(forms: &[Form]) -> Result<Option<Starts>, GuardError> {
        let (form, patterns): (Vec<usize>, Vec<&[u8]>) = forms
            .iter()
            .enumerate()
            .filter(|(_, form)| form.bytes.len() > CUT_PREFIX_MIN_BYTES)
            .map(|(i, form)| (i, &form.bytes[..CUT_PREFIX_MIN_BYTES]))
            .unzip();
        if patterns.is_empty() {
            return Ok(None);
        }
        // Standard matching: overlapping matches are all wanted, a start in one form's text
        // may begin another's too.
        let automaton = AhoCorasickBuilder::new()
            .match_kind(MatchKind::Standard)
            .ascii_case_insensitive(true)
            .build(patterns)
            .map_err(|e| GuardError(e.to_string()))?;
        Ok(Some(Starts { automaton, form }))
    }
}

/// Finds secrets in text: [`Guard::find`] for what goes out, [`Guard::redact`] for what
/// comes in.
#[derive(Clone, Default)]
pub struct Guard {
    names: Vec<String>,
    exact: Option<Matcher>,
    caseless: Option<Matcher>,
    forms: Vec<Form>,
    starts: Option<Starts>,
}

/// Names only: the patterns are the values.
impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Guard").field("names", &self.names).finish()
    }
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
        let forms: Vec<Form> = exact
            .iter()
            .map(|(owner, bytes)| (owner, bytes, false))
            .chain(caseless.iter().map(|(owner, bytes)| (owner, bytes, true)))
            .map(|(owner, bytes, caseless)| Form {
                owner: *owner,
                bytes: bytes.clone(),
                caseless,
            })
            .collect();
        Ok(Guard {
            names,
            exact: Matcher::build(exact, false)?,
            caseless: Matcher::build(caseless, true)?,
            starts: Starts::build(&forms)?,
            forms,
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
            // Most text has no '%': skip the copy a decode would make.
            if !current.contains(&b'%') {
                break;
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
        self.redact_with(text, false)
    }

    /// [`Guard::redact`] of a text that was cut at its end: the start of a form that ends
    /// the text ([`CUT_PREFIX_MIN_BYTES`] or more of it) is replaced too (see the module's
    /// comment).
    pub fn redact_cut<'a>(&self, text: &'a str) -> Redacted<'a> {
        self.redact_with(text, true)
    }

    fn redact_with<'a>(&self, text: &'a str, cut: bool) -> Redacted<'a> {
        let mut found = Vec::new();
        let mut out = Cow::Borrowed(text);
        for matcher in [&self.exact, &self.caseless].into_iter().flatten() {
            if let Some(replaced) = self.replace(matcher, &out, &mut found) {
                out = Cow::Owned(replaced);
            }
        }
        if cut && let Some(replaced) = self.replace_cut(&out, &mut found) {
            out = Cow::Owned(replaced);
        }
        // Names, not indices: a retired value shares its secret's name.
        let mut names: Vec<String> = found.into_iter().map(|i| self.names[i].clone()).collect();
        names.sort();
        names.dedup();
        Redacted { text: out, names }
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

    /// `text` with the start of a form that ends it (see [`Guard::redact_cut`]) replaced, or
    /// None when it has none.
    fn replace_cut(&self, text: &str, found: &mut Vec<usize>) -> Option<String> {
        let starts = self.starts.as_ref()?;
        let bytes = text.as_bytes();
        // (start, end, owner) of each cut form, by start.
        let mut cuts: Vec<(usize, usize, usize)> = Vec::new();
        // A cut form ends at the end of the text and is shorter than its form: only the last
        // (longest form) bytes can hold one, so only they are scanned.
        let longest = self.forms.iter().map(|f| f.bytes.len()).max().unwrap_or(0);
        let tail_from = bytes.len().saturating_sub(longest);
        for m in starts.automaton.find_overlapping_iter(&bytes[tail_from..]) {
            let form = &self.forms[starts.form[m.pattern().as_usize()]];
            let start = tail_from + m.start();
            let held = bytes[start..]
                .iter()
                .zip(&form.bytes)
                .take_while(|(a, b)| a == b || (form.caseless && a.eq_ignore_ascii_case(b)))
                .count();
            let end = start + held;
            // A whole form is the exact matchers' (a repeat of one that they replaced).
            let at_cut = end == bytes.len();
            if held < form.bytes.len() && at_cut {
                cuts.push((start, end, form.owner));
            }
        }
        cuts.sort_by_key(|&(start, end, _)| (start, std::cmp::Reverse(end)));
        let mut out = String::with_capacity(text.len());
        let mut last = 0;
        for (start, end, owner) in cuts {
            // Overlapping starts: the first (and longest) wins; whole characters only.
            let (Some(before), Some(_)) = (text.get(last..start), text.get(start..end)) else {
                continue;
            };
            out.push_str(before);
            out.push_str(&format!("{}{}}}", super::template::OPEN, self.names[owner]));
            last = end;
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
