# Sourced by the scripts: where this workspace's debug binaries are.
#
# cargo_bin_dir prints `<target dir>/debug`, the target dir as cargo itself resolves it
# (CARGO_TARGET_DIR, build.target-dir in a cargo config, or ./target), so no script assumes a
# fixed build directory. It fails, saying so, when cargo cannot tell.
cargo_bin_dir() {
    local target
    target=$(cargo metadata --format-version 1 --no-deps 2>/dev/null |
        sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
    if [ -z "$target" ]; then
        echo "cannot ask cargo where its target directory is (cargo metadata failed)" >&2
        return 1
    fi
    printf '%s/debug\n' "$target"
}
