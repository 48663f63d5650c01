//! `[[secrets]]`: the credentials brokerd holds, by name (`docs/secrets.md`).

use super::Grant;
use crate::secrets::{SecretConfig, template};
use bxconfig::Problems;

/// Checks `[[secrets]]`: names are words and unique, files absolute.
pub(super) fn check(secrets: &[SecretConfig], p: &mut Problems) {
    for (i, secret) in secrets.iter().enumerate() {
        super::mcp::check_word(&format!("secrets[{i}].name"), &secret.name, p);
        if let Some(file) = &secret.file {
            p.absolute_path(&format!("secrets[{i}].file"), file);
        }
        if let Some(j) = secrets[..i].iter().position(|s| s.name == secret.name) {
            p.push(
                format!("secrets[{i}].name"),
                format!("{:?} is already secrets[{j}].name", secret.name),
            );
        }
    }
}

/// Checks the value `value` at `key` as a template: its placeholders parse and name secrets
/// in `known` (the `[[secrets]]` names).
pub(super) fn check_template(key: &str, value: &str, known: &[&str], p: &mut Problems) {
    template::check(key, value, known, p);
}

/// A value that is not a template (an `[[mcp]]` server's `command` or `args`) must not hold a
/// placeholder: it would reach the program as the literal text.
pub(super) fn check_no_template(key: &str, value: &str, p: &mut Problems) {
    p.check(
        !template::mentions_secret(value),
        key,
        "{secret:NAME} is filled only in the values of headers and env; pass the secret \
         through the server's env",
    );
}

/// The `i`th grant attaches its secrets only where the guard can keep them: `headers` with a
/// secret only to hosts named exactly (with a glob the model picks the host the credential
/// goes to), and no secret in the `env` of an `exec` grant with `shell = true` (a shell prints
/// and reshapes its environment in forms the guard does not know).
pub(super) fn check_grant_keeps_secrets(i: usize, grant: &Grant, p: &mut Problems) {
    if grant.http.injects_secret() {
        for (j, host) in grant.hosts.iter().enumerate() {
            p.check(
                !host.contains(['*', '?', '[']),
                format!("grants[{i}].hosts[{j}]"),
                "a grant whose headers attach a secret must name its hosts exactly, without \
                 globs: with one, the model chooses the host the credential is sent to",
            );
        }
    }
    let env_secret = grant
        .exec
        .env
        .values()
        .any(|v| template::mentions_secret(v));
    p.check(
        !(grant.exec.shell && env_secret),
        format!("grants[{i}].env"),
        "an exec grant with shell = true may not hold a secret in env: a shell can print its \
         environment in forms the leak guard does not know (docs/secrets.md)",
    );
}
