//! bxsandbox against the real bubblewrap. Without `bwrap` these tests pass quietly, unless
//! `BOXMAKER_REQUIRE_BWRAP=1` (as `scripts/test.sh` sets), when they fail.

#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

mod binds;
mod common;
mod exec_rule;
mod limits;
mod network;
mod overlay;
mod probe;
mod shim_location;
mod walls;
