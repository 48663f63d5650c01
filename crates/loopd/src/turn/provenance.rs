//! Where an acting call's paths came from (issue 34, tasks under attack): an injection in the
//! owner's own trusted data (a local file `read_file` read, `exec` output) can tell the model
//! to write or run, and labels cannot stop it, since that data is trusted. So a call of a tool
//! in `[loop] owner_paths_tools` (default `write_file` and `exec`) runs only when every path its
//! arguments name ([`paths::named`]) is one the owner gave: written in the owner's own words in
//! this conversation, or beneath a folder written there ([`paths::OwnerPaths`]). Any other
//! call is not run: loopd answers it ([`NOT_OWNER_GIVEN`]) before it reaches brokerd, so no
//! approval is asked and nothing runs.
//!
//! The owner's words ([`owner_texts`]) are the text of the session's `user` records, every
//! epoch the log holds, and the section of the owner's words in the current epoch's carry
//! (`compact::owner_words`), never the model's words, a summary or a tool's result. A
//! subagent's session (an `inherited` record names its root session) is judged by its root
//! session's owner: that session's log is read through the store at the call (its own `user`
//! record is its parent model's words); a root that cannot be read refuses every such call
//! ([`OWNER_WORDS_UNREADABLE`]).
//!
//! A folder the owner gave covers new names in it, so a name beneath it that the owner never
//! wrote and that a tool's result holds (a file's name in a listing, a line of a file) is
//! refused too ([`suggested`], [`NAME_SUGGESTED`]): the model may use a name of its own, the
//! owner's, or an entry `list_dir` showed.
//!
//! It checks paths, not content: what `write_file` writes, what a program does with a file
//! name without a `/` in its working directory, and what a shell does with a line are not
//! judged here (`docs/config.md`, `[loop] owner_paths_tools`).

mod paths;
mod suggested;

use crate::compact::owner_words;
use crate::outcome::CallOutcome;
use crate::session::Session;
use bxcore::LogRecord;
use bxcore::sanitize::neutralise;
use paths::{Named, OwnerPaths};
use serde_json::Value;
use std::borrow::Cow;
use suggested::{NAME_SUGGESTED, Suggestions};

/// What a call naming a path the owner did not give gets, `{path}` the path as the model wrote
/// it (neutralised, at most [`QUOTED_PATH_MAX_CHARS`]) and `{tools}` the checked tools.
pub const NOT_OWNER_GIVEN: &str = "Not run: the path \"{path}\" is not one the owner gave in \
     this conversation. Paths for {tools} must come from the owner's own words; tell the owner \
     what you would do and let them ask for it.";
/// What such a call gets in a subagent's session whose root session's log cannot be read,
/// `{why}` the store's error: nothing can say what the owner gave, so nothing is run.
pub const OWNER_WORDS_UNREADABLE: &str = "Not run: the owner's words of this conversation \
     could not be read ({why}), so no path for {tools} can be checked. Tell the owner what you \
     would do and let them ask for it.";
/// What such a call gets when its arguments are not a JSON value (never sent on).
pub const ARGUMENTS_NOT_JSON: &str = "Not run: the arguments are not JSON, so their paths \
     cannot be checked. Paths for {tools} must come from the owner's own words.";
/// The most characters of a path a refusal quotes; a longer one is cut.
pub const QUOTED_PATH_MAX_CHARS: usize = 200;

/// The refusal of a call of `tool` with `arguments` (the JSON text sent to the port) in
/// `session`, when `tool` is one of `checked` (`[loop] owner_paths_tools`) and a path its
/// arguments name is not one the owner gave; `None` when it may go on.
pub fn check(
    checked: &[String],
    session: &Session,
    tool: &str,
    arguments: &str,
) -> Option<CallOutcome> {
    if !checked.iter().any(|t| t == tool) {
        return None;
    }
    let tools = tool_list(checked);
    let Ok(arguments) = serde_json::from_str::<Value>(arguments) else {
        return Some(CallOutcome::not_run(
            &ARGUMENTS_NOT_JSON.replace("{tools}", &tools),
        ));
    };
    let named = paths::named(&arguments);
    if named.is_empty() {
        return None;
    }
    let root = match root_records(session) {
        Ok(root) => root,
        Err(why) => {
            tracing::warn!(session = %session.id(), %why, "loopd: the owner's words");
            return Some(CallOutcome::not_run(
                &OWNER_WORDS_UNREADABLE
                    .replace("{tools}", &tools)
                    .replace("{why}", &why),
            ));
        }
    };
    let texts = owner_texts(&root);
    let owner = OwnerPaths::from_words(texts.iter().map(String::as_str));
    if let Some(refused) = paths::refused(&named, &owner) {
        return Some(CallOutcome::not_run(
            &NOT_OWNER_GIVEN
                .replace("{tools}", &tools)
                .replace("{path}", &quote(&refused.written)),
        ));
    }
    let mut suggestions = Suggestions::default();
    suggestions.add(&root);
    if session.root_turn().is_some() {
        suggestions.add(session.records());
    }
    let (name, refused) = first_suggested(&named, &owner, &suggestions, &texts)?;
    Some(CallOutcome::not_run(
        &NAME_SUGGESTED
            .replace("{tools}", &tools)
            .replace("{name}", &quote(name))
            .replace("{path}", &quote(&refused.written)),
    ))
}

/// The first name of `named` beneath a folder `owner` covers that `suggestions` hold and the
/// owner's `texts` do not, with its path.
fn first_suggested<'a>(
    named: &'a [Named],
    owner: &OwnerPaths,
    suggestions: &Suggestions,
    texts: &[String],
) -> Option<(&'a str, &'a Named)> {
    named.iter().find_map(|n| {
        // The path as resolved, or else as written (a relative one beside a `cwd`): the one
        // the owner's words cover.
        let names = [n.path.as_ref(), n.relative.as_ref()]
            .into_iter()
            .flatten()
            .find_map(|path| owner.names_beneath(path))?;
        Some((suggestions.first_suggested(names, texts)?, n))
    })
}

/// `text` as a refusal quotes it: neutralised, at most [`QUOTED_PATH_MAX_CHARS`].
fn quote(text: &str) -> String {
    crate::text::cap_chars(&neutralise(text), QUOTED_PATH_MAX_CHARS)
}

/// The log of the session whose owner judges `session`'s calls: its own, or for a session
/// another session started, the root session's (read from the store); why it cannot be read.
fn root_records(session: &Session) -> Result<Cow<'_, [LogRecord]>, String> {
    match session.root_turn() {
        None => Ok(Cow::Borrowed(session.records())),
        Some((root, _)) => session
            .store()
            .read(root)
            .map(Cow::Owned)
            .map_err(|e| e.to_string()),
    }
}

/// The owner's words of a session whose records are `records`: every `user` record's text,
/// then the owner's words the current epoch's carry holds (the section loopd writes at its
/// end: the earlier epochs' words, kept word for word).
pub fn owner_texts(records: &[LogRecord]) -> Vec<String> {
    let mut texts: Vec<String> = records
        .iter()
        .filter_map(|r| match r {
            LogRecord::User { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    let carry = records.iter().rev().find_map(|r| match r {
        LogRecord::EpochStart { carry, .. } => Some(carry.as_str()),
        _ => None,
    });
    if let Some(carry) = carry {
        texts.extend(owner_words::split(carry).1);
    }
    texts
}

/// `checked` in words: `a`, `a and b`, `a, b and c`.
fn tool_list(checked: &[String]) -> String {
    match checked.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use bxcore::{DataClass, Timestamp};

    fn user(text: &str) -> LogRecord {
        LogRecord::User {
            time: Timestamp::now(),
            turn: 1,
            content: text.into(),
            task_id: None,
        }
    }

    fn epoch(carry: &str) -> LogRecord {
        LogRecord::EpochStart {
            time: Timestamp::now(),
            epoch: 1,
            carry: carry.into(),
            class: DataClass::Public,
            untrusted: false,
        }
    }

    #[test]
    fn the_owners_words_are_user_records_and_the_current_carrys_section_only() {
        let old = owner_words::attach(
            "summary naming /model/path",
            &owner_words::section(&[], &["old /a".into()], 2000),
        );
        let new = owner_words::attach(
            "summary naming /model/other",
            &owner_words::section(&[], &["kept /b".into()], 2000),
        );
        let records = [
            user("first /c"),
            epoch(&old),
            user("second /d"),
            epoch(&new),
        ];
        assert_eq!(owner_texts(&records), ["first /c", "second /d", "kept /b"]);
    }

    #[test]
    fn tools_in_words() {
        let list = |t: &[&str]| tool_list(&t.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        assert_eq!(list(&["write_file"]), "write_file");
        assert_eq!(list(&["write_file", "exec"]), "write_file and exec");
        assert_eq!(list(&["a", "b", "c"]), "a, b and c");
    }
}
