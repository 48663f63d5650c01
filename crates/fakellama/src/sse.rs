//! The answer as JSON: a non-streamed `chat.completion` or a stream of
//! `chat.completion.chunk` server-sent events.

use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use serde_json::{Map, Value, json};

use crate::reply::{Answer, Delta};
use crate::usage::Usage;

/// `system_fingerprint` and `build_info`, shaped like llama-server's `b<build>-<commit>`.
pub const BUILD_INFO: &str = "b0-fakellama";

/// What every answer of one request shares.
#[derive(Debug, Clone, PartialEq)]
pub struct Meta {
    /// `chatcmpl-...`.
    pub id: String,
    /// The model named in every answer (the server's model path, whatever was asked).
    pub model: String,
}

/// The current time in Unix seconds, as `created` says.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// `data: {json}`.
    Data(Value),
    /// An empty comment line (`:`), llama-server's keep-alive ping.
    Ping,
    /// `data: [DONE]`.
    Done,
}

impl Event {
    /// The event's bytes on the wire, with its blank-line terminator.
    pub fn to_bytes(&self) -> Bytes {
        match self {
            Event::Data(v) => Bytes::from(format!("data: {v}\n\n")),
            Event::Ping => Bytes::from_static(b":\n\n"),
            Event::Done => Bytes::from_static(b"data: [DONE]\n\n"),
        }
    }

    /// Sets `created` (when the event has one) to `now`: llama-server stamps each chunk
    /// when it sends it.
    pub fn stamp(&mut self, now: u64) {
        if let Event::Data(Value::Object(map)) = self
            && let Some(created) = map.get_mut("created")
        {
            *created = json!(now);
        }
    }
}

fn envelope(meta: &Meta, object: &str) -> Map<String, Value> {
    let mut map = Map::new();
    map.insert("id".into(), json!(meta.id));
    map.insert("object".into(), json!(object));
    map.insert("created".into(), json!(unix_now()));
    map.insert("model".into(), json!(meta.model));
    map.insert("system_fingerprint".into(), json!(BUILD_INFO));
    map
}

/// The non-streamed `chat.completion` document.
pub fn completion_json(meta: &Meta, answer: &Answer, usage: &Usage) -> Value {
    let mut message = Map::new();
    message.insert("role".into(), json!("assistant"));
    message.insert("content".into(), json!(answer.content));
    if !answer.reasoning.is_empty() {
        message.insert("reasoning_content".into(), json!(answer.reasoning));
    }
    if !answer.tool_calls.is_empty() {
        let calls: Vec<Value> = answer
            .tool_calls
            .iter()
            .map(|c| {
                json!({"type":"function","id":c.id,
                       "function":{"name":c.name,"arguments":c.arguments}})
            })
            .collect();
        message.insert("tool_calls".into(), Value::Array(calls));
    }
    let mut doc = envelope(meta, "chat.completion");
    doc.insert(
        "choices".into(),
        json!([{"index":0,"finish_reason":answer.finish.as_str(),"message":message}]),
    );
    doc.insert("usage".into(), usage.usage_json());
    doc.insert("timings".into(), usage.timings_json());
    Value::Object(doc)
}

fn chunk(meta: &Meta, delta: Value, finish_reason: Option<&str>) -> Map<String, Value> {
    let mut doc = envelope(meta, "chat.completion.chunk");
    doc.insert(
        "choices".into(),
        json!([{"index":0,"finish_reason":finish_reason,"delta":delta}]),
    );
    doc
}

fn delta_json(answer: &Answer, delta: &Delta) -> Value {
    match delta {
        Delta::Reasoning(t) => json!({ "reasoning_content": t }),
        Delta::Content(t) => json!({ "content": t }),
        Delta::CallStart(i, first) => {
            let (id, name) = answer
                .tool_calls
                .get(*i)
                .map(|c| (c.id.as_str(), c.name.as_str()))
                .unwrap_or_default();
            let mut function = json!({ "name": name });
            if !first.is_empty() {
                function["arguments"] = json!(first);
            }
            json!({"tool_calls":[{"index":i,"id":id,"type":"function","function":function}]})
        }
        Delta::CallArguments(i, t) => {
            json!({"tool_calls":[{"index":i,"function":{"arguments":t}}]})
        }
    }
}

/// How the stream should go beyond the answer itself.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StreamOptions {
    /// `stream_options.include_usage`.
    pub include_usage: bool,
    /// Send a ping comment after the first delta.
    pub ping: bool,
    /// End after the content with this `{"error":{...}}` event, without `[DONE]`.
    pub error_mid_stream: Option<Value>,
}

/// The stream's events, in order.
pub fn stream_events(
    meta: &Meta,
    answer: &Answer,
    usage: &Usage,
    options: &StreamOptions,
) -> Vec<Event> {
    let mut events = vec![Event::Data(Value::Object(chunk(
        meta,
        json!({"role":"assistant","content":null}),
        None,
    )))];
    let mut deltas = answer.deltas.iter().peekable();
    let mut first = true;
    while let Some(delta) = deltas.peek() {
        if let (Some(_), Delta::CallStart(..) | Delta::CallArguments(..)) =
            (&options.error_mid_stream, delta)
        {
            break;
        }
        events.push(Event::Data(Value::Object(chunk(
            meta,
            delta_json(answer, delta),
            None,
        ))));
        deltas.next();
        if first && options.ping {
            events.push(Event::Ping);
        }
        first = false;
    }
    if first && options.ping {
        events.push(Event::Ping);
    }
    if let Some(error) = &options.error_mid_stream {
        events.push(Event::Data(error.clone()));
        return events;
    }
    let mut finish = chunk(meta, json!({}), Some(answer.finish.as_str()));
    if options.include_usage {
        events.push(Event::Data(Value::Object(finish)));
        let mut last = envelope(meta, "chat.completion.chunk");
        last.insert("choices".into(), json!([]));
        last.insert("usage".into(), usage.usage_json());
        last.insert("timings".into(), usage.timings_json());
        events.push(Event::Data(Value::Object(last)));
    } else {
        finish.insert("timings".into(), usage.timings_json());
        events.push(Event::Data(Value::Object(finish)));
    }
    events.push(Event::Done);
    events
}
