//! The `brokerd` binary: boxmaker's tool broker daemon.
//!
//! `brokerd --config FILE` runs the daemon; `--check-config FILE` checks a config.

use brokerd::config::{Config, ENV_PREFIX};
use bxconfig::{ConfigArgs, Loader, run_check_config};
use clap::Parser;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// brokerd, boxmaker's tool broker.
///
/// brokerd runs every tool call that loopd does not answer itself (built-in tools and MCP
/// servers) under explicit grants, labels every result with its class and trust, and records
/// every decision in an audit log (<state_dir>/audit.jsonl). `brokerd --config FILE` serves
/// HTTP on its Unix socket until SIGTERM or SIGINT; `brokerd --check-config FILE` prints the
/// resolved config as TOML (exit 0) or every problem (exit 1).
///
/// Config layers, lowest first: built-in defaults, the file, environment variables
/// BROKERD_SECTION__KEY (e.g. BROKERD_LIMITS__CALL_TIMEOUT_MS), the flags below.
/// See docs/config.md.
#[derive(Debug, Parser)]
#[command(name = "brokerd", version, verbatim_doc_comment)]
struct Cli {
    #[command(flatten)]
    config: ConfigArgs,
    /// brokerd's socket (overrides `socket`).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,
    /// Where the audit log and state live (overrides `state_dir`).
    #[arg(long, value_name = "DIR")]
    state_dir: Option<PathBuf>,
}

impl Cli {
    /// A loader for `file` with this process's environment and the override flags given.
    fn loader(&self, file: &Path) -> Loader {
        let mut loader = Loader::new(file, ENV_PREFIX).process_env();
        if let Some(socket) = &self.socket {
            loader = loader.flag("--socket", "socket", socket);
        }
        if let Some(dir) = &self.state_dir {
            loader = loader.flag("--state-dir", "state_dir", dir);
        }
        loader
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(file) = &cli.config.check_config {
        return run_check_config::<Config>(&cli.loader(file));
    }
    let Some(file) = &cli.config.config else {
        init_logging("info");
        tracing::error!("no config: start brokerd with --config FILE (see config/brokerd.toml)");
        return ExitCode::from(2);
    };
    let cfg = match cli.loader(file).load_valid::<Config>() {
        Ok(cfg) => cfg,
        Err(e) => {
            init_logging("info");
            for line in e.lines() {
                tracing::error!("{line}");
            }
            return ExitCode::from(1);
        }
    };
    init_logging(cfg.log.level.as_str());
    match brokerd::daemon::run(cfg) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::from(1)
        }
    }
}

/// Logs to stderr at `level` (the config's `[log] level`); `RUST_LOG`, when set, wins.
fn init_logging(level: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .init();
}
