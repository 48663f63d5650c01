//! Tools as loopd sees them (seed M2b-03): the port every tool call goes through, the registry
//! of what exists, the calls loopd answers itself, the result cap, and the fake tools that stand
//! in for brokerd until it lands.
//!
//! The tools array the model gets is fixed for an epoch and holds only the core tools plus
//! `find_tool` and `call_tool` (spec section 4): every other tool is found with `find_tool` and
//! called through `call_tool`, which loopd unwraps so that brokerd applies its grants to the
//! target tool, never to `call_tool`.

use bxcore::{DataClass, DenyReason, Labels};
use proto::{ToolRequest, ToolResponse, ToolSchema};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Mutex;

/// The seeds' refusal text, re-exported because dispatch code builds its local answers with it.
pub use bxcore::denial_message;

/// The name of the tool that searches the registry. loopd answers it itself.
pub const FIND_TOOL: &str = "find_tool";
/// The name of the tool that calls a tool `find_tool` returned. loopd unwraps it.
pub const CALL_TOOL: &str = "call_tool";
/// The name of the clock, loopd's own core tool.
pub const CLOCK: &str = "clock";
/// The name of the echo tool, a non-core tool that only exists to exercise `call_tool`.
pub const ECHO: &str = "echo";

/// Where loopd sends the tool calls it does not answer itself: brokerd in production,
/// [`FakeTools`] until brokerd lands and in tests.
pub trait ToolPort: Send + Sync {
    /// Runs one call and says what came of it. Refusals and failures are answers, not errors:
    /// the model gets them as the tool result.
    fn call(&self, request: &ToolRequest) -> ToolResponse;

    /// The tools this port offers `session`, when it decides per session (brokerd's
    /// catalogue); `None`: it offers the same tools to every session.
    fn catalogue(&self, session: &bxcore::SessionId) -> Option<proto::Catalogue> {
        let _ = session;
        None
    }
}

/// One tool the registry knows.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    /// How the model sees it.
    pub schema: ToolSchema,
    /// Whether it is in the tools array itself; if not, it is reached through `find_tool` and
    /// `call_tool`.
    pub core: bool,
}

/// Every tool that exists for an epoch, in a fixed order (the order of the tools array and of
/// `find_tool` results, which must not change within an epoch or the prompt cache is lost).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Registry {
    entries: Vec<Entry>,
    /// The label of an entry's schema text, by name, where it is not public and trusted (an
    /// MCP server's description, as brokerd's catalogue labels it).
    description_labels: BTreeMap<String, Labels>,
}

impl Registry {
    /// A registry of these entries, in this order. `find_tool` and `call_tool` are not entries:
    /// [`Registry::core_schemas`] adds them. Should two entries share a name, the first wins.
    pub fn new(entries: Vec<Entry>) -> Registry {
        Registry {
            entries,
            description_labels: BTreeMap::new(),
        }
    }

    /// This registry with `labels` as the label of the schema text of the entry `name`.
    #[must_use]
    pub fn with_description_labels(mut self, name: &str, labels: Labels) -> Registry {
        if labels != Labels::PUBLIC {
            self.description_labels.insert(name.to_string(), labels);
        }
        self
    }

    /// The label of the schema text of the entry `name` (public and trusted unless set).
    pub fn description_labels(&self, name: &str) -> Labels {
        self.description_labels
            .get(name)
            .copied()
            .unwrap_or(Labels::PUBLIC)
    }

    /// The join of the labels of the core entries' schemas: the label of the tools array.
    pub fn core_labels(&self) -> Labels {
        self.entries
            .iter()
            .filter(|entry| entry.core)
            .fold(Labels::PUBLIC, |labels, entry| {
                labels.join(self.description_labels(&entry.schema.name))
            })
    }

    /// The M2b set: `clock` (core) and `echo` (not core).
    pub fn m2b() -> Registry {
        Registry::new(vec![
            Entry {
                schema: clock_schema(),
                core: true,
            },
            Entry {
                schema: echo_schema(),
                core: false,
            },
        ])
    }

    /// The tools array for an epoch: the core entries in registry order, then `find_tool`,
    /// then `call_tool`.
    pub fn core_schemas(&self) -> Vec<ToolSchema> {
        let mut schemas: Vec<ToolSchema> = self
            .entries
            .iter()
            .filter(|entry| entry.core)
            .map(|entry| entry.schema.clone())
            .collect();
        schemas.push(find_tool_schema());
        schemas.push(call_tool_schema());
        schemas
    }

    /// This registry with `entry` last, in place of any entry of the same name.
    pub fn with(&self, entry: Entry) -> Registry {
        let mut registry = self.without(&entry.schema.name);
        registry.entries.push(entry);
        registry
    }

    /// This registry without the entry named `name`.
    pub fn without(&self, name: &str) -> Registry {
        let entries = self
            .entries
            .iter()
            .filter(|entry| entry.schema.name != name)
            .cloned()
            .collect();
        let mut description_labels = self.description_labels.clone();
        description_labels.remove(name);
        Registry {
            entries,
            description_labels,
        }
    }

    /// The entry of this exact name.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|entry| entry.schema.name == name)
    }

    /// The schemas whose name or description holds `query`, ignoring case, in registry order.
    ///
    /// The query is trimmed first, and an empty query matches nothing: otherwise a blank query
    /// (or a lone space, which nearly every description holds) would dump the whole registry
    /// into the context.
    pub fn find(&self, query: &str) -> Vec<&ToolSchema> {
        let query = query.trim().to_lowercase();
        if query.is_empty() {
            return Vec::new();
        }
        self.entries
            .iter()
            .map(|entry| &entry.schema)
            .filter(|schema| {
                schema.name.to_lowercase().contains(&query)
                    || schema.description.to_lowercase().contains(&query)
            })
            .collect()
    }
}

/// The clock: the current time, which the model cannot know otherwise.
pub fn clock_schema() -> ToolSchema {
    ToolSchema {
        name: CLOCK.to_string(),
        description: "The current date and time, as RFC 3339 in UTC.".to_string(),
        parameters: json!({"type": "object", "properties": {}}),
    }
}

/// Echo: returns its `text` argument.
pub fn echo_schema() -> ToolSchema {
    ToolSchema {
        name: ECHO.to_string(),
        description: "Returns its text argument unchanged.".to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The text to return."}
            },
            "required": ["text"]
        }),
    }
}

fn find_tool_schema() -> ToolSchema {
    ToolSchema {
        name: FIND_TOOL.to_string(),
        description:
            "Search for more tools by keyword. Returns the schemas of the tools that match."
                .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "query": {
                    "type": "string",
                    // One keyword, because matching is by substring: "read file" would not
                    // find a tool described as "Reads a file".
                    "description": "One keyword to look for in tool names and descriptions, such as \"file\" or \"time\"."
                }
            },
            "required": ["query"]
        }),
    }
}

fn call_tool_schema() -> ToolSchema {
    ToolSchema {
        name: CALL_TOOL.to_string(),
        description: "Call a tool that find_tool returned. Pass its name and an arguments object that fits its schema."
            .to_string(),
        parameters: json!({
            "type": "object",
            "properties": {
                "name": {
                    "type": "string",
                    "description": "The tool's name, as find_tool returned it."
                },
                "arguments": {"type": "object"}
            },
            "required": ["name", "arguments"]
        }),
    }
}

/// What to do with one tool call.
///
/// - `Local(text)`: loopd answers it itself; `text` is the tool result.
/// - `Redirect(text)`: loopd does not run it and `text` tells the model how to make the call
///   instead (a core tool reached through `call_tool`); logged as `redirected`.
/// - `Port { tool, arguments }`: send `tool` with `arguments` (JSON text) through the
///   [`ToolPort`].
/// - `Subagent { task }`: loopd runs `task` in a child session (`crate::subagent`).
// The variants are documented above rather than one by one: later seeds edit this block as
// exact lines, and doc comments between them would break those edits.
#[allow(missing_docs)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dispatch {
    Local(String),
    Redirect(String),
    Port { tool: String, arguments: String },
    Subagent { task: String },
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
    if name == crate::subagent::SUBAGENT {
        return crate::subagent::dispatch_args(arguments);
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
    let Ok(Value::Object(call)) = serde_json::from_str::<Value>(arguments) else {
        return Dispatch::Local(
            "call_tool needs a JSON object: {\"name\": \"<tool name>\", \"arguments\": {...}}."
                .to_string(),
        );
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
            if name == crate::subagent::SUBAGENT {
                return crate::subagent::dispatch_args(&args_text);
            }
            Dispatch::Port {
                tool: name.to_string(),
                arguments: args_text,
            }
        }
    }
}

fn core_tool(name: &str) -> String {
    format!("\"{name}\" is a core tool: call it directly, not through call_tool.")
}

/// The marker [`cap_result`] appends when it cuts.
const TRUNCATED: &str = "\n[truncated]";

/// Cuts to at most `cap` bytes on a character boundary and appends "\n[truncated]" if it cut.
///
/// The marker comes on top of the cap, so a cut result is at most `cap + 12` bytes. The flag
/// says whether it cut. A text of exactly `cap` bytes is not cut.
pub fn cap_result(text: &str, cap: usize) -> (String, bool) {
    if text.len() <= cap {
        return (text.to_string(), false);
    }
    let mut end = cap;
    // Byte 0 is always a boundary, so this stops.
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut capped = String::with_capacity(end + TRUNCATED.len());
    capped.push_str(&text[..end]);
    capped.push_str(TRUNCATED);
    (capped, true)
}

/// In-process tools that stand in for brokerd: `clock` and `echo` answer, every other tool is
/// refused with `NoGrant`, and every request is recorded for tests to inspect.
#[derive(Debug, Default)]
pub struct FakeTools {
    calls: Mutex<Vec<ToolRequest>>,
}

impl FakeTools {
    /// Fake tools that have seen no call yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every request so far, oldest first.
    pub fn calls(&self) -> Vec<ToolRequest> {
        // A panic elsewhere while holding the lock leaves the list intact: keep using it.
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .clone()
    }
}

impl ToolPort for FakeTools {
    fn call(&self, request: &ToolRequest) -> ToolResponse {
        self.calls
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(request.clone());
        match request.tool.as_str() {
            CLOCK => public_result(bxcore::Timestamp::now().to_rfc3339()),
            ECHO => match serde_json::from_str::<Value>(&request.arguments) {
                Ok(Value::Object(args)) => match args.get("text") {
                    Some(Value::String(text)) => public_result(text.clone()),
                    _ => echo_failed(),
                },
                _ => echo_failed(),
            },
            _ => ToolResponse::denied(DenyReason::NoGrant, None),
        }
    }
}

fn public_result(content: String) -> ToolResponse {
    ToolResponse::Result {
        content,
        class: DataClass::Public,
        untrusted: false,
        truncated: false,
    }
}

fn echo_failed() -> ToolResponse {
    ToolResponse::failed("echo needs a JSON object with a string \"text\".")
}
