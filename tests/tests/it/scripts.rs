#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The scripts ask cargo where the binaries are, so a `CARGO_TARGET_DIR` (common among Rust
//! users) does not break the README's commands; and `fetch-parts.sh` takes from its cache only
//! what is whole and current (Prometheus, llama-server with rpc-server), with stubbed tools.

use e2e::{bin_dir, show, workspace_root};
use std::path::{Path, PathBuf};
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

/// The llama-cpp-python version fetch-parts.sh pins.
fn llama_version() -> String {
    let script = workspace_root().join("scripts/fetch-parts.sh");
    std::fs::read_to_string(script)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("LLAMA_CPP_PYTHON_VERSION="))
        .expect("fetch-parts.sh pins LLAMA_CPP_PYTHON_VERSION")
        .to_string()
}

/// The cache directory fetch-parts.sh keeps llama-server and rpc-server in
/// (`llama-server-VERSION-KEY`, KEY a digest of its cmake flags), as the script computes it.
fn llama_build_dir(cache: &Path) -> PathBuf {
    let script = workspace_root().join("scripts/fetch-parts.sh");
    let version = llama_version();
    let out = Command::new("bash")
        .arg("-c")
        .arg("eval \"$(sed -n '/^LLAMA_CMAKE_FLAGS=(/,/^LLAMA_BUILD_KEY=/p' \"$0\")\"; echo \"$LLAMA_BUILD_KEY\"")
        .arg(&script)
        .output()
        .unwrap();
    let key = String::from_utf8_lossy(&out.stdout).trim().to_string();
    assert_eq!(key.len(), 8, "no LLAMA_BUILD_KEY: {}", show(&out));
    cache.join(format!("boxmaker/llama-server-{version}-{key}"))
}

/// A llama-server and an rpc-server that answer as the real ones do to the checks.
fn llama_stubs(dir: &Path, with_rpc: bool) {
    std::fs::create_dir_all(dir).unwrap();
    stub(
        dir,
        "llama-server",
        "echo 'version: 1 (stub)'; echo 'built with cc'",
    );
    if with_rpc {
        stub(
            dir,
            "rpc-server",
            "echo '  -H, --host HOST' >&2; echo '  -p, --port PORT' >&2",
        );
    }
}

/// Build tools that record every call in `dir/build-calls`: a pip that cannot download, so a
/// build, when one starts, stops at its first step.
fn build_stubs(dir: &Path) {
    let calls = dir.join("build-calls");
    for tool in ["cmake", "g++", "make"] {
        stub(dir, tool, &format!("echo \"{tool} $*\" >> {calls:?}"));
    }
    stub(
        dir,
        "python3",
        &format!("echo \"python3 $*\" >> {calls:?}\n[ \"$3\" = --version ] && exit 0\nexit 1"),
    );
}

#[test]
fn fetch_parts_prints_the_cached_llama_server_and_rpc_server_without_building() {
    let cache = tempfile::tempdir().unwrap();
    let stubs = tempfile::tempdir().unwrap();
    build_stubs(stubs.path());
    let dir = llama_build_dir(cache.path());
    llama_stubs(&dir, true);
    let (code, stdout, stderr) =
        fetch_parts(cache.path(), stubs.path(), &["--print-paths", "rpc-server"]);
    assert_eq!(code, Some(0), "{stderr}");
    let want = format!(
        "LLAMA_SERVER={}\nRPC_SERVER={}\n",
        dir.join("llama-server").display(),
        dir.join("rpc-server").display()
    );
    assert_eq!(stdout, want);
    assert!(
        !stubs.path().join("build-calls").exists(),
        "a cached build was built again"
    );
}

#[test]
fn fetch_parts_builds_again_once_where_the_cache_has_no_rpc_server() {
    let cache = tempfile::tempdir().unwrap();
    let stubs = tempfile::tempdir().unwrap();
    build_stubs(stubs.path());
    // A build from before RPC, where the cache kept it (no key), and one in the keyed
    // directory that lacks the worker: neither is taken.
    let version = llama_version();
    let old = cache
        .path()
        .join(format!("boxmaker/llama-server-{version}"));
    llama_stubs(&old, false);
    llama_stubs(&llama_build_dir(cache.path()), false);
    let (code, stdout, stderr) = fetch_parts(
        cache.path(),
        stubs.path(),
        &["--print-paths", "llama-server"],
    );
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stdout.is_empty(), "{stdout}");
    assert!(
        stderr.contains("building llama-server and rpc-server from llama-cpp-python"),
        "{stderr}"
    );
    assert!(
        stderr.contains(&format!(
            "could not fetch llama-cpp-python=={version} from PyPI"
        )),
        "{stderr}"
    );
    let calls = std::fs::read_to_string(stubs.path().join("build-calls")).unwrap();
    assert!(calls.contains("python3 -m pip download"), "{calls}");
    // The old build stays where it was: a test running elsewhere may still use it.
    assert!(old.join("llama-server").is_file());
}
