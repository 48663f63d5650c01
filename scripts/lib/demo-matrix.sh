# Sourced by scripts/demo.sh: its optional Matrix step (BOXMAKER_MATRIX=1). Starts Synapse on
# loopback (from the cache: scripts/fetch-parts.sh synapse) with an owner and a bot account,
# starts chatd (docs/chat.md) as the box's Matrix channel beside boxd, and, as the owner,
# opens a room with the box, asks it something and prints its answer; then stops both.
# chatd runs beside boxd, as the NixOS module runs it beside boxmaker's unit: it is a client
# of loopd's socket, with no socket or ready check of its own for boxd to wait on.
# Uses demo.sh's $dev, $run, $bin and $status.
# shellcheck shell=bash

matrix_chatd_pid=
matrix_dir=

# matrix_stop: stops chatd and Synapse, if they run.
matrix_stop() {
    if [ -n "$matrix_chatd_pid" ]; then
        kill -TERM "$matrix_chatd_pid" 2>/dev/null || true
        wait "$matrix_chatd_pid" 2>/dev/null || true
        matrix_chatd_pid=
    fi
    local pid_file="$matrix_dir/synapse/synapse.pid"
    if [ -n "$matrix_dir" ] && [ -f "$pid_file" ]; then
        kill -TERM "$(cat "$pid_file")" 2>/dev/null || true
        rm -f "$pid_file"
    fi
}

# matrix_step: the whole step; a failure sets status=1 and says why.
matrix_step() {
    echo
    echo "==> Matrix: Synapse on loopback, chatd as the box's channel, the owner asks in a room"
    eval "$(./scripts/fetch-parts.sh --print-paths synapse)"
    matrix_dir="$dev/matrix"
    # Each run starts a new homeserver: accounts and rooms of an earlier run are not reused.
    rm -rf "$matrix_dir"
    mkdir -p "$matrix_dir/chatd"
    chmod 0700 "$matrix_dir" "$matrix_dir/chatd"
    local secret url
    secret=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
    if ! url=$("$SYNAPSE_PYTHON" scripts/lib/matrix_demo.py homeserver "$matrix_dir/synapse" \
        "$secret"); then
        echo "demo.sh: Synapse did not start; see $matrix_dir/synapse" >&2
        status=1
        return
    fi
    (umask 077 && printf '%s' "$secret" >"$matrix_dir/box.password")
    cat >"$matrix_dir/chatd.toml" <<TOML
# Written by scripts/demo.sh: chatd on the demo's loopd and homeserver (see config/chatd.toml).
loopd_socket = "$run/loopd.sock"
state_dir = "$matrix_dir/chatd/state"
[matrix]
homeserver = "$url"
user = "@box:localhost"
password_file = "$matrix_dir/box.password"
owners = ["@owner:localhost"]
sync_timeout_ms = 1000
TOML
    echo "\$ chatd --config $matrix_dir/chatd.toml   (its log: $matrix_dir/chatd.log)"
    "$bin/chatd" --config "$matrix_dir/chatd.toml" 2>"$matrix_dir/chatd.log" &
    matrix_chatd_pid=$!
    if ! "$SYNAPSE_PYTHON" scripts/lib/matrix_demo.py ask "$url" "$secret" \
        "What is 2 + 3? Answer with the number only."; then
        echo "demo.sh: the Matrix step failed; chatd's log ($matrix_dir/chatd.log) ends:" >&2
        tail -n 20 "$matrix_dir/chatd.log" >&2 || true
        status=1
    fi
    matrix_stop
}
