# Evaluates nixos-module/default.nix with tests/nix/stand-in.nix and asserts on the result.
# Run: nix-instantiate --eval --strict --json --read-write-mode tests/nix/eval-module.nix \
#        --argstr binDir DIR      (DIR/bin holds loopd, brokerd, boxd)
# Prints the rendered unit and configs as JSON (scripts/nix-checks.sh checks them further).
{ binDir }:
let
  s = import ./stand-in.nix { inherit binDir; };
  module = import ../../nixos-module/default.nix;

  user = {
    enable = true;
    model = "/var/lib/models/test.gguf";
    contextSize = 8192;
    slots = 3;
    llama.extraFlags = [ "-ngl" "0" ];
    loopd.settings = {
      loop.max_steps = 16;
      llama.retry_max_attempts = 3;
    };
    brokerd.settings.log.level = "debug";
    grants = [
      { tool = "clock"; sessions = [ "*" ]; }
      { tool = "read_file"; sessions = [ "main" ]; paths = [ "/var/lib/boxmaker/files" ]; result_class = "private"; }
    ];
  };

  evaluated = module { inherit config; inherit (s) lib pkgs; };
  # Spelled out (not `//`), so that the mkIf on cfg.enable is not forced too early.
  rest = s.unwrap evaluated.config;
  config = {
    services.boxmaker = s.resolve evaluated.options.services.boxmaker user false;
    inherit (rest) systemd users environment;
  };

  cfg = config.services.boxmaker;
  unit = config.systemd.services.boxmaker;
  sc = unit.serviceConfig;
  configs = cfg.configDir;

  check = what: ok: if ok then true else throw "eval-module: ${what}";
  has = k: v: check "serviceConfig.${k} = ${builtins.toJSON v}" ((sc.${k} or null) == v);

  checks = [
    (has "Type" "notify")
    (has "KillMode" "mixed")
    (has "ProtectSystem" "strict")
    (has "NoNewPrivileges" true)
    (has "CapabilityBoundingSet" "")
    (has "PrivateTmp" true)
    (has "ProtectHome" true)
    (has "MemoryDenyWriteExecute" true)
    (has "RestrictAddressFamilies" [ "AF_INET" "AF_INET6" "AF_UNIX" ])
    (has "RuntimeDirectory" "boxmaker")
    (check "SystemCallFilter has @system-service" (builtins.elem "@system-service" sc.SystemCallFilter))
    (check "StateDirectory" (sc ? StateDirectory))
    (check "TimeoutStopSec" (sc ? TimeoutStopSec))
    (check "ExecStart runs boxd with the checked config"
      (sc.ExecStart == "${binDir}/bin/boxd --config ${configs.outPath}/boxd.toml"))
    (check "the config derivation runs every --check-config"
      (builtins.all (d: builtins.match ".*bin/${d} --check-config.*" configs.script != null) [ "loopd" "brokerd" "boxd" ]))
    (check "boxctl on the system path" (builtins.elem cfg.package config.environment.systemPackages))
    (check "group boxmaker" (config.users.groups ? boxmaker))
    (check "system user" (config.users.users.boxmaker.isSystemUser && config.users.users.boxmaker.group == "boxmaker"))
    (check "loopd socket" (cfg.loopd.settings.socket == "/run/boxmaker/loopd.sock"))
    (check "loopd broker socket" (cfg.loopd.settings.broker.socket == "/run/boxmaker/brokerd.sock"))
    (check "loopd file tools are core" (cfg.loopd.settings.broker.core_tools == [ "read_file" "list_dir" ]))
    (check "loopd freeform keys kept" (cfg.loopd.settings.loop.max_steps == 16 && cfg.loopd.settings.llama.retry_max_attempts == 3))
    (check "loopd llama url default" (cfg.loopd.settings.llama.url == "http://127.0.0.1:8080"))
    (check "brokerd socket" (cfg.brokerd.settings.socket == "/run/boxmaker/brokerd.sock"))
    (check "connection caps rendered" (cfg.loopd.settings.api.max_connections == 256 && cfg.brokerd.settings.limits.max_connections == 128))
    (has "LimitNOFILE" (256 + 128 + 4096))
    (check "disabled: no unit" ((s.unwrap (module { config = { services.boxmaker = cfg // { enable = false; }; }; inherit (s) lib pkgs; }).config) == { }))
  ];
in
builtins.seq (builtins.all (x: x) checks) {
  serviceConfig = sc;
  configScript = configs.script;
  loopdSettings = cfg.loopd.settings;
  brokerdGrants = builtins.length cfg.grants;
}
