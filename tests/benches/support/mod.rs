//! What the brokerd benches share: a brokerd started detached (through a shell that exits at
//! once, so the bench is not its parent: its peer check reads the caller's `/proc` entry as it
//! reads loopd's under boxd), and the p50/p99 line.

// Each bench is its own crate and uses part of this.
#![allow(dead_code)]

use e2e::bin_dir;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long brokerd may take to serve its socket.
const START_WAIT: Duration = Duration::from_secs(20);

/// A process this bench started but is not the parent of; killed when dropped.
pub struct Detached(pub u32);

impl Drop for Detached {
    fn drop(&mut self) {
        let _ = Command::new("kill").arg(self.0.to_string()).status();
    }
}

/// A running brokerd: its directory (config, state), socket and process.
pub struct Brokerd {
    _dir: tempfile::TempDir,
    /// Its socket.
    pub socket: PathBuf,
    /// The process, killed when this is dropped.
    pub process: Detached,
}

/// Starts the release `brokerd` with `grants` (TOML `[[grants]]` tables) and waits, bounded,
/// until its socket answers. `needs` names the other binaries the bench needs beside it (for
/// the message when they are missing), `build` the command that builds them.
pub fn start_brokerd(grants: &str, needs: &[&str], build: &str) -> Brokerd {
    let brokerd = bin_dir().join("brokerd");
    for name in std::iter::once("brokerd").chain(needs.iter().copied()) {
        let path = bin_dir().join(name);
        assert!(
            path.is_file(),
            "{} is missing: run `{build}` first",
            path.display()
        );
    }
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("brokerd.sock");
    let config = dir.path().join("brokerd.toml");
    let state = dir.path().join("state");
    std::fs::write(
        &config,
        format!("socket = {socket:?}\nstate_dir = {state:?}\n{grants}"),
    )
    .unwrap();
    let started = Command::new("sh")
        .arg("-c")
        .arg("\"$0\" --config \"$1\" >/dev/null 2>&1 </dev/null & echo $!")
        .arg(&brokerd)
        .arg(&config)
        .env("RUST_LOG", "warn")
        .output()
        .unwrap();
    let pid: u32 = String::from_utf8_lossy(&started.stdout)
        .trim()
        .parse()
        .unwrap();
    let process = Detached(pid);
    let deadline = Instant::now() + START_WAIT;
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(Instant::now() < deadline, "brokerd did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    Brokerd {
        _dir: dir,
        socket,
        process,
    }
}

/// Prints `name: n=N p50=… p99=…` for `samples`.
pub fn report(name: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let at = |p: f64| samples[((samples.len() - 1) as f64 * p).round() as usize];
    println!(
        "{name}: n={} p50={:?} p99={:?}",
        samples.len(),
        at(0.5),
        at(0.99)
    );
}

/// A binary of the release build, or of `$BOXMAKER_BIN_DIR` when set (to compare two
/// builds on one machine); panics with the build command when it is missing.
pub fn release(name: &str) -> PathBuf {
    let dir = std::env::var_os("BOXMAKER_BIN_DIR").map_or_else(bin_dir, PathBuf::from);
    let path = dir.join(name);
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --release -p brokerd -p loopd -p boxctl -p fakellama \
         -p bxsandbox --bins` first",
        path.display()
    );
    path
}

/// fakellama on a free loopback port, answering every call with a short text; its URL.
pub fn fakellama(dir: &Path) -> (Child, String) {
    let (child, addr) = fakellama_on(dir, "127.0.0.1:0");
    (child, format!("http://{addr}"))
}

/// fakellama on a Unix socket in `dir`, answering every call with a short text; its URL.
pub fn fakellama_on_socket(dir: &Path) -> (Child, String) {
    let socket = dir.join("llama.sock");
    let (child, _) = fakellama_on(dir, &socket.to_string_lossy());
    (child, format!("unix:{}", socket.display()))
}

/// fakellama listening on `listen`, its script in `dir`; the address it says it is on.
fn fakellama_on(dir: &Path, listen: &str) -> (Child, String) {
    let script = dir.join("script.toml");
    std::fs::write(&script, "default_reply = \"ok\"\n").unwrap();
    let mut child = Command::new(release("fakellama"))
        .args(["--listen", listen, "--script"])
        .arg(&script)
        .env("RUST_LOG", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let addr = line
        .trim()
        .strip_prefix("fakellama listening on ")
        .unwrap_or_else(|| panic!("fakellama said {line:?}"))
        .to_string();
    (child, addr)
}

/// The resident memory of process `pid` (`VmRSS`), in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    status_kib(pid, "VmRSS:")
}

/// A field of `/proc/PID/status` given in KiB (`VmRSS:`, `VmHWM:`).
pub fn status_kib(pid: u32, field: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Prints `name: n=N p50=… KiB max=… KiB` for `samples`.
pub fn report_kib(name: &str, mut samples: Vec<u64>) {
    samples.sort();
    println!(
        "{name}: n={} p50={} KiB max={} KiB",
        samples.len(),
        samples[samples.len() / 2],
        samples[samples.len() - 1]
    );
}

/// How often a socket is tried while a daemon starts, in microseconds.
pub const POLL_US: u64 = 100;
/// The longest a daemon may take to serve, or a task to end.
pub const LIMIT: Duration = Duration::from_secs(20);

/// Starts `command` and waits until `socket` accepts; the child and how long that took.
pub fn start_until(command: Command, socket: &Path) -> (Child, Duration) {
    let started = Instant::now();
    let mut child = spawn_quiet(command, socket);
    wait_serving(&mut child, socket, started);
    (child, started.elapsed())
}

/// Starts `command` (its output dropped, `RUST_LOG=warn`), once a stale `socket` is removed.
pub fn spawn_quiet(mut command: Command, socket: &Path) -> Child {
    let _ = std::fs::remove_file(socket);
    command
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap()
}

/// Polls `socket` every `POLL_US` until it accepts; panics when `child` exits first or
/// `LIMIT` passes from `started`.
pub fn wait_serving(child: &mut Child, socket: &Path, started: Instant) {
    while std::os::unix::net::UnixStream::connect(socket).is_err() {
        assert!(child.try_wait().unwrap().is_none(), "{child:?} exited");
        assert!(started.elapsed() < LIMIT, "{child:?} did not serve");
        std::thread::sleep(Duration::from_micros(POLL_US));
    }
}

/// SIGTERM to `child`, and waits for it.
pub fn stop(mut child: Child) {
    let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
    let _ = child.wait();
}

/// `boxctl --socket SOCKET task ARGS...` (the release build); panics with boxctl's words
/// when it fails.
pub fn boxctl_task(socket: &Path, args: &[&str]) {
    let out = Command::new(release("boxctl"))
        .arg("--socket")
        .arg(socket)
        .arg("task")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
