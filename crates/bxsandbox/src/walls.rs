//! The walls a successful probe found: what `run` needs, so nothing runs outside the sandbox.
//! A module of its own so that `probe` (which makes them) and `run` (which takes them) do not
//! import each other.

use crate::shim_copy::ShimCopy;
use crate::spawn::Spawner;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Whether a run may have network (`Spec::network`), and through what.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// slirp4netns at this path, which the probe's trial sandbox with network used.
    Slirp(PathBuf),
    /// Why not ("slirp4netns is not installed (no slirp4netns on PATH)"): a run with network
    /// then fails, never falling back to the host's network.
    Unavailable(String),
}

/// The walls a successful probe found; the only way to get one is `probe`.
#[derive(Debug, Clone)]
pub struct Walls {
    pub(crate) bwrap: PathBuf,
    pub(crate) shim: PathBuf,
    /// When `shim` is a copy the sandbox's user can reach (`shim_copy`): held, so that no
    /// probe removes it while these walls use it.
    pub(crate) _shim_copy: Option<Arc<ShimCopy>>,
    pub(crate) landlock: Option<u32>,
    pub(crate) run_as: Option<(u32, u32)>,
    pub(crate) spawner: Spawner,
    pub(crate) network: Network,
}

impl Walls {
    /// bubblewrap's resolved absolute path.
    pub fn bwrap(&self) -> &Path {
        &self.bwrap
    }
    /// The shim's resolved absolute path.
    pub fn shim(&self) -> &Path {
        &self.shim
    }
    /// The Landlock ABI the kernel enforces, when it has Landlock.
    pub fn landlock(&self) -> Option<u32> {
        self.landlock
    }
    /// The uid and gid bubblewrap is started as, when not the caller's own (caller is root).
    pub fn run_as(&self) -> Option<(u32, u32)> {
        self.run_as
    }
    /// The uid and gid the sandbox runs as: [`Walls::run_as`], or the caller's own.
    pub fn sandbox_ids(&self) -> (u32, u32) {
        self.run_as.unwrap_or_else(|| {
            (
                nix::unistd::getuid().as_raw(),
                nix::unistd::getgid().as_raw(),
            )
        })
    }
    /// Whether a run may have network, and through what.
    pub fn network(&self) -> &Network {
        &self.network
    }
    /// The walls for a status line: "bubblewrap + Landlock v4; network through slirp4netns",
    /// or "bubblewrap; no network: slirp4netns is not installed (no slirp4netns on PATH)".
    pub fn describe(&self) -> String {
        let walls = match self.landlock {
            Some(abi) => format!("bubblewrap + Landlock v{abi}"),
            None => "bubblewrap".to_owned(),
        };
        match &self.network {
            Network::Slirp(_) => format!("{walls}; network through slirp4netns"),
            Network::Unavailable(why) => format!("{walls}; no network: {why}"),
        }
    }
}
