//! How `boxctl status` shows loopd's status: a line each for loopd, the broker (and under it
//! the walls of brokerd's `exec` tool, when brokerd reports them) and llama-server.

use boxctl::answers::{duration_words, status_text};
use proto::api::{BrokerStatus, LlamaStatus, LoopdStatus, SlotRoles, Status};

/// A status whose broker is `broker`.
fn status(broker: BrokerStatus) -> Status {
    Status {
        loopd: LoopdStatus {
            version: "0.1.0".into(),
            uptime_s: 3_723,
            running: 1,
            queued: 0,
        },
        broker,
        llama: LlamaStatus {
            url: "http://127.0.0.1:8080".into(),
            ok: false,
            error: Some("connection refused".into()),
            n_ctx: 8192,
            total_slots: 3,
            model: "fakellama".into(),
            slots: SlotRoles {
                main: 0,
                background: 1,
                subagent: 2,
            },
            endpoints: Vec::new(),
        },
        usage: proto::api::UsageToday {
            day: "2026-12-01".into(),
            timezone: "UTC".into(),
            totals: proto::api::UsageTotals::default(),
            max_generated_tokens_per_day: None,
        },
        kv: None,
    }
}

/// brokerd at its usual socket, answering, with `exec` as its health reported it.
fn brokerd(exec: Option<&str>) -> BrokerStatus {
    BrokerStatus {
        kind: "brokerd".into(),
        socket: Some("/run/boxmaker/brokerd.sock".into()),
        ok: true,
        note: "tools run under brokerd's grants".into(),
        exec: exec.map(str::to_string),
        checkpoints: None,
    }
}

/// Today's line of a day nothing was spent, without a day budget.
const QUIET_DAY: &str = "usage   today 2026-12-01 (UTC): 0 turns, 0 model calls, 0 tokens \
                         evaluated, 0 cached, 0 generated, model 0.0s, 0 tool calls\n";

const LLAMA_LINE: &str = "llama   http://127.0.0.1:8080: NOT OK: connection refused; model \
                          fakellama, n_ctx 8192, 3 slots (main 0, background 1, subagent 2)\n";

#[test]
fn format_status_names_loopd_broker_and_llama() {
    let fake = BrokerStatus {
        kind: "fake".into(),
        socket: None,
        ok: true,
        note: "fake tools (no broker configured)".into(),
        exec: None,
        checkpoints: None,
    };
    assert_eq!(
        status_text(&status(fake)),
        format!(
            "loopd   0.1.0, up 1h 2m; 1 running, 0 queued\n\
             broker  fake: ok; fake tools (no broker configured)\n{LLAMA_LINE}{QUIET_DAY}"
        )
    );
    assert_eq!(duration_words(7), "7s");
    assert_eq!(duration_words(65), "1m 5s");
    assert_eq!(duration_words(90_000), "1d 1h");
}

#[test]
fn format_status_puts_the_exec_walls_under_the_broker() {
    let broker_line = "broker  brokerd at /run/boxmaker/brokerd.sock: ok; \
                       tools run under brokerd's grants\n";
    let up = status_text(&status(brokerd(Some("bubblewrap + Landlock v4"))));
    assert_eq!(
        up,
        format!(
            "loopd   0.1.0, up 1h 2m; 1 running, 0 queued\n{broker_line}\
             \x20       exec: bubblewrap + Landlock v4\n{LLAMA_LINE}{QUIET_DAY}"
        )
    );
    let down = status_text(&status(brokerd(Some(
        "unavailable: user namespaces are disabled",
    ))));
    assert!(
        down.contains(&format!(
            "{broker_line}        exec: unavailable: user namespaces are disabled\nllama   "
        )),
        "{down}"
    );
    // A brokerd from before issue 15 reports nothing: no exec line.
    let older = status_text(&status(brokerd(None)));
    assert!(!older.contains("exec"), "{older}");
    assert!(older.contains(&format!("{broker_line}llama   ")), "{older}");
    // What brokerd keeps for undo, under the broker too.
    let kept = "4 write(s) of 2 session(s) kept, 120 of 67108864 bytes";
    let mut with_undo = brokerd(Some("bubblewrap + Landlock v4"));
    with_undo.checkpoints = Some(kept.into());
    let text = status_text(&status(with_undo));
    assert!(
        text.contains(&format!(
            "        exec: bubblewrap + Landlock v4\n        undo: {kept}\nllama   "
        )),
        "{text}"
    );
}

#[test]
fn format_status_keeps_brokerds_exec_text_on_one_line() {
    // brokerd's words are shown as they came: a newline or escape in them must not forge a
    // line of the status or drive the terminal.
    let forged = status_text(&status(brokerd(Some(
        "unavailable: x\nllama   http://evil: ok\x1b[2J",
    ))));
    assert_eq!(forged.lines().count(), 5, "{forged}");
    assert!(!forged.contains('\x1b'), "{forged:?}");
}

#[test]
fn format_status_shows_todays_usage_and_the_day_budget() {
    let mut st = status(brokerd(None));
    st.usage.timezone = "Europe/Berlin".into();
    st.usage.totals = proto::api::UsageTotals {
        turns: 4,
        model_calls: 9,
        evaluated_tokens: 13_145,
        cached_tokens: 40_000,
        generated_tokens: 2_195,
        model_ms: 62_400,
        tool_calls: 9,
    };
    st.usage.max_generated_tokens_per_day = Some(10_000);
    let text = status_text(&st);
    let usage = text.lines().last().unwrap();
    assert_eq!(
        usage,
        "usage   today 2026-12-01 (Europe/Berlin): 4 turns, 9 model calls, 13145 tokens \
         evaluated, 40000 cached, 2195 generated, model 1m 2s, 9 tool calls; day budget 2195 \
         of 10000 generated tokens"
    );
    st.usage.totals.generated_tokens = 10_000;
    let spent = status_text(&st);
    assert!(
        spent.ends_with(
            "day budget 10000 of 10000 generated tokens (spent: new tasks are refused until \
             the day turns)\n"
        ),
        "{spent}"
    );
    // loopd's words stay on their line.
    st.usage.timezone = "UTC\nllama   forged".into();
    assert_eq!(
        status_text(&st).lines().count(),
        4,
        "loopd, broker, llama, usage"
    );
}

#[test]
fn format_status_lists_each_endpoint_with_state_model_slots_and_last_error() {
    use proto::api::{EndpointSlots, EndpointStatus};
    let mut st = status(brokerd(None));
    let endpoint = |name: &str, state: &str, error: Option<&str>| EndpointStatus {
        name: name.into(),
        url: format!("https://{name}.lan:8443"),
        state: state.into(),
        model: (state == "up").then(|| "qwen".to_string()),
        n_ctx: None,
        total_slots: (state == "up").then_some(4),
        slots: EndpointSlots {
            main: vec![0, 1],
            background: vec![2],
            subagent: vec![],
        },
        sessions: 3,
        last_error: error.map(str::to_string),
    };
    st.llama.ok = true;
    st.llama.model = "qwen".into();
    st.llama.endpoints = vec![
        endpoint("cupboard", "up", None),
        endpoint(
            "attic",
            "down",
            Some("connection refused\nllama   forged: ok"),
        ),
    ];
    let text = status_text(&st);
    let expected = "llama   2 endpoints, 1 up: ok; model qwen, n_ctx 8192\n\
        \x20       cupboard https://cupboard.lan:8443: UP; model qwen, 4 slots; main 0,1, background 2, subagent -; 3 sessions\n\
        \x20       attic https://attic.lan:8443: DOWN; not reached yet; main 0,1, background 2, subagent -; 3 sessions\n\
        \x20         last error: connection refused ⏎ llama   forged: ok\n";
    assert!(text.contains(expected), "{text}");
    // A model server's words cannot forge a line or drive the terminal.
    st.llama.endpoints[0].model = Some("qwen\nloopd   forged\x1b[2J".into());
    let forged = status_text(&st);
    assert_eq!(forged.lines().count(), 7, "{forged}");
    assert!(!forged.contains('\x1b'), "{forged:?}");
    // One endpoint: the one line of before.
    st.llama.endpoints.truncate(1);
    assert!(status_text(&st).contains("llama   http://127.0.0.1:8080: ok; model qwen"));
}

#[test]
fn the_kv_files_get_a_line_before_the_usage_with_their_hit_rate() {
    let mut st = status(brokerd(None));
    st.kv = Some(proto::api::KvStatus {
        dir: "/var/lib/boxmaker/loopd/kv".into(),
        files: 3,
        bytes: 30 * 1024 * 1024,
        max_bytes: 4096 * 1024 * 1024,
        saves: 5,
        saves_after_turn: 4,
        save_failures: 0,
        restores: 3,
        misses: 1,
        restore_failures: 0,
        off: vec!["gpu\u{1b}[2J".into()],
        choices: Vec::new(),
    });
    let text = status_text(&st);
    let lines: Vec<&str> = text.lines().collect();
    let kv = lines[lines.len() - 2];
    assert!(
        kv.starts_with("kv      3 files, 30 MiB of 4096 MiB"),
        "{kv}"
    );
    assert!(
        kv.contains("3 restored, 1 missed, 0 failed (75% hit); 5 saved (4 after a turn)"),
        "{kv}"
    );
    assert!(kv.contains("off on gpu"), "{kv}");
    assert!(!kv.contains('\u{1b}'), "{kv}");
    assert!(
        lines[lines.len() - 1].starts_with("usage   today"),
        "{text}"
    );
}

#[test]
fn each_endpoint_says_whether_files_or_prefill_and_what_it_measured() {
    let mut st = status(brokerd(None));
    st.kv = Some(proto::api::KvStatus {
        max_bytes: 1024,
        choices: vec![
            proto::api::KvChoice {
                endpoint: "gpu".into(),
                choice: "prefill".into(),
                prefill_us_per_1k_tokens: Some(2_400),
                file_us_per_1k_tokens: Some(15_300),
            },
            proto::api::KvChoice {
                endpoint: "cpu".into(),
                choice: "measuring".into(),
                prefill_us_per_1k_tokens: None,
                file_us_per_1k_tokens: None,
            },
        ],
        ..proto::api::KvStatus::default()
    });
    let text = status_text(&st);
    assert!(
        text.contains(
            "        gpu: prefill (per 1k tokens at a switch: save and restore 15.3 ms, prefill 2.4 ms)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains("        cpu: measuring (per 1k tokens at a switch: save and restore not measured, prefill not measured)"),
        "{text}"
    );
}
