# Evaluations of nixos-module/default.nix that must fail, or warn, with a clear message.
# scripts/nix-checks.sh evaluates each case by name and checks its message on stderr:
#   nix-instantiate --eval --strict --json --read-write-mode tests/nix/eval-case.nix \
#     --argstr binDir DIR --argstr case NAME
{ binDir, case }:
let
  inherit (import ./eval.nix { inherit binDir; }) evalBox;

  base = { enable = true; model = "/var/lib/models/test.gguf"; };

  cases = {
    # Option types (the stand-in lib let all three through).
    relative-model = { user = base // { model = "models/test.gguf"; }; };
    port-out-of-range = { user = base // { llama.port = 70000; }; };
    null-in-settings = { user = base // { loopd.settings.loop.max_steps = null; }; };
    # Without the flake's overlay nothing sets the package: an assertion says how to.
    no-overlay = { user = base; withBoxmaker = false; };
    # systemd makes only StateDirectory (under /var/lib) writable under ProtectSystem=strict.
    state-dir-outside-var-lib = { user = base // { stateDir = "/srv/boxmaker"; }; };
    state-dir-dot-dot = { user = base // { stateDir = "/var/lib/../etc/boxmaker"; }; };
    state-dir-var-lib-itself = { user = base // { stateDir = "/var/lib"; }; };
    # -ngl asks for GPU layers, which the unit cannot reach without llama.gpu.
    gpu-layers-without-gpu = { user = base // { llama.extraFlags = [ "--flash-attn" "on" "-ngl" "99" ]; }; };
  };

  picked = cases.${case} or (throw "eval-case: no case ${case}");
  inherit (evalBox picked) config;
in
# What NixOS builds from the module: the unit, its configs and the user.
{
  inherit (config.systemd.services.boxmaker) serviceConfig;
  configScript = config.services.boxmaker.configDir.script;
  user = config.users.users.boxmaker;
}
