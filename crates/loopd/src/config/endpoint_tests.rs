//! `[[llama.endpoints]]`: what is refused, and the plan each form resolves to.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::tests::{file, invalid, keys};
use super::*;
use bxconfig::Loader;

fn load(text: &str) -> Config {
    let f = file(text);
    Loader::new(f.path(), ENV_PREFIX).load_valid().unwrap()
}

const TWO: &str = r#"
[[llama.endpoints]]
name = "local"
url = "unix:/run/boxmaker/llama.sock"
roles = ["background", "subagent"]

[[llama.endpoints]]
name = "cupboard"
url = "https://gpu.lan:8443"
api_key_file = "/run/agenix/llama-key"
ca_file = "/etc/boxmaker/lan-ca.pem"
roles = ["main"]
slots = { main = [0, 1, 2, 3] }
"#;

#[test]
fn endpoints_resolve_to_their_roles_and_slots() {
    let cfg = load(TWO);
    let plans = plans(&cfg.llama, &cfg.slots);
    assert_eq!(plans.len(), 2);
    assert_eq!(plans[0].name, "local");
    assert_eq!(
        plans[0].slots,
        RoleSlots {
            main: vec![],
            background: vec![1],
            subagent: vec![2],
        }
    );
    assert_eq!(plans[1].slots.main, [0, 1, 2, 3]);
    assert!(plans[1].slots.background.is_empty());
    assert_eq!(plans[1].key, "llama.endpoints[1] (cupboard)");
}

#[test]
fn the_single_url_is_one_endpoint_on_the_slots_of_slots() {
    let cfg = load("[llama]\nurl = \"http://10.0.0.2:8080\"\n[slots]\nmain = 3\n");
    let one = plans(&cfg.llama, &cfg.slots);
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].name, DEFAULT_ENDPOINT_NAME);
    assert_eq!(one[0].url, "http://10.0.0.2:8080");
    assert_eq!(one[0].slots.main, [3]);
    let default = load("");
    assert_eq!(
        plans(&default.llama, &default.slots)[0].url,
        DEFAULT_LLAMA_URL
    );
}

#[test]
fn a_url_beside_endpoints_is_refused() {
    let found = invalid(&format!("[llama]\nurl = \"http://h:1\"\n{TWO}"));
    assert_eq!(keys(&found), ["llama.url"]);
    assert!(
        found[0].message.contains("[[llama.endpoints]]"),
        "{found:?}"
    );
}

#[test]
fn endpoint_names_are_checked_and_unique() {
    let found = invalid(
        "[[llama.endpoints]]\nname = \"A b\"\nurl = \"http://h:1\"\n\
         [[llama.endpoints]]\nname = \"x\"\nurl = \"http://h:2\"\n\
         [[llama.endpoints]]\nname = \"x\"\nurl = \"http://h:3\"\n",
    );
    assert_eq!(
        keys(&found),
        ["llama.endpoints[0].name", "llama.endpoints[2].name"]
    );
    assert!(found[1].message.contains("another endpoint"), "{found:?}");
}

#[test]
fn a_slot_two_roles_share_or_a_role_nobody_serves_is_refused() {
    // main listed as 1, background takes [slots]' 1.
    let shared = invalid(
        "[[llama.endpoints]]\nname = \"a\"\nurl = \"http://h:1\"\nslots = { main = [1] }\n",
    );
    assert_eq!(keys(&shared), ["llama.endpoints[0].slots.background"]);
    assert!(shared[0].message.contains("already main's"), "{shared:?}");
    let nobody =
        invalid("[[llama.endpoints]]\nname = \"a\"\nurl = \"http://h:1\"\nroles = [\"main\"]\n");
    assert_eq!(keys(&nobody), ["llama.endpoints", "llama.endpoints"]);
    assert!(nobody[0].message.contains("\"background\""), "{nobody:?}");
}

#[test]
fn slots_for_a_role_not_served_and_a_ca_file_without_https_are_refused() {
    let found = invalid(
        "[[llama.endpoints]]\nname = \"a\"\nurl = \"http://h:1\"\nca_file = \"/ca.pem\"\n\
         roles = [\"main\", \"background\"]\nslots = { subagent = [2] }\n\
         [[llama.endpoints]]\nname = \"b\"\nurl = \"http://h:2\"\nroles = [\"subagent\"]\n",
    );
    assert_eq!(
        keys(&found),
        [
            "llama.endpoints[0].ca_file",
            "llama.endpoints[0].slots.subagent"
        ]
    );
}

#[test]
fn endpoint_slots_must_exist_when_expect_slots_is_set() {
    let found = invalid(
        "[expect]\nslots = 2\n\
         [[llama.endpoints]]\nname = \"a\"\nurl = \"http://h:1\"\nslots = { main = [5], background = [0], subagent = [1] }\n",
    );
    assert!(
        keys(&found).contains(&"llama.endpoints[0].slots.main"),
        "{found:?}"
    );
}

#[test]
fn a_key_over_plain_http_to_another_machine_or_a_password_in_a_url_is_refused() {
    let found = invalid(
        "[[llama.endpoints]]\nname = \"a\"\nurl = \"http://gpu.lan:8080\"\napi_key_file = \"/k\"\n\
         [[llama.endpoints]]\nname = \"b\"\nurl = \"https://user:pw@gpu.lan\"\n",
    );
    assert_eq!(
        keys(&found),
        ["llama.endpoints[0].api_key_file", "llama.endpoints[1].url"]
    );
    assert!(found[0].message.contains("in the clear"), "{found:?}");
    assert!(
        !found[1].message.contains("pw"),
        "the message does not repeat it: {found:?}"
    );
    // On loopback, a Unix socket or https, a key is fine.
    for url in [
        "http://127.0.0.1:8080",
        "http://[::1]:8080",
        "unix:/run/l.sock",
        "https://gpu.lan",
    ] {
        load(&format!("[llama]\nurl = {url:?}\napi_key_file = \"/k\"\n"));
    }
}
