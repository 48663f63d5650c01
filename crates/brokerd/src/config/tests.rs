//! Unit tests: this file is compiled only under #[cfg(test)] (see where its module is declared).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use bxconfig::{ConfigError, KeyProblem, Loader, Origin, load_from};
use bxcore::DataClass;
use std::io::Write;
use std::path::Path;

const SHIPPED: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/brokerd.toml");

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
    assert_eq!(cfg.limits, Limits::default());
    assert_eq!(cfg.socket, Config::default().socket);
    let tools: Vec<&str> = cfg.grants.iter().map(|g| g.tool.as_str()).collect();
    assert_eq!(tools, ["clock", "echo", "read_file", "list_dir"]);
    assert!(cfg.mcp.is_empty());
}

#[test]
fn empty_config_gives_the_defaults_and_no_grants() {
    let cfg = valid("");
    assert_eq!(cfg, Config::default());
    assert!(cfg.grants.is_empty());
}

#[test]
fn config_grant_defaults_follow_the_tool() {
    let cfg = valid(
        "[[grants]]\ntool = \"http_fetch\"\nhosts = [\"example.org\"]\n\
         [[grants]]\ntool = \"read_file\"\npaths = [\"/srv\"]\n\
         [[grants]]\ntool = \"write_file\"\npaths = [\"/srv/out\"]\n\
         [[grants]]\ntool = \"ev_echo\"\n\
         [[mcp]]\nname = \"everything\"\ncommand = \"npx\"\nprefix = \"ev\"\n",
    );
    let fetch = &cfg.grants[0];
    assert_eq!(fetch.sessions, ["*"]);
    assert_eq!(fetch.max_context_class, DataClass::Public);
    assert!(fetch.result_untrusted);
    assert_eq!(fetch.when_untrusted, WhenUntrusted::Deny);
    let read = &cfg.grants[1];
    assert_eq!(read.result_class, DataClass::Private);
    assert_eq!(read.max_context_class, DataClass::Secret);
    assert_eq!(read.when_untrusted, WhenUntrusted::Allow);
    assert!(!read.result_untrusted);
    assert_eq!(cfg.grants[2].when_untrusted, WhenUntrusted::Deny);
    let mcp = &cfg.grants[3];
    assert_eq!(mcp.max_context_class, DataClass::Public);
    assert!(mcp.result_untrusted);
    assert_eq!(mcp.when_untrusted, WhenUntrusted::Deny);
    assert_eq!(mcp.max_calls_per_turn, None);
}

#[test]
fn config_grant_keys_override_the_defaults() {
    let cfg = valid(
        "[[grants]]\ntool = \"http_fetch\"\nsessions = [\"main\", \"sub-*\"]\n\
         hosts = [\"*.example.org\"]\nresult_class = \"internal\"\nresult_untrusted = false\n\
         max_context_class = \"private\"\nwhen_untrusted = \"allow\"\nmax_calls_per_turn = 3\n",
    );
    let g = &cfg.grants[0];
    assert_eq!(g.sessions, ["main", "sub-*"]);
    assert_eq!(g.result_class, DataClass::Internal);
    assert!(!g.result_untrusted);
    assert_eq!(g.max_context_class, DataClass::Private);
    assert_eq!(g.when_untrusted, WhenUntrusted::Allow);
    assert_eq!(g.max_calls_per_turn, Some(3));
}

#[test]
fn config_unknown_key_in_a_grant_is_refused_naming_it() {
    let f = file("[[grants]]\ntool = \"echo\"\nsesions = [\"*\"]\n");
    let found = problems(load_from::<Config>(f.path(), ENV_PREFIX, Vec::new()).unwrap_err());
    assert_eq!(keys(&found), ["grants[0].sesions"]);
}

#[test]
fn config_bad_class_names_the_key() {
    let f = file("[[grants]]\ntool = \"echo\"\nresult_class = \"Top\"\n");
    let found = problems(load_from::<Config>(f.path(), ENV_PREFIX, Vec::new()).unwrap_err());
    assert_eq!(keys(&found), ["grants[0].result_class"]);
    assert!(found[0].message.contains("public"), "{}", found[0]);
}

#[test]
fn config_grant_without_tool_names_the_key() {
    let found = problems(
        load_from::<Config>(
            file("[[grants]]\nsessions = [\"*\"]\n").path(),
            ENV_PREFIX,
            Vec::new(),
        )
        .unwrap_err(),
    );
    assert_eq!(keys(&found), ["grants[0].tool"]);
}

#[test]
fn config_env_override_applies() {
    let f = file("[limits]\ncall_timeout_ms = 10\n");
    let env = vec![
        (
            "BROKERD_LIMITS__CALL_TIMEOUT_MS".to_string(),
            "20".to_string(),
        ),
        ("BROKERD_STATE_DIR".to_string(), "/tmp/b".to_string()),
    ];
    let cfg: Config = load_from(f.path(), ENV_PREFIX, env).unwrap();
    assert_eq!(cfg.limits.call_timeout_ms, 20);
    assert_eq!(cfg.state_dir, Path::new("/tmp/b"));
}

#[test]
fn config_bad_env_value_names_the_variable() {
    let env = vec![(
        "BROKERD_LIMITS__RESULT_CAP_BYTES".to_string(),
        "lots".to_string(),
    )];
    let found = problems(load_from::<Config>(file("").path(), ENV_PREFIX, env).unwrap_err());
    assert_eq!(
        found[0].origin,
        Origin::Env("BROKERD_LIMITS__RESULT_CAP_BYTES".into())
    );
}

#[test]
fn config_grant_checks() {
    let found = invalid(
        "[[grants]]\ntool = \"\"\n\
         [[grants]]\ntool = \"call_tool\"\n\
         [[grants]]\ntool = \"read_file\"\nsessions = [\"[\"]\npaths = [\"rel/dir\", \"/a/../b\"]\n\
         [[grants]]\ntool = \"http_fetch\"\nhosts = [\"https://example.org/path\"]\n\
         [[grants]]\ntool = \"echo\"\nsessions = []\nhosts = [\"x\"]\npaths = [\"/x\"]\nmax_calls_per_turn = 0\n\
         [[grants]]\ntool = \"list_dir\"\n\
         [[grants]]\ntool = \"nope_x\"\n",
    );
    assert_eq!(
        keys(&found),
        [
            "grants[0].tool",
            "grants[1].tool",
            "grants[2].sessions[0]",
            "grants[2].paths[0]",
            "grants[2].paths[1]",
            "grants[3].hosts[0]",
            "grants[4].sessions",
            "grants[4].paths",
            "grants[4].hosts",
            "grants[4].max_calls_per_turn",
            "grants[5].paths",
            "grants[6].tool",
        ]
    );
}

#[test]
fn config_mcp_checks() {
    let found = invalid(
        "[[mcp]]\nname = \"a\"\ncommand = \"\"\nprefix = \"Bad-Prefix\"\n\
         [[mcp]]\nname = \"a\"\ncommand = \"x\"\nprefix = \"\"\n\
         [[mcp]]\nname = \"c\"\ncommand = \"x\"\nprefix = \"p\"\nenv = { \"A=B\" = \"1\" }\n\
         [[mcp]]\nname = \"d\"\ncommand = \"x\"\nprefix = \"p\"\n",
    );
    assert_eq!(
        keys(&found),
        [
            "mcp[0].command",
            "mcp[0].prefix",
            "mcp[1].prefix",
            "mcp[1].name",
            "mcp[2].env",
            "mcp[3].prefix",
        ]
    );
}

#[test]
fn config_mcp_name_is_a_safe_label_value() {
    // The name is the `server` label of brokerd's metrics: a quote, a backslash or a newline
    // would break the exposition (prometheus-client does not escape), and a newline could
    // inject lines such as a fake `# EOF`.
    for name in [
        "a\"b",
        "a\\b",
        "a\nb",
        "x\n# EOF",
        "Mock",
        "my-server",
        "a b",
    ] {
        let found = invalid(&format!(
            "[[mcp]]\nname = {}\ncommand = \"x\"\nprefix = \"p\"\n",
            serde_json::to_string(name).unwrap()
        ));
        assert_eq!(keys(&found), ["mcp[0].name"], "{name:?}");
        assert!(
            found[0].message.contains("only a-z, 0-9 and _"),
            "{found:?}"
        );
    }
    valid("[[mcp]]\nname = \"mock_2\"\ncommand = \"x\"\nprefix = \"p\"\n");
}

#[test]
fn config_mcp_descriptions_are_untrusted_unless_the_owner_says() {
    let cfg = valid(
        "[[mcp]]\nname = \"a\"\ncommand = \"x\"\nprefix = \"a\"\n\
         [[mcp]]\nname = \"b\"\ncommand = \"x\"\nprefix = \"b\"\n\
         description_class = \"internal\"\ndescription_untrusted = false\n",
    );
    assert_eq!(
        cfg.mcp[0].description_labels(),
        bxcore::Labels::new(bxcore::DataClass::Public, true)
    );
    assert_eq!(
        cfg.mcp[1].description_labels(),
        bxcore::Labels::new(bxcore::DataClass::Internal, false)
    );
}

#[test]
fn config_limits_must_be_positive() {
    let found = invalid(
        "[limits]\ncall_timeout_ms = 0\nresult_cap_bytes = 0\nmax_body_bytes = 0\n\
         max_connections = 0\nheader_read_timeout_ms = 0\nidle_timeout_ms = 0\n",
    );
    assert_eq!(
        keys(&found),
        [
            "limits.call_timeout_ms",
            "limits.result_cap_bytes",
            "limits.max_body_bytes",
            "limits.max_connections",
            "limits.header_read_timeout_ms",
            "limits.idle_timeout_ms",
        ]
    );
}

#[test]
fn config_resolved_toml_shows_the_effective_grant_defaults() {
    let f = file("[[grants]]\ntool = \"http_fetch\"\nhosts = [\"example.org\"]\n");
    let bxconfig::CheckOutcome::Valid(text) =
        bxconfig::check_config::<Config>(&Loader::new(f.path(), ENV_PREFIX))
    else {
        panic!("should be valid");
    };
    assert!(text.contains("max_context_class = \"public\""), "{text}");
    assert!(text.contains("when_untrusted = \"deny\""), "{text}");
    let again = file(&text);
    let back: Config = Loader::new(again.path(), ENV_PREFIX).load_valid().unwrap();
    assert_eq!(
        back,
        valid("[[grants]]\ntool = \"http_fetch\"\nhosts = [\"example.org\"]\n")
    );
}

#[test]
fn config_http_fetch_reach_checks_name_their_keys() {
    let found = invalid(
        "[[grants]]\ntool = \"http_fetch\"\nhosts = [\"example.org:0\", \"ftp://x\"]\n\
         ports = [443, 0]\nnetworks = [\"127.0.0.0/8\", \"localhost\", \"10.0.0.0/33\"]\n\
         [[grants]]\ntool = \"http_fetch\"\nhosts = [\"a.test\"]\nports = []\n\
         [[grants]]\ntool = \"echo\"\nports = [80]\nnetworks = [\"10.0.0.0/8\"]\n\
         [http_fetch.resolve]\n\"evil.test\" = []\n\"127.0.0.1\" = [\"10.0.0.1\"]\n\
         \"a.test:80\" = [\"10.0.0.1\"]\n\"Dup.test\" = [\"10.0.0.1\"]\n\"dup.test\" = [\"10.0.0.2\"]\n",
    );
    assert_eq!(
        keys(&found),
        [
            "grants[0].hosts[0]",
            "grants[0].hosts[1]",
            "grants[0].ports[1]",
            "grants[0].networks[1]",
            "grants[0].networks[2]",
            "grants[1].ports",
            "grants[2].ports",
            "grants[2].networks",
            "http_fetch.resolve.\"127.0.0.1\"",
            "http_fetch.resolve.\"a.test:80\"",
            "http_fetch.resolve.\"dup.test\"",
            "http_fetch.resolve.\"evil.test\"",
        ],
        "{found:?}"
    );
    let networks = &found[3].message;
    assert!(networks.contains("CIDR"), "{networks}");
}

#[test]
fn config_http_fetch_grants_default_to_ports_80_and_443_and_take_urls_and_networks() {
    let text = "[[grants]]\ntool = \"http_fetch\"\n\
         hosts = [\"*.example.org\", \"example.org:8080\", \"https://api.test\", \"[::1]:81\"]\n\
         networks = [\"127.0.0.0/8\", \"::1\"]\n\
         [[grants]]\ntool = \"http_fetch\"\nhosts = [\"a.test\"]\nports = [8443]\n\
         [[grants]]\ntool = \"echo\"\n\
         [http_fetch.resolve]\n\"Weather.test\" = [\"127.0.0.1\", \"::1\"]\n";
    let cfg = valid(text);
    assert_eq!(cfg.grants[0].ports, DEFAULT_PORTS);
    assert_eq!(cfg.grants[0].networks, ["127.0.0.0/8", "::1"]);
    assert_eq!(cfg.grants[1].ports, [8443]);
    assert!(cfg.grants[2].ports.is_empty());
    assert_eq!(
        cfg.http_fetch.resolve["Weather.test"],
        [
            "127.0.0.1".parse::<std::net::IpAddr>().unwrap(),
            "::1".parse().unwrap()
        ]
    );
    // --check-config shows the effective ports, and what it prints loads back the same.
    let f = file(text);
    let bxconfig::CheckOutcome::Valid(resolved) =
        bxconfig::check_config::<Config>(&Loader::new(f.path(), ENV_PREFIX))
    else {
        panic!("should be valid");
    };
    assert!(resolved.contains("ports = [80, 443]"), "{resolved}");
    assert_eq!(valid(&resolved), cfg);
}

#[test]
fn exec_grants_default_to_private_trusted_and_deny_when_untrusted() {
    let cfg = valid("[[grants]]\ntool = \"exec\"\nprograms = [\"wc\", \"/usr/bin/grep\"]\n");
    let g = &cfg.grants[0];
    assert_eq!(g.exec.programs, ["wc", "/usr/bin/grep"]);
    assert_eq!(g.result_class, DataClass::Private);
    assert!(!g.result_untrusted);
    assert_eq!(g.max_context_class, DataClass::Secret);
    assert_eq!(g.when_untrusted, WhenUntrusted::Deny);
}

#[test]
fn exec_with_network_is_untrusted_and_carries_out_public_context_only() {
    let cfg = valid("[[grants]]\ntool = \"exec\"\nprograms = [\"curl\"]\nnetwork = true\n");
    let g = &cfg.grants[0];
    assert!(g.result_untrusted);
    assert_eq!(g.max_context_class, DataClass::Public);
    let found = invalid(
        "[[grants]]\ntool = \"exec\"\nprograms = [\"curl\"]\nnetwork = true\n\
         result_untrusted = false\n",
    );
    assert_eq!(keys(&found), ["grants[0].result_untrusted"]);
}

#[test]
fn a_shell_or_interpreter_in_programs_needs_shell_true() {
    for glob in [
        "sh",
        "python3",
        "python3.11",
        "env",
        "*",
        "/usr/bin/*",
        "/bin/ba?h",
        "p*",
    ] {
        let text = format!("[[grants]]\ntool = \"exec\"\nprograms = [\"{glob}\"]\n");
        let found = invalid(&text);
        assert_eq!(keys(&found), ["grants[0].programs[0]"], "{glob}");
        assert!(
            found[0].message.contains("shell = true"),
            "{}",
            found[0].message
        );
        valid(&format!("{text}shell = true\n"));
    }
}

#[test]
fn exec_keys_are_checked_and_refused_on_other_tools() {
    let found = invalid(
        "[[grants]]\ntool = \"exec\"\n\
         [[grants]]\ntool = \"exec\"\nprograms = [\"bin/wc\", \"\"]\nrw_paths = [\"work\"]\n\
         max_processes = 0\n\
         [[grants]]\ntool = \"echo\"\nprograms = [\"wc\"]\nnetwork = true\n",
    );
    assert_eq!(
        keys(&found),
        [
            "grants[0].programs",
            "grants[1].programs[0]",
            "grants[1].programs[1]",
            "grants[1].rw_paths[0]",
            "grants[1].max_processes",
            "grants[2].programs",
            "grants[2].network",
        ]
    );
}

#[test]
fn an_exec_grant_renders_as_toml_that_loads_back() {
    let text = "[[grants]]\ntool = \"exec\"\nprograms = [\"wc\"]\nenv = { A = \"b\" }\n\
                timeout_ms = 5\nrw_paths = [\"/work\"]\n";
    let f = file(text);
    let loader = Loader::new(f.path(), ENV_PREFIX);
    let cfg: Config = loader.load_valid().unwrap();
    let rendered = loader.render_toml(&cfg).unwrap();
    assert_eq!(valid(&rendered), cfg, "{rendered}");
}

mod approvals;
mod exec_walls;
mod secrets;

#[test]
fn metrics_listen_is_loopback_unless_allow_remote() {
    let cfg = valid("[metrics]\nlisten = \"127.0.0.1:9464\"\n");
    assert_eq!(cfg.metrics.listen, Some("127.0.0.1:9464".parse().unwrap()));
    let found = invalid("[metrics]\nlisten = \"0.0.0.0:9464\"\n");
    assert_eq!(keys(&found), ["metrics.listen"]);
    assert!(found[0].message.contains("allow_remote"), "{found:?}");
    let cfg = valid("[metrics]\nlisten = \"0.0.0.0:9464\"\nallow_remote = true\n");
    assert!(cfg.metrics.allow_remote);
}
