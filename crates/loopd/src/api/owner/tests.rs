//! Unit tests of the owner check: this test process plays brokerd (its socketpairs' peer is
//! itself), a `sleep` child an MCP server, and this process's parent some other process.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;
use std::os::unix::net::UnixStream;
use std::process::{Command, Stdio};

/// A child of this process (it plays an MCP server, this process brokerd), killed on drop.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn child() -> Child {
    Child(
        Command::new("sleep")
            .arg("600")
            .stdin(Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// This process, pinned as the process a connection to brokerd reached.
fn brokerd_is_this_process() -> Vec<Arc<Pinned>> {
    let (ours, _theirs) = UnixStream::pair().unwrap();
    vec![Arc::new(Pinned::peer_of(&ours).unwrap())]
}

/// A peer whose connection was made by this process, said to be process `pid`.
fn peer_said_to_be(pid: u32) -> PeerUser {
    let (ours, _theirs) = UnixStream::pair().unwrap();
    let pid = i32::try_from(pid).unwrap();
    PeerUser {
        uid: nix::unistd::getuid().as_raw(),
        pid: Some(pid),
        process: bxhttp::pidfd::PeerPidfd::take(&ours, Some(pid)),
    }
}

/// This process as a peer, as the kernel gives it.
fn this_process_as_a_peer() -> PeerUser {
    let (ours, _theirs) = tokio::net::UnixStream::pair().unwrap();
    PeerUser::of(&ours).unwrap()
}

fn forbidden(result: &Result<(), ApiFailure>, words: &str) -> bool {
    matches!(result, Err(ApiFailure::Forbidden(why)) if why.contains(words))
}

#[tokio::test]
async fn a_descendant_of_brokerd_is_refused_and_brokerd_itself_is_not() {
    let server = child();
    let brokerd = brokerd_is_this_process();
    for act in [OwnerAct::Answer, OwnerAct::Link, OwnerAct::Revoke] {
        let refused = verdict(&brokerd, &peer_said_to_be(server.0.id()), act);
        assert!(forbidden(&refused, "descends from brokerd"), "{refused:?}");
        assert!(forbidden(&refused, act.words()), "{refused:?}");
    }
    assert_eq!(
        verdict(&brokerd, &this_process_as_a_peer(), OwnerAct::Answer),
        Ok(())
    );
}

#[tokio::test]
async fn a_peer_whose_pid_now_names_another_process_is_refused() {
    let brokerd = brokerd_is_this_process();
    // This process's parent is no descendant of it, so the walk lets its pid through; but the
    // process that connected (this one) does not hold that pid: as when a descendant that
    // connected has exited and its pid went to another process.
    let elsewhere = std::os::unix::process::parent_id();
    let peer = peer_said_to_be(elsewhere);
    if peer.process.still_holds(std::process::id()).is_ok() {
        let refused = verdict(&brokerd, &peer, OwnerAct::Answer);
        assert!(forbidden(&refused, "cannot be told"), "{refused:?}");
        assert!(forbidden(&refused, "reused"), "{refused:?}");
    } else {
        eprintln!("skipped: this kernel has no SO_PEERPIDFD");
    }
}

#[tokio::test]
async fn a_peer_without_a_pid_is_refused() {
    let brokerd = brokerd_is_this_process();
    let mut peer = this_process_as_a_peer();
    peer.pid = None;
    let refused = verdict(&brokerd, &peer, OwnerAct::Answer);
    assert!(forbidden(&refused, "no pid"), "{refused:?}");
    let refused = not_brokers_descendant(Some(&pool_nowhere().0), None, OwnerAct::Revoke).await;
    assert_eq!(
        refused,
        Ok(()),
        "nothing to tell it from: revoking goes through"
    );
}

#[tokio::test]
async fn without_a_broker_nothing_is_refused() {
    assert_eq!(
        not_brokers_descendant(None, None, OwnerAct::Answer).await,
        Ok(())
    );
}

/// A pool of connections to a socket nobody serves, and the directory that holds it.
fn pool_nowhere() -> (Pool, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let pool = Pool::new(dir.path().join("brokerd.sock"), "brokerd");
    (pool, dir)
}

#[tokio::test]
async fn a_brokerd_that_cannot_be_reached_lets_no_answer_or_link_through() {
    let (pool, _dir) = pool_nowhere();
    let me = this_process_as_a_peer();
    for act in [OwnerAct::Answer, OwnerAct::Link] {
        let refused = not_brokers_descendant(Some(&pool), Some(&me), act).await;
        let Err(ApiFailure::Unavailable(why)) = &refused else {
            panic!("{refused:?}");
        };
        assert!(
            why.starts_with(
                "cannot tell whether the caller descends from brokerd: brokerd is not reachable"
            ),
            "{why}"
        );
        assert!(why.ends_with("again when it is"), "{why}");
    }
    // Ending the browser sessions gives nothing away: it goes through.
    let revoked = not_brokers_descendant(Some(&pool), Some(&me), OwnerAct::Revoke).await;
    assert_eq!(revoked, Ok(()));
}

#[tokio::test]
async fn brokerd_is_the_process_the_pool_reached() {
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("brokerd.sock");
    let _listener = tokio::net::UnixListener::bind(&socket).unwrap();
    let pool = Pool::new(socket, "brokerd");
    let server = child();
    let mcp = peer_said_to_be(server.0.id());
    let refused = not_brokers_descendant(Some(&pool), Some(&mcp), OwnerAct::Link).await;
    assert!(forbidden(&refused, "descends from brokerd"), "{refused:?}");
    let pids: Vec<u32> = pool.servers().unwrap().iter().map(|p| p.pid()).collect();
    assert_eq!(pids, [std::process::id()]);
}
