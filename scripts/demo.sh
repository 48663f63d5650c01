#!/usr/bin/env bash
# The main job, end to end, through boxmaker's supervisor: builds boxmaker, builds or reuses
# llama-server and fetches the default model (Qwen2.5-Coder-0.5B, with our tool-call template),
# writes a development layout under the dev directory (brokerd.toml with development grants,
# loopd.toml, and boxd.toml with every child's config file pinned by its sha256; sockets, state
# and logs beside them; no root), starts boxd, which starts llama-server, brokerd and loopd in
# order, each once the one before is ready; runs three tasks with boxctl: one the model answers
# with loopd's clock, one through brokerd's echo (found with find_tool, called with call_tool),
# one with brokerd's exec (`wc -l` over the files of the work directory, in the sandbox, in a
# session of its own); then two tasks that ask the model to save a note with write_file, which
# the grants put under `approve = "always"` (docs/approvals.md): each runs in the background
# and waits for the owner; the demo approves the first with `boxctl approve` and shows the file,
# and denies the second with `boxctl deny --reason "not now"` and shows the model's answer;
# shows the sessions' logs, `boxctl status` (its kv line: the sessions' KV caches kept in
# files between their turns, docs/kv.md) and what they cost (`boxctl usage`); then stops boxd
# with SIGTERM (it stops its children in reverse order) and checks every child is gone.
# The first run takes minutes (it builds llama-server and downloads the model, with progress);
# later runs take seconds. Everything goes under .dev/demo; nothing leaves loopback (the model
# server listens on a Unix socket).
#
# BOXMAKER_MODEL=fake uses fakellama (the scripted double) instead of a real model;
# BOXMAKER_BIN_DIR=DIR uses binaries already built there instead of building;
# BOXMAKER_DEV_DIR=DIR keeps the layout there instead of .dev/demo;
# BOXMAKER_MATRIX=1 adds a Matrix step: Synapse on loopback (installed from PyPI and cached on
# the first run), chatd as the box's channel, and a question the owner asks in a room
# (scripts/lib/demo-matrix.sh, docs/chat.md).
set -euo pipefail
cd "$(dirname "$0")/.."

mkdir -p "${BOXMAKER_DEV_DIR:-$PWD/.dev/demo}"
dev=$(cd "${BOXMAKER_DEV_DIR:-$PWD/.dev/demo}" && pwd)
model="${BOXMAKER_MODEL:-qwen}"
bin="${BOXMAKER_BIN_DIR:-}"
mkdir -p "$dev/files" "$dev/work" "$dev/notes"
# Sessions' KV caches between their turns (docs/kv.md): loopd's [kv] dir, <state_dir>/kv, is
# the model server's --slot-save-path, which must exist before the server starts; the files
# hold what the sessions said, so the directory is this user's alone.
kv="$dev/state/kv"
mkdir -p "$kv"
chmod 0700 "$kv"
# Where the note tasks save their notes (write_file's grant root); a note left by an earlier
# run would make write_file refuse to overwrite it.
notes="$dev/notes"
rm -f "$notes/note-1.txt" "$notes/note-2.txt"
case "$notes" in
*'"'* | *'\'*)
    echo "demo.sh: the dev directory $dev holds a quote or a backslash; choose another" >&2
    exit 1
    ;;
esac
# Whether the user nobody may enter every directory above $1, by their "others" mode bits.
others_may_enter() {
    local dir=$1
    while [ "$dir" != / ]; do
        dir=$(dirname "$dir")
        [ $((0$(stat -c %a "$dir") & 1)) -eq 1 ] || return 1
    done
}
# The exec tool's work directory. Run as root, the sandbox runs as nobody, which must reach the
# directories it binds (docs/exec.md): a dev directory beneath one only its owner may enter
# (a checkout in root's 0700 home) gets its work directory in /tmp instead, removed at the end.
work="$dev/work"
tmp_work=
if [ "$(id -u)" = 0 ] && ! others_may_enter "$work"; then
    tmp_work=$(mktemp -d /tmp/boxmaker-demo-work.XXXXXX)
    chmod 0755 "$tmp_work"
    work="$tmp_work"
fi
# What the exec task counts: five lines in two files, which the sandbox's user may read.
printf 'buy apples\ncall the plumber\nwater the plants\n' >"$work/todo.txt"
printf 'the demo writes these files\nexec counts their lines\n' >"$work/notes.txt"
chmod 0644 "$work/todo.txt" "$work/notes.txt"
# Sockets go in $dev/run, unless that path is too long for a Unix socket address (107 bytes).
run="$dev/run"
tmp_run=
if [ "${#run}" -gt 80 ]; then
    tmp_run=$(mktemp -d "${TMPDIR:-/tmp}/boxmaker-demo.XXXXXX")
    run="$tmp_run"
fi
mkdir -p "$run"
# The model server's socket is its whole API: its slot API saves, restores and erases the
# sessions' KV files, and its answers' cache_n tell what a slot holds (docs/security.md,
# "llama-server's slot API"). It has no key here, so the directory is this user's alone:
# llama-server makes its socket with the umask's mode, which another user may reach.
chmod 0700 "$run"
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
# shellcheck source=lib/demo-matrix.sh
. ./scripts/lib/demo-matrix.sh
cleanup() {
    matrix_stop
    stop_boxd
    [ -z "$tmp_run" ] || rm -rf "$tmp_run"
    [ -z "$tmp_work" ] || rm -rf "$tmp_work"
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
rw_paths = ["$work"]
# Every write_file call waits for the owner's answer (docs/approvals.md); no answer denies it.
[[grants]]
tool = "write_file"
paths = ["$notes"]
approve = "always"
TOML
cat >"$dev/loopd.toml" <<TOML
socket = "$run/loopd.sock"
state_dir = "$dev/state"
[llama]
url = "unix:$run/llama.sock"
[broker]
socket = "$run/brokerd.sock"
# The demo's model fails through call_tool: the granted file tools go in the tools array.
core_tools = ["read_file", "list_dir", "exec", "write_file"]
[baseline]
system = "$PWD/config/system.md"
TOML

# The model server listens on a Unix socket (no port to pick or collide with, nothing on the
# network). It accepts connections while the model is still loading, so boxd counts it ready
# then; loopd itself waits for /health (llama.health_wait_ms) and only then opens its socket,
# which is loopd's readiness, hence loopd's long start_timeout_ms.
if [ "$model" = fake ]; then
    # The script names the notes' paths (@NOTES_DIR@), which live under this run's dev directory.
    pinned="$dev/demo-script.toml"
    script=$(<config/demo-script.toml)
    printf '%s\n' "${script//@NOTES_DIR@/"$notes"}" >"$pinned"
    model_child=$(cat <<TOML
name = "fakellama"
command = "$bin/fakellama"
args = ["--listen", "$run/llama.sock", "--script", "$pinned", "--delay-ms", "10",
        "--slot-save-path", "$kv"]
TOML
)
else
    pinned="$PWD/config/templates/qwen2.5-tools.jinja"
    model_child=$(cat <<TOML
name = "llama-server"
command = "$LLAMA_SERVER"
args = ["-m", "$QWEN_GGUF", "-c", "12288", "--parallel", "3", "--temp", "0", "--seed", "7",
        "--no-webui", "--chat-template-file", "$pinned", "--host", "$run/llama.sock",
        "--slot-save-path", "$kv"]
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
env = { RUST_LOG = "info", GLIBC_TUNABLES = "glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=131072" }
config_file = "$dev/loopd.toml"
config_sha256 = "$(sha256 "$dev/loopd.toml")"
ready = { socket = "$run/loopd.sock" }
# loopd opens its socket once the model is loaded: seconds here, minutes for a big model.
start_timeout_ms = 300000
# Started beside brokerd: loopd waits for brokerd's answer itself.
with_previous = true
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

# Notes that wait for the owner: write_file asks first (approve = "always"), so each task runs
# in the background while the demo answers it as the owner would, from another boxctl.
# Prints the id of the call of session $1 that waits for approval, once there is one: bounded
# (120 s), and given up early when the task (pid $2) ended without asking.
waiting_approval() {
    local id=
    for _ in $(seq 1 1200); do
        id=$("$bin/boxctl" approvals --json 2>/dev/null |
            grep -oE "\"id\":\"[A-Za-z0-9._-]+\",\"session\":\"$1\"" |
            head -n 1 | cut -d'"' -f4) || true
        if [ -n "$id" ]; then
            echo "$id"
            return 0
        fi
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
# Waits, bounded (180 s), for the background task $1 and prints what it printed (file $2);
# its exit status, or 1 when it did not end in time.
finish_task() {
    local rc=0
    for _ in $(seq 1 1800); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.1
    done
    if kill -0 "$1" 2>/dev/null; then
        echo "demo.sh: the task did not end within 180 s after the answer" >&2
        kill -TERM "$1" 2>/dev/null || true
        rc=1
    fi
    wait "$1" || rc=$?
    echo "--- what that boxctl task printed:"
    cat "$2"
    return "$rc"
}
# Runs note task $2 in session $1 in the background and answers its approval with boxctl
# command $3... (approve or deny, with its flags); fails loudly when no call waits.
note_task() {
    local shown_session=$1 text=$2 out="$dev/$1.out" pid id rc=0
    shift 2
    echo
    echo "\$ boxctl task --session $shown_session $text >$out &"
    "$bin/boxctl" task --session "$shown_session" "$text" >"$out" 2>&1 </dev/null &
    pid=$!
    if ! id=$(waiting_approval "$shown_session" "$pid"); then
        echo "demo.sh: no call of $shown_session waited for approval (the task ended without" \
            "asking, or 120 s passed); the task printed:" >&2
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        cat "$out" >&2
        return 1
    fi
    echo "\$ boxctl approvals"
    "$bin/boxctl" approvals || rc=$?
    echo "\$ boxctl $1 $id${2+$(printf ' %q' "${@:2}")}"
    "$bin/boxctl" "$1" "$id" "${@:2}" || rc=$?
    finish_task "$pid" "$out" || rc=$?
    return "$rc"
}
note1="$notes/note-1.txt"
note_task "$session-note1" \
    "Use the write_file tool to save the text 'buy oat milk' to the file $note1 and nothing else." \
    approve || status=$?
echo "\$ cat $note1"
if [ -f "$note1" ]; then
    cat "$note1"
    [ -z "$(tail -c 1 "$note1")" ] || echo
else
    echo "demo.sh: $note1 was not written after the approval" >&2
    status=1
fi
note2="$notes/note-2.txt"
note_task "$session-note2" \
    "Use the write_file tool to save the text 'call the bank' to the file $note2 and nothing else." \
    deny --reason "not now" || status=$?
if [ -e "$note2" ]; then
    echo "demo.sh: $note2 was written although the owner denied it" >&2
    status=1
fi

for shown in "$session" "$session-wc" "$session-note1" "$session-note2"; do
    echo
    echo "\$ boxctl show $shown"
    "$bin/boxctl" show "$shown" || status=$?
done
if [ "${BOXMAKER_MATRIX:-}" = 1 ]; then
    matrix_step
fi
# How the box is. Its kv line: the sessions took turns on one main slot, and each one's cache
# went to a KV file when the next took the slot (docs/kv.md); none came back, so none restored.
echo
echo "\$ boxctl status"
"$bin/boxctl" status || status=$?
# What the demo cost, from loopd's usage accounts (docs/budgets.md): today, every session.
echo
echo "\$ boxctl usage"
"$bin/boxctl" usage || status=$?
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
