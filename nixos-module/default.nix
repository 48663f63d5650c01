# services.boxmaker: the boxmaker appliance. One systemd unit runs boxd, which starts
# llama-server, then brokerd, then loopd, each once the one before is ready, with configs
# rendered into the store, checked with `--check-config` at build time and pinned by sha256 in
# boxd's config. Reference: docs/operations.md, docs/config.md.
#
# The sha256 pins are computed when the config derivation is built (sha256sum, then sed into
# boxd.toml), not with builtins.hashFile at evaluation time: the rendered TOML files are
# derivation outputs (pkgs.formats.toml), and hashing them during evaluation would be
# import-from-derivation.
{ config, lib, pkgs, ... }:

let
  cfg = config.services.boxmaker;
  inherit (lib) mkOption mkEnableOption mkIf types;
  toml = pkgs.formats.toml { };
  # The units' shared hardening set, the GPU's device nodes and what brokerd's exec tool needs.
  hardening = import ./hardening.nix { inherit lib; };

  runDir = "/run/boxmaker";
  loopdSocket = "${runDir}/loopd.sock";
  brokerdSocket = "${runDir}/brokerd.sock";
  boxdSocket = "${runDir}/boxd.sock";
  # llama-server's Unix socket, or its TCP address with llama.host (llama-server.nix).
  llamaUrl = cfg.llama.url;
  serve = cfg.llama.serve;

  # Open files each process may need beyond the daemons' connection caps: llama-server's model
  # and HTTP connections, loopd's session logs and its connections to llama-server and brokerd,
  # MCP servers' pipes, boxd's children (docs/operations.md, "Open files").
  fileHeadroom = 4096;

  # The longest llama-server may take to load its model, in milliseconds.
  llamaStartMs = 300000;

  # stateDir relative to /var/lib, for StateDirectory: systemd creates it owned by the unit's
  # user, and it is the one place ProtectSystem=strict leaves writable. So stateDir must be a
  # plain path below /var/lib (the assertion below); no part may start with "." (no "..").
  stateDirOk = builtins.match "/var/lib(/[A-Za-z0-9_][A-Za-z0-9_.-]*)+" cfg.stateDir != null;
  stateDirName = lib.removePrefix "/var/lib/" cfg.stateDir;

  # Sessions' KV caches between their turns (docs/kv.md): llama-server writes them here
  # (--slot-save-path), loopd names, notes, renames and prunes them. It is loopd's `[kv] dir`
  # default, `<state dir>/kv`, with loopd's state dir the `--state-dir` below. Both run as the
  # boxmaker user (boxd starts its children as itself), so a directory of that user's alone
  # (0700: the files hold what the sessions said) is all the access either needs. It is a
  # StateDirectory, so systemd makes it, owned by boxmaker, before boxd starts and it exists
  # when llama-server checks it; ExecStartPre narrows it from StateDirectoryMode to 0700.
  kvDir = "${cfg.stateDir}/loopd/kv";

  # The value given to llama-server's GPU-layers flag in extraFlags, or null.
  gpuLayers =
    let
      flags = cfg.llama.extraFlags;
      at = lib.lists.findFirstIndex (f: builtins.elem f [ "-ngl" "--gpu-layers" "--n-gpu-layers" ]) null flags;
    in
    if at == null || at + 1 >= builtins.length flags then null else builtins.elemAt flags (at + 1);

  # loopd's [[llama.endpoints]] as far as the module can see them (docs/scale-out.md): with any,
  # loopd routes to them and must get neither `[llama] url` nor `--llama` (it refuses both).
  llamaEndpoints = if cfg.loopd.configFile != null then [ ] else cfg.loopd.settings.llama.endpoints or [ ];

  # brokerd's [[mcp]] servers as far as the module can see them (not in brokerd.configFile).
  mcpServers = if cfg.brokerd.configFile != null then [ ] else cfg.brokerd.settings.mcp or [ ];

  # Whether a grant names brokerd's `exec` tool, as far as the module can see the grants.
  execGranted = cfg.brokerd.configFile == null
    && builtins.any (g: builtins.isAttrs g && (g.tool or null) == "exec") cfg.grants;

  # A freeform TOML table with a few typed keys.
  section = options: mkOption {
    type = types.submodule {
      freeformType = toml.type;
      inherit options;
    };
    default = { };
    description = "A section of the config file; any other key of docs/config.md may be set.";
  };

  loopdFile =
    if cfg.loopd.configFile != null then cfg.loopd.configFile
    # TOML has no null: a url left null (endpoints instead) is not written.
    else toml.generate "loopd.toml" (cfg.loopd.settings // {
      llama = lib.filterAttrs (_: v: v != null) cfg.loopd.settings.llama;
    });

  brokerdFile =
    if cfg.brokerd.configFile != null then cfg.brokerd.configFile
    else toml.generate "brokerd.toml" (cfg.brokerd.settings // { grants = cfg.grants; });

  # boxd's config; @LOOPD_SHA256@ and @BROKERD_SHA256@ are filled in by `configs` below.
  boxdSettings = {
    notify = true;
    # Where boxd answers GET /metrics (its children's state); the boxmaker group may read it,
    # as it may use loopd's socket (docs/operations.md, "Metrics").
    socket = boxdSocket;
    socket_group = "boxmaker";
    restart = {
      initial_backoff_ms = 1000;
      max_backoff_ms = 60000;
      max_restarts = 5;
      window_ms = 600000;
    };
    log.level = "info";
    children = [
      {
        name = "llama-server";
        inherit (serve) command;
        # Where it listens (and its key, and --no-webui), from llama-server.nix.
        args = serve.args ++ [
          "-m" (toString cfg.model)
          "-c" (toString cfg.contextSize)
          "--parallel" (toString cfg.slots)
          "--slot-save-path" kvDir
        ]
        ++ lib.optionals (cfg.llama.chatTemplateFile != null) [
          "--chat-template-file" (toString cfg.llama.chatTemplateFile)
        ]
        # RPC workers (docs/scale-out.md): llama-server splits the model across them.
        ++ lib.optionals (cfg.llama.rpcServers != [ ]) [
          "--rpc" (lib.concatStringsSep "," cfg.llama.rpcServers)
        ]
        ++ cfg.llama.extraFlags;
        inherit (serve) ready;
        start_timeout_ms = llamaStartMs;
        stop_grace_ms = 10000;
      }
      {
        name = "brokerd";
        command = "${cfg.package}/bin/brokerd";
        args = [
          "--config" "${brokerdFile}"
          "--socket" brokerdSocket
          "--state-dir" "${cfg.stateDir}/brokerd"
        ];
        config_file = "${brokerdFile}";
        config_sha256 = "@BROKERD_SHA256@";
        ready.socket = brokerdSocket;
        start_timeout_ms = 10000;
        stop_grace_ms = 5000;
      }
      {
        name = "loopd";
        command = "${cfg.package}/bin/loopd";
        args = [
          "--config" "${loopdFile}"
          "--socket" loopdSocket
          "--state-dir" "${cfg.stateDir}/loopd"
          "--broker" brokerdSocket
        ]
        ++ lib.optionals cfg.loopd.passLlamaUrl [ "--llama" llamaUrl ];
        config_file = "${loopdFile}";
        config_sha256 = "@LOOPD_SHA256@";
        ready.socket = loopdSocket;
        # On the socket llama-server is ready before its model loads; loopd waits for /health
        # (llama.health_wait_ms) before it opens its socket, so it gets the load's time too.
        start_timeout_ms = llamaStartMs + 30000;
        stop_grace_ms = 30000;
      }
    ];
  };

  boxdTemplate = toml.generate "boxd.toml.in" boxdSettings;

  # The three configs, checked by the daemons themselves and pinned. Only coreutils and sed.
  configs = pkgs.runCommand "boxmaker-config" { } ''
    set -eu
    mkdir -p "$out"
    ${cfg.package}/bin/loopd --check-config ${loopdFile}
    ${cfg.package}/bin/brokerd --check-config ${brokerdFile}
    loopd_sha=$(sha256sum ${loopdFile} | cut -d' ' -f1)
    brokerd_sha=$(sha256sum ${brokerdFile} | cut -d' ' -f1)
    sed -e "s/@LOOPD_SHA256@/$loopd_sha/" -e "s/@BROKERD_SHA256@/$brokerd_sha/" \
      ${boxdTemplate} > "$out/boxd.toml"
    ${cfg.package}/bin/boxd --check-config "$out/boxd.toml"
  '';
in
{
  # services.boxmaker.schedules, rendered into loopd.settings.schedules; services.boxmaker.metrics,
  # rendered into loopd.settings.metrics; services.boxmaker.web, rendered into
  # loopd.settings.web (docs/web.md); services.boxmaker.brokerd.secrets, rendered into
  # brokerd.settings.secrets and the unit's LoadCredential=, and the unit's ExecReload;
  # services.boxmaker.rpcWorker, a llama.cpp RPC worker's own unit (docs/scale-out.md);
  # services.boxmaker.llama.host and apiKeyFile: where llama-server listens, and its key.
  imports = [ ./schedules.nix ./metrics.nix ./web.nix ./secrets.nix ./rpc-worker.nix ./llama-server.nix ];

  options.services.boxmaker = {
    enable = mkEnableOption "boxmaker, a private AI-agent appliance";

    package = mkOption {
      type = types.nullOr types.package;
      # `or null`: without the flake's overlay an assertion says what to do (not "attribute
      # 'boxmaker' missing"), and the options' documentation renders from defaultText.
      default = pkgs.boxmaker or null;
      defaultText = lib.literalExpression "pkgs.boxmaker";
      description = ''
        The boxmaker workspace (boxd, loopd, brokerd, boxctl). The flake's nixosModules.default
        sets it; with nixos-module/ alone, add the flake's overlays.default to nixpkgs.overlays
        or set this.
      '';
    };

    model = mkOption {
      type = types.path;
      description = ''
        The GGUF model llama-server loads. Give a string path outside the store (for example
        "/var/lib/models/qwen3-4b.gguf") to keep a large model out of the store; it must be
        readable by the boxmaker user and not under /home (ProtectHome).
      '';
    };

    llama = {
      package = mkOption {
        type = types.package;
        default = pkgs.llama-cpp;
        description = "The llama.cpp package providing bin/llama-server.";
      };
      chatTemplateFile = mkOption {
        type = types.nullOr types.path;
        default = null;
        description = "A Jinja chat template (--chat-template-file); null: the model's own.";
      };
      extraFlags = mkOption {
        type = types.listOf types.str;
        default = [ ];
        example = [ "--flash-attn" "on" "-ngl" "99" ];
        description = "More arguments for llama-server. GPU layers (-ngl) need llama.gpu, unless they go to rpcServers.";
      };
      rpcServers = mkOption {
        type = types.listOf types.str;
        default = [ ];
        example = [ "10.100.0.2:50052" "10.100.0.3:50052" ];
        description = ''
          llama.cpp RPC workers ("host:port", each a services.boxmaker.rpcWorker elsewhere)
          that llama-server splits the model across, passed as `--rpc a,b`; add "-ngl" "99" to
          extraFlags so the layers go to them. Both ends need llama.cpp built with RPC
          (`pkgs.llama-cpp.override { rpcSupport = true; }`) of the same version. The RPC
          protocol has no authentication or encryption: weights and activations cross the
          network in the clear, so use a trusted network or a WireGuard tunnel
          (docs/scale-out.md).
        '';
      };
      gpu = mkOption {
        type = types.bool;
        default = false;
        description = ''
          Let llama-server use the GPU (a GPU build of llama.package, and "-ngl" in extraFlags):
          the unit sees the GPU's device nodes (PrivateDevices off; DeviceAllow of NVIDIA's,
          AMD's and WSL's nodes, DevicePolicy=closed), joins the render group (ROCm opens
          /dev/dri/renderD*) and sees /proc/driver (ProcSubset=all; CUDA reads it). This applies
          to the whole unit, boxd, brokerd and loopd too: systemd cannot open a device to one
          process of a unit. Off: no device nodes beyond /dev/null and the like, so llama-server
          runs on the CPU whatever extraFlags say.
        '';
      };
    };

    contextSize = mkOption {
      type = types.ints.positive;
      default = 24576;
      description = "llama-server's total context (-c), shared by the slots.";
    };

    slots = mkOption {
      type = types.ints.positive;
      default = 3;
      description = "llama-server's slots (--parallel); loopd uses three (main, background, subagent).";
    };

    stateDir = mkOption {
      type = types.str;
      default = "/var/lib/boxmaker";
      description = ''
        State of loopd (sessions; in loopd/kv the sessions' KV caches, llama-server's
        --slot-save-path) and brokerd (audit log): a directory under /var/lib, which
        systemd creates as the unit's StateDirectory (the only place ProtectSystem=strict leaves
        writable). Anything else fails the evaluation with a message.
      '';
    };

    loopd = {
      settings = mkOption {
        type = types.submodule {
          freeformType = toml.type;
          options = {
            socket = mkOption { type = types.str; default = loopdSocket; description = "loopd's API socket."; };
            state_dir = mkOption { type = types.str; default = "${cfg.stateDir}/loopd"; description = "loopd's state."; };
            llama = section {
              url = mkOption {
                type = types.nullOr types.str;
                default = if llamaEndpoints == [ ] then llamaUrl else null;
                defaultText = lib.literalMD "this machine's llama-server; null (not written) when `endpoints` has any";
                description = "llama-server's URL; null with [[llama.endpoints]], which loopd takes instead (docs/scale-out.md).";
              };
            };
            broker = section {
              socket = mkOption { type = types.str; default = brokerdSocket; description = "brokerd's socket."; };
              core_tools = mkOption {
                type = types.listOf types.str;
                default = [ "read_file" "list_dir" ];
                description = "brokerd's tools in the tools array: small models fail through call_tool (docs/config.md). A tool no grant allows is left out.";
              };
            };
            api = section {
              socket_group = mkOption { type = types.str; default = "boxmaker"; description = "Who may use boxctl."; };
              max_connections = mkOption { type = types.ints.positive; default = 256; description = "Most connections open on loopd's socket (counted in maxOpenFiles)."; };
            };
            baseline = section {
              system = mkOption {
                type = types.str;
                default = "${../config}/system.md";
                description = "The system prompt; compact.md and summarise.md are read from its directory.";
              };
            };
          };
        };
        default = { };
        description = "loopd's config (docs/config.md), rendered as TOML.";
      };
      configFile = mkOption {
        type = types.nullOr types.path;
        default = null;
        description = "A loopd config file used instead of settings.";
      };
      passLlamaUrl = mkOption {
        type = types.bool;
        default = llamaEndpoints == [ ];
        defaultText = lib.literalMD "`true`, unless `loopd.settings.llama.endpoints` has `[[llama.endpoints]]`";
        description = ''
          Whether loopd is started with `--llama` naming this machine's llama-server. loopd
          refuses `--llama` beside [[llama.endpoints]] (docs/scale-out.md), so it is off when
          loopd.settings has any. With loopd.configFile the module cannot see the file's
          endpoints: set this to false when it has some.
        '';
      };
    };

    brokerd = {
      settings = mkOption {
        type = types.submodule {
          freeformType = toml.type;
          options = {
            socket = mkOption { type = types.str; default = brokerdSocket; description = "brokerd's socket."; };
            state_dir = mkOption { type = types.str; default = "${cfg.stateDir}/brokerd"; description = "brokerd's state."; };
            limits = section {
              call_timeout_ms = mkOption { type = types.ints.positive; default = 30000; description = "The longest tool call."; };
              max_connections = mkOption { type = types.ints.positive; default = 128; description = "Most connections open on brokerd's socket (counted in maxOpenFiles)."; };
            };
          };
        };
        default = { };
        description = "brokerd's config (docs/config.md) without its grants and secrets (brokerd.secrets), rendered as TOML.";
      };
      configFile = mkOption {
        type = types.nullOr types.path;
        default = null;
        description = "A brokerd config file used instead of settings and grants.";
      };
    };

    grants = mkOption {
      type = types.listOf toml.type;
      default = [
        { tool = "clock"; sessions = [ "*" ]; }
        { tool = "echo"; sessions = [ "*" ]; }
      ];
      example = [
        { tool = "read_file"; sessions = [ "*" ]; paths = [ "/var/lib/boxmaker/files" ]; result_class = "private"; }
      ];
      description = "brokerd's [[grants]] (docs/config.md). Empty: every tool call is denied.";
    };

    memoryDenyWriteExecute = mkOption {
      type = types.bool;
      default = mcpServers == [ ];
      defaultText = lib.literalMD "`true`, unless `brokerd.settings.mcp` has `[[mcp]]` servers";
      description = ''
        The unit's MemoryDenyWriteExecute (no memory both writable and executable), for every
        process in it: boxd, llama-server, brokerd, loopd and brokerd's MCP servers. Off by
        default when brokerd.settings has [[mcp]] servers, because they run inside the unit and
        a JIT (Node.js, so every `npx` server) needs such memory and dies without it. With
        brokerd.configFile the module cannot see its servers: set this to false when that file
        runs one on a JIT. Set it to true to keep it with MCP servers that need no JIT.
      '';
    };

    exec = mkOption {
      type = types.bool;
      default = execGranted;
      defaultText = lib.literalMD "`true` when a grant names the `exec` tool";
      description = ''
        Whether brokerd's `exec` tool can make its bubblewrap sandbox in the unit: namespaces
        bwrap makes are allowed and the settings that stop it from mounting the sandbox's /proc
        are off (ProtectKernelTunables, ProtectKernelLogs, ProtectHostname, ProcSubset=pid),
        with the reasons in the module. Without it brokerd reports `exec: unavailable` and
        denies every call of the tool. On by default when a grant names `exec`; with
        brokerd.configFile the module cannot see the grants: set it yourself.
      '';
    };

    maxOpenFiles = mkOption {
      type = types.ints.positive;
      default = cfg.loopd.settings.api.max_connections
        + cfg.brokerd.settings.limits.max_connections + fileHeadroom;
      description = ''
        The unit's LimitNOFILE: the open-file limit of boxd and, inherited, of each of
        llama-server, brokerd and loopd. The default is both daemons' max_connections plus
        ${toString fileHeadroom} for everything else. Set it yourself when loopd.configFile or
        brokerd.configFile sets other caps.
      '';
    };

    configDir = mkOption {
      type = types.package;
      readOnly = true;
      default = configs;
      description = "The checked configs: boxd.toml with the pins (read only).";
    };
  };

  config = mkIf cfg.enable {
    assertions = [
      {
        assertion = cfg.package != null;
        message = "services.boxmaker.package is not set: pkgs has no boxmaker. Import the flake's nixosModules.default (it sets the package), add its overlays.default to nixpkgs.overlays, or set services.boxmaker.package.";
      }
      {
        # llama.cpp splits --rpc at commas and each entry at its last colon.
        assertion = builtins.all (s: builtins.match "[^,[:space:]]+:[0-9]+" s != null) cfg.llama.rpcServers;
        message = "services.boxmaker.llama.rpcServers: each entry is one \"host:port\" (no commas or spaces), got ${builtins.toJSON cfg.llama.rpcServers}.";
      }
      {
        assertion = stateDirOk;
        message = "services.boxmaker.stateDir must be a directory under /var/lib/, got \"${cfg.stateDir}\": systemd creates it as the unit's StateDirectory, the only place ProtectSystem=strict leaves writable (no trailing \"/\", and no part starting with \".\").";
      }
      {
        # loopd and llama-server must agree on the directory, and the unit can write only there.
        assertion = (cfg.loopd.settings.kv.dir or kvDir) == kvDir;
        message = "services.boxmaker.loopd.settings.kv.dir must be left unset or be \"${kvDir}\", got ${builtins.toJSON (cfg.loopd.settings.kv.dir or null)}: llama-server is started with --slot-save-path ${kvDir}, a StateDirectory of the unit, the only place ProtectSystem=strict leaves writable (docs/kv.md).";
      }
    ];

    # With RPC workers, -ngl puts layers on them, which needs no local GPU.
    warnings = lib.optional (gpuLayers != null && gpuLayers != "0" && !cfg.llama.gpu && cfg.llama.rpcServers == [ ])
      "services.boxmaker.llama.extraFlags asks for GPU layers (-ngl ${gpuLayers}) but llama.gpu is false: the unit hides the GPU's device nodes, so llama-server runs on the CPU. Set services.boxmaker.llama.gpu = true."
    ++ lib.optional (cfg.llama.rpcServers != [ ] && hardening.lacksRpc cfg.llama.package)
      "services.boxmaker.llama.rpcServers is set but llama.package is built without llama.cpp's RPC backend (its cmakeFlags lack -DGGML_RPC=ON), so llama-server refuses --rpc. Use llama.package = pkgs.llama-cpp.override { rpcSupport = true; }.";

    users.groups.boxmaker = { };
    users.users.boxmaker = {
      isSystemUser = true;
      group = "boxmaker";
      home = cfg.stateDir;
      description = "boxmaker appliance";
    };

    environment.systemPackages = lib.optional (cfg.package != null) cfg.package;

    systemd.services.boxmaker = {
      description = "boxmaker appliance (boxd: llama-server, brokerd, loopd)";
      wantedBy = [ "multi-user.target" ];
      after = [ "network.target" ];
      # bwrap, for brokerd's `exec` tool: brokerd finds it on PATH (bxsandbox-shim is in the
      # package, next to brokerd). Without services.boxmaker.exec the unit's namespace
      # restrictions stop it and brokerd says so. slirp4netns is the network of a grant with
      # network = true (the sandbox's own namespace, never the host's); without it such a grant
      # fails and brokerd says why.
      path = [ pkgs.bubblewrap pkgs.slirp4netns ];
      serviceConfig = {
        Type = "notify";
        NotifyAccess = "main";
        ExecStart = "${cfg.package}/bin/boxd --config ${configs}/boxd.toml";
        User = "boxmaker";
        Group = "boxmaker";
        # boxd stops loopd, brokerd and llama-server itself, each with a grace period
        # (30 s + 5 s + 10 s), before systemd's SIGKILL of what is left.
        KillMode = "mixed";
        TimeoutStartSec = "10min";
        TimeoutStopSec = "90s";
        Restart = "on-failure";
        RestartSec = "10s";
        # loopd/kv: llama-server's --slot-save-path, which must exist when it starts.
        StateDirectory = "${stateDirName} ${stateDirName}/loopd ${stateDirName}/loopd/kv ${stateDirName}/brokerd";
        StateDirectoryMode = "0750";
        # As the unit's user, after systemd made the directories, before boxd starts: the KV
        # files and llama-server's socket are the boxmaker user's alone (llama-server.nix).
        ExecStartPre = "${pkgs.coreutils}/bin/chmod 0700 ${lib.optionalString (serve.socketDir != null) "${serve.socketDir} "}${kvDir}";
        # The daemons' sockets, for the boxmaker group; llama/: llama-server's, on the socket.
        RuntimeDirectory = "boxmaker" + lib.optionalString (serve.socketDir != null) " boxmaker/llama";
        RuntimeDirectoryMode = "0750";
        WorkingDirectory = cfg.stateDir;
        # Above the connection caps, so a flood of clients is cut by the daemons' own limits,
        # never by running out of descriptors (docs/operations.md, "Open files").
        LimitNOFILE = cfg.maxOpenFiles;

        MemoryDenyWriteExecute = cfg.memoryDenyWriteExecute;
      } // hardening.unit cfg.llama.gpu // lib.optionalAttrs cfg.exec (hardening.execRelaxed // hardening.execDevices cfg.llama.gpu);
    };
  };
}
