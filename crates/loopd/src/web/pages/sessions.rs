//! The sessions list and the new-task page.

use super::layout;
use maud::{Markup, html};
use proto::api::SessionList;

/// `/`: every session with its state.
pub fn sessions(csrf: &str, list: &SessionList) -> Markup {
    layout(
        "Sessions",
        "sessions",
        Some(csrf),
        html! {
            @if list.sessions.is_empty() {
                p #no-sessions { "No sessions yet. " a href="/new" { "Start one" } "." }
            } @else {
                table #sessions {
                    thead { tr { th { "Session" } th { "Turns" } th { "Records" } th { "State" } } }
                    tbody {
                        @for s in &list.sessions {
                            tr data-session=(s.id) {
                                td { a href={ "/sessions/" (s.id) } { (s.id) } }
                                td { (s.last_turn) }
                                td { (s.records) }
                                td.state {
                                    @if s.busy { "running" } @else { "idle" }
                                    @if s.queued > 0 { ", " (s.queued) " waiting" }
                                }
                            }
                        }
                    }
                }
            }
        },
    )
}

/// The task form: to `session` when given (hidden), else with a field for one (empty: a new
/// session). The script streams the answer below it; without the script, the form posts to
/// `/tasks` and the browser is sent to the session.
pub fn task_form(csrf: &str, session: Option<&str>) -> Markup {
    html! {
        form.task #task-form method="post" action="/tasks" {
            input type="hidden" name="csrf" value=(csrf);
            @match session {
                Some(id) => { input #task-session type="hidden" name="session" value=(id); }
                None => {
                    p {
                        label for="task-session" { "Session " }
                        input #task-session type="text" name="session" placeholder="a new session"
                            pattern="[A-Za-z0-9._-]{1,64}";
                    }
                }
            }
            p { textarea #task-text name="text" required placeholder="What should the agent do?" {} }
            p { button #task-send type="submit" { "Send" } }
        }
        section #answer-box {
            p.muted {
                "Session: " a #answer-session href="#" { "" }
                " · " span #answer-status data-end="" { "" }
            }
            pre #answer {}
            div #answer-events {}
        }
    }
}

/// `/new`: a task to a new or an existing session, its answer streamed.
pub fn new_task(csrf: &str) -> Markup {
    layout("New task", "new", Some(csrf), task_form(csrf, None))
}
