//! The network helper: `bxsandbox-shim --net CONFIG_JSON -- BWRAP ARGS...`, started by `run`
//! (as the user bubblewrap runs as) in place of bubblewrap when a spec has network. It makes
//! the user and network namespaces the run will use, so that it, not bubblewrap, owns them:
//!
//! 1. `unshare(CLONE_NEWUSER | CLONE_NEWNET)`, mapping its own uid and gid 1:1, which gives it
//!    every capability over the new network namespace (and nothing outside it);
//! 2. brings the loopback up and adds the routing-policy rules of `plan`;
//! 3. `exec`s bubblewrap with `--share-net`, which makes the sandbox's own user namespace
//!    *inside* this one: the program has no capability over the network namespace, so it
//!    cannot change a rule or an address.
//!
//! slirp4netns, started by `run` once bubblewrap reports its pid, joins these namespaces (it
//! is the same user, their owner) and adds the `tap0` device with its default route;
//! bubblewrap waits for it (`--block-fd`) before the program starts. A helper that fails
//! exits with [`crate::shim::SHIM_FAILED_EXIT`] and bubblewrap never starts.

use super::plan::{MAX_NETWORKS, rules};
use super::rtnl::Rtnl;
use ipnet::Ipv4Net;
use nix::sched::{CloneFlags, unshare};
use nix::unistd::{getgid, getuid};
use serde::{Deserialize, Serialize};
use std::convert::Infallible;
use std::os::unix::process::CommandExt;

/// The argument that puts `bxsandbox-shim` in network-helper mode.
pub const HELPER_ARG: &str = "--net";

/// What the outer process tells the helper.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HelperConfig {
    /// The non-global IPv4 networks the run may reach besides the global addresses, as CIDR.
    pub allowed: Vec<String>,
}

/// Why the helper stopped before bubblewrap started.
#[derive(Debug, thiserror::Error)]
pub enum HelperError {
    /// The command line was not the helper's.
    #[error("usage: bxsandbox-shim {HELPER_ARG} CONFIG_JSON -- BWRAP [ARGS...]")]
    Usage,
    /// The config was not valid.
    #[error("the network config is not valid: {0}")]
    Config(String),
    /// A step of the namespace's setup failed.
    #[error("the sandbox's network: {what}: {source}")]
    Setup {
        /// Which step.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// bubblewrap could not be executed.
    #[error("cannot execute {program}: {source}")]
    Exec {
        /// Its path.
        program: String,
        /// Why.
        source: std::io::Error,
    },
}

/// The helper's whole life: on success it never returns (bubblewrap replaced it).
pub fn helper_main(args: &[String]) -> Result<Infallible, HelperError> {
    let [_, flag, config, dashes, program, rest @ ..] = args else {
        return Err(HelperError::Usage);
    };
    if flag != HELPER_ARG || dashes != "--" {
        return Err(HelperError::Usage);
    }
    let config: HelperConfig =
        serde_json::from_str(config).map_err(|e| HelperError::Config(e.to_string()))?;
    if config.allowed.len() > MAX_NETWORKS {
        return Err(HelperError::Config(format!(
            "{} networks; the most is {MAX_NETWORKS}",
            config.allowed.len()
        )));
    }
    let allowed = config
        .allowed
        .iter()
        .map(|n| {
            n.parse::<Ipv4Net>()
                .map_err(|_| HelperError::Config(format!("{n:?} is not an IPv4 CIDR")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    own_namespaces()?;
    let setup = |what: &str| {
        let what = what.to_owned();
        move |source| HelperError::Setup { what, source }
    };
    let mut rtnl = Rtnl::open().map_err(setup("opening rtnetlink"))?;
    rtnl.loopback_up().map_err(setup("bringing lo up"))?;
    for rule in rules(&allowed) {
        rtnl.add_rule(&rule)
            .map_err(setup(&format!("adding the rule {rule:?}")))?;
    }
    drop(rtnl);
    let source = std::process::Command::new(program).args(rest).exec();
    Err(HelperError::Exec {
        program: program.clone(),
        source,
    })
}

/// New user and network namespaces, this process's uid and gid mapped to themselves.
fn own_namespaces() -> Result<(), HelperError> {
    let (uid, gid) = (getuid(), getgid());
    unshare(CloneFlags::CLONE_NEWUSER | CloneFlags::CLONE_NEWNET).map_err(|e| {
        HelperError::Setup {
            what: "unshare(CLONE_NEWUSER | CLONE_NEWNET)".to_owned(),
            source: e.into(),
        }
    })?;
    // An unprivileged process may map only its own ids, and its gid only once setgroups is
    // denied (user_namespaces(7)).
    for (file, line) in [
        ("/proc/self/setgroups", "deny".to_owned()),
        ("/proc/self/uid_map", format!("{uid} {uid} 1")),
        ("/proc/self/gid_map", format!("{gid} {gid} 1")),
    ] {
        std::fs::write(file, line).map_err(|source| HelperError::Setup {
            what: format!("writing {file}"),
            source,
        })?;
    }
    Ok(())
}
