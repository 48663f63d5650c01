# Sourced by the scripts: a long build that shows it is alive.
#
# with_progress LOG WHAT COMMAND...  runs COMMAND with its output appended to LOG, and shows
# the build's own percentage (the last `[ NN%]` cmake wrote to LOG): on a terminal one line on
# stderr, updated in place every PROGRESS_TICK_S seconds; otherwise (CI, a pipe) a line every
# PROGRESS_EVERY_S seconds. Returns COMMAND's exit status.
PROGRESS_TICK_S=${PROGRESS_TICK_S:-1}
PROGRESS_EVERY_S=${PROGRESS_EVERY_S:-30}

# The last `[ NN%]` in LOG, or `?` before the first.
progress_percent() {
    local pct
    pct=$(grep -o '^\[ *[0-9]*%\]' "$1" 2>/dev/null | tail -n 1 | tr -dc '0-9')
    printf '%s' "${pct:-?}"
}

with_progress() {
    local log=$1 what=$2 pid status started now last_line=0
    shift 2
    "$@" >>"$log" 2>&1 &
    pid=$!
    started=$(date +%s)
    while kill -0 "$pid" 2>/dev/null; do
        now=$(date +%s)
        if [ -t 2 ]; then
            printf '\r==> %s: %s%% (%ss)   ' "$what" "$(progress_percent "$log")" \
                "$((now - started))" >&2
        elif [ $((now - last_line)) -ge "$PROGRESS_EVERY_S" ]; then
            printf '==> %s: %s%% after %ss\n' "$what" "$(progress_percent "$log")" \
                "$((now - started))" >&2
            last_line=$now
        fi
        sleep "$PROGRESS_TICK_S"
    done
    wait "$pid"
    status=$?
    [ -t 2 ] && printf '\n' >&2
    return "$status"
}
