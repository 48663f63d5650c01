//! The `loopd` binary (filled in by the configs work).
fn main() {}
