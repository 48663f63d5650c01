//! The web console's rules over the stand-in (issue 21): nothing answers without a session,
//! a sign-in link works once and gives a strict cookie, every change needs the CSRF token
//! from the console's own origin, every answer carries the security headers, and session
//! text is escaped.

use crate::api_common::{HOSTILE, XSS_SESSION};
use crate::web_common::{Answer, start_web};
use http::{Method, StatusCode};
use loopd::config::Web;

const PAGES: [&str; 6] = [
    "/",
    "/sessions/s1",
    "/new",
    "/approvals",
    "/notes",
    "/status",
];

fn assert_secure_headers(answer: &Answer, what: &str) {
    let csp = answer.header("content-security-policy");
    assert!(
        csp.contains("script-src 'self'") && csp.contains("default-src 'none'"),
        "{what}: {csp}"
    );
    assert!(!csp.contains("unsafe-inline"), "{what}: {csp}");
    assert_eq!(answer.header("x-frame-options"), "DENY", "{what}");
    assert_eq!(answer.header("x-content-type-options"), "nosniff", "{what}");
    assert_eq!(answer.header("referrer-policy"), "same-origin", "{what}");
}

#[tokio::test]
async fn no_page_or_api_answers_without_a_valid_session() {
    let web = start_web(Web::default()).await;
    for cookie in [None, Some("bx_session=0123456789abcdef")] {
        let headers: Vec<(&str, &str)> = cookie.iter().map(|c| ("cookie", *c)).collect();
        for path in PAGES {
            let answer = web.get(path, &headers).await;
            assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{path}");
            assert!(
                answer.body.contains("data-page=\"signed-out\"")
                    && answer.body.contains("boxctl web"),
                "{path}: {}",
                answer.body
            );
            assert!(!answer.body.contains("s1</a>"), "{path} leaks the list");
            assert_secure_headers(&answer, path);
        }
        let events = web.get("/api/sessions/s1/events", &headers).await;
        assert_eq!(events.status, StatusCode::UNAUTHORIZED);
        assert!(events.body.contains("\"error\""), "{}", events.body);
        let task = web
            .send(Method::POST, "/api/tasks", &headers, r#"{"text":"hi"}"#)
            .await;
        assert_eq!(task.status, StatusCode::UNAUTHORIZED);
        let unknown = web.get("/no/such/page", &headers).await;
        assert_eq!(unknown.status, StatusCode::UNAUTHORIZED);
    }
    assert!(web.stub.submitted.lock().unwrap().is_empty());
    // The assets are the same for everyone and hold nothing of the box.
    let script = web.get("/static/console.js", &[]).await;
    assert_eq!(script.status, StatusCode::OK);
    assert!(script.header("content-type").starts_with("text/javascript"));
    web.stop().await;
}

#[tokio::test]
async fn a_link_signs_in_once_with_a_strict_http_only_cookie() {
    let web = start_web(Web::default()).await;
    let link = web.console.sign_ins.mint_link().unwrap();
    let path = format!("/signin?token={}", link.token);
    let first = web.get(&path, &[]).await;
    assert_eq!(first.status, StatusCode::SEE_OTHER);
    assert_eq!(first.header("location"), "/");
    let cookie = first.header("set-cookie");
    for part in [
        "bx_session=",
        "HttpOnly",
        "SameSite=Strict",
        "Path=/",
        "Max-Age=43200",
    ] {
        assert!(cookie.contains(part), "{part}: {cookie}");
    }
    assert!(
        !cookie.contains("Secure"),
        "plain http on loopback: {cookie}"
    );
    let again = web.get(&path, &[]).await;
    assert_eq!(again.status, StatusCode::UNAUTHORIZED);
    assert!(again.body.contains("used already"), "{}", again.body);
    assert!(again.header("set-cookie").is_empty());
    let bad = web.get("/signin?token=nope", &[]).await;
    assert_eq!(bad.status, StatusCode::UNAUTHORIZED);

    let cookie = cookie.split(';').next().unwrap();
    let page = web.get("/", &[("cookie", cookie)]).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("data-session=\"s1\""), "{}", page.body);
    assert_eq!(page.header("cache-control"), "no-store");
    assert_secure_headers(&page, "/");
    web.stop().await;
}

#[tokio::test]
async fn an_https_origin_makes_the_cookie_secure_and_other_hosts_are_refused() {
    let web = start_web(Web {
        origin: Some("https://box.example.com".into()),
        ..Web::default()
    })
    .await;
    let link = web.console.sign_ins.mint_link().unwrap();
    let url = web.console.sign_ins.link_url(&link.token);
    assert!(
        url.starts_with("https://box.example.com/signin?token="),
        "{url}"
    );
    let path = format!("/signin?token={}", link.token);
    let answer = web.get(&path, &[("host", "box.example.com")]).await;
    assert_eq!(answer.status, StatusCode::SEE_OTHER);
    assert!(answer.header("set-cookie").ends_with("; Secure"));
    // A page of another site whose name was made to point at the box (DNS rebinding).
    let rebound = web.get("/", &[("host", "evil.example:8740")]).await;
    assert_eq!(rebound.status, StatusCode::MISDIRECTED_REQUEST);
    assert_secure_headers(&rebound, "421");
    web.stop().await;
}

#[tokio::test]
async fn a_change_needs_the_csrf_token_from_the_consoles_own_origin() {
    let web = start_web(Web::default()).await;
    let browser = web.sign_in().await;
    let origin = format!("http://{}", web.addr);
    let form = |csrf: &str| format!("csrf={csrf}&decision=approve");
    let post = |headers: Vec<(&'static str, String)>, body: String| {
        let web = &web;
        async move {
            let headers: Vec<(&str, &str)> =
                headers.iter().map(|(n, v)| (*n, v.as_str())).collect();
            web.send(Method::POST, "/approvals/ap-1", &headers, &body)
                .await
        }
    };
    let cookie = ("cookie", browser.cookie.clone());
    let urlencoded = (
        "content-type",
        "application/x-www-form-urlencoded".to_string(),
    );
    // Another site's page, even one that somehow had the token: refused by its origin.
    let cross = post(
        vec![
            cookie.clone(),
            urlencoded.clone(),
            ("origin", "http://evil.example".into()),
        ],
        form(&browser.csrf),
    )
    .await;
    assert_eq!(cross.status, StatusCode::FORBIDDEN);
    assert!(cross.body.contains("evil.example"), "{}", cross.body);
    let site = post(
        vec![
            cookie.clone(),
            urlencoded.clone(),
            ("sec-fetch-site", "cross-site".into()),
        ],
        form(&browser.csrf),
    )
    .await;
    assert_eq!(site.status, StatusCode::FORBIDDEN);
    for csrf in ["", "0000"] {
        let refused = post(
            vec![
                cookie.clone(),
                urlencoded.clone(),
                ("origin", origin.clone()),
            ],
            form(csrf),
        )
        .await;
        assert_eq!(refused.status, StatusCode::FORBIDDEN, "csrf {csrf:?}");
        assert!(refused.body.contains("CSRF"), "{}", refused.body);
    }
    assert!(web.stub.answered.lock().unwrap().is_empty());
    let done = post(
        vec![cookie.clone(), urlencoded, ("origin", origin.clone())],
        form(&browser.csrf),
    )
    .await;
    assert_eq!(done.status, StatusCode::SEE_OTHER, "{}", done.body);
    assert_eq!(done.header("location"), "/approvals");
    let answered = web.stub.answered.lock().unwrap().clone();
    assert_eq!(answered.len(), 1);
    assert_eq!(answered[0].0.answer, proto::api::OwnerAnswer::Approve);
    assert_eq!(answered[0].1, None, "a console answer has no peer uid");
    web.stop().await;
}

#[tokio::test]
async fn a_task_streams_its_events_and_a_form_task_goes_to_its_session() {
    let web = start_web(Web::default()).await;
    let b = web.sign_in().await;
    let headers = [
        ("cookie", b.cookie.as_str()),
        ("x-csrf-token", b.csrf.as_str()),
        ("content-type", "application/json"),
    ];
    let stream = web
        .send(Method::POST, "/api/tasks", &headers, r#"{"text":"hi"}"#)
        .await;
    assert_eq!(stream.status, StatusCode::OK, "{}", stream.body);
    assert_eq!(stream.header("content-type"), "text/event-stream");
    assert!(stream.body.contains("\"text\":\"Hel\""), "{}", stream.body);
    assert!(
        stream.body.contains("\"type\":\"ended\""),
        "{}",
        stream.body
    );
    let no_token = web
        .send(
            Method::POST,
            "/api/tasks",
            &[("cookie", b.cookie.as_str())],
            r#"{"text":"hi"}"#,
        )
        .await;
    assert_eq!(no_token.status, StatusCode::FORBIDDEN);
    let reserved = web
        .send(
            Method::POST,
            "/api/tasks",
            &headers,
            r#"{"text":"hi","session":"heartbeat"}"#,
        )
        .await;
    assert_eq!(
        reserved.status,
        StatusCode::BAD_REQUEST,
        "{}",
        reserved.body
    );
    let form = format!("csrf={}&session=&text=hello+there", b.csrf);
    let posted = web
        .send(
            Method::POST,
            "/tasks",
            &[
                ("cookie", b.cookie.as_str()),
                ("content-type", "application/x-www-form-urlencoded"),
            ],
            &form,
        )
        .await;
    assert_eq!(posted.status, StatusCode::SEE_OTHER, "{}", posted.body);
    assert_eq!(posted.header("location"), "/sessions/new-1");
    let texts: Vec<String> = web
        .stub
        .submitted
        .lock()
        .unwrap()
        .iter()
        .map(|t| t.text.clone())
        .collect();
    assert_eq!(texts, ["hi", "hello there"]);
    let big = format!(
        "csrf={}&text={}",
        b.csrf,
        "a".repeat(Web::default().max_body_bytes)
    );
    let too_big = web
        .send(
            Method::POST,
            "/tasks",
            &[("cookie", b.cookie.as_str())],
            &big,
        )
        .await;
    assert_eq!(too_big.status, StatusCode::PAYLOAD_TOO_LARGE);
    assert!(
        too_big.body.contains("web.max_body_bytes"),
        "{}",
        too_big.body
    );
    web.stop().await;
}

#[tokio::test]
async fn session_text_is_escaped_and_labels_are_badges() {
    let web = start_web(Web::default()).await;
    let b = web.sign_in().await;
    let page = web
        .get(
            &format!("/sessions/{XSS_SESSION}"),
            &[("cookie", b.cookie.as_str())],
        )
        .await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.body);
    assert!(!page.body.contains(HOSTILE), "{}", page.body);
    assert!(!page.body.contains("<img"), "{}", page.body);
    assert!(
        page.body.contains("&lt;script&gt;document.title="),
        "{}",
        page.body
    );
    // The only script is the console's own.
    assert_eq!(page.body.matches("<script").count(), 1, "{}", page.body);
    assert!(
        page.body.contains("<details class=\"tool-call\">"),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("class=\"badge untrusted\""),
        "{}",
        page.body
    );
    web.stop().await;
}

#[tokio::test]
async fn every_page_answers_signed_in_and_the_whole_console_is_small() {
    let web = start_web(Web::default()).await;
    let b = web.sign_in().await;
    let mut bytes = 0;
    for path in PAGES
        .iter()
        .copied()
        .chain(["/static/console.js", "/static/console.css"])
    {
        let answer = web.get(path, &[("cookie", b.cookie.as_str())]).await;
        assert_eq!(answer.status, StatusCode::OK, "{path}: {}", answer.body);
        assert_secure_headers(&answer, path);
        bytes += answer.body.len();
    }
    assert!(bytes < 200_000, "the console is {bytes} bytes");
    let approvals = web
        .get("/approvals", &[("cookie", b.cookie.as_str())])
        .await;
    assert!(approvals.body.contains("data-approval=\"ap-1\""));
    assert!(
        approvals.body.contains("/srv/notes/a.txt"),
        "whole arguments"
    );
    web.stop().await;
}

#[tokio::test]
async fn signing_out_ends_the_session_and_clears_the_cookie() {
    let web = start_web(Web::default()).await;
    let b = web.sign_in().await;
    let cookie = [("cookie", b.cookie.as_str())];
    let refused = web.send(Method::POST, "/signout", &cookie, "").await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "no CSRF token");
    assert_eq!(web.get("/", &cookie).await.status, StatusCode::OK);
    let form = format!("csrf={}", b.csrf);
    let out = web.send(Method::POST, "/signout", &cookie, &form).await;
    assert_eq!(out.status, StatusCode::SEE_OTHER);
    assert!(
        out.header("set-cookie").contains("Max-Age=0"),
        "{}",
        out.header("set-cookie")
    );
    assert_eq!(web.get("/", &cookie).await.status, StatusCode::UNAUTHORIZED);
    web.stop().await;
}
