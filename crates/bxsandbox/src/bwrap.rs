//! bubblewrap's command line for a resolved spec (the namespaces, the binds and the shim that
//! runs the program), and the environment bubblewrap is started with, which it passes on.
//!
//! The environment is never on the command line: `/proc/PID/cmdline` is readable by every
//! user, and a spec's `env` may carry a credential (`exec`'s grants fill it from brokerd's
//! secrets). `/proc/PID/environ` is readable only by the process's own user.

use crate::overlay::OverlayMount;
use crate::shim;
use crate::spec::{Resolved, Spec};
use crate::walls::Walls;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

pub use crate::program::SANDBOX_PATH;

/// System paths bound read-only when they exist (a symlink among them, such as `/bin` on a
/// merged-`/usr` Debian, is recreated as the same symlink). Never all of `/etc`, and never
/// `/root`, `/home`, `/var` or `/run` wholesale.
pub const SYSTEM_RO_PATHS: &[&str] = &[
    "/usr",
    "/bin",
    "/sbin",
    "/lib",
    "/lib64",
    "/lib32",
    "/etc/alternatives",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/localtime",
    // NixOS: every program and library lives in the store; the system profile links to it.
    "/nix/store",
    "/run/current-system/sw",
];

/// `HOME` when the spec has no `rw_paths`: the private `/tmp`.
pub const PRIVATE_HOME: &str = "/tmp";

/// bubblewrap's arguments (after the `bwrap` program itself) for `spec`.
pub(crate) fn command_line(spec: &Spec, resolved: &Resolved, walls: &Walls) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    let mut push = |items: &[&str]| args.extend(items.iter().map(|s| (*s).to_owned()));
    // New user, pid, ipc, uts, cgroup and network namespaces; bubblewrap also sets
    // PR_SET_NO_NEW_PRIVS, so a setuid binary gains nothing.
    push(&["--unshare-all"]);
    if spec.network {
        push(&["--share-net"]);
    }
    push(&["--die-with-parent", "--new-session", "--cap-drop", "ALL"]);

    // No --clearenv and no --setenv: bubblewrap passes on its own environment, which `run`
    // sets to exactly `environment(..)` (see the module's doc).

    let mut read_paths = vec![PathBuf::from("/proc")];
    for system in SYSTEM_RO_PATHS {
        let path = Path::new(system);
        match std::fs::symlink_metadata(path) {
            Ok(meta) if meta.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    push(&["--symlink", &target.to_string_lossy(), system]);
                }
            }
            Ok(_) => {
                push(&["--ro-bind", system, system]);
                read_paths.push(path.to_owned());
            }
            Err(_) => {}
        }
    }
    push(&["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]);
    // After the private /tmp, so a bound path beneath /tmp is not hidden by it; read-only
    // binds after read-write ones, so a ro path inside a rw path stays read-only. Each is
    // bound by the descriptor pinned when its path was first resolved (`pin`): what is
    // mounted is that file, whatever the path names now; bubblewrap closes it after.
    for rw in &resolved.rw_paths {
        let fd = rw.fd.as_raw_fd().to_string();
        push(&["--bind-fd", &fd, path_str(&rw.dest)]);
    }
    for ro in &resolved.ro_paths {
        let fd = ro.fd.as_raw_fd().to_string();
        push(&["--ro-bind-fd", &fd, path_str(&ro.dest)]);
        read_paths.push(ro.dest.clone());
    }
    // The stages, where the shim finds them to mount each rw path's overlay (`overlay`);
    // the shim hides them before the program runs.
    for stage in &resolved.stages {
        let fd = stage.fd.as_raw_fd().to_string();
        push(&["--bind-fd", &fd, path_str(&stage.dest)]);
    }
    let overlays = resolved
        .rw_paths
        .iter()
        .zip(&resolved.stages)
        .map(|(rw, stage)| OverlayMount {
            dest: rw.dest.clone(),
            stage: stage.dest.clone(),
        })
        .collect();
    let shim_path = path_str(walls.shim());
    push(&["--ro-bind", shim_path, shim_path]);
    read_paths.push(walls.shim().to_owned());
    if spec.network {
        // The resolver's configuration `net` binds (slirp4netns's DNS forwarder).
        read_paths.push(PathBuf::from(crate::net::RESOLV_CONF));
    }
    push(&["--chdir", path_str(&resolved.cwd)]);

    let mut write_paths = vec![PathBuf::from("/tmp"), PathBuf::from("/dev")];
    write_paths.extend(resolved.rw_paths.iter().map(|b| b.dest.clone()));
    let config = shim::Config {
        program: resolved.program.clone(),
        exec_rule: spec.exec_rule,
        memory_mb: spec.memory_mb,
        max_processes: spec.max_processes,
        cpu_seconds: spec.cpu_seconds,
        file_size_bytes: spec.file_size_bytes,
        landlock: walls.landlock().is_some(),
        network: spec.network,
        read_paths,
        write_paths,
        overlays,
    };
    // Serialising plain strings, numbers and paths checked to be UTF-8 cannot fail.
    let config = serde_json::to_string(&config).unwrap_or_default();
    push(&["--", shim_path, &config, "--"]);
    args.extend(spec.argv.iter().cloned());
    args
}

/// The whole environment of the program: the fixed `PATH`, `HOME`, `LANG` and `TERM`, then
/// the spec's `env` (a name given there replaces the fixed value). bubblewrap is started with
/// exactly this environment and passes it on (bubblewrap adds `PWD` from `--chdir`).
pub(crate) fn environment(spec: &Spec, resolved: &Resolved) -> Vec<(String, String)> {
    let home = resolved
        .rw_paths
        .first()
        .map(|b| path_str(&b.dest))
        .unwrap_or(PRIVATE_HOME);
    let mut env: Vec<(String, String)> = [
        ("PATH", SANDBOX_PATH),
        ("HOME", home),
        ("LANG", "C.UTF-8"),
        ("TERM", "dumb"),
    ]
    .into_iter()
    .filter(|(name, _)| !spec.env.iter().any(|(given, _)| given == name))
    .map(|(name, value)| (name.to_owned(), value.to_owned()))
    .collect();
    env.extend(spec.env.iter().cloned());
    env
}

/// Resolved paths were checked to be UTF-8 (`pin`, `program`); the shim's by `probe`.
fn path_str(path: &Path) -> &str {
    path.to_str().unwrap_or("/nonexistent")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::spawn::Spawner;
    use crate::spec::resolve;

    fn walls() -> Walls {
        Walls {
            bwrap: PathBuf::from("/usr/bin/bwrap"),
            shim: PathBuf::from("/usr/libexec/bxsandbox-shim"),
            _shim_copy: None,
            landlock: None,
            run_as: None,
            spawner: Spawner::plain(),
            network: crate::walls::Network::Unavailable("not probed".to_owned()),
        }
    }

    #[test]
    fn an_env_value_is_never_on_the_command_line() {
        let value = "s3cr3t-token-value";
        let mut spec = Spec::new(["true"]);
        spec.env.push(("API_KEY".into(), value.into()));
        let resolved = resolve(&spec).unwrap();
        let args = command_line(&spec, &resolved, &walls());
        assert!(
            !args.iter().any(|a| a.contains(value) || a == "API_KEY"),
            "{args:?}"
        );
        assert!(!args.iter().any(|a| a == "--setenv"), "{args:?}");
        let env = environment(&spec, &resolved);
        assert!(env.contains(&("API_KEY".into(), value.into())), "{env:?}");
    }

    #[test]
    fn the_environment_is_the_fixed_list_and_a_spec_name_replaces_a_fixed_one() {
        let mut spec = Spec::new(["true"]);
        spec.env.push(("TERM".into(), "xterm".into()));
        let env = environment(&spec, &resolve(&spec).unwrap());
        let names: Vec<&str> = env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["PATH", "HOME", "LANG", "TERM"]);
        assert!(env.contains(&("TERM".into(), "xterm".into())), "{env:?}");
        assert!(
            env.contains(&("HOME".into(), PRIVATE_HOME.into())),
            "{env:?}"
        );
    }
}
