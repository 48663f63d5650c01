//! boxctl's integration tests, one binary (issue 14): the stand-in engine behind loopd's real
//! API layer (`api_stub`) and a module per concern.

mod api_stub;

mod against_api;
mod approval_lines;
mod approvals;
mod chat;
mod chat_terminal;
mod cli;
mod conventions;
mod format;
mod hang;
mod prompt;
mod schedules;
mod status_text;
mod usage;
