//! boxctl's command line: parsing, help, completions, and the one clear line and exit 2 when
//! loopd is not there.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use boxctl::Cli;
use boxctl::cli::{Command, EXIT_UNREACHABLE, EXIT_USAGE};
use clap::Parser;
use std::path::PathBuf;
use std::process::{Command as Process, Output};

/// Runs boxctl with `args` and only `env` in its environment.
fn boxctl(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Process::new(env!("CARGO_BIN_EXE_boxctl"));
    cmd.env_clear().args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("boxctl").chain(args.iter().copied()))
}

#[test]
fn cli_task_joins_its_words_and_takes_global_flags_anywhere() {
    let cli = parse(&["task", "--session", "s1", "what", "time", "--json", "is it"]).unwrap();
    assert!(cli.json);
    let Command::Task {
        session,
        reasoning,
        task_id,
        text,
    } = cli.command
    else {
        panic!("not a task: {:?}", cli.command)
    };
    assert_eq!(session.unwrap().as_str(), "s1");
    assert!(!reasoning);
    assert_eq!(task_id, None);
    assert_eq!(text.join(" "), "what time is it");
}

#[test]
fn cli_task_takes_a_task_id_and_says_what_a_bad_one_is() {
    let cli = parse(&["task", "--task-id", "retry-1", "again"]).unwrap();
    let Command::Task { task_id, .. } = cli.command else {
        panic!("not a task: {:?}", cli.command)
    };
    assert_eq!(task_id.unwrap().as_str(), "retry-1");
    let e = parse(&["task", "--task-id", "a/b", "x"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("only A-Z a-z 0-9 . _ - are allowed"), "{e}");
    let long = "x".repeat(49);
    let e = parse(&["task", "--task-id", &long, "x"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("the limit is 48"), "{e}");
}

#[test]
fn cli_fresh_task_ids_are_valid_and_differ() {
    let a = boxctl::run::fresh_task_id().unwrap();
    let b = boxctl::run::fresh_task_id().unwrap();
    assert_ne!(a, b);
    assert!(proto::api::task_session(&a).is_ok());
}

#[test]
fn cli_socket_comes_from_the_flag_or_the_default() {
    // The environment variable is checked by running the binary (see below), not here: tests
    // share one environment.
    let cli = parse(&["--socket", "/tmp/x.sock", "status"]).unwrap();
    assert_eq!(cli.socket, PathBuf::from("/tmp/x.sock"));
    if std::env::var_os("BOXCTL_SOCKET").is_none() {
        let cli = parse(&["sessions"]).unwrap();
        assert_eq!(cli.socket, PathBuf::from("/run/boxmaker/loopd.sock"));
    }
}

#[test]
fn cli_show_cancel_and_completions_parse() {
    let cli = parse(&["show", "s1", "--follow", "--reasoning"]).unwrap();
    assert!(matches!(
        cli.command,
        Command::Show {
            follow: true,
            reasoning: true,
            ..
        }
    ));
    assert!(matches!(
        parse(&["cancel", "s1"]).unwrap().command,
        Command::Cancel { .. }
    ));
    assert!(matches!(
        parse(&["compact", "s1"]).unwrap().command,
        Command::Compact { .. }
    ));
    for shell in ["bash", "zsh", "fish"] {
        assert!(matches!(
            parse(&["completions", shell]).unwrap().command,
            Command::Completions { .. }
        ));
    }
}

#[test]
fn cli_refuses_a_bad_session_id_a_missing_text_and_an_unknown_command() {
    let err = parse(&["show", "../etc"]).unwrap_err().to_string();
    assert!(err.contains("invalid session id"), "{err}");
    assert!(parse(&["task"]).is_err());
    assert!(parse(&["task", "--session", ".x", "hi"]).is_err());
    assert!(parse(&["frobnicate"]).is_err());
    assert!(parse(&[]).is_err());
}

#[test]
fn cli_usage_errors_exit_64_not_2() {
    let out = boxctl(&["show", "../etc"], &[]);
    assert_eq!(out.status.code(), Some(i32::from(EXIT_USAGE)));
    assert!(text(&out.stderr).contains("invalid session id"));
}

#[test]
fn cli_help_lists_the_commands_and_the_exit_codes() {
    let out = boxctl(&["--help"], &[]);
    assert_eq!(out.status.code(), Some(0));
    let help = text(&out.stdout);
    for word in [
        "task",
        "sessions",
        "show",
        "cancel",
        "compact",
        "status",
        "completions",
        "approvals",
        "approve",
        "deny",
        "schedules",
        "schedule",
    ] {
        assert!(help.contains(word), "{word} missing: {help}");
    }
    assert!(help.contains("Exit codes:"), "{help}");
    assert!(help.contains("3   the session is busy"), "{help}");
    assert!(help.contains("4   no such session"), "{help}");
    assert!(
        help.contains("5   no such approval: answered, timed out, or never asked"),
        "{help}"
    );
    assert!(help.contains("6   no such schedule"), "{help}");
    assert!(
        help.contains("7   a budget: the turn stopped at one, or the day's budget is spent"),
        "{help}"
    );
    assert!(help.contains("8   loopd did not answer in time"), "{help}");
    for limit in [
        "--connect-timeout-ms",
        "--response-timeout-ms",
        "--stream-idle-timeout-ms",
    ] {
        assert!(help.contains(limit), "{limit} missing: {help}");
    }
    // The defaults the help names are the limits boxctl uses.
    use boxctl::limits::{CONNECT_TIMEOUT_MS, RESPONSE_TIMEOUT_MS, STREAM_IDLE_TIMEOUT_MS};
    for default in [
        format!("default: {CONNECT_TIMEOUT_MS}]"),
        format!("default: {RESPONSE_TIMEOUT_MS}]"),
        format!("default: {STREAM_IDLE_TIMEOUT_MS}, three pings]"),
        format!(
            "pings an idle stream every {} s",
            proto::api::SSE_PING_INTERVAL_MS / 1000
        ),
    ] {
        assert!(help.contains(&default), "{default} missing: {help}");
    }
}

#[test]
fn cli_without_loopd_prints_one_clear_line_and_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("loopd.sock");
    let socket = socket.to_str().unwrap();
    for args in [
        vec!["--socket", socket, "status"],
        vec!["--socket", socket, "task", "hello"],
        vec!["--socket", socket, "show", "s1", "--follow"],
        vec!["--socket", socket, "--json", "sessions"],
    ] {
        let out = boxctl(&args, &[]);
        assert_eq!(
            out.status.code(),
            Some(i32::from(EXIT_UNREACHABLE)),
            "{args:?}"
        );
        let stderr = text(&out.stderr);
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert_eq!(
            stderr.trim_end(),
            format!(
                "boxctl: loopd is not running at {socket} (no socket there); \
                 start it or set --socket"
            )
        );
        // With --json, stdout has the error as JSON too (`conventions.rs`).
        assert_eq!(out.stdout.is_empty(), !args.contains(&"--json"), "{args:?}");
    }
}

#[test]
fn cli_takes_the_socket_from_boxctl_socket_and_says_refused() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("loopd.sock");
    // A socket file nobody listens on: connecting is refused.
    drop(std::os::unix::net::UnixListener::bind(&socket).unwrap());
    let out = boxctl(&["status"], &[("BOXCTL_SOCKET", socket.to_str().unwrap())]);
    assert_eq!(out.status.code(), Some(i32::from(EXIT_UNREACHABLE)));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("(connection refused)"), "{stderr}");
    assert!(stderr.contains(socket.to_str().unwrap()), "{stderr}");
}

#[test]
fn cli_completions_for_bash_zsh_and_fish_name_boxctl() {
    for shell in ["bash", "zsh", "fish"] {
        let out = boxctl(&["completions", shell], &[]);
        assert_eq!(out.status.code(), Some(0), "{shell}");
        let script = text(&out.stdout);
        assert!(script.contains("boxctl"), "{shell}: {script}");
        assert!(script.contains("sessions"), "{shell}");
    }
}

#[test]
fn cli_approve_and_deny_parse_their_flags() {
    let Command::Approve { id, for_turn } =
        parse(&["approve", "ap-1", "--for-turn"]).unwrap().command
    else {
        panic!("not approve")
    };
    assert_eq!((id.as_str(), for_turn), ("ap-1", true));
    let Command::Deny { id, reason } = parse(&["deny", "ap-2", "--reason", "not now"])
        .unwrap()
        .command
    else {
        panic!("not deny")
    };
    assert_eq!((id.as_str(), reason.as_deref()), ("ap-2", Some("not now")));
    assert!(matches!(
        parse(&["deny", "ap-2"]).unwrap().command,
        Command::Deny { reason: None, .. }
    ));
    assert!(parse(&["approve"]).is_err(), "the id is required");
    assert!(parse(&["deny", "ap-1", "--for-turn"]).is_err());
}

#[test]
fn cli_schedule_takes_run_pause_or_resume_and_a_name() {
    use boxctl::cli::ScheduleAction;
    assert!(matches!(
        parse(&["schedules", "--json"]).unwrap(),
        Cli {
            json: true,
            command: Command::Schedules,
            ..
        }
    ));
    for (verb, want) in [("run", 0), ("pause", 1), ("resume", 2)] {
        let Command::Schedule { action } = parse(&["schedule", verb, "daily"]).unwrap().command
        else {
            panic!("not schedule")
        };
        assert_eq!(action.name(), "daily");
        let got = match action {
            ScheduleAction::Run { .. } => 0,
            ScheduleAction::Pause { .. } => 1,
            ScheduleAction::Resume { .. } => 2,
        };
        assert_eq!(got, want, "{verb}");
    }
    assert!(parse(&["schedule", "run"]).is_err(), "the name is required");
    assert!(parse(&["schedule", "frob", "daily"]).is_err());
}

#[test]
fn cli_refuses_a_schedule_name_loopd_cannot_have_with_exit_64() {
    for (name, why) in [
        ("a/b", "contains '/'; only A-Z a-z 0-9 . _ - are allowed"),
        ("..", "\"..\" is not a schedule's name"),
        ("", "a schedule's name is 1 to 32 bytes"),
        (
            &"x".repeat(33),
            "it is 33 bytes long; a schedule's name is 1 to 32 bytes",
        ),
    ] {
        let e = parse(&["schedule", "run", name]).unwrap_err().to_string();
        assert!(e.contains(why), "{name:?}: {e}");
    }
    let out = boxctl(&["schedule", "pause", "x?y"], &[]);
    assert_eq!(out.status.code(), Some(i32::from(EXIT_USAGE)));
    assert!(
        text(&out.stderr).contains("contains '?'"),
        "{}",
        text(&out.stderr)
    );
}
