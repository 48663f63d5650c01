//! The registry: every tool that exists for an epoch, in a fixed order, with the labels of
//! their descriptions, and the schemas of the tools the registry always adds.

use super::{CALL_TOOL, CLOCK, ECHO, FIND_TOOL};
use bxcore::Labels;
use proto::{READ_OUTPUT, ToolSchema};
use serde_json::json;
use std::collections::BTreeMap;

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
    /// [`Registry::core_schemas`] adds them when some entry is not core. Should two entries share a name, the first wins.
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

    /// The tools array for an epoch: the core entries in registry order, then `find_tool` and
    /// `call_tool` when some entry is left out of the array. When every tool is already in it
    /// the two only mislead a small model, which calls them at random and loops (issue 34,
    /// `docs/evals.md`); `read_output` does not count as left out then: a cut result's note
    /// tells the model to call it directly, and loopd answers it though it is not shown (shown,
    /// the default model called it at random).
    pub fn core_schemas(&self) -> Vec<ToolSchema> {
        let some_left_out = self
            .entries
            .iter()
            .any(|entry| !entry.core && entry.schema.name != READ_OUTPUT);
        let mut schemas: Vec<ToolSchema> = self
            .entries
            .iter()
            .filter(|entry| entry.core)
            .map(|entry| entry.schema.clone())
            .collect();
        if some_left_out {
            schemas.push(find_tool_schema());
            schemas.push(call_tool_schema());
        }
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
