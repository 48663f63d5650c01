//! The broker: decides each request ([`crate::policy::decide`], the tool's own check, then
//! the approval step [`crate::policy::admit`]), audits the decision before anything runs,
//! runs the tool under its time limit, caps and labels the result (and a tool's failure
//! alike), and audits the outcome before it answers. A call the owner must decide is answered
//! with an approval to decide (`ToolResponse::Ask`) and does not run.
//!
//! Every text an answer carries goes through the leak guard first ([`redact`]): a secret's
//! value in a result, a failure or a denial is `{secret:NAME}` in the audit log and for the
//! model, and the line names the secrets replaced (`redacted`). A call that would carry a
//! secret out is denied `leak`, its line naming the secret (`leak`). [`run`] runs the tool.

mod redact;
mod run;

pub use redact::AUTHENTICATED_NOTE;

use crate::audit::{ApprovalScope, AuditEvent, AuditLog, AuditRecord};
use crate::builtin::exec::Sandbox;
use crate::checkpoints::{Checkpoints, Recorder};
use crate::config::{BUILTIN_TOOLS, Config, EXEC_TOOL, Grant, Limits};
use crate::metrics::{self, Metrics};
use crate::policy::{
    Admission, ApprovalTable, CallCounters, Decision, GlobError, Grants, admit, decide,
};
use crate::result::refused;
use crate::secrets::SecretStore;
use crate::tool::{CallContext, Tool, ToolError};
use crate::toolset::{PROBE_WAIT_MS, ToolSet};
use bxcore::{ApprovalId, DenyReason, SessionId};
use proto::{Catalogue, ToolRequest, ToolResponse};
use redact::Redaction;
use serde_json::Value;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// What a broker answers with when its audit log cannot be written: the call's result is
/// withheld, because an unrecorded result must not reach the model.
pub const AUDIT_FAILED_MESSAGE: &str =
    "brokerd cannot write its audit log, so it withholds the result; see brokerd's log";

/// Runs tool calls under grants, labels and limits.
#[derive(Debug)]
pub struct Broker {
    tools: ToolSet,
    grants: Grants,
    limits: Limits,
    counters: Mutex<CallCounters>,
    /// The approvals this broker minted (kept in the state dir by the daemon, so a restart
    /// keeps the pending ones: [`Broker::with_approvals`]). Locked after `counters` when both
    /// are held.
    approvals: Mutex<ApprovalTable>,
    audit: Arc<AuditLog>,
    metrics: Arc<Metrics>,
    /// The tools the config names (the built-ins and every grant's tool): the only names the
    /// metrics label a call with, since the tool set also holds what MCP servers listed.
    named_tools: HashSet<String>,
    /// The secrets grants attach, and the guard over them (replaced whole on SIGHUP).
    secrets: SecretStore,
    /// Where writes are recorded for undo; none: not recorded.
    checkpoints: Option<Arc<Checkpoints>>,
}

/// Whether a request's tool ran: an allowed call's duration is observed, from the request to
/// its result.
enum Ran {
    No,
    Yes,
}

impl Broker {
    /// A broker for `config`'s grants and limits over `tools`, auditing to `audit`.
    pub fn new(config: &Config, tools: ToolSet, audit: Arc<AuditLog>) -> Result<Broker, GlobError> {
        let grants = Grants::new(&config.grants)?;
        for grant in grants.iter() {
            if !tools.contains(&grant.tool) {
                tracing::warn!(tool = %grant.tool, "a grant names a tool brokerd does not offer now; its calls are denied as unknown");
            }
        }
        let named_tools = BUILTIN_TOOLS
            .iter()
            .map(|tool| (*tool).to_owned())
            .chain(config.grants.iter().map(|grant| grant.tool.clone()))
            .collect();
        Ok(Broker {
            tools,
            grants,
            limits: config.limits.clone(),
            counters: Mutex::new(CallCounters::new()),
            approvals: Mutex::new(ApprovalTable::new(&config.approvals)),
            audit,
            metrics: Arc::new(Metrics::new()),
            named_tools,
            secrets: SecretStore::default(),
            checkpoints: None,
        })
    }

    /// This broker recording what its calls write in `checkpoints` (the daemon's, under its
    /// state dir).
    pub fn with_checkpoints(self, checkpoints: Arc<Checkpoints>) -> Broker {
        Broker {
            checkpoints: Some(checkpoints),
            ..self
        }
    }

    /// The checkpoint store, when writes are recorded.
    pub fn checkpoints(&self) -> Option<&Arc<Checkpoints>> {
        self.checkpoints.as_ref()
    }

    /// This broker holding `secrets` (`[[secrets]]`, loaded by the daemon).
    pub fn with_secrets(self, secrets: SecretStore) -> Broker {
        Broker { secrets, ..self }
    }

    /// This broker minting and checking approvals in `table` (the daemon's keeps its pending
    /// approvals in the state dir: `ApprovalTable::kept_in`).
    pub fn with_approvals(self, table: ApprovalTable) -> Broker {
        Broker {
            approvals: Mutex::new(table),
            ..self
        }
    }

    /// The secrets this broker holds.
    pub fn secrets(&self) -> &SecretStore {
        &self.secrets
    }

    /// The metrics this broker counts its calls in (`GET /metrics`).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// The tools this broker runs.
    pub fn tools(&self) -> &ToolSet {
        &self.tools
    }

    /// The audit log.
    pub fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// Waits (at most `toolset::PROBE_WAIT_MS`) for a running sandbox probe when a grant lets
    /// `session` call `exec`, so that its catalogue says whether `exec` is there.
    pub async fn probed_for(&self, session: &SessionId) {
        if self.grants.allows(EXEC_TOOL, session) {
            self.tools.probed().await;
        }
    }

    /// The tools some grant lets `session` call, sorted by name, their texts redacted; a tool
    /// that carries a credential itself ([`Tool::authenticated`]), or that a grant for
    /// `session` attaches one to ([`Grant::injects_secret`]), says so ([`AUTHENTICATED_NOTE`]).
    pub fn catalogue(&self, session: &SessionId) -> Catalogue {
        let secrets = self.secrets.current();
        let tools = self
            .tools
            .catalogue_tools()
            .into_iter()
            .filter(|tool| self.grants.allows(&tool.schema.name, session))
            .map(|tool| {
                let name = tool.schema.name.as_str();
                let authenticated = self
                    .grants
                    .matching(name, session)
                    .any(|grant| grant.injects_secret())
                    || self
                        .tools
                        .get(name)
                        .is_some_and(|tool| tool.authenticated());
                redact::catalogue_entry(tool, &secrets, authenticated)
            })
            .collect();
        Catalogue {
            session: session.clone(),
            tools,
        }
    }

    /// Decides `request`, audits the decision, runs the tool when allowed, audits the outcome,
    /// and answers. A decision that cannot be audited stops the call before it runs; an outcome
    /// that cannot be audited is withheld ([`AUDIT_FAILED_MESSAGE`]). Counts the request in
    /// [`Broker::metrics`], under its tool's name only when the config names the tool.
    pub async fn call(&self, request: &ToolRequest) -> ToolResponse {
        let started = Instant::now();
        if request.tool == EXEC_TOOL {
            // A call that comes while the sandbox is probed waits for it (bounded); past the
            // bound `exec` is still unknown, and the call is denied without running.
            self.tools.probed().await;
        }
        let tool = self.tools.get(&request.tool);
        let named = self.named_tools.contains(&request.tool);
        let label = self.metrics.tool_label(&request.tool, named);
        let (response, ran) = self.decide_and_run(request, tool, started).await;
        match ran {
            Ran::Yes => {
                let took = started.elapsed();
                self.metrics
                    .decided(label, metrics::Decision::Allowed, Some(took));
            }
            Ran::No => {
                let decision = metrics::Decision::before_running(&response);
                self.metrics.decided(label, decision, None);
            }
        }
        response
    }

    /// [`Broker::call`] but the counting: the answer, and whether the tool ran.
    async fn decide_and_run(
        &self,
        request: &ToolRequest,
        tool: Option<Arc<dyn Tool>>,
        started: Instant,
    ) -> (ToolResponse, Ran) {
        // One set of secrets for the whole call: what the tool gets, and what its answer is
        // redacted with (and the set now, if a reload replaces it meanwhile).
        let secrets = self.secrets.current();
        let mut redaction = Redaction::new(&secrets, &self.secrets);
        let decision = {
            let counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
            decide(request, &self.grants, tool.is_some(), &counters)
        };
        let (grant, arguments, tool) = match (decision, tool) {
            (Decision::Allow { grant, arguments }, Some(tool)) => (grant, arguments, tool),
            (Decision::Deny { reason, detail }, _) => {
                let detail = self.unavailable_detail(request, reason).unwrap_or(detail);
                let response = ToolResponse::denied(reason, Some(detail.clone()));
                return (
                    self.refuse(request, response, Some(detail), started, &mut redaction),
                    Ran::No,
                );
            }
            // decide allows only known tools.
            (Decision::Allow { .. }, None) => {
                let message = format!("no tool named {:?}", request.tool);
                let response = ToolResponse::failed(message.clone());
                return (
                    self.refuse(request, response, Some(message), started, &mut redaction),
                    Ran::No,
                );
            }
        };
        let ctx = CallContext {
            grant: &grant,
            result_cap_bytes: self.limits.result_cap_bytes,
            timeout_ms: self.limits.call_timeout_ms,
            secrets: &secrets,
            record: None,
        };
        if let Err(error) = tool.check(&arguments, ctx) {
            // Refused on its arguments and grant alone: the tool never ran.
            let leak = leaked(&error);
            let response = refused(error);
            let line =
                AuditRecord::of_response(AuditEvent::Decided, request, &response, None, started)
                    .with_facts(tool.audit_facts(&arguments, None));
            let line = with_leak(line, leak);
            return (
                self.answer(request, line, response, &mut redaction),
                Ran::No,
            );
        }
        let approval = match self.admit(request, &arguments, &grant) {
            Admission::Run { approval } => approval,
            Admission::Ask(ask) => {
                // What the owner is asked about is on the line as the run's would be (exec's
                // argv digest), never the arguments themselves.
                let detail = ask.reason.clone();
                let response = ToolResponse::Ask { approval: ask };
                let line = AuditRecord::of_response(
                    AuditEvent::Decided,
                    request,
                    &response,
                    Some(detail),
                    started,
                )
                .with_facts(tool.audit_facts(&arguments, None));
                return (
                    self.answer(request, line, response, &mut redaction),
                    Ran::No,
                );
            }
            Admission::Deny {
                reason,
                detail,
                approval,
            } => {
                let response = ToolResponse::denied(reason, Some(detail.clone()));
                let line = AuditRecord::of_response(
                    AuditEvent::Decided,
                    request,
                    &response,
                    Some(detail),
                    started,
                );
                let line = match approval {
                    Some(id) => line.with_approval(id, None),
                    None => line,
                };
                return (
                    self.answer(request, line, response, &mut redaction),
                    Ran::No,
                );
            }
            Admission::Fail { message } => {
                tracing::error!(session = %request.session, call = %request.call, tool = %request.tool, "{message}");
                let response = ToolResponse::failed(message.clone());
                return (
                    self.refuse(request, response, Some(message), started, &mut redaction),
                    Ran::No,
                );
            }
        };
        let decided = with_approval(
            AuditRecord::decided(request, started).with_facts(tool.audit_facts(&arguments, None)),
            &approval,
        );
        if let Err(e) = self.audit.append(&decided) {
            tracing::error!(session = %request.session, call = %request.call, tool = %request.tool, "{e}; the call does not run");
            return (ToolResponse::failed(AUDIT_FAILED_MESSAGE), Ran::No);
        }
        // A write is recorded under the turn it counts for: a subagent's under its parent's.
        let counted = request.counted_turn();
        let recorder = self.checkpoints.as_ref().map(|store| Recorder {
            store: Arc::clone(store),
            session: counted.session,
            turn: counted.turn,
            call: request.call.0,
        });
        let ran = self
            .run(
                Arc::clone(&tool),
                grant,
                arguments.clone(),
                (secrets, recorder),
                &mut redaction,
            )
            .await;
        let content = match &ran.response {
            ToolResponse::Result { content, .. } => Some(content.as_str()),
            _ => None,
        };
        let facts = tool.audit_facts(&arguments, content);
        let line = AuditRecord::of_response(
            AuditEvent::Finished,
            request,
            &ran.response,
            ran.own_detail,
            started,
        )
        .with_facts(facts);
        let line = with_leak(with_approval(line, &approval), ran.leak);
        let answer = self.answer(request, line, ran.response, &mut redaction);
        (answer, Ran::Yes)
    }

    /// The approval step for a call allowed under `grant` that passed its tool's check, with
    /// the `arguments` that were checked.
    fn admit(&self, request: &ToolRequest, arguments: &Value, grant: &Grant) -> Admission {
        let mut counters = self.counters.lock().unwrap_or_else(PoisonError::into_inner);
        let mut approvals = self
            .approvals
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        admit(
            request,
            arguments,
            grant,
            &mut approvals,
            &mut counters,
            Instant::now(),
        )
    }

    /// The walls `exec` runs in, for a status line: `bubblewrap + Landlock v4`, or
    /// `unavailable: REASON`.
    pub fn exec_status(&self) -> String {
        self.tools.sandbox().describe()
    }

    /// For a call of `exec` denied as unknown because the sandbox cannot be made: the
    /// probe's reason, so the model and the audit log say why.
    fn unavailable_detail(&self, request: &ToolRequest, reason: DenyReason) -> Option<String> {
        if reason != DenyReason::UnknownTool || request.tool != EXEC_TOOL {
            return None;
        }
        match self.tools.sandbox() {
            Sandbox::Ready(_) => None,
            Sandbox::Unavailable(why) => Some(format!(
                "exec is unavailable on this box, so nothing ran: the sandbox cannot be made ({why})"
            )),
            Sandbox::Probing => Some(format!(
                "exec is not ready yet, so nothing ran: brokerd is still probing its sandbox \
                 (waited {PROBE_WAIT_MS} ms); call it again later"
            )),
        }
    }

    /// Answers `response`, which ends `request` before any tool ran (a refusal, an ask, a
    /// failure of brokerd's own), after its `decided` line with brokerd's `detail`.
    fn refuse(
        &self,
        request: &ToolRequest,
        response: ToolResponse,
        detail: Option<String>,
        started: Instant,
        redaction: &mut Redaction,
    ) -> ToolResponse {
        let line =
            AuditRecord::of_response(AuditEvent::Decided, request, &response, detail, started);
        self.answer(request, line, response, redaction)
    }

    /// Redacts `response` and `line`'s detail (with whatever `redaction` replaced before:
    /// a result is redacted before it is capped), names the secrets replaced on the line,
    /// writes it and answers `response`; withholds the response when the line cannot be
    /// written, because an unrecorded result must not reach the model.
    fn answer(
        &self,
        request: &ToolRequest,
        line: AuditRecord,
        response: ToolResponse,
        redaction: &mut Redaction,
    ) -> ToolResponse {
        let response = redaction.response(response);
        let detail = line.detail.clone().map(|detail| redaction.text(detail));
        let result_bytes = match &response {
            ToolResponse::Result { content, .. } => content.len() as u64,
            _ => line.result_bytes,
        };
        let line = AuditRecord {
            detail,
            result_bytes,
            ..line
        }
        .with_redacted(redaction.names());
        let line = &line;
        if let Err(e) = self.audit.append(line) {
            tracing::error!(session = %request.session, call = %request.call, tool = %request.tool, "{e}");
            return ToolResponse::failed(AUDIT_FAILED_MESSAGE);
        }
        tracing::debug!(session = %request.session, call = %request.call, tool = %request.tool, event = ?line.event, decision = ?line.decision, reason = ?line.reason, us = line.duration_us, "tool call");
        response
    }
}

/// `line` with the approval a call ran under, when it ran under one.
fn with_approval(line: AuditRecord, approval: &Option<(ApprovalId, ApprovalScope)>) -> AuditRecord {
    match approval {
        Some((id, scope)) => line.with_approval(id.clone(), Some(*scope)),
        None => line,
    }
}

/// The secret a [`ToolError::Leak`] names.
fn leaked(error: &ToolError) -> Option<String> {
    match error {
        ToolError::Leak { secret, .. } => Some(secret.clone()),
        _ => None,
    }
}

/// `line` naming the secret `leak`, when the call was denied for carrying one out.
fn with_leak(line: AuditRecord, leak: Option<String>) -> AuditRecord {
    match leak {
        Some(secret) => line.with_leak(&secret),
        None => line,
    }
}
