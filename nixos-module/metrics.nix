# services.boxmaker.metrics: loopd's and boxd's Prometheus metrics on loopback TCP ports
# (docs/metrics.md), rendered into services.boxmaker.loopd.settings.metrics and
# services.boxmaker.boxd.settings.metrics as `[metrics] listen = "127.0.0.1:<port>"`, and the
# scrape jobs for a Prometheus on this machine (metrics.scrapeConfigs). The addresses are always
# loopback: the module never opens the firewall for them (a scraper elsewhere is the owner's
# decision: the daemons' settings.metrics with allow_remote, and their own firewall rule).
# brokerd's listener is brokerd.settings.metrics.listen (docs/operations.md, "Metrics"); when it
# is set, scrapeConfigs scrapes it too.
{ config, lib, ... }:

let
  cfg = config.services.boxmaker;
  inherit (lib) mkOption mkIf types;
  loopback = port: "127.0.0.1:${toString port}";
  # brokerd's own listener, when its freeform settings name one (and no configFile hides them).
  brokerdListen =
    if cfg.brokerd.configFile == null then cfg.brokerd.settings.metrics.listen or null else null;
  # One job per daemon, each target labelled with the box's name as its `instance`: the three
  # daemons of one box are one instance on the dashboard (docs/grafana-dashboard.json).
  job = name: target: {
    job_name = "boxmaker-${name}";
    static_configs = [ { targets = [ target ]; labels.instance = cfg.metrics.instance; } ];
  };
in
{
  options.services.boxmaker.metrics = {
    enable = mkOption {
      type = types.bool;
      default = false;
      description = ''
        Serve loopd's Prometheus metrics on 127.0.0.1:metrics.port and boxd's on
        127.0.0.1:metrics.boxdPort (their `[metrics] listen`), for a Prometheus on this machine:
        `services.prometheus.scrapeConfigs = config.services.boxmaker.metrics.scrapeConfigs;`.
        Off: the metrics are still at `GET /metrics` on the daemons' sockets. The firewall is
        not opened.
      '';
    };
    port = mkOption {
      type = types.port;
      default = 9464;
      description = "The port of loopd's metrics on 127.0.0.1.";
    };
    boxdPort = mkOption {
      type = types.port;
      default = 9466;
      description = ''
        The port of boxd's metrics on 127.0.0.1 (its children up, restarts, start times; its
        build and process). brokerd's is brokerd.settings.metrics.listen, 127.0.0.1:9465 by
        convention.
      '';
    };
    instance = mkOption {
      type = types.str;
      default = config.networking.hostName or "boxmaker";
      defaultText = lib.literalExpression "config.networking.hostName";
      description = ''
        The `instance` label scrapeConfigs gives each daemon's target, so that loopd, brokerd
        and boxd of one box are one instance on the dashboard's `instance` variable.
      '';
    };
    scrapeConfigs = mkOption {
      type = types.listOf types.attrs;
      readOnly = true;
      default =
        lib.optionals (cfg.enable && cfg.metrics.enable) [
          (job "loopd" (loopback cfg.metrics.port))
          (job "boxd" (loopback cfg.metrics.boxdPort))
        ]
        ++ lib.optional (brokerdListen != null) (job "brokerd" brokerdListen);
      defaultText = lib.literalMD ''
        one job per daemon that listens on TCP: boxmaker-loopd and boxmaker-boxd with
        metrics.enable, boxmaker-brokerd with brokerd.settings.metrics.listen
      '';
      description = ''
        Scrape jobs for the daemons' metrics listeners, for
        `services.prometheus.scrapeConfigs = config.services.boxmaker.metrics.scrapeConfigs;`
        (docs/operations.md, "Metrics").
      '';
    };
  };

  config = mkIf (cfg.enable && cfg.metrics.enable) {
    services.boxmaker.loopd.settings.metrics.listen = loopback cfg.metrics.port;
    services.boxmaker.boxd.settings.metrics.listen = loopback cfg.metrics.boxdPort;

    assertions = [
      {
        assertion = cfg.loopd.configFile == null;
        message = "services.boxmaker.metrics cannot go into services.boxmaker.loopd.configFile: write `[metrics] listen = \"127.0.0.1:${toString cfg.metrics.port}\"` into that file, or drop configFile.";
      }
      {
        assertion = cfg.metrics.port != cfg.metrics.boxdPort;
        message = "services.boxmaker.metrics.port and metrics.boxdPort are both ${toString cfg.metrics.port}: loopd and boxd need a port each.";
      }
    ];
  };
}
