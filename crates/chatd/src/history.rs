//! A turn's answer read back from its session's log, for a task chatd re-attached to after a
//! restart: the events it streams then start where it came in (or at the turn's end), so the
//! tool calls and the answer come from the log, which holds all of them.

use crate::reply::Reply;
use bxcore::{LogRecord, SessionId, TurnEvent};

/// The most pages of records read looking for one turn.
const MAX_PAGES: usize = 10_000;

/// `turn` of `session` as the room's message would have it, without its end (which the
/// caller's stream gives, with its label): the calls and the visible text of each answer.
/// `None` when the log cannot be read or holds no such turn.
pub async fn turn_reply(loopd: &boxctl::Client, session: &SessionId, turn: u64) -> Option<Reply> {
    let mut reply = Reply::default();
    let mut inside = false;
    let mut from = 0;
    for _ in 0..MAX_PAGES {
        let page = match loopd.records(session, from, None).await {
            Ok(page) => page.value,
            Err(error) => {
                tracing::warn!(%session, %error, "cannot read a turn back from the log");
                return None;
            }
        };
        for record in &page.records {
            match record {
                LogRecord::User { turn: t, .. } if *t == turn => inside = true,
                LogRecord::TurnEnd { turn: t, .. } if *t == turn => return Some(reply),
                LogRecord::Assistant {
                    content,
                    tool_calls,
                    ..
                } if inside => {
                    for tool_call in tool_calls {
                        reply.take(&TurnEvent::ToolCall {
                            call: bxcore::CallId(0),
                            tool_call: tool_call.clone(),
                        });
                    }
                    reply.take(&TurnEvent::Content {
                        text: content.clone(),
                    });
                }
                _ => {}
            }
        }
        match page.next {
            Some(next) => from = next,
            None => return inside.then_some(reply),
        }
    }
    None
}
