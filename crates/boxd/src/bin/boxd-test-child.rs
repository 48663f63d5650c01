//! A test helper, not part of the appliance: the stand-in child of boxd's tests.
//!
//! `boxd-test-child NAME LOG [OPTION...]` appends `NAME start PID` to LOG, then, as told:
//! `--socket PATH` listens on that Unix socket (boxd's readiness check), after
//! `--ready-after-ms N` (and appends `NAME listening PID`); `--config FILE` is ignored; `--crash-after-ms N` exits 3 after N milliseconds; `--ignore-term`
//! stays on SIGTERM (boxd must SIGKILL it). On SIGTERM it appends `NAME stop PID` and exits 0.
//! It also appends `NAME env VAR` for each of `NOTIFY_SOCKET`, `WATCHDOG_USEC` and
//! `WATCHDOG_PID` it was given. On stderr it logs, as the daemons do (`bxconfig::init_log`),
//! `NAME fails on purpose` at ERROR and `NAME warns on purpose` at WARN, then writes
//! `NAME says hello on stderr` as a plain line.

use anyhow::{Context, bail};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::signal::unix::{SignalKind, signal};

struct Options {
    name: String,
    log: PathBuf,
    socket: Option<PathBuf>,
    ready_after_ms: u64,
    crash_after_ms: Option<u64>,
    ignore_term: bool,
}

fn parse() -> anyhow::Result<Options> {
    let mut args = std::env::args().skip(1);
    let name = args
        .next()
        .context("usage: boxd-test-child NAME LOG [OPTION...]")?;
    let log = PathBuf::from(args.next().context("LOG is missing")?);
    let mut o = Options {
        name,
        log,
        socket: None,
        ready_after_ms: 0,
        crash_after_ms: None,
        ignore_term: false,
    };
    while let Some(arg) = args.next() {
        let mut value = || args.next().with_context(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--socket" => o.socket = Some(PathBuf::from(value()?)),
            "--ready-after-ms" => o.ready_after_ms = value()?.parse()?,
            "--crash-after-ms" => o.crash_after_ms = Some(value()?.parse()?),
            "--ignore-term" => o.ignore_term = true,
            "--config" => drop(value()?),
            other => bail!("unknown option {other}"),
        }
    }
    Ok(o)
}

fn append(log: &Path, line: &str) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    // One write of the whole line: with O_APPEND it lands whole even when another test child
    // (a grandchild) appends at the same moment, which `writeln!`'s several writes do not.
    f.write_all(format!("{line}\n").as_bytes())?;
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let o = parse()?;
    let pid = std::process::id();
    let mut term = signal(SignalKind::terminate())?;
    append(&o.log, &format!("{} start {pid}", o.name))?;
    for var in ["NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID"] {
        if std::env::var_os(var).is_some() {
            append(&o.log, &format!("{} env {var}", o.name))?;
        }
    }
    bxconfig::init_log("boxd-test-child", "info", bxconfig::every_target);
    tracing::error!("{} fails on purpose", o.name);
    tracing::warn!("{} warns on purpose", o.name);
    eprintln!("{} says hello on stderr", o.name);
    let _listener = match &o.socket {
        Some(path) => {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(o.ready_after_ms)) => {}
                _ = term.recv() => {
                    append(&o.log, &format!("{} stop {pid}", o.name))?;
                    return Ok(());
                }
            }
            let _ = std::fs::remove_file(path);
            let listener = tokio::net::UnixListener::bind(path)?;
            append(&o.log, &format!("{} listening {pid}", o.name))?;
            Some(listener)
        }
        None => None,
    };
    let crash = async {
        match o.crash_after_ms {
            Some(ms) => tokio::time::sleep(Duration::from_millis(ms)).await,
            None => std::future::pending().await,
        }
    };
    tokio::pin!(crash);
    loop {
        tokio::select! {
            _ = &mut crash => {
                append(&o.log, &format!("{} crash {pid}", o.name))?;
                std::process::exit(3);
            }
            _ = term.recv() => {
                if o.ignore_term {
                    append(&o.log, &format!("{} ignores-term {pid}", o.name))?;
                } else {
                    append(&o.log, &format!("{} stop {pid}", o.name))?;
                    return Ok(());
                }
            }
        }
    }
}
