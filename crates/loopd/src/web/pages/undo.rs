//! What a session's turns changed on disk, and the confirmation before an undo puts it back
//! (`docs/undo.md`). Paths and diffs are shown with every hidden character written out
//! (`shown`): the owner decides on what they read.

use super::{layout, shown};
use maud::{Markup, html};
use proto::{DiffAnswer, UndoAnswer};

/// `/sessions/ID/diff[?turn=N]`: each kept write of the session (turn `turn`'s only, when
/// given) as a unified diff.
pub fn diff(csrf: &str, answer: &DiffAnswer, turn: Option<u64>) -> Markup {
    let id = answer.session.as_str();
    let title = match turn {
        Some(turn) => format!("What turn {turn} of {id} changed"),
        None => format!("What {id}'s turns changed"),
    };
    layout(
        &title,
        "diff",
        Some(csrf),
        html! {
            p { a href={ "/sessions/" (id) } { "Back to the session" } }
            @if answer.files.is_empty() {
                p #no-changes { "No change is kept for this: the turn wrote no file through a \
                                 grant, or the bounds of the checkpoints dropped it." }
            }
            @for file in &answer.files {
                section.file-diff {
                    h2 { code { (shown(&file.path.display().to_string())) } " (turn " (file.turn) ")" }
                    pre.diff { (shown(&file.diff)) }
                }
            }
            @if let Some(turn) = turn {
                p { a #undo-from href={ "/sessions/" (id) "/undo?from=" (turn) } { "Undo from this turn on" } }
            }
        },
    )
}

/// `/sessions/ID/undo?from=N`: what undoing turns `plan.turns` would put back (a dry run), and
/// the form that does it. `last` is the session's last turn when the plan was made: the undo
/// is refused if it has had another since.
pub fn confirm(csrf: &str, plan: &UndoAnswer, last: u64) -> Markup {
    let id = plan.session.as_str();
    let (first, to) = (
        plan.turns.first().copied().unwrap_or(last),
        plan.turns.last().copied().unwrap_or(last),
    );
    layout(
        &format!("Undo turns {first} to {to} of {id}?"),
        "undo",
        Some(csrf),
        html! {
            p {
                "These turns leave the conversation, and every file they changed is put back as it \
                 was before them, newest change first. A file changed since by something else stops \
                 the undo before anything changes."
            }
            @if plan.files.is_empty() {
                p #no-files { "No file: those turns changed none that is kept." }
            } @else {
                ul #undo-plan {
                    @for file in &plan.files {
                        li {
                            @if file.removed { "remove " } @else { "restore " }
                            code { (shown(&file.path.display().to_string())) }
                            " (turn " (file.turn) ")"
                        }
                    }
                }
            }
            form #undo-form method="post" action={ "/sessions/" (id) "/undo" } {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="from" value=(first);
                input type="hidden" name="last" value=(last);
                button.deny-button type="submit" { "Undo turns " (first) " to " (to) }
            }
            p { a href={ "/sessions/" (id) } { "Back to the session, undoing nothing" } }
        },
    )
}
