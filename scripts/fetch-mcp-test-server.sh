#!/usr/bin/env bash
# Installs the real MCP server that brokerd's MCP tests run against:
# @modelcontextprotocol/server-everything (the protocol's reference server: tools `echo`,
# `get-sum`, `get-tiny-image`, ...) from npm, pinned below, into
# ${XDG_CACHE_HOME:-$HOME/.cache}/boxmaker/mcp. Idempotent: a run that finds the pinned version
# installed does nothing. Needs node and npm (Node 18 or later); as root, installs Debian's
# nodejs and npm when they are missing.
#
# usage: scripts/fetch-mcp-test-server.sh [--print-paths]
#   --print-paths  after ensuring the server, print MCP_EVERYTHING=PATH (its entry .js,
#                  shell-quoted) on stdout, for `eval`; run it as `node "$MCP_EVERYTHING" stdio`
# Progress lines ("==> ...") go to stderr, so stdout carries only the --print-paths line:
#   eval "$(scripts/fetch-mcp-test-server.sh --print-paths)"
set -euo pipefail

# ---- pinned version ------------------------------------------------------------------------
# 2026.8.31 depends on @modelcontextprotocol/sdk ^1.30 (engines: node >= 18) and express 5
# (node >= 18); it declares no engines itself. Checked on Node 20.
EVERYTHING_PACKAGE=@modelcontextprotocol/server-everything
EVERYTHING_VERSION=2026.8.31
NODE_MIN_MAJOR=18

PROG=$(basename "$0")
PREFIX="${XDG_CACHE_HOME:-$HOME/.cache}/boxmaker/mcp"
PACKAGE_DIR="$PREFIX/node_modules/$EVERYTHING_PACKAGE"
ENTRY="$PACKAGE_DIR/dist/index.js"

# npm's own options, so an unreachable registry fails in about a minute rather than hanging.
read -r -a NPM_OPTS <<<"${BOXMAKER_NPM_OPTS:---fetch-retries 2 --fetch-timeout 30000}"

step() { printf '==> %s\n' "$*" >&2; }

die() {
    printf '%s: error: %s\n' "$PROG" "$*" >&2
    exit 1
}

usage() {
    local status=${1:-2}
    if [ "$status" -eq 0 ]; then
        sed -n 's/^# \{0,1\}//; /^usage:/,/^ *eval/p' "$0"
    else
        sed -n 's/^# \{0,1\}//; /^usage:/,/^ *eval/p' "$0" >&2
    fi
    exit "$status"
}

ensure_node() {
    if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
        if [ "$(id -u)" -ne 0 ]; then
            die "node and npm are needed: install them (Debian: apt-get install nodejs npm)"
        fi
        step "installing nodejs and npm from Debian"
        DEBIAN_FRONTEND=noninteractive apt-get install -y nodejs npm >&2 ||
            die "apt-get install nodejs npm failed"
    fi
    local major
    major=$(node -p 'process.versions.node.split(".")[0]') || die "node does not run"
    if [ "$major" -lt "$NODE_MIN_MAJOR" ]; then
        die "node $(node --version) is too old: $EVERYTHING_PACKAGE needs Node $NODE_MIN_MAJOR or later"
    fi
}

installed_version() {
    [ -f "$PACKAGE_DIR/package.json" ] || return 0
    node -p "require(process.argv[1]).version" "$PACKAGE_DIR/package.json" 2>/dev/null || true
}

ensure_everything() {
    if [ -f "$ENTRY" ] && [ "$(installed_version)" = "$EVERYTHING_VERSION" ]; then
        return 0
    fi
    mkdir -p "$PREFIX"
    step "installing $EVERYTHING_PACKAGE@$EVERYTHING_VERSION from npm into $PREFIX"
    # --ignore-scripts: nothing from the registry runs at install time.
    npm install --prefix "$PREFIX" --no-audit --no-fund --ignore-scripts "${NPM_OPTS[@]}" \
        "$EVERYTHING_PACKAGE@$EVERYTHING_VERSION" >&2 ||
        die "npm install $EVERYTHING_PACKAGE@$EVERYTHING_VERSION failed"
    [ -f "$ENTRY" ] || die "installed, but its entry point is missing: $ENTRY"
    [ "$(installed_version)" = "$EVERYTHING_VERSION" ] ||
        die "npm installed version $(installed_version), not $EVERYTHING_VERSION"
}

PRINT_PATHS=0
for arg in "$@"; do
    case $arg in
    --print-paths) PRINT_PATHS=1 ;;
    -h | --help) usage 0 ;;
    *)
        printf '%s: unknown argument: %s\n' "$PROG" "$arg" >&2
        usage
        ;;
    esac
done

ensure_node
ensure_everything
if [ "$PRINT_PATHS" -eq 1 ]; then
    printf 'MCP_EVERYTHING=%q\n' "$ENTRY"
fi
