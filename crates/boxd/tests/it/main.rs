//! boxd's integration tests, one binary (issue 14): boxd run on a config of stand-in children
//! (`support`) and a module per concern. Every test runs its own boxd in a temp dir of its own;
//! none changes this process's state.

mod support;

mod cli;
mod logs;
mod metrics;
mod orphans;
mod supervise;
