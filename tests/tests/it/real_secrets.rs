#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A secret on the real default model (Qwen2.5-Coder-0.5B behind the real llama-server): an
//! `http_fetch` grant attaches the secret `api` as a header; the owner asks the model to fetch a
//! page that echoes the header back, as a careless API would. The server gets the header with
//! the value; the model gets the page with `{secret:api}` in its place, and no record of the
//! session, no audit line and no line brokerd logs holds the value. Run without the model
//! parts, the test passes quietly, as the other real-model tests do.

use bxcore::{LogRecord, SessionId};
use e2e::real::{LlamaServer, RealParts, boxctl_within, one_at_a_time, template};
use e2e::{Stack, binary, show, start_brokerd_with};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The secret's value.
const VALUE: &str = "sk-live-qwen-7a3f9c2e51";

/// The longest the task may take on 2 cores.
const TASK_LIMIT_MS: u64 = 300_000;

/// A server that answers every GET with the `X-Api-Key` header it got, and records each one.
fn echoing_server() -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut key = String::new();
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 2 {
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("x-api-key")
                {
                    key = value.trim().to_string();
                }
                line.clear();
            }
            log.lock().unwrap().push(key.clone());
            let body = format!("Account status: active. You are signed in with key {key}.");
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
                 connection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (port, seen)
}

/// brokerd in `dir` holding the secret, its `http_fetch` grant on the server at `port`, its
/// log in `dir/brokerd.log`.
fn start_brokerd(dir: &Path, port: u16) -> e2e::Running {
    let secret = dir.join("api.secret");
    std::fs::write(&secret, VALUE).unwrap();
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o600)).unwrap();
    let rest = format!(
        "[[secrets]]\nname = \"api\"\nfile = {secret:?}\n\
         [[grants]]\ntool = \"http_fetch\"\nhosts = [\"127.0.0.1:{port}\"]\n\
         networks = [\"127.0.0.0/8\"]\nallow_http_secrets = true\n\
         [grants.headers]\nX-Api-Key = \"{{secret:api}}\"\n"
    );
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!(
            "exec \"$0\" \"$@\" 2>>{}",
            dir.join("brokerd.log").display()
        ))
        .arg(binary("brokerd"));
    start_brokerd_with(command, dir, &rest)
}

#[test]
fn qwen_fetches_with_an_attached_key_and_sees_only_its_placeholder() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    let _one = one_at_a_time();
    let (port, seen) = echoing_server();
    let dir = tempfile::tempdir().unwrap();
    let _brokerd = start_brokerd(dir.path(), port);
    let file = template("qwen2.5-tools.jinja");
    let mut args = vec![
        "-c",
        "4096",
        "--parallel",
        "3",
        "--temp",
        "0",
        "--seed",
        "7",
    ];
    args.extend(["--chat-template-file", file.to_str().unwrap()]);
    let server = LlamaServer::start(&parts.llama_server, &parts.qwen, &args).unwrap();
    let toml = format!(
        "[broker]\nsocket = {:?}\ncore_tools = [\"http_fetch\"]\n[loop]\nmax_steps = 3\n\
         [llama]\nmax_answer_tokens = 120\n",
        dir.path().join("brokerd.sock")
    );
    let stack = Stack::with_model(
        tempfile::tempdir().unwrap(),
        server.running,
        server.url,
        &toml,
    )
    .unwrap();
    let task =
        format!("Use http_fetch to get http://127.0.0.1:{port}/account and tell me what it says.");
    let limit = Duration::from_millis(TASK_LIMIT_MS);
    let out = boxctl_within(&stack, &["task", "--session", "owner", &task], limit).unwrap();
    // The turn must end; how is the model's affair. After a tool result Qwen often goes on
    // calling tools until the step limit, with or without a placeholder in the page (tried
    // both): what this test holds is where the value goes, not the answer.
    let stopped = String::from_utf8_lossy(&out.stderr).contains("step limit");
    assert!(out.status.code() == Some(0) || stopped, "{}", show(&out));

    // The model called the tool, and the server got the key brokerd attached.
    let keys = seen.lock().unwrap().clone();
    assert!(
        !keys.is_empty(),
        "Qwen never fetched the page: {}",
        show(&out)
    );
    assert!(keys.iter().all(|key| key == VALUE), "{keys:?}");

    // What the model got is the placeholder; the value is nowhere on loopd's side of the box.
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    let records = store.read(&SessionId::new("owner").unwrap()).unwrap();
    let pages: Vec<&String> = records
        .iter()
        .filter_map(|r| match r {
            LogRecord::ToolResult { content, .. } => Some(content),
            _ => None,
        })
        .collect();
    assert!(
        pages.iter().any(|page| page.contains("{secret:api}")),
        "{pages:?}"
    );
    let log = stack.log_text("owner");
    assert!(!log.contains(VALUE), "{log}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains(VALUE));
    let audit = std::fs::read_to_string(dir.path().join("brokerd-state/audit.jsonl")).unwrap();
    assert!(audit.contains("\"redacted\":[\"api\"]"), "{audit}");
    let brokerd_log = std::fs::read_to_string(dir.path().join("brokerd.log")).unwrap();
    assert!(!audit.contains(VALUE) && !brokerd_log.contains(VALUE));
}
