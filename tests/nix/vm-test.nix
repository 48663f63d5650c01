# The VM test, the flake's checks.<system>.vm (pkgs.testers.runNixOSTest): boots the appliance
# with fakellama as its llama-server (tests/nix/fakellama-server.nix, answering from
# tests/nix/vm-fakellama.toml), so it needs no model, GPU or network, and walks what an owner
# does: waits for boxd, runs a task with a tool call (clock), a task whose call waits for the
# owner's approval (write_file, approve = "always": `boxctl approve`), lets a schedule run by
# itself, then reboots and finds the sessions again. Run: docs/operations.md ("Nix checks").
# scripts/nix-checks.sh evaluates it offline with pkgs stand-ins (tests/nix/eval-vm.nix).
{
  pkgs,
  # The flake's nixosModules.default (nixos-module/ with the package set).
  module,
  # The boxmaker package: boxd, loopd, brokerd, boxctl.
  package,
  # fakellama, built from this repository alone (the package need not install it).
  fakellama ? pkgs.rustPlatform.buildRustPackage {
    pname = "fakellama";
    inherit (package) version;
    src = pkgs.lib.cleanSource ../..;
    cargoLock.lockFile = ../../Cargo.lock;
    cargoBuildFlags = [ "-p" "fakellama" "--bin" "fakellama" ];
    doCheck = false;
    meta.mainProgram = "fakellama";
  },
}:
let
  llamaServer = import ./fakellama-server.nix {
    inherit (pkgs) writeShellScriptBin;
    inherit fakellama;
    script = ./vm-fakellama.toml;
  };

  # write_file's root, made by the test script before the note task (under the state
  # directory: the one place ProtectSystem=strict leaves writable).
  files = "/var/lib/boxmaker/files";
in
pkgs.testers.runNixOSTest {
  name = "boxmaker-vm";

  nodes.box = {
    imports = [ module ];
    virtualisation.memorySize = 2048;
    virtualisation.cores = 2;
    services.boxmaker = {
      enable = true;
      inherit package;
      # fakellama reads no model: it reports this path (/props) and records it in slot files.
      model = "/var/lib/models/fakellama.gguf";
      llama.package = llamaServer;
      # write_file in the tools array, as the demo has it (docs/config.md, core_tools).
      loopd.settings.broker.core_tools = [ "read_file" "list_dir" "write_file" ];
      grants = [
        { tool = "clock"; sessions = [ "*" ]; }
        { tool = "write_file"; sessions = [ "vm-approve" ]; paths = [ files ]; approve = "always"; }
      ];
      schedules = [
        {
          name = "vm-tick";
          every = "20s";
          task = "The schedule's task (vm-schedule).";
          session = "vm-schedule";
          notify = "never";
        }
      ];
    };
    # An owner: the boxmaker group may use boxctl.
    users.users.alice = { isNormalUser = true; extraGroups = [ "boxmaker" ]; };
  };

  testScript = ''
    import json
    import shlex


    def boxctl(args):
        """boxctl as alice, an owner in the boxmaker group; fails the test when boxctl fails."""
        return box.succeed("su alice -c " + shlex.quote("boxctl " + args))


    def waiting_approval(session):
        """The id of the call of `session` that waits for the owner, or None."""
        for line in boxctl("approvals --json").splitlines():
            for approval in json.loads(line).get("approvals", []):
                if approval["session"] == session:
                    return approval["id"]
        return None


    def wait_for_boxd():
        # Type=notify: active once boxd has started llama-server, brokerd and loopd.
        box.wait_for_unit("boxmaker.service", timeout=300)
        box.wait_for_file("/run/boxmaker/loopd.sock")
        box.wait_until_succeeds("su alice -c 'boxctl status'", timeout=120)


    start_all()

    with subtest("boxd starts fakellama as llama-server, on its socket, then brokerd and loopd"):
        wait_for_boxd()
        box.succeed("pgrep -x fakellama")
        box.succeed("test -S /run/boxmaker/llama/llama.sock")
        box.succeed("pgrep -x brokerd")
        box.succeed("pgrep -x loopd")

    with subtest("a task with a tool call"):
        out = boxctl("task --session vm-clock " + shlex.quote("What time is it? (vm-clock)"))
        assert "→ clock" in out, out
        assert "VM-CLOCK-ANSWERED" in out, out

    with subtest("a task whose call waits for the owner's approval"):
        box.succeed("install -d -o boxmaker -g boxmaker -m 0750 ${files}")
        # The path in the owner's words: loopd runs write_file only on a path the owner gave
        # (loop.owner_paths_tools), and only then does brokerd ask for the approval.
        task = "boxctl task --session vm-approve " + shlex.quote("Save the note (vm-note) to the file ${files}/vm-note.txt and nothing else.")
        # In the background, its output in a file: it waits until the owner answers.
        box.succeed("su alice -c " + shlex.quote(task) + " </dev/null >/tmp/vm-approve.out 2>&1 &")
        box.wait_until_succeeds(
            "su alice -c 'boxctl approvals --json' | grep -q vm-approve", timeout=120
        )
        approval = waiting_approval("vm-approve")
        assert approval is not None, boxctl("approvals")
        box.fail("test -e ${files}/vm-note.txt")
        boxctl("approve " + shlex.quote(approval))
        box.wait_until_succeeds("grep -q VM-NOTE-SAVED /tmp/vm-approve.out", timeout=120)
        box.succeed("grep -qx 'approved in the VM' ${files}/vm-note.txt")

    with subtest("a schedule runs by itself"):
        box.wait_until_succeeds(
            "su alice -c 'boxctl show vm-schedule' | grep -q VM-SCHEDULE-RAN", timeout=180
        )
        assert "vm-tick" in boxctl("schedules")

    with subtest("the unit is hardened; a reload reaches brokerd, which stays up"):
        box.succeed("systemctl show boxmaker -p NoNewPrivileges | grep -q yes")
        # ExecReload: SIGHUP to boxd's child brokerd, which re-reads its secrets.
        brokerd = box.succeed("pgrep -x brokerd").strip()
        box.succeed("systemctl reload boxmaker")
        box.succeed("systemctl is-active boxmaker")
        assert box.succeed("pgrep -x brokerd").strip() == brokerd, "brokerd restarted on reload"

    with subtest("after a reboot the sessions are found"):
        box.shutdown()
        box.start()
        wait_for_boxd()
        sessions = boxctl("sessions")
        for session in ["vm-clock", "vm-approve", "vm-schedule"]:
            assert session in sessions, sessions
        assert "VM-CLOCK-ANSWERED" in boxctl("show vm-clock")
        assert "VM-NOTE-SAVED" in boxctl("show vm-approve")

    with subtest("a stop stops the model server too"):
        box.succeed("systemctl stop boxmaker")
        box.fail("pgrep -x fakellama")
  '';
}
