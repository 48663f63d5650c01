# Sourced by scripts/fetch-parts.sh: its llama-server part, llama-server and llama.cpp's RPC
# worker (rpc-server) built together from the llama.cpp sources vendored in the pinned
# llama-cpp-python sdist (docs/real-model.md, docs/scale-out.md). Uses fetch-parts.sh's pins
# (LLAMA_CPP_PYTHON_*, LLAMA_CMAKE_FLAGS, LLAMA_BUILD_KEY), paths (LLAMA_DIR, LLAMA_SERVER,
# RPC_SERVER, LOGS), helpers (step, die, die_with_log, need, pip_fetch, sha256_of,
# with_progress) and state (TEMPS); its messages name fetch-parts.sh ($0), where the pins are.
# shellcheck shell=bash

# server_version BINARY: prints the binary's version lines, or fails if it does not run.
server_version() {
    local out
    out=$("$1" --version 2>&1) || return 1
    grep -q '^version:' <<<"$out" || return 1
    grep -E '^(version|built with):' <<<"$out" | paste -sd' ' -
}

# rpc_server_runs BINARY: whether the RPC worker runs; it has no --version, and its --help
# (on stderr, exit 0) lists the flags the NixOS module and the tests pass.
rpc_server_runs() {
    local out
    out=$("$1" --help 2>&1) || return 1
    grep -q -- '--port' <<<"$out" && grep -q -- '--host' <<<"$out"
}

# rpc_target SRC: the CMake target of llama.cpp's RPC worker in this tree (rpc-server in older
# trees, ggml-rpc-server in 0.3.36), read from its CMakeLists.txt rather than assumed.
rpc_target() {
    local file
    for file in "$1/tools/rpc/CMakeLists.txt" "$1/examples/rpc/CMakeLists.txt"; do
        [ -f "$file" ] || continue
        sed -n 's/^ *set( *TARGET \([A-Za-z0-9_-]*\) *)/\1/p' "$file" | head -n 1
        return 0
    done
}

# install_binary BUILT DEST: into place atomically (a temporary name in the same directory,
# then rename), so an interrupted run never leaves half a binary where a later run looks.
install_binary() {
    local built=$1 dest=$2 partial
    mkdir -p "$(dirname "$dest")"
    partial="$(dirname "$dest")/.$(basename "$dest").tmp.$$"
    TEMPS+=("$partial")
    cp -- "$built" "$partial"
    chmod 755 "$partial"
    mv -f -- "$partial" "$dest"
}

# ensure_llama_server: llama-server and rpc-server, one cmake build, one cache directory.
ensure_llama_server() {
    if [ -x "$LLAMA_SERVER" ] && [ -x "$RPC_SERVER" ]; then
        server_version "$LLAMA_SERVER" >/dev/null && rpc_server_runs "$RPC_SERVER" && return 0
        step "cached $LLAMA_DIR does not run; building it again"
    fi

    step "building llama-server and rpc-server from llama-cpp-python $LLAMA_CPP_PYTHON_VERSION" \
        "(first time only, ~15 minutes on 2 cores)"
    need cmake:cmake g++:g++ make:make tar:tar gzip:gzip pip:python3-pip

    local log="$LOGS/llama-server-$LLAMA_CPP_PYTHON_VERSION-$LLAMA_BUILD_KEY.log" tmp sdist
    local digest src rpc
    : >"$log"
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/boxmaker-llama-server.XXXXXX")
    TEMPS+=("$tmp")

    step "downloading the llama-cpp-python $LLAMA_CPP_PYTHON_VERSION sdist from PyPI"
    # --no-binary names only this package: ':all:' would make pip compile cmake itself for
    # the sdist's build-metadata step.
    sdist=$(pip_fetch "$log" "$tmp/download" "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" \
        --no-binary llama-cpp-python)
    digest=$(sha256_of "$sdist")
    [ "$digest" = "$LLAMA_CPP_PYTHON_SDIST_SHA256" ] ||
        die "refusing $(basename "$sdist"): sha256 is $digest," \
            "expected $LLAMA_CPP_PYTHON_SDIST_SHA256 (pinned in $0)"

    step "unpacking vendor/llama.cpp"
    mkdir -p "$tmp/src"
    tar -xzf "$sdist" -C "$tmp/src" >>"$log" 2>&1 || die_with_log "$log" "could not unpack $sdist"
    src="$tmp/src/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION/vendor/llama.cpp"
    [ -f "$src/tools/server/CMakeLists.txt" ] ||
        die "the sdist has no vendor/llama.cpp/tools/server; it cannot build llama-server"
    rpc=$(rpc_target "$src")
    [ -n "$rpc" ] || die "the sdist's llama.cpp has no tools/rpc; it cannot build rpc-server"

    local flags=("${LLAMA_CMAKE_FLAGS[@]}")
    # Older trees build with libcurl by default; newer ones only warn that it is deprecated.
    grep -q 'LLAMA_CURL' "$src/CMakeLists.txt" && flags+=(-DLLAMA_CURL=OFF)

    step "configuring llama.cpp with cmake (portable flags, RPC on; log: $log)"
    cmake -S "$src" -B "$tmp/build" "${flags[@]}" >>"$log" 2>&1 ||
        die_with_log "$log" "cmake could not configure llama.cpp"

    local jobs started elapsed
    jobs=$(nproc 2>/dev/null || echo 2)
    started=$SECONDS
    step "compiling the llama-server and $rpc targets with $jobs jobs (log: $log)"
    with_progress "$log" "compiling llama-server and $rpc" \
        cmake --build "$tmp/build" --target llama-server "$rpc" -j "$jobs" ||
        die_with_log "$log" "building llama-server and $rpc failed"
    elapsed=$((SECONDS - started))

    local built="$tmp/build/bin/llama-server" built_rpc="$tmp/build/bin/$rpc" version
    [ -x "$built" ] || die_with_log "$log" "the build did not produce $built"
    [ -x "$built_rpc" ] || die_with_log "$log" "the build did not produce $built_rpc"
    if ! version=$(server_version "$built"); then
        # The usual cause on x86-64: a CPU without AVX2/FMA/F16C, which ggml enables even
        # with GGML_NATIVE=OFF.
        die "the freshly built llama-server does not run ('llama-server --version' failed);" \
            "does this CPU have AVX2, FMA and F16C?"
    fi
    rpc_server_runs "$built_rpc" ||
        die "the freshly built $rpc does not run ('$rpc --help' did not list --host and --port)"
    # llama-server built without the RPC backend would reject --rpc only when a worker is named.
    "$built" --help 2>&1 | grep -q -- '--rpc' ||
        die "the freshly built llama-server has no --rpc option; was GGML_RPC=ON honoured?"

    # The worker first: a directory whose llama-server exists is taken as done only when the
    # worker is there too (the check at the top wants both).
    install_binary "$built_rpc" "$RPC_SERVER"
    install_binary "$built" "$LLAMA_SERVER"
    step "llama-server and rpc-server ready in $LLAMA_DIR ($version; compiled in" \
        "$((elapsed / 60))m$((elapsed % 60))s)"
}
