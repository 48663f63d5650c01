# Evaluations of nixos-module/default.nix that must fail, or warn, with a clear message.
# scripts/nix-checks.sh evaluates each case by name and checks its message on stderr:
#   nix-instantiate --eval --strict --json --read-write-mode tests/nix/eval-case.nix \
#     --argstr binDir DIR --argstr case NAME
{ binDir, case }:
let
  inherit (import ./eval.nix { inherit binDir; }) evalBox;

  base = { enable = true; model = "/var/lib/models/test.gguf"; };

  morning = { name = "morning"; cron = "0 7 * * *"; task = "Summarise files/."; };

  # nixpkgs' llama-cpp as the module sees it: cmakeFlags say whether RPC was built in.
  llamaCpp = rpc: {
    type = "derivation"; name = "llama-cpp"; outPath = "${builtins.storeDir}/00000000000000000000000000000001-llama-cpp";
    cmakeFlags = [ "-DGGML_NATIVE:BOOL=FALSE" "-DGGML_RPC:BOOL=${if rpc then "TRUE" else "FALSE"}" ];
  };

  cases = {
    # Option types (the stand-in lib let all three through).
    relative-model = { user = base // { model = "models/test.gguf"; }; };
    # (llama.port is llama-server's only with llama.host: on the socket it is never read.)
    port-out-of-range = { user = base // { llama = { port = 70000; host = "127.0.0.1"; apiKeyFile = "/run/agenix/llama-key"; }; }; };
    null-in-settings = { user = base // { loopd.settings.loop.max_steps = null; }; };
    # Without the flake's overlay nothing sets the package: an assertion says how to.
    no-overlay = { user = base; withBoxmaker = false; };
    # systemd makes only StateDirectory (under /var/lib) writable under ProtectSystem=strict.
    state-dir-outside-var-lib = { user = base // { stateDir = "/srv/boxmaker"; }; };
    state-dir-dot-dot = { user = base // { stateDir = "/var/lib/../etc/boxmaker"; }; };
    state-dir-var-lib-itself = { user = base // { stateDir = "/var/lib"; }; };
    # -ngl asks for GPU layers, which the unit cannot reach without llama.gpu.
    gpu-layers-without-gpu = { user = base // { llama.extraFlags = [ "--flash-attn" "on" "-ngl" "99" ]; }; };
    # Schedules: one timing, one task, unique names, and loopd's own keys' values only.
    schedule-cron-and-every = { user = base // { schedules = [ (morning // { every = "1h"; }) ]; }; };
    schedule-no-task = { user = base // { schedules = [ (removeAttrs morning [ "task" ]) ]; }; };
    schedule-task-and-file = { user = base // { schedules = [ (morning // { task_file = "/etc/boxmaker/m.md"; }) ]; }; };
    schedule-names-twice = { user = base // { schedules = [ morning morning ]; }; };
    schedule-named-heartbeat = { user = base // { schedules = [ (morning // { name = "heartbeat"; }) ]; }; };
    schedule-bad-missed = { user = base // { schedules = [ (morning // { missed = "twice"; }) ]; }; };
    schedule-bad-name = { user = base // { schedules = [ (morning // { name = "a/b"; }) ]; }; };
    schedule-with-config-file = { user = base // { schedules = [ morning ]; loopd.configFile = "/etc/loopd.toml"; }; };
    # Metrics: a port is a port, and the module cannot write into a loopd config file.
    metrics-port-out-of-range = { user = base // { metrics = { enable = true; port = 70000; }; }; };
    metrics-with-config-file = { user = base // { metrics.enable = true; loopd.configFile = "/etc/loopd.toml"; }; };
    # Web console: the same, and an origin that is not a string.
    web-port-out-of-range = { user = base // { web = { enable = true; port = 70000; }; }; };
    web-with-config-file = { user = base // { web.enable = true; loopd.configFile = "/etc/loopd.toml"; }; };
    web-origin-with-config-file = { user = base // { web = { enable = true; origin = "https://box.example.com"; }; loopd.configFile = "/etc/loopd.toml"; }; };
    web-origin-not-a-string = { user = base // { web = { enable = true; origin = true; }; }; };
    # Secrets: a Nix path would be copied into the world-readable store (the file does not exist:
    # were the module to copy it, the evaluation would fail on that instead of the assertion).
    secret-nix-path = { user = base // { brokerd.secrets.github.file = ./no-such-secret; }; };
    secret-in-store = { user = base // { brokerd.secrets.github.file = "${builtins.storeDir}/0000000000000000000000000000000a-github"; }; };
    secret-relative = { user = base // { brokerd.secrets.github.file = "secrets/github"; }; };
    secret-bad-name = { user = base // { brokerd.secrets.GitHub.file = "/run/agenix/github"; }; };
    secret-file-with-config-file = { user = base // { brokerd.configFile = "/etc/brokerd.toml"; brokerd.secrets.wiki = { file = "/run/agenix/wiki"; loadCredential = false; }; }; };
    # llama.cpp RPC: one "host:port" an entry, a loud warning for an exposed worker, and a
    # package without RPC named for what it is.
    rpc-servers-comma = { user = base // { llama.rpcServers = [ "10.100.0.2:50052,10.100.0.3:50052" ]; }; };
    rpc-servers-no-port = { user = base // { llama.rpcServers = [ "10.100.0.2" ]; }; };
    rpc-servers-without-rpc-build = { user = base // { llama = { rpcServers = [ "10.100.0.2:50052" ]; package = llamaCpp false; }; }; };
    rpc-worker-exposed = { user = base // { rpcWorker = { enable = true; host = "0.0.0.0"; }; }; };
    rpc-worker-firewall-on-loopback = { user = base // { rpcWorker = { enable = true; openFirewall = true; }; }; };
    rpc-worker-without-rpc-build = { user = base // { rpcWorker = { enable = true; package = llamaCpp false; }; }; };
    rpc-worker-port-out-of-range = { user = base // { rpcWorker = { enable = true; port = 70000; }; }; };
    # llama-server on TCP: only with an API key, from a file outside the store, and only on
    # loopback, its HTTP being plain (docs/security.md, "llama-server's slot API").
    llama-tcp-without-key = { user = base // { llama.host = "127.0.0.1"; }; };
    llama-key-nix-path = { user = base // { llama.apiKeyFile = ./no-such-key; }; };
    llama-key-in-store = { user = base // { llama.apiKeyFile = "${builtins.storeDir}/0000000000000000000000000000000b-llama-key"; }; };
    llama-key-relative = { user = base // { llama.apiKeyFile = "keys/llama"; }; };
    llama-host-two = { user = base // { llama = { host = "127.0.0.1,10.0.0.5"; apiKeyFile = "/run/agenix/llama-key"; }; }; };
    llama-host-socket = { user = base // { llama = { host = "/tmp/llama.sock"; apiKeyFile = "/run/agenix/llama-key"; }; }; };
    llama-tcp-in-the-clear = { user = base // { llama = { host = "10.0.0.5"; apiKeyFile = "/run/agenix/llama-key"; }; }; };
    llama-tcp-wildcard-in-the-clear = { user = base // { llama = { host = "0.0.0.0"; apiKeyFile = "/run/agenix/llama-key"; }; }; };
    # [kv] dir is llama-server's --slot-save-path: the module makes that one directory.
    kv-dir-elsewhere = { user = base // { loopd.settings.kv.dir = "/srv/kv"; }; };
  };

  picked = cases.${case} or (throw "eval-case: no case ${case}");
  inherit (evalBox picked) config;
in
# What NixOS builds from the module: the unit, its configs and the user.
{
  inherit (config.systemd.services.boxmaker) serviceConfig;
  workerUnit = config.systemd.services.boxmaker-rpc-worker.serviceConfig or null;
  configScript = config.services.boxmaker.configDir.script;
  user = config.users.users.boxmaker;
}
