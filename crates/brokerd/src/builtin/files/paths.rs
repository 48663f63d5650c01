//! Path arguments of the file tools: absolute, resolved with symlinks and `..`, and under one of
//! the grant's roots.
//!
//! A path is resolved as the kernel would follow it: [`std::fs::canonicalize`] of the deepest
//! part of it that exists (every symlink and `..` in it followed), then the parts that do not
//! exist yet joined as they are (they hold no symlink, since they do not exist; a `..` among them
//! is refused). The roots are canonicalized too, and the resolved path must be a root or lie
//! under one ([`Path::strip_prefix`], whole components). So neither `..` nor a symlink inside a
//! root that points outside it can escape.
//!
//! This check gives the refusal its message, and decides which root the path is under; it does
//! not open anything. The result is the canonical root and the path relative to it, with no
//! symlink and no `..` in it: the tools then open that relative path beneath a directory fd of
//! the root with no symlink allowed (`super::beneath`), so a tree changed after this check
//! (a checked directory swapped for a symlink) cannot lead the open outside.

use crate::tool::ToolError;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// The longest path argument, in bytes (Linux's `PATH_MAX`).
pub(crate) const MAX_PATH_BYTES: usize = 4096;

/// A path argument resolved and found under a root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Resolved {
    /// The canonical root it is under.
    pub root: PathBuf,
    /// The resolved path relative to `root`: only normal components (empty for the root).
    pub rel: PathBuf,
    /// How many of its last components do not exist (0: the path exists).
    pub missing: usize,
}

impl Resolved {
    /// The whole resolved path.
    pub(crate) fn path(&self) -> PathBuf {
        self.root.join(&self.rel)
    }
}

/// The `path` argument as an absolute path, or why it is not one.
pub(crate) fn absolute(arg: &str) -> Result<PathBuf, ToolError> {
    let invalid = |why: String| Err(ToolError::InvalidArguments(why));
    if arg.is_empty() {
        return invalid("key \"path\" must not be empty".to_string());
    }
    if arg.len() > MAX_PATH_BYTES {
        return invalid(format!(
            "key \"path\" is {} bytes long; the most is {MAX_PATH_BYTES}",
            arg.len()
        ));
    }
    if arg.contains('\0') {
        return invalid("key \"path\" must not contain a NUL character".to_string());
    }
    let path = PathBuf::from(arg);
    if !path.is_absolute() {
        return invalid(format!("key \"path\" must be an absolute path, is {arg:?}"));
    }
    Ok(path)
}

/// Resolves `arg` (absolute) and checks it lies under one of `roots`; `PathNotAllowed`
/// otherwise, naming the path and never the roots.
pub(crate) fn resolve_allowed(arg: &Path, roots: &[PathBuf]) -> Result<Resolved, ToolError> {
    let not_allowed =
        || ToolError::PathNotAllowed(format!("{} is outside the allowed paths", arg.display()));
    let (path, missing) = resolve(arg).ok_or_else(not_allowed)?;
    roots
        .iter()
        .filter_map(|root| std::fs::canonicalize(root).ok())
        .find_map(|root| {
            let rel = path.strip_prefix(&root).ok()?.to_path_buf();
            if root.is_dir() {
                return Some(Resolved { root, rel, missing });
            }
            // A root that is a single file is opened beneath its directory, by its name: the
            // only path under it is the file itself.
            let mut name = PathBuf::from(root.file_name()?);
            // (`join("")` would add a trailing `/`, which only a directory satisfies.)
            if !rel.as_os_str().is_empty() {
                name.push(rel);
            }
            let dir = root.parent()?.to_path_buf();
            Some(Resolved {
                root: dir,
                rel: name,
                missing,
            })
        })
        .ok_or_else(not_allowed)
}

/// `arg` resolved as far as it exists, and how many of its last parts do not exist; `None` when
/// a part that does not exist is `..`.
fn resolve(arg: &Path) -> Option<(PathBuf, usize)> {
    let mut existing = arg;
    let mut rest: Vec<&OsStr> = Vec::new();
    loop {
        if let Ok(mut path) = std::fs::canonicalize(existing) {
            let missing = rest.len();
            path.extend(rest.iter().rev());
            return Some((path, missing));
        }
        // `file_name` is `None` for a path ending in `..` (and for `/`, which always resolves).
        rest.push(existing.file_name()?);
        existing = existing.parent()?;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn relative_empty_and_nul_paths_are_invalid_arguments() {
        for bad in ["", "a/b", "./a", "/a\0b"] {
            assert!(
                matches!(absolute(bad), Err(ToolError::InvalidArguments(_))),
                "{bad:?}"
            );
        }
        assert!(absolute(&format!("/{}", "a".repeat(MAX_PATH_BYTES))).is_err());
    }

    #[test]
    fn missing_parts_are_joined_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(dir.path()).unwrap();
        let r = resolve_allowed(&dir.path().join("a/b"), &[dir.path().to_path_buf()]).unwrap();
        assert_eq!(r.path(), root.join("a/b"));
        assert_eq!(
            (&r.root, r.rel.as_path(), r.missing),
            (&root, Path::new("a/b"), 2)
        );
        let r = resolve_allowed(dir.path(), &[dir.path().to_path_buf()]).unwrap();
        assert_eq!((r.path(), r.rel, r.missing), (root, PathBuf::new(), 0));
    }

    #[test]
    fn a_root_that_is_a_file_is_opened_by_name_beneath_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("only.txt");
        std::fs::write(&file, "x").unwrap();
        let r = resolve_allowed(&file, std::slice::from_ref(&file)).unwrap();
        let parent = std::fs::canonicalize(dir.path()).unwrap();
        assert_eq!(
            (r.root.as_path(), r.rel.as_path()),
            (parent.as_path(), Path::new("only.txt"))
        );
        // Its siblings are not under it.
        let sibling = dir.path().join("other.txt");
        std::fs::write(&sibling, "y").unwrap();
        assert!(resolve_allowed(&sibling, &[file]).is_err());
    }

    #[test]
    fn dot_dot_after_a_missing_part_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let arg = dir.path().join("missing/../x");
        assert!(matches!(
            resolve_allowed(&arg, &[dir.path().to_path_buf()]),
            Err(ToolError::PathNotAllowed(_))
        ));
    }

    #[test]
    fn a_sibling_with_a_common_prefix_is_not_under_the_root() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("root")).unwrap();
        std::fs::create_dir(dir.path().join("rootless")).unwrap();
        let arg = dir.path().join("rootless/x");
        assert!(matches!(
            resolve_allowed(&arg, &[dir.path().join("root")]),
            Err(ToolError::PathNotAllowed(_))
        ));
    }
}
