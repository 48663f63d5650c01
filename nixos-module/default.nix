# services.boxmaker: the boxmaker appliance. One systemd unit runs boxd, which starts
# llama-server, then brokerd and loopd together (loopd waits for brokerd itself), with configs
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
  inherit (lib) mkOption mkIf types;
  toml = pkgs.formats.toml { };
  # The units' shared hardening set, the GPU's device nodes and what brokerd's exec tool needs.
  hardening = import ./hardening.nix { inherit lib; };

  inherit (import ./paths.nix) loopdSocket brokerdSocket boxdSocket;
  # llama-server's Unix socket, or its TCP address with llama.host (llama-server.nix).
  llamaUrl = cfg.llama.url;
  serve = cfg.llama.serve;

  # The longest llama-server may take to load its model, in milliseconds.
  llamaStartMs = 300000;

  # systemd's watchdog (WatchdogSec): boxd pings it every half of this (crates/boxd's notify.rs:
  # WATCHDOG_USEC / 2), from its start on, on its own task; a boxd that misses two pings in a row
  # is hung, and systemd kills and restarts the unit (Restart=on-failure).
  watchdogSec = 60;

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

  # Whether loopd or llama-server reaches other machines (RPC workers, remote endpoints): then
  # the unit waits for the network to be up, not only configured.
  remote = cfg.llama.rpcServers != [ ] || llamaEndpoints != [ ];

  # llama-server's flags the module sets itself: where it listens and its key (llama.host,
  # llama.apiKeyFile: the socket is what keeps its slot API private), its web UI (off), and what
  # the unit's layout fixes (the model, context and slots have their options; the slot files'
  # directory is loopd's [kv] dir).
  moduleFlags = [
    "--host" "--port" "--api-key" "--api-key-file" "--webui" "--no-webui" "--path"
    "-m" "--model" "-c" "--ctx-size" "-np" "--parallel" "--slot-save-path"
  ];
  modelFlags = if cfg.modelEntry != null then cfg.modelEntry.llamaFlags or [ ] else [ ];
  takenFlags = builtins.filter (f: builtins.elem (builtins.head (lib.splitString "=" f)) moduleFlags)
    (modelFlags ++ cfg.llama.extraFlags);

  # What boxd.toml holds that is the module's own (boxd.settings may set the rest).
  boxdOwnKeys = builtins.filter (k: cfg.boxd.settings ? ${k}) [ "notify" "runtime_dir" "socket" "socket_group" "children" ];

  loopdFile =
    if cfg.loopd.configFile != null then cfg.loopd.configFile
    # TOML has no null: a url left null (endpoints instead) is not written.
    else toml.generate "loopd.toml" (cfg.loopd.settings // {
      llama = lib.filterAttrs (_: v: v != null) cfg.loopd.settings.llama;
    });

  brokerdFile =
    if cfg.brokerd.configFile != null then cfg.brokerd.configFile
    else toml.generate "brokerd.toml" (cfg.brokerd.settings // { grants = cfg.brokerd.renderedGrants; });

  # boxd's config; @LOOPD_SHA256@ and @BROKERD_SHA256@ are filled in by `configs` below.
  boxdSettings = cfg.boxd.settings // {
    # READY=1 once every child is ready, and the watchdog's pings (WatchdogSec below).
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
    } // cfg.boxd.settings.restart;
    # TOML has no null: no listen, no [metrics] listener (boxd's socket still serves /metrics).
    metrics = lib.filterAttrs (_: v: v != null) cfg.boxd.settings.metrics;
    children = [
      {
        name = "llama-server";
        inherit (serve) command;
        # Where it listens (and its key, and --no-webui), from llama-server.nix.
        args = serve.args ++ [
          "-m" (toString cfg.modelFile)
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
        # What the catalogue's model needs, then the owner's own.
        ++ modelFlags
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
        # Started beside brokerd, not once brokerd is ready: loopd waits for brokerd's answer
        # itself (up to 5 s), and for the model's load.
        with_previous = true;
        # glibc's allocator as config/boxd.toml sets it for loopd: one arena and a fixed trim
        # threshold, so memory freed after a burst of sessions goes back to the system.
        env.GLIBC_TUNABLES = "glibc.malloc.arena_max=1:glibc.malloc.trim_threshold=131072";
      }
    ];
  };

  boxdTemplate = toml.generate "boxd.toml.in" boxdSettings;

  # The three configs, checked by the daemons themselves and pinned. Only coreutils and sed.
  # TZDIR: loopd's check reads the schedules' and the budget's time zones, and the build's
  # sandbox has no /etc/zoneinfo.
  configs = pkgs.runCommand "boxmaker-config" { TZDIR = "${pkgs.tzdata}/share/zoneinfo"; } ''
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
  # options.nix: the options rendered here; model.nix: services.boxmaker.model and the catalogue.
  imports = [ ./options.nix ./model.nix ./schedules.nix ./metrics.nix ./web.nix ./secrets.nix ./rpc-worker.nix ./llama-server.nix ./chat.nix ];

  # No maintainer attribute set exists for this project (it is not in nixpkgs' maintainer list);
  # the owner of this flake is the module's maintainer.
  meta.maintainers = [ ];

  options.services.boxmaker = {
    configDir = mkOption {
      type = types.package;
      readOnly = true;
      default = configs;
      defaultText = lib.literalMD "the three configs, rendered from the settings and checked";
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
      {
        assertion = boxdOwnKeys == [ ];
        message = "services.boxmaker.boxd.settings sets ${lib.concatStringsSep ", " boxdOwnKeys}, which the module writes itself (boxd's socket in /run/boxmaker, READY=1 and the watchdog, the RuntimeDirectory, llama-server, brokerd and loopd as its children): leave ${if builtins.length boxdOwnKeys == 1 then "it" else "them"} out.";
      }
      {
        # The socket (llama-server.nix) is what keeps the slot API from other users.
        assertion = takenFlags == [ ];
        message = "services.boxmaker.llama.extraFlags sets ${lib.concatStringsSep " " takenFlags}, which the module sets itself: where llama-server listens is llama.host and llama.port (a Unix socket by default, so that no other user reaches its slot API), its key llama.apiKeyFile, its web UI stays off, and the model, context, slots and slot files are services.boxmaker.model, contextSize, slots and stateDir.";
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
      # RPC workers or remote endpoints: llama-server and loopd connect out at start.
      after = [ "network.target" ] ++ lib.optional remote "network-online.target";
      wants = lib.optional remote "network-online.target";
      # bwrap, for brokerd's `exec` tool: brokerd finds it on PATH (bxsandbox-shim is in the
      # package, next to brokerd). Without services.boxmaker.exec the unit's namespace
      # restrictions stop it and brokerd says so. slirp4netns is the network of a grant with
      # network = true (the sandbox's own namespace, never the host's); without it such a grant
      # fails and brokerd says why.
      path = [ pkgs.bubblewrap pkgs.slirp4netns ];
      # loopd reads the time zones of schedules and of the budget's days from the system's
      # time-zone database (TZif files); this one, so they do not depend on /etc and follow
      # the system's tzdata updates (docs/schedules.md).
      environment.TZDIR = "${pkgs.tzdata}/share/zoneinfo";
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
        WatchdogSec = "${toString watchdogSec}s";
        # What the daemons, llama-server and the tools write (sessions, KV files, audit log, a
        # tool's files) is the boxmaker user's alone; the sockets' modes are set explicitly.
        UMask = "0077";
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
