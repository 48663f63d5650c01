//! What the brokerd benches share: a brokerd started detached (through a shell that exits at
//! once, so the bench is not its parent: its peer check reads the caller's `/proc` entry as it
//! reads loopd's under boxd), and the p50/p99 line.

// Each bench is its own crate and uses part of this.
#![allow(dead_code)]

use e2e::bin_dir;
use std::path::PathBuf;
use std::process::Command;
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
