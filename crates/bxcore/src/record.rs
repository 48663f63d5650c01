//! The records of a session log: one JSON object a line, tagged by `type`.
//!
//! The log is append-only; these types are its on-disk format, so every variant refuses
//! fields it does not know rather than dropping them silently.

use crate::{
    ApprovalDecision, ApprovalId, CallId, DataClass, DenyReason, SessionId, TaskId, Timestamp,
};
use serde::{Deserialize, Serialize};

/// The format version written in every log's header. A reader accepts this version and any
/// older one it knows how to read. Version 2 keeps each epoch's baseline in the log
/// ([`LogRecord::Baseline`]); version 1 kept it in a file beside the log.
pub const LOG_FORMAT_VERSION: u32 = 2;

/// One tool call as the model asked for it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCall {
    /// The id the model (llama-server) gave the call; no fixed format.
    pub id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model wrote them: JSON text, not necessarily valid.
    pub arguments: String,
}

/// Token counts of one model call, as llama-server reports them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Usage {
    /// Tokens in the whole prompt.
    pub prompt_tokens: u64,
    /// Tokens generated.
    pub completion_tokens: u64,
    /// Prompt tokens reused from the slot's cache.
    #[serde(default)]
    pub cached_tokens: u64,
}

/// How a tool call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum ToolOutcome {
    /// The tool ran and this is its output.
    Ok,
    /// The tool ran, or was meant to, and failed; the content says why.
    Failed,
    /// The broker refused the call.
    Denied {
        /// Why it was refused.
        reason: DenyReason,
    },
    /// Not run: loopd told the model to make the call another way (a core tool called through
    /// `call_tool` is to be called directly); the content says how.
    Redirected,
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum TurnEnd {
    /// The model answered without tool calls.
    Done,
    /// Someone cancelled it.
    Cancelled,
    /// It could not go on.
    Failed {
        /// The error, e.g. the model server's message.
        reason: String,
    },
    /// It reached the configured step limit.
    MaxSteps,
    /// loopd stopped (or crashed) while it ran; found and recorded on the next open.
    Interrupted,
    /// It reached one of the owner's budgets (`[budgets]` in loopd.toml); the session goes on
    /// with its next task.
    Budget {
        /// The budget's config key, e.g. `max_generated_tokens_per_turn`.
        budget: String,
        /// What was reached, naming the budget and the figure, e.g. `the turn generated 512
        /// tokens; max_generated_tokens_per_turn is 500`.
        message: String,
    },
}

/// One line of a session log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum LogRecord {
    /// The first record of every log.
    Header {
        /// [`LOG_FORMAT_VERSION`] when it was written.
        version: u32,
        /// The session this log belongs to.
        session: SessionId,
        /// When the session was created.
        time: Timestamp,
    },
    /// A new epoch begins (after compaction), with the carry from the one before.
    EpochStart {
        /// When.
        time: Timestamp,
        /// The new epoch's number; epoch 0 starts at the header.
        epoch: u32,
        /// What the previous epochs come down to.
        carry: String,
        /// The join of the classes of what the carry was made from.
        class: DataClass,
        /// Whether anything the carry was made from was untrusted.
        untrusted: bool,
    },
    /// The context label this session starts from, inherited from the session that started
    /// it (a subagent's parent): everything the parent had read when it handed the task down.
    /// Written right after the header; it stays part of the session's context label for the
    /// session's whole life, every epoch included.
    Inherited {
        /// When.
        time: Timestamp,
        /// The session it was inherited from.
        parent: SessionId,
        /// The parent's context class at the time.
        class: DataClass,
        /// Whether the parent's context was untrusted at the time.
        untrusted: bool,
        /// The top-level session whose turn started the chain of subagents this session
        /// belongs to: per-turn limits count this session's calls against that turn.
        root_session: SessionId,
        /// That turn's number.
        root_turn: u64,
    },
    /// A task from the user: starts a turn.
    User {
        /// When it was accepted.
        time: Timestamp,
        /// The turn it starts; increasing within the session.
        turn: u64,
        /// What the user wrote.
        content: String,
        /// The id its client gave the task, if any: a later submission with the same id finds
        /// it here (also after a restart) and is answered with this turn instead of running
        /// again. Absent in logs written before task ids.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        task_id: Option<TaskId>,
    },
    /// Words of someone other than the owner, heard where the task that follows came from (a
    /// room the owner shares with others), given to the model with that task as untrusted
    /// text. Written just before the task's [`LogRecord::User`], never inside a turn; its
    /// labels join the session's context like a tool result's. Never the owner's words: a
    /// path it names is not one the owner gave.
    Overheard {
        /// When it was recorded.
        time: Timestamp,
        /// Who said it, as the channel names them (`@bob:example.org`).
        from: String,
        /// What they said, neutralised.
        content: String,
        /// Its data class.
        class: DataClass,
        /// Whether it came from outside: always, today.
        untrusted: bool,
    },
    /// One answer of the model.
    Assistant {
        /// When it was complete.
        time: Timestamp,
        /// The visible text.
        content: String,
        /// The reasoning text, when the model produced some.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
        /// The tool calls it asked for, in order.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<ToolCall>,
        /// The token counts the server reported.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        usage: Option<Usage>,
    },
    /// The part of an answer that had streamed when its turn was stopped (cancelled, or
    /// loopd shutting down). Kept for the record and never sent to the model: it is not an
    /// answer the model finished, and replayed as an assistant message it would read as one.
    /// The turn end that follows says how the turn stopped.
    PartialAnswer {
        /// When the turn was stopped.
        time: Timestamp,
        /// The visible text streamed so far.
        content: String,
        /// The reasoning streamed so far, when there was some.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<String>,
    },
    /// The result of one tool call, as it was given to the model.
    ToolResult {
        /// When it came back.
        time: Timestamp,
        /// The call's number in this session.
        call: CallId,
        /// The id of the [`ToolCall`] it answers.
        tool_call_id: String,
        /// What the model was shown (capped, neutralised where untrusted).
        content: String,
        /// The data class of the result.
        class: DataClass,
        /// Whether the result came from outside.
        untrusted: bool,
        /// Whether the content was cut to the cap.
        truncated: bool,
        /// How the call ended.
        outcome: ToolOutcome,
        /// True when loopd answered the call itself (`find_tool`, `clock`, `read_output`,
        /// `subagent`, a `call_tool` mistake, a call it refused before sending): it never
        /// reached brokerd, so this record is its only audit trail.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        by_loopd: bool,
    },
    /// A short summary of an opted-in tool result (seed M5d2-08); never replayed to the model
    /// within its epoch, used in place of the result when compacting.
    ToolSummary {
        /// When it was made.
        time: Timestamp,
        /// The call it summarises.
        call: CallId,
        /// The id of the tool call it summarises.
        tool_call_id: String,
        /// The summary.
        content: String,
        /// Copied from the result.
        class: DataClass,
        /// Copied from the result.
        untrusted: bool,
    },
    /// The end of a turn.
    TurnEnd {
        /// When.
        time: Timestamp,
        /// The turn that ended.
        turn: u64,
        /// How it ended.
        end: TurnEnd,
    },
    /// brokerd asked the owner about a call of this turn, and the turn waits for the answer.
    /// Written before anyone is told (event, API, notification), so an approval nobody
    /// recorded is never shown. Never sent to the model.
    ApprovalRequested {
        /// When.
        time: Timestamp,
        /// The call it is about.
        call: CallId,
        /// brokerd's id for it.
        approval: ApprovalId,
        /// The tool that would run (a `call_tool`'s target).
        tool: String,
        /// Its arguments as brokerd got them (JSON text): what would run.
        arguments: String,
        /// Why brokerd asks ("write_file after untrusted text entered the session").
        reason: String,
        /// The class of the session's context when it asked.
        class: DataClass,
        /// Whether that context was untrusted.
        untrusted: bool,
        /// How long the turn waits for an answer, in milliseconds.
        timeout_ms: u64,
    },
    /// What became of an [`LogRecord::ApprovalRequested`]: the owner's answer, silence, or a
    /// wait made void (cancelled turn, restart). Never sent to the model.
    ApprovalDecided {
        /// When.
        time: Timestamp,
        /// The call it is about.
        call: CallId,
        /// brokerd's id for it.
        approval: ApprovalId,
        /// What became of it.
        decision: ApprovalDecision,
        /// The user id of the peer that answered (`SO_PEERCRED`); absent when nobody did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        uid: Option<u32>,
        /// The owner's reason for a denial, or loopd's words for a timeout or a void wait.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
    },
    /// The baseline of the current epoch (format version 2 on): what every prompt of the
    /// epoch starts with, written once, at the epoch's first turn, in the same write as what
    /// follows it. Its body is loopd's baseline (system prompt, memory, tools array, their
    /// labels) as JSON, so this crate needs none of their types.
    Baseline {
        /// The epoch it belongs to.
        epoch: u32,
        /// The baseline.
        baseline: serde_json::Value,
    },
    /// The owner undid turns `from_turn` to `to_turn` (`boxctl undo`): brokerd put back the
    /// files they wrote, and the model's next context leaves those turns out. Written between
    /// turns. Their records stay in the log, for the record, and their labels still count.
    Undone {
        /// When.
        time: Timestamp,
        /// The first turn undone.
        from_turn: u64,
        /// The last turn undone.
        to_turn: u64,
        /// How many files were put back.
        files: u64,
    },
    /// A remark for people reading the log (a failed compaction, a recovery); never sent to
    /// the model.
    Note {
        /// When.
        time: Timestamp,
        /// What happened.
        text: String,
    },
}

impl LogRecord {
    /// The record's `type` tag as written in the log.
    pub fn kind(&self) -> &'static str {
        match self {
            LogRecord::Header { .. } => "header",
            LogRecord::EpochStart { .. } => "epoch_start",
            LogRecord::Inherited { .. } => "inherited",
            LogRecord::User { .. } => "user",
            LogRecord::Overheard { .. } => "overheard",
            LogRecord::Assistant { .. } => "assistant",
            LogRecord::PartialAnswer { .. } => "partial_answer",
            LogRecord::ToolResult { .. } => "tool_result",
            LogRecord::ToolSummary { .. } => "tool_summary",
            LogRecord::TurnEnd { .. } => "turn_end",
            LogRecord::ApprovalRequested { .. } => "approval_requested",
            LogRecord::ApprovalDecided { .. } => "approval_decided",
            LogRecord::Baseline { .. } => "baseline",
            LogRecord::Undone { .. } => "undone",
            LogRecord::Note { .. } => "note",
        }
    }
}

/// A durable memory note, one JSON line of loopd's `memory.jsonl`: written by a compaction,
/// read into the baseline of later epochs and new sessions. Its labels are the carry's (the
/// join of what it was made from).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MemoryNote {
    /// When it was written.
    pub time: Timestamp,
    /// The session whose compaction wrote it.
    pub session: SessionId,
    /// The note.
    pub text: String,
    /// The class of what it was made from.
    pub class: DataClass,
    /// Whether what it was made from held untrusted text.
    pub untrusted: bool,
}
