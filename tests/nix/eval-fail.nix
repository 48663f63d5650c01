# Evaluations of the module that must fail, each with the message it must print: the model,
# llama-server's flags, the settings the daemons' flags own, boxd's settings. (The older cases
# are in tests/nix/eval-case.nix.) scripts/nix-checks.sh lists them with `-A table`, then
# evaluates each by name and looks for its message on stderr:
#   nix-instantiate --eval --strict --json --read-write-mode tests/nix/eval-fail.nix \
#     --argstr binDir DIR --argstr case NAME
{ binDir, case ? null }:
let
  inherit (import ./eval.nix { inherit binDir; }) evalBox;

  base = { enable = true; model = "qwen2.5-coder-0.5b"; };
  readOnly = option: "The option `services.boxmaker.${option}' is read-only, but it's set multiple times";

  cases = {
    # The model: a name the catalogue does not have, and an entry without its sha256.
    # loopd's and boxd's metrics listeners need a port each.
    metrics-ports-collide = {
      user = base // { metrics = { enable = true; port = 9466; }; };
      message = "services.boxmaker.metrics.port and metrics.boxdPort are both 9466: loopd and boxd need a port each.";
    };
    model-unknown-name = {
      user = base // { model = "qwen-7b"; };
      message = "services.boxmaker.model' is not of type `name of a model of the catalogue (\"qwen2.5-coder-0.5b\", \"qwen2.5-coder-1.5b\"), catalogue entry, or absolute path'";
    };
    model-entry-unpinned = {
      user = base // { model = { url = "https://huggingface.co/Qwen/x-GGUF/resolve/main/x.gguf"; file = "x.gguf"; }; };
      message = "services.boxmaker.model: the entry of https://huggingface.co/Qwen/x-GGUF/resolve/main/x.gguf has no sha256, and the module fetches a model only by its sha256. Download the file once with `nix-prefetch-url https://huggingface.co/Qwen/x-GGUF/resolve/main/x.gguf`";
    };
    # llama-server stays on its socket without a web UI: extraFlags cannot move it.
    llama-flags-port = {
      user = base // { llama.extraFlags = [ "--port" "8080" ]; };
      message = "services.boxmaker.llama.extraFlags sets --port, which the module sets itself: where llama-server listens is llama.host and llama.port";
    };
    llama-flags-host = {
      user = base // { llama.extraFlags = [ "--flash-attn" "on" "--host=0.0.0.0" "--webui" ]; };
      message = "services.boxmaker.llama.extraFlags sets --host=0.0.0.0 --webui, which the module sets itself";
    };
    llama-flags-model = {
      user = base // { llama.extraFlags = [ "-m" "/var/lib/models/other.gguf" ]; };
      message = "services.boxmaker.llama.extraFlags sets -m, which the module sets itself";
    };
    # Keys the daemons' command-line flags set: read-only.
    loopd-socket-set = { user = base // { loopd.settings.socket = "/run/loopd.sock"; }; message = readOnly "loopd.settings.socket"; };
    loopd-state-dir-set = { user = base // { loopd.settings.state_dir = "/var/lib/loopd"; }; message = readOnly "loopd.settings.state_dir"; };
    loopd-broker-socket-set = { user = base // { loopd.settings.broker.socket = "/run/brokerd.sock"; }; message = readOnly "loopd.settings.broker.socket"; };
    brokerd-socket-set = { user = base // { brokerd.settings.socket = "/run/brokerd.sock"; }; message = readOnly "brokerd.settings.socket"; };
    brokerd-state-dir-set = { user = base // { brokerd.settings.state_dir = "/var/lib/brokerd"; }; message = readOnly "brokerd.settings.state_dir"; };
    # boxd's settings: what the module writes itself, and a level that is none.
    boxd-children-set = {
      user = base // { boxd.settings.children = [ ]; };
      message = "services.boxmaker.boxd.settings sets children, which the module writes itself";
    };
    boxd-socket-and-notify-set = {
      user = base // { boxd.settings = { socket = "/run/boxd.sock"; notify = false; }; };
      message = "services.boxmaker.boxd.settings sets notify, socket, which the module writes itself";
    };
    # chatd signs in with one credential.
    chat-two-credentials = {
      user = base // { chat.matrix = {
        enable = true; homeserver = "https://matrix.example.org"; user = "@box:example.org";
        owners = [ "@me:example.org" ];
        passwordFile = "/run/agenix/p"; accessTokenFile = "/run/agenix/t";
      }; };
      message = "services.boxmaker.chat.matrix: set exactly one of passwordFile and accessTokenFile.";
    };
    boxd-bad-log-level = {
      user = base // { boxd.settings.log.level = "loud"; };
      message = "services.boxmaker.boxd.settings.log.level' is not of type `one of \"trace\", \"debug\", \"info\", \"warn\", \"error\"'";
    };
  };

  names = builtins.attrNames cases;
in
if case == null then {
  # Lines of scripts/nix-checks.sh's case table: name|fail|message.
  table = map (n: "${n}|fail|${cases.${n}.message}") names;
}
else
  let inherit (evalBox { inherit (cases.${case} or (throw "eval-fail: no case ${case}")) user; }) config; in
  # What NixOS builds from the module: the unit and its configs.
  {
    inherit (config.systemd.services.boxmaker) serviceConfig;
    configScript = config.services.boxmaker.configDir.script;
  }
