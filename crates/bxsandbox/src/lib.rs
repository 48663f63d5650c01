//! The kernel sandbox of the `exec` tool (issue 15).
//!
//! - `probe` finds out whether the sandbox can be made here: bubblewrap on `PATH`, user
//!   namespaces allowed, the shim next to the current executable (or where the caller says),
//!   and, from one trial sandbox, the Landlock ABI. It gives `Walls` or `Unavailable` with a
//!   sentence a person can act on.
//! - `Spec` is one run: argv, which programs it may execute (`ExecRule`: by default only
//!   `argv[0]`, resolved once), cwd, stdin, env, the paths bound read-only and read-write
//!   (`Pinned`: resolved once and bound by descriptor), network or not, and the limits.
//! - `run(spec, walls)` runs it: bubblewrap with new user, pid, ipc, uts, cgroup and network
//!   namespaces, only the system directories and the spec's paths bound, a private `/tmp`,
//!   a fixed environment; inside, `bxsandbox-shim` sets the rlimits, the Landlock ruleset and
//!   (under `ExecRule::ProgramOnly`) the seccomp filter that refuses every later exec, and
//!   execs the program. It gives the exit status or signal, stdout and stderr capped with
//!   their totals, and the wall time; the whole tree dies at the timeout.
//! - `net`: with network, the run's network namespace is its own, never the host's: out only
//!   through slirp4netns, to global addresses and the spec's `networks` (the probe finds
//!   whether slirp4netns is there: `Walls::network`; without it such a run fails).
//!
//! - `overlay`: an `rw_paths` entry given a stage (`Spec::overlay_stages`) is mounted through
//!   an overlay by the shim, so the run's writes land in the stage and the entry is left as
//!   it was, for the caller to apply (brokerd's checkpoints).
//!
//! Invariant: nothing runs outside the sandbox. `run` needs `Walls`, which only a successful
//! `probe` makes.

mod bwrap;
pub mod execwall;
pub mod interp;
pub mod net;
pub mod overlay;
pub mod pin;
pub mod probe;
pub mod program;
mod reach;
pub mod run;
pub mod shim;
pub mod shim_copy;
pub mod spawn;
pub mod spec;
mod walls;

pub use bwrap::{SANDBOX_PATH, SYSTEM_RO_PATHS};
pub use pin::{PinError, Pinned};
pub use probe::{Network, ProbeOptions, Unavailable, Walls, probe, probe_with};
pub use program::ProgramError;
pub use run::{Outcome, Output, RunError, Status, run};
pub use spawn::Spawner;
pub use spec::{ExecRule, Spec, SpecError};
