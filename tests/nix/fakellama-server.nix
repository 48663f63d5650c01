# llama-server played by fakellama (crates/fakellama), for the VM test (tests/nix/vm-test.nix):
# a bin/llama-server that takes the flags services.boxmaker gives llama-server
# (nixos-module/default.nix and llama-server.nix) and execs fakellama with `script`, so it is
# what services.boxmaker.llama.package names. Translated: --host (a path ending in ".sock" is a
# Unix socket, as llama-server reads it) and --port, -m, -c (the total context: fakellama's
# --n-ctx is per slot, so it is divided by --parallel, as llama-server does), --parallel,
# --slot-save-path, --api-key-file (the key goes on fakellama's command line: a test stand-in
# only). Every other flag is accepted and ignored (--no-webui, --chat-template-file, --rpc,
# -ngl ...), with its value when the next argument does not start with "-".
# scripts/nix-checks.sh runs this script with the arguments the module renders for the VM
# test's node (tests/nix/eval-vm.nix).
{ writeShellScriptBin, fakellama, script }:
writeShellScriptBin "llama-server" ''
  set -eu
  host=127.0.0.1 port=8080 ctx= slots=1 model= save= key=
  while [ "$#" -gt 0 ]; do
    case "$1" in
      --host) host=$2; shift 2 ;;
      --port) port=$2; shift 2 ;;
      -m|--model) model=$2; shift 2 ;;
      -c|--ctx-size) ctx=$2; shift 2 ;;
      -np|--parallel) slots=$2; shift 2 ;;
      --slot-save-path) save=$2; shift 2 ;;
      --api-key-file) key=$(<"$2"); shift 2 ;;
      # Flags without a value that llama-server takes.
      --no-webui|--webui|--jinja|--no-jinja|--metrics|--slots|--no-slots|--no-mmap|--mlock|-cb|--cont-batching|-v|--verbose)
        shift ;;
      -*)
        if [ "$#" -gt 1 ] && [ "''${2#-}" = "$2" ]; then shift 2; else shift; fi ;;
      *)
        echo "llama-server (fakellama): unexpected argument: $1" >&2
        exit 64 ;;
    esac
  done
  case "$host" in
    *.sock) listen=$host ;;
    *:*) listen="[$host]:$port" ;;
    *) listen="$host:$port" ;;
  esac
  set -- --listen "$listen" --script ${script} --slots "$slots"
  if [ -n "$ctx" ]; then set -- "$@" --n-ctx "$((ctx / slots))"; fi
  if [ -n "$model" ]; then set -- "$@" --model "$model"; fi
  if [ -n "$save" ]; then set -- "$@" --slot-save-path "$save"; fi
  if [ -n "$key" ]; then set -- "$@" --api-key "$key"; fi
  exec ${fakellama}/bin/fakellama "$@"
''
