# The options of services.boxmaker that default.nix renders into the daemons' configs and the
# unit (the model is model.nix's; schedules, metrics, web, secrets, llama-server's socket and
# the RPC worker have their own files). Reference: docs/operations.md, docs/config.md.
{ config, lib, pkgs, ... }:

let
  cfg = config.services.boxmaker;
  inherit (lib) mkOption mkEnableOption types;
  toml = pkgs.formats.toml { };
  inherit (import ./paths.nix) loopdSocket brokerdSocket;
  llamaUrl = cfg.llama.url;

  # Open files each process may need beyond the daemons' connection caps: llama-server's model
  # and HTTP connections, loopd's session logs and its connections to llama-server and brokerd,
  # MCP servers' pipes, boxd's children (docs/operations.md, "Open files").
  fileHeadroom = 4096;

  # loopd's [[llama.endpoints]] as far as the module can see them (docs/scale-out.md): with any,
  # loopd routes to them and must get neither `[llama] url` nor `--llama` (it refuses both).
  llamaEndpoints = if cfg.loopd.configFile != null then [ ] else cfg.loopd.settings.llama.endpoints or [ ];

  # brokerd's [[mcp]] servers as far as the module can see them (not in brokerd.configFile).
  mcpServers = if cfg.brokerd.configFile != null then [ ] else cfg.brokerd.settings.mcp or [ ];

  # brokerd's [[grants]] as rendered: `grants`, then brokerd.settings.grants.
  grants = cfg.grants ++ (cfg.brokerd.settings.grants or [ ]);

  # Whether a grant names brokerd's `exec` tool, as far as the module can see the grants.
  execGranted = cfg.brokerd.configFile == null
    && builtins.any (g: builtins.isAttrs g && (g.tool or null) == "exec") grants;

  # The template a catalogue entry names, in the package (which installs config/templates).
  templateOf = entry:
    if entry == null || entry.template == null || cfg.package == null then null
    else "${cfg.package}/share/boxmaker/templates/${entry.template}";

  # A freeform TOML table with a few typed keys.
  section = options: mkOption {
    type = types.submodule {
      freeformType = toml.type;
      inherit options;
    };
    default = { };
    description = "A section of the config file; any other key of docs/config.md may be set.";
  };

  # A key the daemon's command-line flag sets (and wins over the file): shown, never set.
  fixed = value: description: mkOption {
    type = types.str;
    readOnly = true;
    default = value;
    inherit description;
  };
in
{
  options.services.boxmaker = {
    enable = mkEnableOption "boxmaker, a private AI-agent appliance";

    # `or null`: without the flake's overlay an assertion says what to do (not mkPackageOption's
    # "boxmaker cannot be found in pkgs"), and the documentation renders from its defaultText.
    package = lib.mkPackageOption pkgs "boxmaker" {
      nullable = true;
      extraDescription = ''
        The boxmaker workspace (boxd, loopd, brokerd, boxctl; package.nix). The flake's
        nixosModules.default sets it; with nixos-module/ alone, add the flake's
        overlays.default to nixpkgs.overlays or set this.
      '';
    } // { default = pkgs.boxmaker or null; };

    llama = {
      package = lib.mkPackageOption pkgs "llama-cpp" {
        extraDescription = "It provides bin/llama-server (and bin/llama-rpc-server, for rpcWorker).";
      };
      chatTemplateFile = mkOption {
        type = types.nullOr types.path;
        default = templateOf cfg.modelEntry;
        defaultText = lib.literalMD "the template of the catalogue's model (`share/boxmaker/templates/` of the package), else null";
        description = ''
          A Jinja chat template (--chat-template-file); null: the model's own. A model of the
          catalogue (services.boxmaker.model) brings its own, from the package's
          share/boxmaker/templates.
        '';
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
      default = if cfg.modelEntry != null then cfg.modelEntry.contextSize else 24576;
      defaultText = lib.literalMD "the catalogue model's `contextSize`, else 24576";
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
            socket = fixed loopdSocket "loopd's API socket (loopd's --socket, which wins over the file).";
            state_dir = fixed "${cfg.stateDir}/loopd" "loopd's state (loopd's --state-dir, under stateDir).";
            llama = section {
              url = mkOption {
                type = types.nullOr types.str;
                default = if llamaEndpoints == [ ] then llamaUrl else null;
                defaultText = lib.literalMD "this machine's llama-server; null (not written) when `endpoints` has any";
                description = "llama-server's URL; null with [[llama.endpoints]], which loopd takes instead (docs/scale-out.md).";
              };
            };
            broker = section {
              socket = fixed brokerdSocket "brokerd's socket (loopd's --broker, which wins over the file).";
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
            socket = fixed brokerdSocket "brokerd's socket (brokerd's --socket, which wins over the file).";
            state_dir = fixed "${cfg.stateDir}/brokerd" "brokerd's state (brokerd's --state-dir, under stateDir).";
            limits = section {
              call_timeout_ms = mkOption { type = types.ints.positive; default = 30000; description = "The longest tool call."; };
              max_connections = mkOption { type = types.ints.positive; default = 128; description = "Most connections open on brokerd's socket (counted in maxOpenFiles)."; };
            };
          };
        };
        default = { };
        description = "brokerd's config (docs/config.md) without its secrets (brokerd.secrets), rendered as TOML; its `grants` follow services.boxmaker.grants.";
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
      description = ''
        brokerd's [[grants]] (docs/config.md). brokerd.settings.grants, if any, are rendered
        after these (both lists are kept). None in either: every tool call is denied.
      '';
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

    brokerd.renderedGrants = mkOption {
      type = types.listOf toml.type;
      readOnly = true;
      internal = true;
      default = grants;
      description = "brokerd's [[grants]] as rendered: grants, then brokerd.settings.grants.";
    };

    boxd.settings = mkOption {
      type = types.submodule {
        freeformType = toml.type;
        options = {
          log.level = mkOption {
            type = types.enum [ "trace" "debug" "info" "warn" "error" ];
            default = "info";
            description = "boxd's log level (its own lines in the journal; the children have theirs).";
          };
          metrics.listen = mkOption {
            type = types.nullOr types.str;
            default = null;
            example = "127.0.0.1:9465";
            description = ''
              Where boxd serves GET /metrics over TCP (boxd's `[metrics] listen`, loopback unless
              `metrics.allow_remote`); null: on its socket only (/run/boxmaker/boxd.sock, for the
              boxmaker group). The firewall is not opened.
            '';
          };
          restart = section { };
        };
      };
      default = { };
      description = ''
        boxd's config (docs/config.md, "boxd"), rendered as TOML beside what the module writes
        itself: `notify`, `runtime_dir`, `socket`, `socket_group` and `[[children]]` are the
        module's (setting one fails the evaluation); `[restart]` may be changed key by key.
      '';
    };
  };
}
