#!/usr/bin/env bash
# Parses (nix-instantiate --parse) and lints (deadnix) the .nix files given as arguments, less
# the vendored nixpkgs lib (not our code; tests/nix/nixpkgs-lib/SHA256SUMS pins it instead).
# Shared by scripts/nix-checks.sh and the flake's checks.offline, which runs it in the Nix build
# sandbox. Needs nix-instantiate and deadnix on PATH.
set -euo pipefail

# nix-instantiate opens its state directory (the store database) even to parse a file, and the
# build sandbox has no writable /nix/var/nix: give it a fresh one under $TMPDIR.
NIX_STATE_DIR=$(mktemp -d "${TMPDIR:-/tmp}/nix-state.XXXXXX")
export NIX_STATE_DIR
trap 'rm -rf "$NIX_STATE_DIR"' EXIT

files=()
for f in "$@"; do
    case "${f#./}" in
        tests/nix/nixpkgs-lib/*) ;;
        *) files+=("$f") ;;
    esac
done
[ "${#files[@]}" -gt 0 ] || { echo "offline-check: no .nix files given" >&2; exit 1; }

echo "offline-check: parse ${#files[@]} files"
for f in "${files[@]}"; do
    nix-instantiate --parse "$f" >/dev/null
done
echo "offline-check: deadnix"
deadnix --fail "${files[@]}"
