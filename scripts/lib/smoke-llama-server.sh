#!/usr/bin/env bash
# Smoke check of a real llama-server with one model: starts it on loopback (a free port), waits
# (bounded) for GET /health, saves GET /props, sends one non-streamed chat completion and saves
# the raw answer, prints the answer with its usage and timings, and stops the server. It shows
# that the parts scripts/fetch-parts.sh fetched work together; it asserts nothing about wording.
#
# usage: scripts/lib/smoke-llama-server.sh MODEL.gguf OUTDIR [--tools]
#   LLAMA_SERVER (env) names the binary; default: what scripts/fetch-parts.sh --print-paths says.
#   --tools adds a tools array with one `clock` function and asks for the time.
# Writes OUTDIR/props.json, OUTDIR/chat.json, OUTDIR/request.json and OUTDIR/server.log.
set -euo pipefail

[ $# -ge 2 ] || { sed -n 's/^# \{0,1\}//; /^usage:/,/^Writes/p' "$0" >&2; exit 2; }
model=$1 outdir=$2 tools=${3:-}
mkdir -p "$outdir"
if [ -z "${LLAMA_SERVER:-}" ]; then
    eval "$("$(dirname "$0")/../fetch-parts.sh" --print-paths llama-server)"
fi

# A free port: the kernel picks one; the tiny race until llama-server binds it is acceptable here.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
base="http://127.0.0.1:$port"

"$LLAMA_SERVER" -m "$model" -c 2048 --parallel 2 --port "$port" --host 127.0.0.1 --no-webui \
    >"$outdir/server.log" 2>&1 &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT

# /health answers 503 while the model loads, 200 when ready; give up after 60 s.
ready=0
for _ in $(seq 1 600); do
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "$base/health")" = 200 ]; then
        ready=1
        break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if [ "$ready" -ne 1 ]; then
    echo "smoke: llama-server did not become healthy; last lines of $outdir/server.log:" >&2
    tail -n 20 "$outdir/server.log" >&2
    exit 1
fi

curl -sf "$base/props" >"$outdir/props.json"

if [ "$tools" = --tools ]; then
    cat >"$outdir/request.json" <<'JSON'
{"messages":[{"role":"system","content":"You are a helpful assistant. Use the tools when they help."},
             {"role":"user","content":"What time is it now? Use the clock tool."}],
 "tools":[{"type":"function","function":{"name":"clock","description":"Returns the current time (UTC, ISO 8601).","parameters":{"type":"object","properties":{}}}}],
 "tool_choice":"auto","stream":false,"max_tokens":128,"temperature":0}
JSON
else
    cat >"$outdir/request.json" <<'JSON'
{"messages":[{"role":"user","content":"Say hello in one short sentence."}],
 "stream":false,"max_tokens":64,"temperature":0}
JSON
fi

code=$(curl -s -o "$outdir/chat.json" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary "@$outdir/request.json" "$base/v1/chat/completions")
echo "POST /v1/chat/completions -> HTTP $code"

python3 - "$outdir" <<'PY'
import json, sys
d = sys.argv[1]
props = json.load(open(f"{d}/props.json"))
gen = props.get("default_generation_settings", {})
print("props: n_ctx (per slot) =", gen.get("n_ctx"), " total_slots =", props.get("total_slots"),
      " build_info =", props.get("build_info"))
print("chat_template starts:", "\n  ".join(props.get("chat_template", "").splitlines()[:4]))
chat = json.load(open(f"{d}/chat.json"))
if "choices" not in chat:
    print("answer (error):", json.dumps(chat))
    sys.exit(0)
choice = chat["choices"][0]
msg = choice["message"]
print("finish_reason:", choice.get("finish_reason"))
print("content:", json.dumps(msg.get("content")))
if msg.get("tool_calls"):
    print("tool_calls:", json.dumps(msg["tool_calls"]))
print("usage:", json.dumps(chat.get("usage")))
print("timings:", json.dumps(chat.get("timings")))
PY
