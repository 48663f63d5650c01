//! boxctl as people use CLIs (issue 35): one-line summaries, the exit codes in every
//! command's help, NO_COLOR, errors as JSON with `--json`, and the man pages.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::api_stub::*;
use boxctl::Cli;
use boxctl::cli::{EXIT_CODES_HELP, EXIT_UNREACHABLE, EXIT_USAGE, MAX_ABOUT_CHARS};
use boxctl::run::failure::error_kind;
use clap::CommandFactory;
use proto::api::ApiError;
use std::process::{Command as Process, Output};

/// Runs boxctl with `args` and only `env` in its environment.
fn boxctl_env(args: &[&str], env: &[(&str, &str)]) -> Output {
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

/// Every command's path (`["schedule", "run"]`), hidden ones too, but not clap's `help`.
fn command_paths() -> Vec<Vec<String>> {
    fn walk(cmd: &clap::Command, path: &[String], all: &mut Vec<Vec<String>>) {
        for sub in cmd.get_subcommands() {
            if sub.get_name() == "help" {
                continue;
            }
            let mut here = path.to_vec();
            here.push(sub.get_name().to_string());
            all.push(here.clone());
            walk(sub, &here, all);
        }
    }
    let mut all = Vec::new();
    walk(&Cli::command(), &[], &mut all);
    all
}

#[test]
fn conventions_every_command_has_a_one_line_about_of_a_named_length() {
    let mut checked = 0;
    fn check(cmd: &clap::Command, checked: &mut usize) {
        for sub in cmd.get_subcommands() {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            let name = sub.get_name();
            assert!(!about.is_empty(), "{name} has no about");
            assert!(!about.contains('\n'), "{name}: {about:?}");
            assert!(
                about.chars().count() <= MAX_ABOUT_CHARS,
                "{name}'s about is {} characters (at most {MAX_ABOUT_CHARS}): {about:?}",
                about.chars().count()
            );
            *checked += 1;
            check(sub, checked);
        }
    }
    check(&Cli::command(), &mut checked);
    assert!(checked >= 20, "{checked}");
}

#[test]
fn conventions_every_commands_help_ends_with_the_exit_codes() {
    let paths = command_paths();
    assert!(paths.iter().any(|p| p == &["chat"]), "{paths:?}");
    assert!(
        paths.iter().any(|p| p == &["schedule", "resume"]),
        "{paths:?}"
    );
    let mut all = vec![Vec::new()];
    all.extend(paths);
    for path in all {
        let mut args = vec!["boxctl".to_string()];
        args.extend(path.iter().cloned());
        args.push("--help".into());
        let help = help_of(&args);
        assert!(help.contains(EXIT_CODES_HELP), "{path:?}: {help}");
        assert!(help.contains("64  the command line was wrong"), "{path:?}");
    }
    // The binary prints the same.
    let out = boxctl_env(&["schedule", "pause", "--help"], &[]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains(EXIT_CODES_HELP));
}

/// What clap prints for `args`, which ask for help.
fn help_of(args: &[String]) -> String {
    use clap::Parser;
    let e = Cli::try_parse_from(args).unwrap_err();
    assert_eq!(e.kind(), clap::error::ErrorKind::DisplayHelp, "{args:?}");
    e.to_string()
}

#[test]
fn conventions_no_color_turns_clap_styling_off_even_when_forced() {
    let forced = boxctl_env(&["--help"], &[("CLICOLOR_FORCE", "1")]);
    assert!(
        text(&forced.stdout).contains('\x1b'),
        "clap styles forced help"
    );
    for value in ["1", "true", "0"] {
        let env = [("CLICOLOR_FORCE", "1"), ("NO_COLOR", value)];
        let help = boxctl_env(&["--help"], &env);
        assert!(!text(&help.stdout).contains('\x1b'), "NO_COLOR={value}");
        let refused = boxctl_env(&["frobnicate"], &env);
        assert_eq!(refused.status.code(), Some(i32::from(EXIT_USAGE)));
        assert!(!text(&refused.stderr).contains('\x1b'), "NO_COLOR={value}");
    }
}

#[test]
fn conventions_a_usage_error_with_json_is_one_json_object_on_stdout() {
    for args in [
        vec!["--json", "show", "../etc"],
        vec!["show", "../etc", "--json"],
        vec!["--json", "frobnicate"],
        vec!["--json", "task", "--task-id", "a/b", "x"],
    ] {
        let out = boxctl_env(&args, &[]);
        assert_eq!(out.status.code(), Some(i32::from(EXIT_USAGE)), "{args:?}");
        let stdout = text(&out.stdout);
        assert_eq!(stdout.lines().count(), 1, "{args:?}: {stdout}");
        let error: ApiError = serde_json::from_str(stdout.trim()).unwrap();
        assert_eq!(error.error.kind, error_kind::USAGE);
        assert_eq!(error.error.code, 0);
        assert!(!error.error.message.starts_with("error:"), "{stdout}");
        assert!(!error.error.message.is_empty());
        // People still read clap's own words on stderr.
        assert!(text(&out.stderr).contains("error: "), "{args:?}");
    }
    // Without --json, stdout stays empty; `--json` after `--` is no flag.
    let out = boxctl_env(&["show", "../etc"], &[]);
    assert!(out.stdout.is_empty());
    assert!(!boxctl::run::json_requested([
        "boxctl", "task", "--", "--json"
    ]));
    assert!(boxctl::run::json_requested([
        "boxctl", "task", "--json", "x"
    ]));
}

#[test]
fn conventions_an_unreachable_loopd_with_json_is_a_json_error_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("loopd.sock");
    let socket = socket.to_str().unwrap();
    for args in [
        vec!["--socket", socket, "--json", "sessions"],
        vec!["--socket", socket, "--json", "task", "hi"],
        vec!["--socket", socket, "--json", "chat"],
    ] {
        let out = boxctl_env(&args, &[]);
        assert_eq!(
            out.status.code(),
            Some(i32::from(EXIT_UNREACHABLE)),
            "{args:?}"
        );
        let error: ApiError = serde_json::from_str(text(&out.stdout).trim()).unwrap();
        assert_eq!(error.error.kind, error_kind::UNREACHABLE, "{args:?}");
        assert!(
            error.error.message.contains("loopd is not running"),
            "{args:?}"
        );
        assert_eq!(text(&out.stderr).lines().count(), 1, "{args:?}");
    }
}

#[tokio::test]
async fn conventions_loopd_refusals_and_boxctl_own_errors_share_one_json_shape() {
    let served = start();
    // loopd's 404, as it came.
    let (code, out, _) = boxctl(&served, &["--json", "show", "nope"]).await;
    assert_eq!(code, Some(4));
    let error: ApiError = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(
        (error.error.code, error.error.kind.as_str()),
        (404, "not_found")
    );
    // boxctl's own: `task -` with nothing on stdin.
    let (code, out, err) = boxctl_fed(&served, &["--json", "task", "-"], b"\n").await;
    assert_eq!(code, Some(i32::from(EXIT_USAGE)), "{err}");
    let error: ApiError = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(error.error.kind, error_kind::USAGE);
    assert_eq!(error.error.message, "the task text on stdin is empty");
}

#[test]
fn conventions_manpages_writes_boxctl_1_and_a_page_per_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = boxctl_env(&["manpages", dir.path().to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let root = std::fs::read_to_string(dir.path().join("boxctl.1")).unwrap();
    assert!(
        root.starts_with(".ie \\n(.g .ds Aq"),
        "roff: {}",
        &root[..80]
    );
    assert!(
        root.contains("Exit codes"),
        "the exit codes are in the page"
    );
    for path in command_paths() {
        let name = path.join("\\-");
        if path == ["manpages"] {
            // Hidden: for packagers, not in the pages or the list.
            assert!(!root.contains("manpages"), "{root}");
            assert!(!dir.path().join("boxctl-manpages.1").exists());
            continue;
        }
        assert!(root.contains(&path[0]), "boxctl.1 names {name}");
        let page = dir.path().join(format!("boxctl-{}.1", path.join("-")));
        let page =
            std::fs::read_to_string(&page).unwrap_or_else(|e| panic!("{}: {e}", page.display()));
        assert!(page.contains(&format!("boxctl\\-{name}")), "{name}: {page}");
    }
    // Hidden from `boxctl --help` too, and a missing directory is a clear error.
    let help = boxctl_env(&["--help"], &[]);
    assert!(!text(&help.stdout).contains("manpages"));
    let gone = dir.path().join("gone");
    let out = boxctl_env(&["manpages", gone.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("cannot write the man pages"));
}
