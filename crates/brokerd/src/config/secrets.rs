//! `[[secrets]]`: the credentials brokerd holds, by name (`docs/secrets.md`).

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
