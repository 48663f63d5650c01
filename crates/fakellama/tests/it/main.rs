//! fakellama's integration tests, one binary (issue 14): the shared helpers (`common`) and a
//! module per concern.

mod common;

mod cache;
mod chat;
mod endpoints;
mod like_llama_server;
mod script;
mod slot_files;
