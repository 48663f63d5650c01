#!/usr/bin/env bash
# The furthest end-to-end path that works today: builds boxmaker, builds or reuses
# llama-server and fetches the default model (Qwen2.5-Coder-0.5B, with our tool-call
# template), starts llama-server, brokerd (with development grants) and loopd locally, and
# runs two tasks with boxctl: one the model answers with loopd's clock, one through brokerd's
# echo (found with find_tool, called with call_tool); then shows the session's log.
# The first run takes minutes (it builds llama-server and downloads the model, with progress);
# later runs take seconds. Sockets go under a temporary directory, state and logs under
# .dev/demo; nothing leaves loopback.
#
# BOXMAKER_MODEL=fake uses fakellama (the scripted double) instead of a real model;
# BOXMAKER_BIN_DIR=DIR uses binaries already built there instead of building;
# BOXMAKER_DEV_DIR=DIR keeps state and logs there instead of .dev/demo.
set -euo pipefail
cd "$(dirname "$0")/.."

dev="${BOXMAKER_DEV_DIR:-$PWD/.dev/demo}"
model="${BOXMAKER_MODEL:-qwen}"
run=$(mktemp -d "${TMPDIR:-/tmp}/boxmaker-demo.XXXXXX")
mkdir -p "$dev/files"
bin="${BOXMAKER_BIN_DIR:-}"

pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    rm -rf "$run"
}
trap cleanup EXIT

# Waits (bounded: $1 tenths of a second) until the command in the rest succeeds.
wait_for() {
    local tenths=$1
    shift
    for _ in $(seq 1 "$tenths"); do
        "$@" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}

if [ "$model" != fake ]; then
    echo "==> llama-server and the model (built and downloaded on the first run only)"
    eval "$(./scripts/fetch-parts.sh --print-paths llama-server)"
    eval "$(./scripts/fetch-parts.sh --print-paths qwen)"
fi
if [ -z "$bin" ]; then
    echo "==> building boxmaker (the first run compiles the workspace: a few minutes on 2 cores)"
    cargo build --locked -q --bins
    bin="$PWD/target/debug"
fi

if [ "$model" = fake ]; then
    echo "==> starting the model server: fakellama with config/demo-script.toml"
    "$bin/fakellama" --listen "$run/llama.sock" --script config/demo-script.toml --delay-ms 10 \
        2>"$dev/model.log" &
else
    echo "==> starting llama-server with Qwen2.5-Coder-0.5B (log: $dev/model.log)"
    "$LLAMA_SERVER" -m "$QWEN_GGUF" -c 12288 --parallel 3 --temp 0 --seed 7 --no-webui \
        --chat-template-file config/templates/qwen2.5-tools.jinja \
        --host "$run/llama.sock" >"$dev/model.log" 2>&1 &
fi
pids+=($!)

echo "==> starting brokerd with development grants (state and audit log: $dev/brokerd)"
cat >"$dev/brokerd.toml" <<TOML
socket = "$run/brokerd.sock"
state_dir = "$dev/brokerd"
[[grants]]
tool = "echo"
[[grants]]
tool = "read_file"
paths = ["$dev/files"]
[[grants]]
tool = "list_dir"
paths = ["$dev/files"]
TOML
"$bin/brokerd" --config "$dev/brokerd.toml" 2>"$dev/brokerd.log" &
pids+=($!)

echo "==> starting loopd (state in $dev/state, log in $dev/loopd.log)"
cat >"$dev/loopd.toml" <<TOML
socket = "$run/loopd.sock"
state_dir = "$dev/state"
[llama]
url = "unix:$run/llama.sock"
[broker]
socket = "$run/brokerd.sock"
[baseline]
system = "$PWD/config/system.md"
TOML
RUST_LOG=info "$bin/loopd" --config "$dev/loopd.toml" 2>"$dev/loopd.log" &
pids+=($!)
export BOXCTL_SOCKET="$run/loopd.sock"
# loopd serves once the model is loaded: seconds here, minutes for a big model.
wait_for 3000 "$bin/boxctl" status ||
    { echo "demo.sh: loopd did not start; see $dev/loopd.log and $dev/model.log" >&2; exit 1; }

session="demo-$(date +%Y%m%d-%H%M%S)"
status=0
for task in "What time is it?" "Use call_tool to run the echo tool with the text 'banana'."; do
    echo
    echo "\$ boxctl task --session $session $task"
    "$bin/boxctl" task --session "$session" "$task" || status=$?
done
echo
echo "\$ boxctl show $session"
"$bin/boxctl" show "$session"
exit "$status"
