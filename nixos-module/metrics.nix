# services.boxmaker.metrics: loopd's Prometheus metrics on a loopback TCP port
# (docs/metrics.md), rendered into services.boxmaker.loopd.settings.metrics as
# `[metrics] listen = "127.0.0.1:<port>"`. The address is always loopback: Prometheus on the
# same machine scrapes it, and the module never opens the firewall for it (a scraper elsewhere
# is the owner's decision: loopd.settings.metrics with allow_remote, and their own firewall
# rule). brokerd's listener is brokerd.settings.metrics.listen (docs/operations.md, "Metrics").
{ config, lib, ... }:

let
  cfg = config.services.boxmaker;
  inherit (lib) mkOption mkIf types;
in
{
  options.services.boxmaker.metrics = {
    enable = mkOption {
      type = types.bool;
      default = false;
      description = ''
        Serve loopd's Prometheus metrics on 127.0.0.1:metrics.port (loopd's
        `[metrics] listen`), for a Prometheus on this machine (docs/operations.md has a
        services.prometheus.scrapeConfigs snippet). Off: the metrics are still at
        `GET /metrics` on loopd's socket. The firewall is not opened.
      '';
    };
    port = mkOption {
      type = types.port;
      default = 9464;
      description = "The port of loopd's metrics on 127.0.0.1.";
    };
  };

  config = mkIf (cfg.enable && cfg.metrics.enable) {
    services.boxmaker.loopd.settings.metrics.listen = "127.0.0.1:${toString cfg.metrics.port}";

    assertions = [
      {
        assertion = cfg.loopd.configFile == null;
        message = "services.boxmaker.metrics cannot go into services.boxmaker.loopd.configFile: write `[metrics] listen = \"127.0.0.1:${toString cfg.metrics.port}\"` into that file, or drop configFile.";
      }
    ];
  };
}
