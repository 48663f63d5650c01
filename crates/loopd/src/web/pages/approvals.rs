//! The calls waiting for the owner, each with its whole arguments and the two answers. The
//! tool, reason and arguments are shown whole, hidden characters written out (`shown`): the
//! owner decides on exactly what they read.

use super::{badges, layout, pretty_json, shown};
use maud::{Markup, html};
use proto::api::ApprovalList;

/// `/approvals`: every waiting call, oldest first.
pub fn approvals(csrf: &str, list: &ApprovalList) -> Markup {
    layout(
        "Approvals",
        "approvals",
        Some(csrf),
        html! {
            @if list.approvals.is_empty() {
                p #no-approvals { "No call waits for your approval." }
            } @else {
                ul #approvals {
                    @for a in &list.approvals {
                        li data-approval=(a.id) {
                            p {
                                strong { (shown(&a.tool)) } " in "
                                a href={ "/sessions/" (a.session) } { (a.session) }
                                ", turn " (a.turn) (badges(a.class, a.untrusted))
                            }
                            p.muted { "Asked " (a.asked) "; why: " (shown(&a.reason)) }
                            pre.arguments { (shown(&pretty_json(&a.arguments))) }
                            div.actions {
                                form.approve method="post" action={ "/approvals/" (a.id) } {
                                    input type="hidden" name="csrf" value=(csrf);
                                    input type="hidden" name="decision" value="approve";
                                    button.approve-button type="submit" { "Approve" }
                                }
                                form.deny method="post" action={ "/approvals/" (a.id) } {
                                    input type="hidden" name="csrf" value=(csrf);
                                    input type="hidden" name="decision" value="deny";
                                    input type="text" name="reason" placeholder="why (the model reads it)"
                                        maxlength="1000";
                                    button.deny-button type="submit" { "Deny" }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use bxcore::{ApprovalId, CallId, DataClass, SessionId, Timestamp};
    use proto::api::PendingApproval;

    /// Issue 32: a right-to-left override in a path is written out, not obeyed, and a long path
    /// is shown whole.
    #[test]
    fn the_approvals_page_writes_out_bidi_and_shows_a_long_path_whole() {
        let path = format!("/srv/{}/end", "d".repeat(191));
        assert_eq!(path.chars().count(), 200);
        let pending = PendingApproval {
            id: ApprovalId::new("ap-1").unwrap(),
            session: SessionId::new("s1").unwrap(),
            turn: 3,
            call: CallId(4),
            tool: "write_file".into(),
            arguments: format!(r#"{{"content":"x","path":"{path}/\u202etxt.exe\u200b"}}"#),
            reason: "write_file asks\u{2066} the owner".into(),
            class: DataClass::Public,
            untrusted: false,
            asked: Timestamp::parse("2026-01-02T03:04:05Z").unwrap(),
            timeout_ms: 600_000,
        };
        let page = approvals(
            "token",
            &ApprovalList {
                approvals: vec![pending],
            },
        )
        .into_string();
        assert!(
            page.contains(&format!("&quot;{path}/\\u{{202e}}txt.exe\\u{{200b}}&quot;")),
            "{page}"
        );
        assert!(
            page.contains("write_file asks\\u{2066} the owner"),
            "{page}"
        );
        for hidden in ['\u{202e}', '\u{200b}', '\u{2066}'] {
            assert!(!page.contains(hidden), "{hidden:?} in {page}");
        }
    }
}
