//! The fixture web site: the files of `evals/site/`, served over HTTP/1.1 on a loopback port
//! for the tasks' `http_fetch` calls. Every request's path is kept, so a task under attack can
//! tell whether anything reached the address its injection names.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The most bytes of a request head the site reads.
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// How long the site waits for a request head, in milliseconds.
pub const READ_TIMEOUT_MS: u64 = 5_000;

/// A running fixture site. It serves until the process ends.
#[derive(Debug, Clone)]
pub struct Site {
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

impl Site {
    /// Serves the files of `root` on loopback `port`, or on a free port when it is 0.
    /// `@SITE@` and `@SITE_URL@` in a page are replaced by the site's host and port and its
    /// URL, so the port is part of the prompts of the fetch tasks: a fixed one keeps a run's
    /// prompts the same from one run to the next.
    pub fn start(root: &Path, port: u16) -> std::io::Result<Site> {
        let listener = TcpListener::bind(("127.0.0.1", port)).map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("the fixture site cannot listen on 127.0.0.1:{port}: {e}"),
            )
        })?;
        let port = listener.local_addr()?.port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let site = Site {
            port,
            requests: requests.clone(),
        };
        let root = root.to_path_buf();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (root, requests) = (root.clone(), requests.clone());
                std::thread::spawn(move || serve(stream, &root, port, &requests));
            }
        });
        Ok(site)
    }

    /// `site.test:PORT`, what grants name.
    pub fn host(&self) -> String {
        format!("site.test:{}", self.port)
    }

    /// Every request target asked for so far (path and query), in order.
    pub fn requests(&self) -> Vec<String> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Forgets the requests so far (each task starts with none).
    pub fn clear(&self) {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
    }
}

/// Answers the one request of `stream`.
fn serve(stream: TcpStream, root: &Path, port: u16, requests: &Mutex<Vec<String>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(READ_TIMEOUT_MS)));
    let Ok(mut writer) = stream.try_clone() else {
        return;
    };
    let mut reader = BufReader::new(stream).take_head();
    let mut first = String::new();
    if reader.read_line(&mut first).is_err() {
        return;
    }
    // The rest of the head, unread bodies aside: a GET carries none.
    let mut line = String::new();
    while reader.read_line(&mut line).is_ok_and(|n| n > 0) && line.trim_end() != "" {
        line.clear();
    }
    let target = first.split_whitespace().nth(1).unwrap_or("/").to_string();
    requests
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(target.clone());
    let (status, kind, body) = match page(root, &target) {
        Some((path, text)) => {
            let host = format!("site.test:{port}");
            let body = text
                .replace("@SITE_URL@", &format!("http://{host}"))
                .replace("@SITE@", &host);
            ("200 OK", content_type(&path), body)
        }
        None => ("404 Not Found", "text/plain", "not found\n".to_string()),
    };
    let _ = write!(
        writer,
        "HTTP/1.1 {status}\r\nContent-Type: {kind}; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A reader that stops after [`MAX_HEAD_BYTES`].
trait TakeHead: Sized {
    fn take_head(self) -> std::io::Take<Self>;
}

impl<R: std::io::Read> TakeHead for BufReader<R> {
    fn take_head(self) -> std::io::Take<Self> {
        std::io::Read::take(self, MAX_HEAD_BYTES as u64)
    }
}

/// The file a request target names under `root` and its text: `/` is `index.html`; a query
/// is ignored; a path that climbs out, or names no file, is none.
fn page(root: &Path, target: &str) -> Option<(PathBuf, String)> {
    let path = target.split(['?', '#']).next().unwrap_or("/");
    let path = path.trim_start_matches('/');
    let path = if path.is_empty() { "index.html" } else { path };
    let relative = Path::new(path);
    if relative
        .components()
        .any(|c| !matches!(c, Component::Normal(_)))
    {
        return None;
    }
    let full = root.join(relative);
    let text = std::fs::read_to_string(&full).ok()?;
    Some((full, text))
}

/// The content type of a page, by its extension.
fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html" | "htm") => "text/html",
        Some("json") => "application/json",
        _ => "text/plain",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    fn get(port: u16, target: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(s, "GET {target} HTTP/1.1\r\nHost: site.test\r\n\r\n").unwrap();
        let mut answer = String::new();
        s.read_to_string(&mut answer).unwrap();
        answer
    }

    #[test]
    fn pages_are_served_with_the_site_named_and_requests_kept() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("index.html"),
            "<a href=\"@SITE_URL@/a.txt\">",
        )
        .unwrap();
        std::fs::write(dir.path().join("a.txt"), "fact 4711").unwrap();
        let site = Site::start(dir.path(), 0).unwrap();
        let index = get(site.port, "/");
        assert!(index.starts_with("HTTP/1.1 200"), "{index}");
        assert!(index.contains(&format!("http://site.test:{}/a.txt", site.port)));
        assert!(index.contains("text/html"));
        assert!(get(site.port, "/a.txt?x=1").ends_with("fact 4711"));
        assert!(get(site.port, "/../etc/passwd").starts_with("HTTP/1.1 404"));
        assert!(get(site.port, "/missing").starts_with("HTTP/1.1 404"));
        assert_eq!(
            site.requests(),
            ["/", "/a.txt?x=1", "/../etc/passwd", "/missing"]
        );
        site.clear();
        assert!(site.requests().is_empty());
    }

    #[test]
    fn a_given_port_is_the_one_served_and_a_taken_one_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("index.html"), "@SITE@").unwrap();
        // A port that was free a moment ago: the kernel does not hand it out again at once.
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let site = Site::start(dir.path(), port).unwrap();
        assert_eq!(site.port, port);
        assert!(get(port, "/").ends_with(&format!("site.test:{port}")));
        let taken = Site::start(dir.path(), port).unwrap_err();
        assert!(
            taken.to_string().contains(&format!("127.0.0.1:{port}")),
            "{taken}"
        );
    }
}
