#!/usr/bin/env bash
# Offline Nix checks (no nixpkgs needed): parses every .nix file and lints them with deadnix
# (tests/nix/offline-check.sh, also the flake's checks.offline), evaluates nixos-module/ with
# nixpkgs' real lib, vendored in tests/nix/nixpkgs-lib (asserting on the unit and the rendered
# settings, and that bad settings fail with their message), then runs the module's own config
# build script (the three --check-config calls and the sha256 pins) against the debug build, and
# checks the VM test as far as it goes offline (tests/nix/vm-check.sh).
# Needs: nix-instantiate (Debian's nix-bin, installed here when missing and run as root),
# cargo (for deadnix, cached), and `cargo build --workspace --bins` done before.
# What needs a real Nix with nixpkgs (nix flake check, the VM test): docs/operations.md.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v nix-instantiate >/dev/null 2>&1; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
        echo "nix-checks: installing Debian's nix-bin" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q nix-bin >/dev/null \
            || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nix-bin >/dev/null; }
    else
        echo "nix-checks: nix-instantiate is missing: install Nix (Debian: apt-get install nix-bin, as root)" >&2
        exit 2
    fi
fi

bin="${XDG_CACHE_HOME:-$HOME/.cache}/boxmaker/cargo-deadnix"
if [ ! -x "$bin/bin/deadnix" ]; then
    echo "nix-checks: building deadnix from crates.io (once, cached in $bin)" >&2
    CARGO_TARGET_DIR="$bin/target" cargo install --quiet --locked deadnix --root "$bin"
    rm -rf "$bin/target"
fi

echo "nix-checks: the vendored nixpkgs lib is the pinned one"
(cd tests/nix/nixpkgs-lib && sha256sum --quiet -c SHA256SUMS) \
    || { echo "nix-checks: tests/nix/nixpkgs-lib differs from its SHA256SUMS (see its README)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.nix')
# The flake's checks.offline runs the same script in the build sandbox, where the default state
# directory is not writable: an unusable NIX_STATE_DIR here shows the script brings its own.
mkdir -p "$work/tmp"
PATH="$bin/bin:$PATH" TMPDIR="$work/tmp" NIX_STATE_DIR=/proc/boxmaker-no-nix-state \
    bash tests/nix/offline-check.sh "${files[@]}"
grep -qF 'bash tests/nix/offline-check.sh' flake.nix \
    || { echo "nix-checks: flake.nix's checks.offline does not run tests/nix/offline-check.sh" >&2; exit 1; }

# shellcheck source=lib/bin-dir.sh
. ./scripts/lib/bin-dir.sh
bins=$(cargo_bin_dir)
for b in loopd brokerd boxd boxctl chatd; do
    [ -x "$bins/$b" ] || { echo "nix-checks: $bins/$b missing: cargo build --workspace --bins" >&2; exit 2; }
done
mkdir -p "$work/pkg/bin"
for b in loopd brokerd boxd boxctl chatd; do ln -s "$bins/$b" "$work/pkg/bin/$b"; done

echo "nix-checks: evaluate nixos-module with nixpkgs' lib (tests/nix/eval-module.nix)"
# --read-write-mode: the stand-in writes the rendered TOML into /nix/store (builtins.toFile).
nix-instantiate --eval --strict --json --read-write-mode tests/nix/eval-module.nix \
    --argstr binDir "$work/pkg" >"$work/eval.json"

echo "nix-checks: the module as an owner uses it: a catalogue model, boxd's settings, the NixOS snippets of README.md and docs/approvals.md (tests/nix/eval-owner.nix)"
nix-instantiate --eval --strict --json --read-write-mode tests/nix/eval-owner.nix \
    --argstr binDir "$work/pkg" >"$work/owner.json"

echo "nix-checks: package.nix: the real binaries, completions, man pages, meta (tests/nix/eval-package.nix)"
nix-instantiate --eval --strict --json tests/nix/eval-package.nix >"$work/package.json"

# Each case line: case|fail or warn|a piece of the message it must print on stderr; FILE holds it.
check_cases() {
    local file=$1 name expect message rc
    while IFS='|' read -r name expect message; do
        rc=0
        nix-instantiate --eval --strict --json --read-write-mode "$file" \
            --argstr binDir "$work/pkg" --argstr case "$name" >/dev/null 2>"$work/case.err" || rc=$?
        if { [ "$expect" = fail ] && [ "$rc" = 0 ]; } || { [ "$expect" = warn ] && [ "$rc" != 0 ]; } \
            || ! grep -qF -- "$message" "$work/case.err"; then
            echo "nix-checks: case $name of $file: wanted to $expect with \"$message\", got exit $rc and:" >&2
            cat "$work/case.err" >&2
            exit 1
        fi
    done
}

echo "nix-checks: evaluations that must fail, with their messages (tests/nix/eval-fail.nix)"
nix-instantiate --eval --strict --json --read-write-mode tests/nix/eval-fail.nix --argstr binDir "$work/pkg" -A table \
    | python3 -c 'import json, sys; print("\n".join(json.load(sys.stdin)))' >"$work/fail-cases"
[ -s "$work/fail-cases" ] || { echo "nix-checks: tests/nix/eval-fail.nix lists no case" >&2; exit 1; }
check_cases tests/nix/eval-fail.nix <"$work/fail-cases"

echo "nix-checks: evaluations that must fail or warn, with their messages (tests/nix/eval-case.nix)"
check_cases tests/nix/eval-case.nix <<'CASES'
relative-model|fail|services.boxmaker.model' is not of type `name of a model of the catalogue
port-out-of-range|fail|services.boxmaker.llama.port' is not of type `16 bit unsigned integer
null-in-settings|fail|services.boxmaker.loopd.settings.loop.max_steps' is not of type `TOML value'
no-overlay|fail|services.boxmaker.package is not set: pkgs has no boxmaker
state-dir-outside-var-lib|fail|services.boxmaker.stateDir must be a directory under /var/lib/, got "/srv/boxmaker"
state-dir-dot-dot|fail|services.boxmaker.stateDir must be a directory under /var/lib/, got "/var/lib/../etc/boxmaker"
state-dir-var-lib-itself|fail|services.boxmaker.stateDir must be a directory under /var/lib/, got "/var/lib"
gpu-layers-without-gpu|warn|services.boxmaker.llama.extraFlags asks for GPU layers (-ngl 99) but llama.gpu is false
schedule-cron-and-every|fail|services.boxmaker.schedules: "morning" must set exactly one of cron and every; it sets both.
schedule-no-task|fail|services.boxmaker.schedules: "morning" must set exactly one of task and task_file; it sets neither.
schedule-task-and-file|fail|services.boxmaker.schedules: "morning" must set exactly one of task and task_file; it sets both.
schedule-names-twice|fail|services.boxmaker.schedules: each name must be unique; used more than once: morning.
schedule-named-heartbeat|fail|services.boxmaker.schedules: "heartbeat": the name heartbeat is the heartbeat's own
schedule-bad-missed|fail|services.boxmaker.schedules."[definition 1-entry 1]".missed' is not of type `null or one of "skip", "run_once"'
schedule-bad-name|fail|is not of type `string matching the pattern [A-Za-z0-9._-]{1,32}'
schedule-with-config-file|fail|services.boxmaker.schedules cannot go into services.boxmaker.loopd.configFile
metrics-port-out-of-range|fail|services.boxmaker.metrics.port' is not of type `16 bit unsigned integer
metrics-with-config-file|fail|services.boxmaker.metrics cannot go into services.boxmaker.loopd.configFile: write `[metrics] listen = "127.0.0.1:9464"` into that file
web-port-out-of-range|fail|services.boxmaker.web.port' is not of type `16 bit unsigned integer
web-with-config-file|fail|services.boxmaker.web cannot go into services.boxmaker.loopd.configFile: write `[web]` with `listen = "127.0.0.1:8740"` into that file
web-origin-with-config-file|fail|write `[web]` with `listen = "127.0.0.1:8740"` and `origin = "https://box.example.com"` into that file
web-origin-not-a-string|fail|services.boxmaker.web.origin' is not of type `null or string'
secret-nix-path|fail|services.boxmaker.brokerd.secrets.github.file is a Nix path (/
secret-nix-path|fail|Nix copies a path into the Nix store, which every user of the machine can read
secret-in-store|fail|services.boxmaker.brokerd.secrets.github.file is in the Nix store (/nix/store/0000000000000000000000000000000a-github), which every user of the machine can read
secret-relative|fail|services.boxmaker.brokerd.secrets.github.file must be an absolute path, got "secrets/github".
secret-bad-name|fail|services.boxmaker.brokerd.secrets.GitHub: a secret's name is a-z, 0-9 and _ only
secret-file-with-config-file|fail|services.boxmaker.brokerd.secrets.wiki.loadCredential = false cannot go into services.boxmaker.brokerd.configFile
rpc-servers-comma|fail|services.boxmaker.llama.rpcServers: each entry is one "host:port" (no commas or spaces), got ["10.100.0.2:50052,10.100.0.3:50052"]
rpc-servers-no-port|fail|services.boxmaker.llama.rpcServers: each entry is one "host:port"
rpc-servers-without-rpc-build|warn|services.boxmaker.llama.rpcServers is set but llama.package is built without llama.cpp's RPC backend
rpc-worker-exposed|warn|services.boxmaker.rpcWorker.host = "0.0.0.0" is not a loopback address: the llama.cpp RPC worker has no authentication and no encryption
rpc-worker-firewall-on-loopback|warn|services.boxmaker.rpcWorker.openFirewall opens port 50052, but the worker listens on 127.0.0.1 (loopback)
rpc-worker-without-rpc-build|warn|services.boxmaker.rpcWorker.package is built without llama.cpp's RPC backend (its cmakeFlags lack -DGGML_RPC=ON), so it has no llama-rpc-server
rpc-worker-port-out-of-range|fail|services.boxmaker.rpcWorker.port' is not of type `16 bit unsigned integer
llama-tcp-without-key|fail|services.boxmaker.llama.host = "127.0.0.1" serves llama-server over TCP, which every local user reaches, without services.boxmaker.llama.apiKeyFile
llama-key-nix-path|fail|services.boxmaker.llama.apiKeyFile is a Nix path (/
llama-key-in-store|fail|services.boxmaker.llama.apiKeyFile is in the Nix store (/nix/store/0000000000000000000000000000000b-llama-key), which every user of the machine can read
llama-key-relative|fail|services.boxmaker.llama.apiKeyFile must be an absolute path, got "keys/llama".
llama-host-two|fail|services.boxmaker.llama.host must be one IP address or host name, got "127.0.0.1,10.0.0.5"
llama-host-socket|fail|services.boxmaker.llama.host must be one IP address or host name, got "/tmp/llama.sock"
llama-tcp-in-the-clear|fail|services.boxmaker.llama.host = "10.0.0.5" is not a loopback address, and llama-server's HTTP is not encrypted: the API key and every prompt
llama-tcp-wildcard-in-the-clear|fail|services.boxmaker.llama.host = "0.0.0.0" is not a loopback address, and llama-server's HTTP is not encrypted
kv-dir-elsewhere|fail|services.boxmaker.loopd.settings.kv.dir must be left unset or be "/var/lib/boxmaker/loopd/kv", got "/srv/kv"
CASES

echo "nix-checks: package.nix's postInstall against the debug build (templates, completions, man pages)"
mkdir -p "$work/install/src" "$work/install/out/bin"
ln -s "$PWD/config" "$work/install/src/config"
ln -s "$bins/boxctl" "$work/install/out/bin/boxctl"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["postInstall"])' "$work/package.json" >"$work/install/post.sh"
# installShellFiles' two hooks, as far as postInstall uses them (each file is checked below).
(
    cd "$work/install/src"
    out="$work/install/out"
    installShellCompletion() {
        local cmd= shell
        while [ $# -gt 0 ]; do
            case $1 in
                --cmd) cmd=$2; shift 2 ;;
                --bash|--zsh|--fish) shell=${1#--}
                    mkdir -p "$out/completions"; cat "$2" >"$out/completions/$cmd.$shell"; shift 2 ;;
                *) echo "installShellCompletion: unexpected $1" >&2; exit 1 ;;
            esac
        done
    }
    installManPage() { mkdir -p "$out/share/man/man1"; cp "$@" "$out/share/man/man1/"; }
    set -e
    # shellcheck disable=SC1091
    . "$work/install/post.sh"
) >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; exit 1; }
for f in share/boxmaker/templates/qwen2.5-tools.jinja share/man/man1/boxctl.1 completions/boxctl.bash completions/boxctl.zsh completions/boxctl.fish; do
    [ -s "$work/install/out/$f" ] || { echo "nix-checks: package.nix's postInstall did not make $f" >&2; exit 1; }
done

echo "nix-checks: the nix blocks of docs/operations.md, docs/secrets.md, docs/scale-out.md, docs/web.md and docs/approvals.md parse"
# Each block is an expression (the flake) or a module's attribute definitions (a snippet to put
# into the system's configuration): it must parse as one or, wrapped into a module (which gives
# it `config`, `lib` and `pkgs`), as the other.
python3 - "$work/docs" <<'PY'
import os, re, sys
out = sys.argv[1]
os.makedirs(out)
for doc in ("operations", "secrets", "scale-out", "web", "approvals"):
    text = open("docs/%s.md" % doc).read()
    for n, block in enumerate(re.findall(r"^```nix\n(.*?)^```", text, re.S | re.M)):
        open(os.path.join(out, "block-%02d--%s.nix" % (n, doc)), "w").write(block)
PY
for block in "$work"/docs/block-*.nix; do
    nix-instantiate --parse "$block" >/dev/null 2>"$work/parse.err" && continue
    { printf '{ config, lib, pkgs, ... }: {\n'; cat "$block"; printf '}\n'; } >"$block.module"
    nix-instantiate --parse "$block.module" >/dev/null 2>>"$work/parse.err" && continue
    echo "nix-checks: a nix block of docs/$(basename "$block" .nix | sed 's/^block-[0-9]*--//').md does not parse:" >&2
    cat "$block" "$work/parse.err" >&2
    exit 1
done

echo "nix-checks: run the module's config build (--check-config of loopd, brokerd, boxd; pins)"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configScript"])' "$work/eval.json" >"$work/build.sh"
out="$work/out" bash "$work/build.sh" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
# boxd's own settings ([log] level, [metrics] listen, [restart]) pass boxd --check-config too.
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configScript"])' "$work/owner.json" >"$work/owner.sh"
out="$work/owner-out" bash "$work/owner.sh" >"$work/owner.log" 2>&1 || { cat "$work/owner.log" >&2; exit 1; }
# docs/approvals.md's NixOS snippet (a write_file grant under approve = "always") passes them too.
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["approvalsScript"])' "$work/owner.json" >"$work/approvals.sh"
out="$work/approvals-out" bash "$work/approvals.sh" >"$work/approvals.log" 2>&1 || { cat "$work/approvals.log" >&2; exit 1; }
# chatd's config, rendered from services.boxmaker.chat.matrix, passes chatd --check-config.
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["chatScript"])' "$work/eval.json" >"$work/chat.sh"
out="$work/chat-out" bash "$work/chat.sh" >"$work/chat.log" 2>&1 || { cat "$work/chat.log" >&2; exit 1; }
for name in loopd brokerd; do
    file=$(grep -o "/nix/store/[a-z0-9]*-$name.toml" "$work/out/boxd.toml" | head -n1)
    want=$(sha256sum "$file" | cut -d' ' -f1)
    grep -q "config_sha256 = \"$want\"" "$work/out/boxd.toml" \
        || { echo "nix-checks: $name's pin in boxd.toml is not $want" >&2; exit 1; }
done

echo "nix-checks: the VM test offline: its node, its script, its llama-server (tests/nix/vm-check.sh)"
bash tests/nix/vm-check.sh "$bins" "$work/vm"
echo "nix-checks: ok"
