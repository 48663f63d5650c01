//! `network = true` through the broker (issue 32.4): the sandbox reaches a non-global address
//! of the box only when the grant lists its network, and without slirp4netns a network grant
//! fails closed with the reason, which `GET /v1/health` gives too. Every connection stays on
//! this machine.

use super::*;
use bxsandbox::Network;
use bxsandbox::net::NON_GLOBAL_V4;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, TcpListener, UdpSocket};

/// What the test's server answers.
const PAGE: &str = "internal-page-9d2e";

/// This machine's own address on its default route when it is a non-global one: connecting a
/// UDP socket sends nothing, it only asks the routing table.
fn private_address() -> Option<Ipv4Addr> {
    let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    match socket.local_addr().ok()?.ip() {
        IpAddr::V4(ip) if !ip.is_loopback() && NON_GLOBAL_V4.iter().any(|n| n.contains(&ip)) => {
            Some(ip)
        }
        _ => None,
    }
}

/// The walls when they have network; `None` (skipped) as `walls` does.
async fn net_walls() -> Option<Walls> {
    let walls = walls().await?;
    match walls.network() {
        Network::Slirp(_) => Some(walls),
        Network::Unavailable(why)
            if std::env::var("BOXMAKER_REQUIRE_BWRAP").as_deref() != Ok("1") =>
        {
            eprintln!("skipped: the sandbox has no network: {why}");
            None
        }
        Network::Unavailable(why) => panic!("BOXMAKER_REQUIRE_BWRAP=1 but no network: {why}"),
    }
}

fn net_grant(tree: &Tree, networks: &[String]) -> Grant {
    tree.grant(json!({"programs": ["bash"], "shell": true, "network": true, "networks": networks}))
}

#[tokio::test]
async fn a_network_grant_reaches_a_private_address_of_the_box_only_when_it_lists_it() {
    let Some(walls) = net_walls().await else {
        return;
    };
    let Some(ip) = private_address() else {
        eprintln!("skipped: this machine has no non-global address on its default route");
        return;
    };
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { return };
            let _ = writeln!(conn, "{PAGE}");
        }
    });
    let script =
        format!("exec 3<>/dev/tcp/{ip}/{port} && read -r -t 5 line <&3 && echo \"read $line\"");
    let argv = ["bash", "-c", script.as_str()];
    let tree = Tree::new();

    let unlisted = tree.broker(Sandbox::Ready(walls.clone()), vec![net_grant(&tree, &[])]);
    let r = exec(&unlisted, &argv).await;
    assert!(!content(&r).contains(PAGE), "{r:?}");
    assert!(content(&r).contains("Permission denied"), "{r:?}");

    let listed = tree.broker(
        Sandbox::Ready(walls),
        vec![net_grant(&tree, &[format!("{ip}/32")])],
    );
    let r = exec(&listed, &argv).await;
    assert!(content(&r).contains(&format!("read {PAGE}")), "{r:?}");
}

#[tokio::test]
async fn without_slirp4netns_a_network_grant_fails_closed_and_health_says_why() {
    let Some(found) = walls().await else { return };
    // A PATH with bubblewrap on it and nothing else.
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(found.bwrap(), dir.path().join("bwrap")).unwrap();
    let sandbox = Sandbox::probe(&ProbeOptions {
        search_path: dir.path().as_os_str().to_owned(),
        shim: Some(shim()),
    })
    .await;
    let why = "no network: slirp4netns is not installed (no slirp4netns on PATH)";
    let tree = Tree::new();
    let marker = tree.work.join("marker");
    let m = marker.to_str().unwrap();
    let b = tree.broker(
        sandbox,
        vec![tree.grant(json!({"programs": ["touch"], "network": true}))],
    );
    match exec(&b, &["touch", m]).await {
        ToolResponse::Failed { message: error, .. } => assert!(
            error.contains("the sandbox's network cannot be made here, so nothing ran")
                && error.contains("slirp4netns is not installed"),
            "{error}"
        ),
        other => panic!("expected a failure with the reason, got {other:?}"),
    }
    assert!(!marker.exists(), "the program ran");

    let (names, health) = served(b, &tree.root.join("brokerd.sock")).await;
    assert!(names.iter().any(|n| n == "exec"), "{names:?}");
    let exec_walls = health["exec"].as_str().unwrap();
    assert!(exec_walls.ends_with(why), "{health}");
}
