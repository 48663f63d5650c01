//! The session store's tests: creation, the v1 log fixture, the session index, and the
//! approval records inside a turn.

mod approvals;
mod create;
mod format_fixture;
mod index;
