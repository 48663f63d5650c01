//! What `--check-config` refuses of an exec grant's walls (issue 32): a bound path beneath a
//! writable one (32.1), whichever grant each belongs to, since a call under the writable
//! grant could rename the bound path's parent and plant a symlink in its place; and the
//! dynamic loader in `programs` without `shell = true` (32.5), since it runs any ELF file in
//! its own process, with no exec for the kernel to refuse.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use super::*;

const WRITER: &str = "[[grants]]\ntool = \"exec\"\nsessions = [\"main\"]\nshell = true\n\
                      rw_paths = [\"/srv/work\"]\n";

#[test]
fn a_bound_path_beneath_any_rw_path_is_refused_naming_both_paths_and_grants() {
    let found = invalid(&format!(
        "{WRITER}[[grants]]\ntool = \"exec\"\nsessions = [\"reader\"]\nprograms = [\"cat\"]\n\
         ro_paths = [\"/srv/work/a/b\"]\nrw_paths = [\"/srv/work/a/c\"]\n\
         [[grants]]\ntool = \"exec\"\nprograms = [\"wc\"]\nrw_paths = [\"/srv/own\"]\n\
         ro_paths = [\"/srv/own/ref\"]\n"
    ));
    assert_eq!(
        keys(&found),
        [
            "grants[1].ro_paths[0]",
            "grants[1].rw_paths[0]",
            "grants[2].ro_paths[0]"
        ]
    );
    let message = &found[0].message;
    assert!(
        message.starts_with("/srv/work/a/b lies beneath grants[0].rw_paths[0] (/srv/work)"),
        "{message}"
    );
    assert!(message.contains("grants[1] binds"), "{message}");
    assert!(
        found[2]
            .message
            .contains("beneath grants[2].rw_paths[0] (/srv/own)"),
        "{}",
        found[2].message
    );
}

#[test]
fn paths_side_by_side_or_equal_are_fine() {
    valid(&format!(
        "{WRITER}[[grants]]\ntool = \"exec\"\nsessions = [\"reader\"]\nprograms = [\"cat\"]\n\
         ro_paths = [\"/srv/work\", \"/srv/workshop\", \"/srv\"]\nrw_paths = [\"/srv/other\"]\n"
    ));
}

#[test]
fn a_path_that_resolves_beneath_a_rw_path_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let work = dir.path().join("work");
    std::fs::create_dir_all(work.join("inner")).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(work.join("inner"), &link).unwrap();
    let found = invalid(&format!(
        "[[grants]]\ntool = \"exec\"\nshell = true\nrw_paths = [\"{}\"]\n\
         ro_paths = [\"{}\"]\n",
        work.display(),
        link.display()
    ));
    assert_eq!(keys(&found), ["grants[0].ro_paths[0]"]);
}

#[test]
fn the_loader_in_programs_needs_shell_true() {
    for glob in [
        "/lib64/ld-linux-x86-64.so.2",
        "/lib64/*",
        "ld-linux*",
        "/usr/lib/ld.so",
    ] {
        let text = format!("[[grants]]\ntool = \"exec\"\nprograms = [\"{glob}\"]\n");
        let found = invalid(&text);
        assert_eq!(keys(&found), ["grants[0].programs[0]"], "{glob}");
        assert!(
            found[0].message.contains("shell = true"),
            "{}",
            found[0].message
        );
        valid(&format!("{text}shell = true\n"));
    }
}
