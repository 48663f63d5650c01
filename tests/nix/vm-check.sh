#!/usr/bin/env bash
# The VM test (tests/nix/vm-test.nix, the flake's checks.<system>.vm) as far as it goes without
# nixpkgs: evaluates its node through nixos-module/ with the stand-ins (tests/nix/eval-vm.nix,
# which asserts on the node and the test script), runs the node's config build (loopd's,
# brokerd's and boxd's --check-config on the VM's grants and schedule), then runs the
# llama-server wrapper (tests/nix/fakellama-server.nix) with the very arguments boxd would give
# it there, the socket and slot directory moved under WORK, and asks it what the test's first
# task asks; then runs the test's own script here (tests/nix/vm-rehearsal.py: boxd with the
# node's configs, paths moved under WORK, a stand-in for the VM's machine; about 20 s, most of
# it waiting for the schedule). Run by scripts/nix-checks.sh.
# Usage: tests/nix/vm-check.sh BINS WORK
#   BINS: the debug build (loopd, brokerd, boxd, boxctl, fakellama); WORK: a directory to use.
set -euo pipefail
cd "$(dirname "$0")/../.."
bins=$1
work=$2

mkdir -p "$work/pkg/bin" "$work/kv" "$work/out" "$work/rehearsal"
for b in loopd brokerd boxd boxctl fakellama; do
    [ -x "$bins/$b" ] || { echo "vm-check: $bins/$b missing: cargo build --workspace --bins" >&2; exit 2; }
    ln -sf "$bins/$b" "$work/pkg/bin/$b"
done

echo "vm-check: evaluate the VM test's node and script (tests/nix/eval-vm.nix)"
nix-instantiate --eval --strict --json --read-write-mode tests/nix/eval-vm.nix \
    --argstr binDir "$work/pkg" >"$work/vm.json"

echo "vm-check: the node's config build (--check-config of its loopd, brokerd, boxd)"
python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["configScript"])' "$work/vm.json" >"$work/build.sh"
out="$work/out" bash "$work/build.sh" >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; exit 1; }

echo "vm-check: the llama-server wrapper, with the node's arguments, is fakellama on the socket"
python3 - "$work" <<'PY'
import http.client
import json
import select
import socket
import subprocess
import sys

# How long fakellama may take to print its listening line, and to answer one request.
LISTEN_TIMEOUT_S = 60
REQUEST_TIMEOUT_S = 30
work = sys.argv[1]
vm = json.load(open(f"{work}/vm.json"))
wrapper = f"{work}/llama-server"
with open(wrapper, "w") as f:
    f.write(vm["wrapper"])

moved = {"/run/boxmaker/llama/llama.sock": f"{work}/llama.sock", "/var/lib/boxmaker/loopd/kv": f"{work}/kv"}
args = [moved.get(a, a) for a in vm["llamaArgs"]]
for old in moved:
    assert old in vm["llamaArgs"], f"vm-check: llama-server's arguments lack {old}: {vm['llamaArgs']}"
ctx = int(args[args.index("-c") + 1])
slots = int(args[args.index("--parallel") + 1])
model = args[args.index("-m") + 1]


class Unix(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=REQUEST_TIMEOUT_S)
        self.socket_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(REQUEST_TIMEOUT_S)
        self.sock.connect(self.socket_path)


def ask(method, path, body=None):
    conn = Unix(moved["/run/boxmaker/llama/llama.sock"])
    conn.request(method, path, body=None if body is None else json.dumps(body),
                 headers={"Content-Type": "application/json"})
    answer = conn.getresponse()
    data = answer.read()
    conn.close()
    assert answer.status == 200, f"vm-check: {method} {path}: {answer.status} {data!r}"
    return json.loads(data)


# loopd sends the tools' schemas; without them fakellama answers a tool call as text.
CLOCK = {"type": "function", "function": {"name": "clock", "parameters": {"type": "object", "properties": {}}}}


def chat(messages):
    body = {"messages": messages, "tools": [CLOCK], "stream": False}
    return ask("POST", "/v1/chat/completions", body)["choices"][0]["message"]


server = subprocess.Popen(["bash", wrapper] + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
try:
    ready, _, _ = select.select([server.stdout], [], [], LISTEN_TIMEOUT_S)
    line = server.stdout.readline() if ready else ""
    if line.strip() != f"fakellama listening on {work}/llama.sock":
        server.kill()
        sys.exit(f"vm-check: the wrapper did not listen on the socket; it printed {line!r} and:\n{server.communicate()[1]}")
    ask("GET", "/health")
    props = ask("GET", "/props")
    assert props["default_generation_settings"]["n_ctx"] == ctx // slots, f"vm-check: n_ctx per slot: {props['default_generation_settings']}"
    assert props["model_path"] == model, f"vm-check: model: {props}"
    assert len(ask("GET", "/slots")) == slots, "vm-check: slots"
    task = {"role": "user", "content": "What time is it? (vm-clock)"}
    first = chat([task])
    calls = first.get("tool_calls") or []
    assert [c["function"]["name"] for c in calls] == ["clock"], f"vm-check: the clock task: {first}"
    result = {"role": "tool", "tool_call_id": calls[0]["id"], "content": "2026-12-06T20:00:00Z"}
    second = chat([task, {"role": "assistant", "content": "", "tool_calls": calls}, result])
    assert second["content"].startswith("VM-CLOCK-ANSWERED"), f"vm-check: the clock's answer: {second}"
finally:
    server.terminate()
    server.wait(timeout=REQUEST_TIMEOUT_S)
PY

echo "vm-check: the VM test's own script, run here against the debug build (tests/nix/vm-rehearsal.py)"
python3 tests/nix/vm-rehearsal.py "$work/vm.json" "$work/pkg/bin" "$work/rehearsal"
echo "vm-check: ok"
