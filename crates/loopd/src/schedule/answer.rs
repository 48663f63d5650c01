//! What a run's turn said, from its events: the answer (the visible text of its last model
//! call), how it ended, the labels of the context it ended in, and the calls that waited for
//! the owner and did not run; and whether that answer becomes a notification.

use crate::config::Notify;
use bxcore::{DataClass, Labels, TurnEnd, TurnEvent};

/// A turn's events, folded.
#[derive(Debug)]
pub struct Answer {
    /// The visible answer of the last model call so far.
    pub text: String,
    /// Whether a model call ended since the last content: the next content starts a new one.
    call_ended: bool,
    /// How the turn ended, once it did.
    pub end: Option<TurnEnd>,
    /// What the answer was made from: until the turn says otherwise, the highest label.
    pub labels: Labels,
    /// Calls whose approval was decided other than by an approval.
    pub not_approved: u32,
}

impl Default for Answer {
    fn default() -> Answer {
        Answer {
            text: String::new(),
            call_ended: false,
            end: None,
            labels: Labels::new(DataClass::Secret, true),
            not_approved: 0,
        }
    }
}

impl Answer {
    /// Folds in one event.
    pub fn push(&mut self, event: &TurnEvent) {
        match event {
            TurnEvent::Content { text } => {
                if std::mem::take(&mut self.call_ended) {
                    self.text.clear();
                }
                self.text.push_str(text);
            }
            TurnEvent::ModelDone { .. } => self.call_ended = true,
            TurnEvent::Retry { .. } => self.text.clear(),
            TurnEvent::ApprovalDecided { decision, .. } if !decision.approves() => {
                self.not_approved = self.not_approved.saturating_add(1);
            }
            TurnEvent::Ended { end, context, .. } => {
                self.end = Some(end.clone());
                self.labels = *context;
            }
            _ => {}
        }
    }
}

/// What schedule `name` notifies of a turn that answered `answer` and ended as `end`;
/// `None` when it stays quiet.
pub fn notification_text(
    name: &str,
    answer: &str,
    end: Option<&TurnEnd>,
    quiet_reply: Option<&str>,
    notify: Notify,
) -> Option<String> {
    let answer = answer.trim();
    let quiet = quiet_reply.is_some_and(|quiet| quiet.trim() == answer);
    match (notify, end) {
        (Notify::Never, _) => None,
        (Notify::UnlessQuiet, Some(TurnEnd::Done)) if quiet => None,
        (_, Some(TurnEnd::Done)) => Some(answer.to_string()),
        (_, Some(other)) => Some(format!("the {name} turn ended as {other:?}: {answer}")),
        (_, None) => Some(format!("the {name} turn ended without an end: {answer}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(answer: &str, end: Option<&TurnEnd>, notify: Notify) -> Option<String> {
        notification_text("heartbeat", answer, end, Some("HEARTBEAT_OK"), notify)
    }

    #[test]
    fn only_an_exact_quiet_reply_of_a_done_turn_is_quiet() {
        let done = Some(&TurnEnd::Done);
        assert_eq!(text("  HEARTBEAT_OK\n", done, Notify::UnlessQuiet), None);
        assert_eq!(
            text(
                "HEARTBEAT_OK, but the disk is full",
                done,
                Notify::UnlessQuiet
            )
            .as_deref(),
            Some("HEARTBEAT_OK, but the disk is full")
        );
        assert!(
            text(
                "HEARTBEAT_OK",
                Some(&TurnEnd::MaxSteps),
                Notify::UnlessQuiet
            )
            .is_some()
        );
    }

    #[test]
    fn always_notifies_even_a_quiet_reply_and_never_notifies_nothing() {
        let done = Some(&TurnEnd::Done);
        assert_eq!(
            text("HEARTBEAT_OK", done, Notify::Always).as_deref(),
            Some("HEARTBEAT_OK")
        );
        assert_eq!(text("the disk is full", done, Notify::Never), None);
        assert_eq!(text("x", Some(&TurnEnd::MaxSteps), Notify::Never), None);
        assert_eq!(
            notification_text("m", "HEARTBEAT_OK", done, None, Notify::UnlessQuiet).as_deref(),
            Some("HEARTBEAT_OK"),
            "no quiet reply: nothing is quiet"
        );
    }

    #[test]
    fn the_answer_is_the_last_calls_content_and_refused_approvals_are_counted() {
        let mut answer = Answer::default();
        for event in [
            TurnEvent::Content {
                text: "let me ".into(),
            },
            TurnEvent::ModelDone {
                usage: bxcore::Usage::default(),
                model_us: 1,
                timings: None,
            },
            TurnEvent::ApprovalDecided {
                call: bxcore::CallId(1),
                approval: bxcore::ApprovalId::new("ap-1").unwrap_or_else(|e| panic!("{e}")),
                decision: bxcore::ApprovalDecision::TimedOut,
            },
            TurnEvent::ApprovalDecided {
                call: bxcore::CallId(2),
                approval: bxcore::ApprovalId::new("ap-2").unwrap_or_else(|e| panic!("{e}")),
                decision: bxcore::ApprovalDecision::Approved,
            },
            TurnEvent::Content {
                text: "HEARTBEAT".into(),
            },
            TurnEvent::Content { text: "_OK".into() },
        ] {
            answer.push(&event);
        }
        assert_eq!(answer.text, "HEARTBEAT_OK");
        assert_eq!(answer.not_approved, 1);
    }
}
