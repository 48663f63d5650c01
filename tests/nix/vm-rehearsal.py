"""The VM test's own script (tests/nix/vm-test.nix), run here against the debug build.

No VM and no systemd here: boxd runs as this user with the configs the module rendered for the
VM test's node (tests/nix/eval-vm.nix), moved under WORK (/run/boxmaker to WORK/run,
/var/lib/boxmaker to WORK/state), llama-server being fakellama's wrapper
(tests/nix/fakellama-server.nix) with the test's script. A stand-in `box` runs the test
script's commands with the same paths moved, and stands in for systemd where the script asks
it: the unit is active once boxd sends READY=1 to a NOTIFY_SOCKET of ours, `reload` is the
unit's ExecReload (SIGHUP to boxd's child brokerd), `stop` and `shutdown` stop boxd (and empty
WORK/run, as a reboot empties /run), `pgrep -x NAME` looks among boxd's own processes. What
only a VM shows (the unit's hardening, su to another user, the group) is skipped, loudly.
Run by tests/nix/vm-check.sh: python3 vm-rehearsal.py VM_JSON BINS WORK (eval-vm.nix's output,
the debug build's directory, an empty directory to use).
"""

import hashlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager

# The most the test script's waits may take here, whatever they ask, in seconds: a bound on
# a wedged stack, not a pace.
WAIT_LIMIT_S = 120
# Between two tries of a wait_until_succeeds, in seconds (the NixOS driver waits 1 s).
RETRY_PAUSE_S = 0.2
# How long boxd may take to stop (loopd's grace is 30 s), in seconds.
STOP_LIMIT_S = 60

vm = json.load(open(sys.argv[1]))
bins, work = os.path.abspath(sys.argv[2]), os.path.abspath(sys.argv[3])
run, state = os.path.join(work, "run"), os.path.join(work, "state")
moved = [
    ("/run/boxmaker", run),
    ("/var/lib/boxmaker", state),
    ("/tmp/vm-approve.out", os.path.join(work, "vm-approve.out")),
]


def move(text):
    for old, new in moved:
        text = text.replace(old, new)
    return text


def local(text):
    """A config of the node for here: paths moved, and no boxmaker group for the sockets
    (there is none here: this user's own group)."""
    return move(text).replace('socket_group = "boxmaker"\n', "")


def sha256(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def write(path, text, mode=0o644):
    with open(path, "w") as f:
        f.write(text)
    os.chmod(path, mode)
    return path


def lay_out():
    """The node's configs, start script, wrapper and fakellama script, moved under WORK."""
    etc = os.path.join(work, "etc")
    os.makedirs(etc)
    script = vm["configScript"]
    loopd = re.search(r"loopd --check-config (\S+)", script).group(1)
    brokerd = re.search(r"brokerd --check-config (\S+)", script).group(1)
    boxd_in = re.search(r"(\S+boxd\.toml\.in) >", script).group(1)
    boxd = open(boxd_in).read()

    # The wrapper runs a copy of fakellama's script with the paths moved.
    fake_script = re.search(r"--script (\S+)", vm["wrapper"]).group(1)
    moved_script = write(os.path.join(etc, "vm-fakellama.toml"), move(open(fake_script).read()))
    wrapper_dir = os.path.join(work, "llama", "bin")
    os.makedirs(wrapper_dir)
    wrapper = write(
        os.path.join(wrapper_dir, "llama-server"),
        "#!/usr/bin/env bash\n" + vm["wrapper"].replace(fake_script, moved_script),
        0o755,
    )
    # The module's start script removes a stale socket, then execs llama.package's binary.
    start_in = re.search(r'command = "(\S+)"', boxd).group(1)
    start = open(start_in).read()
    start, execs = re.subn(r"exec \S+/bin/llama-server", "exec " + wrapper, start)
    assert execs == 1, f"rehearsal: the start script does not exec llama-server:\n{start}"
    start_out = write(os.path.join(etc, "llama-start"), move(start), 0o755)

    files = {loopd: "loopd.toml", brokerd: "brokerd.toml"}
    for src, name in files.items():
        dst = write(os.path.join(etc, name), local(open(src).read()))
        boxd = boxd.replace(src, dst)
        pin = "@LOOPD_SHA256@" if name == "loopd.toml" else "@BROKERD_SHA256@"
        boxd = boxd.replace(pin, sha256(dst))
    boxd = boxd.replace(start_in, start_out)
    # boxd's lock and record of its children: the unit's RuntimeDirectory there.
    boxd = f'runtime_dir = "{run}"\n' + local(boxd)
    return write(os.path.join(etc, "boxd.toml"), boxd)


class Box:
    """The VM's machine as the test script sees it, over boxd run here."""

    def __init__(self, config):
        self.config = config
        self.boxd = None
        self.notify = None
        self.last_stderr = ""
        # boxd's descendants when it was last stopped: pid -> name.
        self.stopped = {}
        # The process groups of the boxd processes started (each leads its own).
        self.groups = []
        self.env = dict(os.environ, PATH=bins + ":" + os.environ["PATH"],
                        BOXCTL_SOCKET=os.path.join(run, "loopd.sock"))

    # What systemd does for the unit.
    def _start(self):
        for d in ["loopd/kv", "brokerd"]:
            os.makedirs(os.path.join(state, d), exist_ok=True)
        os.makedirs(os.path.join(run, "llama"), exist_ok=True)
        os.chmod(os.path.join(run, "llama"), 0o700)
        os.chmod(os.path.join(state, "loopd/kv"), 0o700)
        path = os.path.join(work, "notify.sock")
        if os.path.exists(path):
            os.unlink(path)
        self.notify = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.notify.bind(path)
        self.notify.settimeout(WAIT_LIMIT_S)
        log = open(os.path.join(work, "boxd.log"), "a")
        self.boxd = subprocess.Popen(
            [os.path.join(bins, "boxd"), "--config", self.config],
            env=dict(self.env, NOTIFY_SOCKET=path), cwd=state, stdin=subprocess.DEVNULL,
            stdout=log, stderr=log, start_new_session=True)
        self.groups.append(self.boxd.pid)
        deadline = time.monotonic() + WAIT_LIMIT_S
        while time.monotonic() < deadline:
            try:
                message = self.notify.recv(4096).decode()
            except socket.timeout:
                break
            if "READY=1" in message.split("\n"):
                return
        self._fail("boxd sent no READY=1")

    def _stop(self):
        if self.boxd is not None:
            self.stopped = self._descendants()
            self.boxd.terminate()
            self.boxd.wait(timeout=STOP_LIMIT_S)
            self.boxd = None
            self.notify.close()

    def close(self):
        """Stops boxd, then kills what is left of each process group a boxd of ours led
        (boxd stops its children itself: anything left is a leak the test would see)."""
        self._stop()
        for group in self.groups:
            try:
                os.killpg(group, signal.SIGKILL)
            except ProcessLookupError:
                pass

    def _fail(self, why):
        log = open(os.path.join(work, "boxd.log")).read()[-4000:]
        raise AssertionError(f"rehearsal: {why}; boxd's log ends:\n{log}")

    @staticmethod
    def _table():
        """Every process now: pid -> (parent, name)."""
        table = {}
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                stat = open(f"/proc/{pid}/stat").read()
            except OSError:
                continue
            name = stat[stat.index("(") + 1:stat.rindex(")")]
            table[int(pid)] = (int(stat[stat.rindex(")") + 2:].split()[1]), name)
        return table

    def _descendants(self):
        """boxd's descendants now: pid -> name (none once boxd is stopped)."""
        if self.boxd is None:
            return {}
        table = self._table()
        found = {}
        for pid, (_, name) in table.items():
            p = pid
            while p in table and p > 1 and p != self.boxd.pid:
                p = table[p][0]
            if p == self.boxd.pid and pid != p:
                found[pid] = name
        return found

    def _processes(self, name):
        """The pids of boxd's descendants named `name`; with boxd stopped, those of its
        descendants at the stop that are still there."""
        if self.boxd is not None:
            return [p for p, n in self._descendants().items() if n == name]
        table = self._table()
        return [p for p, n in self.stopped.items() if n == name and table.get(p, (0, None))[1] == name]

    def execute(self, command):
        pgrep = re.fullmatch(r"pgrep -x (\S+)", command)
        if pgrep:
            pids = self._processes(pgrep.group(1))
            return (0 if pids else 1), "".join(f"{p}\n" for p in pids)
        if command == "systemctl reload boxmaker":
            for pid in self._processes("brokerd"):
                os.kill(pid, signal.SIGHUP)
            return 0, ""
        if command == "systemctl is-active boxmaker":
            return (0 if self.boxd is not None and self.boxd.poll() is None else 3), ""
        if command == "systemctl stop boxmaker":
            self._stop()
            return 0, ""
        if command.startswith("systemctl show boxmaker -p NoNewPrivileges"):
            print("rehearsal: skipped (the unit's hardening needs systemd):", command)
            return 0, ""
        command = move(command).replace("su alice -c ", "bash -c ")
        command = command.replace("install -d -o boxmaker -g boxmaker ", "install -d ")
        done = subprocess.run(["bash", "-c", command], env=self.env, cwd=work,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.last_stderr = done.stderr
        return done.returncode, done.stdout

    def succeed(self, command):
        rc, out = self.execute(command)
        if rc != 0:
            self._fail(f"command failed ({rc}): {command}\n{out}{self.last_stderr}")
        return out

    def fail(self, command):
        rc, out = self.execute(command)
        if rc == 0:
            self._fail(f"command succeeded: {command}\n{out}")
        return out

    def wait_until_succeeds(self, command, timeout=WAIT_LIMIT_S):
        deadline = time.monotonic() + min(timeout, WAIT_LIMIT_S)
        while True:
            rc, out = self.execute(command)
            if rc == 0:
                return out
            if time.monotonic() > deadline:
                self._fail(f"did not succeed in time: {command}\n{out}{self.last_stderr}")
            time.sleep(RETRY_PAUSE_S)

    def wait_for_unit(self, unit, timeout=WAIT_LIMIT_S):
        assert unit == "boxmaker.service", unit
        if self.boxd is None:
            self._start()

    def wait_for_file(self, path, timeout=WAIT_LIMIT_S):
        self.wait_until_succeeds("test -e " + shlex.quote(path), timeout)

    def shutdown(self):
        self._stop()
        shutil.rmtree(run)
        os.makedirs(run)

    def start(self):
        pass


box = Box(lay_out())


@contextmanager
def subtest(name):
    print("rehearsal: subtest:", name, flush=True)
    yield


def start_all():
    pass


try:
    exec(compile(vm["testScript"], "testScript", "exec"), {"box": box, "subtest": subtest, "start_all": start_all})
finally:
    box.close()
print("rehearsal: the VM test's script passed here", flush=True)
