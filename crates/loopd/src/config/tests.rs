//! Unit tests: this file is compiled only under #[cfg(test)] (see where its module is declared).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use bxconfig::{CheckOutcome, ConfigError, KeyProblem, Loader, Origin, check_config, load_from};
use std::io::Write;
use std::path::Path;

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/loopd.toml");

pub(super) fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

fn no_env() -> Vec<(String, String)> {
    Vec::new()
}

fn problems(e: ConfigError) -> Vec<KeyProblem> {
    match e {
        ConfigError::Keys { problems } => problems,
        other => panic!("expected key problems, got {other}"),
    }
}

pub(super) fn invalid(text: &str) -> Vec<KeyProblem> {
    let f = file(text);
    problems(
        Loader::new(f.path(), ENV_PREFIX)
            .load_valid::<Config>()
            .unwrap_err(),
    )
}

pub(super) fn keys(found: &[KeyProblem]) -> Vec<&str> {
    found.iter().map(|p| p.key.as_str()).collect()
}

#[test]
fn shipped_config_parses_validates_and_lists_the_defaults() {
    let cfg: Config = Loader::new(SHIPPED, ENV_PREFIX).load_valid().unwrap();
    // The one key set away from its default: the file tools the shipped grants allow are core,
    // for small models (docs/config.md, "Core tools for a small model").
    assert_eq!(cfg.broker.core_tools, ["read_file", "list_dir"]);
    let mut defaults = Config::default();
    defaults.broker.core_tools = cfg.broker.core_tools.clone();
    assert_eq!(cfg, defaults);
}

#[test]
fn an_unset_result_cap_follows_the_slot_and_a_set_one_must_fit_it() {
    let unset = Loop::default();
    assert_eq!(unset.tool_result_cap_bytes, None);
    assert_eq!(unset.result_cap_bytes(1536), 768);
    assert_eq!(unset.result_cap_bytes(4096), 2048);
    assert_eq!(unset.result_cap_bytes(32_768), DERIVED_RESULT_CAP_MAX_BYTES);
    assert_eq!(unset.result_cap_bytes(0), 1);
    assert_eq!(unset.check_result_cap(512), Ok(()));
    let set = Loop {
        tool_result_cap_bytes: Some(16_384),
        ..Loop::default()
    };
    assert_eq!(set.result_cap_bytes(4096), 16_384);
    assert_eq!(max_result_cap_bytes(4096), 4096);
    let why = set.check_result_cap(4096).unwrap_err();
    assert!(
        why.contains("16384 bytes") && why.contains("4096-token slot"),
        "{why}"
    );
    assert_eq!(set.check_result_cap(16_384), Ok(()));
}

#[test]
fn empty_config_gives_the_defaults() {
    let f = file("");
    let cfg: Config = Loader::new(f.path(), ENV_PREFIX).load_valid().unwrap();
    assert_eq!(cfg, Config::default());
    assert_eq!(cfg.slots.background, 1);
    assert_eq!(cfg.compact.summarise, ["http_fetch"]);
    assert!(cfg.broker.socket.is_none());
}

#[test]
fn config_unknown_key_is_refused_naming_it() {
    let f = file("[llama]\ntimeout_ms = 5\n");
    let found = problems(load_from::<Config>(f.path(), ENV_PREFIX, no_env()).unwrap_err());
    assert_eq!(keys(&found), ["llama.timeout_ms"]);
    assert!(
        found[0].message.contains("request_timeout_ms"),
        "{}",
        found[0]
    );
}

#[test]
fn config_bad_value_names_file_and_key() {
    let f = file("[loop]\nmax_steps = \"many\"\n");
    let e = load_from::<Config>(f.path(), ENV_PREFIX, no_env()).unwrap_err();
    assert_eq!(
        e.to_string(),
        format!(
            "{}: key \"loop.max_steps\": invalid type: found string \"many\", expected u32",
            f.path().display()
        )
    );
}

#[test]
fn config_bad_log_level_names_the_key() {
    let found = invalid("[log]\nlevel = \"loud\"\n");
    assert_eq!(keys(&found), ["log.level"]);
}

#[test]
fn config_env_override_applies() {
    let f = file("[llama]\nurl = \"http://file:1\"\n");
    let env = vec![
        ("LOOPD_LLAMA__URL".to_string(), "http://env:2".to_string()),
        ("LOOPD_LOOP__MAX_STEPS".to_string(), "4".to_string()),
        (
            "LOOPD_BROKER__SOCKET".to_string(),
            "/tmp/b.sock".to_string(),
        ),
        ("BROKERD_SOCKET".to_string(), "/ignored".to_string()),
    ];
    let cfg: Config = load_from(f.path(), ENV_PREFIX, env).unwrap();
    assert_eq!(cfg.llama.url(), "http://env:2");
    assert_eq!(cfg.r#loop.max_steps, 4);
    assert_eq!(cfg.broker.socket.as_deref(), Some(Path::new("/tmp/b.sock")));
}

#[test]
fn config_bad_env_value_names_the_variable() {
    let f = file("");
    let env = vec![("LOOPD_API__MAX_BODY_BYTES".to_string(), "big".to_string())];
    let found = problems(load_from::<Config>(f.path(), ENV_PREFIX, env).unwrap_err());
    assert_eq!(
        found[0].origin,
        Origin::Env("LOOPD_API__MAX_BODY_BYTES".into())
    );
    assert_eq!(found[0].key, "api.max_body_bytes");
}

#[test]
fn config_checks_limits() {
    let found = invalid(
        "[loop]\nmax_steps = 0\ntool_result_cap_bytes = 0\n\
         [llama]\nconnect_timeout_ms = 0\nretry_max_attempts = 0\n\
         retry_initial_backoff_ms = 100\nretry_max_backoff_ms = 50\n\
         [api]\npage_records = 0\nmax_connections = 0\nheader_read_timeout_ms = 0\n\
         idle_timeout_ms = 0\n[compact]\nsummary_chars = 0\n[broker]\ncall_timeout_ms = 0\n",
    );
    assert_eq!(
        keys(&found),
        [
            "llama.connect_timeout_ms",
            "llama.retry_max_attempts",
            "llama.retry_max_backoff_ms",
            "loop.max_steps",
            "loop.tool_result_cap_bytes",
            "api.page_records",
            "api.max_connections",
            "api.header_read_timeout_ms",
            "api.idle_timeout_ms",
            "broker.call_timeout_ms",
            "compact.summary_chars",
        ]
    );
}

#[test]
fn config_slots_must_differ_and_exist() {
    let found = invalid("[slots]\nmain = 0\nbackground = 0\nsubagent = 5\n[expect]\nslots = 3\n");
    assert_eq!(keys(&found), ["slots.background", "slots.subagent"]);
    assert!(found[0].message.contains("slots.main"), "{}", found[0]);
    assert!(found[1].message.contains("does not exist"), "{}", found[1]);
}

#[test]
fn config_threshold_must_be_a_fraction() {
    for bad in ["0.0", "1.5", "-0.2"] {
        let found = invalid(&format!("[compact]\nthreshold = {bad}\n"));
        assert_eq!(keys(&found), ["compact.threshold"], "{bad}");
    }
    let f = file("[compact]\nthreshold = 1\n");
    let cfg: Config = Loader::new(f.path(), ENV_PREFIX).load_valid().unwrap();
    assert!((cfg.compact.threshold - 1.0).abs() < f64::EPSILON);
}

#[test]
fn config_owner_words_may_be_off_but_not_negative() {
    let f = file("[compact]\nowner_words_chars = 0\n");
    let cfg: Config = Loader::new(f.path(), ENV_PREFIX).load_valid().unwrap();
    assert_eq!(cfg.compact.owner_words_chars, 0);
    assert_eq!(Config::default().compact.owner_words_chars, 2_000);
    let f = file("[compact]\nowner_words_chars = -1\n");
    assert!(
        Loader::new(f.path(), ENV_PREFIX)
            .load_valid::<Config>()
            .is_err()
    );
}

#[test]
fn config_llama_url_must_parse() {
    for bad in ["", "127.0.0.1:8080", "ftp://h/", "http://", "https://"] {
        let found = invalid(&format!("[llama]\nurl = {bad:?}\n"));
        assert_eq!(keys(&found), ["llama.url"], "{bad}");
    }
}

#[test]
fn config_socket_path_must_fit() {
    let long = format!("/{}", "s".repeat(120));
    let found = invalid(&format!("socket = {long:?}\n"));
    assert_eq!(keys(&found), ["socket"]);
}

#[test]
fn config_resolved_toml_reads_back_the_same() {
    let f = file("[expect]\nn_ctx = 4096\n[api]\nsocket_group = \"boxmaker\"\n");
    let loader = Loader::new(f.path(), ENV_PREFIX).flag("--broker", "broker.socket", "/b.sock");
    let CheckOutcome::Valid(text) = check_config::<Config>(&loader) else {
        panic!("should be valid");
    };
    let again = file(&text);
    let back: Config = Loader::new(again.path(), ENV_PREFIX).load_valid().unwrap();
    let first: Config = loader.load_valid().unwrap();
    assert_eq!(back, first);
    assert_eq!(back.expect.n_ctx, Some(4096));
    assert_eq!(back.broker.socket.as_deref(), Some(Path::new("/b.sock")));
}

#[test]
fn config_max_repeated_calls_is_two_by_default_and_at_least_one() {
    assert_eq!(Config::default().r#loop.max_repeated_calls, 2);
    let found = invalid("[loop]\nmax_repeated_calls = 0\n");
    assert_eq!(keys(&found), ["loop.max_repeated_calls"]);
}

#[test]
fn config_approvals_timeout_is_ten_minutes_by_default_and_at_least_one_ms() {
    assert_eq!(Config::default().approvals.timeout_ms, 600_000);
    let found = invalid("[approvals]\ntimeout_ms = 0\n");
    assert_eq!(keys(&found), ["approvals.timeout_ms"]);
    let f = file("[approvals]\ntimeout_ms = 1500\n");
    let cfg: Config = Loader::new(f.path(), ENV_PREFIX).load_valid().unwrap();
    assert_eq!(cfg.approvals.timeout_ms, 1500);
}

#[test]
fn a_metrics_listener_beyond_loopback_needs_allow_remote() {
    let found = invalid("[metrics]\nlisten = \"0.0.0.0:9464\"\n");
    assert_eq!(keys(&found), ["metrics.listen"]);
    assert!(found[0].message.contains("allow_remote"), "{:?}", found[0]);
    let f = file("[metrics]\nlisten = \"0.0.0.0:9464\"\nallow_remote = true\n");
    let cfg: Config = Loader::new(f.path(), ENV_PREFIX).load_valid().unwrap();
    assert_eq!(cfg.metrics.listen, Some("0.0.0.0:9464".parse().unwrap()));
}
