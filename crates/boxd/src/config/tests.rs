//! Unit tests: this file is compiled only under #[cfg(test)] (see where its module is declared).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use bxconfig::{ConfigError, KeyProblem, Loader, Origin, load_from};
use std::io::Write;
use std::path::Path;

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/boxd.toml");
const SHA: &str = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

fn problems(e: ConfigError) -> Vec<KeyProblem> {
    match e {
        ConfigError::Keys { problems } => problems,
        other => panic!("expected key problems, got {other}"),
    }
}

fn valid(text: &str) -> Config {
    let f = file(text);
    Loader::new(f.path(), ENV_PREFIX).load_valid().unwrap()
}

fn invalid(text: &str) -> Vec<KeyProblem> {
    let f = file(text);
    problems(
        Loader::new(f.path(), ENV_PREFIX)
            .load_valid::<Config>()
            .unwrap_err(),
    )
}

fn keys(found: &[KeyProblem]) -> Vec<&str> {
    found.iter().map(|p| p.key.as_str()).collect()
}

#[test]
fn shipped_config_parses_and_validates() {
    let cfg: Config = Loader::new(SHIPPED, ENV_PREFIX).load_valid().unwrap();
    let names: Vec<&str> = cfg.children.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["llama-server", "brokerd", "loopd"]);
    // llama-server on a Unix socket, where TCP would let every local user at its slot API (the
    // sessions' KV caches; docs/security.md), its web UI off, and loopd pointed at the socket.
    let llama = &cfg.children[0];
    assert_eq!(llama.ready, Ready::Socket(".dev/run/llama.sock".into()));
    let flag = |child: &Child, name: &str| {
        let at = child.args.iter().position(|a| a == name);
        at.and_then(|i| child.args.get(i + 1)).cloned()
    };
    assert_eq!(
        flag(llama, "--host").as_deref(),
        Some(".dev/run/llama.sock")
    );
    assert!(
        llama.args.iter().any(|a| a == "--no-webui"),
        "{:?}",
        llama.args
    );
    assert!(
        !llama.args.iter().any(|a| a == "--port"),
        "{:?}",
        llama.args
    );
    assert!(
        llama.args[1].starts_with("rm -f .dev/run/llama.sock && exec "),
        "a socket left by an earlier run is removed first: {:?}",
        llama.args
    );
    assert_eq!(
        flag(&cfg.children[2], "--llama").as_deref(),
        Some("unix:.dev/run/llama.sock")
    );
    assert_eq!(
        cfg.children[2].ready,
        Ready::Socket(".dev/run/loopd.sock".into())
    );
    assert_eq!(cfg.restart, Restart::default());
}

#[test]
fn empty_config_gives_the_defaults() {
    let cfg = valid("");
    assert_eq!(cfg, Config::default());
    assert!(cfg.notify);
    assert!(cfg.children.is_empty());
}

#[test]
fn config_child_defaults_and_pinned_file() {
    let cfg = valid(&format!(
        "[[children]]\nname = \"brokerd\"\ncommand = \"/bin/brokerd\"\n\
         args = [\"--config\", \"/etc/b.toml\"]\nconfig_file = \"/etc/b.toml\"\n\
         config_sha256 = \"{SHA}\"\nready = {{ socket = \"/run/b.sock\" }}\n\
         env = {{ RUST_LOG = \"debug\" }}\n"
    ));
    let child = &cfg.children[0];
    assert_eq!(child.start_timeout_ms, DEFAULT_START_TIMEOUT_MS);
    assert_eq!(child.stop_grace_ms, DEFAULT_STOP_GRACE_MS);
    assert_eq!(child.config_file.as_deref(), Some(Path::new("/etc/b.toml")));
    assert_eq!(child.env["RUST_LOG"], "debug");
}

#[test]
fn config_unknown_key_is_refused_naming_it() {
    let f = file("[restart]\nmax_retries = 3\n");
    let found = problems(load_from::<Config>(f.path(), ENV_PREFIX, Vec::new()).unwrap_err());
    assert_eq!(keys(&found), ["restart.max_retries"]);
}

#[test]
fn config_unknown_ready_kind_names_the_key() {
    let f = file("[[children]]\nname = \"a\"\ncommand = \"a\"\nready = { tcp = \"x\" }\n");
    let found = problems(load_from::<Config>(f.path(), ENV_PREFIX, Vec::new()).unwrap_err());
    assert_eq!(keys(&found), ["children[0].ready"]);
    assert!(found[0].message.contains("http, socket"), "{}", found[0]);
}

#[test]
fn a_ready_table_with_both_kinds_is_refused_at_the_childs_key() {
    let f = file(
        "[[children]]\nname = \"a\"\ncommand = \"a\"\nready = { socket = \"/s\" }\n\
         [[children]]\nname = \"loopd\"\ncommand = \"loopd\"\n\
         ready = { socket = \"/run/l.sock\", http = \"http://127.0.0.1:1/health\" }\n",
    );
    let found = problems(load_from::<Config>(f.path(), ENV_PREFIX, Vec::new()).unwrap_err());
    assert_eq!(keys(&found), ["children[1].ready"], "{found:?}");
    let message = &found[0].message;
    for word in ["has more than one of `socket`, `http`", "exactly one"] {
        assert!(message.contains(word), "{word}: {message}");
    }
    let f = file("[[children]]\nname = \"a\"\ncommand = \"a\"\nready = {}\n");
    let found = problems(load_from::<Config>(f.path(), ENV_PREFIX, Vec::new()).unwrap_err());
    assert_eq!(keys(&found), ["children[0].ready"], "{found:?}");
    assert!(found[0].message.contains("is empty"), "{}", found[0]);
}

#[test]
fn config_bad_value_names_the_key() {
    let f = file("notify = \"yes\"\n");
    let found = problems(load_from::<Config>(f.path(), ENV_PREFIX, Vec::new()).unwrap_err());
    assert_eq!(keys(&found), ["notify"]);
    assert_eq!(found[0].origin, Origin::File(f.path().to_path_buf()));
}

#[test]
fn config_env_override_applies() {
    let env = vec![
        ("BOXD_RESTART__MAX_RESTARTS".to_string(), "0".to_string()),
        ("BOXD_NOTIFY".to_string(), "false".to_string()),
    ];
    let cfg: Config = load_from(file("").path(), ENV_PREFIX, env).unwrap();
    assert_eq!(cfg.restart.max_restarts, 0);
    assert!(!cfg.notify);
}

#[test]
fn config_bad_env_value_names_the_variable() {
    let env = vec![("BOXD_RESTART__WINDOW_MS".to_string(), "-5".to_string())];
    let found = problems(load_from::<Config>(file("").path(), ENV_PREFIX, env).unwrap_err());
    assert_eq!(
        found[0].origin,
        Origin::Env("BOXD_RESTART__WINDOW_MS".into())
    );
    assert_eq!(found[0].key, "restart.window_ms");
}

#[test]
fn config_child_checks() {
    let found = invalid(&format!(
        "[restart]\ninitial_backoff_ms = 10\nmax_backoff_ms = 5\n\
         [[children]]\nname = \"Bad Name\"\ncommand = \"\"\nready = {{ http = \"localhost:1\" }}\n\
         start_timeout_ms = 0\n\
         [[children]]\nname = \"b\"\ncommand = \"b\"\nconfig_file = \"/etc/b.toml\"\n\
         ready = {{ socket = \"/run/b.sock\" }}\n\
         [[children]]\nname = \"b\"\ncommand = \"b\"\nconfig_sha256 = \"abc\"\n\
         ready = {{ socket = \"\" }}\n\
         [[children]]\nname = \"d\"\ncommand = \"d\"\nconfig_file = \"/etc/d.toml\"\n\
         config_sha256 = \"{SHA}\"\nready = {{ socket = \"/run/d.sock\" }}\n"
    ));
    assert_eq!(
        keys(&found),
        [
            "restart.max_backoff_ms",
            "children[0].name",
            "children[0].command",
            "children[0].ready.http",
            "children[0].start_timeout_ms",
            "children[1].config_sha256",
            "children[2].config_file",
            "children[2].config_sha256",
            "children[2].ready.socket",
            "children[2].name",
            "children[3].config_file",
        ]
    );
    assert!(
        found[10].message.contains("not passed in args"),
        "{}",
        found[10]
    );
}

#[test]
fn config_sha256_accepts_64_hex_digits_only() {
    for (sha, ok) in [
        (SHA.to_string(), true),
        (SHA.to_uppercase(), true),
        (SHA[..63].to_string(), false),
        (format!("{}g", &SHA[..63]), false),
    ] {
        let f = file(&format!(
            "[[children]]\nname = \"a\"\ncommand = \"a\"\nargs = [\"--config=/c.toml\"]\n\
             config_file = \"/c.toml\"\nconfig_sha256 = \"{sha}\"\nready = {{ socket = \"/s\" }}\n"
        ));
        let result = Loader::new(f.path(), ENV_PREFIX).load_valid::<Config>();
        assert_eq!(result.is_ok(), ok, "{sha}");
    }
}

#[test]
fn socket_and_metrics_are_optional_and_checked() {
    let cfg = valid("");
    assert_eq!((cfg.socket, cfg.socket_group), (None, None));
    assert_eq!(cfg.metrics, bxmetrics::MetricsConfig::default());
    let cfg = valid(
        "socket = \"/run/boxmaker/boxd.sock\"\nsocket_group = \"boxmaker\"\n\
         [metrics]\nlisten = \"127.0.0.1:9466\"\n",
    );
    assert_eq!(cfg.socket, Some("/run/boxmaker/boxd.sock".into()));
    assert_eq!(cfg.metrics.listen, Some("127.0.0.1:9466".parse().unwrap()));
    let found = invalid("socket_group = \"boxmaker\"\n[metrics]\nlisten = \"0.0.0.0:9466\"\n");
    assert_eq!(keys(&found), ["socket_group", "metrics.listen"]);
    assert!(found[0].message.contains("socket is not"), "{found:?}");
    assert!(found[1].message.contains("allow_remote"), "{found:?}");
    let found = invalid("socket = \"\"\n");
    assert_eq!(keys(&found), ["socket"]);
}

#[test]
fn with_previous_is_refused_on_the_first_child_and_allowed_after() {
    let child = |name: &str| {
        format!(
            "[[children]]\nname = \"{name}\"\ncommand = \"{name}\"\n\
             ready = {{ socket = \"/run/{name}.sock\" }}\nwith_previous = true\n"
        )
    };
    let found = invalid(&child("a"));
    assert_eq!(keys(&found), ["children[0].with_previous"]);
    assert!(found[0].message.contains("first child"), "{}", found[0]);
    let two = valid(&format!(
        "[[children]]\nname = \"z\"\ncommand = \"z\"\nready = {{ socket = \"/run/z.sock\" }}\n{}",
        child("a")
    ));
    assert!(!two.children[0].with_previous);
    assert!(two.children[1].with_previous);
}

#[test]
fn config_a_child_ready_by_running_time_must_be_ready_before_its_start_timeout() {
    let found = invalid(
        "[[children]]\nname = \"chatd\"\ncommand = \"chatd\"\nready = { running_ms = 0 }\n\
         [[children]]\nname = \"slow\"\ncommand = \"slow\"\nready = { running_ms = 5000 }\n\
         start_timeout_ms = 5000\n",
    );
    assert_eq!(
        keys(&found),
        [
            "children[0].ready.running_ms",
            "children[1].ready.running_ms"
        ]
    );
    assert!(
        found[1].message.contains("not below start_timeout_ms"),
        "{found:?}"
    );
}
