//! `network = true`: the sandbox's own namespace out through slirp4netns, global addresses
//! only, a non-global one only inside a listed network (issue 32.4). Every connection here
//! stays on this machine: the servers are the test's, on its loopback or its own address.

use crate::common::walls;
use bxsandbox::net::{NON_GLOBAL_V4, SLIRP_NETWORK};
use bxsandbox::{Network, Outcome, ProbeOptions, RunError, Spec, Status, Walls};
use std::io::{ErrorKind, Write};
use std::net::{Ipv4Addr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What the test's server answers: a page only the host should read.
const PAGE: &str = "internal-page-4f1c";

/// One network test at a time: each starts a helper and a slirp4netns, and the machine has
/// few cores.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The walls, when they have network (or `None`, the test skipped, as without bwrap).
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

/// A server on `ip` that answers [`PAGE`] to each connection; its port, and the listener to
/// count what it accepted.
fn server(ip: Ipv4Addr) -> (u16, TcpListener) {
    let listener = TcpListener::bind((ip, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let serving = listener.try_clone().unwrap();
    std::thread::spawn(move || {
        for conn in serving.incoming() {
            let Ok(mut conn) = conn else { return };
            let _ = writeln!(conn, "{PAGE}");
        }
    });
    (port, listener)
}

/// A bash script (builtins only: bash is the one program the run executes) that connects to
/// each `(ip, port)` and prints the first line it reads, or the error on stderr.
fn fetch(targets: &[(String, u16)]) -> String {
    targets
        .iter()
        .map(|(ip, port)| {
            format!(
                "if exec 3<>/dev/tcp/{ip}/{port}; then read -r -t 5 line <&3; \
                 echo \"{ip}:{port} read: $line\"; exec 3<&-; fi; "
            )
        })
        .collect()
}

async fn bash(walls: &Walls, script: &str, mut spec: Spec) -> Outcome {
    spec.argv = vec!["bash".into(), "-c".into(), script.into()];
    spec.timeout_ms = 20_000;
    let outcome = bxsandbox::run(&spec, walls).await.unwrap();
    eprintln!(
        "{script}\n=> {} | stdout {} | stderr {}",
        outcome.status,
        String::from_utf8_lossy(&outcome.stdout.bytes),
        String::from_utf8_lossy(&outcome.stderr.bytes)
    );
    outcome
}

fn text(output: &bxsandbox::Output) -> String {
    String::from_utf8_lossy(&output.bytes).into_owned()
}

fn with_network() -> Spec {
    let mut spec = Spec::new(["bash"]);
    spec.network = true;
    spec
}

/// The interfaces of the sandbox's namespace, from `/proc/net/dev` (bash builtins only).
const INTERFACES: &str = "while IFS=: read -r name rest; do case $name in *'|'*) ;; \
                          *) echo \"if ${name// /}\";; esac; done < /proc/net/dev; ";

/// A non-global IPv4 address of this machine other than loopback, where a server can listen.
fn private_address() -> Option<Ipv4Addr> {
    nix::ifaddrs::getifaddrs()
        .ok()?
        .filter_map(|a| a.address?.as_sockaddr_in().map(|s| s.ip()))
        .find(|ip| {
            !ip.is_loopback()
                && !SLIRP_NETWORK.contains(ip)
                && NON_GLOBAL_V4.iter().any(|net| net.contains(ip))
        })
}

/// The processes still running `exe` (a copy of slirp4netns only one test uses, so the probes
/// of tests running beside it, which start slirp4netns too, are not counted). `run` waits for
/// its slirp4netns before it returns, so none is left once it did.
fn left_running(exe: &Path) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let dir = e.ok()?.path();
            (std::fs::read_link(dir.join("exe")).ok()? == exe).then(|| dir.display().to_string())
        })
        .collect()
}

/// Walls whose slirp4netns is a copy of the real one in a directory of its own.
async fn walls_with_own_slirp(found: &Walls, dir: &Path) -> (Walls, PathBuf) {
    let Network::Slirp(real) = found.network() else {
        unreachable!("net_walls gave walls with network")
    };
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(found.bwrap(), dir.join("bwrap")).unwrap();
    let copy = dir.join("slirp4netns");
    std::fs::copy(real, &copy).unwrap();
    std::fs::set_permissions(&copy, std::fs::Permissions::from_mode(0o755)).unwrap();
    let options = ProbeOptions {
        search_path: dir.as_os_str().to_owned(),
        shim: Some(env!("CARGO_BIN_EXE_bxsandbox-shim").into()),
    };
    let walls = bxsandbox::probe(&options).await.unwrap();
    let copy = copy.canonicalize().unwrap();
    assert_eq!(walls.network(), &Network::Slirp(copy.clone()));
    (walls, copy)
}

#[tokio::test]
async fn with_network_the_hosts_loopback_cannot_be_reached() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(walls) = net_walls().await else {
        return;
    };
    let (port, listener) = server(Ipv4Addr::LOCALHOST);
    // 127.0.0.1 is the sandbox's own loopback; 10.0.2.2 is slirp4netns's alias of the host's.
    let script = format!(
        "{INTERFACES}{}",
        fetch(&[("127.0.0.1".into(), port), ("10.0.2.2".into(), port)])
    );
    let outcome = bash(&walls, &script, with_network()).await;
    let out = text(&outcome.stdout);
    assert!(
        !out.contains(PAGE),
        "the host's loopback served the sandbox: {out}"
    );
    // The network is up (the test can tell it is not simply absent).
    assert!(out.contains("if tap0"), "{out}");
    listener.set_nonblocking(true).unwrap();
    let accepted = listener.accept().map(|_| ()).map_err(|e| e.kind());
    assert_eq!(
        accepted,
        Err(ErrorKind::WouldBlock),
        "the host's server saw a connection"
    );
}

#[tokio::test]
async fn a_private_address_of_the_host_is_reached_only_when_its_network_is_listed() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(walls) = net_walls().await else {
        return;
    };
    let Some(ip) = private_address() else {
        eprintln!("skipped: this machine has no non-global address but loopback");
        return;
    };
    let (port, _listener) = server(ip);
    let script = fetch(&[(ip.to_string(), port)]);
    let outcome = bash(&walls, &script, with_network()).await;
    assert!(
        !text(&outcome.stdout).contains(PAGE),
        "{ip} was reached unlisted"
    );
    // Refused by the namespace's rules: "Permission denied", not a timeout.
    assert!(
        text(&outcome.stderr).contains("Permission denied"),
        "{outcome:?}"
    );

    let mut spec = with_network();
    spec.networks = vec![format!("{ip}/32").parse().unwrap()];
    let outcome = bash(&walls, &script, spec).await;
    assert_eq!(
        text(&outcome.stdout),
        format!("{ip}:{port} read: {PAGE}\n"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn the_dns_forwarder_is_the_name_server_and_answers_on_port_53_only() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(walls) = net_walls().await else {
        return;
    };
    // A UDP "connection" sends nothing: it only asks the routing, rules included.
    let script = "read -r conf < /etc/resolv.conf; echo \"$conf\"; \
                  exec 3<>/dev/udp/10.0.2.3/53 && echo 'udp 53 open'; \
                  exec 4<>/dev/udp/10.0.2.3/5353 && echo 'udp 5353 open'; \
                  exec 5<>/dev/tcp/10.0.2.3/8080 && echo 'tcp 8080 open'";
    // Even a listed network that holds the forwarder opens no other port of it.
    let mut spec = with_network();
    spec.networks = vec!["10.0.0.0/8".parse().unwrap()];
    let outcome = bash(&walls, script, spec).await;
    assert_eq!(
        text(&outcome.stdout),
        "nameserver 10.0.2.3\nudp 53 open\n",
        "{outcome:?}"
    );
    assert_eq!(
        text(&outcome.stderr)
            .matches("connect: Permission denied")
            .count(),
        2,
        "{outcome:?}"
    );
}

#[tokio::test]
async fn the_program_cannot_change_the_namespaces_rules_or_routes() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(walls) = net_walls().await else {
        return;
    };
    let Ok(ip) = which::which("ip") else {
        eprintln!("skipped: no `ip` (iproute2) here to try it with");
        return;
    };
    // Re-opening the LAN: drop the rule that prohibits 192.168/16 (whatever its priority),
    // or add one before it, or a route around the rules in another table.
    let script = format!(
        "for p in $({ip} rule show | grep -o '^[0-9]*'); do {ip} rule del pref $p && echo deleted; \
         done; {ip} rule add to 192.168.0.0/16 lookup main pref 1 && echo added; \
         {ip} route add 192.0.2.0/24 via 10.0.2.2 table 7 && echo routed; {ip} rule show",
        ip = ip.display()
    );
    let mut spec = with_network();
    spec.exec_rule = bxsandbox::ExecRule::Any;
    let outcome = bash(&walls, &script, spec).await;
    let out = text(&outcome.stdout);
    assert!(!out.contains("deleted") && !out.contains("added"), "{out}");
    assert!(!out.contains("routed"), "{out}");
    assert!(out.contains("to 192.168.0.0/16 prohibit"), "{out}");
    assert!(
        text(&outcome.stderr).contains("Operation not permitted"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn without_network_there_is_only_the_loopback() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(walls) = walls().await else { return };
    let target = private_address().map_or("192.0.2.1".to_owned(), |ip| ip.to_string());
    let script = format!("{INTERFACES}{}", fetch(&[(target, 9)]));
    let outcome = bash(&walls, &script, Spec::new(["bash"])).await;
    assert_eq!(text(&outcome.stdout), "if lo\n", "{outcome:?}");
    // Landlock refuses the connect where the kernel has it, the empty namespace otherwise.
    let stderr = text(&outcome.stderr);
    assert!(
        stderr.contains("Permission denied") || stderr.contains("Network is unreachable"),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn slirp4netns_ends_with_the_run_and_with_a_timeout() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(found) = net_walls().await else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (walls, slirp) = walls_with_own_slirp(&found, dir.path()).await;
    let outcome = bxsandbox::run(&with_network(), &walls).await.unwrap();
    assert_eq!(outcome.status, Status::Exited(0), "{outcome:?}");
    assert_eq!(left_running(&slirp), Vec::<String>::new());

    let mut spec = with_network();
    spec.argv = vec!["sleep".into(), "30".into()];
    spec.timeout_ms = 1_000;
    let outcome = bxsandbox::run(&spec, &walls).await.unwrap();
    assert_eq!(outcome.status, Status::TimedOut, "{outcome:?}");
    assert_eq!(left_running(&slirp), Vec::<String>::new());
}

#[tokio::test]
async fn without_slirp4netns_a_run_with_network_fails_closed_by_name() {
    let _one = ONE_AT_A_TIME.lock().await;
    let Some(found) = walls().await else { return };
    // A PATH with bubblewrap on it and nothing else.
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(found.bwrap(), dir.path().join("bwrap")).unwrap();
    let options = ProbeOptions {
        search_path: dir.path().as_os_str().to_owned(),
        shim: Some(env!("CARGO_BIN_EXE_bxsandbox-shim").into()),
    };
    let walls = bxsandbox::probe(&options).await.unwrap();
    let why = "slirp4netns is not installed (no slirp4netns on PATH)";
    assert_eq!(walls.network(), &Network::Unavailable(why.into()));
    assert!(
        walls.describe().ends_with(&format!("; no network: {why}")),
        "{}",
        walls.describe()
    );
    let err = bxsandbox::run(&with_network(), &walls).await.unwrap_err();
    assert!(matches!(err, RunError::Network(_)), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "network = true, but the sandbox's network cannot be made here, so nothing ran: {why}"
        )
    );
    // Without network the same walls run as before.
    let outcome = bxsandbox::run(&Spec::new(["true"]), &walls).await.unwrap();
    assert_eq!(outcome.status, Status::Exited(0));
}
