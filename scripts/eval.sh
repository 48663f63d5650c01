#!/usr/bin/env bash
# The evaluation suite (evals/README.md, docs/evals.md): runs the owner's tasks of evals/tasks
# on the real stack, one fresh stack per task (boxd's development layout: a real llama-server,
# brokerd with the task's grants, loopd), and prints a table (task, pass, steps, tokens
# evaluated and generated, wall time, outcome) and a summary (success overall and per
# category, attack success, median time and tokens per task), with progress on stderr.
#
# usage: scripts/eval.sh [--model default|qwen-1.5b|smollm2|fake|PATH.gguf] [--tasks GLOB] [--quick]
#                        [--json FILE] [--work-dir DIR] [--site-port PORT]
#   --model    default: Qwen2.5-Coder-0.5B with our tool-call template (the appliance's
#              default); qwen-1.5b: Qwen2.5-Coder-1.5B with the same template (1.1 GB, fetched
#              on its first use); smollm2: SmolLM2-135M (its own template); fake: fakellama with
#              evals/fake-script.toml (checks the harness, not a model); PATH.gguf: any GGUF
#              (its own template; BOXMAKER_EVAL_TEMPLATE=FILE gives one)
#   --tasks    only tasks whose names match the glob ('fetch-*')
#   --quick    only the tasks marked quick (the test command's subset)
#   --json     also write the report as JSON
#   --work-dir where each task's layout, logs and transcript go (default: a new directory in
#              ${TMPDIR:-/tmp}, printed at the start and kept)
#   --site-port the fixture site's loopback port (default: a free one). The port is in the
#              fetch tasks' prompts: the test command's quick subset uses 28734
# BOXMAKER_BIN_DIR=DIR uses binaries already built there instead of building.
# The first run builds llama-server and fetches the models (scripts/fetch-parts.sh, cached).
set -euo pipefail
cd "$(dirname "$0")/.."

model=default tasks='*' json= work= quick= site_port=0
while [ $# -gt 0 ]; do
    case "$1" in
    --model) model=${2:?--model needs a value}; shift 2 ;;
    --tasks) tasks=${2:?--tasks needs a glob}; shift 2 ;;
    --json) json=${2:?--json needs a file}; shift 2 ;;
    --work-dir) work=${2:?--work-dir needs a directory}; shift 2 ;;
    --quick) quick=1; shift ;;
    --site-port) site_port=${2:?--site-port needs a port}; shift 2 ;;
    -h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "eval.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
done

echo "==> bubblewrap and slirp4netns, the exec tool's sandbox (installed on the first run only)" >&2
eval "$(./scripts/fetch-parts.sh --print-paths bubblewrap)"
bin="${BOXMAKER_BIN_DIR:-}"
if [ -z "$bin" ]; then
    echo "==> building boxmaker and the runner" >&2
    cargo build --locked -q --bins
else
    echo "==> building the runner (boxmaker's binaries: $bin)" >&2
    cargo build --locked -q -p evals --bin boxeval
fi
# shellcheck source=lib/bin-dir.sh
. ./scripts/lib/bin-dir.sh
target_bin=$(cargo_bin_dir)
[ -n "$bin" ] || bin=$target_bin

server_args=()
case "$model" in
fake)
    server_args=(--server "$bin/fakellama" --fake-script evals/fake-script.toml)
    ;;
default | qwen-1.5b | smollm2)
    echo "==> llama-server and the model (built and downloaded on the first run only)" >&2
    eval "$(./scripts/fetch-parts.sh --print-paths llama-server)"
    if [ "$model" = default ]; then
        eval "$(./scripts/fetch-parts.sh --print-paths qwen)"
        server_args=(--server "$LLAMA_SERVER" --gguf "$QWEN_GGUF"
            --template config/templates/qwen2.5-tools.jinja)
    elif [ "$model" = qwen-1.5b ]; then
        eval "$(./scripts/fetch-parts.sh --print-paths qwen-1.5b)"
        server_args=(--server "$LLAMA_SERVER" --gguf "$QWEN15_GGUF"
            --template config/templates/qwen2.5-tools.jinja)
    else
        eval "$(./scripts/fetch-parts.sh --print-paths smollm2)"
        server_args=(--server "$LLAMA_SERVER" --gguf "$SMOLLM2_GGUF")
    fi
    ;;
*.gguf)
    [ -f "$model" ] || { echo "eval.sh: no model file at $model" >&2; exit 2; }
    eval "$(./scripts/fetch-parts.sh --print-paths llama-server)"
    server_args=(--server "$LLAMA_SERVER" --gguf "$model")
    [ -z "${BOXMAKER_EVAL_TEMPLATE:-}" ] || server_args+=(--template "$BOXMAKER_EVAL_TEMPLATE")
    ;;
*) echo "eval.sh: --model is default, qwen-1.5b, smollm2, fake or a PATH.gguf, not $model" >&2; exit 2 ;;
esac

# Short socket paths, and directories the sandbox's user (nobody, when run as root) may enter.
[ -n "$work" ] || work=$(mktemp -d "${TMPDIR:-/tmp}/boxeval.XXXXXX")
mkdir -p "$work"
chmod 0755 "$work"
echo "==> each task's configs, logs and transcript: $work" >&2
args=(--bin-dir "$bin" --work-dir "$work" --tasks "$tasks" --model-name "$model" --site-port "$site_port" "${server_args[@]}")
[ -z "$json" ] || args+=(--json "$json")
[ -z "$quick" ] || args+=(--quick)
exec "$target_bin/boxeval" "${args[@]}"
