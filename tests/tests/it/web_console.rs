#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The web console in a real browser (issue 21): headless Chromium through chromedriver,
//! against a running stack (fakellama, brokerd, loopd with `[web] listen`). A browser without
//! the cookie is refused; the link from `boxctl web` signs it in; a task's answer streams into
//! the page; a call waiting for approval is approved from the page and its result shows in the
//! transcript; text with markup in a task, a tool result and an answer runs nothing. A
//! screenshot of each page is saved under `target/tmp/web-console/`.

use crate::approvals::{answer, finish, out_dir, reply, saving_into, wait_for_approval, write};
use crate::injection::common::{call_tool, stack_with_brokerd, start_brokerd};
use e2e::browser::Browser;
use e2e::{Stack, StackOptions, show};
use std::path::{Path, PathBuf};

/// The longest a test waits for the page to show something, in milliseconds.
const WAIT_MS: u64 = 30_000;

/// loopd's `[web]` for the tests: a free loopback port, which the link from `boxctl web` names.
const WEB_TOML: &str = "[web]\nlisten = \"127.0.0.1:0\"\n";

/// Markup that would run, or change the page, if it reached the page as markup.
const HOSTILE: &str =
    "<script>window.__pwned = 1</script><img src=x onerror=\"window.__pwned = 2\">";

fn shots() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("web-console")
}

fn shot(browser: &Browser, name: &str) {
    let path = shots().join(format!("{name}.png"));
    browser.screenshot(&path).unwrap();
    assert!(std::fs::metadata(&path).unwrap().len() > 1_000, "{name}");
}

/// A one-time link from `boxctl web`, and the console's origin it starts with.
fn sign_in_link(stack: &Stack) -> (String, String) {
    let out = stack.boxctl(&["web"]);
    assert_eq!(out.status.code(), Some(0), "{}", show(&out));
    let link = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let origin = link.split("/signin?").next().unwrap().to_string();
    assert!(origin.starts_with("http://127.0.0.1:"), "{link}");
    (link, origin)
}

/// Goes to `url` until `css` is on the page (a page shows what was true when it was made).
fn reload_until(browser: &Browser, url: &str, css: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_millis(WAIT_MS);
    loop {
        browser.goto(url).unwrap();
        if browser.count(css).unwrap() > 0 {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{css} never on {url}: {}",
            browser.page_source().unwrap_or_default()
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

fn signed_out(browser: &Browser, url: &str) {
    browser.goto(url).unwrap();
    browser
        .wait_for("main[data-page='signed-out']", WAIT_MS)
        .unwrap();
    let text = browser.text("#error-message").unwrap();
    assert!(text.contains("boxctl web"), "{text}");
}

#[test]
fn a_browser_signs_in_with_the_link_streams_a_task_and_approves_a_call() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let out = out_dir(dir.path());
    let note = out.join("note.txt");
    let other = out.join("other.txt");
    let grants =
        format!("[[grants]]\ntool = \"write_file\"\npaths = [{out:?}]\napprove = \"always\"\n");
    let _brokerd = start_brokerd(dir.path(), &grants);
    let steps = [
        (
            "user",
            "say hello",
            reply("Hello from the box, streamed to the page."),
        ),
        ("user", "save a note", write(&note, "written from the web")),
        ("tool", "note.txt", reply("The note is saved.")),
        ("user", "save another", write(&other, "the second")),
        ("tool", "other.txt", reply("The second note is saved too.")),
    ];
    let stack = stack_with_brokerd(dir.path(), &steps, WEB_TOML);
    let (link, origin) = sign_in_link(&stack);

    // Without the cookie, every page is refused.
    for path in ["/", "/new", "/approvals", "/status"] {
        signed_out(&browser, &format!("{origin}{path}"));
    }
    shot(&browser, "signed-out");

    browser.goto(&link).unwrap();
    browser
        .wait_for("main[data-page='sessions']", WAIT_MS)
        .unwrap();
    assert_eq!(browser.current_url().unwrap(), format!("{origin}/"));
    let cookie = browser
        .cookies()
        .unwrap()
        .into_iter()
        .find(|c| c.name == "bx_session")
        .expect("the session cookie");
    assert!(cookie.http_only, "{cookie:?}");
    assert_eq!(cookie.same_site.as_deref(), Some("Strict"), "{cookie:?}");
    // The script cannot read it.
    let seen = browser.execute("return document.cookie").unwrap();
    assert_eq!(
        seen,
        serde_json::json!(""),
        "HttpOnly hides it from scripts"
    );
    // The link was used: it does not sign in again.
    browser.goto(&link).unwrap();
    browser
        .wait_for("main[data-page='signed-out']", WAIT_MS)
        .unwrap();

    // A task, its answer streamed into the page.
    browser.goto(&format!("{origin}/new")).unwrap();
    browser.send_keys("#task-session", "hello").unwrap();
    browser.send_keys("#task-text", "say hello").unwrap();
    browser.click("#task-send").unwrap();
    browser
        .wait_for_text("#answer", "Hello from the box, streamed", WAIT_MS)
        .unwrap();
    browser
        .wait_for("#answer-status[data-end='done']", WAIT_MS)
        .unwrap();
    assert_eq!(browser.text("#answer-session").unwrap(), "hello");
    shot(&browser, "new-task");
    reload_until(&browser, &format!("{origin}/"), "tr[data-session='hello']");
    shot(&browser, "sessions");

    // A call that waits for the owner, approved from the page.
    browser.goto(&format!("{origin}/new")).unwrap();
    browser.send_keys("#task-session", "notes").unwrap();
    browser
        .send_keys("#task-text", &saving_into("save a note", &out))
        .unwrap();
    browser.click("#task-send").unwrap();
    let pending = wait_for_approval(&stack, "notes");
    let item = format!("li[data-approval='{}']", pending.id);
    reload_until(&browser, &format!("{origin}/approvals"), &item);
    let arguments = browser.text(&format!("{item} pre.arguments")).unwrap();
    assert!(
        arguments.contains("note.txt") && arguments.contains("written from the web"),
        "{arguments}"
    );
    assert!(
        !note.exists(),
        "nothing is written before the owner answers"
    );
    shot(&browser, "approvals");
    browser.click(&format!("{item} .approve-button")).unwrap();
    browser
        .wait_for("#no-approvals", WAIT_MS)
        .unwrap_or_else(|e| panic!("{e}: {}", browser.page_source().unwrap_or_default()));
    reload_until(
        &browser,
        &format!("{origin}/sessions/notes"),
        "li.record.end",
    );
    browser
        .wait_for_text("#transcript", "The note is saved.", WAIT_MS)
        .unwrap();
    assert!(browser.count("#transcript details.tool-call").unwrap() >= 2);
    assert_eq!(
        std::fs::read_to_string(&note).unwrap(),
        "written from the web"
    );
    shot(&browser, "session");

    // Live: the session's page follows a turn while it runs (here, answered from the shell).
    browser.wait_for("#live[data-following]", WAIT_MS).unwrap();
    let task = stack.spawn_boxctl(&[
        "task",
        "--session",
        "notes",
        &saving_into("save another", &out),
    ]);
    let pending = wait_for_approval(&stack, "notes");
    answer(&stack, &["approve", pending.id.as_str()]);
    browser
        .wait_for_text("#live-text", "The second note is saved too.", WAIT_MS)
        .unwrap();
    browser.wait_for("#live[data-ended='2']", WAIT_MS).unwrap();
    browser
        .wait_for_text("#transcript", "The second note is saved too.", WAIT_MS)
        .unwrap();
    let (code, output) = finish(task);
    assert_eq!(code, Some(0), "{output}");
    shot(&browser, "session-live");

    for (path, page) in [("/notes", "notes"), ("/status", "status")] {
        browser.goto(&format!("{origin}{path}")).unwrap();
        browser
            .wait_for(&format!("main[data-page='{page}']"), WAIT_MS)
            .unwrap();
        shot(&browser, page);
    }
    assert!(browser.text("#status-model").unwrap().contains("fakellama"));

    // The owner ends every browser session from the box.
    let revoked = stack.boxctl(&["web", "--revoke"]);
    assert_eq!(revoked.status.code(), Some(0), "{}", show(&revoked));
    assert!(String::from_utf8_lossy(&revoked.stdout).contains("signed out 1 browser session"));
    signed_out(&browser, &format!("{origin}/"));
}

#[test]
fn markup_in_a_task_a_tool_result_and_an_answer_runs_nothing() {
    let Some(browser) = Browser::start() else {
        return;
    };
    let echo = call_tool(
        "echo",
        &serde_json::json!({ "text": format!("result {HOSTILE}") }).to_string(),
    );
    let script = crate::injection::common::script(&[
        ("user", "window.__pwned", echo),
        ("tool", "result", reply(&format!("answer {HOSTILE}"))),
    ]);
    let stack = Stack::start(StackOptions {
        script,
        loopd_toml: WEB_TOML.into(),
        ..Default::default()
    })
    .unwrap();
    let (link, origin) = sign_in_link(&stack);
    browser.goto(&link).unwrap();
    browser
        .wait_for("main[data-page='sessions']", WAIT_MS)
        .unwrap();
    browser.goto(&format!("{origin}/new")).unwrap();
    browser.send_keys("#task-session", "hostile").unwrap();
    browser
        .send_keys("#task-text", &format!("task {HOSTILE}"))
        .unwrap();
    browser.click("#task-send").unwrap();
    browser
        .wait_for("#answer-status[data-end='done']", WAIT_MS)
        .unwrap();
    let streamed = browser.text("#answer").unwrap();
    assert!(streamed.contains("<script>window.__pwned"), "{streamed}");

    reload_until(
        &browser,
        &format!("{origin}/sessions/hostile"),
        "li.record.end",
    );
    let transcript = browser.text("#transcript").unwrap();
    assert!(transcript.contains("task <script>"), "{transcript}");
    assert!(transcript.contains("answer <script>"), "{transcript}");
    // Open the folded result: its text is there, as text.
    browser
        .execute("document.querySelectorAll('details').forEach(d => d.open = true)")
        .unwrap();
    let result = browser.text("pre.result").unwrap();
    assert!(result.contains("result <script>"), "{result}");
    shot(&browser, "hostile-session");
    let verdict = browser
        .execute(
            "return { pwned: window.__pwned === undefined ? null : window.__pwned, \
             scripts: document.querySelectorAll('main script, main img').length }",
        )
        .unwrap();
    assert_eq!(
        verdict,
        serde_json::json!({ "pwned": null, "scripts": 0 }),
        "markup reached the page"
    );
}

/// Answers every request on a Unix socket at `path` as brokerd's health does: for a loopd
/// whose `[broker] socket` is this test process, so every child the test starts "descends from
/// brokerd", as an MCP server would.
fn stand_in_brokerd(path: &Path) {
    use std::io::{BufRead, BufReader, Write};
    let listener = std::os::unix::net::UnixListener::bind(path).unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                line.clear();
            }
            let body = r#"{"status":"ok"}"#;
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
}

#[test]
fn no_link_for_brokerds_descendants_and_none_while_the_console_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let broker = dir.path().join("brokerd.sock");
    stand_in_brokerd(&broker);
    let stack = Stack::start(StackOptions {
        loopd_toml: format!("{WEB_TOML}[broker]\nsocket = {broker:?}\n"),
        ..Default::default()
    })
    .unwrap();
    // boxctl is this test's child, and this test answers on brokerd's socket.
    let out = stack.boxctl(&["web"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("descends from brokerd"), "{err}");
    assert!(out.stdout.is_empty(), "no link: {}", show(&out));

    let off = Stack::start(StackOptions::default()).unwrap();
    let out = off.boxctl(&["web"]);
    assert_eq!(out.status.code(), Some(1), "{}", show(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the web console is off: set [web] listen in loopd.toml"),
        "{err}"
    );
}
