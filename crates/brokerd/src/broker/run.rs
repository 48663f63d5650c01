//! Running an allowed call: on its own task, under the time limit, its output redacted,
//! capped and labelled by the grant.

use super::Broker;
use super::redact::Redaction;
use crate::checkpoints::Recorder;
use crate::config::Grant;
use crate::result::{from_error, grant_labels, labelled};
use crate::secrets::Secrets;
use crate::tool::{CallContext, Tool, ToolOutput};
use proto::ToolResponse;
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::task::AbortOnDropHandle;

/// What came of running a call.
pub(super) struct RunOutcome {
    /// The answer, its texts redacted, a result capped.
    pub(super) response: ToolResponse,
    /// brokerd's own words on a failure, when it wrote them (the audit line's `detail`).
    pub(super) own_detail: Option<String>,
    /// The secret a call the tool refused (`ToolError::Leak`) would have carried out.
    pub(super) leak: Option<String>,
}

impl Broker {
    /// Runs an allowed call on its own task (a panic in the tool fails the call, not brokerd),
    /// stopped at `limits.call_timeout_ms`, with `secrets` for the grant's placeholders and
    /// `recorder` where what it writes is recorded.
    pub(super) async fn run(
        &self,
        tool: Arc<dyn Tool>,
        grant: Arc<Grant>,
        arguments: Value,
        (secrets, recorder): (Arc<Secrets>, Option<Recorder>),
        redaction: &mut Redaction,
    ) -> RunOutcome {
        let cap_bytes = self.limits.result_cap_bytes;
        let timeout_ms = self.limits.call_timeout_ms;
        let task_grant = Arc::clone(&grant);
        // Aborted when dropped: at the time limit, or when the caller goes away.
        let task = AbortOnDropHandle::new(tokio::spawn(async move {
            let ctx = CallContext {
                grant: &task_grant,
                result_cap_bytes: cap_bytes,
                timeout_ms,
                secrets: &secrets,
                record: recorder.as_ref(),
            };
            tool.call(&arguments, ctx).await
        }));
        let answered = |response| RunOutcome {
            response,
            own_detail: None,
            leak: None,
        };
        match tokio::time::timeout(Duration::from_millis(timeout_ms), task).await {
            Ok(Ok(Ok(output))) => {
                // Redacted before it is capped: the cap then cannot cut a value in half and
                // keep its start, which no form of the value would match any more (it may
                // cut a `{secret:NAME}` in half, which says no more than the name). A cut
                // the tool made itself, reading no more than the cap, comes before brokerd
                // sees the text: for a result marked truncated the guard also takes the start
                // of a value left at its end (`http_fetch`, `read_file`); `exec` does so for
                // each capped stream, and an MCP tool redacts before it caps.
                let content = if output.truncated {
                    redaction.cut_text(output.content)
                } else {
                    redaction.text(output.content)
                };
                let output = ToolOutput {
                    content,
                    truncated: output.truncated,
                };
                answered(labelled(output, &grant, cap_bytes))
            }
            Ok(Ok(Err(error))) => RunOutcome {
                leak: super::leaked(&error),
                ..answered(from_error(error, &grant))
            },
            Ok(Err(join)) => {
                let message = if join.is_panic() {
                    format!("the tool {:?} crashed", grant.tool)
                } else {
                    format!("the tool {:?} was cancelled", grant.tool)
                };
                // A panic's message may quote what the tool held.
                let why = redaction.text(join.to_string());
                tracing::error!("{message}: {why}");
                failed(message, &grant)
            }
            Err(_) => failed(
                format!(
                    "the tool {:?} ran past its time limit of {timeout_ms} ms \
                     (limits.call_timeout_ms) and was stopped",
                    grant.tool
                ),
                &grant,
            ),
        }
    }
}

/// A failure of a call that reached its tool, in brokerd's words: labelled with the grant's
/// labels all the same, since the tool ran (and may have read something) before it failed.
fn failed(message: String, grant: &Grant) -> RunOutcome {
    RunOutcome {
        response: ToolResponse::Failed {
            message: message.clone(),
            labels: Some(grant_labels(grant)),
        },
        own_detail: Some(message),
        leak: None,
    }
}
