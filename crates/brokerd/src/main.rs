//! The `brokerd` binary: boxmaker's tool broker daemon.
//!
//! `brokerd --config FILE` runs the daemon; `--check-config FILE` checks a config.

use brokerd::config::{Config, ENV_PREFIX};
use bxconfig::{ConfigArgs, Daemon, Loader, run_daemon};
use clap::Parser;
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
    let daemon = Daemon {
        name: "brokerd",
        loader: &|file| cli.loader(file),
        log_level: |cfg: &Config| cfg.log.level,
        init_logging: brokerd::logging::init,
    };
    run_daemon(&daemon, &cli.config, brokerd::daemon::run)
}
