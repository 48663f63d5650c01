#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The scripts ask cargo where the binaries are, so a `CARGO_TARGET_DIR` (common among Rust
//! users) does not break the README's commands.

use e2e::{bin_dir, workspace_root};
use std::path::Path;
use std::process::Command;

/// `cargo_bin_dir` from `scripts/lib/bin-dir.sh`, run in the workspace with `target_dir` as
/// `CARGO_TARGET_DIR` (inherited when `None`).
fn cargo_bin_dir(target_dir: Option<&std::path::Path>) -> String {
    let mut command = Command::new("bash");
    command
        .current_dir(workspace_root())
        .args(["-c", ". scripts/lib/bin-dir.sh && cargo_bin_dir"]);
    if let Some(dir) = target_dir {
        command.env("CARGO_TARGET_DIR", dir);
    }
    let out = command.output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn scripts_find_the_binaries_where_cargo_puts_them() {
    let elsewhere = tempfile::tempdir().unwrap();
    assert_eq!(
        cargo_bin_dir(Some(elsewhere.path())),
        elsewhere.path().join("debug").display().to_string()
    );
    // And, as this test runs, where this test's own binaries are.
    assert_eq!(
        std::fs::canonicalize(cargo_bin_dir(None)).unwrap(),
        std::fs::canonicalize(bin_dir()).unwrap()
    );
}

#[test]
fn no_script_assumes_target_debug() {
    for entry in std::fs::read_dir(workspace_root().join("scripts")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "sh") {
            let text = std::fs::read_to_string(&path).unwrap();
            assert!(
                !text.contains("target/debug"),
                "{} names target/debug: ask cargo (scripts/lib/bin-dir.sh)",
                path.display()
            );
        }
    }
}

/// Runs `with_progress` from `scripts/lib/progress.sh` on `build` (a shell command) with a
/// progress line every tick, not on a terminal: its exit status and what it printed on stderr.
fn with_progress(build: &str) -> (Option<i32>, String) {
    let log = tempfile::NamedTempFile::new().unwrap();
    let out = Command::new("bash")
        .current_dir(workspace_root())
        .env("PROGRESS_TICK_S", "0.2")
        .env("PROGRESS_EVERY_S", "0")
        .args([
            "-c",
            ". scripts/lib/progress.sh && with_progress \"$0\" building bash -c \"$1\"",
        ])
        .arg(log.path())
        .arg(build)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_long_build_shows_its_percentage_and_keeps_its_exit_status() {
    // cmake's own progress lines, as the llama-server build writes them to its log.
    let (code, shown) = with_progress(
        "echo '[ 42%] Building CXX object x.o'; sleep 1; echo '[100%] Built target llama-server'",
    );
    assert_eq!(code, Some(0), "{shown}");
    assert!(shown.contains("==> building: 42%"), "{shown}");
    let (code, _) = with_progress("echo '[  7%] Building'; exit 3");
    assert_eq!(code, Some(3));
}

#[test]
fn the_readme_gives_its_two_commands_then_the_nixos_install() {
    let readme = std::fs::read_to_string(workspace_root().join("README.md")).unwrap();
    let blocks: Vec<&str> = readme
        .split("```")
        .skip(1)
        .step_by(2)
        .filter_map(|b| b.strip_prefix("sh\n"))
        .collect();
    assert_eq!(
        &blocks[..2],
        ["./scripts/demo.sh\n", "./scripts/test.sh\n"],
        "the README's first two sh blocks are its two commands"
    );
    let after = &readme[readme.find("./scripts/test.sh\n```").unwrap()..];
    let next_heading = after.lines().find(|l| l.starts_with("## ")).unwrap();
    assert_eq!(next_heading, "## Install on NixOS");
    let install = &after[after.find(next_heading).unwrap()..];
    let install = &install[..install[3..].find("\n## ").map_or(install.len(), |i| i + 3)];
    for needed in [
        "services.boxmaker",
        "nixosModules.default",
        "nixos-rebuild switch",
    ] {
        assert!(
            install.contains(needed),
            "{needed} missing from:\n{install}"
        );
    }
    assert!(
        !readme.contains("not built yet"),
        "the README says the flake is not built"
    );
}

/// Runs `scripts/fetch-parts.sh ARGS` with `cache` as its cache and `stubs` first on `PATH`:
/// its exit status, stdout and stderr.
fn fetch_parts(cache: &Path, stubs: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let path = format!(
        "{}:{}",
        stubs.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::new("bash")
        .current_dir(workspace_root())
        .arg("scripts/fetch-parts.sh")
        .args(args)
        .env("XDG_CACHE_HOME", cache)
        .env("PATH", path)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// An executable shell script `dir/name` with `body`.
fn stub(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Stubs for Debian's tools: `apt-get` that records its calls in `dir/apt-calls` and "downloads"
/// a .deb that is not the pinned one, an amd64 `dpkg`, and a `dpkg-deb` that must not run.
fn debian_stubs(dir: &Path) {
    let calls = dir.join("apt-calls");
    stub(
        dir,
        "apt-get",
        &format!(
            "echo \"$*\" >> {calls:?}\n\
             [ \"$1\" = download ] && echo 'not the pinned package' > prometheus_0_amd64.deb\n\
             exit 0"
        ),
    );
    stub(dir, "dpkg", "echo amd64");
    stub(dir, "dpkg-deb", "echo dpkg-deb must not run >&2; exit 9");
}

#[test]
fn fetch_parts_prints_the_cached_prometheus_without_downloading() {
    let cache = tempfile::tempdir().unwrap();
    let stubs = tempfile::tempdir().unwrap();
    debian_stubs(stubs.path());
    let script = std::fs::read_to_string(workspace_root().join("scripts/fetch-parts.sh")).unwrap();
    let version = script
        .lines()
        .find_map(|l| l.strip_prefix("PROMETHEUS_DEB_VERSION="))
        .expect("fetch-parts.sh pins PROMETHEUS_DEB_VERSION");
    let dir = cache.path().join("boxmaker/prometheus").join(version);
    std::fs::create_dir_all(&dir).unwrap();
    for b in ["prometheus", "promtool"] {
        stub(&dir, b, &format!("echo '{b}, version 2.42.0+ds'"));
    }
    let (code, stdout, stderr) =
        fetch_parts(cache.path(), stubs.path(), &["--print-paths", "prometheus"]);
    assert_eq!(code, Some(0), "{stderr}");
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{stdout}");
    assert!(
        lines[0].starts_with("PROMETHEUS=") && lines[0].ends_with("/prometheus"),
        "{stdout}"
    );
    assert!(
        lines[1].starts_with("PROMTOOL=") && lines[1].ends_with("/promtool"),
        "{stdout}"
    );
    assert!(
        !stubs.path().join("apt-calls").exists(),
        "a cached prometheus was downloaded again"
    );
}

#[test]
fn fetch_parts_refuses_a_prometheus_package_that_is_not_the_pinned_one() {
    let cache = tempfile::tempdir().unwrap();
    let stubs = tempfile::tempdir().unwrap();
    debian_stubs(stubs.path());
    let (code, stdout, stderr) =
        fetch_parts(cache.path(), stubs.path(), &["--print-paths", "prometheus"]);
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("refusing prometheus_0_amd64.deb: sha256 is"),
        "{stderr}"
    );
    assert!(
        stderr.contains("(pinned in scripts/fetch-parts.sh)"),
        "{stderr}"
    );
    let calls = std::fs::read_to_string(stubs.path().join("apt-calls")).unwrap();
    assert!(calls.starts_with("download prometheus=2.42.0"), "{calls}");
    // Nothing was left in the cache for a later run to take.
    let left: Vec<_> = std::fs::read_dir(cache.path().join("boxmaker/prometheus"))
        .unwrap()
        .collect();
    assert!(left.is_empty(), "{left:?}");
}
