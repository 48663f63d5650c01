//! llama.cpp's RPC worker, `rpc-server`, for the tests that split a model across one
//! (docs/scale-out.md): its binary comes from `scripts/fetch-parts.sh`, built with
//! llama-server, and is named by `RPC_SERVER`.

use crate::real::REQUIRE_ENV;
use crate::{READY_TIMEOUT_MS, Running};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// What rpc-server prints (and flushes) on stdout each time a client connects.
pub const ACCEPTED_LINE: &str = "Accepted client connection";

/// The worker named by `RPC_SERVER`; `None` (with a note on stderr) when it is not set, unless
/// [`REQUIRE_ENV`] is `1`, which makes it a panic.
pub fn rpc_server_from_env() -> Option<PathBuf> {
    let found = std::env::var_os("RPC_SERVER")
        .map(PathBuf::from)
        .filter(|p| p.is_file());
    if found.is_none() {
        let why = "RPC_SERVER must name llama.cpp's rpc-server: run \
                   `eval \"$(scripts/fetch-parts.sh --print-paths)\"` first (scripts/test.sh does)";
        assert!(std::env::var(REQUIRE_ENV).as_deref() != Ok("1"), "{why}");
        eprintln!("skipping an RPC test: {why}");
    }
    found
}

/// A running rpc-server on a free loopback port, CPU backend.
pub struct RpcServer {
    /// The process; its stdout lines (one [`ACCEPTED_LINE`] per client) can be waited for.
    pub running: Running,
    /// The port it listens on, on 127.0.0.1.
    pub port: u16,
}

impl RpcServer {
    /// Starts `server --host 127.0.0.1 --port P --threads THREADS` and waits (at most
    /// [`READY_TIMEOUT_MS`]) until it listens. Waiting connects nothing: a probe would be a
    /// client of the worker, which serves one at a time and logs each, so the kernel's socket
    /// table says when it listens.
    pub fn start(server: &Path, threads: u32) -> std::io::Result<RpcServer> {
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let mut command = Command::new(server);
        command.args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--threads",
            &threads.to_string(),
        ]);
        let mut running = Running::start(command)?;
        let deadline = Instant::now() + Duration::from_millis(READY_TIMEOUT_MS);
        while !listens(&std::fs::read_to_string("/proc/net/tcp")?, port) {
            if let Some(status) = running.exited() {
                return Err(std::io::Error::other(format!(
                    "rpc-server exited: {status}"
                )));
            }
            if Instant::now() > deadline {
                return Err(std::io::Error::other(format!(
                    "rpc-server did not listen on 127.0.0.1:{port} within {READY_TIMEOUT_MS} ms"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(RpcServer { running, port })
    }

    /// `127.0.0.1:PORT`, as llama-server's `--rpc` takes it.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }
}

/// Whether `table` (the text of `/proc/net/tcp`) has a socket listening (state `0A`) on `port`.
fn listens(table: &str, port: u16) -> bool {
    let want = format!("{port:04X}");
    table.lines().skip(1).any(|line| {
        let mut fields = line.split_whitespace().skip(1);
        let local_port = fields.next().and_then(|local| local.rsplit(':').next());
        let state = fields.nth(1);
        local_port == Some(want.as_str()) && state == Some("0A")
    })
}

#[cfg(test)]
mod tests {
    use super::listens;

    const TABLE: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:C351 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1 1 0 100 0 0 10 0
   1: 0100007F:1F90 0100007F:D2A4 01 00000000:00000000 00:00000000 00000000     0        0 2 1 0 20 4 30 10 -1
";

    #[test]
    fn a_listening_socket_is_found_by_its_port_and_state() {
        assert!(listens(TABLE, 0xC351));
        // Port 8080 only has an established connection, and 50053 nothing.
        assert!(!listens(TABLE, 0x1F90));
        assert!(!listens(TABLE, 0xC352));
        assert!(!listens("", 0xC351));
    }
}
