#!/usr/bin/env bash
# The furthest end-to-end path that works today: builds boxmaker, starts fakellama (the
# llama-server double) on loopback, and holds a two-turn streamed conversation with it,
# showing the answer as it streams and how much of each prompt the slot's cache reused.
# Everything runs under .dev/ in the checkout; nothing outside loopback is reached.
set -euo pipefail
cd "$(dirname "$0")/.."

dev=.dev/demo
mkdir -p "$dev"
echo "==> building (the first run compiles the workspace: a few minutes on 2 cores)"
cargo build --locked -q -p fakellama --bin fakellama --example converse

echo "==> starting fakellama on 127.0.0.1 (a free port)"
./target/debug/fakellama --listen 127.0.0.1:0 --script config/demo-script.toml \
    --delay-ms 15 >"$dev/fakellama.out" 2>"$dev/fakellama.log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT

# Wait (bounded) for the line that names the bound address.
addr=""
for _ in $(seq 1 100); do
    addr=$(sed -n 's/^fakellama listening on //p' "$dev/fakellama.out")
    [ -n "$addr" ] && break
    kill -0 "$pid" 2>/dev/null || { cat "$dev/fakellama.log" >&2; exit 1; }
    sleep 0.1
done
[ -n "$addr" ] || { echo "demo.sh: fakellama did not start; see $dev/fakellama.log" >&2; exit 1; }

echo "==> talking to fakellama at http://$addr"
./target/debug/examples/converse "http://$addr" "Hello! Who are you?" "And what can you do?"
