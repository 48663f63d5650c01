//! What the attacks share: a page server under the attacker's control, fakellama script
//! steps, and brokerd started with a test's grants.

use e2e::{Running, Stack, StackOptions, binary};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The private data the attacks try to get out.
pub const SECRET: &str = "SECRET-TOKEN-4242";

/// Serves `body(port)` for every request on loopback and records the path of each request.
pub fn page_server_with(
    body: impl Fn(u16) -> String + Send + 'static,
) -> (u16, Arc<Mutex<Vec<String>>>) {
    http_server_with(move |port, _path| {
        let body = body(port);
        format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{body}",
            body.len()
        )
    })
}

/// Answers every request on loopback with `response(port, path)`, a whole HTTP/1.1 response
/// as text, and records the path of each request.
pub fn http_server_with(
    response: impl Fn(u16, &str) -> String + Send + 'static,
) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut first = String::new();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            reader.read_line(&mut first).unwrap_or_default();
            let path = first.split_whitespace().nth(1).unwrap_or("").to_string();
            // Read the rest of the head.
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                line.clear();
            }
            log.lock().unwrap().push(path.clone());
            let _ = stream.write_all(response(port, &path).as_bytes());
        }
    });
    (port, seen)
}

/// Writes `tools` (name, description, text, is_error) as a `brokerd-test-mcp tools` spec in
/// `dir` and returns the `[[mcp]]` section (prefix `prefix`) that serves them.
pub fn scripted_mcp(dir: &Path, prefix: &str, tools: &[(&str, &str, &str, bool)]) -> String {
    let spec = dir.join(format!("{prefix}-tools.json"));
    let tools: Vec<serde_json::Value> = tools
        .iter()
        .map(|(name, description, text, is_error)| {
            serde_json::json!({
                "name": name, "description": description, "text": text, "is_error": is_error,
            })
        })
        .collect();
    std::fs::write(&spec, serde_json::json!({ "tools": tools }).to_string()).unwrap();
    format!(
        "[[mcp]]\nname = {}\ncommand = {:?}\nargs = [\"tools\", {spec:?}]\nprefix = {}\n",
        toml_string(prefix),
        binary("brokerd-test-mcp"),
        toml_string(prefix)
    )
}

/// Runs `task` on session `session` of `stack` with boxctl, asserts it ended `done`, and gives
/// the session's records.
pub fn run_task(stack: &Stack, session: &str, task: &str) -> Vec<bxcore::LogRecord> {
    let run = stack.boxctl(&["task", "--session", session, task]);
    assert_eq!(
        run.status.code(),
        Some(0),
        "{}\n{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    records(stack, session)
}

/// The records of session `session` of `stack`.
pub fn records(stack: &Stack, session: &str) -> Vec<bxcore::LogRecord> {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    store
        .read(&bxcore::SessionId::new(session).unwrap())
        .unwrap()
}

/// The tool results of `records`: outcome, labels and content, in order.
pub fn results(
    records: &[bxcore::LogRecord],
) -> Vec<(bxcore::ToolOutcome, bxcore::Labels, String)> {
    records
        .iter()
        .filter_map(|r| match r {
            bxcore::LogRecord::ToolResult {
                outcome,
                class,
                untrusted,
                content,
                ..
            } => Some((
                *outcome,
                bxcore::Labels::new(*class, *untrusted),
                content.clone(),
            )),
            _ => None,
        })
        .collect()
}

/// A fakellama step that calls `name` with `arguments` (JSON text) through `call_tool`.
pub fn call_tool(name: &str, arguments: &str) -> String {
    let inner = format!("{{\"name\":\"{name}\",\"arguments\":{arguments}}}");
    format!(
        "tool_calls = [{{ name = \"call_tool\", arguments = {} }}]",
        toml_string(&inner)
    )
}

/// A fakellama step that fetches `url` through `call_tool`.
pub fn fetch(url: &str) -> String {
    call_tool("http_fetch", &serde_json::json!({ "url": url }).to_string())
}

/// A grant of `http_fetch` on the loopback server at `port` (`networks` says loopback may be
/// reached: it is where the tests' servers are).
pub fn loopback_fetch_grant(port: u16) -> String {
    format!(
        "[[grants]]\ntool = \"http_fetch\"\nhosts = [\"127.0.0.1:{port}\"]\n\
         networks = [\"127.0.0.0/8\"]\n"
    )
}

/// `text` as a TOML basic string.
pub fn toml_string(text: &str) -> String {
    format!("\"{}\"", text.replace('\\', "\\\\").replace('"', "\\\""))
}

/// A fakellama script: each step answers, once, the first message of `role` that holds
/// `contains`, with `answer` (a TOML fragment: `reply = ...` or `tool_calls = ...`).
pub fn script(steps: &[(&str, &str, String)]) -> String {
    steps
        .iter()
        .map(|(role, contains, answer)| {
            format!(
                "[[rule]]\nwhen_role = \"{role}\"\nwhen_contains = {}\ntimes = 1\n{answer}\n",
                toml_string(contains)
            )
        })
        .collect()
}

/// Starts brokerd in `dir` with `grants` (TOML) as the rest of its config.
pub fn start_brokerd(dir: &Path, grants: &str) -> Running {
    e2e::start_brokerd(dir, grants)
}

/// A server that answers every request `200 ok`, and the paths it was asked for: where a leak
/// would land.
pub fn collecting_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    http_server_with(|_, _| {
        "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok".to_string()
    })
}

/// loopd's config for a test of brokerd's own layer (grants, labels, asking the owner in an
/// untrusted context): loopd's check of paths the owner gave (`[loop] owner_paths_tools`,
/// `docs/security.md`, "Paths the owner gave") is off, so a write to a path an injection chose,
/// which that check would answer before brokerd sees it, reaches brokerd, whose decision the
/// test is about. A stack holding it must have no other `[loop]` section.
pub const BROKERD_LAYER_ONLY: &str = "[loop]\nowner_paths_tools = []\n";

/// fakellama playing `steps`, and loopd using the brokerd started in `dir`, with `loopd_toml`
/// added to loopd's config.
pub fn stack_with_brokerd(dir: &Path, steps: &[(&str, &str, String)], loopd_toml: &str) -> Stack {
    Stack::start(StackOptions {
        script: script(steps),
        loopd_toml: format!(
            "[broker]\nsocket = {:?}\n{loopd_toml}",
            dir.join("brokerd.sock")
        ),
        ..Default::default()
    })
    .unwrap()
}

/// What came of each request in brokerd's audit log in `dir/brokerd-state`: the `reason` of
/// its last line (or, without one, the `decision`), and the log's text. A call that ran has a
/// `decided` line before it ran and a `finished` line after, which must agree on the call.
pub fn audit_reasons(dir: &Path) -> (Vec<String>, String) {
    let audit = std::fs::read_to_string(dir.join("brokerd-state/audit.jsonl")).unwrap();
    let lines: Vec<serde_json::Value> = audit
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let mut reasons = Vec::new();
    let mut started: Option<&serde_json::Value> = None;
    for v in &lines {
        if v["event"] == "decided" && v["decision"] == "allowed" {
            assert!(started.is_none(), "two calls started at once: {audit}");
            started = Some(v);
            continue;
        }
        if v["event"] == "finished" {
            let decided = started
                .take()
                .expect("a finished line follows its decided line");
            assert_eq!(
                (&decided["call"], &decided["args_sha256"]),
                (&v["call"], &v["args_sha256"]),
                "{audit}"
            );
        }
        reasons.push(match v["reason"].as_str() {
            Some(reason) => reason.to_string(),
            None => v["decision"].as_str().unwrap_or("?").to_string(),
        });
    }
    assert!(started.is_none(), "a call has no outcome: {audit}");
    (reasons, audit)
}
