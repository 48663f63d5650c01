//! The script: ordered rules that decide how fakellama answers a chat request.
//!
//! ```toml
//! default_reply = "ok"            # optional, replaces the fixed text
//! [[rule]]
//! name = "first step"              # optional, for error messages and logs
//! when_role = "user"               # optional: role of the last message
//! when_contains = "what time"      # optional: substring of the last message's content
//! times = 1                        # optional: how many times it may answer (default unlimited)
//! reply = "text"                   # optional content
//! reasoning = "thinking..."        # optional reasoning_content
//! tool_calls = [{ name = "clock", arguments = "{}" }]
//! error = { status = 503, type = "unavailable_error", message = "Loading model" }
//! error_mid_stream = { type = "server_error", message = "..." }
//! ping = true                      # optional: a ping (an empty ":" comment line) in the stream
//! delay_ms = 50                    # optional: extra delay before answering
//! ```
//!
//! The first rule that matches the request's last message and still has uses left answers.

use std::path::Path;

use serde::Deserialize;

use crate::error::ScriptError;

/// The reply of [`Script::fixed`] when nothing else is given.
pub const FIXED_REPLY: &str = "Hello from fakellama.";

/// A parsed, checked script.
#[derive(Debug, Clone, PartialEq)]
pub struct Script {
    default_reply: String,
    rules: Vec<Rule>,
}

impl Default for Script {
    /// The script without rules that answers [`FIXED_REPLY`].
    fn default() -> Self {
        Self::fixed(FIXED_REPLY)
    }
}

/// One scripted answer and the condition under which it is given.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// A name for logs, error messages and [`crate::RecordedRequest::rule`].
    pub name: Option<String>,
    /// Matches only when the last message has this role.
    pub when_role: Option<String>,
    /// Matches only when the last message's content contains this text.
    pub when_contains: Option<String>,
    /// How many times the rule may answer; unlimited when absent.
    pub times: Option<u32>,
    /// The reply content.
    pub reply: Option<String>,
    /// The reasoning (`reasoning_content`), dropped when thinking is disabled.
    pub reasoning: Option<String>,
    /// Tool calls to make.
    #[serde(default)]
    pub tool_calls: Vec<ScriptToolCall>,
    /// Answer with this HTTP error instead of a completion.
    pub error: Option<ScriptHttpError>,
    /// When streaming: send the content, then this error event, and close without `[DONE]`.
    /// Not streaming: answer HTTP 500 with this error.
    pub error_mid_stream: Option<ScriptStreamError>,
    /// Send a ping (an empty `:` comment line, as llama-server's keep-alive) in the middle
    /// of the stream.
    #[serde(default)]
    pub ping: bool,
    /// Extra delay before answering, in milliseconds.
    pub delay_ms: Option<u64>,
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptToolCall {
    /// The function name.
    pub name: String,
    /// The raw arguments text, sent as is (may be invalid JSON on purpose).
    #[serde(default = "empty_object")]
    pub arguments: String,
}

fn empty_object() -> String {
    "{}".to_owned()
}

/// A scripted HTTP error answer.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptHttpError {
    /// The HTTP status, 400 to 599.
    pub status: u16,
    /// The error `type`, e.g. `unavailable_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The error `message`.
    pub message: String,
}

/// A scripted error event in the middle of a stream.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptStreamError {
    /// The error `type`, e.g. `server_error`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The error `message`.
    pub message: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScript {
    default_reply: Option<String>,
    #[serde(default)]
    rule: Vec<toml::Value>,
}

impl Rule {
    /// Whether the rule applies to a last message with this role and content.
    pub fn matches(&self, role: &str, content: &str) -> bool {
        self.when_role.as_deref().is_none_or(|r| r == role)
            && self
                .when_contains
                .as_deref()
                .is_none_or(|s| content.contains(s))
    }

    /// Why the rule contradicts itself, if it does.
    fn contradiction(&self) -> Option<String> {
        if self.times == Some(0) {
            return Some("`times = 0` means the rule can never answer".into());
        }
        if let Some(error) = &self.error {
            if !(400..=599).contains(&error.status) {
                return Some(format!(
                    "`error.status` must be 400 to 599, not {}",
                    error.status
                ));
            }
            let other = [
                ("reply", self.reply.is_some()),
                ("reasoning", self.reasoning.is_some()),
                ("tool_calls", !self.tool_calls.is_empty()),
                ("error_mid_stream", self.error_mid_stream.is_some()),
                ("ping", self.ping),
            ];
            if let Some((key, _)) = other.iter().find(|(_, set)| *set) {
                return Some(format!(
                    "`error` answers with an HTTP error, so `{key}` can never be sent"
                ));
            }
        }
        if self.error_mid_stream.is_some() && !self.tool_calls.is_empty() {
            return Some(
                "`error_mid_stream` ends the stream after the content, so `tool_calls` \
                 can never be sent"
                    .into(),
            );
        }
        if let Some(call) = self.tool_calls.iter().find(|c| c.name.is_empty()) {
            return Some(format!(
                "a tool call has an empty `name` (arguments {:?})",
                call.arguments
            ));
        }
        if self.when_role.as_deref() == Some("") {
            return Some("`when_role` is empty".into());
        }
        None
    }
}

/// The first key of a rule table that does not deserialize on its own (to name it in errors).
fn failing_key(rule: &toml::Value) -> Option<String> {
    rule.as_table()?.iter().find_map(|(key, value)| {
        let mut single = toml::Table::new();
        single.insert(key.clone(), value.clone());
        toml::Value::Table(single)
            .try_into::<Rule>()
            .is_err()
            .then(|| key.clone())
    })
}

/// How a rule is named in errors and logs: `rule 2 ("first step")`.
fn describe(index: usize, name: Option<&str>) -> String {
    match name {
        Some(name) => format!("rule {} ({name:?})", index + 1),
        None => format!("rule {}", index + 1),
    }
}

impl Script {
    /// A script without rules that answers every chat request with `text`.
    pub fn fixed(text: impl Into<String>) -> Self {
        Self {
            default_reply: text.into(),
            rules: Vec::new(),
        }
    }

    /// A script from a default reply and rules, checking each rule.
    pub fn new(default_reply: impl Into<String>, rules: Vec<Rule>) -> Result<Self, ScriptError> {
        for (i, rule) in rules.iter().enumerate() {
            if let Some(reason) = rule.contradiction() {
                return Err(ScriptError::Rule {
                    rule: describe(i, rule.name.as_deref()),
                    reason,
                });
            }
        }
        Ok(Self {
            default_reply: default_reply.into(),
            rules,
        })
    }

    /// Parses a script from TOML text; errors name the rule and what is wrong with it.
    pub fn parse(toml_text: &str) -> Result<Self, ScriptError> {
        let raw: RawScript =
            toml::from_str(toml_text).map_err(|e| ScriptError::Toml(e.message().to_owned()))?;
        let mut rules = Vec::with_capacity(raw.rule.len());
        for (i, value) in raw.rule.into_iter().enumerate() {
            let name = value.get("name").and_then(toml::Value::as_str);
            let rule_desc = describe(i, name);
            let rule = toml::Value::try_into::<Rule>(value.clone()).map_err(|e| {
                let reason = match failing_key(&value) {
                    Some(key) => format!("`{key}`: {}", e.message()),
                    None => e.message().to_owned(),
                };
                ScriptError::Rule {
                    rule: rule_desc,
                    reason,
                }
            })?;
            rules.push(rule);
        }
        Self::new(
            raw.default_reply.unwrap_or_else(|| FIXED_REPLY.to_owned()),
            rules,
        )
    }

    /// Reads and parses a script file.
    pub fn load(path: impl AsRef<Path>) -> Result<Self, ScriptError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|source| ScriptError::Read {
            path: path.to_owned(),
            source,
        })?;
        Self::parse(&text)
    }

    /// The reply when no rule matches.
    pub fn default_reply(&self) -> &str {
        &self.default_reply
    }

    /// The rules, in matching order.
    pub fn rules(&self) -> &[Rule] {
        &self.rules
    }

    /// The label of rule `index` as recorded: its name, or `rule N` (1-based).
    pub fn rule_label(&self, index: usize) -> String {
        self.rules
            .get(index)
            .and_then(|r| r.name.clone())
            .unwrap_or_else(|| format!("rule {}", index + 1))
    }
}

/// A script in use: the rules and how many uses each has had.
#[derive(Debug)]
pub(crate) struct ScriptState {
    script: Script,
    used: Vec<u32>,
}

impl ScriptState {
    pub(crate) fn new(script: Script) -> Self {
        let used = vec![0; script.rules.len()];
        Self { script, used }
    }

    /// Picks the first matching rule with uses left and counts the use.
    pub(crate) fn pick(&mut self, role: &str, content: &str) -> Option<(usize, Rule)> {
        let index = self.script.rules.iter().enumerate().position(|(i, r)| {
            r.matches(role, content) && r.times.is_none_or(|t| self.used[i] < t)
        })?;
        self.used[index] += 1;
        Some((index, self.script.rules[index].clone()))
    }

    pub(crate) fn script(&self) -> &Script {
        &self.script
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_key_names_rule_and_key() {
        let text = "[[rule]]\nreply = \"a\"\n[[rule]]\nname = \"second\"\nreplay = \"b\"\n";
        let err = Script::parse(text).unwrap_err().to_string();
        assert!(err.contains("rule 2 (\"second\")"), "{err}");
        assert!(err.contains("replay"), "{err}");
    }

    #[test]
    fn contradiction_is_rejected() {
        let text = "[[rule]]\nreply = \"a\"\nerror = { status = 503, type = \"unavailable_error\", message = \"x\" }\n";
        let err = Script::parse(text).unwrap_err().to_string();
        assert!(err.contains("rule 1") && err.contains("reply"), "{err}");
    }

    #[test]
    fn times_are_counted() {
        let script = Script::parse("[[rule]]\ntimes = 2\nreply = \"a\"\n").unwrap();
        let mut state = ScriptState::new(script);
        assert!(state.pick("user", "x").is_some());
        assert!(state.pick("user", "x").is_some());
        assert!(state.pick("user", "x").is_none());
    }
}
