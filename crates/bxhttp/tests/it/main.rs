//! bxhttp's integration tests, one binary (issue 14): a served test handler (`common`) and a
//! module per concern.

mod common;

mod burst;
mod cap;
mod malformed;
mod shutdown;
mod tcp;
mod timeouts;
