//! The one routing step: what becomes of a tool call (answered by loopd, redirected, sent to
//! the port, or run as a subagent), unwrapping `call_tool` once.

use super::{CALL_TOOL, CLOCK, FIND_TOOL, Registry};
use bxcore::json::{JsonError, parse_no_duplicates, shown_key};
use bxcore::{DenyReason, Labels, denial_message};
use proto::SUBAGENT;
use serde_json::Value;

/// What to do with one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    /// loopd answers it itself; the text is the tool result.
    Local(String),
    /// loopd does not run it, and the text tells the model how to make the call instead (a
    /// core tool reached through `call_tool`); logged as `redirected`.
    Redirect(String),
    /// Send `tool` with `arguments` (JSON text) through the [`super::ToolPort`].
    Port {
        /// The tool to run (the target of a `call_tool`).
        tool: String,
        /// Its arguments, as JSON text.
        arguments: String,
    },
    /// loopd runs `task` in a child session (the `subagent` module).
    Subagent {
        /// What the child is asked.
        task: String,
    },
}

/// The tool a call runs: `name` itself, or for `call_tool` the `name` in its arguments (so a
/// non-core tool such as `http_fetch` is known by its own name).
pub fn target_tool(name: &str, arguments: &str) -> String {
    if name == CALL_TOOL
        && let Ok(Value::Object(args)) = serde_json::from_str::<Value>(arguments)
        && let Some(Value::String(inner)) = args.get("name")
    {
        return inner.clone();
    }
    name.to_string()
}

/// Decides what becomes of a tool call named `name` with `arguments` (JSON text).
///
/// `find_tool`, `call_tool` mistakes and `clock` are answered locally, `call_tool` of a core
/// tool is redirected (call it directly); `call_tool` of a known non-core tool goes to the port
/// as that tool. Any other name goes to the port unchanged, even
/// one the registry does not know: the port (brokerd) decides what runs, not loopd.
pub fn dispatch(registry: &Registry, name: &str, arguments: &str) -> Dispatch {
    if name == FIND_TOOL {
        return Dispatch::Local(find_tool(registry, arguments));
    }
    if name == CALL_TOOL {
        return dispatch_call_tool(registry, arguments);
    }
    if name == CLOCK {
        return Dispatch::Local(bxcore::Timestamp::now().to_rfc3339());
    }
    if name == SUBAGENT {
        return subagent_dispatch(arguments);
    }
    Dispatch::Port {
        tool: name.to_string(),
        arguments: arguments.to_string(),
    }
}

/// The text `find_tool` answers: the matching schemas, one compact JSON line each.
fn find_tool(registry: &Registry, arguments: &str) -> String {
    const NO_MATCH: &str = "No tool matches.";
    let Some(query) = find_tool_query(arguments) else {
        return NO_MATCH.to_string();
    };
    let matches = registry.find(&query);
    if matches.is_empty() {
        return NO_MATCH.to_string();
    }
    let mut text = format!("{} tool(s) match:\n", matches.len());
    for schema in matches {
        // Serialising a struct of strings and a `Value` cannot fail; the name alone is a
        // usable line should it ever.
        let line = serde_json::to_string(schema).unwrap_or_else(|_| schema.name.clone());
        text.push_str(&line);
        text.push('\n');
    }
    text.push_str("Call it with call_tool.");
    text
}

/// The label of what `find_tool` answers for `arguments`: the join of the labels of the
/// schemas it lists (an MCP server's descriptions are its author's text), public and trusted
/// when it lists none.
pub fn find_tool_labels(registry: &Registry, arguments: &str) -> Labels {
    let Some(query) = find_tool_query(arguments) else {
        return Labels::PUBLIC;
    };
    registry
        .find(&query)
        .iter()
        .fold(Labels::PUBLIC, |labels, schema| {
            labels.join(registry.description_labels(&schema.name))
        })
}

/// The `query` of `find_tool`'s arguments, when they have one.
fn find_tool_query(arguments: &str) -> Option<String> {
    match serde_json::from_str::<Value>(arguments) {
        Ok(Value::Object(args)) => match args.get("query") {
            Some(Value::String(query)) => Some(query.clone()),
            _ => None,
        },
        _ => None,
    }
}

/// Unwraps `call_tool {"name": n, "arguments": a}` into a port call of `n` with `a`, or answers
/// the model's mistake locally so it can correct itself in the next step.
fn dispatch_call_tool(registry: &Registry, arguments: &str) -> Dispatch {
    // Strict, as `turn::call` checks first: the inner arguments are written out again below,
    // and a key given twice must not silently become its last value.
    let call = match parse_no_duplicates(arguments) {
        Ok(Value::Object(call)) => call,
        Err(JsonError::DuplicateKey { key }) => {
            return Dispatch::Local(duplicate_key_message(CALL_TOOL, &key));
        }
        _ => {
            return Dispatch::Local(
                "call_tool needs a JSON object: {\"name\": \"<tool name>\", \"arguments\": {...}}."
                    .to_string(),
            );
        }
    };
    let name = call.get("name").and_then(Value::as_str).unwrap_or("");
    if name == FIND_TOOL || name == CALL_TOOL {
        return Dispatch::Redirect(core_tool(name));
    }
    // A tool without parameters is often called without `arguments`; that means no arguments,
    // not a mistake worth a step.
    let empty = Value::Object(serde_json::Map::new());
    match registry.get(name) {
        None => Dispatch::Local(format!(
            "No tool named \"{name}\". call_tool needs the name of a tool that find_tool returned."
        )),
        Some(entry) if entry.core => Dispatch::Redirect(core_tool(name)),
        Some(_) => {
            let args_value = match call.get("arguments") {
                None => &empty,
                Some(value) if value.is_object() => value,
                Some(_) => {
                    return Dispatch::Local(format!(
                        "call_tool needs a JSON object as \"arguments\" for \"{name}\": arguments must be a JSON object that fits its schema."
                    ));
                }
            };
            let args_text =
                serde_json::to_string(args_value).unwrap_or_else(|_| "null".to_string());
            if name == SUBAGENT {
                return subagent_dispatch(&args_text);
            }
            Dispatch::Port {
                tool: name.to_string(),
                arguments: args_text,
            }
        }
    }
}

/// What the model is told when the arguments of its call of `tool` hold `key` twice: nothing
/// ran, and which key to give once.
pub fn duplicate_key_message(tool: &str, key: &str) -> String {
    format!(
        "The arguments of {tool} hold the key {} twice: give each key once.",
        shown_key(key)
    )
}

fn core_tool(name: &str) -> String {
    format!("\"{name}\" is a core tool: call it directly, not through call_tool.")
}

/// Inner arguments of `subagent` (or of `call_tool` after unwrap). Unknown keys, and a key
/// given twice, are errors.
pub fn parse_subagent_task(arguments: &str) -> Result<String, String> {
    let value: Value = match parse_no_duplicates(arguments) {
        Ok(value) => value,
        Err(JsonError::DuplicateKey { key }) => {
            return Err(format!(
                "they hold the key {} twice: give each key once",
                shown_key(&key)
            ));
        }
        Err(JsonError::Invalid(_)) => return Err("arguments must be a JSON object".to_string()),
    };
    let obj = match value.as_object() {
        Some(obj) => obj,
        None => return Err("arguments must be a JSON object".to_string()),
    };
    for key in obj.keys() {
        if key != "task" {
            return Err(format!("unknown field: {key}"));
        }
    }
    match obj.get("task") {
        Some(Value::String(text)) => Ok(text.clone()),
        Some(_) => Err("task must be a string".to_string()),
        None => Err("task is required".to_string()),
    }
}

/// What becomes of a `subagent` call with `arguments`: a child to run, or the model's mistake
/// answered as invalid arguments.
pub fn subagent_dispatch(arguments: &str) -> Dispatch {
    match parse_subagent_task(arguments) {
        Ok(task) => Dispatch::Subagent { task },
        Err(detail) => Dispatch::Local(denial_message(DenyReason::InvalidArguments, Some(&detail))),
    }
}
