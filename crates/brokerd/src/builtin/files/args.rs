//! A built-in tool's arguments: one fixed list of parameters gives both the JSON Schema the
//! model sees and the check every call's arguments go through, so the two cannot drift apart.
//!
//! Arguments must be a JSON object holding exactly the listed keys, each of its type: an unknown
//! key, a missing required key or a wrong type is [`ToolError::InvalidArguments`] naming the key
//! and why.

use crate::tool::ToolError;
use serde_json::{Map, Value, json};

/// The JSON type a parameter takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A JSON string.
    String,
    /// A JSON boolean.
    Bool,
    /// A JSON array of strings.
    Strings,
    /// A JSON integer of at least 0.
    Count,
    /// A JSON object whose values are strings.
    StringMap,
}

impl Kind {
    /// Its JSON Schema `type`.
    fn schema_type(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::Bool => "boolean",
            Kind::Strings => "array",
            Kind::Count => "integer",
            Kind::StringMap => "object",
        }
    }

    /// How an error names it.
    fn described(self) -> &'static str {
        match self {
            Kind::String => "a string",
            Kind::Bool => "a boolean",
            Kind::Strings => "an array of strings",
            Kind::Count => "an integer of at least 0",
            Kind::StringMap => "an object of strings",
        }
    }

    /// Whether `value` is of this kind.
    fn fits(self, value: &Value) -> bool {
        match self {
            Kind::String => value.is_string(),
            Kind::Bool => value.is_boolean(),
            Kind::Strings => value
                .as_array()
                .is_some_and(|items| items.iter().all(Value::is_string)),
            Kind::Count => value.is_u64(),
            Kind::StringMap => value
                .as_object()
                .is_some_and(|map| map.values().all(Value::is_string)),
        }
    }
}

/// One parameter of a tool.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Param {
    /// The key in the arguments object.
    pub name: &'static str,
    /// Its JSON type.
    pub kind: Kind,
    /// Whether a call must give it.
    pub required: bool,
    /// What it means, for the model.
    pub description: &'static str,
}

/// The JSON Schema `parameters` object for `params`: an object with exactly these properties.
pub(crate) fn schema(params: &[Param]) -> Value {
    let properties: Map<String, Value> = params
        .iter()
        .map(|p| {
            let mut prop = json!({ "type": p.kind.schema_type(), "description": p.description });
            match p.kind {
                Kind::Strings => prop["items"] = json!({"type": "string"}),
                Kind::StringMap => prop["additionalProperties"] = json!({"type": "string"}),
                Kind::String | Kind::Bool | Kind::Count => {}
            }
            (p.name.to_string(), prop)
        })
        .collect();
    let required: Vec<&str> = params
        .iter()
        .filter(|p| p.required)
        .map(|p| p.name)
        .collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// Arguments that passed [`check`]: every key is one of the parameters, of its type.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Args<'a> {
    map: &'a Map<String, Value>,
}

impl<'a> Args<'a> {
    /// The string argument `name`, when given.
    pub(crate) fn str(&self, name: &str) -> Option<&'a str> {
        self.map.get(name).and_then(Value::as_str)
    }

    /// The boolean argument `name`, when given.
    pub(crate) fn bool(&self, name: &str) -> Option<bool> {
        self.map.get(name).and_then(Value::as_bool)
    }

    /// The array-of-strings argument `name`, when given.
    pub(crate) fn strings(&self, name: &str) -> Option<Vec<&'a str>> {
        self.map
            .get(name)
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(Value::as_str).collect())
    }

    /// The integer argument `name`, when given.
    pub(crate) fn count(&self, name: &str) -> Option<u64> {
        self.map.get(name).and_then(Value::as_u64)
    }

    /// The object-of-strings argument `name`, when given, as `(key, value)` in the object's
    /// order.
    pub(crate) fn string_map(&self, name: &str) -> Option<Vec<(&'a str, &'a str)>> {
        self.map.get(name).and_then(Value::as_object).map(|map| {
            map.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.as_str(), v)))
                .collect()
        })
    }
}

/// Checks `arguments` against `params`.
pub(crate) fn check<'a>(arguments: &'a Value, params: &[Param]) -> Result<Args<'a>, ToolError> {
    let Some(map) = arguments.as_object() else {
        return Err(ToolError::InvalidArguments(format!(
            "arguments must be a JSON object, not {}",
            type_name(arguments)
        )));
    };
    let expected = || params.iter().map(|p| p.name).collect::<Vec<_>>().join(", ");
    for (key, value) in map {
        let Some(param) = params.iter().find(|p| p.name == key) else {
            return Err(ToolError::InvalidArguments(format!(
                "unknown key {key:?}; the keys are: {}",
                expected()
            )));
        };
        if !param.kind.fits(value) {
            return Err(ToolError::InvalidArguments(format!(
                "key {key:?} must be {}, not {}",
                param.kind.described(),
                type_name(value)
            )));
        }
    }
    if let Some(missing) = params
        .iter()
        .find(|p| p.required && !map.contains_key(p.name))
    {
        return Err(ToolError::InvalidArguments(format!(
            "missing key {:?} ({})",
            missing.name,
            missing.kind.described()
        )));
    }
    Ok(Args { map })
}

/// How an error names the JSON type of `value`.
fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}
