//! loopd's tests that cross its layers: whole turns, compactions, tool summaries and the engine
//! around them, run against fakellama in-process on the shared test bed (`bed`).
//!
//! A test of one module's internals lives beside that module (`<module>/tests.rs`,
//! `<module>/tests/<topic>.rs`) and imports only its own layer and those below, as the module
//! does.
//! A test that needs a higher layer to set up what it checks (a turn to test compaction, the
//! engine to test the heartbeat) lives here instead: this module sits above every layer
//! (`tests/tests/it/layers.rs` places it), so no test file makes an import loop between
//! loopd's modules.

mod all_core;
mod approvals;
mod bed;
mod budgets;
mod call_labels;
mod compact;
mod compact_answers;
mod compact_fallback;
mod duplicate_keys;
mod engine_compact;
mod heartbeat;
mod kv_after_turn;
mod kv_switch;
mod last_word;
mod long_session;
mod memory;
mod owner_paths;
mod owner_words;
mod read_output;
mod result_cap;
mod schedule_new_session;
mod schedule_restart;
mod session_store;
mod summary_call;
mod summary_outcomes;
mod turn;
mod turn_recovery;
mod turn_syncs;
mod undo_turns;
mod untrusted_marks;
mod untrusted_tools_array;
mod usage_accounts;
