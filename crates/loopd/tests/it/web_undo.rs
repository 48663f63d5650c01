//! Undo and diff in the web console: each ended turn links to what it changed and to an undo
//! from it; the diff page escapes what the files held; the undo is asked first (a page listing
//! what brokerd's dry run would put back, hidden characters written out), then done by a POST
//! that needs the CSRF token from the console's own origin, and refused when the session has
//! had a turn since the page was shown; brokerd's refusal (a file changed since) reaches the
//! owner as it was said.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::web_common::{Browser, WebServed, start_web};
use http::{Method, StatusCode};
use loopd::config::Web;

/// POSTs `body` to `/sessions/s1/undo` as `browser` from `origin`.
async fn post_undo(
    web: &WebServed,
    browser: &Browser,
    origin: &str,
    body: &str,
) -> crate::web_common::Answer {
    let headers = [
        ("cookie", browser.cookie.as_str()),
        ("content-type", "application/x-www-form-urlencoded"),
        ("origin", origin),
    ];
    web.send(Method::POST, "/sessions/s1/undo", &headers, body)
        .await
}

/// The turns the undos the stand-in was asked for, not dry runs, undid from.
fn done_undos(web: &WebServed) -> Vec<Option<u64>> {
    let undos = web.stub.undos.lock().unwrap();
    undos
        .iter()
        .filter(|u| !u.dry_run)
        .map(|u| u.from_turn)
        .collect()
}

#[tokio::test]
async fn a_turn_shows_what_it_changed_escaped_and_links_to_its_undo() {
    let web = start_web(Web::default()).await;
    let b = web.sign_in().await;
    let cookie = [("cookie", b.cookie.as_str())];
    let page = web.get("/sessions/s1/diff?turn=5", &cookie).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(page.body.contains("data-page=\"diff\""), "{}", page.body);
    assert!(
        page.body.contains("+&lt;script&gt;alert(1)&lt;/script&gt;"),
        "{}",
        page.body
    );
    assert!(!page.body.contains("<script>alert"), "{}", page.body);
    assert!(
        page.body.contains("href=\"/sessions/s1/undo?from=5\""),
        "{}",
        page.body
    );
    let bad = web.get("/sessions/s1/diff?turn=x", &cookie).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    // Not signed in: nothing of it.
    let anon = web.get("/sessions/s1/diff?turn=5", &[]).await;
    assert_eq!(anon.status, StatusCode::UNAUTHORIZED);
    assert!(!anon.body.contains("alert"));
    web.stop().await;
}

#[tokio::test]
async fn an_undo_is_confirmed_on_a_page_then_done_by_a_post_with_the_csrf_token() {
    let web = start_web(Web::default()).await;
    let b = web.sign_in().await;
    let origin = format!("http://{}", web.addr);
    let cookie = [("cookie", b.cookie.as_str())];

    // The confirmation: brokerd's dry run, nothing done.
    let plan = web.get("/sessions/s1/undo?from=4", &cookie).await;
    assert_eq!(plan.status, StatusCode::OK, "{}", plan.body);
    assert!(
        plan.body.contains("Undo turns 4 to 5 of s1?"),
        "{}",
        plan.body
    );
    assert!(
        plan.body
            .contains("restore <code>/srv/notes/\\u{202e}txt.exe</code>"),
        "{}",
        plan.body
    );
    assert!(
        !plan.body.contains('\u{202e}'),
        "a bidi override is written out"
    );
    assert!(
        plan.body.contains("remove <code>/srv/notes/new.txt</code>"),
        "{}",
        plan.body
    );
    assert!(
        plan.body.contains("name=\"last\" value=\"5\""),
        "{}",
        plan.body
    );
    assert!(
        done_undos(&web).is_empty(),
        "a confirmation page undoes nothing"
    );
    let asked = web.stub.undos.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert!(
        asked[0].dry_run && asked[0].from_turn == Some(4),
        "{asked:?}"
    );

    // Without the token, or from another site: refused, nothing done.
    let body = |csrf: &str| format!("csrf={csrf}&from=4&last=5");
    let no_token = post_undo(&web, &b, &origin, &body("")).await;
    assert_eq!(no_token.status, StatusCode::FORBIDDEN, "{}", no_token.body);
    let cross = post_undo(&web, &b, "http://evil.example", &body(&b.csrf)).await;
    assert_eq!(cross.status, StatusCode::FORBIDDEN, "{}", cross.body);
    assert!(done_undos(&web).is_empty());

    // The page was made when turn 5 was the last: a form that says 4 is stale.
    let stale = post_undo(&web, &b, &origin, &format!("csrf={}&from=3&last=4", b.csrf)).await;
    assert_eq!(stale.status, StatusCode::CONFLICT, "{}", stale.body);
    assert!(stale.body.contains("nothing was undone"), "{}", stale.body);
    assert!(done_undos(&web).is_empty());

    let done = post_undo(&web, &b, &origin, &body(&b.csrf)).await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(done.header("location"), "/sessions/s1");
    assert_eq!(done_undos(&web), [Some(4)]);

    // brokerd's refusal, as it said it.
    let refused = post_undo(&web, &b, &origin, &format!("csrf={}&from=1&last=5", b.csrf)).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert!(
        refused.body.contains("a.txt was changed since turn 1"),
        "{}",
        refused.body
    );
    // A turn that is not the session's.
    let outside = web.get("/sessions/s1/undo?from=9", &cookie).await;
    assert_eq!(outside.status, StatusCode::BAD_REQUEST, "{}", outside.body);
    web.stop().await;
}
