//! The wall that holds a `ExecRule::ProgramOnly` run to its one program, whatever the program
//! does: a seccomp filter, installed by the shim just before it executes the program, that
//! answers `EACCES` to every `execve` and `execveat` except the shim's own one `execve`.
//!
//! A filter cannot read the path an `execve` names (it sees only the pointer), so the one
//! allowed call is told apart by the pointer: the shim builds the program's path once, allows
//! `execve` only when its first argument is exactly that address, and passes exactly that
//! buffer (`nix::unistd::execve` hands `path.as_ptr()` to the kernel unchanged). The filter
//! survives the exec and is inherited by every child, so after it no process of the run can
//! execute anything: a program that tries (`sort --compress-program=sh`, `find -exec`,
//! `env`, `xargs`, the loader `ld.so` run as a program) gets "Permission denied". Works on
//! every kernel with seccomp, with or without Landlock; without seccomp the shim fails and
//! nothing runs.
//!
//! The residual risk: a process whose `execve` pointer happened to equal that address, with a
//! path of its choosing there, would pass. The address is in the shim's memory, which the
//! exec discards; a program would have to place a path there without knowing where it is,
//! which takes running code of one's own (and code of one's own needs no other program: it
//! already does anything the walls allow). `execveat` is refused outright, and on x86-64 so
//! are the x32 numbers of both calls; a syscall of another architecture (i386 `int 0x80`)
//! kills the process.

use crate::spec::ExecRule;
use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};
use std::collections::BTreeMap;
use std::convert::Infallible;
use std::ffi::CString;
use std::path::Path;

/// Why the program could not be executed, or the wall could not be built.
#[derive(Debug, thiserror::Error)]
pub enum ExecWallError {
    /// The seccomp filter could not be built or installed (no seccomp in the kernel, an
    /// architecture the filter is not written for, a filter above forbidding `seccomp`).
    #[error("the seccomp filter that allows only the program could not be set: {0}")]
    Filter(String),
    /// A path or argument held a NUL byte (the outer process never passes one).
    #[error("{0} holds a NUL byte")]
    Nul(&'static str),
    /// `execve` failed.
    #[error("cannot execute {program}: {errno}")]
    Exec {
        /// The path executed.
        program: String,
        /// Why.
        errno: nix::errno::Errno,
    },
}

/// On x86-64, the bit that marks an x32 system call, and the x32 numbers of `execve` and
/// `execveat` (`arch/x86/entry/syscalls/syscall_64.tbl`).
#[cfg(target_arch = "x86_64")]
const X32_EXECS: [i64; 2] = [0x4000_0000 + 520, 0x4000_0000 + 545];
#[cfg(not(target_arch = "x86_64"))]
const X32_EXECS: [i64; 0] = [];

/// The filter: `execve` whose path pointer is not `allowed`, and every `execveat`, fail with
/// `EACCES`; every other call is allowed.
pub fn filter(allowed: u64) -> Result<BpfProgram, ExecWallError> {
    let other_pointer = SeccompRule::new(vec![
        SeccompCondition::new(0, SeccompCmpArgLen::Qword, SeccompCmpOp::Ne, allowed)
            .map_err(fail)?,
    ])
    .map_err(fail)?;
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    rules.insert(libc::SYS_execve, vec![other_pointer]);
    // No rule: matched whatever its arguments.
    rules.insert(libc::SYS_execveat, Vec::new());
    for nr in X32_EXECS {
        rules.insert(nr, Vec::new());
    }
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(fail)?;
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        arch,
    )
    .map_err(fail)?;
    BpfProgram::try_from(filter).map_err(fail)
}

/// Executes `program` with `argv` and the shim's environment; under `ProgramOnly` installs
/// the filter first, allowing exactly this `execve`. Returns only on failure.
pub fn exec(program: &Path, argv: &[String], rule: ExecRule) -> Result<Infallible, ExecWallError> {
    let path = CString::new(program.as_os_str().as_encoded_bytes())
        .map_err(|_| ExecWallError::Nul("the program's path"))?;
    let argv = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| ExecWallError::Nul("an argument"))?;
    let env = std::env::vars_os()
        .map(|(name, value)| {
            let mut entry = name.into_encoded_bytes();
            entry.push(b'=');
            entry.extend_from_slice(value.as_encoded_bytes());
            CString::new(entry)
        })
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| ExecWallError::Nul("an environment variable"))?;
    if rule == ExecRule::ProgramOnly {
        // The address of the one buffer the execve below passes: the only path allowed.
        let filter = filter(path.as_ptr() as u64)?;
        seccompiler::apply_filter_all_threads(&filter).map_err(fail)?;
    }
    let errno = match nix::unistd::execve(&path, &argv, &env) {
        Err(errno) => errno,
        Ok(never) => match never {},
    };
    Err(ExecWallError::Exec {
        program: program.display().to_string(),
        errno,
    })
}

fn fail(e: impl std::fmt::Display) -> ExecWallError {
    ExecWallError::Filter(e.to_string())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_filter_builds_for_this_architecture() {
        let program = filter(0x1234_5678_9abc).unwrap();
        assert!(!program.is_empty());
    }
}
