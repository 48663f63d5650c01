//! `http_fetch` with a secret through the broker, as loopd reaches it: the broker's secrets
//! fill the grant's header, a model's attempt to send the secret is denied `leak` unlabelled
//! (before anything ran), a redirect that would carry it is denied `leak` with the grant's
//! labels (a server chose it), and neither answers nor audit lines hold the value.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common::web::{Server, test_tls};
use crate::common::{broker, config, grant, request};
use brokerd::ToolSet;
use brokerd::audit::AUDIT_FILE;
use brokerd::builtin::http_fetch::HttpFetch;
use brokerd::config::Limits;
use brokerd::secrets::{SecretStore, Secrets};
use bxcore::{DataClass, DenyReason};
use proto::ToolResponse;
use serde_json::json;
use std::sync::Arc;

const TOKEN: &str = "ghp_Zx81BrokerTokenValue7";

#[tokio::test]
async fn the_broker_fills_the_header_and_denies_leaks_without_quoting_the_secret() {
    let (roots, acceptor) = test_tls();
    let server = Server::start(Some(acceptor)).await;
    let dir = tempfile::tempdir().unwrap();
    let mut g = grant("http_fetch", &["*"]);
    g.hosts = vec!["localhost".into()];
    g.ports = vec![server.addr.port()];
    g.networks = vec!["127.0.0.0/8".into()];
    g.http.headers = [("Authorization".into(), "Bearer {secret:github}".into())].into();
    let cfg = config(dir.path(), vec![g], Limits::default());
    let mut tools = ToolSet::new();
    tools
        .insert(Arc::new(HttpFetch::with_root_certificates(roots)))
        .unwrap();
    let store = SecretStore::new(Secrets::from_values([("github", TOKEN)]));
    let b = broker(&cfg, tools).with_secrets(store);
    let call = |args: serde_json::Value| request("main", 1, "http_fetch", &args.to_string());

    let ok = b
        .call(&call(json!({"url": server.local("https", "/ok")})))
        .await;
    assert!(
        matches!(&ok, ToolResponse::Result { content, class: DataClass::Public, untrusted: true, .. } if content == "hello"),
        "{ok:?}"
    );
    assert_eq!(
        server.seen()[0].headers["authorization"],
        format!("Bearer {TOKEN}").as_str()
    );

    let url = server.local("https", &format!("/ok?q={TOKEN}"));
    let denied = b.call(&call(json!({ "url": url }))).await;
    match &denied {
        ToolResponse::Denied {
            reason: DenyReason::Leak,
            detail: Some(detail),
            labels: None,
        } => assert!(
            detail.contains("the URL") && detail.contains("\"github\""),
            "{detail}"
        ),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.seen().len(), 1);

    let to = server.local("https", "/ok");
    let reflected = b
        .call(&call(
            json!({"url": server.local("https", &format!("/reflect/plain?to={to}"))}),
        ))
        .await;
    match &reflected {
        ToolResponse::Denied {
            reason: DenyReason::Leak,
            detail: Some(detail),
            labels: Some(_),
        } => assert!(detail.contains("redirect 1's URL"), "{detail}"),
        other => panic!("{other:?}"),
    }
    assert_eq!(server.seen().len(), 2);

    for response in [&ok, &denied, &reflected] {
        assert!(!format!("{response:?}").contains(TOKEN), "{response:?}");
    }
    let audit = std::fs::read_to_string(cfg.state_dir.join(AUDIT_FILE)).unwrap();
    assert!(!audit.is_empty());
    assert!(!audit.contains(TOKEN), "{audit}");
}
