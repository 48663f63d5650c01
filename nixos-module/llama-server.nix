# services.boxmaker.llama: who can reach llama-server's HTTP API (docs/security.md,
# "llama-server's slot API"). Whoever reaches it can save a slot into any session's KV file,
# restore any file into a slot, erase a slot (POST /slots/N?action=save|restore|erase), read a
# slot's prompt back a token at a time through `timings.cache_n`, and run the model outside
# loopd's budgets and logs. So by default llama-server listens on a Unix socket in a directory
# of the boxmaker user's alone (0700; llama-server and loopd both run as that user, under
# boxd), which no other local user, and no exec sandbox (it binds no /run), can enter.
#
# TCP, on loopback only (llama.host), is for a TLS proxy that serves llama-server to other
# machines as an endpoint (docs/scale-out.md): then an API key is required, which systemd
# hands the unit as a credential (LoadCredential=) and both llama-server (--api-key-file) and
# loopd ([llama] api_key_file) read. Never off loopback: llama-server's HTTP is plain, and
# boxd's readiness check and loopd (which refuses a key over http:// to another address)
# speak plain HTTP to it. The web UI is always off (--no-webui).
#
# default.nix puts `llama.serve` into llama-server's [[children]] entry and the unit;
# `llama.url` is loopd's default `[llama] url` and `--llama`.
{ config, lib, pkgs, ... }:

let
  cfg = config.services.boxmaker;
  l = cfg.llama;
  inherit (lib) mkOption mkIf types;

  # A RuntimeDirectory of the unit (default.nix), narrowed to 0700 by its ExecStartPre.
  socketDir = "/run/boxmaker/llama";
  # llama-server takes a --host ending in ".sock" for a Unix socket path.
  socket = "${socketDir}/llama.sock";

  # The credential's name has a "-", which brokerd.secrets' names cannot: no clash with them.
  credential = "llama-api-key";
  # Where systemd puts the unit's credentials ($CREDENTIALS_DIRECTORY). Written out, not read
  # from the environment: the path goes into llama-server's arguments and loopd.toml.
  keyPath = "/run/credentials/boxmaker.service/${credential}";

  tcp = l.host != null;
  keyed = l.apiKeyFile != null;
  keyFile = toString l.apiKeyFile;
  keyInStore = builtins.hasContext keyFile || lib.hasPrefix "${builtins.storeDir}/" keyFile;

  loopback = builtins.elem l.host [ "localhost" "::1" ] || builtins.match "127\\.[0-9.]+" l.host != null;
  urlHost = if lib.hasInfix ":" l.host then "[${l.host}]" else l.host;
  url = if tcp then "http://${urlHost}:${toString l.port}" else "unix:${socket}";

  # llama-server binds its socket without removing a file already there, and fails on one an
  # earlier llama-server left (killed, or crashed: boxd restarts it within the unit, whose
  # RuntimeDirectory stays). So the socket goes first; exec keeps the pid boxd watches.
  start = pkgs.writeShellScript "boxmaker-llama-server" ''
    set -eu
    rm -f -- ${socket}
    exec ${l.package}/bin/llama-server "$@"
  '';
in
{
  # loopd sends the key to its one llama-server: `[llama] api_key_file`, declared into
  # default.nix's loopd.settings (a default that looks at the endpoints, as `url`'s does: a
  # definition conditioned on loopd.settings would be infinite recursion). loopd refuses it
  # beside [[llama.endpoints]], which name each one's own; null is not written.
  options.services.boxmaker.loopd.settings = mkOption {
    type = types.submodule {
      options.llama = mkOption {
        type = types.submodule {
          options.api_key_file = mkOption {
            type = types.nullOr types.str;
            default = if keyed && (cfg.loopd.settings.llama.endpoints or [ ]) == [ ] then keyPath else null;
            defaultText = lib.literalMD "llama.apiKeyFile's credential, ${keyPath}, unless `endpoints` has any; else null (not written)";
            description = "The file loopd reads llama-server's API key from.";
          };
        };
      };
    };
  };

  options.services.boxmaker.llama = {
    host = mkOption {
      type = types.nullOr types.str;
      default = null;
      example = "127.0.0.1";
      description = ''
        null (the default): llama-server listens on a Unix socket, ${socket}, in a directory
        only the boxmaker user can enter, and loopd uses it. A loopback address: llama-server
        listens on TCP there, at llama.port, instead, for a TLS proxy (nginx, Caddy) that
        serves it to other machines' loopd ([[llama.endpoints]], docs/scale-out.md); then
        llama.apiKeyFile is required, since every local user (and an exec grant with network)
        reaches a TCP port. Any other address fails the evaluation: llama-server's HTTP is not
        encrypted.
      '';
    };

    port = mkOption {
      type = types.port;
      default = 8080;
      description = "llama-server's TCP port with llama.host; unused on the Unix socket (the default).";
    };

    apiKeyFile = mkOption {
      type = types.nullOr (types.either types.str types.path);
      default = null;
      example = "/run/agenix/llama-key";
      description = ''
        A file holding llama-server's API key, alone on one line, as a string (never a Nix
        path: the evaluation refuses one, and a file in the store, which every user can read).
        systemd hands it to the unit as the credential ${credential} (LoadCredential=, read as
        root at start: the file may stay root-only; a new key needs a restart); llama-server
        gets --api-key-file ${keyPath}, and loopd sends the key (`[llama] api_key_file`, unless
        loopd.settings.llama.endpoints are listed: give the local one that api_key_file; with
        loopd.configFile, write it into that file). Required with llama.host; optional on the
        socket.
      '';
    };

    url = mkOption {
      type = types.str;
      readOnly = true;
      default = url;
      defaultText = lib.literalExpression ''"unix:${socket}", or "http://<host>:<port>" with llama.host'';
      description = "Where loopd reaches this machine's llama-server: the url of its entry in loopd.settings.llama.endpoints.";
    };

    serve = mkOption {
      type = types.attrsOf types.unspecified;
      readOnly = true;
      internal = true;
      description = "llama-server's command, listening arguments and readiness, and the socket's directory (null on TCP), for default.nix.";
      default = {
        command = if tcp then "${l.package}/bin/llama-server" else "${start}";
        args = (if tcp then [ "--host" l.host "--port" (toString l.port) ] else [ "--host" socket ])
          ++ lib.optionals keyed [ "--api-key-file" keyPath ]
          ++ [ "--no-webui" ];
        # /health needs no key. llama-server accepts on its socket while the model still loads,
        # so loopd (which waits for /health) is the one that waits for the model then.
        ready = if tcp then { http = "${url}/health"; } else { inherit socket; };
        socketDir = if tcp then null else socketDir;
      };
    };
  };

  config = mkIf cfg.enable {
    systemd.services.boxmaker.serviceConfig.LoadCredential = mkIf keyed [ "${credential}:${keyFile}" ];

    assertions = [
      {
        assertion = !tcp || keyed;
        message = "services.boxmaker.llama.host = \"${toString l.host}\" serves llama-server over TCP, which every local user reaches, without services.boxmaker.llama.apiKeyFile: anyone could restore and read the sessions' KV caches through its slot API. Set apiKeyFile (a file outside the store holding the key), or leave host unset for the Unix socket (docs/security.md).";
      }
      {
        # llama-server splits --host at commas and takes a value ending in ".sock" for a socket.
        assertion = !tcp || (builtins.match "[^,/[:space:]]+" l.host != null && !(lib.hasSuffix ".sock" l.host));
        message = "services.boxmaker.llama.host must be one IP address or host name, got ${builtins.toJSON l.host}; leave it unset for the Unix socket.";
      }
      {
        # loopd refuses to send a key over http:// to anything but loopback, too; and boxd's
        # readiness check and loopd speak plain HTTP to this llama-server.
        assertion = !tcp || loopback;
        message = "services.boxmaker.llama.host = \"${toString l.host}\" is not a loopback address, and llama-server's HTTP is not encrypted: the API key and every prompt and answer would cross the network in the clear. Keep host on loopback (\"127.0.0.1\") and serve it to other machines through a TLS proxy (nginx, Caddy) on this one (docs/scale-out.md).";
      }
      {
        assertion = !keyed || !(builtins.isPath l.apiKeyFile);
        message = "services.boxmaker.llama.apiKeyFile is a Nix path (${keyFile}): Nix copies a path into the Nix store, which every user of the machine can read. Give the file agenix or sops-nix makes as a string, e.g. apiKeyFile = \"/run/agenix/llama-key\".";
      }
      {
        assertion = !keyed || builtins.isPath l.apiKeyFile || !keyInStore;
        message = "services.boxmaker.llama.apiKeyFile is in the Nix store (${keyFile}), which every user of the machine can read: keep the key out of the store (agenix, sops-nix, or a root-only file) and give its path as a string.";
      }
      {
        assertion = !keyed || lib.hasPrefix "/" keyFile;
        message = "services.boxmaker.llama.apiKeyFile must be an absolute path, got \"${keyFile}\".";
      }
    ];
  };
}
