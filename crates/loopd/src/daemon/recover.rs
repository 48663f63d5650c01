//! At start, before anything is served: every turn loopd left unfinished when it stopped is
//! ended now, and the owner is told of each approval it left behind (issue 33). Without this a
//! session's unfinished turn was ended only when the session was next used, and nobody heard
//! of an approved call that may not have run.
//!
//! For each such approval a notification goes to `boxctl notifications` first, then the
//! session is opened, which records what became of it and ends the turn `interrupted`
//! (`session::recover`). In that order a crash between the two tells the owner twice, never
//! not at all.

use crate::config::Config;
use crate::journal;
use crate::session::{LeftApproval, LeftAs, Store, left_unfinished};
use crate::text::cap_chars;
use crate::turn::NOTIFICATION_ARGUMENT_CHARS;
use bxcore::{Labels, SessionId, Timestamp};
use proto::api::Notification;

/// What the start found and did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Ended {
    /// Turns ended `interrupted`.
    pub turns: usize,
    /// Notifications written, one per approval left behind.
    pub told: usize,
}

/// Ends every unfinished turn in `store` (the index says which), telling the owner of the
/// approvals each left behind in `cfg`'s notifications. What fails is logged: a session that
/// cannot be opened now is ended when it is next opened.
pub(crate) fn end_unfinished_turns(store: &Store, cfg: &Config) -> Ended {
    let mut ended = Ended::default();
    let unfinished: Vec<SessionId> = match store.summaries() {
        Ok(all) => all
            .into_iter()
            .filter(|(_, summary)| summary.open_turn.is_some())
            .map(|(id, _)| id)
            .collect(),
        Err(e) => {
            tracing::warn!(error = %e, "cannot list the sessions: unfinished turns are ended when their sessions are next used");
            return ended;
        }
    };
    let notifications = cfg.state_dir.join(journal::NOTIFICATIONS_FILE);
    for id in unfinished {
        let left = match store.read(&id) {
            Ok(records) => left_unfinished(&records),
            Err(e) => {
                tracing::warn!(session = %id, error = %e, "cannot read a session left unfinished");
                continue;
            }
        };
        let notes: Vec<Notification> = left.iter().map(|l| notification(&id, l)).collect();
        match journal::append(&notifications, &notes) {
            Ok(()) => ended.told += notes.len(),
            Err(e) => {
                tracing::error!(session = %id, error = %e, "cannot tell the owner of the approvals a stopped turn left behind")
            }
        }
        match store.open(&id) {
            Ok(_) => ended.turns += 1,
            Err(e) => {
                tracing::warn!(session = %id, error = %e, "cannot end a turn left unfinished now")
            }
        }
    }
    ended
}

/// The owner's note of `left`, an approval of session `id`'s unfinished turn.
fn notification(id: &SessionId, left: &LeftApproval) -> Notification {
    let call = format!(
        "{} {}",
        left.tool,
        cap_chars(&left.arguments, NOTIFICATION_ARGUMENT_CHARS)
    );
    let text = match left.left {
        LeftAs::ApprovedWithoutResult => format!(
            "approval {approval} was approved, but loopd stopped before the call's result came \
             back: {call} (call {number}) may not have run. brokerd's audit log has a line with \
             approval {approval} if it ran. The turn ended interrupted; ask again if it is \
             still needed",
            approval = left.approval,
            number = left.call,
        ),
        LeftAs::Waiting => format!(
            "approval {approval} still waited for the owner when loopd stopped: {call} did not \
             run and the approval is void. The turn ended interrupted; ask again if it is still \
             needed",
            approval = left.approval,
        ),
    };
    // The arguments come from the context the call was asked in.
    let labels = Labels::derived(Labels::PUBLIC, Labels::new(left.class, left.untrusted));
    Notification {
        time: Timestamp::now(),
        session: id.clone(),
        turn: left.turn,
        text,
        class: labels.class,
        untrusted: labels.untrusted,
        to: None,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use bxcore::{
        ApprovalDecision, ApprovalId, CallId, DataClass, LogRecord, ToolCall, ToolOutcome, TurnEnd,
    };

    fn sid(s: &str) -> SessionId {
        SessionId::new(s).unwrap()
    }

    /// Session `id` with a turn that asked about call 1 and, when `approved`, had it approved:
    /// then loopd stopped. `class` is the context's.
    fn left_by_a_stop(store: &Store, id: &str, approved: bool, class: DataClass) {
        let mut session = store.create(&sid(id)).unwrap();
        let time = Timestamp::now();
        session
            .append(LogRecord::User {
                time,
                turn: 1,
                content: "write the note".into(),
                task_id: None,
            })
            .unwrap();
        session
            .append(LogRecord::Assistant {
                time,
                content: String::new(),
                reasoning: None,
                tool_calls: vec![ToolCall {
                    id: "tc-1".into(),
                    name: "call_tool".into(),
                    arguments: "{}".into(),
                }],
                usage: None,
            })
            .unwrap();
        let approval = ApprovalId::new(&format!("ap-{id}")).unwrap();
        session
            .append(LogRecord::ApprovalRequested {
                time,
                call: CallId(1),
                approval: approval.clone(),
                tool: "write_file".into(),
                arguments: r#"{"path":"/out/a.txt","content":"A"}"#.into(),
                reason: "write_file asks the owner first".into(),
                class,
                untrusted: false,
                timeout_ms: 600_000,
            })
            .unwrap();
        if approved {
            session
                .append(LogRecord::ApprovalDecided {
                    time,
                    call: CallId(1),
                    approval,
                    decision: ApprovalDecision::Approved,
                    uid: Some(1000),
                    reason: None,
                })
                .unwrap();
        }
    }

    #[test]
    fn the_start_ends_unfinished_turns_and_tells_the_owner_of_each_approval_left_behind() {
        let state = tempfile::tempdir().unwrap();
        let cfg = Config {
            state_dir: state.path().to_path_buf(),
            ..Config::default()
        };
        {
            let store = Store::new(state.path()).unwrap();
            left_by_a_stop(&store, "approved", true, DataClass::Private);
            left_by_a_stop(&store, "waiting", false, DataClass::Public);
            let mut done = store.create(&sid("done")).unwrap();
            done.append(LogRecord::User {
                time: Timestamp::now(),
                turn: 1,
                content: "hello".into(),
                task_id: None,
            })
            .unwrap();
            done.append(LogRecord::TurnEnd {
                time: Timestamp::now(),
                turn: 1,
                end: TurnEnd::Done,
            })
            .unwrap();
        }
        // A restarted loopd.
        let store = Store::new(state.path()).unwrap();
        assert_eq!(
            end_unfinished_turns(&store, &cfg),
            Ended { turns: 2, told: 2 }
        );
        let notes: Vec<Notification> =
            journal::read_all(&state.path().join(journal::NOTIFICATIONS_FILE)).unwrap();
        let by_session = |s: &str| notes.iter().find(|n| n.session.as_str() == s).unwrap();
        let approved = by_session("approved");
        assert!(
            approved
                .text
                .starts_with("approval ap-approved was approved, but loopd stopped"),
            "{}",
            approved.text
        );
        assert!(
            approved.text.contains("may not have run"),
            "{}",
            approved.text
        );
        assert!(approved.text.contains(r#"write_file {"path":"/out/a.txt""#));
        assert_eq!(
            approved.class,
            DataClass::Private,
            "labelled as its context"
        );
        let waiting = by_session("waiting");
        assert!(waiting.text.contains("did not run"), "{}", waiting.text);

        // Both turns are ended, the approved call's result says it may not have run, and the
        // index says no turn is open.
        let records = store.read(&sid("approved")).unwrap();
        assert!(records.iter().any(|r| matches!(
            r,
            LogRecord::ToolResult { content, outcome: ToolOutcome::Failed, .. }
                if content == crate::session::APPROVED_WITHOUT_RESULT
        )));
        assert!(matches!(
            records.last(),
            Some(LogRecord::TurnEnd {
                end: TurnEnd::Interrupted,
                ..
            })
        ));
        assert!(
            store
                .summaries()
                .unwrap()
                .iter()
                .all(|(_, s)| s.open_turn.is_none())
        );
        // A second start finds nothing left and tells nobody again.
        let again = Store::new(state.path()).unwrap();
        assert_eq!(end_unfinished_turns(&again, &cfg), Ended::default());
    }
}
