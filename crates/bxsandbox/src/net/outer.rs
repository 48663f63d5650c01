//! The outer side of a run with network: the command `run` starts (the helper, which becomes
//! bubblewrap), and slirp4netns attached to the helper's namespaces before the program starts
//! and ended with the run.
//!
//! The handshake, over pipes whose numbers are on bubblewrap's command line:
//! - `--info-fd`: bubblewrap writes its child's pid once it has started, which means the
//!   helper made the namespaces and their rules (end of file: the helper failed; the run's
//!   outcome then carries its exit status and stderr);
//! - slirp4netns's `--ready-fd`: it writes `1` once `tap0` and its default route are up;
//! - `--block-fd`: one byte from us lets bubblewrap start the program;
//! - slirp4netns's `--exit-fd`: it exits when we close it (at the end of the run, or when this
//!   process dies), and is killed as well.

use super::RESOLV_CONF;
use super::inner::{HELPER_ARG, HelperConfig};
use super::plan::{MAX_NETWORKS, SLIRP_DNS};
use crate::spec::Spec;
use crate::walls::{Network, Walls};
use command_fds::CommandFdExt;
use ipnet::IpNet;
use std::io::Write;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::net::unix::pipe::Receiver;
use tokio::process::Child;

/// The limit on each step of attaching the network: bubblewrap starting, slirp4netns ready
/// (milliseconds). Both take a few.
pub const NET_SETUP_TIMEOUT_MS: u64 = 10_000;
/// How long slirp4netns is waited for once killed (milliseconds).
const SLIRP_EXIT_WAIT_MS: u64 = 2_000;
/// The most of slirp4netns's stderr kept for an error message (bytes); the rest is read and
/// dropped, so it never blocks on a full pipe.
const SLIRP_STDERR_MAX_BYTES: usize = 4096;
/// The device slirp4netns adds in the sandbox's namespace.
const TAP_NAME: &str = "tap0";
/// The MTU of that device: slirp4netns's largest, its fastest.
const SLIRP_MTU: &str = "65520";

/// Why a run with network could not start. The program never ran.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    /// The walls have no network (slirp4netns missing, or its trial failed): never the host's
    /// network instead.
    #[error("network = true, but the sandbox's network cannot be made here, so nothing ran: {0}")]
    Unavailable(String),
    /// A listed network was IPv6; the sandbox's network has none.
    #[error(
        "networks entry {0}: the sandbox's network has no IPv6 (slirp4netns runs without it); \
         list IPv4 networks"
    )]
    Ipv6(IpNet),
    /// More networks than a run may list.
    #[error("{0} networks are listed; the most is {MAX_NETWORKS}")]
    TooMany(usize),
    /// A pipe or a read failed.
    #[error("setting up the sandbox's network: {what}: {source}")]
    Io {
        /// Which step.
        what: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// A step did not finish in time.
    #[error("setting up the sandbox's network: {0} within {NET_SETUP_TIMEOUT_MS} ms")]
    Timeout(&'static str),
    /// slirp4netns did not start or did not attach.
    #[error("slirp4netns ({path}) could not attach the sandbox's network: {said}")]
    Slirp {
        /// Its path.
        path: String,
        /// What it said on stderr, or why it could not start.
        said: String,
    },
}

/// What `run` starts: bubblewrap, or with network the helper that becomes bubblewrap.
pub(crate) struct Wrapped {
    /// The program to start.
    pub(crate) program: PathBuf,
    /// Its arguments.
    pub(crate) args: Vec<String>,
    /// Descriptors the child keeps at the numbers its command line names.
    pub(crate) fds: Vec<OwnedFd>,
    /// What is left to do once it started.
    pub(crate) pending: Pending,
}

/// The network still to attach once the command started (nothing without network).
pub(crate) struct Pending(Option<PendingNet>);

struct PendingNet {
    slirp: PathBuf,
    info: std::io::PipeReader,
    block: std::io::PipeWriter,
}

/// The command for `spec`, given bubblewrap's arguments.
pub(crate) fn wrap(
    spec: &Spec,
    walls: &Walls,
    mut bwrap_args: Vec<String>,
) -> Result<Wrapped, NetError> {
    if !spec.network {
        return Ok(Wrapped {
            program: walls.bwrap().to_owned(),
            args: bwrap_args,
            fds: Vec::new(),
            pending: Pending(None),
        });
    }
    let slirp = match walls.network() {
        Network::Slirp(path) => path.clone(),
        Network::Unavailable(why) => return Err(NetError::Unavailable(why.clone())),
    };
    let allowed = allowed(&spec.networks)?;
    let io = |what| move |source| NetError::Io { what, source };
    let (info, info_child) = std::io::pipe().map_err(io("making a pipe"))?;
    let (block_child, block) = std::io::pipe().map_err(io("making a pipe"))?;
    let (resolv_child, mut resolv) = std::io::pipe().map_err(io("making a pipe"))?;
    // A few bytes: the pipe holds them until bubblewrap reads them.
    resolv
        .write_all(format!("nameserver {SLIRP_DNS}\n").as_bytes())
        .map_err(io("writing resolv.conf"))?;
    drop(resolv);
    let fds: Vec<OwnedFd> = vec![info_child.into(), block_child.into(), resolv_child.into()];
    let number = |i: usize| fds[i].as_raw_fd().to_string();
    let options = [
        "--info-fd".to_owned(),
        number(0),
        "--block-fd".to_owned(),
        number(1),
        "--ro-bind-data".to_owned(),
        number(2),
        RESOLV_CONF.to_owned(),
    ];
    // Before the `--` that ends bubblewrap's options (the first one: no option value is `--`).
    let at = bwrap_args
        .iter()
        .position(|a| a == "--")
        .unwrap_or(bwrap_args.len());
    bwrap_args.splice(at..at, options);
    let config = HelperConfig {
        allowed: allowed.iter().map(ToString::to_string).collect(),
    };
    // Plain strings: serialising cannot fail.
    let config = serde_json::to_string(&config).unwrap_or_default();
    let mut args = vec![
        HELPER_ARG.to_owned(),
        config,
        "--".to_owned(),
        walls.bwrap().to_string_lossy().into_owned(),
    ];
    args.extend(bwrap_args);
    Ok(Wrapped {
        program: walls.shim().to_owned(),
        args,
        fds,
        pending: Pending(Some(PendingNet { slirp, info, block })),
    })
}

/// The spec's networks as IPv4 networks; an IPv6 one is refused by name.
fn allowed(networks: &[IpNet]) -> Result<Vec<ipnet::Ipv4Net>, NetError> {
    if networks.len() > MAX_NETWORKS {
        return Err(NetError::TooMany(networks.len()));
    }
    networks
        .iter()
        .map(|net| match net {
            IpNet::V4(v4) => Ok(*v4),
            IpNet::V6(_) => Err(NetError::Ipv6(*net)),
        })
        .collect()
}

/// The network of a started run; ended by [`Attached::finish`] or, if the run is dropped, by
/// dropping it (slirp4netns is killed and its exit descriptor closed).
pub(crate) struct Attached(Option<Slirp>);

struct Slirp {
    child: Child,
    /// Closing it makes slirp4netns exit.
    _exit: std::io::PipeWriter,
}

impl Pending {
    /// Attaches slirp4netns to the namespaces of `helper` (the process `run` started, now
    /// bubblewrap) and lets the program start. `Attached(None)` without network, or when the
    /// helper ended before bubblewrap started (the run reports its status).
    pub(crate) async fn attach(
        self,
        helper: Option<u32>,
        walls: &Walls,
    ) -> Result<Attached, NetError> {
        let Some(pending) = self.0 else {
            return Ok(Attached(None));
        };
        let io = |what| move |source| NetError::Io { what, source };
        let info = Receiver::from_owned_fd(OwnedFd::from(pending.info))
            .map_err(io("reading bubblewrap's --info-fd"))?;
        let said = within("bubblewrap did not start", read_all(info))
            .await?
            .map_err(io("reading bubblewrap's --info-fd"))?;
        let Some(helper) = helper.filter(|_| !said.is_empty()) else {
            return Ok(Attached(None));
        };
        let slirp = start_slirp(&pending.slirp, helper, walls).await?;
        // The program may start: one byte on bubblewrap's --block-fd. A bubblewrap already
        // gone closed the pipe; its status is the run's.
        let mut block = pending.block;
        let _ = block.write_all(b"1");
        Ok(Attached(Some(slirp)))
    }
}

impl Attached {
    /// Ends slirp4netns (the run is over) and waits for it, within a bound.
    pub(crate) async fn finish(self) {
        let Some(mut slirp) = self.0 else { return };
        let _ = slirp.child.start_kill();
        let wait = tokio::time::timeout(
            Duration::from_millis(SLIRP_EXIT_WAIT_MS),
            slirp.child.wait(),
        );
        if wait.await.is_err() {
            tracing::warn!("slirp4netns did not exit {SLIRP_EXIT_WAIT_MS} ms after SIGKILL");
        }
    }
}

/// Starts slirp4netns on the namespaces of `helper` and waits until it is ready.
async fn start_slirp(path: &PathBuf, helper: u32, walls: &Walls) -> Result<Slirp, NetError> {
    let io = |what| move |source| NetError::Io { what, source };
    let (ready, ready_child) = std::io::pipe().map_err(io("making a pipe"))?;
    let (exit_child, exit) = std::io::pipe().map_err(io("making a pipe"))?;
    let ready_child = OwnedFd::from(ready_child);
    let exit_child = OwnedFd::from(exit_child);
    let mut command = tokio::process::Command::new(path);
    command
        .args([
            "--configure",
            &format!("--mtu={SLIRP_MTU}"),
            // 10.0.2.2 is never the host's 127.0.0.1, nor any other address of slirp's own
            // network (the DNS forwarder aside, which the namespace's rules keep to port 53).
            "--disable-host-loopback",
            "--enable-seccomp",
            &format!("--ready-fd={}", ready_child.as_raw_fd()),
            &format!("--exit-fd={}", exit_child.as_raw_fd()),
            // The helper's user namespace owns its network namespace: slirp4netns, the same
            // user, may enter both.
            &format!("--userns-path=/proc/{helper}/ns/user"),
            &helper.to_string(),
            TAP_NAME,
        ])
        .preserved_fds(vec![ready_child, exit_child])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some((uid, gid)) = walls.run_as() {
        command.uid(uid).gid(gid);
    }
    let failed = |said: String| NetError::Slirp {
        path: path.display().to_string(),
        said,
    };
    let mut child = walls
        .spawner
        .spawn(&mut command)
        .map_err(|e| failed(format!("cannot start it: {e}")))?;
    // Our copies of its descriptors: closed, so its ready pipe ends when it does.
    drop(command);
    let stderr = child
        .stderr
        .take()
        .map(|e| tokio::spawn(keep_first(e, SLIRP_STDERR_MAX_BYTES)));
    let ready = Receiver::from_owned_fd(OwnedFd::from(ready)).map_err(io("reading --ready-fd"))?;
    let answer = within("slirp4netns did not get ready", read_one(ready)).await;
    match answer {
        Ok(Ok(answer)) if answer.starts_with(b"1") => Ok(Slirp { child, _exit: exit }),
        answer => {
            let _ = child.start_kill();
            let _ = child.wait().await;
            let said = match stderr {
                Some(task) => String::from_utf8_lossy(&task.await.unwrap_or_default())
                    .lines()
                    .filter(|l| !l.trim().is_empty() && !l.starts_with("WARNING"))
                    .collect::<Vec<_>>()
                    .join("; "),
                None => String::new(),
            };
            let said = match (answer, said.is_empty()) {
                (Err(timeout), _) => timeout.to_string(),
                (_, false) => said,
                (_, true) => "it exited without saying why".to_owned(),
            };
            Err(failed(said))
        }
    }
}

/// `future`, or [`NetError::Timeout`] after [`NET_SETUP_TIMEOUT_MS`].
async fn within<T>(
    what: &'static str,
    future: impl std::future::Future<Output = T>,
) -> Result<T, NetError> {
    tokio::time::timeout(Duration::from_millis(NET_SETUP_TIMEOUT_MS), future)
        .await
        .map_err(|_| NetError::Timeout(what))
}

/// Everything the pipe carries, to its end (a few bytes: its writer writes once and closes).
async fn read_all(mut pipe: Receiver) -> std::io::Result<Vec<u8>> {
    let mut bytes = Vec::new();
    pipe.read_to_end(&mut bytes).await?;
    Ok(bytes)
}

/// The first byte the pipe carries (none: it ended first).
async fn read_one(mut pipe: Receiver) -> std::io::Result<Vec<u8>> {
    let mut byte = [0u8; 1];
    let n = pipe.read(&mut byte).await?;
    Ok(byte[..n].to_vec())
}

/// The first `max` bytes of `reader`, which is read to its end.
async fn keep_first<R: AsyncRead + Unpin>(mut reader: R, max: usize) -> Vec<u8> {
    let mut kept = Vec::new();
    let mut buf = [0u8; 1024];
    loop {
        match reader.read(&mut buf).await {
            Ok(0) | Err(_) => return kept,
            Ok(n) => kept.extend_from_slice(&buf[..n.min(max.saturating_sub(kept.len()))]),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::spawn::Spawner;

    fn walls(network: Network) -> Walls {
        Walls {
            bwrap: PathBuf::from("/usr/bin/bwrap"),
            shim: PathBuf::from("/usr/libexec/bxsandbox-shim"),
            _shim_copy: None,
            landlock: None,
            run_as: None,
            spawner: Spawner::plain(),
            network,
        }
    }

    fn bwrap_args() -> Vec<String> {
        [
            "--unshare-all",
            "--share-net",
            "--",
            "/shim",
            "{}",
            "--",
            "true",
        ]
        .map(String::from)
        .to_vec()
    }

    #[test]
    fn with_network_the_helper_starts_bubblewrap_with_the_handshake_before_its_program() {
        let mut spec = Spec::new(["true"]);
        spec.network = true;
        spec.networks = vec!["192.0.2.7/32".parse().unwrap()];
        let wrapped = wrap(&spec, &walls(Network::Slirp("/x".into())), bwrap_args()).unwrap();
        assert_eq!(
            wrapped.program,
            PathBuf::from("/usr/libexec/bxsandbox-shim")
        );
        let args = &wrapped.args;
        assert_eq!(args[0], HELPER_ARG);
        assert_eq!(args[1], r#"{"allowed":["192.0.2.7/32"]}"#);
        assert_eq!(args[2..4], ["--", "/usr/bin/bwrap"]);
        let fd = |i: usize| wrapped.fds[i].as_raw_fd().to_string();
        let mut want = vec!["--unshare-all", "--share-net", "--info-fd"];
        let (info, block, resolv) = (fd(0), fd(1), fd(2));
        want.extend([
            info.as_str(),
            "--block-fd",
            block.as_str(),
            "--ro-bind-data",
        ]);
        want.extend([
            resolv.as_str(),
            RESOLV_CONF,
            "--",
            "/shim",
            "{}",
            "--",
            "true",
        ]);
        assert_eq!(args[4..], want);
    }

    #[test]
    fn without_network_bubblewrap_starts_as_it_is() {
        let wrapped = wrap(
            &Spec::new(["true"]),
            &walls(Network::Unavailable("none".into())),
            bwrap_args(),
        )
        .unwrap();
        assert_eq!(wrapped.program, PathBuf::from("/usr/bin/bwrap"));
        assert_eq!(wrapped.args, bwrap_args());
        assert!(wrapped.fds.is_empty());
    }

    #[test]
    fn no_slirp4netns_or_an_ipv6_network_is_refused_before_anything_starts() {
        let mut spec = Spec::new(["true"]);
        spec.network = true;
        let why = "slirp4netns is not installed (no slirp4netns on PATH)";
        let err = wrap(
            &spec,
            &walls(Network::Unavailable(why.into())),
            bwrap_args(),
        );
        assert!(matches!(err, Err(NetError::Unavailable(w)) if w == why));
        spec.networks = vec!["fd00::/8".parse().unwrap()];
        let err = wrap(&spec, &walls(Network::Slirp("/x".into())), bwrap_args());
        let err = err.err().unwrap().to_string();
        assert!(err.starts_with("networks entry fd00::/8: "), "{err}");
    }
}
