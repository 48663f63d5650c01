//! https endpoints: the client through a TLS-terminating proxy in front of fakellama, with a
//! configured CA, the system's roots, and a certificate for another name.
#![cfg(test)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use crate::config::Llama;
use crate::llama::tests::support::{
    Fake, TEST_ATTEMPTS, TEST_BACKOFF_INITIAL_MS, TEST_BACKOFF_MAX_MS, chat_retry, content_of, user,
};
use crate::llama::tests::tls_proxy::{TlsProxy, test_tls_for, upstream_of};
use crate::llama::{Client, ClientOptions, Health, InferError};

/// The API key fakellama wants and the key file holds.
const KEY: &str = "tls-test-key-5150";

/// fakellama (wanting [`KEY`]) behind a TLS proxy whose certificate is for `names`, and a
/// directory holding the proxy's CA (`ca.pem`) and the key file (`llama.key`).
struct Setup {
    proxy: TlsProxy,
    fake: Fake,
    dir: tempfile::TempDir,
}

impl Setup {
    fn new(names: &[&str]) -> Setup {
        let fake = Fake::start(fakellama::Options {
            api_key: Some(KEY.into()),
            ..Default::default()
        });
        let tls = test_tls_for(names).unwrap();
        let proxy = TlsProxy::start(
            &fake.rt,
            tls.acceptor,
            upstream_of(&fake.server.url()).unwrap(),
        )
        .unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), &tls.ca_pem).unwrap();
        std::fs::write(dir.path().join("llama.key"), format!("{KEY}\n")).unwrap();
        Setup { proxy, fake, dir }
    }

    fn url(&self, host: &str) -> String {
        format!("https://{host}:{}", self.proxy.port)
    }

    fn ca(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// A client for `url` as an endpoint `llama.endpoints[0] (remote)` would make it, with
    /// the key file, `ca_file` and fast retries.
    fn client(&self, url: &str, ca_file: Option<&Path>) -> Client {
        let llama = Llama {
            retry_max_attempts: TEST_ATTEMPTS,
            retry_initial_backoff_ms: TEST_BACKOFF_INITIAL_MS,
            retry_max_backoff_ms: TEST_BACKOFF_MAX_MS,
            ..Llama::default()
        };
        let key = self.dir.path().join("llama.key");
        let options = ClientOptions::for_endpoint(
            &llama,
            "llama.endpoints[0] (remote)",
            url,
            Some(&key),
            ca_file,
        )
        .unwrap();
        Client::new(options)
    }
}

#[test]
fn https_with_a_ca_file_streams_a_chat_and_sends_the_key_inside_tls() {
    let setup = Setup::new(&["localhost", "127.0.0.1"]);
    let blocking = setup.fake.blocking();
    for host in ["localhost", "127.0.0.1"] {
        let client = setup.client(&setup.url(host), Some(&setup.ca()));
        let (events, done) = chat_retry(&blocking, &client, &user("over tls"));
        let done = done.unwrap();
        assert!(events.len() > 1, "streamed: {events:?}");
        assert_eq!(content_of(&events), fakellama::FIXED_REPLY);
        assert_eq!(done.content.as_deref(), Some(fakellama::FIXED_REPLY));
        assert_eq!(blocking.wait(client.health()).unwrap(), Health::Ok);
        let props = blocking.wait(client.props()).unwrap();
        assert_eq!(props.n_ctx, fakellama::DEFAULT_N_CTX);
        assert!(!client.faults().snapshot().failing);
    }
    let seen = setup.proxy.seen().to_ascii_lowercase();
    let bearer = format!("authorization: bearer {}", KEY.to_ascii_lowercase());
    assert!(
        seen.contains(&bearer),
        "the key arrived through TLS: {seen}"
    );
    assert!(seen.contains("post /v1/chat/completions"), "{seen}");
    assert_eq!(setup.fake.server.requests().len(), 2);
}

#[test]
fn https_without_a_ca_file_refuses_a_private_ca_on_the_system_roots() {
    let setup = Setup::new(&["localhost"]);
    let client = setup.client(&setup.url("localhost"), None);
    let (events, done) = chat_retry(&setup.fake.blocking(), &client, &user("hi"));
    let e = done.unwrap_err();
    let InferError::Tls { url, message } = &e else {
        panic!("expected a TLS error, got {e:?}");
    };
    // Another try meets the same certificate: none is made.
    assert!(
        !events
            .iter()
            .any(|e| matches!(e, crate::llama::ChatEvent::Attempt { .. })),
        "{events:?}"
    );
    // Nor does start-up wait for it: the error comes at once, not after the wait.
    let waited = setup.fake.blocking().wait(client.wait_until_ready(600_000));
    assert!(matches!(waited, Err(InferError::Tls { .. })), "{waited:?}");
    assert_eq!(url, &setup.url("localhost"));
    assert!(
        message.contains("certificate was not accepted") && message.contains("UnknownIssuer"),
        "{message}"
    );
    assert!(
        setup.fake.server.requests().is_empty(),
        "nothing got through"
    );
    let state = client.faults().snapshot();
    assert!(state.failing);
    assert_eq!(state.last_error, Some(e.to_string()));
}

#[test]
fn https_refuses_a_certificate_for_another_name() {
    let setup = Setup::new(&["other.example"]);
    let client = setup.client(&setup.url("localhost"), Some(&setup.ca()));
    let e = setup.fake.blocking().wait(client.health()).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, InferError::Tls { .. }), "{e:?}");
    assert!(
        text.contains("certificate not valid for name \"localhost\""),
        "{text}"
    );
    assert!(text.contains("other.example"), "{text}");
}

#[test]
fn https_refuses_a_plain_http_server_with_a_tls_error() {
    let fake = Fake::start(fakellama::Options::default());
    let url = fake.server.url().replacen("http://", "https://", 1);
    let client = Client::new(ClientOptions::for_url(&url).unwrap());
    let e = fake.blocking().wait(client.health()).unwrap_err();
    assert!(
        matches!(&e, InferError::Tls { message, .. } if message.contains("TLS handshake failed")),
        "{e:?}"
    );
}

#[test]
fn for_endpoint_names_the_endpoint_in_its_errors() {
    let setup = Setup::new(&["localhost"]);
    let what = "llama.endpoints[1] (cupboard)";
    let llama = Llama::default();
    let missing = setup.dir.path().join("nope.pem");
    let e = ClientOptions::for_endpoint(&llama, what, "https://gpu.lan", None, Some(&missing))
        .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("llama.endpoints[1] (cupboard).ca_file") && text.contains("nope.pem"),
        "{text}"
    );
    let e = ClientOptions::for_endpoint(&llama, what, "http://gpu.lan", None, Some(&setup.ca()))
        .unwrap_err();
    assert!(e.to_string().contains("is not https://"), "{e}");
    let e = ClientOptions::for_endpoint(&llama, what, "gopher://x", None, None).unwrap_err();
    assert!(
        e.to_string().contains("llama.endpoints[1] (cupboard).url"),
        "{e}"
    );
    let e =
        ClientOptions::for_endpoint(&llama, what, "http://x", Some(&missing), None).unwrap_err();
    assert!(e.to_string().contains("(cupboard).api_key_file"), "{e}");

    let plain = ClientOptions::for_endpoint(&llama, what, "http://x", None, None).unwrap();
    assert!(plain.tls.is_none());
    let https = ClientOptions::for_endpoint(&llama, what, "https://x", None, None).unwrap();
    assert!(https.tls.is_some());
    let pinned =
        ClientOptions::for_endpoint(&llama, what, "https://x", None, Some(&setup.ca())).unwrap();
    assert_ne!(https.tls, pinned.tls);
    assert!(format!("{pinned:?}").contains("ca.pem"), "{pinned:?}");
}

#[test]
fn from_config_uses_llama_ca_file() {
    let setup = Setup::new(&["localhost"]);
    let llama = Llama {
        url: Some(setup.url("localhost")),
        api_key_file: Some(setup.dir.path().join("llama.key")),
        ca_file: Some(setup.ca()),
        ..Llama::default()
    };
    let client = Client::new(ClientOptions::from_config(&llama).unwrap());
    let (events, done) = chat_retry(&setup.fake.blocking(), &client, &user("configured"));
    done.unwrap();
    assert_eq!(content_of(&events), fakellama::FIXED_REPLY);
}
