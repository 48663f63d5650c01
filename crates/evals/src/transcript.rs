//! What a task's sessions did, read back from their logs (`<state>/sessions/ID/log.jsonl`):
//! per turn its final answer, its model calls and tokens, and every tool call with how it
//! ended. Lines are read as JSON values, not as loopd's types, so that the runner stays a
//! reader of the log format (`docs/ARCHITECTURE.md`) and never of loopd's internals.

use serde_json::Value;
use std::path::Path;

/// The tool loopd unwraps to its target.
const CALL_TOOL: &str = "call_tool";

/// One tool call and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// The tool that runs: `call_tool`'s target, or the call's own name.
    pub tool: String,
    /// Its arguments as the model wrote them (the target's, for `call_tool`).
    pub arguments: String,
    /// `ok`, `failed`, `denied`, `redirected`, or `none` when no result was logged.
    pub outcome: String,
}

impl Call {
    /// Whether the tool ran and gave a result.
    pub fn ran(&self) -> bool {
        self.outcome == "ok"
    }
}

/// One turn of the task's session.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Turn {
    /// The turn's number in its session.
    pub number: u64,
    /// The final answer: the content of its last model call.
    pub answer: String,
    /// Model calls.
    pub model_calls: u32,
    /// Prompt tokens the server evaluated (not from its cache).
    pub evaluated_tokens: u64,
    /// Tokens generated.
    pub generated_tokens: u64,
    /// Its tool calls, in order.
    pub calls: Vec<Call>,
    /// How it ended: `done`, `max_steps`, `failed`, ...; empty while it had not ended.
    pub end: String,
}

/// The turns of the session log in `path`. A line that is not JSON (the last one cut by a
/// crash) ends the reading; the turns before it stand.
pub fn read_turns(path: &Path) -> std::io::Result<Vec<Turn>> {
    let text = std::fs::read_to_string(path)?;
    Ok(turns(&text))
}

/// [`read_turns`] of a log's text.
pub fn turns(text: &str) -> Vec<Turn> {
    let mut turns: Vec<Turn> = Vec::new();
    let mut pending: Vec<(String, Call)> = Vec::new();
    for line in text.lines() {
        let Ok(record) = serde_json::from_str::<Value>(line) else {
            break;
        };
        let kind = record.get("type").and_then(Value::as_str).unwrap_or("");
        match kind {
            "user" => {
                pending.clear();
                turns.push(Turn {
                    number: record.get("turn").and_then(Value::as_u64).unwrap_or(0),
                    ..Turn::default()
                });
            }
            "assistant" => {
                let Some(turn) = turns.last_mut() else {
                    continue;
                };
                turn.model_calls += 1;
                turn.answer = text_of(&record, "content");
                if let Some(usage) = record.get("usage") {
                    let field = |k: &str| usage.get(k).and_then(Value::as_u64).unwrap_or(0);
                    turn.evaluated_tokens +=
                        field("prompt_tokens").saturating_sub(field("cached_tokens"));
                    turn.generated_tokens += field("completion_tokens");
                }
                for call in record
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                {
                    let (tool, arguments) = target(call);
                    pending.push((
                        text_of(call, "id"),
                        Call {
                            tool,
                            arguments,
                            outcome: "none".to_string(),
                        },
                    ));
                }
            }
            "tool_result" => {
                let Some(turn) = turns.last_mut() else {
                    continue;
                };
                let id = text_of(&record, "tool_call_id");
                if let Some(i) = pending.iter().position(|(p, _)| *p == id) {
                    let (_, mut call) = pending.remove(i);
                    call.outcome = outcome_name(record.get("outcome"));
                    turn.calls.push(call);
                }
            }
            "turn_end" => {
                let Some(turn) = turns.last_mut() else {
                    continue;
                };
                turn.calls.extend(pending.drain(..).map(|(_, c)| c));
                turn.end = outcome_name(record.get("end"));
            }
            _ => {}
        }
    }
    if let Some(turn) = turns.last_mut() {
        turn.calls.extend(pending.drain(..).map(|(_, c)| c));
    }
    turns
}

/// The string at `key` of `value`, or empty.
fn text_of(value: &Value, key: &str) -> String {
    value
        .get(key)
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string()
}

/// An enum as serde writes it: a bare string, or an object whose one key names the variant.
fn outcome_name(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Object(map)) => map.keys().next().cloned().unwrap_or_default(),
        _ => "none".to_string(),
    }
}

/// The tool a logged call runs and its arguments: `call_tool`'s target with its inner
/// arguments, or the call itself.
fn target(call: &Value) -> (String, String) {
    let name = text_of(call, "name");
    let arguments = text_of(call, "arguments");
    if name == CALL_TOOL
        && let Ok(inner) = serde_json::from_str::<Value>(&arguments)
        && let Some(target) = inner.get("name").and_then(Value::as_str)
    {
        let args = inner
            .get("arguments")
            .map(Value::to_string)
            .unwrap_or_else(|| "{}".to_string());
        return (target.to_string(), args);
    }
    (name, arguments)
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"{"type":"header","version":1,"session":"s","time":"t","seq":0,"digest":"d"}
{"type":"user","time":"t","turn":1,"content":"hi","seq":1,"digest":"d"}
{"type":"assistant","time":"t","content":"","tool_calls":[{"id":"a","name":"call_tool","arguments":"{\"name\":\"read_file\",\"arguments\":{\"path\":\"/x\"}}"},{"id":"b","name":"write_file","arguments":"{}"}],"usage":{"prompt_tokens":100,"completion_tokens":10,"cached_tokens":40},"seq":2,"digest":"d"}
{"type":"tool_result","time":"t","call":1,"tool_call_id":"a","content":"x","class":"private","untrusted":false,"truncated":false,"outcome":"ok","seq":3,"digest":"d"}
{"type":"tool_result","time":"t","call":2,"tool_call_id":"b","content":"no","class":"public","untrusted":false,"truncated":false,"outcome":{"denied":{"reason":"x"}},"seq":4,"digest":"d"}
{"type":"assistant","time":"t","content":"It says x.","usage":{"prompt_tokens":130,"completion_tokens":5,"cached_tokens":110},"seq":5,"digest":"d"}
{"type":"turn_end","time":"t","turn":1,"end":"done","seq":6,"digest":"d"}
{"type":"user","time":"t","turn":2,"content":"more","seq":7,"digest":"d"}
{"type":"assistant","time":"t","content":"cut","tool_calls":[{"id":"c","name":"echo","arguments":"{}"}],"seq":8,"digest":"d"}
{"type":"turn_end","time":"t","turn":2,"end":{"failed":{"reason":"r"}},"seq":9,"digest":"d"}
{"type":"user","time":"t","turn":3,"content":"half"#;

    #[test]
    fn turns_carry_their_answer_calls_tokens_and_end() {
        let turns = turns(LOG);
        assert_eq!(turns.len(), 2, "the cut last line ends the reading");
        let first = &turns[0];
        assert_eq!(first.answer, "It says x.");
        assert_eq!(first.model_calls, 2);
        assert_eq!(first.evaluated_tokens, 60 + 20);
        assert_eq!(first.generated_tokens, 15);
        assert_eq!(first.end, "done");
        assert_eq!(
            first.calls,
            vec![
                Call {
                    tool: "read_file".into(),
                    arguments: r#"{"path":"/x"}"#.into(),
                    outcome: "ok".into()
                },
                Call {
                    tool: "write_file".into(),
                    arguments: "{}".into(),
                    outcome: "denied".into()
                },
            ]
        );
        assert!(first.calls[0].ran() && !first.calls[1].ran());
        assert_eq!(turns[1].end, "failed");
        assert_eq!(turns[1].calls[0].outcome, "none", "a call without a result");
    }
}
