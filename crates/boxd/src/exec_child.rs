//! The first moment of every child: boxd starts each child through itself
//! (`boxd --exec-child BOXD_PID PROGRAM ARG0 [ARG...]`, a hidden mode of the same binary),
//! which asks the kernel to kill it when boxd dies and then becomes the child's program.
//!
//! Why through itself: the parent-death signal (`PR_SET_PDEATHSIG`) is set by the process
//! that is to receive it, after the fork; setting it in a `pre_exec` hook is `unsafe`, which
//! the workspace denies. This mode sets it with `nix` (safe), checks that its parent is still
//! the boxd that started it (if boxd died before the signal was set, it would never come: exit
//! at once), and `exec`s the program, so the pid boxd supervises is the program's own. The
//! signal survives `exec` (not of a set-user-ID or file-capability program, which boxd's
//! children are not).
//!
//! The signal is [`DEATH_SIGNAL`], SIGKILL: boxd stops its children itself, in order and with
//! their grace, whenever it can; the parent-death signal comes only when boxd was killed
//! outright or crashed, and then a child must go for sure, not at its discretion (SIGTERM can
//! be ignored, and a child stuck in a drain would keep its socket from the next boxd). The
//! children keep nothing that SIGKILL loses: loopd fsyncs each record before acknowledging it.
//!
//! The kernel sends the signal when the *thread* that forked the child exits: boxd forks every
//! child from its main thread (its async runtime is current-thread, and spawns are made on it),
//! which lives as long as boxd.

use nix::sys::prctl;
use nix::sys::signal::Signal;
use nix::unistd::getppid;
use std::ffi::OsString;
use std::io::Write;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::ExitCode;

/// The hidden command-line flag of the mode.
pub const FLAG: &str = "--exec-child";
/// The signal a child gets when boxd dies (see the module's documentation for why SIGKILL).
pub const DEATH_SIGNAL: Signal = Signal::SIGKILL;
/// The exit code when the mode's arguments are wrong (boxd never passes such).
pub const EXIT_USAGE: u8 = 2;
/// The exit code when boxd died before the child could start, so it does not start.
pub const EXIT_PARENT_GONE: u8 = 125;
/// The exit code when the program cannot be executed (as a shell says "not found").
pub const EXIT_EXEC_FAILED: u8 = 127;

/// The arguments after the binary's name that make boxd (`parent`) run `program`, shown to it
/// as `arg0`, with `args`.
pub fn args(parent: u32, program: &Path, arg0: &str, args: &[String]) -> Vec<OsString> {
    let mut all: Vec<OsString> = vec![
        FLAG.into(),
        parent.to_string().into(),
        program.into(),
        arg0.into(),
    ];
    all.extend(args.iter().map(OsString::from));
    all
}

/// Runs the mode when the command line asks for it (`args`: the whole command line, the
/// binary's name first): returns only when it could not become the program, with the exit
/// code to exit with. `None`: the command line does not ask for it.
pub fn run_if_asked(args: impl IntoIterator<Item = OsString>) -> Option<ExitCode> {
    let mut args = args.into_iter().skip(1);
    let first = args.next()?;
    if first != FLAG {
        return None;
    }
    Some(ExitCode::from(run(args.collect())))
}

/// Writes `message` on stderr (boxd logs it tagged with the child's name); a write error is
/// ignored, as there is nowhere else to say it.
fn say(message: &str) {
    let _ = writeln!(std::io::stderr(), "boxd {FLAG}: {message}");
}

/// The mode itself: returns the exit code when it could not become the program.
fn run(args: Vec<OsString>) -> u8 {
    let [parent, program, arg0, rest @ ..] = args.as_slice() else {
        say("usage: boxd --exec-child BOXD_PID PROGRAM ARG0 [ARG...] (boxd's own use)");
        return EXIT_USAGE;
    };
    let Some(parent) = parent.to_str().and_then(|p| p.parse::<i32>().ok()) else {
        say(&format!("BOXD_PID must be a pid, is {parent:?}"));
        return EXIT_USAGE;
    };
    if let Err(e) = prctl::set_pdeathsig(DEATH_SIGNAL) {
        say(&format!(
            "cannot ask to die with boxd (PR_SET_PDEATHSIG): {e}"
        ));
        return EXIT_PARENT_GONE;
    }
    // Checked after the signal is set: if boxd died before, the signal never comes.
    let actual = getppid().as_raw();
    if actual != parent {
        say(&format!(
            "boxd (pid {parent}) is gone (the parent is now pid {actual}): not starting {}",
            Path::new(program).display()
        ));
        return EXIT_PARENT_GONE;
    }
    let e = std::process::Command::new(program)
        .arg0(arg0)
        .args(rest)
        .exec();
    say(&format!(
        "cannot execute {}: {e}",
        Path::new(program).display()
    ));
    EXIT_EXEC_FAILED
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn only_the_flag_first_asks_for_the_mode() {
        assert!(run_if_asked(os(&["boxd", "--config", "x.toml"])).is_none());
        assert!(run_if_asked(os(&["boxd"])).is_none());
        assert!(run_if_asked(os(&["boxd", "--config", FLAG])).is_none());
    }

    #[test]
    fn bad_arguments_do_not_execute() {
        // (A parent that is not boxd is tested on the binary, tests/it/cli.rs: the mode sets the
        // calling process's parent-death signal, which a test thread must not.)
        assert_eq!(run(os(&["1"])), EXIT_USAGE);
        assert_eq!(run(os(&["x", "/bin/true", "true"])), EXIT_USAGE);
    }

    #[test]
    fn the_argument_list_round_trips() {
        let all = args(7, Path::new("/bin/x"), "x", &["-a".into(), "b c".into()]);
        assert_eq!(all, os(&[FLAG, "7", "/bin/x", "x", "-a", "b c"]));
    }
}
