# Sourced by scripts/fetch-parts.sh: its synapse part, the Matrix homeserver chatd's end-to-end
# tests start on loopback (SQLite), installed from PyPI into a virtual environment in the cache.
# Uses fetch-parts.sh's pin (SYNAPSE_VERSION), paths (SYNAPSE_DIR, SYNAPSE_PYTHON, LOGS),
# helpers (step, need, die, die_with_log) and state (TEMPS, PIP_OPTS).
# shellcheck shell=bash

# synapse_ok: whether the cached environment runs the pinned Synapse.
synapse_ok() {
    [ -x "$SYNAPSE_PYTHON" ] &&
        [ "$("$SYNAPSE_PYTHON" -c 'import synapse; print(synapse.__version__)' 2>/dev/null)" = \
            "$SYNAPSE_VERSION" ]
}

ensure_synapse() {
    synapse_ok && return 0
    need venv:python3-venv
    local log="$LOGS/synapse.log" tmp
    : >"$log"
    # Built beside its final place and renamed once it works: the environment appears whole
    # or not at all. A moved venv's scripts keep the old path in their first line, so nothing
    # runs them: the tests run `python -m synapse.app.homeserver`, which finds its packages
    # from where the python is.
    mkdir -p "$(dirname "$SYNAPSE_DIR")"
    tmp=$(mktemp -d "$(dirname "$SYNAPSE_DIR")/.synapse.tmp.XXXXXX")
    TEMPS+=("$tmp")
    step "installing Synapse $SYNAPSE_VERSION from PyPI into $SYNAPSE_DIR (~100 MB, a minute)"
    python3 -m venv "$tmp/env" >>"$log" 2>&1 ||
        die_with_log "$log" "python3 -m venv failed (Debian: apt-get install python3-venv)"
    "$tmp/env/bin/python" -m pip install "${PIP_OPTS[@]}" --disable-pip-version-check \
        "matrix-synapse==$SYNAPSE_VERSION" >>"$log" 2>&1 ||
        die_with_log "$log" "pip install matrix-synapse==$SYNAPSE_VERSION failed: is PyPI reachable?"
    "$tmp/env/bin/python" -c 'import synapse.app.homeserver' >>"$log" 2>&1 ||
        die_with_log "$log" "the installed Synapse does not import"
    rm -rf -- "$SYNAPSE_DIR"
    mv -- "$tmp/env" "$SYNAPSE_DIR"
    synapse_ok || die "Synapse moved to $SYNAPSE_DIR does not run; remove it and try again"
    step "Synapse ready: $SYNAPSE_PYTHON"
}
