//! A real browser for the end-to-end tests of the web console: Debian's headless Chromium
//! driven through its chromedriver (WebDriver over loopback http, with the `fantoccini` client),
//! both installed by `scripts/fetch-parts.sh browser` and named by `$CHROMIUM` and
//! `$CHROMEDRIVER`.
//!
//! The tests are synchronous, so a [`Browser`] owns a current-thread tokio runtime and offers
//! blocking calls, each bounded by [`COMMAND_TIMEOUT_MS`]. Each [`Browser`] has a chromedriver
//! of its own on a free loopback port and a fresh Chromium profile in a temporary directory;
//! dropping it ends the session and kills chromedriver with every Chromium process it started.

mod driver;

use driver::{DRIVER_LOG, Driver, bounded};
use fantoccini::elements::Element;
use fantoccini::{Client, Locator};
use serde_json::Value;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Names the chromium binary; `scripts/fetch-parts.sh --print-paths` prints it.
pub const CHROMIUM_ENV: &str = "CHROMIUM";
/// Names the chromedriver binary; `scripts/fetch-parts.sh --print-paths` prints it.
pub const CHROMEDRIVER_ENV: &str = "CHROMEDRIVER";
/// Set to `1` (as `scripts/test.sh` does) to make a missing browser a failure, not a skip.
pub const REQUIRE_ENV: &str = "BOXMAKER_REQUIRE_BROWSER";
/// Where Debian's chromium package puts the browser, used when `$CHROMIUM` is unset.
pub const DEFAULT_CHROMIUM: &str = "/usr/bin/chromium";
/// Where Debian's chromium-driver package puts chromedriver, used when `$CHROMEDRIVER` is unset.
pub const DEFAULT_CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// How long chromedriver may take to answer ready, and then Chromium to open a session, in
/// milliseconds (each; generous, for a loaded 2-core machine).
pub const STARTUP_TIMEOUT_MS: u64 = 60_000;
/// The longest one WebDriver command may take, in milliseconds (a page load included).
pub const COMMAND_TIMEOUT_MS: u64 = 30_000;
/// How often the bounded waits ([`Browser::wait_for`], [`Browser::wait_for_text`]) look again.
pub const POLL_MS: u64 = 50;
/// Chromium's command line: headless, as root in a container (no sandbox, no /dev/shm), and
/// quiet: nothing reaches out to the network on its own.
pub const CHROMIUM_ARGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
];

/// One cookie as the browser holds it (WebDriver's view, which sees `HttpOnly` cookies too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cookie {
    /// Its name.
    pub name: String,
    /// Its value.
    pub value: String,
    /// Whether it is `HttpOnly` (hidden from the page's scripts).
    pub http_only: bool,
    /// Whether it is `Secure` (sent over https only).
    pub secure: bool,
    /// Its `SameSite` attribute as Chromium reports it (`Strict`, `Lax` or `None`).
    pub same_site: Option<String>,
    /// Its `Path`.
    pub path: Option<String>,
}

/// The chromium and chromedriver binaries, from `$CHROMIUM` and `$CHROMEDRIVER`, else Debian's
/// paths; `None` (with a note on stderr) when either is missing, unless [`REQUIRE_ENV`] is `1`,
/// which makes it a panic.
pub fn binaries_or_skip() -> Option<(PathBuf, PathBuf)> {
    let find = |env: &str, default: &str| {
        std::env::var_os(env)
            .filter(|p| !p.is_empty())
            .map_or_else(|| PathBuf::from(default), PathBuf::from)
    };
    let chromium = find(CHROMIUM_ENV, DEFAULT_CHROMIUM);
    let chromedriver = find(CHROMEDRIVER_ENV, DEFAULT_CHROMEDRIVER);
    let missing: Vec<String> = [&chromium, &chromedriver]
        .iter()
        .filter(|p| !p.is_file())
        .map(|p| p.display().to_string())
        .collect();
    if missing.is_empty() {
        return Some((chromium, chromedriver));
    }
    let why = format!(
        "no browser for the web console's tests ({} missing): run `scripts/fetch-parts.sh \
         browser` (it installs Debian's chromium and chromium-driver), and export CHROMIUM and \
         CHROMEDRIVER as its `--print-paths` names them (scripts/test.sh does)",
        missing.join(", ")
    );
    assert!(std::env::var(REQUIRE_ENV).as_deref() != Ok("1"), "{why}");
    eprintln!("skipping a browser test: {why}");
    None
}

/// A headless Chromium with a WebDriver session, driven by blocking calls. Every call that
/// names an element takes a CSS selector; errors are messages naming the selector or URL.
pub struct Browser {
    runtime: tokio::runtime::Runtime,
    /// `None` once the session is closed (on drop).
    client: Option<Client>,
    /// Goes after the session, killing what is left of Chromium.
    _driver: Driver,
    /// Chromium's profile (`--user-data-dir`) and chromedriver's log; removed after the
    /// processes are gone (fields drop in order).
    dir: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver on a free loopback port and opens a session on a fresh headless
    /// Chromium. `None` when the binaries are missing (see [`binaries_or_skip`]); panics, with
    /// chromedriver's log, when they are there but do not start.
    pub fn start() -> Option<Browser> {
        let (chromium, chromedriver) = binaries_or_skip()?;
        match Browser::start_with(&chromium, &chromedriver) {
            Ok(browser) => Some(browser),
            Err(e) => panic!("cannot start the browser for a web console test: {e}"),
        }
    }

    /// [`Browser::start`] with these binaries; the error says why, with chromedriver's logs.
    fn start_with(chromium: &Path, chromedriver: &Path) -> Result<Browser, String> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| format!("cannot build a tokio runtime: {e}"))?;
        let dir = tempfile::tempdir().map_err(|e| format!("cannot make a temporary dir: {e}"))?;
        let driver = Driver::start(&runtime, chromedriver, dir.path())?;
        let client = driver.session(&runtime, chromium, dir.path())?;
        Ok(Browser {
            runtime,
            client: Some(client),
            _driver: driver,
            dir,
        })
    }

    /// chromedriver's log (`--log-path`: each WebDriver command and how Chromium was
    /// launched), for a failing test's message. Chromium's own stderr is beside it, in
    /// `chromedriver.stderr`.
    pub fn driver_log(&self) -> PathBuf {
        self.dir.path().join(DRIVER_LOG)
    }

    /// Runs one command against the session, bounded by [`COMMAND_TIMEOUT_MS`]; `what` names
    /// it in the error.
    fn run<T, F>(&self, what: &str, command: impl FnOnce(Client) -> F) -> Result<T, String>
    where
        F: Future<Output = Result<T, fantoccini::error::CmdError>>,
    {
        let client = self
            .client
            .clone()
            .ok_or_else(|| format!("{what}: the browser session is closed"))?;
        bounded(&self.runtime, COMMAND_TIMEOUT_MS, command(client))
            .map_err(|e| format!("{what}: {e}"))?
            .map_err(|e| format!("{what}: {e}"))
    }

    /// Opens `url` and waits for the page to load.
    pub fn goto(&self, url: &str) -> Result<(), String> {
        self.run(&format!("goto {url}"), |c| async move { c.goto(url).await })
    }

    /// The URL of the page shown now (after any redirect).
    pub fn current_url(&self) -> Result<String, String> {
        self.run("current url", |c| async move {
            c.current_url().await.map(|u| u.to_string())
        })
    }

    /// The page's `<title>`.
    pub fn title(&self) -> Result<String, String> {
        self.run("title", |c| async move { c.title().await })
    }

    /// The page's HTML as the browser has it now (scripts' changes included).
    pub fn page_source(&self) -> Result<String, String> {
        self.run("page source", |c| async move { c.source().await })
    }

    /// The first element matching `css`, failing at once when there is none.
    fn find(&self, css: &str) -> Result<Element, String> {
        self.run(&format!("find `{css}`"), |c| async move {
            c.find(Locator::Css(css)).await
        })
    }

    /// The rendered text of the first element matching `css` (as a user sees it: hidden
    /// elements give "").
    pub fn text(&self, css: &str) -> Result<String, String> {
        let element = self.find(css)?;
        self.run(&format!("text of `{css}`"), |_| async move {
            element.text().await
        })
    }

    /// The texts of every element matching `css`, in document order (none: empty).
    pub fn texts(&self, css: &str) -> Result<Vec<String>, String> {
        self.run(&format!("texts of `{css}`"), |c| async move {
            let mut texts = Vec::new();
            for element in c.find_all(Locator::Css(css)).await? {
                texts.push(element.text().await?);
            }
            Ok(texts)
        })
    }

    /// How many elements match `css` now.
    pub fn count(&self, css: &str) -> Result<usize, String> {
        self.run(&format!("count `{css}`"), |c| async move {
            c.find_all(Locator::Css(css)).await.map(|all| all.len())
        })
    }

    /// The HTML attribute `name` of the first element matching `css` (`None`: not set).
    pub fn attribute(&self, css: &str, name: &str) -> Result<Option<String>, String> {
        let element = self.find(css)?;
        self.run(&format!("attribute {name} of `{css}`"), |_| async move {
            element.attr(name).await
        })
    }

    /// The DOM property `name` of the first element matching `css`, e.g. an input's current
    /// `value` (`None`: null or undefined).
    pub fn property(&self, css: &str, name: &str) -> Result<Option<String>, String> {
        let element = self.find(css)?;
        self.run(&format!("property {name} of `{css}`"), |_| async move {
            element.prop(name).await
        })
    }

    /// Clicks the first element matching `css` (as a user would: it must be visible).
    pub fn click(&self, css: &str) -> Result<(), String> {
        let element = self.find(css)?;
        self.run(&format!("click `{css}`"), |_| async move {
            element.click().await
        })
    }

    /// Types `text` into the first element matching `css`.
    pub fn send_keys(&self, css: &str, text: &str) -> Result<(), String> {
        let element = self.find(css)?;
        self.run(&format!("send keys to `{css}`"), |_| async move {
            element.send_keys(text).await
        })
    }

    /// Waits, at most `timeout_ms`, until an element matches `css`.
    pub fn wait_for(&self, css: &str, timeout_ms: u64) -> Result<(), String> {
        self.wait_until(&format!("wait for `{css}`"), timeout_ms, |c| async move {
            let found = c.find_all(Locator::Css(css)).await?;
            Ok((!found.is_empty()).then_some(()))
        })
        .map_err(|e| self.with_url(e))
    }

    /// Waits, at most `timeout_ms`, until the first element matching `css` has `needle` in its
    /// text; returns that text.
    pub fn wait_for_text(
        &self,
        css: &str,
        needle: &str,
        timeout_ms: u64,
    ) -> Result<String, String> {
        let what = format!("wait for {needle:?} in `{css}`");
        let last = std::cell::RefCell::new(None::<String>);
        self.wait_until(&what, timeout_ms, |c| {
            let last = &last;
            async move {
                let Some(element) = c.find_all(Locator::Css(css)).await?.into_iter().next() else {
                    return Ok(None);
                };
                let text = element.text().await?;
                let found = text.contains(needle).then(|| text.clone());
                *last.borrow_mut() = Some(text);
                Ok(found)
            }
        })
        .map_err(|e| match last.into_inner() {
            Some(text) => self.with_url(format!("{e}; its text was {text:?}")),
            None => self.with_url(format!("{e}; no element matched")),
        })
    }

    /// Polls `check` every [`POLL_MS`] until it gives `Some`, at most `timeout_ms` in all (each
    /// check bounded too); a WebDriver error other than a stale element ends the wait.
    fn wait_until<T, F>(
        &self,
        what: &str,
        timeout_ms: u64,
        check: impl Fn(Client) -> F,
    ) -> Result<T, String>
    where
        F: Future<Output = Result<Option<T>, fantoccini::error::CmdError>>,
    {
        let client = self
            .client
            .clone()
            .ok_or_else(|| format!("{what}: the browser session is closed"))?;
        let deadline = Instant::now() + Duration::from_millis(timeout_ms);
        let poll = async {
            loop {
                match check(client.clone()).await {
                    Ok(Some(found)) => return Ok(found),
                    Ok(None) => {}
                    // The page changed under the check (a navigation, a re-render): look again.
                    Err(e) if is_stale(&e) => {}
                    Err(e) => return Err(format!("{what}: {e}")),
                }
                if Instant::now() >= deadline {
                    return Err(format!("{what}: not within {timeout_ms} ms"));
                }
                tokio::time::sleep(Duration::from_millis(POLL_MS)).await;
            }
        };
        bounded(&self.runtime, timeout_ms + COMMAND_TIMEOUT_MS, poll)
            .map_err(|e| format!("{what}: {e}"))?
    }

    /// `message` and the URL shown now, for a failed wait.
    fn with_url(&self, message: String) -> String {
        match self.current_url() {
            Ok(url) => format!("{message} (at {url})"),
            Err(_) => message,
        }
    }

    /// Runs `script` (a function body: `return` gives its value) in the page and gives what it
    /// returns as JSON; a returned promise is awaited, so `return fetch(...).then(...)` works.
    pub fn execute(&self, script: &str) -> Result<Value, String> {
        self.run("execute a script", |c| async move {
            c.execute(script, Vec::new()).await
        })
    }

    /// Saves a PNG of the viewport to `path`, creating its directory.
    pub fn screenshot(&self, path: &Path) -> Result<(), String> {
        let png = self.run("screenshot", |c| async move { c.screenshot().await })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        }
        std::fs::write(path, png).map_err(|e| format!("cannot write {}: {e}", path.display()))
    }

    /// The cookies of the page shown now, `HttpOnly` ones included.
    pub fn cookies(&self) -> Result<Vec<Cookie>, String> {
        let all = self.run("get cookies", |c| async move { c.get_all_cookies().await })?;
        Ok(all
            .into_iter()
            .map(|c| Cookie {
                name: c.name().to_string(),
                value: c.value().to_string(),
                http_only: c.http_only().unwrap_or(false),
                secure: c.secure().unwrap_or(false),
                same_site: c.same_site().map(|s| s.to_string()),
                path: c.path().map(str::to_string),
            })
            .collect())
    }

    /// Deletes the cookie `name` of the page shown now.
    pub fn delete_cookie(&self, name: &str) -> Result<(), String> {
        self.run(&format!("delete cookie {name}"), |c| async move {
            c.delete_cookie(name).await
        })
    }

    /// Deletes every cookie of the page shown now (a signed-out browser).
    pub fn delete_cookies(&self) -> Result<(), String> {
        self.run(
            "delete cookies",
            |c| async move { c.delete_all_cookies().await },
        )
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Ending the session makes chromedriver quit Chromium; bounded, so a wedged browser
        // cannot hang the test. Then `driver` goes, with whatever is left of Chromium.
        if let Some(client) = self.client.take() {
            let _ = bounded(&self.runtime, COMMAND_TIMEOUT_MS, client.close());
        }
    }
}

/// Whether `error` says an element went away under a wait (the page changed; look again).
fn is_stale(error: &fantoccini::error::CmdError) -> bool {
    matches!(
        error,
        fantoccini::error::CmdError::Standard(e)
            if e.error == fantoccini::error::ErrorStatus::StaleElementReference
                || e.error == fantoccini::error::ErrorStatus::NoSuchElement
    )
}
