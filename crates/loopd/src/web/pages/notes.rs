//! The heartbeat's notifications and the memory notes, each with its labels.

use super::{badges, layout};
use maud::{Markup, html};
use proto::api::{MemoryList, NotificationList};

/// `/notes`: notifications (newest first) and memory.
pub fn notes(csrf: &str, notifications: &NotificationList, memory: &MemoryList) -> Markup {
    layout(
        "Notes",
        "notes",
        Some(csrf),
        html! {
            h2 { "Notifications" }
            @if notifications.notifications.is_empty() {
                p.muted { "None." }
            }
            ul #notifications {
                @for n in notifications.notifications.iter().rev() {
                    li {
                        span.muted { (n.time) " · " a href={ "/sessions/" (n.session) } { (n.session) } }
                        (badges(n.class, n.untrusted))
                        pre { (n.text) }
                    }
                }
            }
            h2 { "Memory" }
            @if memory.notes.is_empty() {
                p.muted { "None." }
            }
            ul #memory {
                @for note in &memory.notes {
                    li {
                        span.muted { (note.time) " · " (note.session) }
                        (badges(note.class, note.untrusted))
                        pre { (note.text) }
                    }
                }
            }
        },
    )
}
