# services.boxmaker.rpcWorker: a llama.cpp RPC worker (rpc-server), which lends this machine's
# memory and compute to a llama-server elsewhere that names it in services.boxmaker.llama.
# rpcServers (docs/scale-out.md). Its own hardened unit, boxmaker-rpc-worker, independent of
# services.boxmaker.enable: a worker machine runs only this.
#
# The RPC protocol has no authentication and no encryption: whoever reaches the port can
# allocate memory on the worker, write and read its tensors (the model's weights, the KV cache)
# and run graphs on it. So it listens on loopback by default, a non-loopback host is warned
# about, and the firewall stays shut unless openFirewall says otherwise.
{ config, lib, ... }:

let
  cfg = config.services.boxmaker;
  w = cfg.rpcWorker;
  inherit (lib) mkOption mkEnableOption mkIf types;
  hardening = import ./hardening.nix { inherit lib; };

  name = "boxmaker-rpc-worker";
  loopback = builtins.elem w.host [ "localhost" "::1" ] || builtins.match "127\\.[0-9.]+" w.host != null;

  command = [ "${w.package}/bin/${w.executable}" "--host" w.host "--port" (toString w.port) ]
    ++ lib.optionals (w.threads != null) [ "--threads" (toString w.threads) ]
    ++ w.extraFlags;
in
{
  options.services.boxmaker.rpcWorker = {
    enable = mkEnableOption "a llama.cpp RPC worker (rpc-server) for a llama-server elsewhere (docs/scale-out.md)";

    package = mkOption {
      type = types.package;
      default = cfg.llama.package;
      defaultText = lib.literalExpression "config.services.boxmaker.llama.package";
      description = ''
        The llama.cpp package providing the worker. It must be built with RPC
        (`pkgs.llama-cpp.override { rpcSupport = true; }`) and be the same llama.cpp version
        as the llama-server that uses it: the RPC protocol's version must match.
      '';
    };

    executable = mkOption {
      type = types.str;
      default = "llama-rpc-server";
      example = "ggml-rpc-server";
      description = ''
        The worker's file in the package's bin/: nixpkgs' llama-cpp with rpcSupport installs
        it as llama-rpc-server; llama.cpp's own install names it ggml-rpc-server (rpc-server
        before).
      '';
    };

    host = mkOption {
      type = types.str;
      default = "127.0.0.1";
      example = "10.100.0.2";
      description = ''
        The address the worker listens on (`--host`). Anything but loopback exposes it: the
        worker has no authentication and no encryption, so listen only on a trusted network's
        or a WireGuard interface's address, never on one the internet or untrusted machines
        reach (the evaluation warns otherwise).
      '';
    };

    port = mkOption {
      type = types.port;
      default = 50052;
      description = "The worker's TCP port (`--port`).";
    };

    openFirewall = mkOption {
      type = types.bool;
      default = false;
      description = ''
        Open the port in the firewall on every interface. Better: leave this off and open it
        on the tunnel's interface only (networking.firewall.interfaces.wg0.allowedTCPPorts).
      '';
    };

    allowedClients = mkOption {
      type = types.listOf types.str;
      default = [ ];
      example = [ "10.100.0.1/32" ];
      description = ''
        When not empty, the only addresses (IP or CIDR, systemd's IPAddressAllow=) the worker
        exchanges packets with, besides localhost: every other address is dropped by the unit
        (IPAddressDeny=any), whatever the firewall says. Name the llama-server's address.
      '';
    };

    threads = mkOption {
      type = types.nullOr types.ints.positive;
      default = null;
      description = "CPU threads of the worker (`--threads`); null: llama.cpp's default, half the cores.";
    };

    gpu = mkOption {
      type = types.bool;
      default = false;
      description = ''
        Let the worker use the GPU (a GPU build of package): the unit sees the GPU's device
        nodes, as services.boxmaker.llama.gpu does for the appliance. Off: CPU only.
      '';
    };

    extraFlags = mkOption {
      type = types.listOf types.str;
      default = [ ];
      example = [ "--cache" ];
      description = ''
        More arguments for the worker, e.g. `--cache` (keeps large tensors in the unit's
        CacheDirectory, so a restarted llama-server sends them again only by hash) or
        `--device CUDA0`.
      '';
    };
  };

  config = mkIf w.enable {
    warnings = lib.optional (!loopback)
      "services.boxmaker.rpcWorker.host = \"${w.host}\" is not a loopback address: the llama.cpp RPC worker has no authentication and no encryption, so anyone who can reach port ${toString w.port} on ${w.host} can read and overwrite the model's weights and cache and use the machine's memory and compute. Listen only on a trusted network or a WireGuard tunnel, and set rpcWorker.allowedClients to the llama-server's address (docs/scale-out.md)."
    ++ lib.optional (w.openFirewall && loopback)
      "services.boxmaker.rpcWorker.openFirewall opens port ${toString w.port}, but the worker listens on ${w.host} (loopback), which no other machine reaches: set rpcWorker.host."
    ++ lib.optional (hardening.lacksRpc w.package)
      "services.boxmaker.rpcWorker.package is built without llama.cpp's RPC backend (its cmakeFlags lack -DGGML_RPC=ON), so it has no ${w.executable}. Use rpcWorker.package = pkgs.llama-cpp.override { rpcSupport = true; }.";

    networking.firewall.allowedTCPPorts = lib.optional w.openFirewall w.port;

    systemd.services.${name} = {
      description = "llama.cpp RPC worker (rpc-server) for boxmaker on ${w.host}:${toString w.port}";
      wantedBy = [ "multi-user.target" ];
      # A non-loopback address (a tunnel's) must exist before the worker can bind it; until
      # then the bind fails and Restart= tries again.
      after = [ "network.target" ] ++ lib.optional (!loopback) "network-online.target";
      wants = lib.optional (!loopback) "network-online.target";
      serviceConfig = {
        ExecStart = lib.escapeShellArgs command;
        # No state: a user of its own for each run, which owns nothing on the machine.
        DynamicUser = true;
        Restart = "on-failure";
        RestartSec = "5s";
        # `--cache` writes here (llama.cpp reads LLAMA_CACHE); ProtectSystem=strict shuts
        # everything else.
        CacheDirectory = name;
        CacheDirectoryMode = "0700";
        Environment = [ "LLAMA_CACHE=/var/cache/${name}" ];
        UMask = "0077";
        # llama.cpp's CPU backend runs compiled kernels and writes no code at run time; checked
        # by running the worker through a turn under PR_SET_MDWE (docs/scale-out.md).
        MemoryDenyWriteExecute = true;
      } // hardening.unit w.gpu // lib.optionalAttrs (w.allowedClients != [ ]) {
        IPAddressDeny = "any";
        IPAddressAllow = [ "localhost" ] ++ w.allowedClients;
      };
    };
  };
}
