//! Tool-call arguments parsed strictly: a JSON object that holds a key twice is refused.
//!
//! serde_json keeps the last of two equal keys; people, and other parsers, read the first. An
//! approval showing `{"path":"/safe","path":"/etc/evil"}` reads as `/safe` and writes
//! `/etc/evil`. So every place that acts on a tool call's arguments (loopd before it sends a
//! call on, brokerd before it checks one) parses them with [`parse_no_duplicates`], at every
//! depth, and the one value it yields is what is checked, shown to the owner and run.

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::cell::RefCell;
use std::fmt;

/// The most characters of a repeated key an error quotes (the key is the model's text).
pub const MAX_SHOWN_KEY_CHARS: usize = 64;

/// Why text is not one strict JSON value.
#[derive(Debug, thiserror::Error)]
pub enum JsonError {
    /// An object holds `key` twice (in the outer object or any nested one).
    #[error("the key {} is given twice: give each key once", shown_key(.key))]
    DuplicateKey {
        /// The repeated key, whole.
        key: String,
    },
    /// The text is not JSON (serde_json's error: its message may quote the text; its
    /// `classify`, `line` and `column` do not).
    #[error("not valid JSON: {0}")]
    Invalid(#[source] serde_json::Error),
}

/// `key` as an error quotes it: JSON-quoted, cut to [`MAX_SHOWN_KEY_CHARS`] characters with `…`.
pub fn shown_key(key: &str) -> String {
    let cut: String = key.chars().take(MAX_SHOWN_KEY_CHARS).collect();
    // Serialising a string cannot fail; the Debug form is a faithful stand-in should it ever.
    let quoted = serde_json::to_string(&cut).unwrap_or_else(|_| format!("{cut:?}"));
    if cut.len() < key.len() {
        format!("{quoted}…")
    } else {
        quoted
    }
}

/// Parses `text` as one JSON value, as `serde_json::from_str::<Value>` does, except that an
/// object holding a key twice, at any depth, is [`JsonError::DuplicateKey`]. serde_json's
/// nesting limit and its refusal of trailing text apply.
pub fn parse_no_duplicates(text: &str) -> Result<Value, JsonError> {
    let repeated = RefCell::new(None);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let parsed = Strict {
        repeated: &repeated,
    }
    .deserialize(&mut deserializer)
    .and_then(|value| deserializer.end().map(|()| value));
    match (parsed, repeated.into_inner()) {
        (Ok(value), _) => Ok(value),
        (Err(_), Some(key)) => Err(JsonError::DuplicateKey { key }),
        (Err(e), None) => Err(JsonError::Invalid(e)),
    }
}

/// One value, refusing a repeated key; the key is kept in `repeated` so that the caller gets it
/// typed rather than inside serde's message.
#[derive(Clone, Copy)]
struct Strict<'a> {
    repeated: &'a RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E>(self, n: f64) -> Result<Value, E> {
        // As serde_json's own `Value` does: a float JSON cannot hold is null.
        Ok(Number::from_f64(n).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_some<D: de::Deserializer<'de>>(self, deserializer: D) -> Result<Value, D::Error> {
        self.deserialize(deserializer)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element_seed(self)? {
            items.push(item);
        }
        Ok(Value::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut object = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            if object.contains_key(&key) {
                let message = format!("the key {} is given twice", shown_key(&key));
                *self.repeated.borrow_mut() = Some(key);
                return Err(de::Error::custom(message));
            }
            let value = map.next_value_seed(self)?;
            object.insert(key, value);
        }
        Ok(Value::Object(object))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use proptest::prelude::*;

    fn duplicate(text: &str) -> String {
        match parse_no_duplicates(text) {
            Err(JsonError::DuplicateKey { key }) => key,
            other => panic!("{text}: expected a duplicate key, got {other:?}"),
        }
    }

    #[test]
    fn a_key_given_twice_is_refused_by_name_at_any_depth() {
        assert_eq!(duplicate(r#"{"path":"/safe","path":"/etc/evil"}"#), "path");
        assert_eq!(duplicate(r#"{"a":{"b":1,"c":{"d":[{"x":1,"x":2}]}}}"#), "x");
        assert_eq!(
            duplicate(r#"{"name":"write_file","arguments":{"path":"a","content":"","path":"b"}}"#),
            "path"
        );
        // Escapes do not hide a repeat: both spell `path`.
        assert_eq!(duplicate(r#"{"path":1,"p\u0061th":2}"#), "path");
        assert_eq!(duplicate(r#"[{"k":1},{"k":2,"k":3}]"#), "k");
        let err = parse_no_duplicates(r#"{"path":"/safe","path":"/etc/evil"}"#).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the key \"path\" is given twice: give each key once"
        );
    }

    #[test]
    fn equal_keys_in_different_objects_are_fine() {
        let value = parse_no_duplicates(r#"{"a":{"k":1},"b":{"k":2},"k":[{"k":3},{"k":4}]}"#);
        assert_eq!(
            value.unwrap(),
            serde_json::json!({"a":{"k":1},"b":{"k":2},"k":[{"k":3},{"k":4}]})
        );
    }

    #[test]
    fn a_long_key_is_quoted_cut() {
        let key = "k".repeat(500);
        let err = parse_no_duplicates(&format!(r#"{{"{key}":1,"{key}":2}}"#)).unwrap_err();
        let shown = format!("\"{}\"…", "k".repeat(MAX_SHOWN_KEY_CHARS));
        assert!(err.to_string().contains(&shown), "{err}");
        assert!(matches!(err, JsonError::DuplicateKey { key: k } if k == key));
    }

    #[test]
    fn text_that_is_not_json_is_invalid_not_a_duplicate() {
        for bad in ["", "{", "{\"a\":1} x", "{a:1}", "[1,]", &"[".repeat(200)] {
            assert!(
                matches!(parse_no_duplicates(bad), Err(JsonError::Invalid(_))),
                "{bad}"
            );
        }
    }

    fn json_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            prop_oneof![Just(0.5), Just(-1.25), Just(1e300)].prop_map(Value::from),
            ".{0,8}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map(".{0,6}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        /// Without repeated keys it reads exactly what serde_json reads, compact or pretty.
        #[test]
        fn it_reads_what_serde_json_reads(value in json_value()) {
            for text in [
                serde_json::to_string(&value).unwrap(),
                serde_json::to_string_pretty(&value).unwrap(),
            ] {
                let strict = parse_no_duplicates(&text).unwrap();
                prop_assert_eq!(&strict, &serde_json::from_str::<Value>(&text).unwrap());
                prop_assert_eq!(&strict, &value);
            }
        }
    }
}
