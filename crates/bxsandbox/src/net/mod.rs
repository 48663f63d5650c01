//! The sandbox's network when a spec asks for it (`network = true`): never the host's network
//! namespace, but one of the run's own, whose only way out is slirp4netns, and whose
//! routing-policy rules let it reach global addresses only, plus the non-global networks the
//! spec lists (`Spec::networks`, a grant's `networks`): the rule of brokerd's `http_fetch`.
//!
//! So the host's loopback is out of reach (127.0.0.0/8 inside is the sandbox's own, and
//! slirp4netns runs with `--disable-host-loopback`), and so are the host's other addresses on
//! private networks, the LAN, link-local metadata services, unless listed.
//!
//! - `plan`: the rules (which addresses, in which order) and the list of non-global blocks;
//! - `inner`: the helper (`bxsandbox-shim --net`) that makes the user and network namespaces,
//!   adds the rules and becomes bubblewrap (`--share-net` then shares that namespace);
//! - `rtnl`: its two rtnetlink requests;
//! - `outer`: the command `run` starts, slirp4netns attached before the program starts and
//!   ended with the run. Without slirp4netns (`Network::Unavailable`) a run with network
//!   fails; it never falls back to the host's network.
//!
//! IPv6: none (slirp4netns runs without it); only the sandbox's own `::1`.

mod inner;
mod outer;
mod plan;
mod rtnl;

pub use inner::{HELPER_ARG, HelperConfig, HelperError, helper_main};
pub(crate) use outer::wrap;
pub use outer::{NET_SETUP_TIMEOUT_MS, NetError};
pub use plan::{DNS_PORT, MAX_NETWORKS, NON_GLOBAL_V4, SLIRP_DNS, SLIRP_GATEWAY, SLIRP_NETWORK};

/// Where the sandbox's resolver configuration (`nameserver 10.0.2.3`) is bound, read-only,
/// only with network.
pub const RESOLV_CONF: &str = "/etc/resolv.conf";

/// The program that gives a run its network, looked up on the probe's search path.
pub const SLIRP_NAME: &str = "slirp4netns";
