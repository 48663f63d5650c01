//! brokerd, boxmaker's tool broker.
//!
//! It will run every tool (built-in, or from MCP servers) under explicit grants, label every
//! result, and record every decision in an audit log (issue #5). Today it holds its
//! configuration: [`config`].

pub mod config;
pub mod tool;
