//! Who may answer an approval: not brokerd's descendants. brokerd's MCP servers run as
//! brokerd's user, which is loopd's user too, so loopd's socket lets them in; were they able
//! to answer approvals, a server (or anything it started) could approve the calls it was meant
//! to wait on. So an answer's peer is walked up `/proc` (`bxhttp::ancestry`, the walk brokerd
//! uses on its own socket), and refused when brokerd is among its parents.
//!
//! brokerd's pid comes from its socket (`SO_PEERCRED` of a fresh connection), asked at each
//! answer, so a restarted brokerd is the one checked. A brokerd that does not answer has no
//! live descendants to fear (boxd kills what is left of a child's process group), so the
//! answer is let through. What cannot be decided otherwise is refused: a peer whose pid the
//! kernel did not give (another pid namespace), a walk that fails.

use super::ApiFailure;
use bxhttp::ancestry::{Ancestor, Procfs};
use std::path::Path;

/// Refuses (403) an approval answer from `peer_pid` when it descends from the brokerd serving
/// `broker_socket`. Without a broker (fake tools) there are no MCP servers to refuse.
pub(super) async fn not_brokers_descendant(
    broker_socket: Option<&Path>,
    peer_pid: Option<i32>,
) -> Result<(), ApiFailure> {
    let Some(socket) = broker_socket else {
        return Ok(());
    };
    let Some(brokerd) = brokerd_pid(socket).await else {
        return Ok(());
    };
    refuse_descendant(brokerd, peer_pid)
}

/// brokerd's pid as its socket's server says, when it answers.
async fn brokerd_pid(socket: &Path) -> Option<u32> {
    let stream = tokio::net::UnixStream::connect(socket).await.ok()?;
    let pid = stream.peer_cred().ok()?.pid()?;
    u32::try_from(pid).ok().filter(|pid| *pid > 0)
}

/// The verdict for `peer_pid` against `brokerd`'s pid.
fn refuse_descendant(brokerd: u32, peer_pid: Option<i32>) -> Result<(), ApiFailure> {
    let refuse = |why: String| Err(ApiFailure::Forbidden(why));
    let Some(peer) = peer_pid.and_then(|pid| u32::try_from(pid).ok()) else {
        return refuse(
            "the kernel gave no pid for this peer (another pid namespace?), so loopd cannot \
             tell it from one of brokerd's MCP servers; answer approvals from the box itself"
                .into(),
        );
    };
    let verdict = Ancestor::process(brokerd).and_then(|b| b.is_ancestor_of(peer, &Procfs));
    match verdict {
        Ok(false) => Ok(()),
        Ok(true) => refuse(format!(
            "process {peer} descends from brokerd (an MCP server, or something one started): \
             it may not answer approvals"
        )),
        Err(e) => refuse(format!(
            "cannot tell whether process {peer} descends from brokerd ({e}); refused"
        )),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
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

    #[test]
    fn a_descendant_of_brokerd_is_refused_and_others_are_not() {
        let me = std::process::id();
        let server = child();
        let pid = i32::try_from(server.0.id()).unwrap();
        let refused = refuse_descendant(me, Some(pid));
        assert!(
            matches!(&refused, Err(ApiFailure::Forbidden(why)) if why.contains("descends from brokerd")),
            "{refused:?}"
        );
        // The owner's boxctl is no child of brokerd: here, brokerd is the child.
        let owner = i32::try_from(me).unwrap();
        assert_eq!(refuse_descendant(server.0.id(), Some(owner)), Ok(()));
        assert!(matches!(
            refuse_descendant(me, None),
            Err(ApiFailure::Forbidden(_))
        ));
    }

    #[test]
    fn without_a_broker_or_with_one_that_does_not_answer_nothing_is_refused() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("brokerd.sock");
        rt.block_on(async {
            assert_eq!(not_brokers_descendant(None, None).await, Ok(()));
            assert_eq!(not_brokers_descendant(Some(&gone), Some(1)).await, Ok(()));
        });
    }

    #[test]
    fn brokerds_pid_is_the_one_serving_its_socket() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("brokerd.sock");
        let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
        let server = child();
        let pid = i32::try_from(server.0.id()).unwrap();
        rt.block_on(async {
            assert_eq!(brokerd_pid(&socket).await, Some(std::process::id()));
            let refused = not_brokers_descendant(Some(&socket), Some(pid)).await;
            assert!(
                matches!(refused, Err(ApiFailure::Forbidden(_))),
                "{refused:?}"
            );
        });
    }
}
