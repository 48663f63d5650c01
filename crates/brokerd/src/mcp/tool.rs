//! One MCP server's tool as a brokerd [`Tool`]: its schema under `<prefix>_<tool>`, and calls
//! turned into `tools/call`, their results into text.

use super::redact::{self, Redactor};
use super::server::Server;
use super::{MAX_DESCRIPTION_BYTES, MAX_TOOL_NAME_BYTES, MAX_TOOLS_PER_SERVER};
use crate::config::McpServer;
use crate::result::cap_result as cap;
use crate::tool::{CallContext, CallFuture, Tool, ToolError, ToolOutput};
use proto::ToolSchema;
use rmcp::ServiceError;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ContentBlock, ErrorCode, ResourceContents,
};
use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

/// One listed tool: its name on the server and how brokerd offers it.
#[derive(Debug, Clone)]
pub(super) struct ToolSpec {
    /// The name the server knows it by.
    pub(super) mcp_name: String,
    /// `<prefix>_<tool>`, the server's description (capped) and input schema.
    pub(super) schema: ToolSchema,
}

impl ToolSpec {
    /// The tools `config`'s server listed that brokerd can offer: valid, unique names, at most
    /// [`MAX_TOOLS_PER_SERVER`]. The rest are logged (their names redacted with `redactor`:
    /// the server chose them) and left out.
    pub(super) fn from_listed(
        config: &McpServer,
        listed: Vec<rmcp::model::Tool>,
        redactor: &Redactor,
    ) -> Vec<ToolSpec> {
        let server = &config.name;
        let mut seen = BTreeSet::new();
        let mut specs = Vec::new();
        for tool in listed {
            let name = format!("{}_{}", config.prefix, tool.name);
            if !valid_name(&tool.name) || name.len() > MAX_TOOL_NAME_BYTES {
                let tool = redact::name(redactor, &tool.name);
                tracing::warn!(%server, %tool,
                    "MCP tool name is not [A-Za-z0-9_-] or is too long; left out");
                continue;
            }
            if !seen.insert(name.clone()) {
                let tool = redact::name(redactor, &tool.name);
                tracing::warn!(%server, %tool, "MCP tool listed twice; left out");
                continue;
            }
            if specs.len() == MAX_TOOLS_PER_SERVER {
                tracing::warn!(%server, limit = MAX_TOOLS_PER_SERVER,
                    "MCP server offers too many tools; the rest are left out");
                break;
            }
            let description = tool
                .description
                .map(|d| d.into_owned())
                .or(tool.title)
                .unwrap_or_default();
            let (description, _) = cap(description, MAX_DESCRIPTION_BYTES);
            specs.push(ToolSpec {
                mcp_name: tool.name.into_owned(),
                schema: ToolSchema {
                    name,
                    description,
                    parameters: serde_json::Value::Object((*tool.input_schema).clone()),
                },
            });
        }
        specs
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// A tool of an MCP server; calls go to whichever connection the server has at the time.
pub(super) struct McpTool {
    server: Arc<Server>,
    spec: ToolSpec,
}

impl McpTool {
    pub(super) fn new(server: Arc<Server>, spec: ToolSpec) -> McpTool {
        McpTool { server, spec }
    }

    async fn run(
        &self,
        arguments: &serde_json::Value,
        ctx: CallContext<'_>,
    ) -> Result<ToolOutput, ToolError> {
        let name = &self.spec.schema.name;
        // Checked again here, so that no path to the server skips the guard.
        no_leak(arguments, ctx)?;
        let mut params = CallToolRequestParams::new(self.spec.mcp_name.clone());
        match arguments {
            serde_json::Value::Object(map) => params = params.with_arguments(map.clone()),
            serde_json::Value::Null => {}
            _ => {
                return Err(ToolError::InvalidArguments(format!(
                    "{name}: arguments must be a JSON object"
                )));
            }
        }
        let peer = self.server.peer()?;
        let limit = Duration::from_millis(ctx.timeout_ms);
        // Dropping the call at the timeout sends the server `notifications/cancelled`.
        let result = match tokio::time::timeout(limit, peer.call_tool(params)).await {
            Ok(Ok(result)) => result,
            Ok(Err(error)) => return Err(self.call_error(error, ctx.result_cap_bytes)),
            Err(_) => {
                return Err(ToolError::Failed(format!(
                    "{name} did not answer within {} ms",
                    ctx.timeout_ms
                )));
            }
        };
        let failed = result.is_error == Some(true);
        // Redacted before the cap, which then cannot cut a value in half and keep its start.
        let rendered = render(result);
        let rendered = ctx.secrets.guard().redact(&rendered).text.into_owned();
        let (content, truncated) = cap(rendered, ctx.result_cap_bytes);
        if failed {
            Err(ToolError::Failed(content))
        } else {
            Ok(ToolOutput { content, truncated })
        }
    }

    fn call_error(&self, error: ServiceError, cap_bytes: usize) -> ToolError {
        let name = &self.spec.schema.name;
        match error {
            ServiceError::McpError(data) if data.code == ErrorCode::INVALID_PARAMS => {
                ToolError::InvalidArguments(cap(format!("{name}: {}", data.message), cap_bytes).0)
            }
            ServiceError::McpError(data) => {
                ToolError::Failed(cap(format!("{name}: {}", data.message), cap_bytes).0)
            }
            ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
                ToolError::Failed(format!(
                    "MCP server {:?} stopped during the call to {name}; it is restarting",
                    self.server.name()
                ))
            }
            other => ToolError::Failed(format!("{name}: {other}")),
        }
    }
}

impl Tool for McpTool {
    fn schema(&self) -> ToolSchema {
        self.spec.schema.clone()
    }

    fn description_labels(&self) -> bxcore::Labels {
        self.server.description_labels()
    }

    fn authenticated(&self) -> bool {
        self.server.authenticated()
    }

    fn check(&self, arguments: &serde_json::Value, ctx: CallContext<'_>) -> Result<(), ToolError> {
        no_leak(arguments, ctx)
    }

    fn call<'a>(
        &'a self,
        arguments: &'a serde_json::Value,
        ctx: CallContext<'a>,
    ) -> CallFuture<'a> {
        Box::pin(self.run(arguments, ctx))
    }
}

/// Denies a call whose arguments carry a secret anywhere (any string or key, in any listed
/// encoding): an MCP server can send what it is given anywhere.
fn no_leak(arguments: &serde_json::Value, ctx: CallContext<'_>) -> Result<(), ToolError> {
    match ctx.secrets.guard().find_in_json(arguments) {
        Some(secret) => Err(ToolError::leak(secret, "the arguments")),
        None => Ok(()),
    }
}

/// A tool result as text: text items as they are, others described, one per line; with no
/// content items, the structured content as JSON.
fn render(result: CallToolResult) -> String {
    if result.content.is_empty() {
        return result
            .structured_content
            .map(|v| v.to_string())
            .unwrap_or_default();
    }
    let parts: Vec<String> = result.content.into_iter().map(describe).collect();
    parts.join("\n")
}

fn describe(block: ContentBlock) -> String {
    match block {
        ContentBlock::Text(text) => text.text,
        ContentBlock::Image(image) => format!(
            "[image: {}, {} bytes]",
            image.mime_type,
            base64_len(&image.data)
        ),
        ContentBlock::Audio(audio) => format!(
            "[audio: {}, {} bytes]",
            audio.mime_type,
            base64_len(&audio.data)
        ),
        ContentBlock::Resource(embedded) => match embedded.resource {
            ResourceContents::TextResourceContents { uri, text, .. } => {
                format!("[resource: {uri}]\n{text}")
            }
            ResourceContents::BlobResourceContents {
                uri,
                mime_type,
                blob,
                ..
            } => format!(
                "[resource: {uri}, {}, {} bytes]",
                mime_type.as_deref().unwrap_or("application/octet-stream"),
                base64_len(&blob)
            ),
            _ => String::from("[resource]"),
        },
        ContentBlock::ResourceLink(link) => {
            format!("[resource link: {} ({})]", link.uri, link.name)
        }
        _ => String::from("[unsupported content]"),
    }
}

/// The number of bytes base64 `data` decodes to.
fn base64_len(data: &str) -> usize {
    let digits = data
        .bytes()
        .filter(|b| !b.is_ascii_whitespace() && *b != b'=')
        .count();
    digits / 4 * 3 + (digits % 4 * 3) / 4
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_lengths() {
        assert_eq!(base64_len(""), 0);
        assert_eq!(base64_len("QQ=="), 1);
        assert_eq!(base64_len("QUI="), 2);
        assert_eq!(base64_len("QUJD"), 3);
        assert_eq!(base64_len("QUJDRA"), 4);
    }

    #[test]
    fn names_are_checked() {
        assert!(valid_name("get-sum"));
        assert!(valid_name("echo_2"));
        assert!(!valid_name(""));
        assert!(!valid_name("a.b"));
        assert!(!valid_name("a b"));
    }
}
