//! The loader, the checks and `--check-config` on a small config of their own.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use bxconfig::{
    CheckOutcome, ConfigError, Loader, Origin, Problem, Problems, Validate, check_config, load_from,
};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Demo {
    socket: PathBuf,
    llama: Llama,
    #[serde(rename = "loop")]
    r#loop: Loop,
    items: Vec<Item>,
}

impl Default for Demo {
    fn default() -> Demo {
        Demo {
            socket: PathBuf::from("/run/demo.sock"),
            llama: Llama::default(),
            r#loop: Loop::default(),
            items: Vec::new(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Llama {
    url: String,
    timeout_ms: u64,
    threshold: f64,
}

impl Default for Llama {
    fn default() -> Llama {
        Llama {
            url: "http://127.0.0.1:8080".to_string(),
            timeout_ms: 1000,
            threshold: 0.8,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct Loop {
    max_steps: u32,
}

impl Default for Loop {
    fn default() -> Loop {
        Loop { max_steps: 8 }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct Item {
    name: String,
}

impl Validate for Demo {
    fn validate(&self) -> Result<(), Vec<Problem>> {
        let mut p = Problems::new();
        p.at_least("loop.max_steps", self.r#loop.max_steps, 1);
        p.http_url("llama.url", &self.llama.url);
        p.fraction("llama.threshold", self.llama.threshold);
        p.finish()
    }

    fn warnings(&self) -> Vec<Problem> {
        if self.llama.timeout_ms > WARN_TIMEOUT_MS {
            vec![Problem::new(
                "llama.timeout_ms",
                "is checked against the server only at start",
            )]
        } else {
            Vec::new()
        }
    }
}

/// Above this, `Demo` warns about `llama.timeout_ms`.
const WARN_TIMEOUT_MS: u64 = 60_000;

fn file(text: &str) -> tempfile::NamedTempFile {
    let mut f = tempfile::Builder::new().suffix(".toml").tempfile().unwrap();
    f.write_all(text.as_bytes()).unwrap();
    f
}

fn no_env() -> Vec<(String, String)> {
    Vec::new()
}

fn env(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn keys_error(e: ConfigError) -> Vec<bxconfig::KeyProblem> {
    match e {
        ConfigError::Keys { problems } => problems,
        other => panic!("expected key problems, got {other}"),
    }
}

#[test]
fn empty_file_gives_the_defaults() {
    let f = file("");
    let d: Demo = load_from(f.path(), "DEMO", no_env()).unwrap();
    assert_eq!(d, Demo::default());
}

#[test]
fn file_values_are_read() {
    let f = file("socket = \"/tmp/x.sock\"\n[llama]\ntimeout_ms = 5\n[[items]]\nname = \"a\"\n");
    let d: Demo = load_from(f.path(), "DEMO", no_env()).unwrap();
    assert_eq!(d.socket, Path::new("/tmp/x.sock"));
    assert_eq!(d.llama.timeout_ms, 5);
    assert_eq!(d.llama.url, Llama::default().url);
    assert_eq!(d.items[0].name, "a");
}

#[test]
fn unknown_key_is_refused_naming_it() {
    let f = file("[llama]\nurl = \"http://h\"\ntimeout_msec = 5\n");
    let e = load_from::<Demo>(f.path(), "DEMO", no_env()).unwrap_err();
    let text = e.to_string();
    let problems = keys_error(e);
    assert_eq!(problems[0].key, "llama.timeout_msec");
    assert_eq!(problems[0].origin, Origin::File(f.path().to_path_buf()));
    assert!(text.contains("unknown key"), "{text}");
    assert!(text.contains("timeout_ms"), "lists the known keys: {text}");
}

#[test]
fn unknown_top_level_section_is_refused_naming_it() {
    let f = file("[lama]\nurl = \"x\"\n");
    let problems = keys_error(load_from::<Demo>(f.path(), "DEMO", no_env()).unwrap_err());
    assert_eq!(problems[0].key, "lama");
}

#[test]
fn wrong_type_names_file_and_key() {
    let f = file("[llama]\ntimeout_ms = \"x\"\n");
    let e = load_from::<Demo>(f.path(), "DEMO", no_env()).unwrap_err();
    let text = e.to_string();
    assert_eq!(
        text,
        format!(
            "{}: key \"llama.timeout_ms\": invalid type: found string \"x\", expected u64",
            f.path().display()
        )
    );
}

#[test]
fn error_in_an_array_of_tables_names_the_index() {
    let f = file("[[items]]\nname = \"a\"\n[[items]]\nnom = \"b\"\n");
    let problems = keys_error(load_from::<Demo>(f.path(), "DEMO", no_env()).unwrap_err());
    assert_eq!(problems[0].key, "items[1].nom");
}

#[test]
fn missing_required_key_is_named() {
    let f = file("[[items]]\n");
    let problems = keys_error(load_from::<Demo>(f.path(), "DEMO", no_env()).unwrap_err());
    assert_eq!(problems[0].key, "items[0].name");
    assert!(problems[0].message.contains("required"));
}

#[test]
fn env_override_applies_over_the_file() {
    let f = file("[llama]\ntimeout_ms = 5\nurl = \"http://file\"\n");
    let d: Demo = load_from(
        f.path(),
        "DEMO",
        env(&[
            ("DEMO_LLAMA__TIMEOUT_MS", "7"),
            ("DEMO_SOCKET", "/tmp/env.sock"),
            ("DEMO_LOOP__MAX_STEPS", "3"),
            ("OTHER_LLAMA__TIMEOUT_MS", "x"),
        ]),
    )
    .unwrap();
    assert_eq!(d.llama.timeout_ms, 7);
    assert_eq!(d.llama.url, "http://file");
    assert_eq!(d.socket, Path::new("/tmp/env.sock"));
    assert_eq!(d.r#loop.max_steps, 3);
}

#[test]
fn bad_env_value_names_the_variable() {
    let f = file("");
    let e =
        load_from::<Demo>(f.path(), "DEMO", env(&[("DEMO_LLAMA__TIMEOUT_MS", "x")])).unwrap_err();
    let text = e.to_string();
    let problems = keys_error(e);
    assert_eq!(
        problems[0].origin,
        Origin::Env("DEMO_LLAMA__TIMEOUT_MS".to_string())
    );
    assert_eq!(problems[0].key, "llama.timeout_ms");
    assert!(
        text.starts_with("environment variable DEMO_LLAMA__TIMEOUT_MS: key \"llama.timeout_ms\""),
        "{text}"
    );
}

#[test]
fn unknown_env_key_names_the_variable_even_when_the_file_has_the_section() {
    let f = file("[llama]\ntimeout_ms = 5\n");
    let problems = keys_error(
        load_from::<Demo>(f.path(), "DEMO", env(&[("DEMO_LLAMA__BOGUS", "1")])).unwrap_err(),
    );
    assert_eq!(problems[0].key, "llama.bogus");
    assert_eq!(
        problems[0].origin,
        Origin::Env("DEMO_LLAMA__BOGUS".to_string())
    );
}

#[test]
fn missing_file_is_a_clear_error_naming_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nope.toml");
    let e = load_from::<Demo>(&path, "DEMO", no_env()).unwrap_err();
    assert!(matches!(e, ConfigError::Read { .. }));
    let text = e.to_string();
    assert!(text.starts_with(&path.display().to_string()), "{text}");
    assert!(text.contains("cannot read"), "{text}");
}

#[test]
fn toml_syntax_error_names_file_and_line() {
    let f = file("[llama]\nurl = \n");
    let e = load_from::<Demo>(f.path(), "DEMO", no_env()).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, ConfigError::Syntax { .. }));
    assert!(text.starts_with(&f.path().display().to_string()), "{text}");
    assert!(text.contains("line 2"), "{text}");
}

#[test]
fn validation_problem_names_the_key() {
    let f = file("[loop]\nmax_steps = 0\n[llama]\nurl = \"ftp://x\"\nthreshold = 1.5\n");
    let problems = keys_error(
        Loader::new(f.path(), "DEMO")
            .load_valid::<Demo>()
            .unwrap_err(),
    );
    let keys: Vec<&str> = problems.iter().map(|p| p.key.as_str()).collect();
    assert_eq!(keys, ["loop.max_steps", "llama.url", "llama.threshold"]);
    assert!(problems[0].to_string().contains("must be at least 1"));
}

#[test]
fn validation_problem_names_the_env_var_or_flag_that_set_it() {
    let f = file("");
    let loader = Loader::new(f.path(), "DEMO")
        .env(env(&[("DEMO_LOOP__MAX_STEPS", "0")]))
        .flag("--llama", "llama.url", "nonsense");
    let problems = keys_error(loader.load_valid::<Demo>().unwrap_err());
    assert_eq!(
        problems[0].origin,
        Origin::Env("DEMO_LOOP__MAX_STEPS".into())
    );
    assert_eq!(problems[1].origin, Origin::Flag("--llama".into()));
    assert!(
        problems[1]
            .to_string()
            .starts_with("flag --llama: key \"llama.url\"")
    );
}

#[test]
fn flags_override_env_and_file() {
    let f = file("socket = \"/file.sock\"\n");
    let d: Demo = Loader::new(f.path(), "DEMO")
        .env(env(&[("DEMO_SOCKET", "/env.sock")]))
        .flag("--socket", "socket", PathBuf::from("/flag.sock"))
        .load()
        .unwrap();
    assert_eq!(d.socket, Path::new("/flag.sock"));
}

#[test]
fn check_config_prints_the_resolved_toml() {
    let f = file("[llama]\ntimeout_ms = 5\n");
    let loader = Loader::new(f.path(), "DEMO").flag("--socket", "socket", "/flag.sock");
    let CheckOutcome::Valid(text) = check_config::<Demo>(&loader) else {
        panic!("should be valid");
    };
    let back: Demo = toml::from_str(&text).unwrap();
    assert_eq!(back.llama.timeout_ms, 5);
    assert_eq!(back.socket, Path::new("/flag.sock"));
}

#[test]
fn check_config_heads_a_valid_config_with_its_warnings_naming_origin_and_key() {
    let f = file("[llama]\ntimeout_ms = 90000\n");
    let CheckOutcome::Valid(text) = check_config::<Demo>(&Loader::new(f.path(), "DEMO")) else {
        panic!("a warning does not make it invalid");
    };
    let name = f.path().display().to_string();
    let warning = format!(
        "# {}{name}: key \"llama.timeout_ms\": is checked against the server only at start",
        bxconfig::WARNING_PREFIX
    );
    assert!(text.lines().any(|l| l == warning), "{text}");
    let back: Demo = toml::from_str(&text).unwrap();
    assert_eq!(back.llama.timeout_ms, 90_000);
    let f = file("[llama]\ntimeout_ms = 5\n");
    let CheckOutcome::Valid(text) = check_config::<Demo>(&Loader::new(f.path(), "DEMO")) else {
        panic!("should be valid");
    };
    assert!(!text.contains(bxconfig::WARNING_PREFIX), "{text}");
}

#[test]
fn check_config_lists_every_problem() {
    let f = file("[loop]\nmax_steps = 0\n[llama]\nthreshold = 0.0\n");
    let CheckOutcome::Invalid(lines) = check_config::<Demo>(&Loader::new(f.path(), "DEMO")) else {
        panic!("should be invalid");
    };
    assert_eq!(lines.len(), 2);
    let name = f.path().display().to_string();
    assert!(
        lines[0].starts_with(&format!("{name}: key \"loop.max_steps\"")),
        "{lines:?}"
    );
    assert!(
        lines[1].starts_with(&format!("{name}: key \"llama.threshold\"")),
        "{lines:?}"
    );
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct WithEnum {
    level: Level,
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
enum Level {
    Low,
    High,
}

#[test]
fn unknown_enum_value_lists_the_choices() {
    let f = file("level = \"mid\"\n");
    let problems = keys_error(load_from::<WithEnum>(f.path(), "DEMO", no_env()).unwrap_err());
    assert_eq!(problems[0].key, "level");
    assert_eq!(
        problems[0].message,
        "unknown value \"mid\"; expected one of: low, high"
    );
}
