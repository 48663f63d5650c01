#!/usr/bin/env bash
# The main job, end to end, through boxmaker's supervisor: builds boxmaker, builds or reuses
# llama-server and fetches the default model (Qwen2.5-Coder-0.5B, with our tool-call template),
# writes a development layout under the dev directory (brokerd.toml with development grants,
# loopd.toml, and boxd.toml with every child's config file pinned by its sha256; sockets, state
# and logs beside them; no root), starts boxd, which starts llama-server, brokerd and loopd in
# order, each once the one before is ready; runs three tasks with boxctl: one the model answers
# with loopd's clock, one through brokerd's echo (found with find_tool, called with call_tool),
# one with brokerd's exec (`wc -l` over the files of the work directory, in the sandbox, in a
# session of its own);
# shows the sessions' logs; then stops boxd with SIGTERM (it stops its children in reverse order)
# and checks every child is gone.
# The first run takes minutes (it builds llama-server and downloads the model, with progress);
# later runs take seconds. Everything goes under .dev/demo; nothing leaves loopback (the model
# server listens on a Unix socket).
#
# BOXMAKER_MODEL=fake uses fakellama (the scripted double) instead of a real model;
# BOXMAKER_BIN_DIR=DIR uses binaries already built there instead of building;
# BOXMAKER_DEV_DIR=DIR keeps the layout there instead of .dev/demo.
set -euo pipefail
cd "$(dirname "$0")/.."

mkdir -p "${BOXMAKER_DEV_DIR:-$PWD/.dev/demo}"
dev=$(cd "${BOXMAKER_DEV_DIR:-$PWD/.dev/demo}" && pwd)
model="${BOXMAKER_MODEL:-qwen}"
bin="${BOXMAKER_BIN_DIR:-}"
mkdir -p "$dev/files" "$dev/work"
# What the exec task counts: five lines in two files.
printf 'buy apples\ncall the plumber\nwater the plants\n' >"$dev/work/todo.txt"
printf 'the demo writes these files\nexec counts their lines\n' >"$dev/work/notes.txt"
# Sockets go in $dev/run, unless that path is too long for a Unix socket address (107 bytes).
run="$dev/run"
tmp_run=
if [ "${#run}" -gt 80 ]; then
    tmp_run=$(mktemp -d "${TMPDIR:-/tmp}/boxmaker-demo.XXXXXX")
    run="$tmp_run"
fi
mkdir -p "$run"
rm -f "$run"/*.sock

boxd_pid=
boxd_rc=
# Stops boxd (SIGTERM; it stops its children in reverse order) and waits, bounded, for it.
stop_boxd() {
    [ -n "$boxd_pid" ] || return 0
    kill -TERM "$boxd_pid" 2>/dev/null || true
    for _ in $(seq 1 900); do
        kill -0 "$boxd_pid" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$boxd_pid" 2>/dev/null; then
        echo "demo.sh: boxd did not stop within 90 s; killing it" >&2
        kill -KILL "$boxd_pid" 2>/dev/null || true
    fi
    boxd_rc=0
    wait "$boxd_pid" 2>/dev/null || boxd_rc=$?
    boxd_pid=
}
cleanup() {
    stop_boxd
    [ -z "$tmp_run" ] || rm -rf "$tmp_run"
}
trap cleanup EXIT

echo "==> bubblewrap, the exec tool's sandbox (installed from Debian on the first run only)"
eval "$(./scripts/fetch-parts.sh --print-paths bubblewrap)"
if [ "$model" != fake ]; then
    echo "==> llama-server and the model (built and downloaded on the first run only)"
    eval "$(./scripts/fetch-parts.sh --print-paths llama-server)"
    eval "$(./scripts/fetch-parts.sh --print-paths qwen)"
fi
if [ -z "$bin" ]; then
    echo "==> building boxmaker (the first run compiles the workspace: a few minutes on 2 cores)"
    cargo build --locked -q --bins
    # shellcheck source=lib/bin-dir.sh
    . ./scripts/lib/bin-dir.sh
    bin=$(cargo_bin_dir)
fi
bin=$(cd "$bin" && pwd)

sha256() { sha256sum "$1" | cut -d' ' -f1; }

echo "==> writing the development layout in $dev"
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
# wc alone, in the sandbox: the work directory bound read-write (and the default cwd), no
# network, nothing else of the machine but its system directories (docs/exec.md).
[[grants]]
tool = "exec"
programs = ["wc"]
rw_paths = ["$dev/work"]
TOML
cat >"$dev/loopd.toml" <<TOML
socket = "$run/loopd.sock"
state_dir = "$dev/state"
[llama]
url = "unix:$run/llama.sock"
[broker]
socket = "$run/brokerd.sock"
# The demo's model fails through call_tool: the granted file tools go in the tools array.
core_tools = ["read_file", "list_dir", "exec"]
[baseline]
system = "$PWD/config/system.md"
TOML

# The model server listens on a Unix socket (no port to pick or collide with, nothing on the
# network). It accepts connections while the model is still loading, so boxd counts it ready
# then; loopd itself waits for /health (llama.health_wait_ms) and only then opens its socket,
# which is loopd's readiness, hence loopd's long start_timeout_ms.
if [ "$model" = fake ]; then
    pinned="$PWD/config/demo-script.toml"
    model_child=$(cat <<TOML
name = "fakellama"
command = "$bin/fakellama"
args = ["--listen", "$run/llama.sock", "--script", "$pinned", "--delay-ms", "10"]
TOML
)
else
    pinned="$PWD/config/templates/qwen2.5-tools.jinja"
    model_child=$(cat <<TOML
name = "llama-server"
command = "$LLAMA_SERVER"
args = ["-m", "$QWEN_GGUF", "-c", "12288", "--parallel", "3", "--temp", "0", "--seed", "7",
        "--no-webui", "--chat-template-file", "$pinned", "--host", "$run/llama.sock"]
TOML
)
fi
cat >"$dev/boxd.toml" <<TOML
# Written by scripts/demo.sh: boxd in a development layout (see config/boxd.toml, docs/config.md).
notify = false
# boxd's lock and the record of its children (what a killed boxd left is killed at the next start).
runtime_dir = "$run"
[restart]
# A demo fails fast instead of restarting a child that died.
max_restarts = 0
[log]
level = "info"

[[children]]
$model_child
config_file = "$pinned"
config_sha256 = "$(sha256 "$pinned")"
ready = { socket = "$run/llama.sock" }
start_timeout_ms = 60000
stop_grace_ms = 10000

[[children]]
name = "brokerd"
command = "$bin/brokerd"
args = ["--config", "$dev/brokerd.toml"]
config_file = "$dev/brokerd.toml"
config_sha256 = "$(sha256 "$dev/brokerd.toml")"
ready = { socket = "$run/brokerd.sock" }
start_timeout_ms = 10000
stop_grace_ms = 5000

[[children]]
name = "loopd"
command = "$bin/loopd"
args = ["--config", "$dev/loopd.toml"]
env = { RUST_LOG = "info" }
config_file = "$dev/loopd.toml"
config_sha256 = "$(sha256 "$dev/loopd.toml")"
ready = { socket = "$run/loopd.sock" }
# loopd opens its socket once the model is loaded: seconds here, minutes for a big model.
start_timeout_ms = 300000
stop_grace_ms = 30000
TOML

echo "==> starting boxd (config $dev/boxd.toml; its log and its children's: $dev/boxd.log)"
"$bin/boxd" --config "$dev/boxd.toml" 2>"$dev/boxd.log" &
boxd_pid=$!
echo "boxd pid $boxd_pid"
export BOXCTL_SOCKET="$run/loopd.sock"
# Bounded (5 minutes): boxd starts loopd only once the model server and brokerd are up.
up=
for _ in $(seq 1 3000); do
    if ! kill -0 "$boxd_pid" 2>/dev/null; then break; fi
    if "$bin/boxctl" status >/dev/null 2>&1; then up=1; break; fi
    sleep 0.1
done
if [ -z "$up" ]; then
    echo "demo.sh: the stack did not start; boxd's log ($dev/boxd.log) ends:" >&2
    tail -n 30 "$dev/boxd.log" >&2 || true
    exit 1
fi

session="demo-$(date +%Y%m%d-%H%M%S)"
status=0
for task in "What time is it?" "Use call_tool to run the echo tool with the text 'banana'."; do
    echo
    echo "\$ boxctl task --session $session $task"
    "$bin/boxctl" task --session "$session" "$task" || status=$?
done
# The exec task in a session of its own: after two turns of other work the small model tends
# to call the tool again instead of answering.
task="Use the exec tool to run wc -l notes.txt todo.txt and tell me how many lines there are in total."
echo
echo "\$ boxctl task --session $session-wc $task"
"$bin/boxctl" task --session "$session-wc" "$task" || status=$?
for shown in "$session" "$session-wc"; do
    echo
    echo "\$ boxctl show $shown"
    "$bin/boxctl" show "$shown" || status=$?
done
echo
echo "==> stopping boxd (SIGTERM): it stops loopd, brokerd and the model server, in that order"
# The children boxd started, from its log ("started child=NAME pid=PID").
children=$(sed -n 's/.*boxd::process: started child=\([a-z0-9_-]*\) pid=\([0-9]*\).*/\1=\2/p' "$dev/boxd.log" |
    tr '\n' ' ')
stop_boxd
left=
for child in $children; do
    kill -0 "${child#*=}" 2>/dev/null && left="$left $child"
done
echo "boxd exited with status $boxd_rc"
echo "children: $children"
if [ "$boxd_rc" != 0 ]; then
    echo "demo.sh: boxd failed; see $dev/boxd.log" >&2
    status=1
elif [ -z "$children" ]; then
    echo "demo.sh: boxd's log names no child it started" >&2
    status=1
elif [ -n "$left" ]; then
    echo "demo.sh: still running after boxd stopped:$left" >&2
    status=1
else
    echo "boxd and every child have stopped"
fi
exit "$status"
