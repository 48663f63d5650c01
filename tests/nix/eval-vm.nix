# Evaluates the VM test (tests/nix/vm-test.nix, the flake's checks.<system>.vm) offline: its
# node's configuration through nixos-module/ with nixpkgs' real lib and the stand-ins of
# tests/nix/stand-in.nix, asserting that the model server is fakellama's llama-server wrapper
# (tests/nix/fakellama-server.nix), that what the test script waits for exists, and that the
# test script holds each step (task with a tool, approval, schedule, reboot, sessions found)
# and each marker of fakellama's script (tests/nix/vm-fakellama.toml).
# Run: nix-instantiate --eval --strict --json --read-write-mode tests/nix/eval-vm.nix \
#   --argstr binDir DIR      (DIR/bin holds loopd, brokerd, boxd, boxctl and fakellama)
# Prints what tests/nix/vm-check.sh runs next: the wrapper's text, llama-server's arguments as
# boxd would give them, the node's config build script (the --check-config runs), and the test
# script (tests/nix/vm-rehearsal.py runs it here).
{ binDir }:
let
  lib = import ./nixpkgs-lib/lib;
  standIn = import ./stand-in.nix { inherit lib binDir; };

  drv = name: outPath: { type = "derivation"; inherit name outPath; };

  # What vm-test.nix takes from pkgs beyond the stand-in's: the wrapper keeps its text (the
  # checks run it), and runNixOSTest hands back the test as written.
  pkgs = standIn.pkgs // {
    inherit lib;
    writeShellScriptBin = name: text:
      drv name "${builtins.storeDir}/00000000000000000000000000000003-${name}" // { inherit text; };
    testers.runNixOSTest = test: test;
  };

  # The debug build's fakellama, beside the daemons in binDir/bin.
  fakellama = drv "fakellama" binDir;
  test = import ./vm-test.nix {
    inherit pkgs fakellama;
    module = ../../nixos-module/default.nix;
    package = pkgs.boxmaker;
  };

  # The NixOS options the node sets beyond the stand-in's declarations: the VM's size and the
  # owner's account (users.users' submodule merges with the stand-in's).
  nodeOptions = {
    options.virtualisation = {
      memorySize = lib.mkOption { type = lib.types.ints.positive; description = "The VM's memory, MiB."; };
      cores = lib.mkOption { type = lib.types.ints.positive; description = "The VM's CPUs."; };
    };
    options.users.users = lib.mkOption {
      type = lib.types.attrsOf (lib.types.submodule {
        options.isNormalUser = lib.mkOption { type = lib.types.bool; default = false; description = "A person's account."; };
        options.extraGroups = lib.mkOption { type = lib.types.listOf lib.types.str; default = [ ]; description = "Its groups."; };
      });
    };
  };

  evaluated = lib.evalModules {
    modules = [ standIn.nixosModule nodeOptions { _module.args.pkgs = pkgs; } test.nodes.box ];
  };
  config = lib.asserts.checkAssertWarn evaluated.config.assertions evaluated.config.warnings evaluated.config;
  cfg = config.services.boxmaker;
  unit = config.systemd.services.boxmaker;

  script = builtins.fromTOML (builtins.readFile ./vm-fakellama.toml);
  wrapper = cfg.llama.package;

  # The boxd.toml the config build fills in (placeholders for the pins: valid TOML still).
  boxd = builtins.fromTOML (builtins.unsafeDiscardStringContext (builtins.readFile (builtins.head
    (builtins.match ".* ([^ \n]*boxd.toml.in) > .*" cfg.configDir.script))));
  llamaChild = builtins.head (builtins.filter (c: c.name == "llama-server") boxd.children);
  loopdChild = builtins.head (builtins.filter (c: c.name == "loopd") boxd.children);
  # The module's start script (a real file in the stand-in), which execs llama.package's binary.
  startScript = builtins.readFile llamaChild.command;

  socketOf = url: lib.removePrefix "unix:" url;
  text = test.testScript;
  holds = piece: lib.hasInfix piece text;
  # lib.hasInfix refuses a needle that names a store path (with its context).
  within = haystack: piece: lib.hasInfix (builtins.unsafeDiscardStringContext piece)
    (builtins.unsafeDiscardStringContext haystack);
  check = what: ok: if ok then true else throw "eval-vm: ${what}";

  userRules = builtins.filter (r: (r.when_role or null) == "user") script.rule;
  # An answer's marker: its text up to the first ":" (the whole reply when it has none).
  marker = reply: builtins.head (lib.splitString ":" reply);
  scheduleTasks = map (s: s.task) cfg.schedules;
  # The text of the task whose call waits for the owner, as the test script sends it.
  noteTask = builtins.head (builtins.match
    ".*\"boxctl task --session vm-approve \" \\+ shlex\\.quote\\(\"([^\"]*)\"\\).*" text);

  checks = [
    (check "the model server is fakellama's llama-server wrapper"
      (wrapper.name == "llama-server"
        && within wrapper.text "exec ${binDir}/bin/fakellama \"$@\""
        && within wrapper.text "--script ${./vm-fakellama.toml}"))
    (check "boxd starts the module's start script, which execs the wrapper"
      (within startScript "exec ${wrapper.outPath}/bin/llama-server \"$@\""))
    (check "llama-server's child listens on the Unix socket the test checks"
      (builtins.elem "/run/boxmaker/llama/llama.sock" llamaChild.args
        && llamaChild.ready.socket == "/run/boxmaker/llama/llama.sock"
        && socketOf cfg.llama.url == "/run/boxmaker/llama/llama.sock"
        && holds "test -S /run/boxmaker/llama/llama.sock"))
    (check "the unit the test waits for: boxmaker.service, started at boot, Type=notify"
      (unit.serviceConfig.Type == "notify" && builtins.elem "multi-user.target" unit.wantedBy
        && holds ''box.wait_for_unit("boxmaker.service"''))
    (check "loopd's socket is the file the test waits for"
      (cfg.loopd.settings.socket == "/run/boxmaker/loopd.sock"
        && builtins.elem "/run/boxmaker/loopd.sock" loopdChild.args
        && holds ''box.wait_for_file("/run/boxmaker/loopd.sock")''))
    (check "the processes the test looks for are boxd's children"
      (builtins.all (n: builtins.any (c: c.name == n) boxd.children) [ "brokerd" "loopd" ]
        && builtins.all holds [ "pgrep -x fakellama" "pgrep -x brokerd" "pgrep -x loopd" ]))
    (check "the owner may use boxctl (the boxmaker group), which is on the system path"
      (builtins.elem "boxmaker" config.users.users.alice.extraGroups
        && config.users.users.alice.isNormalUser
        && builtins.elem cfg.package config.environment.systemPackages
        && holds ''"su alice -c "''))
    (check "step: a task with a tool call (clock, granted to every session)"
      (holds ''boxctl("task --session vm-clock "'' && holds ''"→ clock" in out''
        && builtins.elem { tool = "clock"; sessions = [ "*" ]; } cfg.grants))
    (check "step: a task whose call waits for the owner's approval, then `boxctl approve`"
      (holds "boxctl task --session vm-approve " && holds ''boxctl("approve "''
        && holds ''boxctl("approvals --json")''
        && builtins.any (g: g.tool == "write_file" && (g.approve or null) == "always") cfg.grants
        && builtins.elem "write_file" cfg.loopd.settings.broker.core_tools))
    (check "step: a schedule that runs by itself, into the session the test reads"
      (builtins.any (s: s.name == "vm-tick" && s.session == "vm-schedule" && s.every != null && (s.enabled or null) != false)
        cfg.loopd.settings.schedules
        && holds "boxctl show vm-schedule"))
    (check "step: a reboot, then boxd again"
      (holds "box.shutdown()\n    box.start()\n    wait_for_boxd()"))
    (check "step: the sessions found after the reboot"
      (holds ''sessions = boxctl("sessions")'' && holds ''boxctl("show vm-clock")'' && holds ''boxctl("show vm-approve")''
        && builtins.all (s: holds "\"${s}\"") [ "vm-clock" "vm-approve" "vm-schedule" ]))
    (check "each task of fakellama's script is one the test or the schedule sends"
      (builtins.all (r: holds r.when_contains || builtins.any (lib.hasInfix r.when_contains) scheduleTasks) userRules))
    # loopd runs write_file only on a path the owner's own words hold (docs/config.md,
    # loop.owner_paths_tools); else it answers the call itself and no approval is asked.
    (check "each path fakellama's script writes is written in the owner's words of the approval task"
      (builtins.all (c: c.name != "write_file" || lib.hasInfix (builtins.fromJSON c.arguments).path noteTask)
        (lib.concatMap (r: r.tool_calls or [ ]) script.rule)))
    (check "each answer of fakellama's script is one the test looks for"
      (builtins.all (r: !(r ? reply) || holds (marker r.reply)) script.rule))
  ];
in
builtins.deepSeq checks {
  wrapper = wrapper.text;
  llamaArgs = llamaChild.args;
  configScript = cfg.configDir.script;
  testScript = text;
}
