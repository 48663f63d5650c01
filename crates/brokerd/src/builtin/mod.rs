//! The tools brokerd runs itself: `clock` and `echo` here, the file tools in [`files`],
//! `http_fetch` in [`http_fetch`], `exec` in [`exec`] (only with the walls of a successful
//! sandbox probe, so not in [`all`]: see [`crate::ToolSet::with_builtins_and_sandbox`]).
//!
//! `clock` and `echo` have the same names, descriptions and schemas as loopd's seed tools
//! (`loopd::tools::clock_schema`, `echo_schema`), so a model sees no change when brokerd takes
//! them over.

pub mod exec;
pub mod files;
pub mod http_fetch;

use crate::config::HttpFetchSettings;
use crate::tool::{CallContext, CallFuture, Tool, ToolError, ToolOutput};
use proto::ToolSchema;
use serde_json::{Value, json};
use std::sync::Arc;

/// The name of [`Clock`].
pub const CLOCK: &str = "clock";
/// The name of [`Echo`].
pub const ECHO: &str = "echo";

/// Every built-in tool, for [`crate::ToolSet::with_builtins`]: `clock`, `echo`, `read_file`,
/// `list_dir`, `write_file`, `http_fetch` (with no `[http_fetch]` settings).
pub fn all() -> Vec<Arc<dyn Tool>> {
    all_with(&HttpFetchSettings::default())
}

/// [`all`], `http_fetch` with `http_fetch_settings` (`[http_fetch]`).
pub fn all_with(http_fetch_settings: &HttpFetchSettings) -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(Clock),
        Arc::new(Echo),
        Arc::new(files::ReadFile),
        Arc::new(files::ListDir),
        Arc::new(files::WriteFile),
        Arc::new(http_fetch::HttpFetch::new().with_settings(http_fetch_settings)),
    ]
}

/// `clock`: the current time as RFC 3339 in UTC. Takes no arguments (ignores any).
#[derive(Debug, Clone, Copy, Default)]
pub struct Clock;

impl Tool for Clock {
    fn schema(&self) -> ToolSchema {
        ToolSchema {
            name: CLOCK.to_string(),
            description: "The current date and time, as RFC 3339 in UTC.".to_string(),
            parameters: json!({"type": "object", "properties": {}}),
        }
    }

    fn call<'a>(&'a self, _arguments: &'a Value, _ctx: CallContext<'a>) -> CallFuture<'a> {
        Box::pin(async {
            Ok(ToolOutput {
                content: bxcore::Timestamp::now().to_rfc3339(),
                truncated: false,
            })
        })
    }
}

/// `echo`: returns its `text` argument unchanged (a test tool).
#[derive(Debug, Clone, Copy, Default)]
pub struct Echo;

impl Tool for Echo {
    fn schema(&self) -> ToolSchema {
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

    fn check(&self, arguments: &Value, _ctx: CallContext<'_>) -> Result<(), ToolError> {
        echo_text(arguments).map(|_| ())
    }

    fn call<'a>(&'a self, arguments: &'a Value, _ctx: CallContext<'a>) -> CallFuture<'a> {
        Box::pin(async move {
            echo_text(arguments).map(|text| ToolOutput {
                content: text.to_string(),
                truncated: false,
            })
        })
    }
}

/// Echo's `text` argument.
fn echo_text(arguments: &Value) -> Result<&str, ToolError> {
    match arguments.get("text") {
        Some(Value::String(text)) => Ok(text),
        Some(_) => Err(ToolError::InvalidArguments(
            "\"text\" must be a string".to_string(),
        )),
        None => Err(ToolError::InvalidArguments(
            "\"text\" is required".to_string(),
        )),
    }
}
