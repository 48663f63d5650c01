//! The session store's tests: creation, the baseline in the log, the log fixtures of each
//! format, the session index, and the approval records inside a turn.

mod approvals;
mod baseline_in_log;
mod create;
mod format_fixture;
mod index;
