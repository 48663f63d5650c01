#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A session whose log holds a tool call cut at the token limit, against the real
//! llama-server with Qwen2.5-Coder-0.5B and its tool template (issue 12, point 2): the server
//! refuses any history holding such a call (500 "Failed to parse tool call arguments as
//! JSON"), which killed sessions for good; loopd now never sends it back as a call, so the
//! session takes a new task. Skipped without the parts, unless BOXMAKER_REQUIRE_REAL_MODEL=1.

use bxcore::{CallId, DataClass, LogRecord, SessionId, Timestamp, ToolCall, ToolOutcome, TurnEnd};
use e2e::Stack;
use e2e::real::{LlamaServer, RealParts, boxctl_within, one_at_a_time, template};
use loopd::turn::CUT_CALL;
use std::io::{Read, Write};
use std::time::Duration;

/// The longest one `boxctl task` may take before the test calls it a hang.
const TASK_LIMIT: Duration = Duration::from_secs(180);
/// The longest the server may take to refuse a request (it refuses before generating).
const REFUSAL_LIMIT: Duration = Duration::from_secs(30);
/// Arguments cut inside a string, as the model's were when its answer hit the token limit.
const CUT_ARGUMENTS: &str = r#"{"name":"echo","arguments":{"text":"a long te"#;

/// `POST /v1/chat/completions` with `body` to the server at `url`: status and body.
fn post_chat(url: &str, body: &str) -> (u16, String) {
    let address = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(REFUSAL_LIMIT)).unwrap();
    let request = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = answer.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

/// Turn 1 as loopd logged it before the fix: the cut call, its "not run" result, and the 500
/// that failed the turn.
fn write_cut_turn(stack: &Stack, id: &str) {
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    let mut session = store.create(&SessionId::new(id).unwrap()).unwrap();
    let time = Timestamp::now();
    let records = [
        LogRecord::User {
            time,
            turn: 1,
            content: "Echo a long text.".into(),
            task_id: None,
        },
        LogRecord::Assistant {
            time,
            content: String::new(),
            reasoning: None,
            tool_calls: vec![ToolCall {
                id: "cut1".into(),
                name: "call_tool".into(),
                arguments: CUT_ARGUMENTS.into(),
            }],
            usage: None,
        },
        LogRecord::ToolResult {
            time,
            call: CallId(1),
            tool_call_id: "cut1".into(),
            content: CUT_CALL.into(),
            class: DataClass::Public,
            untrusted: false,
            truncated: false,
            outcome: ToolOutcome::Failed,
            by_loopd: true,
        },
        LogRecord::TurnEnd {
            time,
            turn: 1,
            end: TurnEnd::Failed {
                reason: "llama-server failed (HTTP 500, server_error): Failed to parse tool \
                         call arguments as JSON"
                    .into(),
            },
        },
    ];
    for record in records {
        session.append(record).unwrap();
    }
}

#[test]
fn qwen_a_session_holding_a_cut_call_takes_a_new_task() {
    let Some(parts) = RealParts::from_env() else {
        return;
    };
    let _one = one_at_a_time();
    let file = template("qwen2.5-tools.jinja");
    // Short answers (`-n`): the test is about the request being taken, not the answer.
    let args = [
        "-c",
        "3072",
        "--parallel",
        "3",
        "--temp",
        "0",
        "--seed",
        "7",
        "-lv",
        "2",
        "-n",
        "24",
        "--chat-template-file",
        file.to_str().unwrap(),
    ];
    let server = LlamaServer::start(&parts.llama_server, &parts.qwen, &args).unwrap();

    // What the server does with such a history, sent as loopd sent it before the fix.
    let history = serde_json::json!({"messages": [
        {"role": "user", "content": "Echo a long text."},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "cut1", "type": "function",
            "function": {"name": "call_tool", "arguments": CUT_ARGUMENTS}}]},
        {"role": "tool", "tool_call_id": "cut1", "content": CUT_CALL},
        {"role": "user", "content": "Say OK."}
    ]});
    let (status, body) = post_chat(&server.url, &history.to_string());
    assert_eq!(status, 500, "{body}");
    assert!(
        body.contains("Failed to parse tool call arguments as JSON")
            && body.contains("server_error"),
        "{body}"
    );

    let dir = tempfile::tempdir().unwrap();
    let mut stack =
        Stack::with_model(dir, server.running, server.url, "[loop]\nmax_steps = 4\n").unwrap();
    write_cut_turn(&stack, "cut");
    let out = boxctl_within(&stack, &["task", "--session", "cut", "Say OK."], TASK_LIMIT)
        .unwrap_or_else(|hang| panic!("{hang}"));
    let shown = format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let store = loopd::session::Store::new(&stack.dir.path().join("state")).unwrap();
    let records = store.read(&SessionId::new("cut").unwrap()).unwrap();
    let end = records.iter().rev().find_map(|r| match r {
        LogRecord::TurnEnd { turn: 2, end, .. } => Some(end.clone()),
        _ => None,
    });
    // Any end but a failed model call: the model may answer or call a tool (to its limit).
    assert!(
        matches!(end, Some(TurnEnd::Done | TurnEnd::MaxSteps)),
        "{end:?}\n{shown}"
    );
    assert!(
        stack.loopd.as_mut().unwrap().exited().is_none(),
        "loopd died"
    );
}
