#!/usr/bin/env bash
# Runs every check of boxmaker: formatting, lints, and all tests (unit, integration,
# end-to-end). Installs nothing outside the project; needs only the Rust toolchain
# (cargo, rustfmt, clippy) and reaches no network but the crate registry.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

for tool in rustfmt clippy-driver; do
    if ! command -v "$tool" >/dev/null 2>&1 && ! rustup which "$tool" >/dev/null 2>&1; then
        echo "test.sh: $tool is missing: install it with 'rustup component add ${tool%-driver}'" >&2
        exit 2
    fi
done

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

# The end-to-end tests run the real binaries, so they are built first.
step "cargo build --workspace --bins"
cargo build --workspace --bins --locked

step "cargo test --workspace"
cargo test --workspace --locked
