//! Environment overrides: `PREFIX_SECTION__KEY=value` becomes `section.key = value`.

use crate::error::{KeyProblem, Origin};
use figment::value::Value;

/// One environment variable that overrides one key.
#[derive(Debug, Clone)]
pub(crate) struct EnvOverride {
    /// The variable's name, for error messages.
    pub(crate) var: String,
    /// The dotted key it sets.
    pub(crate) key: String,
    /// Its value, read the way figment reads environment values (`5` is a number, `true` a
    /// bool, `[a, b]` an array, anything else a string).
    pub(crate) value: Value,
}

/// `"LOOPD"` or `"LOOPD_"` becomes `"LOOPD_"`.
pub(crate) fn var_head(prefix: &str) -> String {
    format!("{}_", prefix.trim_end_matches('_'))
}

/// Picks the variables that start with the prefix and turns each into an override, sorted by
/// name so the result never depends on the order of the environment. A variable whose name
/// cannot be read as a key is a problem naming it.
pub(crate) fn overrides(
    prefix: &str,
    vars: impl IntoIterator<Item = (String, String)>,
) -> (Vec<EnvOverride>, Vec<KeyProblem>) {
    let head = var_head(prefix);
    let mut found = Vec::new();
    let mut problems = Vec::new();
    let mut vars: Vec<(String, String)> = vars
        .into_iter()
        .filter(|(name, _)| name.starts_with(&head))
        .collect();
    vars.sort();
    for (var, raw) in vars {
        match key_of(&var[head.len()..]) {
            Ok(key) => {
                let Ok(value) = raw.parse::<Value>();
                found.push(EnvOverride { var, key, value });
            }
            Err(why) => problems.push(KeyProblem {
                origin: Origin::Env(var),
                key: String::new(),
                message: why,
            }),
        }
    }
    (found, problems)
}

/// `LLAMA__REQUEST_TIMEOUT_MS` becomes `llama.request_timeout_ms`.
fn key_of(rest: &str) -> Result<String, String> {
    let parts: Vec<String> = rest.split("__").map(str::to_ascii_lowercase).collect();
    if parts.iter().any(|p| p.is_empty() || p.contains('.')) {
        return Err(
            "cannot be read as a config key: want PREFIX_SECTION__KEY, with no empty part and no `.`"
                .to_string(),
        );
    }
    Ok(parts.join("."))
}

/// The variables of this process that start with the prefix. A variable of ours whose name or
/// value is not UTF-8 is a problem naming it, never silently skipped or mangled.
pub(crate) fn process_vars(prefix: &str) -> (Vec<(String, String)>, Vec<KeyProblem>) {
    let head = var_head(prefix);
    let mut vars = Vec::new();
    let mut problems = Vec::new();
    for (name, value) in std::env::vars_os() {
        let lossy = name.to_string_lossy().into_owned();
        if !lossy.starts_with(&head) {
            continue;
        }
        match (name.into_string(), value.into_string()) {
            (Ok(name), Ok(value)) => vars.push((name, value)),
            _ => problems.push(KeyProblem {
                origin: Origin::Env(lossy),
                key: String::new(),
                message: "name or value is not valid UTF-8".to_string(),
            }),
        }
    }
    (vars, problems)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_lowercase_dotted_keys() {
        let (found, problems) = overrides(
            "LOOPD",
            vec![
                (
                    "LOOPD_LLAMA__REQUEST_TIMEOUT_MS".to_string(),
                    "5".to_string(),
                ),
                ("LOOPD_SOCKET".to_string(), "/tmp/s".to_string()),
                ("OTHER_X".to_string(), "1".to_string()),
                ("LOOPDX_Y".to_string(), "1".to_string()),
            ],
        );
        assert!(problems.is_empty());
        let keys: Vec<&str> = found.iter().map(|o| o.key.as_str()).collect();
        assert_eq!(keys, ["llama.request_timeout_ms", "socket"]);
    }

    #[test]
    fn a_malformed_name_is_a_problem_naming_the_variable() {
        let (found, problems) = overrides(
            "BOXD_",
            vec![("BOXD_RESTART____X".to_string(), "1".to_string())],
        );
        assert!(found.is_empty());
        assert_eq!(
            problems[0].origin,
            Origin::Env("BOXD_RESTART____X".to_string())
        );
    }
}
