//! The HTML of every page, made with `maud`, which escapes every value it is given: no piece
//! of session text reaches the page as markup. The layout is one nav bar, the page's `main`
//! (`data-page` names it), and the one script, loaded from `/static`.

mod approvals;
mod notes;
mod sessions;
mod status;
mod transcript;
mod undo;

pub use approvals::approvals;
pub use notes::notes;
pub use sessions::{new_task, sessions, task_form};
pub use status::status;
pub use transcript::session;
pub use undo::{confirm as confirm_undo, diff};

use bxcore::DataClass;
use bxhttp::answer::{Body, Problem};
use bytes::Bytes;
use http::{HeaderValue, Response, StatusCode, header};
use http_body_util::BodyExt;
use maud::{DOCTYPE, Markup, html};

/// A whole page: `title`, the `main` of page `name`, the session's CSRF token in a `meta`
/// for the script (none on a page shown to someone not signed in).
pub fn layout(title: &str, name: &str, csrf: Option<&str>, main: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(csrf) = csrf {
                    meta name="csrf-token" content=(csrf);
                }
                title { (title) " · boxmaker" }
                link rel="stylesheet" href="/static/console.css";
            }
            body {
                nav {
                    span.brand { "boxmaker" }
                    @if let Some(csrf) = csrf {
                        a #nav-sessions href="/" { "Sessions" }
                        a #nav-new href="/new" { "New task" }
                        a #nav-approvals href="/approvals" { "Approvals" }
                        a #nav-notes href="/notes" { "Notes" }
                        a #nav-status href="/status" { "Status" }
                        form method="post" action="/signout" {
                            input type="hidden" name="csrf" value=(csrf);
                            button #sign-out type="submit" { "Sign out" }
                        }
                    }
                }
                main #page data-page=(name) {
                    h1 { (title) }
                    (main)
                }
                script src="/static/console.js" {}
            }
        }
    }
}

/// An answer of `status` holding `page`.
pub fn html(status: StatusCode, page: Markup) -> Response<Body> {
    let body = http_body_util::Full::new(Bytes::from(page.into_string()))
        .map_err(|e| match e {})
        .boxed();
    let mut response = Response::new(body);
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/html; charset=utf-8"),
    );
    response
}

/// The page of a refusal or failure: what was wrong, in the problem's words.
pub fn error(problem: &Problem) -> Markup {
    let signed_out = problem.status == StatusCode::UNAUTHORIZED;
    let name = if signed_out { "signed-out" } else { "error" };
    let title = if signed_out {
        "Not signed in"
    } else {
        problem.status.canonical_reason().unwrap_or("Error")
    };
    layout(
        title,
        name,
        None,
        html! {
            p.error #error-message { (problem.message) }
            @if !signed_out {
                p { a href="/" { "Back to the sessions" } }
            }
        },
    )
}

/// A data class's name, as labels write it.
pub fn class_name(class: DataClass) -> &'static str {
    match class {
        DataClass::Public => "public",
        DataClass::Internal => "internal",
        DataClass::Private => "private",
        DataClass::Secret => "secret",
    }
}

/// A text's labels as badges: its class, and "untrusted" when it came from outside.
pub fn badges(class: DataClass, untrusted: bool) -> Markup {
    html! {
        span class={ "badge class-" (class_name(class)) } title="data class" { (class_name(class)) }
        @if untrusted {
            span.badge.untrusted title="from outside: data, not instructions" { "untrusted" }
        }
    }
}

/// `text` as pretty JSON when it is JSON (a call's arguments), else as it is. Text holding a
/// key twice is shown as it is: read leniently, it would show one of the two values, and not
/// necessarily the one that ran (issue 32).
pub fn pretty_json(text: &str) -> String {
    bxcore::json::parse_no_duplicates(text)
        .ok()
        .and_then(|v| serde_json::to_string_pretty(&v).ok())
        .unwrap_or_else(|| text.to_string())
}

/// Text the owner decides on (an approval's tool, reason and arguments), with every control,
/// bidi, zero-width or other hidden character written out as `\u{..}` (`bxcore::visible`):
/// maud keeps it from being markup, this keeps a U+202E from reordering what the owner reads.
pub fn shown(text: &str) -> String {
    bxcore::visible::visible(text).into_owned()
}
