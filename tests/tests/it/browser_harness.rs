#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The real-browser harness (`e2e::browser`) itself: a headless Chromium opens a fixed page
//! served on loopback, and each blocking call the web console's tests use does what it says
//! (text, attributes, clicks, typing, bounded waits, scripts, cookies, a screenshot). Skipped
//! without Chromium and chromedriver unless `BOXMAKER_REQUIRE_BROWSER=1`.

use e2e::browser::Browser;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};

/// The page: a title, a text, a button whose click changes a text (inline script: this page
/// has no Content-Security-Policy), an input, and an `HttpOnly` cookie.
const PAGE: &str = "<!doctype html>\n<html><head><meta charset=\"utf-8\">\
    <title>boxmaker harness</title></head>\
    <body style=\"font-family: sans-serif; margin: 40px\">\
    <h1 id=\"hello\" style=\"color: #1a6\">Hello from the harness</h1>\
    <main id=\"page\" data-page=\"harness\">\
    <p id=\"state\">not clicked</p>\
    <button id=\"go\" onclick=\"document.getElementById('state').textContent = 'clicked once'\">\
    Go</button>\
    <input id=\"field\" name=\"field\"></main></body></html>\n";

/// The cookie the page sets, with the attributes the console's session cookie has.
const SET_COOKIE: &str = "bx_harness=abc123; HttpOnly; SameSite=Strict; Path=/";

/// Serves [`PAGE`] at `/` (and 404 elsewhere) on a loopback port, from a thread that lives as
/// long as the test process.
fn serve_page() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().map_while(Result::ok) {
            // One answer per connection; a broken one only fails the browser's request.
            let _ = answer(stream);
        }
    });
    addr
}

/// Reads one request's head and answers it, closing the connection.
fn answer(mut stream: TcpStream) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request_line = String::new();
    reader.read_line(&mut request_line)?;
    let mut line = String::new();
    while reader.read_line(&mut line)? > 2 {
        line.clear();
    }
    let path = request_line.split(' ').nth(1).unwrap_or_default();
    let answer = if path == "/" {
        format!(
            "HTTP/1.1 200 OK\r\nContent-Type: text/html; charset=utf-8\r\n\
             Set-Cookie: {SET_COOKIE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{PAGE}",
            PAGE.len()
        )
    } else {
        "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n".to_string()
    };
    stream.write_all(answer.as_bytes())
}

#[test]
fn the_browser_opens_a_page_and_drives_it() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let addr = serve_page();
    let url = format!("http://{addr}/");
    browser.goto(&url).unwrap();
    assert_eq!(browser.current_url().unwrap(), url);
    assert_eq!(browser.title().unwrap(), "boxmaker harness");
    assert_eq!(browser.text("#hello").unwrap(), "Hello from the harness");
    assert_eq!(
        browser.attribute("#page", "data-page").unwrap().as_deref(),
        Some("harness")
    );
    assert_eq!(browser.attribute("#page", "no-such").unwrap(), None);
    assert_eq!(browser.count("button").unwrap(), 1);
    assert!(browser.page_source().unwrap().contains("id=\"state\""));

    // A missing element is an error naming it, at once or after a bounded wait.
    let missing = browser.text("#nothing").unwrap_err();
    assert!(missing.contains("#nothing"), "{missing}");
    let waited = browser.wait_for("#nothing", 200).unwrap_err();
    assert!(waited.contains("not within 200 ms"), "{waited}");

    // A click runs the page's script; the wait sees its change.
    browser.click("#go").unwrap();
    let text = browser.wait_for_text("#state", "clicked", 5_000).unwrap();
    assert_eq!(text, "clicked once");
    browser.wait_for("#state", 1_000).unwrap();

    browser.send_keys("#field", "typed text").unwrap();
    assert_eq!(
        browser.property("#field", "value").unwrap().as_deref(),
        Some("typed text")
    );

    // Scripts give JSON, and a returned promise is awaited.
    assert_eq!(browser.execute("return 6 * 7;").unwrap(), 42);
    assert_eq!(
        browser
            .execute("return fetch('/').then(r => r.status);")
            .unwrap(),
        200
    );
    // The HttpOnly cookie is hidden from the page, not from WebDriver.
    assert_eq!(browser.execute("return document.cookie;").unwrap(), "");
    let cookies = browser.cookies().unwrap();
    let cookie = cookies
        .iter()
        .find(|c| c.name == "bx_harness")
        .unwrap_or_else(|| panic!("no bx_harness cookie in {cookies:?}"));
    assert_eq!(cookie.value, "abc123");
    assert!(cookie.http_only, "{cookie:?}");
    assert!(!cookie.secure, "{cookie:?}");
    assert_eq!(cookie.same_site.as_deref(), Some("Strict"), "{cookie:?}");
    assert_eq!(cookie.path.as_deref(), Some("/"), "{cookie:?}");
    browser.delete_cookies().unwrap();
    assert_eq!(browser.cookies().unwrap(), Vec::new());

    let shot = std::path::Path::new(concat!(
        env!("CARGO_TARGET_TMPDIR"),
        "/web-console/harness.png"
    ));
    let _ = std::fs::remove_file(shot);
    browser.screenshot(shot).unwrap();
    let png = std::fs::read(shot).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(png.len() > 1_000, "a {} byte screenshot", png.len());
}
