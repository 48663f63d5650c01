//! Whether the sandbox can be made here, and which walls are up. `run` takes the `Walls` only
//! a successful probe makes, so nothing can run when the sandbox cannot be made.

use crate::net::SLIRP_NAME;
use crate::reach;
use crate::run::{Status, run_unchecked};
use crate::shim::{PROBE_ARG, SHIM_NAME};
use crate::shim_copy::{self, SHIM_RUNTIME_DIR, ShimCopy};
use crate::spawn::Spawner;
use crate::spec::Spec;
pub use crate::walls::{Network, Walls};
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The limit on the probe's trial run (milliseconds): bubblewrap starts in a few.
pub const PROBE_TIMEOUT_MS: u64 = 10_000;
/// The uid and gid the sandbox runs as when the caller is root (`nobody`): the kernel does not
/// apply `RLIMIT_NPROC` to root's processes, and the sandbox should own none of the host's
/// files.
pub const ROOT_FALLBACK_ID: u32 = 65534;

/// Where the probe looks: the `PATH` to find `bwrap` on, and the shim.
#[derive(Debug, Clone)]
pub struct ProbeOptions {
    /// The directories searched for `bwrap`, as in `PATH`.
    pub search_path: OsString,
    /// The shim binary; `None`: `bxsandbox-shim` next to the current executable.
    pub shim: Option<PathBuf>,
}

impl ProbeOptions {
    /// The process's own `PATH`, and the shim next to the current executable.
    pub fn from_env() -> Self {
        ProbeOptions {
            search_path: std::env::var_os("PATH").unwrap_or_default(),
            shim: None,
        }
    }
}

/// Why the sandbox cannot be made, as a sentence a person can act on.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unavailable: {reason}")]
pub struct Unavailable {
    /// E.g. "bubblewrap is not installed (no bwrap on PATH)".
    pub reason: String,
}

impl Unavailable {
    fn new(reason: impl Into<String>) -> Self {
        Unavailable {
            reason: reason.into(),
        }
    }
}

/// Finds bubblewrap and the shim, checks user namespaces, and makes one trial sandbox that
/// reports the Landlock ABI. Fails closed: any doubt is `Unavailable`. bubblewrap is started
/// with `Command::spawn`, here and in every run of the walls (see [`probe_with`]).
pub async fn probe(options: &ProbeOptions) -> Result<Walls, Unavailable> {
    probe_with(options, Spawner::plain()).await
}

/// [`probe`], with bubblewrap started by `spawner` here and in every run of the walls: for a
/// process that reaps children of its own, so its reaper never takes bubblewrap's exit status.
pub async fn probe_with(options: &ProbeOptions, spawner: Spawner) -> Result<Walls, Unavailable> {
    let bwrap = which::which_in("bwrap", Some(&options.search_path), "/")
        .map_err(|_| Unavailable::new("bubblewrap is not installed (no bwrap on PATH)"))?;
    let bwrap = std::fs::canonicalize(&bwrap)
        .map_err(|e| Unavailable::new(format!("bubblewrap at {}: {e}", bwrap.display())))?;
    let root = nix::unistd::geteuid().is_root();
    let run_as = root.then_some((ROOT_FALLBACK_ID, ROOT_FALLBACK_ID));
    let (shim, shim_copy) = reachable_shim(find_shim(options)?, run_as)?;
    user_namespaces()?;
    let candidate = Walls {
        bwrap,
        shim,
        _shim_copy: shim_copy,
        landlock: None,
        run_as,
        spawner,
        network: Network::Unavailable("not probed".to_owned()),
    };
    let mut trial = Spec::new([path_string(&candidate.shim), PROBE_ARG.to_owned()]);
    trial.timeout_ms = PROBE_TIMEOUT_MS;
    let outcome = run_unchecked(&trial, &candidate)
        .await
        .map_err(|e| Unavailable::new(format!("a trial sandbox could not start: {e}")))?;
    let stdout = String::from_utf8_lossy(&outcome.stdout.bytes);
    let abi = stdout
        .lines()
        .find_map(|l| l.strip_prefix("landlock_abi="))
        .and_then(|n| n.trim().parse::<u32>().ok());
    match (outcome.status, abi) {
        (Status::Exited(0), Some(abi)) => {
            let mut walls = Walls {
                landlock: (abi > 0).then_some(abi),
                ..candidate
            };
            walls.network = network(options, &walls).await;
            Ok(walls)
        }
        (status, _) => {
            let stderr = String::from_utf8_lossy(&outcome.stderr.bytes);
            let said = stderr.lines().next().unwrap_or("nothing on stderr");
            Err(Unavailable::new(format!(
                "a trial sandbox failed ({status}): {said}"
            )))
        }
    }
}

/// Whether runs with network can be made: slirp4netns on the search path, and one trial
/// sandbox with network. Either way the walls stand: only runs with network need it.
async fn network(options: &ProbeOptions, walls: &Walls) -> Network {
    let Ok(found) = which::which_in(SLIRP_NAME, Some(&options.search_path), "/") else {
        return Network::Unavailable(format!(
            "{SLIRP_NAME} is not installed (no {SLIRP_NAME} on PATH)"
        ));
    };
    let slirp = match std::fs::canonicalize(&found) {
        Ok(slirp) => slirp,
        Err(e) => return Network::Unavailable(format!("{SLIRP_NAME} at {}: {e}", found.display())),
    };
    let candidate = Walls {
        network: Network::Slirp(slirp.clone()),
        ..walls.clone()
    };
    let mut trial = Spec::new([path_string(&walls.shim), PROBE_ARG.to_owned()]);
    trial.timeout_ms = PROBE_TIMEOUT_MS;
    trial.network = true;
    let why = match run_unchecked(&trial, &candidate).await {
        Ok(outcome) if outcome.status == Status::Exited(0) => return Network::Slirp(slirp),
        Ok(outcome) => {
            let stderr = String::from_utf8_lossy(&outcome.stderr.bytes);
            let said = stderr.lines().next().unwrap_or("nothing on stderr");
            format!(
                "a trial sandbox with network failed ({}): {said}",
                outcome.status
            )
        }
        Err(e) => format!("a trial sandbox with network could not start: {e}"),
    };
    // The usual cause on a machine without udev: the tun device is root's alone.
    let hint = if why.contains("/dev/net/tun") {
        " (slirp4netns runs as the sandbox's user; /dev/net/tun must be open to it, mode 0666 \
         as udev makes it)"
    } else {
        ""
    };
    Network::Unavailable(format!("{why}{hint}"))
}

fn find_shim(options: &ProbeOptions) -> Result<PathBuf, Unavailable> {
    let shim = match &options.shim {
        Some(shim) => shim.clone(),
        None => std::env::current_exe()
            .ok()
            .and_then(|exe| exe.parent().map(|dir| dir.join(SHIM_NAME)))
            .ok_or_else(|| Unavailable::new("cannot tell where the current executable is"))?,
    };
    let resolved = std::fs::canonicalize(&shim).map_err(|e| {
        Unavailable::new(format!(
            "the sandbox shim {} is missing: {e}",
            shim.display()
        ))
    })?;
    if resolved.to_str().is_none() || !resolved.is_file() {
        return Err(Unavailable::new(format!(
            "the sandbox shim {} is not a file with a UTF-8 path",
            resolved.display()
        )));
    }
    Ok(resolved)
}

/// The shim at `shim`, or, when the sandbox's user (`run_as`, when not the caller) cannot
/// walk to it or execute it, its copy in [`SHIM_RUNTIME_DIR`] (`shim_copy`), held.
fn reachable_shim(
    shim: PathBuf,
    run_as: Option<(u32, u32)>,
) -> Result<(PathBuf, Option<Arc<ShimCopy>>), Unavailable> {
    let Some((uid, gid)) = run_as else {
        return Ok((shim, None));
    };
    let blocked = reach::blocked_above(&shim, uid, gid);
    let executable =
        std::fs::metadata(&shim).is_ok_and(|meta| reach::permits(&meta, uid, gid, reach::SEARCH));
    let why = match (&blocked, executable) {
        (None, true) => return Ok((shim, None)),
        (Some(blocked), _) => blocked.describe(uid),
        (None, false) => format!(
            "it is mode {:04o}, which the sandbox's user (uid {uid}) may not execute",
            std::fs::metadata(&shim).map_or(0, |m| m.mode() & 0o7777)
        ),
    };
    match shim_copy::copy_into(Path::new(SHIM_RUNTIME_DIR), &shim) {
        Ok(copy) => Ok((copy.path().to_owned(), Some(Arc::new(copy)))),
        Err(failed) => {
            let fix = match &blocked {
                Some(blocked) => format!(
                    "let others enter {} (chmod o+x) or build outside it (CARGO_TARGET_DIR)",
                    blocked.dir.display()
                ),
                None => format!("chmod 0755 {}", shim.display()),
            };
            Err(Unavailable::new(format!(
                "the sandbox shim {} cannot be used by the sandbox's user: {why}; copying it \
                 to {SHIM_RUNTIME_DIR} failed: {failed}; {fix}",
                shim.display()
            )))
        }
    }
}

/// The sysctls that switch user namespaces off, read before trying one.
fn user_namespaces() -> Result<(), Unavailable> {
    let read = |path: &str| {
        std::fs::read_to_string(path)
            .ok()
            .map(|s| s.trim().to_owned())
    };
    if read("/proc/sys/user/max_user_namespaces").as_deref() == Some("0") {
        return Err(Unavailable::new(
            "user namespaces are disabled (user.max_user_namespaces is 0)",
        ));
    }
    // Debian's switch; bubblewrap always runs unprivileged here (as nobody when root).
    if read("/proc/sys/kernel/unprivileged_userns_clone").as_deref() == Some("0") {
        return Err(Unavailable::new(
            "user namespaces are disabled (kernel.unprivileged_userns_clone is 0)",
        ));
    }
    Ok(())
}

fn path_string(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
