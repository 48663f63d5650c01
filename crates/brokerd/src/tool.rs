//! What a tool is to brokerd: a schema and a call. Built-in tools and MCP servers' tools
//! implement [`Tool`]; the policy decides whether a call may run before it ever gets here.

use crate::audit::AuditFacts;
use crate::config::Grant;
use crate::secrets::Secrets;
use bxcore::Labels;
use proto::ToolSchema;
use std::future::Future;
use std::pin::Pin;

/// What a tool gave back, before brokerd labels it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolOutput {
    /// The result text (already cut to the cap by the tool when it streams a lot).
    pub content: String,
    /// Whether the tool cut it.
    pub truncated: bool,
}

/// Why a tool call did not give a result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The arguments do not fit the schema or the tool's rules; says which and why.
    #[error("{0}")]
    InvalidArguments(String),
    /// A path outside the grant's roots (after resolving symlinks and `..`).
    #[error("{0}")]
    PathNotAllowed(String),
    /// A host the grant does not allow (also for each redirect).
    #[error("{0}")]
    HostNotAllowed(String),
    /// The tool ran and failed, or ran past its time.
    #[error("{0}")]
    Failed(String),
    /// The request (or a later hop of it: a redirect) would carry a secret where no grant
    /// attaches it; nothing was sent.
    #[error("{detail}")]
    Leak {
        /// The secret's name (never its value), for the audit line.
        secret: String,
        /// brokerd's words on where it was found, naming the secret but quoting nothing.
        detail: String,
    },
}

impl ToolError {
    /// A [`ToolError::Leak`] of `secret` found in `place` ("the URL", "redirect 1's URL",
    /// "header \"X-Api\"", "the body", "argv", "stdin", "the arguments").
    pub fn leak(secret: &str, place: &str) -> ToolError {
        ToolError::Leak {
            secret: secret.to_string(),
            detail: format!("{place} would carry the secret {secret:?}; nothing was sent"),
        }
    }
}

/// What a call may use besides its arguments.
#[derive(Debug, Clone, Copy)]
pub struct CallContext<'a> {
    /// The grant that allowed the call: its `paths` and `hosts` limit the arguments.
    pub grant: &'a Grant,
    /// The most bytes of result to keep.
    pub result_cap_bytes: usize,
    /// The longest the call may take, in milliseconds.
    pub timeout_ms: u64,
    /// The secrets brokerd holds now: what the grant's placeholders are filled from, and what
    /// a hop the tool makes on its own (a redirect) is checked against.
    pub secrets: &'a Secrets,
    /// Where a tool that changes files records what it changed (`write_file`); none: not
    /// recorded (checkpoints off, or a test of the tool alone).
    pub record: Option<&'a crate::checkpoints::Recorder>,
}

/// The future a tool call returns.
pub type CallFuture<'a> = Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send + 'a>>;

/// A tool brokerd can run.
pub trait Tool: Send + Sync {
    /// How the model sees it.
    fn schema(&self) -> ToolSchema;
    /// The label of the schema's text (name, description, parameter descriptions): public and
    /// trusted for brokerd's own tools; whatever the configuration says of the author of an
    /// external tool's text (an MCP server's).
    fn description_labels(&self) -> Labels {
        Labels::PUBLIC
    }
    /// Whether the tool itself carries a credential brokerd attached (an MCP server started
    /// with a `{secret:NAME}` in its `env`): its catalogue entry then says "authenticated as
    /// configured". A grant that attaches one is known from the grant. Default: no.
    fn authenticated(&self) -> bool {
        false
    }
    /// Checks a call from its arguments and grant alone, before it runs: nothing outside them
    /// is read or reached. A refusal here is made of nothing the tool read, so the broker
    /// answers it unlabelled, like its own policy's (a mistyped host must not taint a session
    /// the way a page's text does); `call` may assume it passed. Default: nothing to check.
    fn check(&self, arguments: &serde_json::Value, ctx: CallContext<'_>) -> Result<(), ToolError> {
        let _ = (arguments, ctx);
        Ok(())
    }
    /// What this tool adds to the audit lines of a call with `arguments` whose result text
    /// was `content` (`None` before it runs, or when it gave none): facts, never the
    /// arguments. Default: nothing.
    fn audit_facts(&self, arguments: &serde_json::Value, content: Option<&str>) -> AuditFacts {
        let _ = (arguments, content);
        AuditFacts::default()
    }
    /// Runs it with `arguments` (a JSON value, checked by the tool) within `ctx`.
    fn call<'a>(&'a self, arguments: &'a serde_json::Value, ctx: CallContext<'a>)
    -> CallFuture<'a>;
}
