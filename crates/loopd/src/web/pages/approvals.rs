//! The calls waiting for the owner, each with its whole arguments and the two answers.

use super::{badges, layout, pretty_json};
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
                                strong { (a.tool) } " in "
                                a href={ "/sessions/" (a.session) } { (a.session) }
                                ", turn " (a.turn) (badges(a.class, a.untrusted))
                            }
                            p.muted { "Asked " (a.asked) "; why: " (a.reason) }
                            pre.arguments { (pretty_json(&a.arguments)) }
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
