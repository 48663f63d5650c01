//! What boxctl writes about itself for a package to install: `boxctl completions SHELL` (a
//! shell's completion script on stdout) and the hidden `boxctl manpages DIR` (`boxctl.1` and
//! a page per command). The Nix package calls both at install time: keep their interfaces.

use super::failure::Failure;
use crate::cli::{Cli, EXIT_OK};
use clap::CommandFactory;
use std::io::{self, Write};
use std::path::Path;

/// `boxctl completions SHELL`: the script on stdout.
pub(super) fn completions(shell: clap_complete::Shell) -> Result<u8, Failure> {
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "boxctl", &mut script);
    let mut stdout = io::stdout().lock();
    stdout.write_all(&script)?;
    stdout.flush()?;
    Ok(EXIT_OK)
}

/// Writes `boxctl.1` and one page per command that is not hidden (`boxctl-task.1`,
/// `boxctl-schedule-run.1`, ...) into `dir`, which must exist.
pub fn write_manpages(dir: &Path) -> io::Result<()> {
    clap_mangen::generate_to(Cli::command(), dir)
}

/// `boxctl manpages DIR`: the pages written, their directory said on stderr.
pub(super) fn manpages(dir: &Path) -> Result<u8, Failure> {
    write_manpages(dir).map_err(|e| {
        Failure::Local(format!(
            "cannot write the man pages into {}: {e}",
            dir.display()
        ))
    })?;
    eprintln!("boxctl: wrote the man pages into {}", dir.display());
    Ok(EXIT_OK)
}
