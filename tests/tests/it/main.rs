//! The end-to-end tests, one binary (issue 14): a module per concern, run against the
//! workspace's built binaries (`cargo build --workspace --bins` first).
//!
//! The tests share this process and run in parallel. The real-model tests (`real_*`, and the
//! demo on the real model) each start a llama-server that takes every core, so they run one at
//! a time and beside no heavy test: each takes `e2e::real::one_at_a_time` first, and a heavy
//! test (many processes at once, or timing a starved machine would break) takes
//! `e2e::real::heavy`.

mod approval_kills;
mod approvals;
mod broker_restart;
mod browser_harness;
mod budgets;
mod burst;
mod chat;
mod compact_command;
mod dashboard;
mod demo;
mod docs;
mod evals;
mod frozen_model;
mod injection;
mod layers;
mod prefix_bytes;
mod prometheus;
mod queueing;
mod real_client;
mod real_compaction;
mod real_day;
mod real_kv;
mod real_metrics;
mod real_model;
mod real_model_recovery;
mod real_rpc;
mod real_secrets;
mod schedules;
mod scripts;
mod shutdown;
mod sigterm_at_start;
mod slots_in_flight;
mod slow_clients;
mod subagent_labels;
mod task_ids;
mod turns;
mod undo;
mod web_console;
