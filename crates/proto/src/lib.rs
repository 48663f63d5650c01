//! The wire types between boxmaker's processes.
//!
//! One crate is the contract: loopd, brokerd and boxctl all build their requests and parse
//! their answers with these types, so a change of protocol is a change here, seen by all.
//! Every type we own refuses unknown fields.

pub mod api;
mod tool;

pub use tool::{
    CALL_TOOL, Catalogue, CatalogueTool, FIND_TOOL, LOOPD_TOOLS, READ_OUTPUT, SUBAGENT,
    ToolRequest, ToolResponse, ToolSchema, TurnRef,
};

/// The protocol version; it is the `/v1` in every path.
pub const PROTOCOL_VERSION: u32 = 1;
