//! systemd's notify protocol (`sd_notify`): `READY=1` and watchdog pings, sent as datagrams
//! to `NOTIFY_SOCKET` (a path, or an abstract name starting with '@').

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// The variables of systemd's protocols that belong to boxd and are never passed to a child.
pub const SYSTEMD_ENV: [&str; 3] = ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"];

/// Sends `state` (e.g. `READY=1`) to `NOTIFY_SOCKET`; `Ok(false)` when it is not set.
pub fn notify(state: &str) -> std::io::Result<bool> {
    let Some(target) = std::env::var_os("NOTIFY_SOCKET") else {
        return Ok(false);
    };
    let bytes = target.as_encoded_bytes();
    let socket = UnixDatagram::unbound()?;
    if let Some(name) = bytes.strip_prefix(b"@") {
        let addr = SocketAddr::from_abstract_name(name)?;
        socket.send_to_addr(state.as_bytes(), &addr)?;
    } else {
        socket.send_to(state.as_bytes(), &target)?;
    }
    Ok(true)
}

/// How often to send `WATCHDOG=1`: half of `WATCHDOG_USEC`, when it is set (and
/// `WATCHDOG_PID`, if set, is boxd's pid).
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}
