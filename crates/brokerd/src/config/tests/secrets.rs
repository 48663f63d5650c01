//! `[[secrets]]` and the places a `{secret:NAME}` may and may not go.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const SECRET: &str = "[[secrets]]\nname = \"gh\"\nfile = \"/run/keys/gh\"\n";

#[test]
fn a_placeholder_must_name_a_secret_and_be_well_formed() {
    let found = invalid(&format!(
        "{SECRET}[[grants]]\ntool = \"http_fetch\"\nhosts = [\"api.github.com\"]\n\
         [grants.headers]\nAuthorization = \"Bearer {{secret:nope}}\"\nX-A = \"{{secret:gh\"\n"
    ));
    assert_eq!(
        keys(&found),
        ["grants[0].headers.Authorization", "grants[0].headers.X-A"]
    );
    assert!(
        found[0].message.contains("names no [[secrets]] entry"),
        "{}",
        found[0]
    );
    assert!(found[1].message.contains("not closed"), "{}", found[1]);
    valid(&format!(
        "{SECRET}[[grants]]\ntool = \"http_fetch\"\nhosts = [\"api.github.com\"]\n\
         [grants.headers]\nAuthorization = \"Bearer {{secret:gh}}\"\n"
    ));
}

#[test]
fn a_secret_header_goes_only_to_hosts_named_exactly() {
    let found = invalid(&format!(
        "{SECRET}[[grants]]\ntool = \"http_fetch\"\nhosts = [\"api.github.com\", \"*.vercel.app\"]\n\
         [grants.headers]\nAuthorization = \"Bearer {{secret:gh}}\"\n"
    ));
    assert_eq!(keys(&found), ["grants[0].hosts[1]"]);
    assert!(found[0].message.contains("exactly"), "{}", found[0]);
    // Without a secret, a glob is as before.
    valid(
        "[[grants]]\ntool = \"http_fetch\"\nhosts = [\"*.vercel.app\"]\n\
         [grants.headers]\nAccept = \"application/json\"\n",
    );
}

#[test]
fn a_shell_grant_may_not_hold_a_secret_in_its_env() {
    let found = invalid(&format!(
        "{SECRET}[[grants]]\ntool = \"exec\"\nprograms = [\"sh\"]\nshell = true\n\
         [grants.env]\nGH_TOKEN = \"{{secret:gh}}\"\n"
    ));
    assert_eq!(keys(&found), ["grants[0].env"]);
    assert!(found[0].message.contains("shell = true"), "{}", found[0]);
}

#[test]
fn a_placeholder_outside_env_and_headers_is_refused() {
    let found = invalid(&format!(
        "{SECRET}[[mcp]]\nname = \"s\"\nprefix = \"s\"\ncommand = \"/bin/{{secret:gh}}\"\n\
         args = [\"--token\", \"{{secret:gh}}\"]\n"
    ));
    assert_eq!(keys(&found), ["mcp[0].command", "mcp[0].args[1]"]);
    assert!(found[1].message.contains("env"), "{}", found[1]);
}

#[test]
fn secret_names_are_words_and_unique_and_files_absolute() {
    let found = invalid(
        "[[secrets]]\nname = \"Git Hub\"\n[[secrets]]\nname = \"a\"\nfile = \"rel\"\n\
         [[secrets]]\nname = \"a\"\n",
    );
    assert_eq!(
        keys(&found),
        ["secrets[0].name", "secrets[1].file", "secrets[2].name"]
    );
}
