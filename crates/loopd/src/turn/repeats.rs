//! Calls a model repeats within a turn (issue 12, point 7): a weak model stuck in a loop
//! (32 identical `list_dir` calls in one turn were seen) would otherwise burn the whole step
//! budget. A call is the same as an earlier one when it names the same tool with the same
//! arguments, `call_tool` unwrapped to the tool it targets, so a direct call and one through
//! `call_tool` count together; arguments are compared as JSON values (key order does not
//! matter), or as text when they are not JSON.

use crate::tools::CALL_TOOL;
use bxcore::ToolCall;
use serde_json::Value;

/// How many repeats past `[loop] max_repeated_calls` a turn refuses before it ends as
/// `max_steps`: the first refusal tells the model, the second shows it did not listen.
pub const REFUSED_REPEATS_BEFORE_END: u32 = 2;

/// What a call is compared by.
#[derive(Debug, PartialEq)]
enum Arguments {
    /// Arguments that are JSON.
    Json(Value),
    /// Arguments that are not, as written.
    Text(String),
}

/// The calls of one turn so far, and how many were refused as repeats.
#[derive(Debug)]
pub struct Repeats {
    max_repeated_calls: u32,
    seen: Vec<(String, Arguments, u32)>,
    refused: u32,
}

impl Repeats {
    /// A turn that has made no call yet, allowing `max_repeated_calls` of each.
    pub fn new(max_repeated_calls: u32) -> Repeats {
        Repeats {
            max_repeated_calls,
            seen: Vec::new(),
            refused: 0,
        }
    }

    /// Counts `call`; when the same call was already made `max_repeated_calls` times in the
    /// turn, the short result the model gets instead of running it.
    pub fn check(&mut self, call: &ToolCall) -> Option<String> {
        let (name, arguments) = target(call);
        let count = match self
            .seen
            .iter_mut()
            .find(|(n, a, _)| *n == name && *a == arguments)
        {
            Some((_, _, count)) => {
                *count += 1;
                *count
            }
            None => {
                self.seen.push((name.clone(), arguments, 1));
                1
            }
        };
        if count <= self.max_repeated_calls {
            return None;
        }
        self.refused += 1;
        Some(format!(
            "Not run: you already called {name} with these arguments {} time(s) in this task. \
             Its result is above and would be the same. Use it, or do something else.",
            count - 1
        ))
    }

    /// Whether the turn should end now: the model went on repeating after it was told.
    pub fn give_up(&self) -> bool {
        self.refused >= REFUSED_REPEATS_BEFORE_END
    }
}

/// The tool `call` runs and its arguments: `call_tool`'s target and inner arguments (none
/// means `{}`, as `call_tool` reads it), else the call itself.
fn target(call: &ToolCall) -> (String, Arguments) {
    let parsed = serde_json::from_str::<Value>(&call.arguments);
    if call.name == CALL_TOOL
        && let Ok(Value::Object(outer)) = &parsed
        && let Some(Value::String(name)) = outer.get("name")
    {
        let inner = outer
            .get("arguments")
            .cloned()
            .unwrap_or_else(|| Value::Object(serde_json::Map::new()));
        return (name.clone(), Arguments::Json(inner));
    }
    let arguments = match parsed {
        Ok(value) => Arguments::Json(value),
        Err(_) => Arguments::Text(call.arguments.clone()),
    };
    (call.name.clone(), arguments)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(name: &str, arguments: &str) -> ToolCall {
        ToolCall {
            id: "x".into(),
            name: name.into(),
            arguments: arguments.into(),
        }
    }

    #[test]
    fn the_third_same_call_is_refused_through_call_tool_too_and_the_second_refusal_gives_up() {
        let mut repeats = Repeats::new(2);
        assert_eq!(
            repeats.check(&call("list_dir", r#"{"path":".","deep":true}"#)),
            None
        );
        let through = r#"{"name":"list_dir","arguments":{"deep":true,"path":"."}}"#;
        assert_eq!(repeats.check(&call(CALL_TOOL, through)), None);
        let refused = repeats.check(&call("list_dir", r#"{ "deep": true, "path": "." }"#));
        assert!(
            refused
                .as_deref()
                .is_some_and(|t| t.contains("list_dir") && t.contains("2 time")),
            "{refused:?}"
        );
        assert!(!repeats.give_up());
        // Other arguments, another tool, text that is not JSON: each counted on its own.
        assert_eq!(repeats.check(&call("list_dir", r#"{"path":"a"}"#)), None);
        assert_eq!(repeats.check(&call("read_file", r#"{"path":"."}"#)), None);
        for _ in 0..2 {
            assert_eq!(repeats.check(&call("clock", "{tz")), None);
        }
        assert!(repeats.check(&call("clock", "{tz")).is_some());
        assert!(repeats.give_up());
    }

    #[test]
    fn call_tool_without_arguments_is_the_call_with_empty_ones() {
        let mut repeats = Repeats::new(1);
        assert_eq!(repeats.check(&call(CALL_TOOL, r#"{"name":"clock"}"#)), None);
        assert!(repeats.check(&call("clock", "{}")).is_some());
    }
}
