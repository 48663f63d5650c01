# services.boxmaker.web: loopd's web console on a loopback TCP port (docs/web.md), rendered into
# services.boxmaker.loopd.settings.web as `[web] listen = "127.0.0.1:<port>"`, and `origin`
# when set. The address is always loopback and the module never opens the firewall for it: a
# browser elsewhere comes through a reverse proxy on this machine (nginx with TLS, its URL in
# `origin`) or an SSH tunnel (docs/web.md, "Remote access").
{ config, lib, ... }:

let
  cfg = config.services.boxmaker;
  inherit (lib) mkOption mkIf types;
  listen = "127.0.0.1:${toString cfg.web.port}";
  rendered = { inherit listen; } // lib.optionalAttrs (cfg.web.origin != null) { inherit (cfg.web) origin; };
  # The lines to write into loopd.configFile instead, for the assertion's message.
  lines = "`[web]` with `listen = \"${listen}\"`"
    + lib.optionalString (cfg.web.origin != null) " and `origin = \"${cfg.web.origin}\"`";
in
{
  options.services.boxmaker.web = {
    enable = mkOption {
      type = types.bool;
      default = false;
      description = ''
        Serve loopd's web console on 127.0.0.1:web.port (loopd's `[web] listen`). Sign in with
        the one-time link `boxctl web` prints. The firewall is not opened: reach it from
        elsewhere through a reverse proxy on this machine (set web.origin) or an SSH tunnel
        (docs/web.md).
      '';
    };
    port = mkOption {
      type = types.port;
      default = 8740;
      description = "The port of loopd's web console on 127.0.0.1.";
    };
    origin = mkOption {
      type = types.nullOr types.str;
      default = null;
      example = "https://box.example.com";
      description = ''
        The URL the browser uses, when it is not http://127.0.0.1:web.port: a reverse proxy's,
        for example "https://box.example.com" (loopd's `[web] origin`). loopd puts it in the
        sign-in link, accepts its host in the Host header and its value in the Origin header of
        a request that changes something, and marks the cookie Secure when it is https. null:
        not written (loopd's default, http://<listen>).
      '';
    };
  };

  config = mkIf (cfg.enable && cfg.web.enable) {
    services.boxmaker.loopd.settings.web = rendered;

    assertions = [
      {
        assertion = cfg.loopd.configFile == null;
        message = "services.boxmaker.web cannot go into services.boxmaker.loopd.configFile: write ${lines} into that file, or drop configFile.";
      }
    ];
  };
}
