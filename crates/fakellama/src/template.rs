//! The chat template: messages and tools rendered into one prompt string, ChatML-like.
//!
//! ```text
//! <|im_start|>system
//! {system content}
//!
//! # Tools
//! <tools>
//! {tool 1 as compact JSON}
//! {tool 2 as compact JSON}
//! </tools><|im_end|>
//! <|im_start|>user
//! {content}<|im_end|>
//! <|im_start|>assistant
//! <think>
//! {reasoning_content}
//! </think>
//!
//! {content}<tool_call>
//! {"name":"clock","arguments":{raw arguments}}
//! </tool_call><|im_end|>
//! <|im_start|>tool
//! {content}<|im_end|>
//! <|im_start|>assistant
//! ```
//!
//! The tools block is appended to the first message when it is a system message, else it
//! is a system message of its own. The model's reply is rendered exactly as an assistant
//! message in the history is, so a conversation that sends the reply back reuses it from
//! the slot's cache.

use serde_json::Value;

/// The start of a message, before the role.
pub const MESSAGE_START: &str = "<|im_start|>";
/// The end of a message.
pub const MESSAGE_END: &str = "<|im_end|>\n";

/// The part of the Jinja templates that renders the messages and the generation prompt.
macro_rules! messages_template {
    ($skip_first_system:literal) => {
        concat!(
            "{%- for message in messages %}",
            $skip_first_system,
            "{{- '<|im_start|>' + message.role + '\\n' }}\
{%- if message.reasoning_content %}{{- '<think>\\n' + message.reasoning_content + '\\n</think>\\n\\n' }}{%- endif %}\
{{- message.content or '' }}\
{%- for tc in message.tool_calls or [] %}{{- '<tool_call>\\n{\"name\":' + tc.function.name | tojson + ',\"arguments\":' + tc.function.arguments + '}\\n</tool_call>' }}{%- endfor %}\
{{- '<|im_end|>\\n' }}{%- endif %}{%- endfor %}\
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
        )
    };
}

/// The Jinja chat template reported by `/props` (describes what [`render_prompt`] does).
pub const CHAT_TEMPLATE: &str = concat!(
    "{%- if tools %}{{- '<|im_start|>system\\n' }}\
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}\
{{- '# Tools\\n<tools>' }}{%- for tool in tools %}{{- '\\n' + tool | tojson }}{%- endfor %}\
{{- '\\n</tools><|im_end|>\\n' }}{%- endif %}",
    messages_template!("{%- if not (tools and loop.first and message.role == 'system') %}")
);

/// The chat template reported by `/props` when the server runs without tool support
/// ([`crate::Options::tool_template`] off): the same without the tools block.
pub const CHAT_TEMPLATE_WITHOUT_TOOLS: &str = messages_template!("{%- if true %}");

/// One message of the conversation, as far as the template uses it.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Message {
    /// `system`, `user`, `assistant`, `tool`, ...
    pub role: String,
    /// The text content (text parts joined; empty when absent or null).
    pub content: String,
    /// The assistant's `reasoning_content`, when sent back.
    pub reasoning: Option<String>,
    /// The assistant's tool calls.
    pub tool_calls: Vec<ToolCallText>,
}

/// A tool call as text: the function name and its raw arguments.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallText {
    /// The function name.
    pub name: String,
    /// The arguments, as the raw JSON text.
    pub arguments: String,
}

/// One piece of an assistant message body: what kind of text it is and the text.
#[derive(Debug, Clone, PartialEq)]
pub enum Piece {
    /// Template markup (never shown to the client as such).
    Markup(String),
    /// Reasoning text.
    Reasoning(String),
    /// Content text.
    Content(String),
    /// The markup that opens the tool call with this index (up to its arguments).
    CallStart(usize, String),
    /// The raw arguments of the tool call with this index.
    Arguments(usize, String),
    /// The markup that closes the tool call with this index.
    CallEnd(usize, String),
}

impl Piece {
    /// The text of the piece.
    pub fn text(&self) -> &str {
        match self {
            Piece::Markup(t)
            | Piece::Reasoning(t)
            | Piece::Content(t)
            | Piece::CallStart(_, t)
            | Piece::Arguments(_, t)
            | Piece::CallEnd(_, t) => t,
        }
    }
}

/// The body of an assistant message (without the role header and the end marker), in pieces.
///
/// Every boundary between pieces has a non-alphanumeric character on at least one side, so
/// tokenising the pieces one by one gives the tokens of the whole body.
pub fn assistant_pieces(reasoning: &str, content: &str, calls: &[ToolCallText]) -> Vec<Piece> {
    let mut pieces = Vec::new();
    if !reasoning.is_empty() {
        pieces.push(Piece::Markup("<think>\n".into()));
        pieces.push(Piece::Reasoning(reasoning.into()));
        pieces.push(Piece::Markup("\n</think>\n\n".into()));
    }
    if !content.is_empty() {
        pieces.push(Piece::Content(content.into()));
    }
    for (i, call) in calls.iter().enumerate() {
        let name = Value::String(call.name.clone()).to_string();
        pieces.push(Piece::CallStart(
            i,
            format!("<tool_call>\n{{\"name\":{name},\"arguments\":"),
        ));
        if !call.arguments.is_empty() {
            pieces.push(Piece::Arguments(i, call.arguments.clone()));
        }
        pieces.push(Piece::CallEnd(i, "}\n</tool_call>".into()));
    }
    pieces
}

/// The JSON text of a tool call, as a model writes it (used as content when the request
/// had no tools): `{"name":"clock","arguments":{}}`.
pub fn tool_call_json_text(call: &ToolCallText) -> String {
    let name = Value::String(call.name.clone()).to_string();
    format!("{{\"name\":{name},\"arguments\":{}}}", call.arguments)
}

fn push_message(out: &mut String, role: &str, body: &str) {
    out.push_str(MESSAGE_START);
    out.push_str(role);
    out.push('\n');
    out.push_str(body);
    out.push_str(MESSAGE_END);
}

/// Renders the conversation and the tools into the prompt, ending with the generation
/// prompt `<|im_start|>assistant\n`.
pub fn render_prompt(messages: &[Message], tools: &[Value]) -> String {
    let mut out = String::new();
    let mut rest = messages;
    if !tools.is_empty() {
        let mut system = String::new();
        if let Some((first, tail)) = messages.split_first().filter(|(m, _)| m.role == "system") {
            system.push_str(&first.content);
            system.push_str("\n\n");
            rest = tail;
        }
        system.push_str("# Tools\n<tools>");
        for tool in tools {
            system.push('\n');
            system.push_str(&tool.to_string());
        }
        system.push_str("\n</tools>");
        push_message(&mut out, "system", &system);
    }
    for message in rest {
        let body: String = assistant_pieces(
            message.reasoning.as_deref().unwrap_or(""),
            &message.content,
            &message.tool_calls,
        )
        .iter()
        .map(Piece::text)
        .collect();
        push_message(&mut out, &message.role, &body);
    }
    out.push_str(MESSAGE_START);
    out.push_str("assistant\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn msg(role: &str, content: &str) -> Message {
        Message {
            role: role.into(),
            content: content.into(),
            ..Message::default()
        }
    }

    #[test]
    fn renders_chatml_with_tools() {
        let tools = [json!({"type":"function","function":{"name":"clock"}})];
        let prompt = render_prompt(&[msg("system", "be brief"), msg("user", "hi")], &tools);
        assert_eq!(
            prompt,
            "<|im_start|>system\nbe brief\n\n# Tools\n<tools>\n\
             {\"function\":{\"name\":\"clock\"},\"type\":\"function\"}\n</tools><|im_end|>\n\
             <|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
        );
    }

    #[test]
    fn renders_assistant_tool_calls() {
        let call = ToolCallText {
            name: "clock".into(),
            arguments: "{}".into(),
        };
        let m = Message {
            role: "assistant".into(),
            tool_calls: vec![call.clone()],
            ..Message::default()
        };
        let prompt = render_prompt(&[m], &[]);
        assert!(prompt.contains(&format!(
            "<tool_call>\n{}\n</tool_call>",
            tool_call_json_text(&call)
        )));
    }
}
