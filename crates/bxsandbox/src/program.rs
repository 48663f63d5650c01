//! The program a run executes: `argv[0]` resolved once, on the host, to an absolute path with
//! no symlink in it, which the shim then executes exactly (no `PATH` search inside). The
//! system directories are bound at their own paths, so the host's path is the sandbox's.

use std::path::{Component, Path, PathBuf};

/// The sandbox's `PATH` (directories that do not exist inside are harmless). A bare
/// `argv[0]` is looked up on it.
pub const SANDBOX_PATH: &str =
    "/run/current-system/sw/bin:/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";

/// Why `argv[0]` names no program that can run.
#[derive(Debug, thiserror::Error)]
pub enum ProgramError {
    /// A bare name not found on [`SANDBOX_PATH`].
    #[error("program {0:?} is not found on the sandbox's PATH ({SANDBOX_PATH})")]
    NotFound(String),
    /// A path that is relative or holds `.` or `..`.
    #[error(
        "program {0:?} is not a bare name (looked up on PATH) or an absolute path without '.' \
         or '..'"
    )]
    NotAbsolute(String),
    /// The path could not be resolved.
    #[error("program {program:?}: cannot resolve it: {source}")]
    Resolve {
        /// `argv[0]`.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// It resolved to something that is not a file, or to a path that is not UTF-8.
    #[error("program {program:?} resolves to {path}, which is not a file with a UTF-8 path")]
    NotAFile {
        /// `argv[0]`.
        program: String,
        /// What it resolved to.
        path: PathBuf,
    },
}

/// `argv0` resolved: looked up on [`SANDBOX_PATH`] when it is a bare name, then every symlink
/// followed (`canonicalize`), so nothing inside the sandbox can redirect it.
pub fn resolve(argv0: &str) -> Result<PathBuf, ProgramError> {
    let found = if argv0.contains('/') {
        let path = Path::new(argv0);
        if !path.is_absolute()
            || path
                .components()
                .any(|c| matches!(c, Component::CurDir | Component::ParentDir))
        {
            return Err(ProgramError::NotAbsolute(argv0.to_owned()));
        }
        path.to_owned()
    } else {
        which::which_in(argv0, Some(SANDBOX_PATH), "/")
            .map_err(|_| ProgramError::NotFound(argv0.to_owned()))?
    };
    let resolved = std::fs::canonicalize(&found).map_err(|source| ProgramError::Resolve {
        program: argv0.to_owned(),
        source,
    })?;
    if resolved.to_str().is_none() || !resolved.is_file() {
        return Err(ProgramError::NotAFile {
            program: argv0.to_owned(),
            path: resolved,
        });
    }
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_bare_name_resolves_on_the_path_to_a_file_without_symlinks() {
        let sh = resolve("sh").unwrap();
        assert!(sh.is_absolute(), "{sh:?}");
        assert_eq!(std::fs::canonicalize(&sh).unwrap(), sh);
    }

    #[test]
    fn a_relative_or_dotted_path_and_a_missing_name_are_refused() {
        assert!(matches!(resolve("./sh"), Err(ProgramError::NotAbsolute(_))));
        assert!(matches!(
            resolve("/usr/bin/../bin/sh"),
            Err(ProgramError::NotAbsolute(_))
        ));
        assert!(matches!(
            resolve("no-such-program-bxsandbox"),
            Err(ProgramError::NotFound(_))
        ));
        assert!(matches!(
            resolve("/usr"),
            Err(ProgramError::NotAFile { .. })
        ));
    }
}
