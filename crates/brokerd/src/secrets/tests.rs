#![allow(clippy::unwrap_used)]

use super::*;
use crate::secrets::guard::CUT_PREFIX_MIN_BYTES;
use base64::Engine;
use proptest::prelude::*;
use std::os::unix::fs::PermissionsExt;

const VALUE: &str = "ghp_Secr3tValue/with+chars";

fn secret_file(dir: &Path, name: &str, content: &str, mode: u32) -> SecretConfig {
    let path = dir.join(name);
    std::fs::write(&path, content).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    SecretConfig {
        name: name.to_string(),
        file: Some(path),
    }
}

#[test]
fn a_file_is_read_without_its_final_newline() {
    let dir = tempfile::tempdir().unwrap();
    let config = secret_file(dir.path(), "github", &format!("{VALUE}\n"), 0o600);
    let store = SecretStore::load(&[config], None).unwrap();
    assert_eq!(store.current().value("github"), Some(VALUE));
}

#[test]
fn a_credential_is_read_from_the_credentials_directory() {
    let dir = tempfile::tempdir().unwrap();
    secret_file(dir.path(), "api", VALUE, 0o400);
    let config = SecretConfig {
        name: "api".into(),
        file: None,
    };
    let store = SecretStore::load(std::slice::from_ref(&config), Some(dir.path())).unwrap();
    assert_eq!(store.current().value("api"), Some(VALUE));
    let errors = SecretStore::load(&[config], None).unwrap_err();
    assert!(
        errors[0].to_string().contains("CREDENTIALS_DIRECTORY"),
        "{}",
        errors[0]
    );
}

#[test]
fn a_world_readable_or_missing_file_is_a_clear_error_without_the_value() {
    let dir = tempfile::tempdir().unwrap();
    let open = secret_file(dir.path(), "open", VALUE, 0o644);
    let missing = SecretConfig {
        name: "missing".into(),
        file: Some(dir.path().join("nope")),
    };
    let short = secret_file(dir.path(), "short", "abc\n", 0o600);
    let errors = SecretStore::load(&[open, missing, short], None).unwrap_err();
    let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert!(
        text[0].contains("readable or writable by every user (mode 0644)"),
        "{}",
        text[0]
    );
    assert!(
        text[1].contains("\"missing\"") && text[1].contains("not found"),
        "{}",
        text[1]
    );
    assert!(text[2].contains("the shortest is 8"), "{}", text[2]);
    assert!(
        text.iter()
            .all(|t| !t.contains(VALUE) && !t.contains("abc"))
    );
}

#[test]
fn a_reload_takes_new_values_and_keeps_the_old_one_of_a_file_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let a = secret_file(dir.path(), "a", "first-value-a", 0o600);
    let b = secret_file(dir.path(), "b", "first-value-b", 0o600);
    let store = SecretStore::load(&[a.clone(), b.clone()], None).unwrap();
    std::fs::write(a.file.as_ref().unwrap(), "second-value-a").unwrap();
    std::fs::remove_file(b.file.as_ref().unwrap()).unwrap();
    let errors = store.reload(&[a, b], None);
    assert_eq!(errors.len(), 1, "{errors:?}");
    let now = store.current();
    assert_eq!(now.value("a"), Some("second-value-a"));
    assert_eq!(now.value("b"), Some("first-value-b"));
    assert!(now.guard().find(b"x=second-value-a").is_some());
    // The replaced value stays guarded (see the test below).
    assert_eq!(now.guard().find(b"x=first-value-a"), Some("a"));
}

#[test]
fn a_value_a_reload_replaced_is_still_redacted_and_refused() {
    // An MCP server started before the reload still holds the old value and can echo it.
    let dir = tempfile::tempdir().unwrap();
    let a = secret_file(dir.path(), "a", "first-value-a", 0o600);
    let store = SecretStore::load(std::slice::from_ref(&a), None).unwrap();
    for next in ["second-value-a", "third-value-a"] {
        std::fs::write(a.file.as_ref().unwrap(), next).unwrap();
        assert!(store.reload(std::slice::from_ref(&a), None).is_empty());
    }
    let now = store.current();
    assert_eq!(now.value("a"), Some("third-value-a"));
    let echoed = "old first-value-a, older second-value-a, now third-value-a";
    let redacted = now.guard().redact(echoed);
    assert_eq!(
        redacted.text,
        "old {secret:a}, older {secret:a}, now {secret:a}"
    );
    assert_eq!(redacted.names, ["a"]);
    assert_eq!(now.guard().find(b"?k=first-value-a"), Some("a"));
}

#[test]
fn a_fifo_or_a_world_writable_file_is_refused_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap();
    assert!(made.success());
    std::fs::set_permissions(&fifo, std::fs::Permissions::from_mode(0o600)).unwrap();
    let config = SecretConfig {
        name: "fifo".into(),
        file: Some(fifo),
    };
    let errors = SecretStore::load(&[config], None).unwrap_err();
    assert!(
        errors[0].to_string().contains("not a regular file"),
        "{}",
        errors[0]
    );
    let planted = secret_file(dir.path(), "planted", VALUE, 0o602);
    let errors = SecretStore::load(&[planted], None).unwrap_err();
    assert!(errors[0].to_string().contains("mode 0602"), "{}", errors[0]);
}

#[test]
fn a_value_inside_a_json_string_is_redacted_escaped() {
    let pem = "-----BEGIN KEY-----\nMIIEvQIBADAN/Bgkq\"hkiG9w0\n-----END KEY-----";
    let secrets = Secrets::from_values([("key", pem)]);
    let json = serde_json::json!({ "key": pem }).to_string();
    let redacted = secrets.guard().redact(&json);
    assert_eq!(redacted.text, r#"{"key":"{secret:key}"}"#);
    let slashed = json.replace('/', "\\/");
    assert_eq!(
        secrets.guard().redact(&slashed).text,
        r#"{"key":"{secret:key}"}"#
    );
}

#[test]
fn debug_shows_names_only() {
    let secrets = Secrets::from_values([("github", VALUE)]);
    let shown = format!("{secrets:?}");
    assert!(
        shown.contains("github") && !shown.contains(VALUE),
        "{shown}"
    );
}

fn guard() -> Secrets {
    Secrets::from_values([("github", VALUE), ("other", "another-secret-value")])
}

#[test]
fn every_listed_encoding_is_found_in_outgoing_text() {
    let secrets = guard();
    let g = secrets.guard();
    let b64 = base64::engine::general_purpose::STANDARD.encode(format!("k={VALUE}"));
    let b64url = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("xy{VALUE}"));
    let partly_encoded = VALUE.replace('S', "%53").replace('/', "%2F");
    let twice = VALUE.replace('/', "%252F");
    let reversed: String = VALUE.chars().rev().collect();
    let cases = [
        format!("https://evil.example/?t={VALUE}"),
        format!("https://evil.example/?t={partly_encoded}"),
        format!("https://evil.example/?t={twice}"),
        b64,
        b64url,
        hex::encode(VALUE).to_uppercase(),
        format!("abc{}def", hex::encode(VALUE)),
        reversed,
    ];
    for case in &cases {
        assert_eq!(g.find(case.as_bytes()), Some("github"), "{case}");
    }
    assert_eq!(g.find(b"https://example.org/?q=ordinary"), None);
}

#[test]
fn json_strings_are_scanned_decoded() {
    let secrets = guard();
    let escaped = VALUE.replace('g', "\\u0067");
    let args: serde_json::Value =
        serde_json::from_str(&format!(r#"{{"q": ["a", {{"deep": "{escaped}"}}]}}"#)).unwrap();
    assert_eq!(secrets.guard().find_in_json(&args), Some("github"));
    let key: serde_json::Value = serde_json::from_str(r#"{"another-secret-value": 1}"#).unwrap();
    assert_eq!(secrets.guard().find_in_json(&key), Some("other"));
}

#[test]
fn redaction_replaces_the_value_and_its_encodings_with_the_placeholder() {
    let secrets = guard();
    let text = format!(
        "env: API_KEY={VALUE}\nhex: {}\nand another-secret-value.",
        hex::encode(VALUE)
    );
    let redacted = secrets.guard().redact(&text);
    assert_eq!(
        redacted.text,
        "env: API_KEY={secret:github}\nhex: {secret:github}\nand {secret:other}."
    );
    assert_eq!(redacted.names, ["github", "other"]);
    let clean = secrets.guard().redact("nothing here ✓");
    assert!(matches!(clean.text, std::borrow::Cow::Borrowed(_)) && clean.names.is_empty());
}

#[test]
fn the_start_of_a_value_a_cut_left_at_the_end_of_a_text_is_redacted() {
    let secrets = guard();
    let g = secrets.guard();
    let half = &VALUE[..VALUE.len() / 2];
    // http_fetch and read_file: the text ends where the cap cut.
    let page = format!("token: {half}");
    assert_eq!(g.redact_cut(&page).text, "token: {secret:github}");
    assert_eq!(g.redact_cut(&page).names, ["github"]);
    // A cut hex form, in any case.
    let hex_half = &hex::encode(VALUE)[..20];
    assert_eq!(
        g.redact_cut(&hex_half.to_uppercase()).text,
        "{secret:github}"
    );
    // Reversed, the value's end comes first.
    let reversed: String = VALUE.chars().rev().take(9).collect();
    assert_eq!(
        g.redact_cut(&format!("x {reversed}")).text,
        "x {secret:github}"
    );
    // Without a cut, a text's end is its own.
    assert_eq!(g.redact(&page).text, page);
    // Only the tail is scanned for a cut: a long page's end is found where it lies.
    let long = format!("{}{half}", "a line of a page\n".repeat(4096));
    let redacted = g.redact_cut(&long);
    assert!(redacted.text.ends_with("a line of a page\n{secret:github}"));
    assert_eq!(redacted.names, ["github"]);
}

#[test]
fn a_start_shorter_than_the_minimum_or_not_at_the_cut_is_left() {
    let secrets = guard();
    let g = secrets.guard();
    let short = &VALUE[..CUT_PREFIX_MIN_BYTES - 1];
    let text = format!("ends with {short}");
    assert_eq!(g.redact_cut(&text).text, text);
    // Line ends are not cuts: `size: 16768` ends like the hex of "ghp_" (6768...).
    let lines = format!(
        "size: 16768
{}
and {}, mid-line",
        &VALUE[..10],
        &VALUE[..10]
    );
    let ended = format!("{lines}.");
    for (text, redacted) in [(&lines, g.redact(&lines)), (&ended, g.redact_cut(&ended))] {
        assert_eq!(&redacted.text, text);
        assert!(redacted.names.is_empty());
    }
}

proptest! {
    #[test]
    fn any_value_in_any_base64_text_is_found(
        value in "[ -~]{8,40}",
        prefix in proptest::collection::vec(any::<u8>(), 0..7),
        suffix in proptest::collection::vec(any::<u8>(), 0..7),
        url_safe in any::<bool>(),
    ) {
        let secrets = Secrets::from_values([("s", value.as_str())]);
        let mut input = prefix;
        input.extend_from_slice(value.as_bytes());
        input.extend_from_slice(&suffix);
        let encoded = if url_safe {
            base64::engine::general_purpose::URL_SAFE.encode(&input)
        } else {
            base64::engine::general_purpose::STANDARD.encode(&input)
        };
        prop_assert_eq!(secrets.guard().find(encoded.as_bytes()), Some("s"));
    }

    #[test]
    fn redacted_text_never_holds_the_value(
        value in "[a-zA-Z0-9]{8,24}",
        around in proptest::collection::vec("[ -~]{0,12}", 1..4),
    ) {
        let secrets = Secrets::from_values([("s", value.as_str())]);
        let text = around.join(&value);
        let redacted = secrets.guard().redact(&text);
        prop_assert!(!redacted.text.contains(&value));
    }

    #[test]
    fn a_cut_never_leaves_enough_of_the_value_to_read(
        value in "[a-zA-Z0-9]{8,40}",
        before in "[ -~]{0,200}",
        cut in 0usize..40,
    ) {
        let secrets = Secrets::from_values([("s", value.as_str())]);
        let kept = &value[..cut.min(value.len())];
        let text = format!("{before}{kept}");
        let redacted = secrets.guard().redact_cut(&text);
        if kept.len() >= CUT_PREFIX_MIN_BYTES {
            prop_assert!(redacted.text.ends_with("{secret:s}"), "{}", redacted.text);
        }
    }
}
