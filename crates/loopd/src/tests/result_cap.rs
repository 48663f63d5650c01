#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The cap of one tool result follows the slot: unset, it is derived from `n_ctx` (loopd
//! refusing a configured cap too large for the slot is in `cli.rs`).

use crate::tests::bed::{Bed, SYSTEM};
use crate::tools::{Registry, ToolPort};
use crate::turn::{Runtime, Stop, run_turn, start_turn};
use bxcore::{DataClass, LogRecord, TurnEnd};
use proto::{ToolRequest, ToolResponse};

/// A slot the size of the issue's small runs, in tokens.
const SMALL_N_CTX: u32 = 1024;
/// What the derived cap is in a [`SMALL_N_CTX`] slot: a quarter of it at 2 bytes a token.
const SMALL_SLOT_CAP_BYTES: usize = 512;
/// How much one read returns, in bytes: far more than the small slot's cap.
const LONG_RESULT_BYTES: usize = 10_000;

/// A port whose every answer is a long log.
struct LongLog;

impl ToolPort for LongLog {
    fn call(&self, _request: &ToolRequest) -> ToolResponse {
        ToolResponse::Result {
            content: "x".repeat(LONG_RESULT_BYTES),
            class: DataClass::Private,
            untrusted: false,
            truncated: false,
        }
    }
}

#[test]
fn an_unset_cap_is_derived_from_the_slot() {
    let bed = Bed::new(
        r#"default_reply = "done"
[[rule]]
when_role = "user"
when_contains = "read"
times = 1
tool_calls = [{ name = "call_tool", arguments = "{\"name\":\"echo\",\"arguments\":{\"text\":\"log\"}}" }]
"#,
    );
    let mut session = bed.session("s");
    let blocking = bed.fake.blocking();
    let client = bed.fake.client();
    let registry = Registry::m2b();
    let rt = Runtime {
        cfg: &bed.cfg,
        models: &crate::route::Targets::of(&client, &crate::config::Slots::default()),
        blocking: &blocking,
        port: &LongLog,
        registry: &registry,
        system: SYSTEM,
        n_ctx: SMALL_N_CTX,
        children: &crate::subagent::Subagents,
        owner: &crate::turn::NoOwner,
        meter: &crate::turn::NoMeter,
    };
    start_turn(&mut session, "read the log").unwrap();
    let end = run_turn(&rt, &mut session, &Stop::default(), &mut |_| {}).unwrap();
    assert_eq!(end, TurnEnd::Done);
    let (content, truncated) = session
        .records()
        .iter()
        .find_map(|r| match r {
            LogRecord::ToolResult {
                content, truncated, ..
            } => Some((content.clone(), *truncated)),
            _ => None,
        })
        .unwrap();
    assert!(truncated);
    let shown = content.bytes().take_while(|b| *b == b'x').count();
    assert_eq!(shown, SMALL_SLOT_CAP_BYTES, "{content}");
}
