# services.boxmaker.schedules: loopd's [[schedules]] (docs/schedules.md) as a typed list,
# rendered into services.boxmaker.loopd.settings.schedules. The keys are loopd's own; a key left
# null is not written, so loopd's default applies (the module does not repeat loopd's defaults,
# which loopd's --check-config at build time is the judge of, like the cron expression itself).
{ config, lib, ... }:

let
  cfg = config.services.boxmaker;
  inherit (lib) mkOption mkIf types;

  optional = type: description: mkOption {
    type = types.nullOr type;
    default = null;
    inherit description;
  };

  schedule = types.submodule {
    options = {
      name = mkOption {
        # docs/schedules.md: 1 to 32 bytes of A-Z a-z 0-9 . _ -.
        type = types.strMatching "[A-Za-z0-9._-]{1,32}";
        example = "morning";
        description = "Its unique name (1 to 32 of A-Z a-z 0-9 . _ -); `heartbeat` is the heartbeat's.";
      };
      cron = optional types.str "Five cron fields (minute hour day-of-month month day-of-week), read in `timezone`; exactly one of cron and every.";
      every = optional types.str "An interval (humantime: `30m`, `1h 30m`), from one interval after loopd starts; exactly one of cron and every.";
      timezone = optional types.str "The IANA time zone the cron expression is read in; null: UTC.";
      task = optional types.str "The task's text; exactly one of task and task_file.";
      task_file = optional types.path ''
        A file with the task's text, read at each run; exactly one of task and task_file. A Nix
        path (./morning.md) is copied into the store, which every user can read: give a string
        ("/etc/boxmaker/morning.md") for a task that is private.
      '';
      session = optional types.str ''A fixed session id, or "new": a fresh session per run, named <name>-<time>-<random>.'';
      missed = optional (types.enum [ "skip" "run_once" ]) "What to do at start about runs that fell due while loopd was down: none, or one catch-up run.";
      quiet_reply = optional types.str "An answer equal to it (trimmed) is quiet: no notification under notify = \"unless_quiet\".";
      notify = optional (types.enum [ "always" "unless_quiet" "never" ]) "When a run's answer becomes a notification.";
      enabled = optional types.bool "false: it never runs by itself (`boxctl schedule run` still runs it).";
    };
  };

  # The TOML table of one schedule: only the keys that are set; a task_file path as a string
  # (interpolated, so a Nix path is the store copy, not the path on the building machine).
  render = s: lib.filterAttrs (_: v: v != null) (s // {
    task_file = if s.task_file == null then null else "${s.task_file}";
  });

  names = map (s: s.name) cfg.schedules;
  repeated = lib.unique (lib.filter (n: lib.count (m: m == n) names > 1) names);
  both = a: b: s: s.${a} != null && s.${b} != null;
  neither = a: b: s: s.${a} == null && s.${b} == null;
  # An assertion per schedule that breaks `ok`.
  each = ok: message: map (s: { assertion = ok s; message = message s; }) cfg.schedules;
  quoted = s: "services.boxmaker.schedules: \"${s.name}\"";
in
{
  options.services.boxmaker.schedules = mkOption {
    type = types.listOf schedule;
    default = [ ];
    example = lib.literalExpression ''
      [
        {
          name = "morning";
          cron = "0 7 * * *";
          timezone = "Europe/Berlin";
          task = "Summarise what changed in files/ since yesterday.";
          session = "new";
          missed = "run_once";
          quiet_reply = "NOTHING_NEW";
          notify = "unless_quiet";
        }
      ]
    '';
    description = ''
      Tasks loopd runs by itself at set times (docs/schedules.md), rendered into loopd's settings
      as [[schedules]]; `boxctl schedules` lists them. The heartbeat is set with
      loopd.settings.heartbeat.every, not here.
    '';
  };

  config = mkIf (cfg.enable && cfg.schedules != [ ]) {
    services.boxmaker.loopd.settings.schedules = map render cfg.schedules;

    assertions = [
      {
        assertion = repeated == [ ];
        message = "services.boxmaker.schedules: each name must be unique; used more than once: ${lib.concatStringsSep ", " repeated}.";
      }
      {
        assertion = cfg.loopd.configFile == null;
        message = "services.boxmaker.schedules cannot go into services.boxmaker.loopd.configFile: write them into that file as [[schedules]], or drop configFile.";
      }
    ]
    ++ each (s: s.name != "heartbeat")
      (s: "${quoted s}: the name heartbeat is the heartbeat's own; set loopd.settings.heartbeat.every for it.")
    ++ each (s: !(both "cron" "every" s) && !(neither "cron" "every" s))
      (s: "${quoted s} must set exactly one of cron and every; it sets ${if both "cron" "every" s then "both" else "neither"}.")
    ++ each (s: !(both "task" "task_file" s) && !(neither "task" "task_file" s))
      (s: "${quoted s} must set exactly one of task and task_file; it sets ${if both "task" "task_file" s then "both" else "neither"}.");
  };
}
