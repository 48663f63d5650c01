//! The session store's tests: creation, the v1 log fixture, and the session index.

mod create;
mod format_fixture;
mod index;
