//! Which program a call may run: `argv[0]` resolved to an absolute path (on the sandbox's
//! `PATH` when it is a bare name) and matched against the grant's `programs`, or a shell line
//! when the grant sets `shell = true`. Nothing here runs anything.

use crate::config::{ExecGrant, is_runner, program_glob};
use crate::tool::ToolError;
use std::path::{Component, Path};

/// The shell a `["sh", "-c", LINE]` argv names.
pub(crate) const SHELL: &str = "sh";
/// The flag that makes a shell run its next argument as a command line.
pub(crate) const SHELL_FLAG: &str = "-c";

/// The program a call runs: its absolute path (what is executed) and its file name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Program {
    /// The absolute path executed inside the sandbox (the same path as on the host: the
    /// system directories are bound where they are).
    pub path: String,
}

fn invalid(message: String) -> ToolError {
    ToolError::InvalidArguments(message)
}

/// The program `argv` runs under `grant`, or why it may not run.
pub(crate) fn allowed(argv: &[&str], grant: &ExecGrant) -> Result<Program, ToolError> {
    let Some(&first) = argv.first() else {
        return Err(invalid(
            "key \"argv\" is empty: give the program and its arguments, e.g. [\"wc\", \"-l\", \
             \"notes.txt\"]"
                .to_owned(),
        ));
    };
    if first.is_empty() {
        return Err(invalid(
            "argv[0] is empty: name the program to run".to_owned(),
        ));
    }
    let shell_line = first == SHELL && argv.get(1) == Some(&SHELL_FLAG);
    if shell_line {
        if !grant.shell {
            return Err(invalid(
                "argv is a shell line (sh -c ...), and this grant does not set shell = true: \
                 pass the program and its arguments as argv instead"
                    .to_owned(),
            ));
        }
        if argv.len() != 3 {
            return Err(invalid(format!(
                "a shell line is exactly [\"sh\", \"-c\", LINE]; this argv has {} entries",
                argv.len()
            )));
        }
        return Ok(Program {
            path: resolve(first)?,
        });
    }
    let bare = !first.contains('/');
    let path = resolve(first)?;
    let name = Path::new(&path)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let matches = grant.programs.iter().any(|glob| {
        program_glob(glob).is_ok_and(|m| {
            if glob.contains('/') {
                m.is_match(&path)
            } else {
                // A name glob matches only a name found on the sandbox's PATH (system
                // directories, read-only), never a path the model chose: `./grep` planted in
                // a rw_path is not `grep`.
                bare && m.is_match(&name)
            }
        })
    });
    if !matches {
        return Err(invalid(format!(
            "program {first:?} ({path}) matches none of this grant's programs ({})",
            grant.programs.join(", ")
        )));
    }
    if !grant.shell && runs_programs(&path, &name) {
        return Err(invalid(format!(
            "program {first:?} ({path}) runs other programs or code, and this grant does not \
             set shell = true"
        )));
    }
    Ok(Program { path })
}

/// Whether the program at `path` (named `name`) is a shell, an interpreter or a runner, by
/// its name or by the name of the file its symlinks lead to (`/bin/sh` -> `dash`).
fn runs_programs(path: &str, name: &str) -> bool {
    let target = std::fs::canonicalize(path)
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()));
    is_runner(name) || target.is_some_and(|t| is_runner(&t))
}

/// `program` as an absolute path: looked up on the sandbox's `PATH` when it is a bare name;
/// otherwise it must be absolute, with no `.` or `..` components.
fn resolve(program: &str) -> Result<String, ToolError> {
    if !program.contains('/') {
        let found = which::which_in(program, Some(bxsandbox::SANDBOX_PATH), "/").map_err(|_| {
            invalid(format!(
                "program {program:?} is not found on the sandbox's PATH ({})",
                bxsandbox::SANDBOX_PATH
            ))
        })?;
        return found.to_str().map(str::to_owned).ok_or_else(|| {
            invalid(format!(
                "program {program:?} resolves to a path that is not UTF-8"
            ))
        });
    }
    let path = Path::new(program);
    if !path.is_absolute() {
        return Err(invalid(format!(
            "program {program:?} is a relative path: give a bare name (looked up on PATH) or \
             an absolute path"
        )));
    }
    if path
        .components()
        .any(|c| matches!(c, Component::CurDir | Component::ParentDir))
    {
        return Err(invalid(format!(
            "program {program:?} holds '.' or '..': give the path without them"
        )));
    }
    Ok(program.to_owned())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn grant(programs: &[&str], shell: bool) -> ExecGrant {
        ExecGrant {
            programs: programs.iter().map(|p| (*p).to_owned()).collect(),
            shell,
            ..ExecGrant::default()
        }
    }

    fn refused(argv: &[&str], g: &ExecGrant) -> String {
        match allowed(argv, g) {
            Err(ToolError::InvalidArguments(m)) => m,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn a_name_on_the_path_matches_its_glob_and_runs_as_its_absolute_path() {
        let program = allowed(&["true"], &grant(&["true"], false)).unwrap();
        assert!(program.path.starts_with('/'), "{}", program.path);
        assert!(program.path.ends_with("/true"), "{}", program.path);
    }

    #[test]
    fn a_program_outside_programs_is_refused_by_name() {
        let m = refused(&["false"], &grant(&["true"], false));
        assert!(m.contains("matches none of this grant's programs"), "{m}");
    }

    #[test]
    fn a_name_glob_never_matches_a_path_the_model_chose() {
        let m = refused(&["/tmp/true"], &grant(&["true"], false));
        assert!(m.contains("matches none"), "{m}");
        let m = refused(&["./true"], &grant(&["true"], false));
        assert!(m.contains("relative path"), "{m}");
        let m = refused(&["/usr/bin/../../tmp/x"], &grant(&["/usr/bin/*"], false));
        assert!(m.contains("'..'"), "{m}");
    }

    #[test]
    fn a_shell_line_needs_shell_true() {
        let m = refused(&["sh", "-c", "true"], &grant(&["true"], false));
        assert!(m.contains("shell = true"), "{m}");
        assert!(allowed(&["sh", "-c", "true"], &grant(&[], true)).is_ok());
        let m = refused(&["sh", "-c", "true", "x"], &grant(&[], true));
        assert!(m.contains("exactly"), "{m}");
    }

    #[test]
    fn a_runner_reached_through_a_path_glob_is_refused_without_shell() {
        // `programs` checks at load time catch this too; the call checks again.
        let m = refused(&["/bin/sh"], &grant(&["/bin/s?"], false));
        assert!(m.contains("runs other programs"), "{m}");
    }

    #[test]
    fn the_loader_is_a_runner() {
        let loader = bxsandbox::interp::exec_files(std::path::Path::new(&resolve("sort").unwrap()))
            .pop()
            .unwrap();
        let loader = loader.to_str().unwrap();
        let dir = loader.rsplit_once('/').unwrap().0;
        let m = refused(&[loader], &grant(&[&format!("{dir}/*")], false));
        assert!(m.contains("runs other programs"), "{m}");
    }
}
