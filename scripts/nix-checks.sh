#!/usr/bin/env bash
# Offline Nix checks (no nixpkgs needed): parses every .nix file, lints them with deadnix,
# evaluates nixos-module/ with the stand-in lib of tests/nix/ (asserting on the unit and the
# rendered settings), then runs the module's own config build script (the three
# --check-config calls and the sha256 pins) against the debug build.
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

mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.nix')
[ "${#files[@]}" -gt 0 ] || { echo "nix-checks: no .nix files" >&2; exit 1; }

echo "nix-checks: parse ${#files[@]} files"
for f in "${files[@]}"; do
    nix-instantiate --parse "$f" >/dev/null
done

bin="${XDG_CACHE_HOME:-$HOME/.cache}/boxmaker/cargo-deadnix"
if [ ! -x "$bin/bin/deadnix" ]; then
    echo "nix-checks: building deadnix from crates.io (once, cached in $bin)" >&2
    CARGO_TARGET_DIR="$bin/target" cargo install --quiet --locked deadnix --root "$bin"
    rm -rf "$bin/target"
fi
echo "nix-checks: deadnix"
"$bin/bin/deadnix" --fail "${files[@]}"

# shellcheck source=lib/bin-dir.sh
. ./scripts/lib/bin-dir.sh
bins=$(cargo_bin_dir)
for b in loopd brokerd boxd boxctl; do
    [ -x "$bins/$b" ] || { echo "nix-checks: $bins/$b missing: cargo build --workspace --bins" >&2; exit 2; }
done
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/pkg/bin"
for b in loopd brokerd boxd boxctl; do ln -s "$bins/$b" "$work/pkg/bin/$b"; done

echo "nix-checks: evaluate nixos-module with tests/nix/stand-in.nix"
# --read-write-mode: the stand-in writes the rendered TOML into /nix/store (builtins.toFile).
nix-instantiate --eval --strict --json --read-write-mode tests/nix/eval-module.nix \
    --argstr binDir "$work/pkg" >"$work/eval.json"

echo "nix-checks: run the module's config build (--check-config of loopd, brokerd, boxd; pins)"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configScript"])' "$work/eval.json" >"$work/build.sh"
out="$work/out" bash "$work/build.sh" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }
for name in loopd brokerd; do
    file=$(grep -o "/nix/store/[a-z0-9]*-$name.toml" "$work/out/boxd.toml" | head -n1)
    want=$(sha256sum "$file" | cut -d' ' -f1)
    grep -q "config_sha256 = \"$want\"" "$work/out/boxd.toml" \
        || { echo "nix-checks: $name's pin in boxd.toml is not $want" >&2; exit 1; }
done
echo "nix-checks: ok"
