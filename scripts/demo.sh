#!/usr/bin/env bash
# The furthest end-to-end path that works today: builds boxmaker, starts a model server
# (fakellama, the scripted llama-server double, until the real model lands), starts loopd
# with a development config, and runs two tasks with boxctl: one that calls a tool, one that
# follows up in the same session; then shows the session's log.
# Sockets go under a temporary directory, state under .dev/demo; nothing leaves loopback.
#
# BOXMAKER_BIN_DIR=DIR uses binaries already built there instead of building;
# BOXMAKER_DEV_DIR=DIR keeps state and logs there instead of .dev/demo.
set -euo pipefail
cd "$(dirname "$0")/.."

dev="${BOXMAKER_DEV_DIR:-$PWD/.dev/demo}"
run=$(mktemp -d "${TMPDIR:-/tmp}/boxmaker-demo.XXXXXX")
mkdir -p "$dev"
bin="${BOXMAKER_BIN_DIR:-}"
if [ -z "$bin" ]; then
    echo "==> building (the first run compiles the workspace: a few minutes on 2 cores)"
    cargo build --locked -q --bins
    bin="$PWD/target/debug"
fi

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$run"
}
trap cleanup EXIT

# Waits (bounded, 20 s) until the command in "$@" succeeds.
wait_for() {
    for _ in $(seq 1 200); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}

echo "==> starting the model server: fakellama with config/demo-script.toml"
"$bin/fakellama" --listen 127.0.0.1:0 --script config/demo-script.toml --delay-ms 10 \
    >"$run/fakellama.out" 2>"$dev/fakellama.log" &
pids+=($!)
wait_for grep -q '^fakellama listening on ' "$run/fakellama.out" ||
    { echo "demo.sh: fakellama did not start; see $dev/fakellama.log" >&2; exit 1; }
addr=$(sed -n 's/^fakellama listening on //p' "$run/fakellama.out")

echo "==> starting loopd (state in $dev/state, log in $dev/loopd.log)"
cat >"$dev/loopd.toml" <<TOML
socket = "$run/loopd.sock"
state_dir = "$dev/state"
[llama]
url = "http://$addr"
[baseline]
system = "$PWD/config/system.md"
TOML
RUST_LOG=info "$bin/loopd" --config "$dev/loopd.toml" 2>"$dev/loopd.log" &
pids+=($!)
export BOXCTL_SOCKET="$run/loopd.sock"
wait_for "$bin/boxctl" status ||
    { echo "demo.sh: loopd did not start; see $dev/loopd.log" >&2; exit 1; }

session="demo-$(date +%Y%m%d-%H%M%S)"
echo
echo "\$ boxctl task --session $session What time is it?"
"$bin/boxctl" task --session "$session" "What time is it?"
echo
echo "\$ boxctl task --session $session And what can you do?"
"$bin/boxctl" task --session "$session" "And what can you do?"
echo
echo "\$ boxctl show $session"
"$bin/boxctl" show "$session"
